"""Benchmark a running vLLM server with vLLM's own load generator and load the results.

One *point* is one run of ``vllm bench serve`` (random dataset, chat endpoint, a fixed
``--max-concurrency``) that writes one JSON file (``--save-result``). A *sweep* is a list
of points at rising concurrency, loaded into a :class:`pandas.DataFrame`.

The load generator is vLLM's, never a hand-rolled loop: :func:`run_point` calls
``vllm.benchmarks.serve.add_cli_args`` + ``main`` (the code behind ``vllm bench serve``;
the CPU build's ``vllm`` console script is broken, see ``docs/CONVENTIONS.md``). It runs
in-process, in a worker thread, because

- importing ``vllm.benchmarks.serve`` takes ~10 s on the CPU box; a subprocess per point
  would pay that each time, in-process pays it once per kernel;
- a worker thread gets its own event loop, so ``asyncio.run`` inside ``main`` works from
  a Jupyter cell (whose thread already runs a loop);
- the benchmark's side effects on the caller are undone: its console output goes to a log
  file next to the JSON, ``gc.freeze()`` is reverted and the global ``random`` / numpy
  seeds are restored.

JSON keys and Prometheus metric names are vLLM's (``vllm/benchmarks/serve.py``,
``vllm/v1/spec_decode/metrics.py``, ``vllm/v1/metrics/loggers.py``; see docs/DESIGN.md).
Column names in the DataFrame keep those terms: ``ttft`` (time to first token), ``tpot``
(time per output token after the first), ``itl`` (inter-token latency), ``e2el``
(end-to-end latency per request), all in milliseconds.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import math
import random
import re
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.errors import CookbookError
from helpers.paths import out_dir as _out_dir

__all__ = [
    "BenchError",
    "Comparison",
    "SpecDecodeCounters",
    "Spread",
    "StallDetector",
    "acceptance_from_counters",
    "acceptance_verdict",
    "compare",
    "default_num_prompts",
    "higher_is_better",
    "winner",
    "load_results",
    "parse_prometheus",
    "point_seed",
    "rank",
    "repeat_point",
    "run_point",
    "scrape_metrics",
    "server_root",
    "spec_decode_counters",
    "spread",
    "sweep",
]

#: Chat endpoint and backend that ``vllm bench serve`` uses to talk to ``/v1/chat/completions``.
CHAT_ENDPOINT = "/v1/chat/completions"
CHAT_BACKEND = "openai-chat"

#: Prometheus counters of speculative decoding (``vllm/v1/spec_decode/metrics.py``).
SPEC_DECODE_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DECODE_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_DECODE_ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
#: Prefix-cache counters (``vllm/v1/metrics/loggers.py``), used to show points do not share a cache.
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"

_LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
_LATENCY_STATS = ("mean", "median", "p99")

#: Column order of :func:`load_results`; optional columns appear only when some point has them.
COLUMNS = [
    "label",
    "concurrency",
    "num_prompts",
    "input_len",
    "output_len",
    "gpu_count",
    "completed",
    "failed",
    "duration_s",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "output_throughput_per_gpu",
    "tokens_per_s_per_user",
    "e2e_tokens_per_s_per_user",
    "request_goodput",
    *[f"{stat}_{m}_ms" for m in _LATENCY_METRICS for stat in _LATENCY_STATS],
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_level",
    "spec_decode_verdict",
    "prefix_cache_hit_rate",
    "path",
]
_OPTIONAL_COLUMNS = {
    "request_goodput",
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_level",
    "spec_decode_verdict",
    "prefix_cache_hit_rate",
}


class BenchError(CookbookError, RuntimeError):
    """A benchmark point could not run or produced no successful request.

    Attributes:
        log_path: the point's captured ``vllm bench serve`` console output, when there is one.
    """

    def __init__(self, message: str, log_path: Path | None = None):
        super().__init__(message)
        self.log_path = log_path


# --------------------------------------------------------------------------- /metrics


@dataclass(frozen=True)
class SpecDecodeCounters:
    """Speculative-decoding counters summed over engines, as read from one ``/metrics`` scrape.

    All three are cumulative since server start (Prometheus counters), in drafts / tokens.
    """

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum each sample of Prometheus text exposition over its label sets.

    Parsed with ``prometheus_client.parser.text_string_to_metric_families`` (the client
    library's own parser, issue 12), so escaped label values, ``+Inf`` / ``NaN`` and
    timestamps are handled as Prometheus defines them.

    Args:
        text: the body of ``GET /metrics`` (Prometheus text format 0.0.4).

    Returns:
        ``{sample name: value summed over all label sets}``, e.g.
        ``{"vllm:spec_decode_num_drafts_total": 41.0, ...}``. NaN samples are skipped;
        histogram samples keep their ``_bucket`` / ``_sum`` / ``_count`` names (buckets
        summed over ``le`` are meaningless and should not be read).

    Raises:
        BenchError: the text is not Prometheus exposition (names what to check).
    """
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text or ""):
            for sample in family.samples:
                value = float(sample.value)
                if math.isnan(value):
                    continue
                totals[sample.name] = totals.get(sample.name, 0.0) + value
    except ValueError as e:
        raise BenchError(
            f"The /metrics text is not Prometheus exposition ({e}); check the URL points at a "
            "vLLM server root (http://host:port), not at another service."
        ) from e
    return totals


def spec_decode_counters(metrics: str | Mapping[str, float]) -> SpecDecodeCounters | None:
    """Read the three speculative-decoding counters from a ``/metrics`` scrape.

    Args:
        metrics: ``/metrics`` text, or the dict :func:`parse_prometheus` made of it.

    Returns:
        The counters, or ``None`` when the server exposes none of them (speculative
        decoding off).
    """
    values = parse_prometheus(metrics) if isinstance(metrics, str) else metrics
    names = (SPEC_DECODE_DRAFTS, SPEC_DECODE_DRAFT_TOKENS, SPEC_DECODE_ACCEPTED_TOKENS)
    if not any(n in values for n in names):
        return None
    return SpecDecodeCounters(*(float(values.get(n, 0.0)) for n in names))


