"""What a LoRA adapter may target on Nemotron-H, and a user's adapter checked before the launch.

Read in vLLM 0.32.0's code (``vllm/model_executor/models/nemotron_h.py``,
``vllm/model_executor/layers/mamba/mamba_mixer2.py``, ``vllm/lora/utils.py``,
``vllm/lora/lora_model.py``, ``vllm/lora/peft_helper.py``, ``vllm/lora/layers/base_linear.py``):

- ``NemotronHForCausalLM`` declares ``SupportsLoRA``; ``lora_skip_prefixes = ["mtp."]``: the
  MTP drafter's layers are never adapted. ``packed_modules_mapping`` packs ``q_proj``,
  ``k_proj``, ``v_proj`` into ``qkv_proj``; ``embedding_modules`` names ``embed_tokens`` and
  ``lm_head``.
- The modules an adapter may name are ``get_supported_lora_modules`` (``lora/utils.py``):
  the last name of every ``LinearBase`` / ``MoERunner`` module, plus the embedding modules.
  Anything else is refused at load: "While loading ..., expected target modules in {...} but
  received [...]" (``lora/lora_model.py``).
- ``peft_helper.validate_legal``: "LoRA rank R is greater than max_lora_rank M."
- ``set_lora`` copies each tensor into the corner of a buffer sized for this model
  (``lora/layers/base_linear.py``): an adapter of a *narrower* base loads without a word and
  answers nonsense; a *wider* one fails with torch's "The size of tensor a ... must match".
  Only a check of the shapes before the launch tells the two apart from a good adapter.
- The routed experts' LoRA runs through ``add_lora_fused_moe``, which
  ``lora/punica_wrapper/punica_gpu.py`` (and ``punica_xpu.py``) implement and ``punica_cpu.py``
  does not (``punica_base.py`` raises NotImplementedError): a MoE adapter is a GPU matter (the
  stand-in has no MoE layer anyway).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.errors import AdapterError

#: Where LoRA lands in a Nemotron-H model in vLLM 0.32.0: module name -> (layer it belongs
#: to, vLLM's layer class, what its LoRA does). Source: the files this module's docstring names.
NEMOTRON_H_TARGETS: dict[str, tuple[str, str, str]] = {
    "q_proj": ("attention", "QKVParallelLinear (packed as qkv_proj)", "served"),
    "k_proj": ("attention", "QKVParallelLinear (packed as qkv_proj)", "served"),
    "v_proj": ("attention", "QKVParallelLinear (packed as qkv_proj)", "served"),
    "o_proj": ("attention", "RowParallelLinear", "served"),
    "in_proj": ("Mamba-2", "MergedColumnParallelLinear", "served"),
    "out_proj": (
        "Mamba-2",
        "RowParallelLinear",
        "served (peft 0.21 refuses to train it on Mamba models)",
    ),
    "conv1d": (
        "Mamba-2",
        "ColumnParallelLinear",
        "accepted by name, never applied: the mixer reads conv1d.weight into its conv kernel and never calls the layer",
    ),
    "up_proj": ("MLP, MoE shared experts", "ColumnParallelLinear", "served"),
    "down_proj": ("MLP, MoE shared experts", "RowParallelLinear", "served"),
    "experts": (
        "MoE routed experts",
        "FusedMoE (FusedMoEWithLoRA)",
        "served on GPU (punica_gpu.py add_lora_fused_moe); the CPU build's punica_cpu.py has no MoE LoRA",
    ),
    "gate": (
        "MoE router",
        "GateLinear (a ReplicatedLinear)",
        "accepted by name (ReplicatedLinearWithLoRA)",
    ),
    "fc1_latent_proj": ("latent MoE", "ReplicatedLinear", "served when moe_latent_size is set"),
    "fc2_latent_proj": ("latent MoE", "ReplicatedLinear", "served when moe_latent_size is set"),
    "embed_tokens": ("embedding", "VocabParallelEmbedding", "served (embedding_modules)"),
    "lm_head": ("output head", "ParallelLMHead", "served (embedding_modules)"),
}

#: Modules named but never applied (see :data:`NEMOTRON_H_TARGETS`): refused by the check.
NEVER_APPLIED = ("conv1d",)

#: ``--max-lora-rank`` values vLLM 0.32.0 accepts (``vllm/config/lora.py`` ``MaxLoRARanks``).
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)

_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_BLOCK_NAMES = {"linear_attention": "mamba", "mamba": "mamba", "full_attention": "attention",
                "attention": "attention", "mlp": "mlp", "moe": "moe"}  # fmt: skip
_KEY = re.compile(r"(?:^|\.)(?:model|backbone)\.layers\.(\d+)\.mixer\.(.+)\.lora_([AB])\.weight$")


@dataclass(frozen=True)
class AdapterReport:
    """What :func:`check_adapter` read: ``name``, ``rank`` (largest of ``r`` and
    ``rank_pattern``), ``target_modules``, ``base`` (``base_model_name_or_path``), ``tensors``."""

    name: str
    rank: int
    target_modules: tuple[str, ...]
    base: str
    tensors: int

    def line(self) -> str:
        """One line: the adapter's rank, targets and tensor count."""
        return (
            f"{self.name}: rank {self.rank}, {self.tensors} tensors on "
            f"{', '.join(self.target_modules)} (trained on {self.base or 'an unnamed base'}): OK"
        )


