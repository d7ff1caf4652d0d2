"""Benchmark a running vLLM server: a sweep of ``vllm bench serve`` points, loaded into pandas::

results = sweep(srv, [1, 4, 16], input_len=1024, output_len=256)   # the server it measures
results = sweep(srv.base_url, model, tokenizer, [1, 4, 16])   # or its URL
results = sweep(srv, scenario=lab.bench.scenarios.scenario("chat", srv))   # a named shape
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import psutil

from helpers.bench import sizing
from helpers.bench.metrics import (
    SPEC_DECODE_DRAFTS,
    _healthy,
    _served_entries,
    acceptance_verdict,
    info_labels,
    parse_prometheus,
    scrape_metrics,
    server_root,
)
from helpers.bench.point import SERVER_DIED, _check_tokenizer, _request_errors, _safe, run_point
from helpers.bench.prefix_floor import NO_PREFIX_CACHING, sweep_floor_line
from helpers.bench.results import annotate_point, load_results, read_point
from helpers.bench.staging import keep_failed_log, publish
from helpers.errors import BenchError
from helpers.memory.planner import DRAFTERS
from helpers.paths import out_dir as _out_dir
from helpers.server.stall import STALL_TIMEOUT_S

#: The warnings already printed (a set of sentences) by the sweeps of one
#: :func:`lab.bench.repeats.repeat_point`: its repeats share it, so a server without prefix
#: caching is named once, not once a run.
_WARNED: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("warned", default=None)

# --------------------------------------------------------------------------- what is measured


def _scenario_value(scenario: Any, key: str, default: Any = None) -> Any:
    if scenario is None:
        return default
    if isinstance(scenario, Mapping):
        return scenario.get(key, default)
    return getattr(scenario, key, default)


def _measured(
    server: Any, model: str | None, tokenizer: str | Path | None, gpu_count: int | None
) -> tuple[str, str, str | Path, int, Any]:
    """``(root URL, model, tokenizer, gpu_count, config or None)`` of what a sweep measures
    (the arguments as :func:`sweep`'s; explicit ones win over the server's)."""
    if isinstance(server, (str, bytes)) or server is None:
        if isinstance(server, bytes) or not server:
            raise BenchError(
                f"sweep: the first argument must be the server (an object with .base_url, e.g. "
                f"launch_server(cfg)) or its URL string; got {server!r:.80}."
            )
        missing = [n for n, v in (("model", model), ("tokenizer", tokenizer)) if v is None]
        if missing:
            raise BenchError(
                f"sweep({server!r}, ...): with a URL, pass {' and '.join(missing)} too "
                "(the served model name and its tokenizer folder), or pass the server object "
                "itself (srv), which knows both."
            )
        return server_root(server), str(model), tokenizer, int(gpu_count or 1), None
    base_url = getattr(server, "base_url", None)
    if not isinstance(base_url, str):
        raise BenchError(
            f"sweep: {type(server).__name__} has no .base_url: pass a server "
            "(helpers.server.launch.launch_server / attach_server, a lab.fleet.fleet.Fleet) or its URL string."
        )
    root = server_root(base_url)
    cfg = getattr(server, "config", None)
    if model is None or tokenizer is None:
        served: Mapping[str, Any] = {}
        if (model is None and getattr(cfg, "served_model_name", None) is None) or (
            tokenizer is None and not getattr(cfg, "model", None)
        ):
            with contextlib.suppress(BenchError):
                served = next(iter(_served_entries(root)), {})
        served_id, served_root = served.get("id"), served.get("root")
        model = model or getattr(cfg, "served_model_name", None) or served_id
        tokenizer = tokenizer or (str(cfg.model) if getattr(cfg, "model", None) else served_root)
        if model is None or tokenizer is None:
            raise BenchError(
                f"sweep: could not tell the served model and its tokenizer from the server at "
                f"{root} (GET /v1/models lists none): pass model= and tokenizer=."
            )
    if gpu_count is None:
        deployed = getattr(server, "gpu_count", None)
        ok = isinstance(deployed, int) and not isinstance(deployed, bool) and deployed > 0
        gpu_count = deployed if ok else max(int(getattr(cfg, "gpu_count", 1) or 1), 1)
    return root, str(model), tokenizer, int(gpu_count), cfg


def _check_scenario(scenario: Any) -> Any:
    """``scenario`` as :func:`sweep` takes it: an object or a mapping of the request shape.

    Raises:
        BenchError: a name (the catalogue of named shapes is the lab's), or an ``agent``
            workload without the ``point_writer`` that writes its sessions (a mapping).
    """
    if isinstance(scenario, (str, bytes)):
        raise BenchError(
            f"sweep(scenario={scenario!r}): pass the scenario itself, not its name: "
            f"lab.bench.scenarios.scenario({scenario!r}, srv) reads it from "
            "cookbook/scenarios.yaml (scaled for the stand-in when srv serves it), or pass a "
            "mapping such as {'input_len': 1024, 'output_len': 256}."
        )
    if _scenario_value(scenario, "agent") and not callable(getattr(scenario, "point_writer", None)):
        raise BenchError(
            "sweep: a scenario with an agent workload writes each point's sessions itself "
            "(its point_writer): pass lab.bench.scenarios.scenario('agent', srv) or another "
            "lab.bench.scenarios.Scenario, not a mapping of its fields."
        )
    return scenario


def _check_concurrencies(concurrencies: Any) -> list[int]:
    """``concurrencies`` as a list of positive ints, each once, or a BenchError naming it."""
    example = "e.g. concurrencies=[1, 2, 4]"
    if isinstance(concurrencies, (str, bytes, Mapping)) or not isinstance(concurrencies, Iterable):
        raise BenchError(
            f"concurrencies={concurrencies!r} ({type(concurrencies).__name__}): pass a list of "
            f"positive ints (requests in flight per point), {example}."
        )
    values = list(concurrencies)
    bad = [c for c in values if isinstance(c, bool) or not isinstance(c, int) or c < 1]
    if bad or not values:
        raise BenchError(f"concurrencies={values!r}: every concurrency must be a positive int (requests in "
                         f"flight), not {bad[0]!r} ({type(bad[0]).__name__}), {example}." if bad
                         else f"concurrencies=[] has no points: pass at least one, {example}.")  # fmt: skip
    return list(dict.fromkeys(values))  # [2, 2] is one point (repeats: lab.bench.repeats)


#: Concurrencies of a sweep when neither the call nor the scenario gives any.
DEFAULT_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64)


def sweep(
    server: Any,
    model: str | None = None,
    tokenizer: str | Path | None = None,
    concurrencies: Sequence[int] | None = None,
    *,
    scenario: Mapping[str, Any] | Any | str | None = None,
    input_len: int | None = None,
    output_len: int | None = None,
    prefix_len: int | None = None,
    num_prompts: int | None = None,
    out_dir: str | Path | None = None,
    label: str = "default",
    gpu_count: int | None = None,
    slo: Mapping[str, float] | None = None,
    seed: int = 0,
    num_warmups: int | None = None,
    extra_args: Sequence[str] = (),
    progress: bool = True,
    seed_label: str | None = None,
    stall_timeout: float | None = STALL_TIMEOUT_S,
    keep_other_points: bool = False,
) -> pd.DataFrame:
    """Run one :func:`run_point` per concurrency and return :func:`load_results` of them, with
    what ``/metrics`` scrapes around each point add (:func:`~helpers.bench.results.annotate_point`;
    a warning printed once per sweep).

    Args:
        server: what it measures: a :class:`~helpers.server.vllm_server.VLLMServer`, a
            :class:`~lab.fleet.fleet.Fleet`, anything with ``.base_url`` (its config, else
            ``GET /v1/models``, gives ``model``, ``tokenizer``, ``gpu_count``); or its URL
            string (server root or ``.../v1``) with ``model`` and ``tokenizer``.
        model: served model name (default: the server's). With a server object, a list
            here is taken as ``concurrencies`` (``sweep(srv, [1, 16, 64])``).
        tokenizer: local tokenizer folder matching the server's (default: the server
            config's model folder, else the ``root`` ``/v1/models`` lists).
        concurrencies: ``--max-concurrency`` per point, run in this order; default the
            scenario's ``concurrencies``, else :data:`DEFAULT_CONCURRENCIES`.
        scenario: the request shape: an object or a mapping with any of ``input_len``,
            ``output_len``, ``prefix_len``, ``num_prompts``, ``prompts_per_concurrency``,
            ``concurrencies`` (a :class:`lab.bench.scenarios.Scenario`, the lab's named
            shapes). Explicit keyword arguments win over it. One with an ``agent`` workload
            writes, per point, its own sessions beside the point: the sweep calls its
            ``point_writer(tokenizer)`` once, then the function it returns with ``(point,
            folder, label)`` for ``(summary line, run_point arguments)``
            (:meth:`lab.bench.scenarios.Scenario.point_writer`); they are replayed on the
            completions endpoint without warm-up. The sweep prints the workload and the reuse
            floor read from the server's ``vllm:cache_config_info``
            (:func:`~helpers.bench.prefix_floor.sweep_floor_line`; also for a shared prefix).
        input_len, output_len: tokens per request (defaults 1024 / 128 when neither these
            nor ``scenario`` give them).
        prefix_len: shared-prefix tokens per point (``--random-prefix-len``), default 0.
        num_prompts: requests per point; default the scenario's ``num_prompts``, else its
            ``prompts_per_concurrency`` × concurrency, else
            :func:`~helpers.bench.sizing.default_num_prompts` (4 × concurrency, at least 16).
        out_dir: default ``helpers.paths.out_dir("bench", label)``.
        label: configuration name (one line per label in the plots).
        gpu_count: GPUs behind the server, for ``output_throughput_per_gpu`` (default: the
            server's or its config's ``gpu_count``, at least 1; 1 with a URL).
        slo: goodput SLOs in ms, e.g. ``{"ttft": 2000, "tpot": 50}``.
        seed: base seed; each point gets :func:`~helpers.bench.sizing.point_seed` of it.
        num_warmups: warm-up requests per point; default ``min(concurrency, 8)``
            (:func:`~helpers.bench.sizing.default_num_warmups`).
        extra_args: more ``vllm bench serve`` flags for every point.
        progress: show a tqdm bar across points (text, on stderr; it ends at N/N, 100%).
        seed_label: the name hashed into each point's seed instead of ``label`` (the same for
            several configurations sends them the same prompts).
        stall_timeout: abort a point whose engine has requests waiting and none running
            for this many seconds (see :func:`run_point`); None disables it.
        keep_other_points: replace only the points this sweep measured and keep the label's
            others in ``out_dir`` (a caller that resumes point by point: the tuning step).

    A concurrency above :data:`~helpers.bench.sizing.OVERSUBSCRIPTION` x the server's
    ``--max-num-seqs`` (summed over a fleet's replicas) is capped, with a printed
    :class:`~helpers.bench.sizing.ConcurrencyCappedWarning`. Through a fleet each point records
    its replicas serving (``replicas*`` columns). Points replace the label's earlier ones in
    ``out_dir`` only when the sweep ends, so a folder never mixes two runs.

    Returns:
        The DataFrame of :func:`load_results`, one row per point, sorted by concurrency.
        With speculative decoding, ``spec_decode_level`` / ``spec_decode_verdict`` judge each
        point (:func:`acceptance_verdict`); an ``error`` verdict is also printed.

    Raises:
        BenchError: see :func:`run_point` and :func:`sweep_points`; a URL without ``model``
            / ``tokenizer``, an object without ``.base_url``, a scenario name or an agent
            workload given as a mapping. The points finished before
            a failure or an interrupt replace the label's earlier points in ``out_dir`` and,
            on a BenchError, are its ``.results`` (the failed point's log is kept as
            ``<label>-c<N>.failed.log``).
    """
    # the text bar (not tqdm.auto's widget): an executed notebook saves its final state
    from tqdm.std import tqdm

    if isinstance(model, (list, tuple)) and concurrencies is None:
        if not isinstance(server, (str, bytes)):  # sweep(srv, [1, 16, 64]): it knows its model
            model, concurrencies = None, model
    root, model, tokenizer, gpu_count, cfg = _measured(server, model, tokenizer, gpu_count)
    scenario = _check_scenario(scenario)
    if concurrencies is None:
        concurrencies = _scenario_value(scenario, "concurrencies") or DEFAULT_CONCURRENCIES
    concurrencies = _check_concurrencies(concurrencies)
    _check_tokenizer(tokenizer)
    points = sweep_points(
        concurrencies, scenario=scenario, input_len=input_len, output_len=output_len,
        prefix_len=prefix_len, num_prompts=num_prompts, label=label, seed=seed,
        num_warmups=num_warmups, seed_label=seed_label,
    )  # fmt: skip
    points = sizing._bound_concurrency(points, server, cfg, label)
    folder = Path(out_dir) if out_dir is not None else _out_dir("bench") / _safe(label)
    existed = folder.exists()
    for old in folder.glob(f".partial-{_safe(label)}-*"):  # a killed run's stage: its pid is gone
        if not psutil.pid_exists(int(old.name.rsplit("-", 2)[1])):
            shutil.rmtree(old, ignore_errors=True)
    # private until the sweep ends (another run of the label may be writing beside it)
    stage = folder / f".partial-{_safe(label)}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    stage.mkdir(parents=True)

    paths: list[Path] = []
    agent = _scenario_value(scenario, "agent")
    write_point = None
    cache_config: dict[str, str] | None = None
    shared = _WARNED.get()
    warned: set[str] = shared if shared is not None else set()
    bar = tqdm(points, desc=f"bench {label}", unit="point", disable=not progress)
    dummy = serves_dummy_weights(server)
    failure: BaseException | None = None
    try:
        for point in bar:
            c = point["concurrency"]
            bar.set_postfix(concurrency=c)
            replicas_before = _replica_states(server)
            text = scrape_metrics(root)
            before = parse_prometheus(text)
            if cache_config is None:
                cache_config = info_labels(text)  # block size, prefix caching: per server
                if agent or any(p["prefix_len"] for p in points):  # the reuse floor, read back
                    drafter = getattr(cfg, "speculative", None) in DRAFTERS or (cfg is None and SPEC_DECODE_DRAFTS in text)  # fmt: skip
                    _say_once(bar, warned, sweep_floor_line(label, cache_config, drafter))
            run_args: dict[str, Any] = dict(point)
            if agent:  # the point's own sessions (seeded by the point: no shared cache)
                write_point = write_point or scenario.point_writer(tokenizer)
                summary, more = write_point(point, stage, label)
                run_args.update(more)
                _say_once(bar, warned, f"{label}: {summary}")
            path = run_point(
                root, model, tokenizer, **run_args, out_dir=stage, goodput=slo,
                extra_args=extra_args, label=label, gpu_count=gpu_count,
                stall_timeout=stall_timeout,
            )  # fmt: skip
            after = _metrics_after(root, path, c)
            extra = _replica_notes(replicas_before, _replica_states(server))
            notes = annotate_point(path, before, after, cache_config, extra=extra)
            paths.append(path)
            verdict = acceptance_verdict(read_point(path))
            if verdict.get("spec_decode_level") == "error":
                # nothing accepted: said where the sweep runs, and kept on the row; on random
                # weights (--load-format dummy) a drafter has nothing to predict
                level = "expected on dummy weights:" if dummy else "ERROR"
                bar.write(f"{level} {label} concurrency {c}: {verdict['spec_decode_verdict']}")
            for key in ("cookbook_prefix_cache_warning", "cookbook_replica_warning", "cookbook_queue_warning"):  # fmt: skip
                # once a sweep (or repeat_point's repeats; every row keeps it); none on a server
                # the floor line already named as without prefix caching (with the fix)
                note, off = notes.get(key), any(NO_PREFIX_CACHING in w for w in warned)
                if note and note not in warned and not (off and NO_PREFIX_CACHING in note):
                    warned.add(note)
                    bar.write(f"WARNING {label} concurrency {c}: {note}")
    except BaseException as e:
        failure = e
        keep_failed_log(e, stage, folder)
        raise
    finally:
        bar.close()
        try:
            kept = publish(stage, folder, label, paths, keep_other_points) if paths else []
            if isinstance(failure, BenchError) and kept:
                failure.results = load_results(kept)  # type: ignore[attr-defined]
                failure.args = (
                    f"{failure} The {len(kept)} point(s) finished before it are kept in {folder} "
                    "(this error's .results, or helpers.bench.results.load_results(folder)).",
                )
        finally:
            shutil.rmtree(stage, ignore_errors=True)
            if not existed and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()  # a sweep that wrote nothing leaves no empty folder behind
    return load_results(kept)


def _say_once(bar: Any, said: set[str], line: str | None) -> None:
    """Print ``line`` above the bar once a sweep (or a repeat_point's repeats)."""
    if line and line not in said:
        said.add(line)
        bar.write(line)


def _replica_states(server: Any) -> list[tuple[int, bool, str]] | None:
    """``[(replica, serving, why not)]`` of a fleet (its ``replica_states()``), else None."""
    states = getattr(server, "replica_states", None)
    if not callable(states):
        return None
    try:
        return list(states())
    except Exception:  # noqa: BLE001 - a failed look is no finding
        return None


def _replica_notes(before, after) -> dict[str, Any]:
    """The sidecar notes on a fleet's replicas around one point (``{}`` without a fleet)."""
    if before is None and after is None:
        return {}
    states = after if after is not None else before
    serving_before = {i for i, ok, _ in (before or states) if ok}
    down = [(i, why) for i, ok, why in states if not ok or i not in serving_before]
    notes: dict[str, Any] = {"cookbook_replicas": len(states), "cookbook_replicas_serving": len(states) - len(down)}  # fmt: skip
    if down:
        what = "; ".join(f"replica {i}: {why or 'not serving'}" for i, why in down)
        notes["cookbook_replica_warning"] = (
            f"{len(down)} of {len(states)} replicas were not serving during this point ({what}): "
            f"it measured {len(states) - len(down)} replica(s), not {len(states)}"
        )
    return notes


def _metrics_after(root: str, path: Path, concurrency: int) -> dict[str, float]:
    """``/metrics`` after a point; a server that died during it (some requests completed,
    the rest failed) is named with the point's own request errors, not as a failed scrape.

    Raises:
        BenchError: the server no longer answers (quotes ``vllm bench serve``'s errors).
    """
    try:
        return parse_prometheus(scrape_metrics(root))
    except BenchError:
        if _healthy(root):
            raise
        log = path.with_suffix(".log")
        errors = _request_errors(log.read_text(errors="replace")) if log.is_file() else []
        raise BenchError(
            f"The point at concurrency {concurrency} against {root} ended with the server "
            f"gone ({'; '.join(errors[:3]) or 'no request error text'}). Cause: {SERVER_DIED}. "
            f"Full benchmark output in {log}.",
            log_path=log,
        ) from None


def _tokens(name: str, given: Any, default: Any, minimum: int) -> int:
    """``given`` (else ``default``) as an int of at least ``minimum``; a BenchError naming the
    argument and the limit otherwise (a 0 is refused, never replaced by the default)."""
    value = given if given is not None else default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value < minimum:  # fmt: skip
        what = "tokens" if name.endswith("_len") else "requests"
        raise BenchError(
            f"{name}={value!r}: must be a whole number of {what}, at least {minimum} "
            f"(e.g. {name}={'1024' if name == 'input_len' else '128' if name == 'output_len' else '16' if name == 'num_prompts' else '0'})."
        )
    return int(value)


def serves_dummy_weights(server: Any) -> bool:
    """True when ``server`` was launched with ``--load-format dummy`` (random weights: the
    weightless mode), read from its ServeConfig's args; False when it has none (attached to a
    URL, or another launcher)."""
    args = getattr(getattr(server, "config", None), "args", None)
    return isinstance(args, Mapping) and args.get("--load-format") == "dummy"


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

    Raises:
        BenchError: ``input_len`` / ``output_len`` / ``num_prompts`` below 1, ``prefix_len``
            below 0, or not whole numbers (``input_len=0`` is refused, not taken as "default").
    """
    in_len = _tokens("input_len", input_len, _scenario_value(scenario, "input_len", 1024), 1)
    out_len = _tokens("output_len", output_len, _scenario_value(scenario, "output_len", 128), 1)
    pre_len = _tokens("prefix_len", prefix_len, _scenario_value(scenario, "prefix_len", 0), 0)
    n_fixed = _tokens("num_prompts", num_prompts, None, 1) if num_prompts is not None else _scenario_value(scenario, "num_prompts")  # fmt: skip
    per_c = _scenario_value(scenario, "prompts_per_concurrency")
    # an agent workload has no warm-up: vLLM's repeat line 1, whose prefix-cache hits the
    # point's counters would count (vllm/benchmarks/serve.py benchmark(), vLLM 0.32.0)
    agent = bool(_scenario_value(scenario, "agent"))
    return [{"concurrency": int(c), "num_prompts": int(n_fixed or (int(per_c) * int(c) if per_c else sizing.default_num_prompts(c))),
             "input_len": in_len, "output_len": out_len, "prefix_len": int(pre_len or 0),
             "seed": sizing.point_seed(seed, seed_label or label, c, in_len, out_len),
             "num_warmups": (0 if agent else sizing.default_num_warmups(c)) if num_warmups is None else int(num_warmups)}
            for c in concurrencies]  # fmt: skip
