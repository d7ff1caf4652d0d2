"""An engine that stopped making progress while its API still answers, from ``GET /metrics``
(vLLM's request gauges and token counters, ``vllm/v1/metrics/loggers.py``, 0.32.0-0.34.0): one
watcher for a benchmark point (:mod:`helpers.bench.point`) and ``VLLMServer.progress_check``."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from helpers.errors import BenchError
from helpers.server import vllm_log
from helpers.server.failures import Diagnosis, _flag_value

NUM_RUNNING = "vllm:num_requests_running"
NUM_WAITING = "vllm:num_requests_waiting"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
#: Seconds of no progress before a point is aborted (the client timeout would wait hours).
STALL_TIMEOUT_S = 60.0
STALL_POLL_S = 2.0  #: seconds between the ``/metrics`` scrapes that watch a running point
ENGINE_STALLED = "engine stalled: requests waiting, none running"
ENGINE_HUNG = "engine hung"


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum each sample of Prometheus text exposition over its label sets (escaped label
    values, ``+Inf`` / ``NaN`` and timestamps as ``prometheus_client``'s parser reads them).

    Args:
        text: the body of ``GET /metrics`` (Prometheus text format 0.0.4).

    Returns:
        ``{sample name: value summed over all label sets}`` (NaN samples skipped; histogram
        ``_bucket`` sums over ``le`` are meaningless and should not be read).

    Raises:
        BenchError: the text is not Prometheus exposition (names what to check).
    """
    totals: dict[str, float] = {}
    try:
        for sample in _samples(text):
            if not math.isnan(value := float(sample.value)):
                totals[sample.name] = totals.get(sample.name, 0.0) + value
    except ValueError as e:
        raise BenchError(
            f"The /metrics text is not Prometheus exposition ({e}); check the URL points at a "
            "vLLM server root (http://host:port), not at another service."
        ) from e
    return totals


def _samples(text: str):
    """Every sample of a ``/metrics`` scrape (ValueError when it is not Prometheus exposition)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text or ""):
        yield from family.samples


def engine_counters(metrics: str | Mapping[str, float]) -> dict[str, float | None]:
    """``{"running", "waiting", "tokens"}`` of one ``/metrics`` scrape (text or parsed), summed
    over engines: the request gauges and prompt + generation tokens since start, None if absent.

    Raises:
        BenchError: the text is not Prometheus exposition (:func:`parse_prometheus`).
    """
    if isinstance(metrics, str):
        metrics = parse_prometheus(metrics)
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


def _gpus(config: Any) -> tuple[bool, bool, bool]:
    """(several GPUs, data + expert parallel, NCCL's NVLS left on) for ``config``'s command."""
    argv = list(config.cli_flags()) if hasattr(config, "cli_flags") else []
    tp, dp = (int(_flag_value(config, f"--{k}-parallel-size") or 1) for k in ("tensor", "data"))
    env = {**os.environ, **(getattr(config, "env", None) or {})}
    nvls = env.get("NCCL_NVLS_ENABLE") != "0"
    return tp * dp > 1, dp > 1 and "--enable-expert-parallel" in argv, nvls


def engine_hung(
    seconds: float, running: int, config: Any, evidence: str = "", silent: float | None = None
) -> Diagnosis:
    """The sentence of an engine whose token counters stop with ``running`` requests running
    for ``seconds`` (the log's stats lines, or ``/metrics``: VLLMServer.progress_check), the
    log silent for ``silent`` seconds when known, and the public report it matches: a data +
    expert parallel engine (vllm #43547), several GPUs with NCCL's NVLS path on (NVIDIA/nccl
    #2167), else an engine blocked in a kernel or a CUDA synchronisation (vllm #52682)."""
    several, dp_ep, nvls = _gpus(config)
    if dp_ep:
        kind = "the data + expert parallel engine stall of vllm #43547"
        fix = (
            "restart the server; to confirm, run the same load with --data-parallel-size 1 "
            "(tensor parallel) or without --enable-expert-parallel"
        )
    elif several and nvls:
        kind = "NCCL's NVLS hang on several GPUs (NVIDIA/nccl #2167)"
        fix = "restart with NCCL_NVLS_ENABLE=0 (the registry's multi-GPU commands set it)"
    else:
        kind = "an engine blocked in a kernel or a CUDA synchronisation (vllm #52682)"
        fix = "restart the server; py-spy dump --pid <VLLM::EngineCore pid> shows where it waits"
    quiet = f", its log silent for {silent:.0f} s" if silent else ""
    return Diagnosis(
        "engine_stalled",
        f"{ENGINE_HUNG}: {running} requests running, no token counted for {seconds:.0f} s"
        f"{quiet}, while the API answers; this matches {kind}",
        fix,
        evidence,
    )


def silent_phase(phase: str | None, config: Any) -> str:
    """What to try when a start-up logs nothing in ``phase`` (a
    :func:`helpers.server.vllm_log.startup_phase` text) for minutes."""
    kind = vllm_log.phase_kind(phase)
    several, _, nvls = _gpus(config)
    nccl = "; on several GPUs NCCL_NVLS_ENABLE=0 (NVIDIA/nccl #2167)" if several and nvls else ""
    if kind == "loading weights" and nccl:
        return "several GPUs silent at weight load match NCCL's NVLS hang (NVIDIA/nccl #2167): restart with NCCL_NVLS_ENABLE=0"
    return {
        "capturing CUDA graphs": "capture fewer CUDA graphs (--max-cudagraph-capture-size, "
        "--cudagraph-capture-sizes) or none (--enforce-eager)" + nccl,
        "compiling (torch.compile)": "a cold compile can be silent for minutes: wait (raise "
        "startup_timeout), or skip it with --enforce-eager",
        "building FlashInfer kernels": "the first build is silent for up to ~30 min: raise "
        "startup_timeout and wait",
        "loading weights": "check the disk or network the weights come from",
    }.get(kind, "py-spy dump --pid <VLLM::EngineCore pid> shows where it waits" + nccl)
