"""helpers.bench.sweep aborts a point whose engine stalls or hangs behind a healthy API.

A real stalled or hung vLLM engine cannot be produced on demand on this machine, so the
server side is a small fake (process mechanics only): it answers ``/health`` and
``/v1/models``, never answers a chat request, and serves a real CPU server's ``/metrics``
scrape (``tests/data/runtime/metrics_busy.txt``, recorded by ``benchmarks/record_runtime.py``)
with the gauges at 0 running, 3 waiting (stalled), or 3 running, 0 waiting and token
counters that never move (hung: a deadlocked kernel). The client is the real one:
``vllm bench serve`` (``vllm.benchmarks.serve.main_async``) through
:func:`helpers.bench.point.run_point`.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time

import psutil
import pytest

from helpers import errors as bench
from helpers.bench import point
from tests.support import DATA as TEST_DATA

RUNTIME = TEST_DATA / "runtime"
vllm_bench = pytest.importorskip("vllm.benchmarks.serve")


def _gauges(running: int, waiting: int) -> str:
    """The recorded busy scrape with the two request gauges set (the counters as recorded)."""
    text = (RUNTIME / "metrics_busy.txt").read_text()
    text = re.sub(
        r"^(vllm:num_requests_running\{[^}]*\}) \S+$", rf"\1 {running}.0", text, flags=re.M
    )
    return re.sub(
        r"^(vllm:num_requests_waiting\{[^}]*\}) \S+$", rf"\1 {waiting}.0", text, flags=re.M
    )


def _stalled_metrics() -> str:
    return _gauges(running=0, waiting=3)


@pytest.fixture
def stalled_server():
    yield from _fake_engine(_stalled_metrics())


@pytest.fixture
def hung_server():
    # 3 requests "running", none waiting, prompt / generation counters frozen at the
    # recorded 324 / 73 tokens: what a deadlocked kernel shows
    yield from _fake_engine(_gauges(running=3, waiting=0))


@pytest.fixture
def hangs_after_three():
    # answers the first point (its initial test request and 2 prompts), then hangs; its
    # /metrics follow: the requests in flight run, and the answered ones' tokens are counted
    yield from _fake_engine(None, answer_first=3)


#: A streamed chat answer in the OpenAI SSE shape ``vllm bench serve`` reads (4 tokens).
SSE_ANSWER = (
    "".join(f'data: {{"choices": [{{"delta": {{"content": "t{i} "}}}}]}}\n\n' for i in range(4))
    + 'data: {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": 4}}\n\n'
    + "data: [DONE]\n\n"
).encode()


def _fake_engine(metrics_text: str | None, answer_first: int = 0):
    """A server that answers ``answer_first`` chats, then holds every other one. Its
    ``/metrics``: ``metrics_text`` as given, or (None) the recorded scrape with the requests
    in flight as running and 4 generated tokens counted per answered request."""
    release = threading.Event()
    chats = []
    in_flight = []

    def metrics() -> bytes:
        if metrics_text is not None:
            return metrics_text.encode()
        answered = min(len(chats), answer_first)
        text = _gauges(running=len(in_flight), waiting=0)
        return re.sub(
            r"^(vllm:generation_tokens_total\{[^}]*\}) \S+$",
            rf"\g<1> {73 + 4 * answered}.0",
            text,
            flags=re.M,
        ).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, code, body, ctype="application/json"):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/metrics":
                self._send(200, metrics(), "text/plain; version=0.0.4")
            elif self.path == "/health":
                self._send(200, b"")
            elif self.path == "/v1/models":
                self._send(200, json.dumps({"data": [{"id": "m"}]}).encode())
            else:
                self._send(404, b"{}")

        def do_POST(self):  # the engine never schedules it: the request just waits
            chats.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if len(chats) <= answer_first:  # until then, an engine that answers
                self._send(200, SSE_ANSWER, "text/event-stream")
                return
            in_flight.append(self.path)
            release.wait(120)
            try:
                self._send(503, b"{}")
            except OSError:  # the client was cancelled and hung up: expected
                pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", chats
    finally:
        release.set()
        srv.shutdown()
        srv.server_close()
        t.join(10)


@pytest.fixture
def tiny_tokenizer(tmp_path):
    """A byte-level tokenizer folder for vllm bench's random prompts (no hub access here)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(tmp_path / "tok")
    return tmp_path / "tok"