def _block_types(config: dict[str, Any]) -> list[str]:
    pattern = config.get("hybrid_override_pattern")
    if pattern:
        return [_BLOCKS.get(c, c) for c in pattern]
    return [_BLOCK_NAMES.get(b, b) for b in config.get("layers_block_type") or []]


def expected_shape(config: dict[str, Any], layer: int, module: str) -> tuple[int, int] | None:
    """``(in_features, out_features)`` of ``module`` (the name after ``mixer.``, e.g.
    ``q_proj``, ``shared_experts.up_proj``, ``experts.3.down_proj``) in layer ``layer`` of the
    Nemotron-H described by ``config`` (``config.json`` as a dict), or None for a module whose
    LoRA shape the check does not model (``conv1d``, ``gate``).

    Source: the layer definitions of vLLM 0.32.0 ``nemotron_h.py`` and ``mamba_mixer2.py``
    (Mamba ``in_proj`` out = 2 x d_inner + 2 x n_groups x ssm_state_size + mamba heads).
    """
    h = config["hidden_size"]
    kind = _block_types(config)[layer] if layer < len(_block_types(config)) else None
    leaf = module.rsplit(".", 1)[-1]
    if kind == "attention":
        hd = config.get("head_dim") or h // config["num_attention_heads"]
        q, kv = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h)}.get(leaf)
    if kind == "mamba":
        heads = config["mamba_num_heads"]
        inner = heads * config["mamba_head_dim"]
        proj = 2 * inner + 2 * config["n_groups"] * config["ssm_state_size"] + heads
        return {"in_proj": (h, proj), "out_proj": (inner, h)}.get(leaf)
    if kind == "mlp":
        width = config["intermediate_size"]
    elif kind == "moe" and module.startswith("shared_experts."):
        width = config["moe_shared_expert_intermediate_size"] * (
            config.get("n_shared_experts") or 1
        )
    elif kind == "moe" and module.startswith("experts."):
        h = config.get("moe_latent_size") or h
        width = config["moe_intermediate_size"]
    else:
        return None
    return {"up_proj": (h, width), "down_proj": (width, h)}.get(leaf)


_KIND_MODULES = {
    "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "mamba": ("in_proj", "out_proj", "conv1d"),
    "mlp": ("up_proj", "down_proj"),
    "moe": ("experts", "gate", "up_proj", "down_proj"),
}


def modules_of(config: dict[str, Any]) -> list[str]:
    """The module names vLLM 0.32.0 accepts in an adapter for the Nemotron-H of ``config``
    (``get_supported_lora_modules``: the Linear layers its blocks have, the latent MoE
    projections when ``moe_latent_size`` is set, ``embed_tokens`` and ``lm_head``)."""
    kinds = set(_block_types(config))
    names = [m for k, ms in _KIND_MODULES.items() if k in kinds for m in ms]
    if "moe" in kinds and config.get("moe_latent_size"):
        names += ["fc1_latent_proj", "fc2_latent_proj"]
    return sorted({*names, "embed_tokens", "lm_head"})


def _fail(name: str, what: str, fix: str) -> AdapterError:
    return AdapterError(f"adapter {name!r}: {what}; fix: {fix}.")


