"""Run one benchmark point: vLLM's own load generator (``vllm bench serve``), in-process.

``vllm.benchmarks.serve.add_cli_args`` + ``main`` run in a worker thread of this process (each
point prints its ``vllm bench serve`` line for a shell): a child per point would import
``vllm.benchmarks.serve`` each time (7.4 s; a 3-point sweep took 5.8x as long, measured
2026-12-01 on the 2-core CPU box, vLLM 0.32.0: ``benchmarks/bench_point_modes.py``). A point
whose engine stalls or hangs behind a healthy API is cancelled
(:class:`helpers.server.stall.StallDetector`).
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import random
import re
import shlex
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.std import tqdm

from helpers.bench.metrics import (
    _healthy,
    _served_models,
    parse_prometheus,
    scrape_metrics,
    server_root,
)
from helpers.errors import BenchError
from helpers.loop_thread import run_on_own_loop, stop_thread
from helpers.server import vllm_log
from helpers.server.stall import STALL_POLL_S, STALL_TIMEOUT_S, StallDetector
from helpers.server.vllm_log import last_error_line

#: Chat endpoint and backend that ``vllm bench serve`` uses to talk to ``/v1/chat/completions``.
CHAT_ENDPOINT = "/v1/chat/completions"
CHAT_BACKEND = "openai-chat"
#: Completions endpoint and backend: the prompt text is sent as is (vLLM 0.32.0
#: ``async_request_openai_completions``, ``vllm/benchmarks/lib/endpoint_request_func.py``); a
#: dataset whose prompts are rendered already is replayed there (the chat backend would wrap each
#: one in a user message and the server's chat template would render it again).
COMPLETIONS_ENDPOINT = "/v1/completions"
COMPLETIONS_BACKEND = "openai"

_BENCH_LOCK = threading.Lock()

#: What a point says when the server stopped answering during it (run_point, and
#: helpers.bench.sweep when some requests had completed before it died).
SERVER_DIED = (
    "the server no longer answers /health: its engine died during the point "
    "(read the server log, e.g. VLLMServer.log_tail(), for the traceback)"
)


def _run_bench_main(
    argv: list[str],
    log_path: Path,
    *,
    root: str | None = None,
    stall_timeout: float | None = None,
    poll: float = STALL_POLL_S,
) -> dict[str, Any]:
    """Parse ``argv`` with vLLM's bench parser and run it in a worker thread's own event loop
    (``asyncio.run`` then works from a Jupyter cell). Its side effects are undone: console
    output goes to ``log_path``, ``gc.freeze()`` is reverted, the ``random`` / numpy seeds
    restored. With ``root`` and ``stall_timeout``, ``/metrics`` is scraped every ``poll``
    seconds and a stalled engine cancels the benchmark (:class:`StallDetector`).
    """

    import numpy as np
    import vllm.benchmarks.serve as vbs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    vbs.add_cli_args(parser)
    args = parser.parse_args(argv)

    outcome: dict[str, Any] = {}
    buf = io.StringIO()
    # vLLM 0.32.0: main() = asyncio.run(main_async(args))
    main_async = getattr(vbs, "main_async", None)

    def target() -> None:
        if main_async is None:  # an older bench module: no way to cancel, run as is
            try:
                outcome["result"] = vbs.main(args)
            except BaseException as e:  # re-raised in the caller's thread
                outcome["error"] = e
            return
        run_on_own_loop(lambda: main_async(args), outcome)

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
                    now = parse_prometheus(metrics)  # BenchError when not exposition
                    if detector.observe_metrics(time.monotonic(), now) and "cancel" in outcome:
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
        log_path.write_text(shlex.join(["vllm", "bench", "serve", *argv]) + "\n\n" + buf.getvalue())
    if stalled:
        if detector.kind == "hung":
            advice = (
                "A kernel that deadlocks leaves requests running with no token produced (vllm "
                "bench serve would wait for aiohttp's 6-hour timeout): read the server log "
                "(VLLMServer.log_tail()) for the last kernel or backend it ran, restart the "
                "server, and if it hangs again switch that backend (the target's notes in "
                "cookbook/recipe.yaml)"
            )
        else:
            advice = (
                "Read the server log (VLLMServer.log_tail(); helpers.server.diagnose.diagnose "
                "names the stall), check helpers.memory.planner.plan for a KV cache or token "
                "budget that admits no request, and restart the server"
            )
        raise BenchError(
            f"{detector.message}: point aborted instead of waiting for the client timeout. "
            f"{advice}. Benchmark output so far: {log_path}.",
            log_path=log_path,
        )
    if "error" in outcome:
        e = outcome["error"]
        what = str(e)
        if "Traceback (most recent call last)" in what:  # "Initial test run failed ... Error: <tb>"
            head = what.split("Traceback (most recent call last)", 1)[0].strip()
            what = f"{head} {last_error_line(what) or what.strip().splitlines()[-1]}"
        raise BenchError(
            f"vllm bench serve failed: {type(e).__name__}: {what}. Check the arguments and "
            f"the server; its console output is in {log_path}.",
            log_path=log_path,
        ) from e
    return outcome["result"]


def chat_target_args(
    root: str, model: str, tokenizer: str | Path, *, completions: bool = False
) -> list[str]:
    """The ``vllm bench serve`` flags that aim it at a server's chat endpoint (with
    ``completions``: its completions endpoint): backend, endpoint, ``root`` URL, the served
    ``model`` name (sent as ``model`` too), ``tokenizer``."""
    backend, endpoint = (
        (COMPLETIONS_BACKEND, COMPLETIONS_ENDPOINT)
        if completions
        else (CHAT_BACKEND, CHAT_ENDPOINT)
    )
    return [
        "--backend", backend,
        "--endpoint", endpoint,
        "--base-url", root,
        "--model", model,
        "--served-model-name", model,
        "--tokenizer", str(tokenizer),
    ]  # fmt: skip


def dataset_args(path: str | Path) -> list[str]:
    """The ``vllm bench serve`` flags that replay a JSONL of ``{"prompt", "output_tokens"}``
    lines (:func:`lab.bench.agent_workload.write_agent_workload`) in file order, as written.

    Checked in vLLM 0.32.0 ``vllm/benchmarks/``: ``--dataset-name custom`` is
    ``CustomDataset`` (``datasets/datasets.py``), which shuffles the lines unless
    ``--disable-shuffle`` and applies the tokenizer's chat template to each prompt as one user
    message unless ``--skip-chat-template``; ``--custom-output-len`` (default 256) replaces every
    line's ``output_tokens`` unless it is -1. ``--ready-check-timeout-sec 0`` skips the initial
    test request (``serve.py`` ``benchmark()``: it sends line 1 once more, a prefix-cache hit
    the point's counters would count); the caller has checked the server answers.
    """
    return [
        "--dataset-name", "custom",
        "--dataset-path", str(path),
        "--disable-shuffle",
        "--skip-chat-template",
        "--custom-output-len", "-1",
        "--ready-check-timeout-sec", "0",
    ]  # fmt: skip


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
    dataset: str | Path | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Run one ``vllm bench serve`` point against the chat endpoint; return its JSON path.

    Random dataset with ``--ignore-eos`` (every request generates ``output_len`` tokens),
    unbounded request rate (``--max-concurrency`` alone sets the load); the ``vllm bench serve``
    line a shell runs the same point with is printed, and is the first line of the point's
    ``.log``. With ``dataset``, a rendered JSONL instead, on the completions endpoint (:func:`dataset_args`): ``input_len`` / ``output_len`` /
    ``prefix_len`` are then only recorded (``--metadata``), each line says its output.

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
        seed: ``--seed`` of the random dataset, used as is (see
            :func:`helpers.bench.sizing.point_seed`).
        num_warmups: un-measured warm-up requests sent first (they repeat the first prompt).
        goodput: SLOs in ms, e.g. ``{"ttft": 500, "tpot": 50}`` (keys ``ttft``, ``tpot``,
            ``e2el``); adds ``request_goodput`` (req/s meeting all SLOs) to the JSON.
        extra_args: more ``vllm bench serve`` flags, e.g. ``["--temperature", "0"]``.
        label: run label stored in the JSON (``--label``) and used in the file name.
        gpu_count: GPUs behind the server, stored as metadata for per-GPU throughput.
        prefix_len: ``--random-prefix-len``: tokens of one prefix shared by every prompt
            of the point (0: none).
        stall_timeout: seconds of a stalled or hung engine (:class:`StallDetector`, ``/metrics``
            every :data:`STALL_POLL_S` s) before the point is aborted; None disables the watch.
        dataset: a JSONL of rendered prompts (:func:`dataset_args`), replayed on
            :data:`COMPLETIONS_ENDPOINT` with :data:`COMPLETIONS_BACKEND`; None: random prompts.
        metadata: more ``KEY=VALUE`` pairs stored in the JSON (``--metadata``), e.g. the
            workload's name.

    Returns:
        Path of the JSON written by ``--save-result``.

    Raises:
        BenchError: the server does not answer or does not serve ``model``; vLLM's
            benchmark raised; every request failed (message quotes vLLM's errors); or the
            engine stalled ("engine stalled: requests waiting, none running") or hung ("engine
            hung with N requests running (no tokens for T s; ...)").
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

    target = chat_target_args(root, model, tokenizer, completions=dataset is not None)
    if dataset is None:
        data = [
            "--dataset-name", "random",
            "--random-input-len", str(int(input_len)),
            "--random-output-len", str(int(output_len)),
            "--random-prefix-len", str(int(prefix_len)),
        ]  # fmt: skip
    else:
        if not Path(dataset).is_file():
            raise BenchError(
                f"No dataset file at {dataset}: write it first "
                "(lab.bench.agent_workload.write_agent_workload) and pass its path."
            )
        data = dataset_args(dataset)
    argv = [
        *target,
        *data,
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
        *(f"{k}={v}" for k, v in (metadata or {}).items()),
    ]  # fmt: skip
    if goodput:
        argv += ["--goodput", *(f"{k}:{float(v):g}" for k, v in goodput.items())]
    argv += [str(a) for a in extra_args]

    tqdm.write(shlex.join(["vllm", "bench", "serve", *argv]))  # above a sweep's progress bar
    result = _run_bench_main(argv, log_path, root=root, stall_timeout=stall_timeout)
    if not json_path.exists():
        raise BenchError(
            f"vllm bench serve finished but wrote no {json_path}. See {log_path}.",
            log_path=log_path,
        )
    if not result.get("completed"):
        errors = _request_errors(log_path.read_text())
        cause = SERVER_DIED
        if _healthy(root):
            cause = (
                "check the server log; a request may exceed --max-model-len (prefix_len + "
                f"input_len + output_len = {prefix_len + input_len + output_len} tokens plus "
                "the chat template)"
                if dataset is None
                else f"check the server log; a prompt of {dataset} plus its output_tokens may "
                "exceed --max-model-len"
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
    blocks = re.split(vllm_log.BENCH_ERROR_START, text)
    out: list[str] = []
    for block in blocks:
        m = re.match(vllm_log.BENCH_ERROR, block)
        if not m:
            continue
        body = block[m.end(1) + 2 :].strip()
        line = body.splitlines()[0] if body else ""
        if not line or line.startswith("Traceback"):
            line = last_error_line(body) or (body.splitlines()[-1].strip() if body else "")
        line = f"Error {m.group(1)}: {line[:300]}"
        if line.split(": ", 1)[1] not in {o.split(": ", 1)[1] for o in out}:
            out.append(line)
    return out


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", label).strip("_") or "run"


def _check_tokenizer(tokenizer: Any) -> None:
    """A tokenizer that names a local folder must exist; a hub id (``org/name``) is left to
    the hub. Raises a one-sentence BenchError instead of the hub's repo-id noise."""
    if not isinstance(tokenizer, (str, Path)) or not str(tokenizer).strip():
        raise BenchError(
            f"tokenizer={tokenizer!r}: pass the served model's tokenizer folder (e.g. the "
            "stand-in folder from helpers.standin.build.build_standin_model()) or a hub id."
        )
    text = str(tokenizer)
    path = Path(text).expanduser()
    if path.exists():
        return
    looks_local = isinstance(tokenizer, Path) or path.is_absolute() or "\\" in text
    if looks_local or text.startswith((".", "~")) or text.count("/") != 1:
        raise BenchError(
            f"The tokenizer folder {text} does not exist: pass the folder the server serves "
            "(ServeConfig.model, e.g. helpers.standin.build.build_standin_model() for the stand-in, "
            "or the snapshot path from helpers.weights.download.download()), or a hub id (org/name)."
        )
