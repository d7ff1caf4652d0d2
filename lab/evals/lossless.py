"""Speculative decoding shown lossless: greedy outputs with drafting against without.

Greedy decoding with a correct verifier is lossless: a drafted token is kept only where the
target would have produced it. The verdict is vLLM's own rule (its CPU test
``tests/v1/e2e/test_cpu_spec_decode.py``, vLLM 0.32.0): two greedy runs match when identical,
or when at the first token where they differ each run's token is among the other's top-5 (a
tie: near-equal logits that batch shapes and kernels may order either way); a run during which
no drafted token was accepted proves nothing (:attr:`Match.vacuous`). A rejection method that
is lossy by design (``rejection_sample_method: "fly"`` in 0.33.0) is never called lossless.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pandas as pd

from helpers.server.endpoint import make_client

#: Prompts the lossless check sends (the demo's own: the stand-in answers them; any model can).
LOSSLESS_PROMPTS = [
    "Briefly explain: what is vLLM?",
    "Explain speculative decoding in two sentences.",
    "What is vLLM?",
]


# vllm #53912 (fix proposed in PR #53919, open), read in each wheel's
# ``vllm/v1/worker/gpu_model_runner.py``: in 0.32.0 and 0.33.0 the V1 GPU model runner's
# ``_update_states_after_model_execute`` copies the accepted-token counts to the host
# (``input_batch.num_accepted_tokens_cpu_tensor``, non-blocking) in step N's row order; step
# N+1's ``_update_states`` moves rows (``add_request``, ``condense``) without waiting on
# ``num_accepted_tokens_event``, and only ``_prepare_inputs`` waits, then gathers through
# ``prev_positions``: a copy that lands before the moves is permuted twice, and a request gets
# another's count. It needs a hybrid (Mamba) model with prefix caching (``mamba_cache_mode``
# align), drafting and async scheduling on the V1 runner, which those releases pick only with
# ``VLLM_USE_V2_MODEL_RUNNER=0`` or a feature the V2 runner lacks
# (``VllmConfig._get_v2_model_runner_unsupported_features``, ``vllm/config/vllm.py``; e.g. the
# suffix speculative method). The default V2 runner keeps the counts on the GPU per request
# (``num_accepted_tokens_gpu``, ``vllm/v1/worker/gpu/model_states/mamba_hybrid.py``), and 0.34.0
# ships no V1 GPU runner. Where it applies, ``--no-async-scheduling`` is the correctness switch.

#: Requests in flight in the lossless check's concurrent run (:func:`greedy_tokens`): more than
#: one, so requests join and leave a drafting server's batch while others decode (one request
#: at a time cannot show the race above; the check runs both ways).
LOSSLESS_CONCURRENCY = 4

#: The tie tolerance of vLLM's CPU spec-decode test: the top-k of each position compared.
TIE_TOP_K = 5


class GreedyOutput(list):
    """The token ids of one greedy output (a ``list[int]``), with ``top``: per position, the
    ids of the top :data:`TIE_TOP_K` tokens (empty sets when not asked)."""

    top: list[frozenset[int]]

    def __init__(self, ids=(), top=None):
        super().__init__(ids)
        self.top = list(top) if top is not None else [frozenset() for _ in self]


def _token_id(token: str) -> int | None:
    """``"token_id:123"`` (vLLM's ``return_tokens_as_token_ids``) as 123."""
    return int(token.split(":", 1)[1]) if token.startswith("token_id:") else None


#: vLLM's error when a logprob it returns is NaN: it clamps -inf to -9999 but not NaN
#: (``max(logprob, -9999.0)`` in ``entrypoints/openai/chat_completion/serving.py``, 0.32.0),
#: and the JSON encoder refuses the reply with HTTP 400.
NAN_LOGPROB_ERROR = "Out of range float values are not JSON compliant"


class TopLogprobsUnreadableWarning(UserWarning):
    """The server could not write a prompt's top-5 logprobs as JSON (a NaN logprob); that
    prompt was asked again without them, so a difference there cannot be shown to be a tie."""


def _greedy_reply(client, server, prompt: str, max_tokens: int, thinking: bool, top: int):
    """One greedy chat completion (``top`` top-logprobs per position, 0: none asked)."""
    asked = {"logprobs": True, "top_logprobs": top} if top else {}
    return client.chat.completions.create(
        model=server.model_name,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens,
        temperature=0.0,
        top_p=1.0,
        **asked,
        extra_body={
            "return_token_ids": True,
            "return_tokens_as_token_ids": bool(top),
            "chat_template_kwargs": {"enable_thinking": thinking},
        },
    )


def greedy_tokens(
    server,
    prompts: Sequence[str],
    *,
    max_tokens: int = 64,
    thinking: bool = True,
    top_logprobs: int = TIE_TOP_K,
    concurrency: int = 1,
) -> GreedyOutputs:
    """Token ids each prompt generates greedily on ``server`` (one request per prompt;
    ``max_tokens`` tokens at most, reasoning included), each with the ids of its
    ``top_logprobs`` most likely tokens per position (0: none asked). A reply refused for a NaN
    logprob (HTTP 400, :data:`NAN_LOGPROB_ERROR`; the CPU stand-in with n-gram drafting) is
    asked again without logprobs, with a :class:`TopLogprobsUnreadableWarning`.

    ``concurrency`` > 1 sends the prompts that many at a time (threads; outputs still in prompt
    order): requests join and leave the server's batch while others decode, which is where a
    drafting server can hand one request another's accepted-token count (vllm #53912, in vLLM
    0.32.0 and 0.33.0's V1 model runner: the comment above :data:`LOSSLESS_CONCURRENCY`). The
    outputs' ``in_flight`` (:class:`GreedyOutputs`) is the most requests open at once, measured
    at the client.

    Raises:
        helpers.errors.CookbookError: the server does not return token ids (vLLM before
            ``return_token_ids``), naming the release needed.
        openai.BadRequestError: any other refusal, as the server worded it.
        ValueError: ``concurrency`` is not a whole number of 1 or more.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency={concurrency!r}: pass a whole number of 1 or more.")
    client = make_client(server.base_url)
    spans: list[tuple[float, float]] = []

    def one(n: int, p: str) -> GreedyOutput:
        t0 = time.monotonic()
        out = _greedy_output(client, server, n, p, max_tokens, thinking, top_logprobs)
        spans.append((t0, time.monotonic()))
        return out

    if concurrency == 1:
        outputs = GreedyOutputs(one(n, p) for n, p in enumerate(prompts))
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            outputs = GreedyOutputs(pool.map(one, range(len(prompts)), prompts))
    outputs.in_flight = max(
        (sum(1 for a, b in spans if a <= start < b) for start, _ in spans), default=0
    )
    return outputs


class GreedyOutputs(list):
    """:func:`greedy_tokens`' outputs (a ``list[GreedyOutput]`` in prompt order), with
    ``in_flight``: the most requests open at once while they were generated (1: one at a
    time)."""

    in_flight: int = 0


def _greedy_output(client, server, n: int, p: str, max_tokens: int, thinking: bool, top: int):
    """One prompt's :class:`GreedyOutput` (see :func:`greedy_tokens`)."""
    import openai

    from helpers.errors import CookbookError

    top_k = top
    try:
        resp = _greedy_reply(client, server, p, max_tokens, thinking, top_k)
    except openai.BadRequestError as e:
        if not top_k or NAN_LOGPROB_ERROR not in str(e):
            raise
        warnings.warn(
            f"prompt {n}: the server could not write its top-{top_k} logprobs as JSON (a "
            "NaN logprob; vLLM clamps -inf but not NaN); asked again without them, so a "
            "difference in this output cannot be shown to be a tie",
            TopLogprobsUnreadableWarning,
            stacklevel=2,
        )
        top_k = 0
        resp = _greedy_reply(client, server, p, max_tokens, thinking, top_k)
    choice = resp.choices[0]
    ids = (choice.model_extra or {}).get("token_ids")
    if ids is None:
        raise CookbookError(
            "The server returned no token_ids: greedy matching needs vLLM's "
            "`return_token_ids` request field (vLLM 0.11 or later)."
        )
    content = (choice.logprobs.content or []) if top_k and choice.logprobs else []
    top = [frozenset(i for t in pos.top_logprobs if (i := _token_id(t.token)) is not None)
           for pos in content]  # fmt: skip
    return GreedyOutput(ids, top if len(top) == len(ids) else None)


@dataclass(frozen=True)
class Match:
    """How far two greedy runs agree.

    Attributes:
        rate: agreeing positions / compared positions over all prompts (1.0: identical).
        identical: prompts whose outputs are token-for-token the same.
        prompts: prompts compared.
        per_prompt: one row per prompt: ``compared`` positions, ``agree``, ``first_divergence``
            (the first differing position, or None), and both lengths.
        accepted: draft tokens accepted while ``other`` was generated
            (``vllm:spec_decode_num_accepted_tokens_total`` delta), or None when not measured.
        ties: prompts whose outputs first differ at a tie (each run's token among the other's
            top-5 there).
        unknown: prompts whose outputs first differ where a run's top-5 was not read (no
            ``top``, or vLLM could not write it): a tie there can be neither shown nor ruled out.
    """

    rate: float
    identical: int
    prompts: int
    per_prompt: pd.DataFrame
    accepted: int | None = None
    ties: int = 0
    unknown: int = 0

    @property
    def lossless(self) -> bool:
        """vLLM's rule: every output identical, or parting first at a tie (each run's token
        among the other's top-5 there)."""
        return self.identical + self.ties == self.prompts

    @property
    def vacuous(self) -> bool:
        """No drafted token was accepted during the compared requests: the comparison proves
        nothing (vLLM's own CPU test fails such a run)."""
        return self.accepted == 0

    def summary(self, label: str = "drafting") -> str:
        """One line for a notebook: the verdict, the agreeing share, the first divergence."""
        firsts = [int(x) for x in self.per_prompt["first_divergence"].dropna()]
        where = f"; first divergence at token {min(firsts)}" if firsts else ""
        verdict = "lossless" if self.lossless else "NOT lossless"
        if not self.lossless and self.unknown:  # a part where no tie could be checked
            beyond = self.prompts - self.identical - self.ties - self.unknown
            verdict = (f"NOT lossless ({beyond} part beyond a tie; {self.unknown} more where "
                       f"the top-{TIE_TOP_K} was not read)" if beyond else "not shown lossless: "
                       f"{self.unknown} of {self.prompts} outputs part where the top-{TIE_TOP_K} "
                       "was not read, so a tie there is unknown")  # fmt: skip
        if self.vacuous:
            verdict = "proves nothing (no drafted token was accepted during these requests)"
            beyond = self.prompts - self.identical - self.ties - self.unknown
            if beyond:  # nothing kept, yet the outputs differ: the drafting path changed them
                verdict += (
                    f", yet {beyond} of {self.prompts} outputs part beyond a tie: the drafting "
                    "path changed the outputs without keeping a drafted token"
                )
        ties = (
            f", {self.ties} part first at a tie (top-{TIE_TOP_K}, vLLM's rule)" if self.ties else ""
        )
        return (
            f"{label} vs no drafting, greedy: {verdict}: {self.rate:.1%} of token positions "
            f"agree, {self.identical}/{self.prompts} outputs identical{ties}{where}"
        )


def match(
    reference: Sequence[Sequence[int]], other: Sequence[Sequence[int]], accepted: int | None = None
) -> Match:
    """Compare ``other`` against ``reference`` prompt by prompt.

    Args:
        reference, other: token ids per prompt (greedy), the same prompts in the same order.
        accepted: draft tokens accepted while ``other`` was generated (:attr:`Match.accepted`).

    Raises:
        ValueError: the two runs cover a different number of prompts.
    """
    if len(reference) != len(other):
        raise ValueError(
            f"compare the same prompts: {len(reference)} reference outputs, {len(other)} others"
        )
    rows = []
    for i, (r, o) in enumerate(zip(reference, other, strict=True)):
        n = min(len(r), len(o))
        first = next((j for j in range(n) if r[j] != o[j]), None)
        tie = None if first is None else _tie(r, o, first)
        if first is None and len(r) != len(o):  # one stopped first: a difference, not a tie
            first, tie = n, False
        rows.append(
            {
                "prompt": i,
                "compared": n,
                "agree": sum(1 for a, b in zip(r[:n], o[:n], strict=True) if a == b),
                "first_divergence": first,
                "tie": tie,
                "reference_len": len(r),
                "other_len": len(o),
            }
        )
    table = pd.DataFrame(rows)
    compared = int(table["compared"].sum())
    rate = int(table["agree"].sum()) / compared if compared else 1.0
    identical = int(table["first_divergence"].isna().sum())
    ties = int((table["tie"] == True).sum())  # noqa: E712 - None (unknown) is neither
    unknown = int(table["tie"].isna().sum() - identical)
    return Match(rate, identical, len(rows), table, accepted, ties, unknown)


def _tie(r: Sequence[int], o: Sequence[int], j: int) -> bool | None:
    """vLLM's tie at position ``j``: each run's token among the other's top-5 there; None when
    a run's top-5 there is unknown (neither shown nor ruled out)."""
    rt, ot = getattr(r, "top", None), getattr(o, "top", None)
    if not rt or not ot or j >= len(rt) or j >= len(ot):
        return None
    return r[j] in ot[j] and o[j] in rt[j]