def acceptance_from_counters(
    before: SpecDecodeCounters | None, after: SpecDecodeCounters | None
) -> dict[str, float] | None:
    """Acceptance rate and length over the requests served between two scrapes.

    Same definitions as ``vllm bench serve`` (``vllm/benchmarks/serve.py``):
    acceptance rate = accepted / draft tokens × 100 (percent); acceptance length =
    1 + accepted / drafts (tokens emitted per target-model forward pass, the ``1`` being
    the target's own token).

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


#: Verdict of a point whose drafts were all rejected (issue 14.5).
ACCEPTED_NOTHING = "speculative decoding accepted nothing"


def acceptance_verdict(point: Mapping[str, Any]) -> dict[str, str]:
    """Judge a point's speculative decoding from its counters or its acceptance figures.

    Args:
        point: a benchmark JSON / row with ``spec_decode_num_drafts``,
            ``spec_decode_draft_tokens``, ``spec_decode_accepted_tokens`` (counter deltas) or
            at least ``spec_decode_acceptance_length`` / ``_rate``.

    Returns:
        ``{"spec_decode_level": "error", "spec_decode_verdict": "speculative decoding accepted
        nothing (576 drafts, 4032 draft tokens, 0 accepted): ..."}`` when drafts were made
        and none accepted; ``"warning"`` with "not paying off: ..." when the mean acceptance
        length is below :data:`helpers.diagnose.PAYING_OFF_LENGTH`; ``"ok"`` otherwise; ``{}``
        when the point has no speculative-decoding figures.
    """
    from .diagnose import PAYING_OFF_LENGTH

    drafts = _num(point.get("spec_decode_num_drafts"))
    draft_tokens = _num(point.get("spec_decode_draft_tokens"))
    accepted = _num(point.get("spec_decode_accepted_tokens"))
    length = _num(point.get("spec_decode_acceptance_length"))
    rate = _num(point.get("spec_decode_acceptance_rate"))
    if drafts is None and length is None and rate is None:
        return {}
    counted = drafts is not None and draft_tokens is not None and accepted is not None
    if (counted and drafts > 0 and accepted == 0) or (not counted and rate == 0.0):
        what = (
            f" ({int(drafts)} drafts, {int(draft_tokens)} draft tokens, 0 accepted)" if counted else " (acceptance rate 0%)"
        )
        return {
            "spec_decode_level": "error",
            "spec_decode_verdict": f"{ACCEPTED_NOTHING}{what}: every draft token was rejected, so the "
            "drafter only costs time; check the drafter matches the served checkpoint and revision",
        }
    if length is not None and length < PAYING_OFF_LENGTH:
        return {
            "spec_decode_level": "warning",
            "spec_decode_verdict": f"not paying off: acceptance length {length:.2f}; check "
            "num_speculative_tokens against the drafter's block size",
        }
    if length is None:
        return {}
    return {"spec_decode_level": "ok", "spec_decode_verdict": f"{length:.2f} tokens per target step"}


def server_root(base_url: str) -> str:
    """The server root for ``/metrics``, ``/health`` and ``vllm bench serve --base-url``.

    Args:
        base_url: ``http://host:port`` or the OpenAI base ``http://host:port/v1``.
    """
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def scrape_metrics(base_url: str, timeout: float = 10.0) -> str:
    """``GET <server root>/metrics`` and return the Prometheus text.

    Args:
        base_url: server root or ``.../v1`` (the ``/v1`` is dropped: ``/metrics`` sits at
            the root).
        timeout: seconds.

    Raises:
        BenchError: the server did not answer.
    """
    url = server_root(base_url) + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError) as e:
        raise BenchError(
            f"Could not read {url} ({e}). Is the server running? Start it with "
            "helpers.server.VLLMServer(...).start() and pass its base_url."
        ) from e


def _healthy(root: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(root + "/health", timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _served_models(root: str, timeout: float = 10.0) -> list[str]:
    url = root + "/v1/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise BenchError(
            f"The server at {root} did not answer {url} ({e}). Start it first "
            "(helpers.server.VLLMServer(...).start()) and pass its base_url."
        ) from e
    return [m.get("id") for m in body.get("data", [])]


# --------------------------------------------------------------------------- one point


def point_seed(seed: int, label: str, concurrency: int, input_len: int, output_len: int) -> int:
    """A random-dataset seed of its own for one point.

    vLLM's random dataset builds prompt ``i`` from ``(offset_i + i + arange(len)) % vocab``
    with offsets drawn from ``numpy.random.default_rng(seed)``, so two points with the same
    seed send the same token prefixes and the second would be served from the first's
    prefix cache. Hashing the point's identity into the seed keeps points apart.

    Returns:
        an int in ``[0, 2**31)``, stable across runs and Python versions (CRC-32).
    """
    key = f"{seed}|{label}|{concurrency}|{input_len}|{output_len}".encode()
    return zlib.crc32(key) & 0x7FFFFFFF


def default_num_prompts(concurrency: int, floor: int = 16) -> int:
    """Prompts per point when the caller gives none: ``max(4 × concurrency, floor)``.

    At 4× the concurrency the server spends most of the run at full concurrency (the
    ramp-up and drain at the ends are a small share); the floor keeps low-concurrency
    points from resting on a handful of requests.
    """
    return max(4 * int(concurrency), int(floor))


def default_num_warmups(concurrency: int, cap: int = 8) -> int:
    """Warm-up requests per point when the caller gives none: ``min(concurrency, cap)``, >= 1.

    Enough to fill the batch once at low concurrency (CUDA graphs and kernels for that batch
    size are then warm) without spending minutes at high concurrency. The H200 reference run
    showed why it matters: BF16 at concurrency 64 without a warm-up gave 4,300 tok/s instead of
    6,191 (issue 8's reference notes).
    """
    return max(1, min(int(concurrency), int(cap)))


_BENCH_LOCK = threading.Lock()

#: Seconds a point may sit with requests waiting and none running before it is aborted as
#: a stalled engine (issue 14.7: "for over a minute"); the client timeout would wait hours.
STALL_TIMEOUT_S = 60.0
#: Seconds between the ``/metrics`` scrapes that watch a running point.
STALL_POLL_S = 2.0
#: What a stalled point's error and the diagnosis say.
ENGINE_STALLED = "engine stalled: requests waiting, none running"
NUM_RUNNING = "vllm:num_requests_running"
NUM_WAITING = "vllm:num_requests_waiting"


class StallDetector:
    """Watches ``(time, running, waiting)`` observations for a stalled engine.

    Stalled: ``vllm:num_requests_waiting`` > 0 and ``vllm:num_requests_running`` == 0 in every
    observation for ``timeout`` seconds (the API still answers; the engine admits nothing).
    Any observation with a request running, or none waiting, starts the clock again.

    Args:
        timeout: seconds (default :data:`STALL_TIMEOUT_S`).
    """

    def __init__(self, timeout: float = STALL_TIMEOUT_S):
        self.timeout = float(timeout)
        self.since: float | None = None
        self.waiting = 0
        self.seconds = 0.0

    def observe(self, t: float, running: float, waiting: float) -> bool:
        """Add one observation (``t`` in seconds); True once the engine counts as stalled."""
        if running == 0 and waiting > 0:
            if self.since is None:
                self.since = float(t)
            self.waiting = int(waiting)
            self.seconds = float(t) - self.since
            return self.seconds >= self.timeout
        self.since, self.seconds = None, 0.0
        return False

    def observe_metrics(self, t: float, metrics: str | Mapping[str, float]) -> bool:
        """:meth:`observe` with the gauges of one ``/metrics`` scrape (text or parsed)."""
        values = parse_prometheus(metrics) if isinstance(metrics, str) else metrics
        if NUM_RUNNING not in values or NUM_WAITING not in values:
            return False
        return self.observe(t, values[NUM_RUNNING], values[NUM_WAITING])

    @property
    def message(self) -> str:
        return (
            f"{ENGINE_STALLED} ({self.waiting} waiting, 0 running for {self.seconds:.0f} s "
            "while the API answered)"
        )


def stop_thread(thread: threading.Thread, timeout: float = 30.0) -> bool:
    """Stop a benchmark worker thread: raise ``KeyboardInterrupt`` inside it (CPython's
    ``PyThreadState_SetAsyncExc``) until it ends, as Ctrl-C would in a main thread.

    ``vllm bench serve`` runs ``asyncio.run(...)`` in the worker; the exception unwinds its
    event loop, whose ``asyncio.run`` cancels the in-flight request tasks and closes their
    HTTP connections, so the server stops generating for them.

    Args:
        timeout: seconds to keep trying (re-raised every 5 s, leaving the loop time to
            cancel its tasks; the exception is delivered only when the thread runs Python code).
    Returns:
        True when the thread has ended.
    """
    import ctypes

    deadline = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < deadline:
        if thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread.ident), ctypes.py_object(KeyboardInterrupt)
            )
        thread.join(5.0)
    return not thread.is_alive()


def _run_bench_main(
    argv: list[str],
    log_path: Path,
    *,
    root: str | None = None,
    stall_timeout: float | None = None,
    poll: float = STALL_POLL_S,
) -> dict[str, Any]:
    """Parse ``argv`` with vLLM's bench parser and run it in a worker thread's own event loop.

    With ``root`` and ``stall_timeout``, the calling thread scrapes ``<root>/metrics`` every
    ``poll`` seconds while the point runs and cancels the benchmark when the engine stalls
    (:class:`StallDetector`).
    """
    import asyncio
    import time

    import numpy as np

    import vllm.benchmarks.serve as vbs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    vbs.add_cli_args(parser)
    args = parser.parse_args(argv)

    outcome: dict[str, Any] = {}
    buf = io.StringIO()
    main_async = getattr(vbs, "main_async", None)  # vLLM 0.32.0: main() = asyncio.run(main_async(args))

    def target() -> None:
        if main_async is None:  # an older bench module: no way to cancel, run as is
            try:
                outcome["result"] = vbs.main(args)
            except BaseException as e:  # re-raised in the caller's thread
                outcome["error"] = e
            return
        loop = asyncio.new_event_loop()
        try:
            task = loop.create_task(main_async(args))
            outcome["cancel"] = lambda: loop.call_soon_threadsafe(task.cancel)
            outcome["result"] = loop.run_until_complete(task)
        except BaseException as e:  # re-raised in the caller's thread
            outcome["error"] = e
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    detector = StallDetector(stall_timeout) if (root and stall_timeout) else None
    stalled = False
    # vLLM's benchmark logs through the "vllm.benchmarks" loggers (e.g. the random dataset's
    # "N more tokens than expected after decoding and re-encoding ... This is expected",
    # vllm/benchmarks/datasets/datasets.py): those lines go to the point's log with its
    # console output, not to the caller's stderr.
    bench_logger = logging.getLogger("vllm.benchmarks")
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    py_state, np_state = random.getstate(), np.random.get_state()
    propagate = bench_logger.propagate
    bench_logger.addHandler(handler)
    bench_logger.propagate = False
    try:
        with _BENCH_LOCK, contextlib.redirect_stdout(buf):
            worker = threading.Thread(target=target, name="vllm-bench-serve", daemon=True)
            worker.start()
            try:
                while worker.is_alive():
                    worker.join(poll)
                    if detector is None or not worker.is_alive():
                        continue
                    try:
                        metrics = scrape_metrics(root, timeout=max(poll, 1.0))
                    except BenchError:
                        continue  # a dead server ends the point by itself (requests fail)
                    if detector.observe_metrics(time.monotonic(), metrics) and "cancel" in outcome:
                        stalled = True
                        outcome["cancel"]()
                        worker.join()
            except KeyboardInterrupt:
                # Jupyter's stop button (SIGINT) lands in this thread; the benchmark's event
                # loop runs in the worker. Left alone it would keep loading the server, and
                # the next point would measure under contention: cancel it, then make sure.
                if "cancel" in outcome:
                    outcome["cancel"]()
                    worker.join(10.0)
                stop_thread(worker)
                raise
    finally:
        bench_logger.removeHandler(handler)
        bench_logger.propagate = propagate
        gc.unfreeze()  # main() calls gc.freeze() (vllm.utils.gc_utils.freeze_gc_heap)
        random.setstate(py_state)
        np.random.set_state(np_state)
        log_path.write_text("vllm bench serve " + " ".join(argv) + "\n\n" + buf.getvalue())
    if stalled:
        raise BenchError(
            f"{detector.message}: point aborted instead of waiting for the client timeout. "
            "Read the server log (VLLMServer.log_tail(); helpers.diagnose.diagnose names the "
            "stall), check helpers.planner.plan for a KV cache or token budget that admits no "
            f"request, and restart the server. Benchmark output so far: {log_path}.",
            log_path=log_path,
        )
    if "error" in outcome:
        e = outcome["error"]
        what = str(e)
        if "Traceback (most recent call last)" in what:  # e.g. "Initial test run failed ... Error: <traceback>"
            from helpers.diagnose import last_error_line

            head = what.split("Traceback (most recent call last)", 1)[0].strip()
            what = f"{head} {last_error_line(what) or what.strip().splitlines()[-1]}"
        raise BenchError(
            f"vllm bench serve failed: {type(e).__name__}: {what}. Check the arguments and "
            f"the server; its console output is in {log_path}.",
            log_path=log_path,
        ) from e
    return outcome["result"]


def run_point(
    base_url: str,
    model: str,
    tokenizer: str | Path,
    *,
    concurrency: int,
    num_prompts: int,
    input_len: int,
    output_len: int,
    out_dir: str | Path,
    seed: int,
    num_warmups: int,
    goodput: Mapping[str, float] | None = None,
    extra_args: Sequence[str] = (),
    label: str = "default",
    gpu_count: int = 1,
    prefix_len: int = 0,
    stall_timeout: float | None = STALL_TIMEOUT_S,
) -> Path:
    """Run one ``vllm bench serve`` point against the chat endpoint; return its JSON path.

    Equivalent command line (vLLM docs, "vllm bench serve")::

        vllm bench serve --backend openai-chat --endpoint /v1/chat/completions \\
          --base-url ROOT --model MODEL --tokenizer TOKENIZER \\
          --dataset-name random --random-input-len IN --random-output-len OUT \\
          --max-concurrency C --num-prompts N --num-warmups W --seed SEED \\
          --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 \\
          --save-result --result-dir OUT_DIR --result-filename FILE --disable-tqdm ...

    With the random dataset vLLM sets ``ignore_eos`` so every request generates exactly
    ``output_len`` tokens. The warm-up requests (``--num-warmups``) repeat the point's
    first prompt and are not counted; request rate is unbounded (``inf``), so
    ``--max-concurrency`` alone sets the load.

    Args:
        base_url: server root ``http://host:port`` or ``http://host:port/v1``.
        model: the served model name (``/v1/models`` id); also sent as ``model``.
        tokenizer: local tokenizer folder (or hub id when online) matching the server's,
            used to build prompts of exactly ``input_len`` tokens.
        concurrency: ``--max-concurrency``, requests in flight at once.
        num_prompts: measured requests.
        input_len, output_len: tokens per request (random part of the prompt; the chat
            template adds a few more, reported in ``total_input_tokens``).
        out_dir: folder for ``<label>-c<concurrency>.json`` and its ``.log``.
        seed: ``--seed`` of the random dataset, used as is (see :func:`point_seed`).
        num_warmups: un-measured warm-up requests sent first.
        goodput: SLOs in ms, e.g. ``{"ttft": 500, "tpot": 50}`` (keys ``ttft``, ``tpot``,
            ``e2el``); adds ``request_goodput`` (req/s meeting all SLOs) to the JSON.
        extra_args: more ``vllm bench serve`` flags, e.g. ``["--temperature", "0"]``.
        label: run label stored in the JSON (``--label``) and used in the file name.
        gpu_count: GPUs behind the server, stored as metadata for per-GPU throughput.
        prefix_len: ``--random-prefix-len``: tokens of one prefix shared by every prompt
            of the point (0: none).
        stall_timeout: seconds with requests waiting and none running (``/metrics``,
            scraped every :data:`STALL_POLL_S` s) after which the point is aborted; None
            disables the watch.

    Returns:
        Path of the JSON written by ``--save-result``.

    Raises:
        BenchError: the server does not answer or does not serve ``model``; vLLM's
            benchmark raised; every request failed (message quotes vLLM's errors); or the
            engine stalled ("engine stalled: requests waiting, none running").
    """
    _check_tokenizer(tokenizer)
    root = server_root(base_url)
    served = _served_models(root)
    if model not in served:
        raise BenchError(
            f"The server at {root} serves {served}, not {model!r}. Pass one of those as "
            "model (the --served-model-name of the server)."
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{_safe(label)}-c{int(concurrency)}"
    json_path, log_path = out / f"{stem}.json", out / f"{stem}.log"

    argv = [
        "--backend", CHAT_BACKEND,
        "--endpoint", CHAT_ENDPOINT,
        "--base-url", root,
        "--model", model,
        "--served-model-name", model,
        "--tokenizer", str(tokenizer),
        "--dataset-name", "random",
        "--random-input-len", str(int(input_len)),
        "--random-output-len", str(int(output_len)),
        "--random-prefix-len", str(int(prefix_len)),
        "--ignore-eos",
        "--max-concurrency", str(int(concurrency)),
        "--num-prompts", str(int(num_prompts)),
        "--num-warmups", str(int(num_warmups)),
        "--seed", str(int(seed)),
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,90,99",
        "--label", label,
        "--save-result",
        "--result-dir", str(out),
        "--result-filename", json_path.name,
        "--disable-tqdm",
        "--metadata",
        f"gpu_count={int(gpu_count)}",
        f"input_len={int(input_len)}",
        f"output_len={int(output_len)}",
        f"prefix_len={int(prefix_len)}",
    ]  # fmt: skip
    if goodput:
        argv += ["--goodput", *(f"{k}:{float(v):g}" for k, v in goodput.items())]
    argv += [str(a) for a in extra_args]

    result = _run_bench_main(argv, log_path, root=root, stall_timeout=stall_timeout)
    if not json_path.exists():
        raise BenchError(
            f"vllm bench serve finished but wrote no {json_path}. See {log_path}.",
            log_path=log_path,
        )
    if not result.get("completed"):
        errors = _request_errors(log_path.read_text())
        if not _healthy(root):
            cause = (
                "the server no longer answers /health: its engine died during the point "
                "(read the server log, e.g. VLLMServer.log_tail(), for the traceback)"
            )
        else:
            cause = (
                "check the server log; a request may exceed --max-model-len (prefix_len + "
                f"input_len + output_len = {prefix_len + input_len + output_len} tokens plus "
                "the chat template)"
            )
        raise BenchError(
            f"All {num_prompts} requests of point {stem} failed against {root}: "
            f"{'; '.join(errors[:3]) or 'no error text'}. Cause: {cause}. Full benchmark "
            f"output in {log_path}.",
            log_path=log_path,
        )
    return json_path


def _request_errors(text: str) -> list[str]:
    """One line per distinct request error of ``vllm bench serve``'s console output.

    vLLM 0.32.0 prints ``Error {i}: {err.error}`` (vllm/benchmarks/serve.py), and the error
    of a request that raised is a whole traceback, whose first line says nothing
    (``Traceback (most recent call last):``); the last exception line of each block
    (e.g. ``aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected``) is
    what went wrong.
    """
    from helpers.diagnose import last_error_line

    blocks = re.split(r"(?m)^(?=Error \d+: )", text)
    out: list[str] = []
    for block in blocks:
        m = re.match(r"Error (\d+): (.*)", block)
        if not m:
            continue
        body = block[m.end(1) + 2 :].strip()
        first = body.splitlines()[0] if body else ""
        line = first
        if not first or first.startswith("Traceback"):
            line = last_error_line(body) or (body.splitlines()[-1].strip() if body else "")
        line = f"Error {m.group(1)}: {line[:300]}"
        if line.split(": ", 1)[1] not in {o.split(": ", 1)[1] for o in out}:
            out.append(line)
    return out


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", label).strip("_") or "run"


# --------------------------------------------------------------------------- sweep


def _scenario_value(scenario: Any, key: str, default: Any = None) -> Any:
    if scenario is None:
        return default
    if isinstance(scenario, Mapping):
        return scenario.get(key, default)
    return getattr(scenario, key, default)


def _check_concurrencies(concurrencies: Any) -> list[int]:
    """``concurrencies`` as a list of positive ints, or a BenchError naming the argument."""
    example = "e.g. concurrencies=[1, 2, 4]"
    if isinstance(concurrencies, (str, bytes, Mapping)) or not isinstance(concurrencies, Iterable):
        raise BenchError(
            f"concurrencies={concurrencies!r} ({type(concurrencies).__name__}): pass a list of "
            f"positive ints (requests in flight per point), {example}."
        )
    values = list(concurrencies)
    bad = [c for c in values if isinstance(c, bool) or not isinstance(c, int) or c < 1]
    if bad or not values:
        raise BenchError(
            f"concurrencies={values!r}: every concurrency must be a positive int (requests in "
            f"flight), not {bad[0]!r} ({type(bad[0]).__name__}), {example}."
            if bad
            else f"concurrencies=[] has no points: pass at least one, {example}."
        )
    return values


def _check_tokenizer(tokenizer: Any) -> None:
    """A tokenizer that names a local folder must exist; a hub id (``org/name``) is left to
    the hub. Raises a one-sentence BenchError instead of the hub's repo-id noise."""
    if not isinstance(tokenizer, (str, Path)) or not str(tokenizer).strip():
        raise BenchError(
            f"tokenizer={tokenizer!r}: pass the served model's tokenizer folder (e.g. the "
            "stand-in folder from helpers.standin.build_standin_model()) or a hub id."
        )
    text = str(tokenizer)
    path = Path(text).expanduser()
    if path.exists():
        return
    looks_local = (
        isinstance(tokenizer, Path)
        or path.is_absolute()
        or text.startswith((".", "~"))
        or "\\" in text
        or text.count("/") != 1
    )
    if looks_local:
        raise BenchError(
            f"The tokenizer folder {text} does not exist: pass the folder the server serves "
            "(ServeConfig.model, e.g. helpers.standin.build_standin_model() for the stand-in, "
            "or the snapshot path from helpers.weights.download()), or a hub id (org/name)."
        )


def sweep(
    base_url: str,
    model: str,
    tokenizer: str | Path,
    concurrencies: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    *,
    scenario: Mapping[str, Any] | Any | None = None,
    input_len: int | None = None,
    output_len: int | None = None,
    prefix_len: int | None = None,
    num_prompts: int | None = None,
    out_dir: str | Path | None = None,
    label: str = "default",
    gpu_count: int = 1,
    slo: Mapping[str, float] | None = None,
    seed: int = 0,
    num_warmups: int | None = None,
    extra_args: Sequence[str] = (),
    progress: bool = True,
    seed_label: str | None = None,
    stall_timeout: float | None = STALL_TIMEOUT_S,
) -> pd.DataFrame:
    """Run one :func:`run_point` per concurrency and return :func:`load_results` of them.

    Around each point it scrapes ``<root>/metrics``; when vLLM's JSON lacks the
    speculative-decoding keys (e.g. an older ``vllm bench serve``) but the counters moved,
    it writes ``spec_decode_acceptance_rate`` / ``_length`` computed from the counter
    deltas (:func:`acceptance_from_counters`) into the JSON with
    ``"spec_decode_source": "metrics_scrape"``. It also stores the prefix-cache hit rate of
    the point (``vllm:prefix_cache_hits_total`` / ``..._queries_total`` deltas) as
    ``cookbook_prefix_cache_hit_rate``: near 0 shows no point reused another's prompts.

    Args:
        base_url: server root or ``.../v1``.
        model: served model name.
        tokenizer: local tokenizer folder matching the server's.
        concurrencies: ``--max-concurrency`` per point, run in this order.
        scenario: a mapping or object with ``input_len``, ``output_len`` and optionally
            ``prefix_len``, ``num_prompts``, ``prompts_per_concurrency``, ``name`` (e.g.
            ``helpers.scenarios.scenario("chat")``). Explicit keyword arguments win over it.
        input_len, output_len: tokens per request (defaults 1024 / 128 when neither these
            nor ``scenario`` give them).
        prefix_len: shared-prefix tokens per point (``--random-prefix-len``), default 0.
        num_prompts: requests per point; default the scenario's ``num_prompts``, else its
            ``prompts_per_concurrency`` × concurrency, else :func:`default_num_prompts` (4 ×
            concurrency, at least 16).
        out_dir: default ``helpers.paths.out_dir("bench", label)``.
        label: configuration name (one line per label in the plots).
        gpu_count: GPUs behind the server, for ``output_throughput_per_gpu``.
        slo: goodput SLOs in ms, e.g. ``{"ttft": 2000, "tpot": 50}``.
        seed: base seed; each point gets :func:`point_seed` of it.
        num_warmups: warm-up requests per point; default :func:`default_num_warmups`
            (``min(concurrency, 8)``).
        extra_args: more ``vllm bench serve`` flags for every point.
        progress: show a tqdm bar across points (text, on stderr; it ends at N/N, 100%).
        seed_label: the name hashed into each point's seed instead of ``label``; give
            several configurations (on separate servers) the same ``seed_label`` to send
            them the same prompts.
        stall_timeout: abort a point whose engine has requests waiting and none running
            for this many seconds (see :func:`run_point`); None disables it.

    Returns:
        The DataFrame of :func:`load_results`, one row per point, sorted by concurrency.
        With speculative decoding, ``spec_decode_level`` / ``spec_decode_verdict`` judge each
        point (:func:`acceptance_verdict`); an ``error`` verdict is also printed.

    Raises:
        BenchError: see :func:`run_point`; points finished before the failure stay on
            disk (``load_results(out_dir)`` reads them).
    """
    # the text bar (not tqdm.auto's widget): an executed notebook saves its final state
    from tqdm.std import tqdm

    concurrencies = _check_concurrencies(concurrencies)
    _check_tokenizer(tokenizer)
    points = sweep_points(
        concurrencies, scenario=scenario, input_len=input_len, output_len=output_len,
        prefix_len=prefix_len, num_prompts=num_prompts, label=label, seed=seed,
        num_warmups=num_warmups, seed_label=seed_label,
    )  # fmt: skip
    folder = Path(out_dir) if out_dir is not None else _out_dir("bench") / _safe(label)
    existed = folder.exists()  # run_point creates it with the first point
    root = server_root(base_url)

    paths: list[Path] = []
    bar = tqdm(points, desc=f"bench {label}", unit="point", disable=not progress)
    try:
        for point in bar:
            c = point["concurrency"]
            bar.set_postfix(concurrency=c)
            before = parse_prometheus(scrape_metrics(root))
            path = run_point(
                root, model, tokenizer, **point, out_dir=folder, goodput=slo,
                extra_args=extra_args, label=label, gpu_count=gpu_count,
                stall_timeout=stall_timeout,
            )  # fmt: skip
            after = parse_prometheus(scrape_metrics(root))
            _annotate_from_metrics(path, before, after)
            paths.append(path)
            verdict = acceptance_verdict(json.loads(path.read_text()))
            if verdict.get("spec_decode_level") == "error":
                # issue 14.5: said where the sweep runs, and kept on the row (spec_decode_verdict)
                bar.write(f"ERROR {label} concurrency {c}: {verdict['spec_decode_verdict']}")
    finally:
        bar.close()
        if not existed and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # a sweep that wrote nothing leaves no empty folder behind
    return load_results(paths)


def sweep_points(
    concurrencies: Sequence[int],
    *,
    scenario: Mapping[str, Any] | Any | None = None,
    input_len: int | None = None,
    output_len: int | None = None,
    prefix_len: int | None = None,
    num_prompts: int | None = None,
    label: str = "default",
    seed: int = 0,
    num_warmups: int | None = None,
    seed_label: str | None = None,
) -> list[dict[str, int]]:
    """The :func:`run_point` arguments of each point of :func:`sweep` (a pure function).

    Arguments as :func:`sweep`; explicit ones win over ``scenario``'s ``input_len``,
    ``output_len``, ``prefix_len``, ``num_prompts`` and ``prompts_per_concurrency``.

    Returns:
        One dict per concurrency, in order: ``concurrency``, ``num_prompts``,
        ``input_len`` / ``output_len`` / ``prefix_len`` (tokens), ``seed``, ``num_warmups``.
    """
    in_len = int(input_len or _scenario_value(scenario, "input_len", 1024))
    out_len = int(output_len or _scenario_value(scenario, "output_len", 128))
    pre_len = prefix_len if prefix_len is not None else _scenario_value(scenario, "prefix_len", 0)
    n_fixed = num_prompts or _scenario_value(scenario, "num_prompts")
    per_c = _scenario_value(scenario, "prompts_per_concurrency")
    return [
        {
            "concurrency": int(c),
            "num_prompts": int(n_fixed or (int(per_c) * int(c) if per_c else default_num_prompts(c))),
            "input_len": in_len,
            "output_len": out_len,
            "prefix_len": int(pre_len or 0),
            "seed": point_seed(seed, seed_label or label, c, in_len, out_len),
            "num_warmups": default_num_warmups(c) if num_warmups is None else int(num_warmups),
        }
        for c in concurrencies
    ]


#: What a table shows instead of a number the CPU stand-in cannot measure.
NOT_MEASURED_ON_STANDIN = "n/a (CPU stand-in)"


def _standin_unmeasurable(column: str) -> bool:
    """Per-token timing columns: on 2 shared CPU cores tokens arrive in bursts, so TPOT and
    ITL read near zero (measured on the stand-in: median TPOT 0.0046 ms, p50 ITL 0 ms), and
    so does the per-user speed derived from TPOT."""
    return "_tpot_" in column or "_itl_" in column or column == "tokens_per_s_per_user"


def results_table(results: pd.DataFrame, columns: Sequence[str], *, stand_in: bool = False) -> pd.DataFrame:
    """The ``columns`` of a results DataFrame (those present), for display.

    On the stand-in (``stand_in=True``), per-token timing columns (TPOT, ITL, and
    ``tokens_per_s_per_user`` = 1000 / mean TPOT) hold :data:`NOT_MEASURED_ON_STANDIN`
    instead of numbers that would read as measurements; end-to-end columns stay.
    """
    table = results[[c for c in columns if c in results.columns]].copy()
    if stand_in:
        for c in table.columns:
            if _standin_unmeasurable(c):
                table[c] = NOT_MEASURED_ON_STANDIN
    return table


def _annotate_from_metrics(path: Path, before: Mapping[str, float], after: Mapping[str, float]) -> None:
    """Add scrape-derived numbers to a point's JSON (never overwriting vLLM's own keys)."""
    data = json.loads(path.read_text())
    changed = False
    acc = acceptance_from_counters(spec_decode_counters(before), spec_decode_counters(after))
    if acc:
        if data.get("spec_decode_acceptance_length") is None:
            data["spec_decode_source"] = "metrics_scrape"
        for key, value in acc.items():  # the counter deltas; vLLM's own keys stay
            if data.get(key) is None:
                data[key] = value
        data.update(acceptance_verdict(data))  # judged on what the row shows
        changed = True
    queries = after.get(PREFIX_CACHE_QUERIES, 0.0) - before.get(PREFIX_CACHE_QUERIES, 0.0)
    if queries > 0:
        hits = after.get(PREFIX_CACHE_HITS, 0.0) - before.get(PREFIX_CACHE_HITS, 0.0)
        data["cookbook_prefix_cache_hit_rate"] = hits / queries
        changed = True
    if changed:
        path.write_text(json.dumps(data))


# --------------------------------------------------------------------------- loading


def _json_paths(paths_or_dir: str | Path | Iterable[str | Path]) -> list[Path]:
    items = [paths_or_dir] if isinstance(paths_or_dir, (str, Path)) else list(paths_or_dir)
    found: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found += sorted(
                q for q in p.rglob("*.json") if not q.name.endswith(".pytorch.json")
            )
        elif p.is_file():
            found.append(p)
        else:
            raise BenchError(f"No benchmark result at {p}. Pass a JSON file or a folder of them.")
    return found


def _num(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _row(data: Mapping[str, Any], path: Path) -> dict[str, Any]:
    gpu_count = _num(data.get("gpu_count")) or 1.0
    output_throughput = _num(data.get("output_throughput"))
    mean_tpot = _num(data.get("mean_tpot_ms"))
    mean_e2el = _num(data.get("mean_e2el_ms"))
    total_output = _num(data.get("total_output_tokens"))
    completed = _num(data.get("completed"))
    row: dict[str, Any] = {
        "label": data.get("label") or path.parent.name,
        "concurrency": data.get("max_concurrency"),
        "num_prompts": data.get("num_prompts"),
        "input_len": _num(data.get("input_len")),
        "output_len": _num(data.get("output_len")),
        "gpu_count": int(gpu_count),
        "completed": data.get("completed"),
        "failed": data.get("failed"),
        "duration_s": _num(data.get("duration")),
        "request_throughput": _num(data.get("request_throughput")),
        "output_throughput": output_throughput,
        "total_token_throughput": _num(data.get("total_token_throughput")),
        "output_throughput_per_gpu": (
            output_throughput / gpu_count if output_throughput is not None else None
        ),
        "tokens_per_s_per_user": 1000.0 / mean_tpot if mean_tpot else None,
        "e2e_tokens_per_s_per_user": (
            total_output / completed / (mean_e2el / 1000.0)
            if total_output and completed and mean_e2el
            else None
        ),
        "request_goodput": _num(data.get("request_goodput")),
        "spec_decode_acceptance_rate": _num(data.get("spec_decode_acceptance_rate")),
        "spec_decode_acceptance_length": _num(data.get("spec_decode_acceptance_length")),
        "prefix_cache_hit_rate": _num(data.get("cookbook_prefix_cache_hit_rate")),
        "path": str(path),
    }
    verdict = acceptance_verdict(data)
    row["spec_decode_level"] = verdict.get("spec_decode_level")
    row["spec_decode_verdict"] = verdict.get("spec_decode_verdict")
    for metric in _LATENCY_METRICS:
        for stat in _LATENCY_STATS:
            key = f"{stat}_{metric}_ms"
            row[key] = _num(data.get(key))
    return row


def load_results(paths_or_dir: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """Load ``vllm bench serve --save-result`` JSON files into one row per point.

    Args:
        paths_or_dir: a JSON file, a folder (searched recursively for ``*.json``), or a
            list of either.

    Returns:
        DataFrame sorted by ``label`` then ``concurrency``, with columns (units):

        - ``label``, ``concurrency`` (``max_concurrency``), ``num_prompts``,
          ``input_len`` / ``output_len`` (tokens, from the cookbook's ``--metadata``),
          ``gpu_count``;
        - ``completed``, ``failed`` (requests), ``duration_s`` (s);
        - ``request_throughput`` (req/s), ``output_throughput`` and
          ``total_token_throughput`` (tokens/s, whole server);
        - ``output_throughput_per_gpu`` = output_throughput / gpu_count (tokens/s/GPU);
        - ``tokens_per_s_per_user`` = 1000 / ``mean_tpot_ms``: the decode speed one user
          sees while tokens stream (TPOT excludes the first token, so queueing and prefill
          do not enter it; they are in ``ttft``). The usual x axis of throughput /
          interactivity Pareto charts. Needs a server that streams token by token: a
          starved CPU server flushes many tokens per chunk and TPOT collapses toward 0;
        - ``e2e_tokens_per_s_per_user`` = mean output tokens per request / mean
          ``e2el`` (s): the whole-response speed including TTFT; robust to chunked
          streaming (use it as ``pareto(x=...)`` on the CPU stand-in);
        - ``request_goodput`` (req/s meeting the SLOs; only when SLOs were given);
        - ``{mean,median,p99}_{ttft,tpot,itl,e2el}_ms`` (ms);
        - ``spec_decode_acceptance_rate`` (%) and ``spec_decode_acceptance_length``
          (tokens per target forward pass), only when speculative decoding ran;
        - ``prefix_cache_hit_rate`` (0–1, from :func:`sweep`'s scrapes, when measured);
        - ``path`` (the JSON file).

        Optional columns that no point has are left out.

    Raises:
        BenchError: a path does not exist, a file is not a benchmark result, or nothing
            was found.
    """
    rows = []
    for path in _json_paths(paths_or_dir):
        try:
            data = json.loads(path.read_text())
        except ValueError as e:
            raise BenchError(f"{path} is not JSON ({e}); remove it or rerun the point.") from e
        if not isinstance(data, dict) or "completed" not in data:
            raise BenchError(
                f"{path} is not a vllm bench serve result (no 'completed' key). Keep only "
                "--save-result JSON files in the folder, or pass the files explicitly."
            )
        rows.append(_row(data, path))
    if not rows:
        raise BenchError(
            f"No benchmark JSON found in {paths_or_dir}. Run helpers.bench.sweep(...) first."
        )
    df = pd.DataFrame(rows)
    keep = [c for c in COLUMNS if c not in _OPTIONAL_COLUMNS or df[c].notna().any()]
    df = df[keep]
    for col in ("concurrency", "num_prompts", "completed", "failed"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    return df.sort_values(["label", "concurrency"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- noise


def repeat_point(
    base_url: str,
    model: str,
    tokenizer: str | Path,
    concurrency: int,
    repeats: int = 3,
    *,
    scenario: Mapping[str, Any] | Any | None = None,
    input_len: int | None = None,
    output_len: int | None = None,
    prefix_len: int | None = None,
    num_prompts: int | None = None,
    out_dir: str | Path | None = None,
    label: str = "default",
    gpu_count: int = 1,
    seed: int = 0,
    num_warmups: int | None = None,
    extra_args: Sequence[str] = (),
    progress: bool = True,
    seed_label: str | None = None,
) -> pd.DataFrame:
    """Run the same point ``repeats`` times to measure its run-to-run spread.

    Each repeat is one :func:`sweep` of a single concurrency, with its own warm-up and its own
    seed (base ``seed + r``, hashed by :func:`point_seed`, so no repeat is served from another's
    prefix cache), written to ``<out_dir>/rep<r>/``. Feed the result to :func:`spread`, and the
    spread to :func:`compare` / :func:`rank`.

    Args:
        concurrency: ``--max-concurrency`` of the point.
        repeats: how many runs (at least 2 for a spread; 3 or more is better).
        Others: as :func:`sweep`.

    Returns:
        :func:`load_results` rows, one per repeat, with a ``repeat`` column (0-based).

    Raises:
        BenchError: see :func:`run_point`; ``repeats < 2``.
    """
    if int(repeats) < 2:
        raise BenchError("repeat_point needs repeats >= 2 to measure a spread; pass repeats=3.")
    folder = Path(out_dir) if out_dir is not None else _out_dir("bench", _safe(label) + "-repeats")
    frames = []
    for r in range(int(repeats)):
        df = sweep(
            base_url, model, tokenizer, [int(concurrency)],
            scenario=scenario, input_len=input_len, output_len=output_len, prefix_len=prefix_len,
            num_prompts=num_prompts, out_dir=folder / f"rep{r}", label=label, gpu_count=gpu_count,
            seed=int(seed) + r, num_warmups=num_warmups, extra_args=extra_args, progress=progress,
            seed_label=seed_label,
        )  # fmt: skip
        frames.append(df.assign(repeat=r))
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class Spread:
    """Run-to-run spread of one metric over repeats of one point.

    ``noise_pct`` = (max - min) / mean × 100: a difference between configurations smaller
    than this is not distinguishable from repeating the same configuration.
    """

    metric: str
    n: int
    mean: float
    std: float
    min: float
    max: float

    @property
    def noise_pct(self) -> float:
        return 100.0 * (self.max - self.min) / abs(self.mean) if self.mean else float("inf")

    def __str__(self) -> str:
        return (
            f"{self.metric}: mean {self.mean:.4g} over {self.n} runs, range {self.min:.4g}–{self.max:.4g}"
            f" (±{self.noise_pct / 2:.1f}%, spread {self.noise_pct:.1f}%)"
        )


def spread(df: pd.DataFrame, metric: str = "output_throughput") -> Spread:
    """The spread of ``metric`` over the rows of ``df`` (e.g. :func:`repeat_point`'s output).

    Raises:
        BenchError: ``metric`` is not a column or has fewer than 2 values.
    """
    if metric not in df.columns:
        raise BenchError(f"No column {metric!r}; pass one of {list(df.columns)}.")
    values = pd.to_numeric(df[metric], errors="coerce").dropna()
    if len(values) < 2:
        raise BenchError(f"{metric!r} has {len(values)} value(s); a spread needs 2 or more (repeat_point).")
    return Spread(metric, int(len(values)), float(values.mean()), float(values.std(ddof=1)),
                  float(values.min()), float(values.max()))  # fmt: skip


def higher_is_better(metric: str) -> bool:
    """False for latencies (``*_ms``, ``duration_s``, ``failed``), True for throughputs and the rest."""
    return not (metric.endswith("_ms") or metric in ("duration_s", "failed"))


@dataclass(frozen=True)
class Comparison:
    """The verdict of :func:`compare`: ``winner`` is None when the difference is noise."""

    metric: str
    a: str
    b: str
    value_a: float
    value_b: float
    delta_pct: float
    noise_pct: float
    winner: str | None
    verdict: str

    def __str__(self) -> str:
        return self.verdict


def compare(
    value_a: float | pd.DataFrame | Spread,
    value_b: float | pd.DataFrame | Spread,
    *,
    metric: str = "output_throughput",
    noise: float | Spread | Sequence[Spread] | None = None,
    names: tuple[str, str] = ("A", "B"),
) -> Comparison:
    """Compare two measurements of ``metric``; a difference inside the noise is no win.

    Args:
        value_a, value_b: numbers, DataFrames (the mean of ``metric`` over their rows) or
            :class:`Spread` objects (their mean; their own spread also counts as noise).
        metric: the column compared; its direction comes from :func:`higher_is_better`.
        noise: run-to-run spread in percent, or :class:`Spread` (s) from :func:`spread`;
            the largest applies. Without any (plain numbers, no ``noise``), every non-zero
            difference counts, and the verdict says the noise is unknown.
        names: labels for the verdict.

    Returns:
        A :class:`Comparison`; ``verdict`` reads e.g. ``"B beats A by 12.0% on
        output_throughput (noise ±3.1%)"`` or ``"A vs B: 1.2% on output_throughput is
        noise, not a win (run-to-run spread 4.0%)"``.
    """
    spreads = [v for v in (value_a, value_b) if isinstance(v, Spread)]
    if isinstance(noise, Spread):
        spreads.append(noise)
    elif isinstance(noise, Sequence) and not isinstance(noise, str):
        spreads += list(noise)
    noise_pct = max([s.noise_pct for s in spreads] + ([float(noise)] if isinstance(noise, (int, float)) else []), default=None)

    def _value(v) -> float:
        if isinstance(v, Spread):
            return v.mean
        if isinstance(v, pd.DataFrame):
            return float(pd.to_numeric(v[metric], errors="coerce").mean())
        return float(v)

    a, b = _value(value_a), _value(value_b)
    base = abs(a) if a else abs(b) or 1.0
    delta = 100.0 * (b - a) / base
    better_b = (b > a) if higher_is_better(metric) else (b < a)
    n_a, n_b = names
    if noise_pct is not None and abs(delta) <= noise_pct:
        return Comparison(metric, n_a, n_b, a, b, delta, noise_pct, None,
                          f"{n_a} vs {n_b}: {abs(delta):.1f}% on {metric} is noise, not a win "
                          f"(run-to-run spread {noise_pct:.1f}%)")  # fmt: skip
    if a == b:
        return Comparison(metric, n_a, n_b, a, b, 0.0, noise_pct or 0.0, None, f"{n_a} and {n_b} tie on {metric}")
    winner, loser = (n_b, n_a) if better_b else (n_a, n_b)
    note = f"noise ±{noise_pct / 2:.1f}%" if noise_pct is not None else "noise unknown: measure it with repeat_point"
    return Comparison(metric, n_a, n_b, a, b, delta, noise_pct if noise_pct is not None else float("nan"), winner,
                      f"{winner} beats {loser} by {abs(delta):.1f}% on {metric} ({note})")  # fmt: skip


def rank(
    df: pd.DataFrame,
    metric: str,
    *,
    concurrency: int | None = None,
    by: str = "label",
    noise: float | Spread | Sequence[Spread] | None = None,
) -> pd.DataFrame:
    """Rank configurations on ``metric`` at one concurrency, each against the best, with noise.

    Args:
        df: :func:`load_results` / :func:`sweep` rows of several configurations (``by``).
        metric: e.g. ``output_throughput_per_gpu`` (throughput) or ``tokens_per_s_per_user``
            / ``median_tpot_ms`` (latency).
        concurrency: the point compared (default: the largest concurrency every configuration has).
        noise: as :func:`compare`.

    Returns:
        DataFrame sorted best first: ``by``, ``concurrency``, ``metric``, ``vs_best_pct``,
        ``verdict`` ("best", "within noise of best", or the :func:`compare` verdict).
    """
    if by not in df.columns or metric not in df.columns:
        raise BenchError(f"rank() needs columns {by!r} and {metric!r}; pass load_results() output.")
    if concurrency is None:
        common = set.intersection(*(set(g["concurrency"].dropna().astype(int)) for _, g in df.groupby(by)))
        if not common:
            raise BenchError("The configurations share no concurrency; pass concurrency= explicitly.")
        concurrency = max(common)
    at = df[df["concurrency"] == int(concurrency)]
    means = at.groupby(by)[metric].mean().dropna()
    if means.empty:
        raise BenchError(f"No {metric} values at concurrency {concurrency}.")
    means = means.sort_values(ascending=not higher_is_better(metric))
    best_name, best = means.index[0], float(means.iloc[0])
    rows = []
    for name, value in means.items():
        if name == best_name:
            verdict, delta = "best", 0.0
        else:
            c = compare(best, float(value), metric=metric, noise=noise, names=(str(best_name), str(name)))
            delta = c.delta_pct
            verdict = "within noise of best" if c.winner is None else c.verdict
        rows.append({by: name, "concurrency": int(concurrency), metric: float(value), "vs_best_pct": round(delta, 1), "verdict": verdict})
    return pd.DataFrame(rows)


def winner(ranking: pd.DataFrame, by: str = "label") -> str:
    """One line from a :func:`rank` table: the best configuration, or the tie when the
    runners-up are within the run-to-run noise."""
    if ranking.empty:
        raise BenchError("Empty ranking: run rank() on results with at least one configuration.")
    best = str(ranking.iloc[0][by])
    tied = [str(r[by]) for _, r in ranking.iloc[1:].iterrows() if r["verdict"] == "within noise of best"]
    if tied:
        return f"no clear winner: {', '.join([best, *tied])} are within the noise of each other"
    if len(ranking) > 1:
        return f"{best} — {ranking.iloc[1]['verdict']}"
    return best
