"""helpers.server.stall: an engine that stops making progress behind an answering API,
read from a real CPU server's ``/metrics`` scrape (tests/data/runtime/metrics_busy.txt,
benchmarks/record_runtime.py) with its gauges and token counters set; the same watcher a
benchmark point (helpers.bench.point) and ``VLLMServer.progress_check`` use."""

from __future__ import annotations

import re

from helpers.server.stall import StallDetector, engine_counters
from tests.support import DATA as TEST_DATA

RUNTIME = TEST_DATA / "runtime"


def _scrape(running: int, waiting: int) -> str:
    """A real CPU server's scrape taken mid-sweep (tests/data/runtime/metrics_busy.txt,
    benchmarks/record_runtime.py) with the two gauges set.

    The recorded scrape has both gauge families with vLLM's labels; only their values change
    (the stall itself is simulated at the data level).
    """
    text = (RUNTIME / "metrics_busy.txt").read_text()
    assert "vllm:num_requests_running{" in text and "vllm:num_requests_waiting{" in text
    text = re.sub(
        r"^(vllm:num_requests_running\{[^}]*\}) \S+$", rf"\1 {running}.0", text, flags=re.M
    )
    return re.sub(
        r"^(vllm:num_requests_waiting\{[^}]*\}) \S+$", rf"\1 {waiting}.0", text, flags=re.M
    )


def test_stall_detector_on_recorded_metrics():
    d = StallDetector(timeout=60)
    # busy, then waiting with nothing running for 58 s: not yet
    assert not d.observe_metrics(0, _scrape(running=2, waiting=1))
    for t in range(2, 62, 2):
        stalled = d.observe_metrics(t, _scrape(running=0, waiting=3))
    assert d.seconds == 58 and not stalled
    assert d.observe_metrics(62, _scrape(running=0, waiting=3))  # over a minute
    assert d.message.startswith("engine stalled: requests waiting, none running")
    assert "3 waiting" in d.message
    # a running request resets the clock; an idle server (nothing waiting) is not a stall
    d2 = StallDetector(timeout=60)
    d2.observe_metrics(0, _scrape(0, 3))
    d2.observe_metrics(50, _scrape(1, 3))
    assert not d2.observe_metrics(100, _scrape(0, 3))
    assert not StallDetector(timeout=1).observe_metrics(100, _scrape(0, 0))
    # a scrape without the gauges never counts
    assert not StallDetector(timeout=0).observe_metrics(0, "vllm:other 1\n")


def _counters(text: str, prompt: float, generation: float) -> str:
    text = re.sub(r"^(vllm:prompt_tokens_total\{[^}]*\}) \S+$", rf"\1 {prompt}", text, flags=re.M)
    return re.sub(
        r"^(vllm:generation_tokens_total\{[^}]*\}) \S+$", rf"\1 {generation}", text, flags=re.M
    )


def test_stall_detector_names_a_hung_engine_from_recorded_metrics():
    """Requests running while the token counters stand still for the timeout: hung. Tokens
    that move, or nothing running, start the clock again."""
    d = StallDetector(timeout=60)
    busy = _scrape(running=3, waiting=0)
    assert "vllm:prompt_tokens_total{" in busy and "vllm:generation_tokens_total{" in busy
    # generating: the counters move every scrape, never hung
    for t in range(0, 200, 2):
        assert not d.observe_metrics(t, _counters(busy, 324, 73 + t))
    # then nothing moves: hung once a minute has passed with no token
    frozen = _counters(busy, 324, 400)
    hung = [d.observe_metrics(t, frozen) for t in range(200, 264, 2)]
    assert not any(hung[:30]) and hung[-1], hung
    assert d.kind == "hung"
    assert d.message.startswith("engine hung with 3 requests running (no tokens for 6")
    # a prompt finishing its prefill counts as progress; an idle server is no hang
    d2 = StallDetector(timeout=60)
    d2.observe_metrics(0, frozen)
    d2.observe_metrics(50, _counters(busy, 500, 400))
    assert not d2.observe_metrics(100, _counters(busy, 500, 400))
    idle = _counters(_scrape(running=0, waiting=0), 500, 400)
    assert not StallDetector(timeout=1).observe_metrics(100, idle)


def test_engine_counters_read_the_recorded_scrape_and_sum_engines():
    """The one reading of the gauges and token counters, for the bench's watch and the server
    handle's: the recorded scrape's own values, summed over engines, None where one lacks it."""
    text = _counters(_scrape(running=3, waiting=1), 324, 400)
    assert engine_counters(text) == {"running": 3.0, "waiting": 1.0, "tokens": 724.0}
    two = 'vllm:num_requests_running{engine="0"} 3.0\nvllm:num_requests_running{engine="1"} 2.0\n'
    assert engine_counters(two)["running"] == 5.0
    parsed = {"vllm:num_requests_running": 2.0, "vllm:prompt_tokens_total": 5.0}
    assert engine_counters(parsed) == {"running": 2.0, "waiting": None, "tokens": 5.0}
    assert engine_counters("vllm:other 1\n") == {"running": None, "waiting": None, "tokens": None}
