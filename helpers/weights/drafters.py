"""Weightless DFlash and DSpark drafters: the published draft models' shapes as local folders.

Weightless mode (:mod:`helpers.weights.weightless`) serves the target with ``--load-format
dummy``. vLLM 0.32.0 loads the drafter of ``--speculative-config`` with the target's load
config (``get_draft_load_config``, ``vllm/model_executor/model_loader/utils.py``), so random
weights again, and tokenizes with the target's tokenizer (the draft ``ModelConfig`` gets
``target_model_config.tokenizer``, ``vllm/config/speculative.py``). A drafter folder therefore
needs only its ``config.json``: :func:`build_drafter_model` writes it, offline, in well under a
second, and :func:`helpers.weights.weightless.arch_config` points ``"model"`` at it.

How vLLM 0.32.0 runs these drafters on the Nemotron-H target: ``method: dflash`` wraps the
config in ``EAGLEConfig`` (``DFlashDraftModel`` -> ``qwen3_dflash.DFlashQwen3ForCausalLM``);
``method: dspark`` keeps ``Qwen3DSparkModel`` (``qwen3_dspark``; any other architecture is
rewritten to DeepSeek-V4's ``DSparkDraftModel``); both set ``parallel_drafting``. The drafter
reads hidden states of target layers: ``NemotronHForCausalLM`` implements ``SupportsEagle3``
(``vllm/model_executor/models/nemotron_h.py``), and ``get_eagle3_aux_layers_from_config``
(``vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``) takes
``eagle_aux_hidden_state_layer_ids`` (= ``dflash_config.target_layer_ids`` + 1: the output of
layer ``i``; 52 is the last layer's, before ``norm_f``). DSpark runs only in the V2 model
runner (``VllmConfig._get_v1_model_runner_unsupported_features``), which needs Triton: a GPU.

Sources (every number here is one of them; the repositories are public GitHub ones):

* ``dspark``: the DSpark checkpoint's ``config.json`` with its ``quantization_config``, pinned
  as ``tests/fixtures/nemotron/dspark_config.json`` of patcarter883/minisglang-rdna4 @
  04aaf12f2731756a4385822263e516b96adaf930.
* ``dflash``: the DFlash checkpoint's ``config.json`` "as NVIDIA ships them (quantization block
  elided)", ``DFLASH_CONFIG`` in ``crates/paddock-models/src/nemotron.rs`` of
  simon-blom/paddock @ 023039ef222b50e5c3bb83507972b991845db3ec; the same file calls it "a
  6-layer qwen3-class dense GQA drafter with yarn rope and NVFP4 MLPs".
* ``inventory``: the DSpark checkpoint's tensor list, ``docs/NEMOTRON35_LIGHTNING_PLAN.md`` of
  patcarter883/minisglang-rdna4 @ b90d187ac33955423bc5358cae5f8cbf8eac3fda: ``fc`` NVFP4 with
  16,128 inputs (6 taps x 2688), ``markov_w1`` BF16 (131072, 512), ``markov_w2`` NVFP4, no
  ``lm_head`` (the target's), no confidence head.

Assumed (:data:`ASSUMED`): the DFlash ``quantization_config``, taken to be the DSpark one
without its Markov-head exclusion. The registry's ``speculative.dspark.drafter.block_size`` is
the published 8; vLLM 0.32.0 reads ``block_size`` only when ``num_speculative_tokens`` is
unset, so the recipe's K=3 (and the K=7 measured) are what a server drafts.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from helpers.config.load import shared_registry
from helpers.errors import WeightlessError
from helpers.paths import out_dir

#: Bump when the files :func:`build_drafter_model` writes change; older folders are rewritten.
DRAFTER_VERSION = 1
#: The ``--speculative-config`` methods with a separate drafter this module imitates.
METHODS = ("dflash", "dspark")
#: The only checkpoint flavour the drafters are published for (recipe seed: "the only one the
#: DSpark/DFlash drafts are published for").
VARIANTS = ("nvfp4",)
METADATA_FILE = "cookbook_drafter.json"

SOURCES = {
    "dspark": "patcarter883/minisglang-rdna4 tests/fixtures/nemotron/dspark_config.json "
    "@ 04aaf12f2731756a4385822263e516b96adaf930",
    "dflash": "simon-blom/paddock crates/paddock-models/src/nemotron.rs (DFLASH_CONFIG) "
    "@ 023039ef222b50e5c3bb83507972b991845db3ec",
    "inventory": "patcarter883/minisglang-rdna4 docs/NEMOTRON35_LIGHTNING_PLAN.md "
    "@ b90d187ac33955423bc5358cae5f8cbf8eac3fda",
}

#: Target layers whose outputs feed the drafter's ``fc`` (0-based; both drafters, both sources).
TARGET_LAYER_IDS = [1, 5, 19, 29, 41, 51]
#: The mask (noise) token both drafters fill their query block with.
MASK_TOKEN_ID = 990

# Keys both published configs carry with the same value.
_SHARED: dict[str, Any] = {
    "attention_bias": False,
    "draft_vocab_size": None,
    "dtype": "bfloat16",
    "eagle_aux_hidden_state_layer_ids": [i + 1 for i in TARGET_LAYER_IDS],
    "has_embed_tokens": True,
    "has_lm_head": False,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2688,
    "intermediate_size": 6144,
    "mask_token_id": MASK_TOKEN_ID,
    "max_position_embeddings": 1048576,
    "model_type": "qwen3",
    "num_attention_heads": 32,
    "num_aux_layers": len(TARGET_LAYER_IDS),
    "num_hidden_layers": 6,
    "num_key_value_heads": 2,
    "pard_token": MASK_TOKEN_ID,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000,
    "sample_from_anchor": False,
    "target_layer_ids": TARGET_LAYER_IDS,
    "train_embed_tokens": False,
    "transformers_version": "5.5.3",
    "use_cache": False,
    "vocab_size": 131072,
}

# The DSpark checkpoint's quantization block, as published: W4A16 NVFP4 on the MLPs, fc and
# markov_w2; embeddings, markov_w1 and attention stay BF16.
_DSPARK_QUANT: dict[str, Any] = {
    "quant_method": "modelopt",
    "producer": {"name": "modelopt", "version": "0.45.0"},
    "ignore": ["*embed_tokens*", "*markov_w1*", "*self_attn*"],
    "quant_algo": "W4A16_NVFP4",
    "kv_cache_quant_algo": None,
    "group_size": 16,
    "exclude_modules": ["*embed_tokens*", "*markov_w1*", "*self_attn*"],
}

_OWN: dict[str, dict[str, Any]] = {
    "dflash": {
        "architectures": ["DFlashDraftModel"],
        "attention_sink_bias": False,
        "dflash_config": {
            "attention_sink_bias": False,
            "causal": False,
            "mask_token_id": MASK_TOKEN_ID,
            "target_layer_ids": TARGET_LAYER_IDS,
            "use_swa": False,
            "sample_from_anchor": False,
        },
        "dflash_query_causal": False,
        "dspark_fixup_head_type": None,
        "dspark_markov_rank": None,
        "layer_types": ["full_attention"] * 6,
        "rope_parameters": {
            "factor": 128.0,
            "original_max_position_embeddings": 8192,
            "rope_theta": 10000,
            "rope_type": "yarn",
        },
        "sliding_window": None,
    },
    "dspark": {
        "architectures": ["Qwen3DSparkModel"],
        "attention_sink_bias": True,
        "block_size": 8,
        "dflash_config": {
            "attention_sink_bias": True,
            "causal": True,
            "mask_token_id": MASK_TOKEN_ID,
            "swa_window_size": 1024,
            "target_layer_ids": TARGET_LAYER_IDS,
            "use_swa": True,
            "sample_from_anchor": False,
        },
        "dflash_query_causal": True,
        "dspark_bonus_anchor": True,
        "dspark_fixup_head_type": "markov",
        "dspark_markov_rank": 512,
        "layer_types": ["sliding_attention"] * 6,
        "markov_head_type": "vanilla",
        "markov_rank": 512,
        "rope_parameters": None,
        "sliding_window": 1024,
        "quantization_config": _DSPARK_QUANT,
    },
}

#: Keys of :func:`drafter_hf_config` that no source states, per method, with the reason.
ASSUMED: dict[str, dict[str, str]] = {
    "dflash": {
        "quantization_config": "the DFlash source elides its quantization block; taken as the "
        "DSpark checkpoint's (W4A16 NVFP4, group 16, attention and embeddings BF16) without "
        "'*markov_w1*' (DFlash has no Markov head); the DFlash source says 'NVFP4 MLPs'",
    },
    "dspark": {},
}


# Which sources each drafter's keys come from (the DFlash quantization block is DSpark's).
_USES = {"dflash": ("dflash", "dspark"), "dspark": ("dspark", "inventory")}


def _check(method: str, variant: str = "nvfp4") -> None:
    if method not in METHODS:
        raise WeightlessError(
            f"No weightless drafter for speculative method {method!r}: build one of "
            f"{', '.join(METHODS)} (MTP's layers are part of the architecture folder)."
        )
    if variant not in VARIANTS:
        raise WeightlessError(
            f"The {method} drafter is published for the NVFP4 checkpoint only, not {variant!r}: "
            "use variant='nvfp4' (or speculative='mtp' with BF16)."
        )


def drafter_hf_config(method: str) -> dict[str, Any]:
    """The ``config.json`` mapping of the published ``method`` drafter (:data:`SOURCES`), with
    :data:`ASSUMED`'s keys filled in; checked against the registry's target shape.

    Args:
        method: ``"dflash"`` or ``"dspark"``.

    Raises:
        WeightlessError: unknown method; or ``model.architecture`` in cookbook/recipe.yaml no
            longer fits the drafter (its ``hidden_size`` / ``vocab_size``, or a target layer
            id beyond ``num_hidden_layers``).
    """
    _check(method)
    cfg = {**copy.deepcopy(_SHARED), **copy.deepcopy(_OWN[method])}
    if method == "dflash":
        quant = copy.deepcopy(_DSPARK_QUANT)
        for key in ("ignore", "exclude_modules"):
            quant[key] = [m for m in quant[key] if m != "*markov_w1*"]
        cfg["quantization_config"] = quant
    arch = shared_registry().model.architecture.model_dump()
    for key in ("hidden_size", "vocab_size"):
        if int(arch[key]) != cfg[key]:
            raise WeightlessError(
                f"model.architecture.{key} is {arch[key]} but the published {method} drafter "
                f"reads {cfg[key]}-wide target states: fix cookbook/recipe.yaml or this drafter."
            )
    if max(TARGET_LAYER_IDS) >= int(arch["num_hidden_layers"]):
        raise WeightlessError(
            f"The {method} drafter reads target layer {max(TARGET_LAYER_IDS)}, but "
            f"model.architecture has {arch['num_hidden_layers']} layers: fix cookbook/recipe.yaml."
        )
    return dict(sorted(cfg.items()))


def drafter_metadata(path: str | Path) -> dict[str, Any] | None:
    """The ``cookbook_drafter.json`` of a drafter folder, or None if it is not one."""
    try:
        return json.loads((Path(path) / METADATA_FILE).read_text())
    except (OSError, ValueError):
        return None


def build_drafter_model(
    method: str, variant: str = "nvfp4", out: str | Path | None = None, *, force: bool = False
) -> Path:
    """Write a weightless ``method`` drafter folder for ``--speculative-config``'s ``model``.

    ``config.json`` (:func:`drafter_hf_config`) and ``cookbook_drafter.json`` (which keys are
    published, which assumed, the sources). No weights, no tokenizer (vLLM uses the target's),
    no download. Served with the target's ``--load-format dummy``: memory and speed are the
    drafter's (6 layers, hidden 2688, NVFP4 MLPs), acceptance is near zero.

    Args:
        method: ``"dflash"`` or ``"dspark"``.
        variant: the target checkpoint's flavour; only ``"nvfp4"`` has published drafters.
        out: destination folder; default ``out/arch/nemotron-3.5-lightning-<variant>-<method>``.
        force: rewrite even when the folder already holds this version's files.

    Returns:
        The folder.

    Raises:
        WeightlessError: unknown method, a variant without a published drafter, or the
            registry's target shape no longer fits the drafter (:func:`drafter_hf_config`).
    """
    _check(method, variant)
    config = drafter_hf_config(method)
    dest = (
        Path(out)
        if out is not None
        else out_dir("arch", f"nemotron-3.5-lightning-{variant}-{method}")
    )
    dest.mkdir(parents=True, exist_ok=True)
    meta = drafter_metadata(dest)
    config_file = dest / "config.json"
    if (
        not force
        and meta
        and meta.get("version") == DRAFTER_VERSION
        and meta.get("method") == method
        and config_file.exists()
        and json.loads(config_file.read_text()) == config
    ):
        return dest
    config_file.write_text(json.dumps(config, indent=2) + "\n")
    drafter = shared_registry().speculative[method].drafter
    meta = {
        "version": DRAFTER_VERSION,
        "method": method,
        "variant": variant,
        "stands_in_for": drafter.repo if drafter else None,
        "what": f"Weightless {method} drafter for vLLM --load-format dummy "
        "(helpers.weights.drafters): its shape, random weights; acceptance is not real.",
        "published": sorted(set(config) - set(ASSUMED[method])),
        "assumed": ASSUMED[method],
        "sources": {k: SOURCES[k] for k in ("dflash", "dspark", "inventory") if k in _USES[method]},
    }
    (dest / METADATA_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return dest
