"""Weightless architecture mode: serve the model's exact shape with random weights.

Before downloading an 18 GB (NVFP4) or 60 GB (BF16) checkpoint, size and benchmark a box with
the architecture alone (:func:`build_arch_model`, :func:`arch_config`: ``--load-format dummy``,
uniform MoE routing). Memory and speed are real, the text is noise. The shape is the registry's
``model.architecture`` plus the public ``config.json`` of
``nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16`` (``_BASE_CONFIG``). DFlash and DSpark drafters
get weightless folders of their own (:mod:`helpers.weights.drafters`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from helpers.config.load import shared_registry
from helpers.errors import WeightlessError
from helpers.memory import architecture
from helpers.paths import out_dir
from helpers.standin.template import SPECIAL_TOKENS
from helpers.weights.drafters import METHODS as DRAFTER_METHODS
from helpers.weights.drafters import build_drafter_model
from helpers.weights.weightless_tokenizer import write_tokenizer

#: Bump when the files :func:`build_arch_model` writes change; older folders are rebuilt.
#: 2: the MTP block (:data:`MTP_CONFIG`) added, so ``speculative="mtp"`` serves weightless.
#: 3: the tokenizer spells every printable ASCII character, so guided decoding can follow a grammar.
#: 4: the chat template lists tools and renders tool calls (the stand-in's Nemotron format).
ARCH_VERSION = 4
#: Checkpoint flavours this module can imitate.
VARIANTS = ("bf16", "nvfp4")
METADATA_FILE = "cookbook_arch.json"


# ---- config.json ----------------------------------------------------------------------

# Public config.json of nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 (transformers 4.55
# export), minus the registry's architecture numbers, which are filled in from
# cookbook/recipe.yaml by arch_hf_config() so there is one source for them.
_BASE_CONFIG: dict[str, Any] = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "chunk_size": 128,
    "eos_token_id": 2,
    "expand": 2,
    "hidden_dropout": 0.0,
    "initializer_range": 0.02,
    "intermediate_size": 1856,
    "layer_norm_epsilon": 1e-05,
    "mamba_hidden_act": "silu",
    "mamba_proj_bias": False,
    "mamba_ssm_cache_dtype": "float32",
    "max_position_embeddings": 262144,
    "mlp_bias": False,
    "mlp_hidden_act": "relu2",
    "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712,
    "n_group": 1,
    "norm_eps": 1e-05,
    "norm_topk_prob": True,
    "num_logits_to_keep": 1,
    "pad_token_id": 0,
    "partial_rotary_factor": 1.0,
    "rescale_prenorm_residual": True,
    "residual_in_fp32": False,
    "rope_theta": 10000,
    "routed_scaling_factor": 2.5,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "time_step_floor": 0.0001,
    "time_step_max": 0.1,
    "time_step_min": 0.001,
    "topk_group": 1,
    "torch_dtype": "bfloat16",
    # The checkpoint's export version; transformers 5 also reads it to skip its Mistral
    # tokenizer-regex warning for local folders.
    "transformers_version": "4.55.4",
    "use_bias": False,
    "use_cache": True,
    "use_conv_bias": True,
    "use_mamba_kernels": True,
}

# The multi-token-prediction (MTP) block, which the Nemotron 3 Nano export above lacks. Source:
# NVIDIA-NeMo Megatron-Bridge's ``_apply_nemotron_3_5_lightning_defaults`` (for
# nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16 @ b3caaabed026): ``mtp_num_layers = 2``,
# ``mtp_hybrid_override_pattern = "*E"`` (attention, then MoE), ``mtp_use_repeated_layer = True``
# (one weight set at depth 1 and 2: ``num_nextn_predict_layers = 1`` in the HF config, the only
# count vLLM 0.32.0's ``vllm/model_executor/models/nemotron_h_mtp.py`` builds; it reads
# ``mtp_n_routed_experts`` only for ``nemotron_h_puzzle``, so its MTP MoE layer has the main
# model's 128 experts) and ``keep_mtp_spec_in_bf16 = True``. ``vllm/config/speculative.py`` makes
# it the ``nemotron_h_mtp`` drafter only for ``--speculative-config '{"method": "mtp"}'``.
MTP_CONFIG: dict[str, Any] = {
    "num_nextn_predict_layers": 1,
    "mtp_hybrid_override_pattern": "*E",
}


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise WeightlessError(f"Unknown variant {variant!r}; pass one of {', '.join(VARIANTS)}.")


def nvfp4_quantization_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ModelOpt NVFP4 ``quantization_config`` block of the NVFP4 checkpoint's shape.

    W4A16 NVFP4 (E2M1 weights in blocks of 16, an FP8-E4M3 scale per block, an FP32 global
    scale) on the routed and shared experts; everything else BF16; FP8 KV cache (the model
    overview's PTQ recipe and the registry's precision note). The keys are those vLLM's ModelOpt
    parser reads (``ModelOptQuantConfigBase.from_config``,
    ``vllm/model_executor/layers/quantization/modelopt.py``): ``quant_algo: W4A16_NVFP4`` selects
    ``--quantization modelopt_fp4``; ``ignore`` holds ModelOpt wildcards over ``backbone.*``
    (vLLM maps ``backbone`` to ``model``). The MTP layers stay BF16 (``keep_mtp_spec_in_bf16``,
    :data:`MTP_CONFIG`): vLLM 0.32.0's ``is_layer_excluded`` matches ``"mtp"`` as a substring.

    Args:
        config: the BF16 ``config.json`` mapping (for the layer pattern).
    """
    pattern = config["hybrid_override_pattern"]
    ignore = ["lm_head", "backbone.embeddings", "mtp"]
    for i, kind in enumerate(pattern):
        if kind in "M*-":  # Mamba, attention and dense-MLP mixers stay BF16
            ignore.append(f"backbone.layers.{i}.mixer*")
        elif kind == "E":  # the router stays BF16; experts and shared experts are W4A16
            ignore.append(f"backbone.layers.{i}.mixer.gate*")
    return {
        "quant_method": "modelopt",
        "quant_algo": "W4A16_NVFP4",
        "group_size": 16,
        "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
        "ignore": ignore,
        "producer": {"name": "helpers.weights.weightless", "version": str(ARCH_VERSION)},
    }