def test_stalled_engine_aborts_the_point(stalled_server, tiny_tokenizer, tmp_path):
    url, chats = stalled_server
    t0 = time.monotonic()
    with pytest.raises(bench.BenchError) as err:
        point.run_point(
            url, "m", tiny_tokenizer, concurrency=2, num_prompts=4, input_len=8, output_len=4,
            out_dir=tmp_path, seed=0, num_warmups=0, stall_timeout=3.0,
        )  # fmt: skip
    took = time.monotonic() - t0
    assert str(err.value).startswith("engine stalled: requests waiting, none running")
    assert "3 waiting" in str(err.value)
    assert chats, "the benchmark's request reached the server"
    print(f"aborted after {took:.1f} s")
    assert took < 60, f"aborted after {took:.0f} s: the watch did not cancel the point"
    # nothing of the benchmark is left running
    assert not [t for t in threading.enumerate() if t.name == "vllm-bench-serve"]
    # nor a child process (run_point's other mode, benchmarks/bench_point_modes.py)
    children = psutil.Process().children(recursive=True)
    assert not [p for p in children if "vllm.benchmarks.serve" in " ".join(p.cmdline())]
    assert err.value.log_path.exists()


def test_hung_engine_with_requests_running_aborts_the_point(hung_server, tiny_tokenizer, tmp_path):
    """Requests run but no prompt or generation token is counted for the stall timeout: the
    point is cancelled with "engine hung with N requests running (no tokens for T s)"."""
    url, chats = hung_server
    t0 = time.monotonic()
    with pytest.raises(bench.BenchError) as err:
        point.run_point(
            url, "m", tiny_tokenizer, concurrency=2, num_prompts=4, input_len=8, output_len=4,
            out_dir=tmp_path, seed=0, num_warmups=0, stall_timeout=3.0,
        )  # fmt: skip
    took = time.monotonic() - t0
    msg = str(err.value)
    assert re.match(r"engine hung with 3 requests running \(no tokens for \d+ s", msg), msg
    assert "point aborted" in msg and "restart the server" in msg
    assert chats, "the benchmark's request reached the server"
    assert took < 60, f"aborted after {took:.0f} s: the watch did not cancel the point"
    assert not [t for t in threading.enumerate() if t.name == "vllm-bench-serve"]
    assert err.value.log_path.exists()


def test_a_sweep_whose_engine_hangs_keeps_the_points_that_finished(
    hangs_after_three, tiny_tokenizer, tmp_path
):
    """The first point is answered, the second hangs: the sweep cancels it, and the first
    point stays, on disk (in place of an earlier run's) and on the error's ``.results``."""
    from helpers.bench import sweep as sweeps

    url, chats = hangs_after_three
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "default-c4.json").write_text("{}")  # an earlier run of the label
    with pytest.raises(bench.BenchError) as err:
        sweeps.sweep(
            url, "m", tiny_tokenizer, [1, 2], input_len=8, output_len=4, num_prompts=2,
            num_warmups=0, out_dir=folder, stall_timeout=3.0, progress=False,
        )  # fmt: skip
    msg = str(err.value)
    assert msg.startswith("engine hung with 1 requests running (no tokens for "), msg
    assert f"The 1 point(s) finished before it are kept in {folder}" in msg
    kept = err.value.results
    assert list(kept["concurrency"]) == [1] and int(kept["completed"].iloc[0]) == 2
    assert sorted(p.name for p in folder.glob("*.json")) == ["default-c1.json"]
    assert err.value.log_path == folder / "default-c2.failed.log" and err.value.log_path.exists()
    assert not [p for p in folder.iterdir() if p.name.startswith(".partial")]


@pytest.fixture
def answers_all():
    yield from _fake_engine(None, answer_first=1000)


def _no_caching_lines(capsys) -> tuple[list[str], list[str]]:
    """The printed lines naming a server without prefix caching, and the WARNING lines."""
    from helpers.bench.prefix_floor import NO_PREFIX_CACHING

    said = capsys.readouterr()
    lines = (said.out + said.err).splitlines()
    return [ln for ln in lines if NO_PREFIX_CACHING in ln], [
        ln for ln in lines if ln.startswith("WARNING")
    ]


#: A point of the fake engine's: a shared prefix, so the sweep reads the prefix cache's floor.
_POINT = dict(input_len=8, output_len=4, prefix_len=4, num_prompts=2, num_warmups=0)


