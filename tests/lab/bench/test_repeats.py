"""lab.bench.repeats: the arguments of repeated points, checked before any server starts."""

from __future__ import annotations

import pytest

from helpers import errors
from helpers.paths import REPO_ROOT
from lab.bench import repeats

NOTEBOOK = REPO_ROOT / "notebooks" / "speculative_decoding.ipynb"


def test_repeat_point_names_a_missing_concurrency():
    with pytest.raises(errors.BenchError, match="concurrency=None"):
        repeats.repeat_point("http://127.0.0.1:9", "m", "t")


def test_repeats_below_two_are_refused_before_any_server_starts():
    """The notebook checks ``repeats`` in its first code step: a value that cannot measure a
    spread fails there, not after a GPU server start of minutes (seen on the H200: the first
    run with repeats=1 failed only after the 261 s start of the first mode)."""
    assert repeats.check_repeats(2) == 2
    for bad in (1, 0, True, 2.5, "3"):
        with pytest.raises(errors.BenchError, match="repeats=.*2 or more"):
            repeats.check_repeats(bad)
    source = NOTEBOOK.read_text()
    assert source.index("check_repeats(repeats)") < source.index("launch_server(")
