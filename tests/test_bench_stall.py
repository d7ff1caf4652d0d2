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
from pathlib import Path

import psutil
import pytest

from helpers import errors as bench
from helpers.bench import point

RUNTIME = Path(__file__).parent / "data" / "runtime"
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


def _fake_engine(metrics_text: str):
    release = threading.Event()
    metrics = metrics_text.encode()
    chats = []

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
                self._send(200, metrics, "text/plain; version=0.0.4")
            elif self.path == "/health":
                self._send(200, b"")
            elif self.path == "/v1/models":
                self._send(200, json.dumps({"data": [{"id": "m"}]}).encode())
            else:
                self._send(404, b"{}")

        def do_POST(self):  # the engine never schedules it: the request just waits
            chats.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
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
