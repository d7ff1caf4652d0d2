"""Adapters made wrong on purpose, each from a good peft folder, for the failures the notebook
and the tests name: a rank above ``--max-lora-rank``, a target module this model lacks, and
an adapter trained for another base (other tensor shapes), and two peft features vLLM does
not serve (DoRA, a head in ``modules_to_save``). Real peft folders
(``adapter_config.json`` + ``adapter_model.safetensors``) that vLLM loads or refuses as it
would a user's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

#: The kinds :func:`faulty_adapter` makes, with what is wrong in each.
FAULTS = {
    "rank": "a rank above the served --max-lora-rank (r in adapter_config.json and every tensor)",
    "target": "a LoRA on gate_proj, a gated-MLP projection Nemotron-H does not have (its MLP is up/down)",
    "base": "trained for a wider base (hidden size 256): every lora_A / lora_B has twice the width",
    "base-narrow": "trained for a narrower base (hidden size 64): every lora_A / lora_B has half the width",
    "dora": "a DoRA adapter (use_dora: true in adapter_config.json), which vLLM 0.32.0 does not serve",
    "head-saved": 'modules_to_save: ["lm_head"] (a whole head saved beside the LoRA), which vLLM 0.32.0 refuses',
}


def faulty_adapter(good: str | Path, kind: str, dest: str | Path, *, rank: int = 16) -> Path:
    """Copy the adapter ``good`` to ``dest`` and break it as :data:`FAULTS` ``[kind]`` says.

    Args:
        good: a peft LoRA folder (e.g. :func:`lab.adapters.train.build_adapter`'s).
        kind: a key of :data:`FAULTS`.
        dest: the new folder (replaced when it exists).
        rank: the ``rank`` fault's r, above the served ``--max-lora-rank`` (16: above the
            stand-in's 8; :func:`rank_above` gives the next value vLLM accepts).
    Returns:
        ``dest``.
    Raises:
        ValueError: ``kind`` is not one of :data:`FAULTS` (the message lists them).
    """
    import torch
    from safetensors.torch import load_file, save_file

    if kind not in FAULTS:
        raise ValueError(f"faulty_adapter: kind {kind!r} is not one of {sorted(FAULTS)}.")
    good, dest = Path(good), Path(dest)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    config = json.loads((good / "adapter_config.json").read_text())
    tensors = load_file(good / "adapter_model.safetensors")
    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.01).to(torch.float32)

    if kind == "rank":
        config["r"] = rank
        tensors = {
            k: rand(rank, v.shape[1]) if ".lora_A." in k else rand(v.shape[0], rank)
            for k, v in tensors.items()
        }
    elif kind == "target":
        up = next(k for k in tensors if ".up_proj.lora_A." in k)
        r = tensors[up].shape[0]
        tensors[up.replace("up_proj", "gate_proj")] = rand(r, tensors[up].shape[1])
        b = up.replace("lora_A", "lora_B")
        tensors[b.replace("up_proj", "gate_proj")] = rand(tensors[b].shape[0], r)
        config["target_modules"] = sorted({*config["target_modules"], "gate_proj"})
    elif kind in ("dora", "head-saved"):  # the tensors stay; adapter_config.json says it
        config.update({"use_dora": True} if kind == "dora" else {"modules_to_save": ["lm_head"]})
    else:  # another base: the same names, every width (not the rank) doubled or halved
        wider = kind == "base"
        config["base_model_name_or_path"] = f"another-nemotron-h-hidden-{256 if wider else 64}"
        tensors = {
            k: rand(*((d * 2 if wider else d // 2) if d > 16 else d for d in v.shape))
            for k, v in tensors.items()
        }
    save_file(tensors, dest / "adapter_model.safetensors")
    (dest / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    return dest


def rank_above(max_lora_rank: int) -> int:
    """The next ``--max-lora-rank`` vLLM accepts above ``max_lora_rank`` (the ``rank`` fault's
    r: a rank the served limit refuses on any target, 64 on a GPU's 32), or twice it above
    the largest (:data:`lab.adapters.check.MAX_LORA_RANKS`)."""
    from lab.adapters.check import MAX_LORA_RANKS

    return next((r for r in MAX_LORA_RANKS if r > max_lora_rank), 2 * max_lora_rank)