def arch_hf_config(variant: str = "bf16") -> dict[str, Any]:
    """The ``config.json`` mapping :func:`build_arch_model` writes: the registry's shape, the
    public Nemotron 3 Nano keys and :data:`MTP_CONFIG`; for ``variant="nvfp4"`` also
    :func:`nvfp4_quantization_config`.

    Raises:
        WeightlessError: unknown variant, or the registry's pattern does not match its
            ``num_hidden_layers``.
    """
    _check_variant(variant)
    # model.architecture's keys are config.json's (typed and checked by helpers.config.schema)
    cfg = {**copy.deepcopy(_BASE_CONFIG), **MTP_CONFIG}
    cfg.update(shared_registry().model.architecture.model_dump())
    if len(cfg["hybrid_override_pattern"]) != int(cfg["num_hidden_layers"]):
        raise WeightlessError(
            f"model.architecture.hybrid_override_pattern has {len(cfg['hybrid_override_pattern'])} "
            f"layers but num_hidden_layers is {cfg['num_hidden_layers']}: fix cookbook/recipe.yaml."
        )
    if variant == "nvfp4":
        cfg["quantization_config"] = nvfp4_quantization_config(cfg)
    return dict(sorted(cfg.items()))


# ---- build / metadata / ServeConfig ---------------------------------------------------


def arch_metadata(path: str | Path) -> dict[str, Any] | None:
    """The ``cookbook_arch.json`` of an architecture folder, or None if it is not one."""
    f = Path(path) / METADATA_FILE
    try:
        return json.loads(f.read_text())
    except (OSError, ValueError):
        return None