def check_adapter(
    folder: str | Path,
    base: str | Path | dict[str, Any],
    *,
    max_lora_rank: int | None = None,
    name: str | None = None,
) -> AdapterReport:
    """Check a peft LoRA folder against the base model and the server's ``--max-lora-rank``
    before it is served (``--lora-modules``) or loaded (``/v1/load_lora_adapter``).

    Checks, in order: ``adapter_config.json`` and ``adapter_model.safetensors`` are there and
    readable, ``peft_type`` is LORA without bias; ``r`` (and ``rank_pattern``) <=
    ``max_lora_rank``; every module in ``target_modules`` and in the tensors is one vLLM 0.32.0
    applies to Nemotron-H (:data:`NEMOTRON_H_TARGETS`, minus :data:`NEVER_APPLIED`); every
    ``lora_A`` is ``(r, in_features)`` and every ``lora_B`` ``(out_features, r)`` of the base
    (:func:`expected_shape`). Reads the safetensors header only.

    Args:
        folder: the adapter folder.
        base: the base's folder (its ``config.json``), or that config as a dict.
        max_lora_rank: the server's ``--max-lora-rank`` (None: not checked).
        name: the name it is served under (default: the folder's name).
    Returns:
        An :class:`AdapterReport`.
    Raises:
        AdapterError: the first problem, with what vLLM 0.32.0 would do and the fix.
    """
    from safetensors import SafetensorError, safe_open

    folder = Path(folder)
    name = name or folder.name
    try:
        cfg = json.loads((folder / "adapter_config.json").read_text())
    except (OSError, ValueError) as e:
        raise _fail(name, f"no readable adapter_config.json in {folder} ({e})",
                    "point at the folder peft's save_pretrained wrote") from e  # fmt: skip
    if isinstance(base, dict):
        base_cfg = base
    else:
        base_cfg = json.loads((Path(base) / "config.json").read_text())
    if str(cfg.get("peft_type", "LORA")).upper() != "LORA" or cfg.get("bias", "none") != "none":
        raise _fail(name, f"peft_type {cfg.get('peft_type')!r}, bias {cfg.get('bias')!r}: vLLM "
                    "serves LoRA without bias only (lora/peft_helper.py)",
                    "retrain with LoraConfig(bias='none')")  # fmt: skip
    rank = max([int(cfg.get("r", 0)), *map(int, (cfg.get("rank_pattern") or {}).values())])
    if max_lora_rank is not None and rank > max_lora_rank:
        bigger = next((r for r in MAX_LORA_RANKS if r >= rank), None)
        raise _fail(name, f"rank {rank} is above the server's --max-lora-rank {max_lora_rank} "
                    f"(vLLM 0.32.0 refuses it: 'LoRA rank {rank} is greater than max_lora_rank "
                    f"{max_lora_rank}.')",
                    f"serve with --max-lora-rank {bigger} (cookbook/adapters.yaml serve), or "
                    f"retrain with r <= {max_lora_rank}")  # fmt: skip
    targets = cfg.get("target_modules") or []
    targets = [targets] if isinstance(targets, str) else list(targets)
    try:
        with safe_open(folder / "adapter_model.safetensors", framework="numpy") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    except (OSError, SafetensorError) as e:
        raise _fail(name, f"adapter_model.safetensors in {folder} does not open ({e})",
                    "save the adapter again with peft's save_pretrained") from e  # fmt: skip
    used = set()
    for (
        key
    ) in shapes:  # the module after "mixer.": q_proj, shared_experts.up_proj, experts.3.up_proj
        path = key.split(".lora_")[0].rsplit("mixer.", 1)[-1]
        used.add("experts" if path.startswith("experts.") else path.rsplit(".", 1)[-1])
    servable = sorted(set(modules_of(base_cfg)) - set(NEVER_APPLIED))
    for module in sorted({*targets, *used}):
        if module in NEVER_APPLIED:
            raise _fail(name, f"target module {module!r}: {NEMOTRON_H_TARGETS[module][2]}",
                        f"retrain without it (target_modules from {servable})")  # fmt: skip
        if module not in servable:
            raise _fail(name, f"target module {module!r} is not a module vLLM 0.32.0 can adapt "
                        "in this Nemotron-H (it refuses the load: 'expected target modules in {...} "
                        "but received [...]')",
                        f"retrain with target_modules from {servable}")  # fmt: skip
    for key, shape in sorted(shapes.items()):
        m = _KEY.search(key)
        if not m:
            continue
        want = expected_shape(base_cfg, int(m.group(1)), m.group(2))
        if want is None:
            continue
        r = shape[0] if m.group(3) == "A" else shape[-1]
        expect = (r, want[0]) if m.group(3) == "A" else (want[1], r)
        if tuple(shape) != expect:
            raise _fail(name, f"{key} is {tuple(shape)}, this base's layer {m.group(1)} needs "
                        f"{expect}: the adapter was trained for another base "
                        f"({cfg.get('base_model_name_or_path') or 'unnamed'}); vLLM 0.32.0 loads "
                        "a narrower one without a word and answers nonsense, and refuses a wider "
                        "one ('The size of tensor a ... must match')",
                        "train the adapter on this base model (or serve the base it was trained on)")  # fmt: skip
    return AdapterReport(
        name, rank, tuple(targets), str(cfg.get("base_model_name_or_path") or ""), len(shapes)
    )
