"""Interrupts (Jupyter's stop button sends SIGINT into the kernel), re-run launch cells,
attach mode: with the real stand-in server, no mocks.

SIGINT is sent to this process from a timer thread, as the kernel gets it; Python raises
KeyboardInterrupt in the main thread wherever it is (sleeping in the readiness wait, or
joining the benchmark thread).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.request

import psutil
import pytest

from helpers.bench import metrics
from helpers.bench import sweep as bench
from helpers.server import launch, processes
from helpers.server.processes import find_leftovers
from helpers.server.vllm_server import VLLMServer
from tests.support.proctools import group_left


def _sigint_when(condition, timeout: float = 300.0, settle: float = 0.0) -> threading.Thread:
    """SIGINT to this process once ``condition()`` holds (checked every 0.2 s), after ``settle`` s."""

    def run():
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if condition():
                time.sleep(settle)
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.2)

    t = threading.Thread(target=run, name="test-sigint", daemon=True)
    t.start()
    return t


_group_left = group_left  # tests/support/proctools.py


@pytest.fixture(autouse=True)
def _sigint_raises_keyboardinterrupt():
    """SIGINT as a terminal or a Jupyter kernel delivers it (``KeyboardInterrupt``): a
    pytest-xdist worker ignores SIGINT (its controller owns Ctrl-C), so these tests put
    Python's default handler back while they run."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _bench_threads() -> list[threading.Thread | psutil.Process]:
    """The point's benchmark, alive: run_point's worker thread, or a child process running
    ``vllm.benchmarks.serve`` (the other mode, benchmarks/bench_point_modes.py)."""
    threads = [t for t in threading.enumerate() if t.name == "vllm-bench-serve" and t.is_alive()]
    return threads + _bench_children()


def _bench_children() -> list[psutil.Process]:
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "vllm.benchmarks.serve" in " ".join(p.cmdline()) and (
                p.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _running_requests(srv: VLLMServer) -> float:
    text = urllib.request.urlopen(srv.url + "/metrics", timeout=10).read().decode()
    return sum(
        v
        for k, v in metrics.parse_prometheus(text).items()
        if k.startswith("vllm:num_requests_running")
    )


@pytest.mark.server
def test_launch_interrupted_mid_wait_leaves_nothing(standin_config):
    """Stop pressed while the server starts: the launch ends it (no process of its group,
    no record, port free), and KeyboardInterrupt still reaches the caller."""
    srv = VLLMServer(standin_config, progress=False)
    # interrupt once the process exists and has logged its first lines (mid-wait)
    _sigint_when(
        lambda: (
            srv.pid is not None
            and srv.log_path is not None
            and srv.log_path.exists()
            and srv.log_path.stat().st_size > 200
        ),
        settle=2.0,
    )
    try:
        with pytest.raises(KeyboardInterrupt):
            srv.start()
        pgid = srv.pid
        assert pgid is not None and not srv.healthy()
        assert _group_left(pgid) == [], "a vLLM process of the interrupted launch is still alive"
        assert processes.port_is_free(srv.port)
        assert pgid not in [r.pid for r in find_leftovers(include_owned=True)]
        assert srv not in launch.running_servers()
    finally:
        srv.stop(verbose=False)  # a failed check above must not leave the server running


@pytest.mark.server
def test_sweep_interrupted_mid_point_leaves_no_benchmark_thread(standin_server):
    """Stop pressed during a point: the benchmark thread ends, the server stops generating
    for it (no request left running), and the next sweep measures alone."""
    assert not _bench_threads()
    started = threading.Event()

    def in_point():
        if _bench_threads():
            started.set()
        return started.is_set() and _running_requests(standin_server) > 0

    _sigint_when(in_point, settle=1.0)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        bench.sweep(
            standin_server.base_url,
            standin_server.config.served_model_name,
            standin_server.config.model,
            [2],
            input_len=32,
            output_len=256,
            # long enough (~25 s on 2 cores) that the interrupt always lands mid-point, even
            # when a loaded machine answers /metrics slowly; interrupted, it costs ~2 s
            num_prompts=64,
            num_warmups=0,
            label="interrupted",
            progress=False,
        )
    assert started.is_set() and time.monotonic() - t0 < 240
    assert not _bench_threads(), "the benchmark thread is still alive after the interrupt"
    deadline = time.monotonic() + 30
    while _running_requests(standin_server) > 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _running_requests(standin_server) == 0, (
        "the server still generates for the interrupted point"
    )
    assert standin_server.healthy()


@pytest.mark.server
def test_relaunching_the_same_command_reuses_the_running_server(standin_server, capsys):
    """Re-running the launch cell returns the server this process already runs (no second one)."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    again = launch.launch_server(standin_server.config)
    try:
        assert again is standin_server
        assert "reusing the server this kernel already runs" in capsys.readouterr().out
        assert {p.pid for p in psutil.Process().children(recursive=True)} <= before | {
            standin_server.pid
        }
    finally:  # a second server (the session's had died) is not left running
        if again is not standin_server:
            again.stop(verbose=False)


@pytest.mark.server
def test_attach_mode_reads_name_and_features_from_the_server(standin_server):
    """Attach mode asks the server: served name and root from /v1/models, features by probing."""
    srv = launch.attach_server(standin_server.base_url)
    served = srv.served_model()
    assert served["id"] == standin_server.config.served_model_name
    assert set(srv.probe_features()) == set(standin_server.config.features) & {
        "reasoning",
        "tool_calling",
    }
    srv.stop()  # not ours: a no-op
    assert standin_server.healthy()


@pytest.mark.server
def test_probing_for_a_model_the_server_does_not_serve_finds_no_features(standin_server):
    """The probe can say no: requests the server refuses count as no feature."""
    assert launch.attach_server(standin_server.base_url).probe_features("no-such-model") == ()
