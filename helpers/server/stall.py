"""An engine that stopped making progress while its API still answers, from ``GET /metrics``
(vLLM's request gauges and token counters, ``vllm/v1/metrics/loggers.py``, 0.32.0-0.34.0): one
watcher for a benchmark point (:mod:`helpers.bench.point`) and ``VLLMServer.progress_check``."""

from __future__ import annotations

from collections.abc import Mapping

NUM_RUNNING = "vllm:num_requests_running"
NUM_WAITING = "vllm:num_requests_waiting"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
#: Seconds of no progress before a point is aborted (the client timeout would wait hours).
STALL_TIMEOUT_S = 60.0
STALL_POLL_S = 2.0  #: seconds between the ``/metrics`` scrapes that watch a running point
ENGINE_STALLED = "engine stalled: requests waiting, none running"
ENGINE_HUNG = "engine hung"


def engine_counters(metrics: str | Mapping[str, float]) -> dict[str, float | None]:
    """``{"running", "waiting", "tokens"}`` of one ``/metrics`` scrape (text, or parsed by
    :func:`helpers.bench.metrics.parse_prometheus`), summed over engines: the request gauges and
    prompt + generation tokens counted since start, None where the scrape lacks one.

    Raises:
        ValueError: the text is not Prometheus exposition (``prometheus_client``'s parser).
    """
    if isinstance(metrics, str):
        from prometheus_client.parser import text_string_to_metric_families

        values: dict[str, float] = {}
        for sample in (s for f in text_string_to_metric_families(metrics) for s in f.samples):
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
        metrics = values
    tokens = [metrics[k] for k in (PROMPT_TOKENS, GENERATION_TOKENS) if k in metrics]
    return {
        "running": metrics.get(NUM_RUNNING),
        "waiting": metrics.get(NUM_WAITING),
        "tokens": sum(tokens) if tokens else None,
    }


class StallDetector:
    """Watches ``/metrics`` for an engine that made no progress for ``timeout`` seconds
    (default :data:`STALL_TIMEOUT_S`) while the API still answers: *stalled*, requests waiting
    and none running (the scheduler admits nothing); *hung*, requests running and neither token
    counter moving (a deadlocked kernel; ``vllm bench serve`` has no per-request timeout below
    aiohttp's 6 hours). vLLM 0.32.0 counts a prompt's tokens when its prefill ends
    (``IterationStats.update_from_output``, ``vllm/v1/metrics/stats.py``): keep ``timeout``
    above the longest prefill. An observation that breaks the pattern starts its clock again.

    Attributes:
        kind: ``"stalled"`` or ``"hung"`` once :meth:`observe` returned True, else None.
        waiting, running: requests waiting / running in the last observation of that kind.
        seconds: how long the pattern has lasted.
    """

    def __init__(self, timeout: float = STALL_TIMEOUT_S):
        self.timeout = float(timeout)
        self.since: float | None = None
        self.waiting = 0
        self.running = 0
        self.seconds = 0.0
        self.kind: str | None = None
        self._hung_since: float | None = None
        self._tokens: float | None = None

    def observe(
        self, t: float, running: float, waiting: float, tokens: float | None = None
    ) -> bool:
        """Add one observation; True once the engine counts as stalled or hung.

        Args:
            t: seconds (any monotonic clock).
            running, waiting: the two request gauges.
            tokens: prompt + generation tokens counted so far (None: unknown; no hang check).
        """
        if running == 0 and waiting > 0:
            if self.since is None:
                self.since = float(t)
            self.waiting, self.running = int(waiting), 0
            self.seconds = float(t) - self.since
            if self.seconds >= self.timeout:
                self.kind = "stalled"
                return True
        else:
            self.since = None
        if running > 0 and tokens is not None:
            if self._hung_since is None or tokens != self._tokens:
                self._hung_since, self._tokens = float(t), float(tokens)
            hung_for = float(t) - self._hung_since
            if hung_for >= self.timeout and hung_for > 0:  # two scrapes at least: no move
                self.kind, self.running, self.waiting = "hung", int(running), int(waiting)
                self.seconds = hung_for
                return True
        else:
            self._hung_since = self._tokens = None
        if self.since is None:
            self.seconds = 0.0
        return False

    def observe_metrics(self, t: float, metrics: str | Mapping[str, float]) -> bool:
        """:meth:`observe` with the :func:`engine_counters` of one ``/metrics`` scrape (text or
        parsed); a scrape without both gauges never counts."""
        now = engine_counters(metrics)
        if now["running"] is None or now["waiting"] is None:
            return False
        return self.observe(t, **now)

    @property
    def message(self) -> str:
        """One sentence on what was seen, e.g. "engine hung with 3 requests running (no
        tokens for 61 s; 0 waiting) while the API answered"."""
        if self.kind == "hung":
            return (
                f"{ENGINE_HUNG} with {self.running} requests running (no tokens for "
                f"{self.seconds:.0f} s; {self.waiting} waiting) while the API answered"
            )
        return (
            f"{ENGINE_STALLED} ({self.waiting} waiting, 0 running for {self.seconds:.0f} s "
            "while the API answered)"
        )
