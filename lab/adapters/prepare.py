"""The adapters a notebook run serves, and the base they are checked against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.paths import out_dir
from lab.adapters.serving import served
from lab.adapters.synthetic import random_adapter
from lab.adapters.train import build_adapters


def base_folder(run: Any) -> str:
    """The folder of the base ``run`` serves: an attached server's (``/v1/models``: the base's
    ``root``, a folder on this machine for a local server), else the fetched checkpoint's (the
    stand-in's, the weightless architecture's, the download)."""
    if run.attached:
        return next(card["root"] for card in served(run.server_url) if card["parent"] is None)
    return str(run.config.model)


def run_adapters(
    run: Any, base: str | Path, adapters: dict[str, Any] | None = None
) -> dict[str, Path]:
    """``{served name: folder}`` for ``run``: ``adapters`` as given; else, on the stand-in, the
    registry's adapters trained on ``base`` (:func:`lab.adapters.train.build_adapters`, a line
    each: what it learned and its loss); else two adapters of ``base``'s real shapes with
    random weights, ranks 8 and 32 (:func:`lab.adapters.synthetic.random_adapter`)."""
    if adapters is not None:
        return {name: Path(folder) for name, folder in adapters.items()}
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
