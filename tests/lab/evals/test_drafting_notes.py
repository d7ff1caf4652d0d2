"""Every registry drafting mode that vLLM runs with async scheduling says, with its command,
that vLLM 0.32.0 and 0.33.0 can hand one request another's accepted-token count (vllm #53912)
and names ``--no-async-scheduling``, the correctness switch.

Which modes: those whose method the installed vLLM (0.32.0) turns async scheduling on for by
default (``VllmConfig``, ``vllm/config/vllm.py``: EAGLE / MTP / DFlash types, n-gram on the GPU,
draft models, DSpark), read from vLLM's own ``EagleModelTypes`` and ``NgramGPUTypes``.
"""

from __future__ import annotations

from typing import get_args

import pytest

from helpers.config.load import load_registry

pytestmark = pytest.mark.server  # reads the installed vLLM


def _async_by_default(method: str) -> bool:
    from vllm.config.speculative import EagleModelTypes, NgramGPUTypes

    return method in (*get_args(EagleModelTypes), *get_args(NgramGPUTypes), "draft_model", "dspark")


def test_each_drafting_mode_run_with_async_scheduling_names_the_correctness_switch(capsys):
    reg = load_registry()
    drafting = {
        name: mode
        for name, mode in reg.speculative.items()
        if mode.config is not None and _async_by_default(mode.config.model_dump()["method"])
    }
    assert set(drafting) >= {"mtp", "dflash", "dspark"}
    for name, mode in drafting.items():
        said = " ".join(mode.notes)
        assert "vLLM 0.32.0 and 0.33.0" in said and "vllm #53912" in said, name
        assert "add --no-async-scheduling, the correctness switch" in said, name
        assert "0.34.0 has no V1 GPU runner" in said, name
    # n-gram on the CPU build runs without async scheduling: no such note
    assert not any("--no-async-scheduling" in n for n in reg.speculative["ngram"].notes)


def test_the_speculative_notebook_prints_a_modes_notes_with_its_command():
    """The notebook's step 2 cell prints each drafting mode's command, then its notes."""
    import json

    from tests.support import TESTS

    nb = json.loads((TESTS.parent / "notebooks" / "speculative_decoding.ipynb").read_text())
    cell = next(
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "code" and "weightless_cfg.shell_command()" in "".join(c["source"])
    )
    command = cell.index("print(weightless_cfg.shell_command())")
    assert cell.index("for note in reg.speculative[m].notes:") > command
    assert 'print("note:", note)' in cell
