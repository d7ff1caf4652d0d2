"""The speculative token budget: does one decoding step of every sequence fit in
``--max-num-batched-tokens`` once drafting takes its slots?

Rules read in the vLLM 0.26.0, 0.27.0, 0.27.1, 0.28.0 and 0.32.0 wheels
(``vllm/config/speculative.py``, ``vllm/v1/core/sched/scheduler.py``, ``VllmConfig``).
"""

from __future__ import annotations

import dataclasses

from helpers.config.versions import parse_version


def _arg(cfg, flag: str, default=None):
    value = cfg.args.get(flag, default)
    return default if value is None else value


#: First vLLM whose scheduler charges the drafting slots per scheduled request against
#: ``--max-num-batched-tokens`` (``input_budget -= num_new_tokens + draft_slots`` in
#: ``vllm/v1/core/sched/scheduler.py``) instead of lowering ``max_num_scheduled_tokens`` by
#: ``slots x max_num_seqs`` up front (``VllmConfig._set_max_num_scheduled_tokens``), as
#: 0.26-0.27 do.
DRAFT_SLOTS_PER_REQUEST_SINCE = (0, 28)

#: Methods that draft a whole block in parallel (``parallel_drafting = True`` for
#: ``dflash`` / ``dspark`` in ``SpeculativeConfig.__post_init__``, every release above).
PARALLEL_DRAFTING_METHODS = ("dflash", "dspark")


def drafting_slots(
    method: str | None,
    num_speculative_tokens: int,
    vllm_version: str | None = None,
) -> int:
    """Extra token slots one decoding request takes for drafting (vLLM's
    ``SpeculativeConfig.max_num_new_slots_for_drafting``).

    Args:
        method: ``"dflash"``, ``"dspark"``, ``"mtp"``, ``"ngram"``, ``"eagle3"``, ``"draft_model"`` ...
        num_speculative_tokens: K.
        vllm_version: the serving release; None or unparsable means the newest rule.

    Returns:
        From vLLM 0.28.0 (``vllm/config/speculative.py``): DFlash K (one bonus query + K mask
        queries), parallel drafting K - 1 (DSpark, P-EAGLE), PARD K, a draft model 1, others
        (MTP, n-gram, EAGLE) 0. In 0.26.0-0.27.1: K - 1 for any parallel drafter (DFlash
        included), + 1 for a draft model.
    """
    k = int(num_speculative_tokens or 0)
    m = (method or "").lower()
    parallel = m in PARALLEL_DRAFTING_METHODS
    if _before(vllm_version, DRAFT_SLOTS_PER_REQUEST_SINCE):
        return (k - 1 if parallel else 0) + (1 if m == "draft_model" else 0)
    if m == "dflash":
        return k
    if parallel:
        return k if m == "draft_model" else k - 1
    return 1 if m == "draft_model" else 0


@dataclasses.dataclass(frozen=True)
class TokenBudget:
    """Does one decoding step of every sequence fit in ``--max-num-batched-tokens``? (tokens)

    Each decoding sequence schedules 1 + K tokens and takes ``slots`` more for the drafter
    (:func:`drafting_slots`). vLLM 0.26-0.27 reserve ``slots x max_num_seqs`` up front and refuse
    to start when nothing is left ("max_num_scheduled_tokens is set to -1792 ... which does not
    allow any tokens to be scheduled"); 0.28+ charge ``1 + K + slots`` per scheduled request.
    Either way all ``max_num_seqs`` decode in one step only when ``max_num_batched_tokens >=
    max_num_seqs x (1 + K + slots)``; otherwise drafting cannot pay off at full load.
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


def config_token_budget(
    cfg, vllm_version: str | None = None, max_num_seqs: int | None = None
) -> TokenBudget | None:
    """:func:`spec_token_budget` of a ServeConfig (None without drafting or without an
    explicit ``--max-num-batched-tokens``)."""
    spec = getattr(cfg, "speculative_config", None) or {}
    k = int(spec.get("num_speculative_tokens") or 0)
    mnbt = _arg(cfg, "--max-num-batched-tokens", 0)
    seqs = max_num_seqs or _arg(cfg, "--max-num-seqs", 0)
    if not k or not mnbt or not seqs:
        return None
    version = vllm_version or getattr(cfg, "vllm_version", None)
    return spec_token_budget(
        int(mnbt), int(seqs), str(spec.get("method") or cfg.speculative), k, version
    )
