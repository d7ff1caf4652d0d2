"""The Nemotron-H architecture model: layer pattern, cache bytes and parameter counts.

The byte arithmetic the memory planner and the weightless mode share; each formula names its
vLLM / transformers source.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from helpers.errors import RecipeError

GiB = 1 << 30

#: Bytes per element of the dtype names vLLM accepts for the KV / Mamba caches and --dtype
#: (``STR_DTYPE_TO_TORCH_DTYPE`` in ``vllm/utils/torch_utils.py``).
DTYPE_BYTES = {
    **dict.fromkeys(("float32", "float", "fp32"), 4),
    **dict.fromkeys(("bfloat16", "bf16", "float16", "half", "fp16"), 2),
    **dict.fromkeys(("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "int8"), 1),
}


def _cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def dtype_bytes(name: str) -> int:
    """Bytes per element of a vLLM dtype name (``"fp8"`` -> 1, ``"bfloat16"`` -> 2, ...).

    Raises:
        RecipeError: an unknown name (the message lists the known ones).
    """
    key = str(name).lower().replace("torch.", "")
    if key not in DTYPE_BYTES:
        raise RecipeError(f"Unknown dtype {name!r} for the memory planner; use one of {sorted(DTYPE_BYTES)}.")  # fmt: skip
    return DTYPE_BYTES[key]


#: ``layers_block_type`` names (transformers >= 5 NemotronHConfig; older configs) -> pattern chars.
_LAYER_TYPES = {
    "linear_attention": "M",
    "mamba": "M",
    "full_attention": "*",
    "attention": "*",
    "moe": "E",
    "mlp": "-",
}


@dataclasses.dataclass(frozen=True)
class Architecture:
    """The numbers of a Nemotron-H model that size its caches.

    ``pattern`` is ``hybrid_override_pattern``: one character per layer, ``M`` Mamba-2,
    ``*`` attention, ``E`` MoE, ``-`` MLP; ``mtp_attention_layers`` the MTP block's
    (``mtp_hybrid_override_pattern``'s ``*`` x ``num_nextn_predict_layers``).
    """

    pattern: str
    hidden_size: int
    num_kv_heads: int
    head_dim: int
    mamba_num_heads: int
    mamba_head_dim: int
    ssm_state_size: int
    n_groups: int
    conv_kernel: int
    dtype: str = "bfloat16"
    mamba_ssm_cache_dtype: str | None = None
    max_position_embeddings: int | None = None
    source: str = ""
    mtp_attention_layers: int = 0

    @property
    def num_attention_layers(self) -> int:
        return self.pattern.count("*")

    @property
    def num_mamba_layers(self) -> int:
        return self.pattern.count("M")

    @property
    def num_moe_layers(self) -> int:
        return self.pattern.count("E")

    @property
    def num_mlp_layers(self) -> int:
        return self.pattern.count("-")

    @classmethod
    def from_schema(cls, a: Any, context_length: int | None = None) -> Architecture:
        """From a registry ``model.architecture`` entry (as :class:`ServeConfig` carries it),
        with ``context_length`` (tokens) as ``max_position_embeddings``.

        Raises:
            RecipeError: the pattern's length is not ``num_hidden_layers``.
        """
        if len(a.hybrid_override_pattern) != a.num_hidden_layers:
            raise RecipeError(
                "model.architecture.hybrid_override_pattern has "
                f"{len(a.hybrid_override_pattern)} layers but num_hidden_layers is {a.num_hidden_layers}: "
                "fix cookbook/recipe.yaml."
            )
        # its keys are config.json's (no torch_dtype: bfloat16), read as one
        config = {**a.model_dump(), "max_position_embeddings": context_length}
        return dataclasses.replace(
            cls.from_hf_config(config), source="cookbook/recipe.yaml model.architecture"
        )

    @classmethod
    def from_hf_config(cls, config: str | Path | Mapping[str, Any]) -> Architecture:
        """From a Nemotron-H ``config.json`` (a path, its folder, or the parsed dict).

        Raises:
            RecipeError: the file is missing or is not a Nemotron-H config.
        """
        src = "config.json"
        if not isinstance(config, Mapping):
            path = Path(config)
            if path.is_dir():
                path = path / "config.json"
            try:
                config = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise RecipeError(f"Cannot read {path} ({exc}); pass a model folder with a config.json.") from exc  # fmt: skip
            src = str(path)
        c = config
        pattern = c.get("hybrid_override_pattern")
        if not pattern and isinstance(c.get("layers_block_type"), list):
            pattern = "".join(_LAYER_TYPES.get(t, "?") for t in c["layers_block_type"])
        if not pattern:
            raise RecipeError(f"{src} has no hybrid_override_pattern: not a Nemotron-H config.")
        num_heads = int(c.get("num_attention_heads") or 1)
        mtp_attention = str(c.get("mtp_hybrid_override_pattern") or "").count("*") * int(c.get("num_nextn_predict_layers", 1) or 0)  # fmt: skip
        return cls(
            pattern=pattern,
            hidden_size=int(c["hidden_size"]),
            num_kv_heads=int(c.get("num_key_value_heads") or num_heads),
            head_dim=int(c.get("head_dim") or c["hidden_size"] // num_heads),
            mamba_num_heads=int(c["mamba_num_heads"]),
            mamba_head_dim=int(c["mamba_head_dim"]),
            ssm_state_size=int(c["ssm_state_size"]),
            n_groups=int(c.get("n_groups") or 1),
            conv_kernel=int(c.get("conv_kernel") or 4),
            dtype=str(c.get("torch_dtype") or c.get("dtype") or "bfloat16"),
            mamba_ssm_cache_dtype=c.get("mamba_ssm_cache_dtype"),
            max_position_embeddings=c.get("max_position_embeddings"),
            source=src,
            mtp_attention_layers=mtp_attention,
        )

    # ---- per-layer byte counts (per GPU) -----------------------------------------------
    def kv_bytes_per_token_per_layer(self, kv_dtype_bytes: int, tp: int = 1) -> int:
        """2 (K, V) x KV heads per GPU x head_dim x bytes."""
        return 2 * max(1, self.num_kv_heads // tp) * self.head_dim * kv_dtype_bytes

    def mamba_conv_elements(self, tp: int = 1, num_spec: int = 0) -> int:
        """Conv state elements per layer: (kernel - 1 + spec) x (intermediate + 2 x groups x state) / TP."""
        extra = 0 if self.n_groups % tp == 0 else tp - self.n_groups
        conv_dim = (
            self.mamba_num_heads * self.mamba_head_dim
            + 2 * (self.n_groups + extra) * self.ssm_state_size
        )
        return (conv_dim // tp) * (self.conv_kernel - 1 + num_spec)

    def mamba_ssm_elements(self, tp: int = 1) -> int:
        """SSM state elements per layer: heads / TP x head_dim x state."""
        return (self.mamba_num_heads // tp) * self.mamba_head_dim * self.ssm_state_size

    # ---- whole-model byte counts (one GPU, no tensor parallel) ---------------------------
    def cache_dtype_bytes(self, name: str) -> int:
        """:func:`dtype_bytes` of a cache dtype flag; ``"auto"`` is the model dtype."""
        return dtype_bytes(self.dtype if str(name).lower() == "auto" else name)

    def kv_bytes_per_token(self, kv_cache_dtype: str = "auto", tp: int = 1) -> int:
        """KV-cache bytes one token takes over all attention layers (per GPU)."""
        return self.num_attention_layers * self.kv_bytes_per_token_per_layer(
            self.cache_dtype_bytes(kv_cache_dtype), tp
        )

    def mamba_state_bytes_per_layer(
        self, ssm_dtype: str = "float32", conv_dtype: str = "auto", tp: int = 1, num_spec: int = 0
    ) -> int:
        """Conv state + SSM state of one Mamba layer for one sequence (per GPU, unpadded)."""
        return self.mamba_conv_elements(tp, num_spec) * self.cache_dtype_bytes(
            conv_dtype
        ) + self.mamba_ssm_elements(tp) * self.cache_dtype_bytes(ssm_dtype)


# ---- Parameters and weight bytes of a config.json -------------------------------------


def _layer_kinds(config: Mapping[str, Any]) -> dict[str, int]:
    pattern = config["hybrid_override_pattern"]
    return {
        k: pattern.count(c)
        for k, c in (("mamba", "M"), ("moe", "E"), ("attention", "*"), ("mlp", "-"))
    }


def param_counts(config: Mapping[str, Any]) -> dict[str, int]:
    """Parameters of a Nemotron-H config, by part, as vLLM/transformers build the model (each
    term is commented below; MoE experts are ReLU², not gated; ``lm_head`` untied).

    Args:
        config: a ``config.json`` mapping (e.g. :func:`helpers.weights.weightless.arch_hf_config`).

    Returns:
        ``{"total", "active", "active_without_embeddings", "embeddings", "lm_head", "mamba",
        "attention", "moe_routed", "moe_shared", "moe_router", "mlp", "norms"}`` in parameters;
        ``active`` leaves out the routed experts a token does not pick.
    """
    c = dict(config)
    h, v = int(c["hidden_size"]), int(c["vocab_size"])
    kinds = _layer_kinds(c)
    d_inner = int(c["mamba_num_heads"]) * int(c["mamba_head_dim"])
    gs = int(c["n_groups"]) * int(c["ssm_state_size"])
    heads = int(c["mamba_num_heads"])
    conv_dim = d_inner + 2 * gs
    mamba = (
        h * (2 * d_inner + 2 * gs + heads)  # in_proj: z, x, B, C, dt
        + conv_dim * (int(c["conv_kernel"]) + 1)  # conv1d weight + bias
        + 3 * heads  # A, D, dt_bias
        + d_inner  # gated RMSNorm
        + d_inner * h  # out_proj
    )
    q = int(c["num_attention_heads"]) * int(c["head_dim"])
    kv = int(c["num_key_value_heads"]) * int(c["head_dim"])
    attention = h * q + 2 * h * kv + q * h
    e = int(c["n_routed_experts"])
    expert = 2 * h * int(c["moe_intermediate_size"])
    shared = (
        int(c.get("n_shared_experts") or 0) * 2 * h * int(c["moe_shared_expert_intermediate_size"])
    )
    router = h * e + e
    mlp = 2 * h * int(c["intermediate_size"])
    n_layers = sum(kinds.values())
    parts = {
        "embeddings": v * h,
        "lm_head": 0 if c.get("tie_word_embeddings") else v * h,
        "mamba": kinds["mamba"] * mamba,
        "attention": kinds["attention"] * attention,
        "moe_routed": kinds["moe"] * e * expert,
        "moe_shared": kinds["moe"] * shared,
        "moe_router": kinds["moe"] * router,
        "mlp": kinds["mlp"] * mlp,
        "norms": (n_layers + 1) * h,
    }
    total = sum(parts.values())
    inactive = kinds["moe"] * (e - int(c["num_experts_per_tok"])) * expert
    active = total - inactive
    return {
        "total": total,
        "active": active,
        "active_without_embeddings": active - parts["embeddings"],
        **parts,
    }


def weight_bytes(config: Mapping[str, Any]) -> int:
    """Bytes of weights on the GPU for a config (BF16, or NVFP4 W4A16 experts when the
    config has :func:`helpers.weights.weightless.nvfp4_quantization_config`).

    NVFP4 experts cost 0.5 byte per weight plus one FP8 scale per ``group_size`` weights
    (and a few FP32 global scales, ignored); everything else 2 bytes (BF16). Marlin's
    repacking keeps the size. The result is a planning number: vLLM's "Model loading took
    X GiB" on the GPU is the measurement.
    """
    c = dict(config)
    p = param_counts(c)
    q = c.get("quantization_config") or {}
    if str(q.get("quant_algo", "")).upper() in ("W4A16_NVFP4", "NVFP4"):
        group = int(q.get("group_size") or 16)
        quantized = p["moe_routed"] + p["moe_shared"]
        return int(quantized * (0.5 + 1.0 / group) + (p["total"] - quantized) * 2)
    return int(p["total"] * 2)
