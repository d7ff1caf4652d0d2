"""A LoRA adapter of a base's real shapes with random weights: what the GPU's weightless mode
serves (no adapter of Lightning is published) and what the overhead measurement loads
(``tools/device/lora_overhead_h200.py``). Its answers are noise; its cost is a real adapter's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.adapters.check import _block_types, expected_shape, modules_of, servable_modules

#: The default targets: every projection vLLM 0.32.0 applies a LoRA to in the attention,
#: Mamba and MLP / shared-expert layers (lab.adapters.check.NEMOTRON_H_TARGETS).
DEFAULT_TARGETS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "in_proj",
    "out_proj",
    "up_proj",
    "down_proj",
)


def random_adapter(
    base: str | Path | dict[str, Any],
    dest: str | Path,
    *,
    rank: int = 8,
    target_modules: tuple[str, ...] = DEFAULT_TARGETS,
    seed: int = 0,
) -> Path:
    """Write a peft LoRA folder for the Nemotron-H ``base`` with random weights.

    Args:
        base: the base's folder (its ``config.json``) or that config as a dict.
        dest: the folder to write (``adapter_config.json``, ``adapter_model.safetensors``).
        rank: ``r`` (tokens of nothing: the LoRA's inner width), e.g. 8 or 32.
        target_modules: module names (:data:`DEFAULT_TARGETS`); the routed experts and
            router are left out (their LoRA needs vLLM's fused-MoE LoRA path).
        seed: the random generator's seed.
    Returns:
        ``dest``.
    Raises:
        ValueError: a target the base has no Linear layer for (the message lists those it has).
    """
    import torch
    from safetensors.torch import save_file

    config = (
        base if isinstance(base, dict) else json.loads((Path(base) / "config.json").read_text())
    )
    bad = sorted(set(target_modules) - set(servable_modules(config)))
    if bad:
        raise ValueError(
            f"random_adapter: {bad} are not LoRA targets of this base; use {modules_of(config)}."
        )
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer, kind in enumerate(_block_types(config)):
        paths = [m for m in target_modules if expected_shape(config, layer, m)]
        if kind == "moe":
            paths = [f"shared_experts.{m}" for m in target_modules if m in ("up_proj", "down_proj")]
        for path in paths:
            fan_in, fan_out = expected_shape(config, layer, path)
            key = f"base_model.model.model.layers.{layer}.mixer.{path}"
            tensors[f"{key}.lora_A.weight"] = torch.randn(rank, fan_in, generator=gen) / fan_in**0.5
            tensors[f"{key}.lora_B.weight"] = torch.randn(fan_out, rank, generator=gen) * 0.01
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.to(torch.bfloat16) for k, v in tensors.items()}, dest / "adapter_model.safetensors"
    )
    adapter_config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted(target_modules),
        "base_model_name_or_path": str(config.get("_name_or_path") or "nemotron-h"),
    }
    (dest / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2))
    return dest
