"""A fake vLLM server process: process mechanics without a model (standard library, plus
the recorded-log header reader of ``tests/support/record_logs.py``).

``helpers.server.vllm_server`` lifecycle logic that needs no model (start-up timeout,
heartbeat, phase names, process-group ending, server records, an owner or API server killed
with SIGKILL) is tested against this script instead of a real vLLM start (about 50 s on 2
cores each). It prints start-up lines in vLLM 0.32.0's wording (from
``tests/data/logs/startup_cpu.log``), forks a ``VLLM::EngineCore`` child that outlives its
parent as a real engine core does, and serves ``/health`` and ``/v1/models`` once ready
(options: :func:`main`). Real vLLM lifecycles stay in the suite: the session stand-in server,
the quickstart notebook's launch and stop, the speculative notebook's n-gram server, and the
two fleet replicas (one killed mid-sweep).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

if __name__ == "__main__":  # launched by path (tests.support.fake_vllm): the repository's root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.record_logs import exit_code  # noqa: E402


def _log(who: str, pid: int, text: str) -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"({who} pid={pid}) INFO {stamp} {text}", flush=True)


def _engine_core() -> None:
    """The child: named like vLLM's engine core (``setproctitle``, as vLLM's
    ``vllm/utils/system_utils.py`` does), ignores its parent's death, sleeps: like a real
    engine core whose API server died, only ending the process group ends it."""
    try:
        import setproctitle

        setproctitle.setproctitle("VLLM::EngineCore")
    except ImportError:  # pragma: no cover - vLLM depends on setproctitle
        pass
    _log(
        "EngineCore",
        os.getpid(),
        "[core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: fake",
    )
    while True:
        time.sleep(3600)


class _Handler(http.server.BaseHTTPRequestHandler):
    model = "fake"
    root = "fake"  # vLLM's ModelCard.root: what --model loaded
    running = 0  # --running: requests vLLM's gauge says run, with token counters that never move

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/health":
            body, status = b"", 200
        elif self.path == "/v1/models":
            body, status = (
                json.dumps(
                    {
                        "object": "list",
                        "data": [{"id": self.model, "object": "model", "root": self.root}],
                    }
                ).encode(),
                200,
            )
        elif self.path == "/metrics":  # vLLM's names and types (vllm/v1/metrics/loggers.py)
            body, status = (
                (
                    "# TYPE vllm:num_requests_running gauge\n"
                    f'vllm:num_requests_running{{engine="0",model_name="{self.model}"}} {self.running}\n'
                    "# TYPE vllm:num_requests_waiting gauge\n"
                    f'vllm:num_requests_waiting{{engine="0",model_name="{self.model}"}} 0.0\n'
                    "# TYPE vllm:prompt_tokens counter\n"
                    f'vllm:prompt_tokens_total{{engine="0",model_name="{self.model}"}} 120.0\n'
                    "# TYPE vllm:generation_tokens counter\n"
                    f'vllm:generation_tokens_total{{engine="0",model_name="{self.model}"}} 37.0\n'
                ).encode(),
                200,
            )
        else:
            body, status = b'{"detail": "Not Found"}', 404
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # keep the log to vLLM-like lines
        pass


def _replay(path: str) -> int:
    """Print a recorded log's lines (not its ``#`` header) and return the exit code its
    header names (1 when it names none)."""
    text = Path(path).read_text(encoding="utf-8")
    sys.stdout.write("".join(x for x in text.splitlines(keepends=True) if not x.startswith("#")))
    sys.stdout.flush()
    code = exit_code(text)
    return 1 if code is None else code


def main(argv: list[str] | None = None) -> int:
    """Act like ``python -m vllm.entrypoints.openai.api_server`` where the lifecycle code looks.

    ``--never-ready`` stays in the weight-loading phase forever (a shard progress line that
    never moves, no HTTP server); ``--ready-after S`` seconds of start-up before serving;
    ``--replay LOG`` prints a start-failure log recorded from a real vLLM launch (its ``#``
    header lines left out) and exits with the code its header names, as vLLM did (no engine
    child: those failures end the API server before it spawns one); ``--exit-after S`` exits
    with code 3 after S seconds of start-up (its engine child left running);
    ``--ignore-sigterm`` ignores SIGTERM until ready; ``--silent-capturing`` logs the start
    of CUDA-graph capture after the weights and then nothing (a capture that never ends);
    ``--running N`` serves ``/metrics`` saying N requests run while the token counters never
    move (a hung engine). Any other flag (every vLLM flag the
    config carries) is accepted and ignored.
    """
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="fake")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--never-ready", action="store_true")
    parser.add_argument("--ready-after", type=float, default=0.5)
    parser.add_argument("--replay", default=None)
    parser.add_argument("--exit-after", type=float, default=None)
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--silent-capturing", action="store_true")
    parser.add_argument("--running", type=int, default=0)
    args, _ = parser.parse_known_args(argv)
    if args.ignore_sigterm:  # a start-up that sits on SIGTERM (vLLM in early init can)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.replay:
        return _replay(args.replay)
    me = os.getpid()
    _log(
        "APIServer",
        me,
        f"[api_utils.py:286] non-default args: {{'host': {args.host!r}, 'port': {args.port}, 'model': {args.model!r}}}",
    )
    if os.fork() == 0:  # the engine core: same process group, as in vLLM
        _engine_core()
    _log("Worker", me, f"[cpu_model_runner.py:68] Starting to load model {args.model}...")
    if args.never_ready:
        while True:  # a weight load stuck on its first shard: the same progress line again
            print(
                "Loading safetensors checkpoint shards:   0% Completed | 0/10 [00:00<?, ?it/s]",
                flush=True,
            )
            time.sleep(0.5)
    if args.exit_after is not None:  # dies during start-up, as a failing vLLM does
        time.sleep(args.exit_after)
        print("RuntimeError: fake start-up failure (--exit-after)", flush=True)
        sys.exit(3)
    time.sleep(args.ready_after)
    _log("Worker", me, "[default_loader.py:501] Loading weights took 0.01 seconds")
    if args.silent_capturing:  # vLLM 0.32.0's tqdm text (v1/worker/gpu/cudagraph_utils.py)
        print("Capturing CUDA graphs (FULL):   0%|          | 0/35 [00:00<?, ?it/s]", flush=True)
        while True:
            time.sleep(3600)
    _log(
        "EngineCore",
        me,
        "[kv_cache_utils.py:2327] CPU KV cache size: 1,024 tokens, Maximum concurrency for 2,048 tokens per request: 0.50x",
    )
    _log(
        "EngineCore",
        me,
        "[core.py:402] init engine (profile, create kv cache, warmup model) took 0.01 s",
    )
    _Handler.model = args.served_model_name or args.model
    _Handler.root = args.model
    _Handler.running = args.running
    httpd = http.server.ThreadingHTTPServer((args.host, args.port), _Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _log("APIServer", me, f"[entry.py:140] Starting vLLM server on http://{args.host}:{args.port}")
    print("INFO:     Application startup complete.", flush=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
