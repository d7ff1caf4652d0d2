"""The GPU's weightless mode, rehearsed on the CPU: the stand-in's architecture untrained
(random weights, so the text is noise) with the weightless mode's own tokenizer
(:mod:`helpers.weights.weightless_tokenizer`), served by the real vLLM CPU build.

A notebook attached to it with ``stand_in = False, weightless = True`` takes the GPU's
weightless defaults (``helpers.config.run``) and meets what a GPU run meets after the launch:
noise text, reasoning that may never close, a tokenizer that is not the model's. Only the
sizes the CPU cannot carry are cut, by the tests that use it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from helpers.standin.build import build_standin_model, file_manifest
from helpers.standin.train import RECIPE
from helpers.weights.weightless_tokenizer import write_tokenizer

#: The stand-in's max_model_len (its chat template and KV cache are sized for it).
MAX_LEN = 2048


def build_noise_model(parent: Path) -> Path:
    """Write the untrained stand-in with the weightless tokenizer under ``parent`` (about 6 s)
    and return its folder (serve it with ``resolve("cpu").with_model(folder)``)."""
    folder = build_standin_model(
        out=parent, recipe=dataclasses.replace(RECIPE, steps=0), progress=False
    )
    config = json.loads((folder / "config.json").read_text())
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (folder / name).unlink(missing_ok=True)
    write_tokenizer(folder, int(config["vocab_size"]), MAX_LEN)
    meta_path = folder / "standin.json"
    meta = json.loads(meta_path.read_text())
    meta["tokenizer"] = "weightless (helpers.weights.weightless_tokenizer)"
    meta["files"] = file_manifest(folder)  # the stand-in's own check reads the new files
    meta_path.write_text(json.dumps(meta, indent=2))
    return folder
