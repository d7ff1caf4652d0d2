"""The memory plan of one configuration (:class:`Plan`, computed by
:func:`helpers.memory.planner.plan`): derived quantities, the verdict (:func:`judge`) and the
notebook renderings.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from helpers.errors import RecipeError
from helpers.memory.architecture import Architecture, GiB, _cdiv, dtype_bytes
from helpers.memory.tokenbudget import TokenBudget

#: How :meth:`Plan.summary` and :attr:`Plan.verdict` word each ``status``.
_VERDICT_WORDS = {
    "fits": "FITS",
    "partial": "STARTS, BUT NOT ALL SEQUENCES FIT AT ONCE",
    "no-start": "DOES NOT FIT",
    "refused": "REFUSED: THE SPECULATIVE TOKEN BUDGET IS TOO SMALL",
}


@dataclasses.dataclass
class Plan:
    """The memory plan of one configuration, per GPU. Sizes in bytes unless named ``*_gib``.

    ``status``: ``"fits"`` (``max_num_seqs`` sequences of ``context_len`` tokens all resident),
    ``"partial"`` (starts; only ``seqs_at_context`` fit at once), ``"no-start"`` (vLLM refuses to
    start) or ``"refused"`` (starts, but the speculative token budget, :class:`TokenBudget`, cannot
    hold one decoding step: the cookbook refuses it). ``reasons`` says why not, with the fix.
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
    #: prefix caching is on (vLLM's default; ``--no-enable-prefix-caching`` turns it off)
    prefix_caching: bool = True

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
        return (
            100.0
            * (self.page_bytes - self.mamba_state_bytes_per_layer)
            / self.mamba_state_bytes_per_layer
        )

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
        a, tp, mml = self.arch, self.tensor_parallel, self.max_model_len
        kvb = dtype_bytes(
            self.kv_cache_dtype if self.kv_cache_dtype != "auto" else self.model_dtype
        )
        table = [
            ("layers (attention / Mamba / MoE / MLP)",
             f"{a.num_attention_layers} / {a.num_mamba_layers} / {a.num_moe_layers} / {a.num_mlp_layers}",
             "layers", f"hybrid pattern ({a.source})"),
            ("KV bytes per token per attention layer", self.kv_bytes_per_token_per_layer, "B",
             f"2 x {max(1, a.num_kv_heads // tp)} KV heads x {a.head_dim} x {kvb} B ({self.kv_cache_dtype})"),
            ("KV bytes per token (all attention layers)", self.kv_bytes_per_token, "B",
             f"x {a.num_attention_layers} layers"),
            ("Mamba conv state per layer", self.mamba_conv_bytes_per_layer, "B",
             f"{a.mamba_conv_elements(tp, self.num_speculative_tokens)} elements x "
             f"{dtype_bytes(self.conv_dtype)} B ({self.conv_dtype})"),
            ("Mamba SSM state per layer", self.mamba_ssm_bytes_per_layer, "B",
             f"{a.mamba_ssm_elements(tp)} elements x {dtype_bytes(self.ssm_dtype)} B ({self.ssm_dtype})"),
            ("Mamba state per sequence", round(self.mamba_state_bytes_per_seq / 2**20, 2), "MiB",
             f"x {a.num_mamba_layers} Mamba layers"),
            ("attention block size (page-aligned)", self.block_size, "tokens",
             "raised so one attention page >= one Mamba state (Mamba page padded "
             f"{self.mamba_padding_pct:.2f}%)"),
            ("page", self.page_bytes, "B", "block size x KV bytes per token per layer"),
            ("KV cache budget", round(self.kv_budget_gib, 2), "GiB", self.budget_source),
            ("pool blocks", self.num_blocks, "blocks",
             f"budget // ({self.group_size} layers x page); groups: {self.attention_groups} "
             f"attention + {self.mamba_groups} Mamba"),
            ("Mamba pool bytes per sequence", round(self.mamba_bytes_per_seq_allocated / 2**20, 2),
             "MiB", f"{self.mamba_groups} groups x {self.mamba_blocks_per_group} blocks "
             f"({self.mamba_cache_mode} mode on vLLM {self.vllm_version}, "
             f"{self.num_speculative_tokens} spec tokens)"),
            ("KV cache size (vLLM log)", self.kv_cache_tokens, "tokens",
             f"max concurrency x max_model_len {mml}"),
            (f"max concurrency at {mml} tokens (vLLM log)", round(self.max_concurrency(), 2),
             "requests", "pool blocks / blocks per request"),
            (f"sequences that fit at {self.context_len} tokens", self.seqs_at_context,
             "sequences", f"--max-num-seqs is {self.max_num_seqs}"),
            (f"longest sequence for {self.max_num_seqs} at once", self.max_len_for(), "tokens",
             "budget shared by --max-num-seqs sequences"),
        ]  # fmt: skip
        return [dict(zip(("quantity", "value", "unit", "how"), row, strict=True)) for row in table]

    def to_frame(self):
        """The plan as a pandas DataFrame (columns quantity, value, unit, how)."""
        import pandas as pd

        return pd.DataFrame(self.rows())

    def prefix_cache_note(
        self, shared_prefix: int | None = None, drafter: bool = False
    ) -> str | None:
        """What prefix caching can reuse of a workload's shared prefix, or None.

        vLLM's prefix cache reuses whole blocks of :attr:`block_size` tokens, and for this hybrid the
        attention block is enlarged to one Mamba state page (``Platform._align_hybrid_block_size``,
        ``vllm/platforms/interface.py``, vLLM 0.32.0; 2,128 tokens for NVFP4 on the H200): a shorter
        shared prefix never hits, a longer one hits its whole blocks only, and below a
        ``max_model_len`` of one block nothing hits. With ``drafter`` (MTP, DFlash, DSpark) the last
        matched block of a hit is recomputed for the drafter (``find_longest_cache_hit``,
        :func:`helpers.memory.planner.prefix_reuse`): one block fewer.

        Args:
            shared_prefix: tokens every request shares (a scenario's ``prefix_len``); None or 0:
                only the ``max_model_len`` check.
            drafter: the server drafts from the target's hidden states.

        Returns:
            One sentence, or None when prefix caching is off or there is nothing to note.
        """
        if not self.prefix_caching:
            return None
        block, why = self.block_size, "(the attention block enlarged to one Mamba page)"
        if self.max_model_len < block:
            return (f"prefix caching never hits here: --max-model-len {self.max_model_len:,} is below "
                    f"the {block:,}-token block {why}, and prefix caching reuses whole blocks only")  # fmt: skip
        if not shared_prefix or shared_prefix <= 0:
            return None
        whole = max(shared_prefix // block - drafter, 0) * block
        less = ", one fewer with a drafter (recomputed for it)" if drafter else ""
        if not whole:
            return (f"the workload's {shared_prefix:,}-token shared prefix is shorter than "
                    f"{'two' if drafter else 'one'} {block:,}-token block{'s' * drafter} {why}{less}, and "
                    "prefix caching reuses whole blocks only: it never hits; expect a 0 % prefix cache hit rate")  # fmt: skip
        if whole < shared_prefix:
            return (f"of the workload's {shared_prefix:,}-token shared prefix, prefix caching can reuse "
                    f"{whole:,} tokens ({whole // block} whole blocks of {block:,}{less}); the last "
                    f"{shared_prefix - whole:,} are prefilled for every request")  # fmt: skip
        return None

    def _headline(self) -> str:
        return f"Memory plan: {self.label} — {_VERDICT_WORDS[self.status]}"

    def summary(self) -> str:
        """A few lines for a notebook: verdict first, then the numbers behind it."""
        lines = [
            self._headline(),
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

    @property
    def verdict(self) -> str:
        """One line a notebook prints before launch: the verdict, then the sequences that fit
        at once at ``context_len`` and the prefix cache's reuse floor (or, when it does not
        start, the first reason). The whole plan: :meth:`summary`."""
        head = self._headline()
        if self.status in ("no-start", "refused"):
            return f"{head}: {self.reasons[0] if self.reasons else ''}".rstrip(": ")
        floor = (
            f"; prefix caching reuses whole {self.block_size:,}-token blocks (a shorter shared "
            "prefix never hits)"
            if self.prefix_caching
            else "; no prefix caching"
        )
        return (
            f"{head}: {self.seqs_at_context} sequences of {self.context_len:,} tokens fit at "
            f"once (--max-num-seqs {self.max_num_seqs}; KV budget {self.kv_budget_gib:.1f} GiB)"
            + floor
        )

    def raise_if_unfit(self) -> Plan:
        """Raise :class:`~helpers.errors.RecipeError` when the server cannot start or its
        speculative token budget is refused."""
        if self.status in ("no-start", "refused"):
            raise RecipeError(f"{self.label}: " + " ".join(self.reasons))
        return self

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.summary())}</pre>" + self.to_frame().to_html(index=False)


def judge(p: Plan) -> None:
    """Set ``p.status`` and ``p.reasons`` (see :class:`Plan`): the first memory limit that
    fails, then the speculative token budget."""
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
        # a speculative token budget that does not fit: refused before launch, with both fixes
        reasons.append(tb.reason())
        if tb.vllm_refuses:
            p.status = "no-start"
        elif p.status != "no-start":
            p.status = "refused"
    p.reasons = reasons


# ---- The server's own figures ---------------------------------------------------------