def build_arch_model(
    variant: str = "bf16", out: str | Path | None = None, *, force: bool = False
) -> Path:
    """Write a weightless Nemotron 3.5 Lightning folder vLLM serves with ``--load-format dummy``.

    ``config.json`` (:func:`arch_hf_config`), ``generation_config.json``, the 131072-entry
    word-level tokenizer (:mod:`helpers.weights.weightless_tokenizer`, ~2.5 MB) and
    ``cookbook_arch.json``. No weights: about 1 s, no download.

    Args:
        variant: ``"bf16"`` or ``"nvfp4"`` (adds the ModelOpt W4A16 NVFP4
            ``quantization_config``; serve with the NVFP4 recipe flags).
        out: destination folder; default ``out/arch/nemotron-3.5-lightning-<variant>``.
        force: rewrite even when the folder already holds this version and variant.

    Returns:
        The folder (pass it to :func:`arch_config`).

    Raises:
        WeightlessError: unknown variant, or the registry's pattern does not match its length.
    """
    _check_variant(variant)
    dest = Path(out) if out is not None else out_dir("arch", f"nemotron-3.5-lightning-{variant}")
    dest.mkdir(parents=True, exist_ok=True)
    config = arch_hf_config(variant)
    meta = arch_metadata(dest)
    if (
        not force
        and meta
        and meta.get("version") == ARCH_VERSION
        and meta.get("variant") == variant
        and (dest / "tokenizer.json").exists()
        and json.loads((dest / "config.json").read_text()) == config
    ):
        return dest
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = {
        "bos_token_id": SPECIAL_TOKENS.index("<s>"),
        "eos_token_id": [SPECIAL_TOKENS.index("</s>"), SPECIAL_TOKENS.index("<|im_end|>")],
        "pad_token_id": SPECIAL_TOKENS.index("<unk>"),
    }
    (dest / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    write_tokenizer(dest, int(config["vocab_size"]), int(config["max_position_embeddings"]))
    counts = architecture.param_counts(config)
    meta = {
        "version": ARCH_VERSION,
        "variant": variant,
        "what": "Weightless Nemotron 3.5 Lightning architecture for vLLM --load-format dummy "
        "(helpers.weights.weightless). Speed and memory are real; the text is noise.",
        "params_total": counts["total"],
        "params_active": counts["active"],
        "weight_bytes": architecture.weight_bytes(config),
    }
    (dest / METADATA_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return dest


#: The BF16 recipe's fast-tokenizer switch (recipe variants.bf16 env; vllm/tokenizers/fastokens.py).
FAST_TOKENIZER_ENV = "VLLM_USE_FASTOKENS"
#: vLLM's MoE routing simulation (vllm/envs.py, 0.28.0-0.34.0): each token's top-k experts drawn
#: uniformly (at least as many experts a step as a trained router reads). Random norms (0.28.0,
#: 0.32.0) send every token of a step to the same 6 experts (docs/results/h200/routing-*).
ROUTING_ENV = "VLLM_MOE_ROUTING_SIMULATION_STRATEGY"
UNIFORM_ROUTING_ENV = {ROUTING_ENV: "uniform_random"}


def arch_config(
    cfg: Any,
    path: str | Path,
    *,
    allow_hub_drafter: bool = False,
) -> Any:
    """A copy of ``cfg`` serving the architecture folder ``path`` with random weights.

    Sets the model (and tokenizer) to ``path``, adds ``--load-format dummy``, ``HF_HUB_OFFLINE=1``
    (unless a hub drafter is still to fetch) and :data:`UNIFORM_ROUTING_ENV` (unless ``cfg``
    sets :data:`ROUTING_ENV`: ``""`` keeps the dummy weights' routing); the rest of ``cfg`` is kept.
    A DFlash or DSpark drafter becomes its weightless folder
    (:func:`helpers.weights.drafters.build_drafter_model`, next to ``path``): the
    ``--speculative-config`` keeps its method, ``num_speculative_tokens`` and every other key, its
    ``model`` is the local folder, and nothing is downloaded.

    Real: GPU memory (weights of the checkpoint's shapes and dtypes, NVFP4 packing, KV cache, Mamba
    state, activations, CUDA graphs) and speed (same kernels, same shapes). Not real: the text,
    speculative acceptance (near zero), quality, expert routing (simulated), the checkpoint read.

    Args:
        cfg: a :class:`helpers.config.serveconfig.ServeConfig` (e.g. ``resolve("h200", "nvfp4")``).
        path: a folder from :func:`build_arch_model`.
        allow_hub_drafter: keep a draft model that is a hub id (the real DFlash / DSpark
            drafter, trained weights); :func:`helpers.weights.download.download` then fetches
            only the drafter. False: a weightless drafter folder instead (DFlash, DSpark).

    Raises:
        WeightlessError: ``path`` is not an architecture folder; its variant does not match
            ``cfg.variant`` (quantization flags need the NVFP4 folder, BF16 flags the BF16 one);
            the draft model is a hub id of a method without a weightless drafter (vLLM would
            download it during start-up) and ``allow_hub_drafter`` is False; or the drafter
            cannot be built (:func:`helpers.weights.drafters.build_drafter_model`).
    """
    path = Path(path)
    meta = arch_metadata(path)
    if meta is None or not (path / "config.json").exists():
        raise WeightlessError(
            f"{path} is not an architecture folder (no {METADATA_FILE} / config.json): build "
            "one with helpers.weights.weightless.build_arch_model(variant)."
        )
    variant = getattr(cfg, "variant", None)
    if variant in VARIANTS and meta.get("variant") != variant:
        raise WeightlessError(
            f"The config is for variant {variant!r} but {path} was built for "
            f"{meta.get('variant')!r}: use build_arch_model({variant!r})."
        )
    spec = getattr(cfg, "speculative_config", None) or {}
    drafter = spec.get("model")
    hub_drafter = bool(drafter) and not Path(str(drafter)).is_dir()
    local_drafter = hub_drafter and not allow_hub_drafter
    if local_drafter and spec.get("method") not in DRAFTER_METHODS:
        raise WeightlessError(
            f"Speculative mode {cfg.speculative!r} drafts with {drafter}, a hub repository that vLLM "
            "would download inside the readiness wait, and no weightless drafter exists for "
            f"method {spec.get('method')!r} (only {', '.join(DRAFTER_METHODS)}). Fetch it first: "
            "serve_cfg = weights.download(weightless.arch_config(cfg, path, allow_hub_drafter=True)) "
            "(only the drafter is downloaded), or use speculative='none' / 'mtp' (MTP's draft "
            "layers are part of the architecture)."
        )
    routing = {} if ROUTING_ENV in cfg.env else UNIFORM_ROUTING_ENV
    out = cfg.with_model(path).with_args({"--load-format": "dummy"}, **routing)
    if local_drafter:
        method = spec["method"]
        folder = build_drafter_model(
            method, str(meta.get("variant")), path.parent / f"{path.name}-{method}"
        )
        out = out.with_drafter_path(folder)
        local = [dataclasses.replace(d, local_path=str(folder)) for d in out.drafters]
        out = dataclasses.replace(out, drafters=local)
    if not hub_drafter or local_drafter:
        out = out.with_args(None, HF_HUB_OFFLINE="1")
    if FAST_TOKENIZER_ENV in out.env:
        # fastokens 0.3.5 loads BPE models only, not this word-level tokenizer ("unsupported
        # pre-tokenizer type: WhitespaceSplit", an H200 start, docs/results/h200.md).
        env = {k: v for k, v in out.env.items() if k != FAST_TOKENIZER_ENV}
        out = dataclasses.replace(out, env=env)
        warnings.warn(
            f"weightless mode: {FAST_TOKENIZER_ENV} dropped (fastokens cannot load the "
            "architecture folder's word-level tokenizer; tokenization speed only)",
            stacklevel=2,
        )
    return out
