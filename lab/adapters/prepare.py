"""The adapters a notebook run serves, and the base they are checked against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.errors import AdapterError
from helpers.paths import out_dir
from lab.adapters.serving import served
from lab.adapters.synthetic import random_adapter
from lab.adapters.train import build_adapters


def check_adapters_parameter(adapters: Any) -> None:
    """The notebook's ``adapters`` parameter: None, or a non-empty ``{served name: peft
    folder}`` of strings (papermill passes ``-p adapters foo`` as the string ``"foo"`` and
    ``-p adapters {}`` as an empty dict; either would fail cells later, after a launch).

    Raises:
        AdapterError: naming the value and how to pass it.
    """
    how = ("""-p adapters '{"mine": "/path/to/peft/folder"}' (python -m tools.notebooks run), """
           """or None for the stand-in's trained adapters (random ones of the real shapes on a GPU)""")  # fmt: skip
    if adapters is None:
        return
    if not isinstance(adapters, dict):
        raise AdapterError(f"adapters = {adapters!r:.80} ({type(adapters).__name__}) must be a dict "
                           f"{{served name: peft folder}}; pass e.g. {how}.")  # fmt: skip
    if not adapters:
        raise AdapterError(f"adapters = {{}} serves no adapter: the notebook needs at least one; "
                           f"pass e.g. {how}.")  # fmt: skip
    bad = [f"{k!r}: {v!r}" for k, v in adapters.items()
           if not isinstance(k, str) or not k or not isinstance(v, (str, Path))]  # fmt: skip
    if bad:
        raise AdapterError(f"adapters holds {', '.join(bad)}: each entry is a served name (a "
                           f"non-empty string) and the adapter's folder (a string); pass e.g. {how}.")  # fmt: skip


def base_folder(run: Any) -> str | None:
    """The folder of the base ``run`` serves, for the adapters' shape check: an attached
    server's (``/v1/models``: the base's ``root``) when it is a folder on this machine holding
    ``config.json``, else None (a Hugging Face id, or a path on the server's machine: a line says
    the module and shape checks are skipped and why); the fetched checkpoint's otherwise (the
    stand-in's, the weightless architecture's, the download)."""
    if not run.attached:
        return str(run.config.model)
    root = next(card["root"] for card in served(run.server_url) if card["parent"] is None)
    if (Path(root) / "config.json").is_file():
        return root
    print(f"the attached server's base is {root!r}, not a folder with config.json on this machine "
          "(a Hugging Face id, or a path on the server's machine): the adapters' modules and "
          "shapes are not checked here, only their adapter_config.json; to check them, copy the "
          "base's config.json here and pass its folder to check_adapter.")  # fmt: skip
    return None


def run_adapters(
    run: Any, base: str | Path | None, adapters: dict[str, Any] | None = None
) -> dict[str, Path]:
    """``{served name: folder}`` for ``run``: ``adapters`` as given; else, on the stand-in, the
    registry's adapters trained on ``base`` (:func:`lab.adapters.train.build_adapters`, a line
    each: what it learned and its loss); else two adapters of ``base``'s real shapes with
    random weights, ranks 8 and 32 (:func:`lab.adapters.synthetic.random_adapter`).

    Raises:
        AdapterError: no ``adapters`` and no local ``base`` to build them on (an attached
            server's base elsewhere): pass ``adapters``.
    """
    if adapters is not None:
        return {name: Path(folder) for name, folder in adapters.items()}
    if base is None:
        raise AdapterError(
            "no adapters given and the base is not on this machine, so none can be trained or "
            "made of its shapes; fix: pass adapters={'name': '/path/to/peft/folder'} (folders "
            "the attached server can read)."
        )
    if run.stand_in:
        built = build_adapters(base=Path(base))
        for name, folder in built.items():
            meta = json.loads((folder / "adapter.json").read_text())
            print(
                f"{name}: {meta['teaches']}: loss {meta['first_loss']:.2f} -> {meta['final_loss']:.4f}"
            )
        return built
    return {
        f"random-r{r}": random_adapter(base, out_dir("adapters", f"random-r{r}"), rank=r)
        for r in (8, 32)
    }