def test_a_server_without_prefix_caching_is_named_once_not_warned_per_point(
    answers_all, tiny_tokenizer, tmp_path, capsys
):
    """A shared prefix on a server that runs without prefix caching (the recorded scrape's
    ``enable_prefix_caching="False"``, as the CPU stand-in) is named once per sweep, by the
    floor line read from the server, with no WARNING per point; every run's row still carries
    the warning. Inside ``said_once`` a sweep and the repeats of its points name it once in
    all: the speculative notebook printed 6 floor lines and 6 WARNINGs for its two servers."""
    from helpers.bench import sweep as sweeps
    from lab.bench.repeats import repeat_point, said_once

    url, _ = answers_all
    df = repeat_point(url, "m", tiny_tokenizer, 1, 2, out_dir=tmp_path / "rep", progress=False,
                      **_POINT)  # fmt: skip
    named, warned = _no_caching_lines(capsys)
    assert len(named) == 1 and named[0].startswith("prefix cache default: no prefix caching"), named
    assert warned == [], warned
    assert len(df) == 2 and df["prefix_cache_warning"].notna().all()
    # a later sweep is a new sweep: it names it again
    sweeps.sweep(url, "m", tiny_tokenizer, [1, 2], out_dir=tmp_path / "again", progress=False,
                 **_POINT)  # fmt: skip
    named, warned = _no_caching_lines(capsys)
    assert len(named) == 1 and warned == [], (named, warned)
    # one server's sweep and its repeats inside said_once: named once in all
    with said_once():
        sweeps.sweep(url, "m", tiny_tokenizer, [1, 2], out_dir=tmp_path / "s", progress=False,
                     **_POINT)  # fmt: skip
        for c in (1, 2):
            repeat_point(url, "m", tiny_tokenizer, c, 2, out_dir=tmp_path / f"r{c}",
                         progress=False, **_POINT)  # fmt: skip
    named, warned = _no_caching_lines(capsys)
    assert len(named) == 1 and warned == [], (named, warned)


@pytest.fixture
def answers_all_without_cache_config():
    """``answers_all`` whose ``/metrics`` has no ``vllm:cache_config_info`` (e.g. a router's)."""
    text = re.sub(r"^vllm:cache_config_info\{.*$", "", _gauges(0, 0), flags=re.M)
    yield from _fake_engine(text, answer_first=1000)


def test_a_missed_prefix_nothing_else_explained_is_still_a_warning_once_a_sweep(
    answers_all_without_cache_config, tiny_tokenizer, tmp_path, capsys
):
    """No floor line to say it (no cache configuration in ``/metrics``): the sweep's WARNING
    names the missed prefix, once for its points."""
    from helpers.bench import sweep as sweeps

    url, _ = answers_all_without_cache_config
    sweeps.sweep(url, "m", tiny_tokenizer, [1, 2], out_dir=tmp_path, progress=False, **_POINT)
    named, warned = _no_caching_lines(capsys)
    assert len(warned) == 1 and "no prefix-cache block hit" in warned[0], warned
    assert named == warned


def test_a_killed_runs_stage_and_an_earlier_failed_log_go_a_live_runs_stage_stays(
    answers_all, tiny_tokenizer, tmp_path
):
    """A run killed mid-sweep (SIGKILL: nothing of it runs again) leaves its private stage; the
    next sweep of the label removes it when its pid is gone, and keeps another live run's.
    An earlier run's failed point's log goes with that run's points ("a folder never mixes two
    runs"). A concurrency given twice is one point (it overwrote itself)."""
    import subprocess
    import sys

    from helpers.bench import sweep as sweeps

    url, _ = answers_all
    folder = tmp_path / "bench"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    dead = folder / f".partial-default-{gone}-0123abcd"
    live = folder / f".partial-default-{psutil.Process().ppid()}-4567ef01"
    for stage in (dead, live):
        stage.mkdir(parents=True)
        (stage / "default-c1.json").write_text("{}")
    (folder / "default-c2.failed.log").write_text("an earlier run's failure")
    df = sweeps.sweep(url, "m", tiny_tokenizer, [2, 2], out_dir=folder, progress=False, **_POINT)
    assert list(df["concurrency"]) == [2]
    assert not dead.exists() and live.exists()
    assert not (folder / "default-c2.failed.log").exists()
    assert sorted(p.name for p in folder.glob("*.json")) == ["default-c2.json"]
