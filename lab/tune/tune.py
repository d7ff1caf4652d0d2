"""The tuning step: serve candidate configurations in turn, sweep each, pick the best for a
workload and an SLO, price it. Results are saved point by point, so a run resumes.

::

    from lab.tune.tune import tune
    base = resolve("h200")
    result = tune(base, "tune-1k", {"tpot_ms": 20, "ttft_ms": 2000},
                  [{"name": "marlin", "moe_backend": "marlin"},
                   {"name": "bf16", "variant": "bf16"}],
                  mode="weightless", gpu_hour_usd=3.5)
    result.recommendation_table()        # per workload: the recommended point and the recipe's
    print(result.recommended().shell_command)

Each candidate (:class:`~lab.tune.inputs.Candidate`; ``"recipe"``, the target's own
command, is the reference) is launched, swept with vLLM's ``--goodput`` from the SLO and stopped
in a ``finally``; a failed start or point is recorded with its diagnosis and the rest still run.
Why not ``vllm bench sweep serve`` (vLLM 0.32.0): docs/DESIGN.md.

**On disk** (default ``out/tune/<target>[-standin]/``)::

    <candidate>/candidate.json              the command served (checked on resume)
    <candidate>/failures.json               start or point failures, with the diagnosis
    <candidate>/<workload>/workload.json    the request shape and the --goodput bounds
    <candidate>/<workload>/<candidate>-c<N>.json   one vllm bench serve point (+ .log): repeat 0
    <candidate>/<workload>/<candidate>-r<k>-c<N>.json   repeat k of a decision point
    <candidate>/<workload>/search/<candidate>-c<N>.json   a probe of the SLO limit's bisection
    tune.json                               the whole result (:data:`SCHEMA`)

A point whose JSON exists and completed requests is done: a second run skips it, and a candidate
with nothing left to measure is not launched. Per workload (:func:`_next_step`) a candidate costs
at most ``len(concurrencies) + 2 x (repeats - 1) + slo_search`` points and one server start; the
pick and its tie rule: :meth:`lab.tune.results.TuneResult.recommended`. ``tune.json`` is the
format of the committed results under ``docs/results/<target>/tune/`` (:func:`load_tune_rows`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from helpers.config.run import Run
from helpers.config.versions import installed_vllm_version, parse_version
from helpers.errors import BenchError, CookbookError, ServerStartError
from helpers.paths import out_dir as _out_dir
from helpers.server import httpio
from helpers.server.vllm_server import VLLMServer
from helpers.weights.prepare import MODES
from lab.bench.scenarios import Scenario
from lab.synthetic_acceptance import describe, with_synthetic_acceptance
from lab.tune import slo as slos
from lab.tune.inputs import (  # noqa: F401 - the tuning step's names, in one place
    Candidate,
    candidate,
    check_candidates,
    default_candidates,
    make_candidates,
    workloads,
)
from lab.tune.points import (  # noqa: F401 - the tuning step's names, in one place
    SEARCH,
    _failed,
    _read_json,
    _write_json,
    decision_concurrencies,
    point_done,
    point_path,
    point_runs,
    search_meets,
    search_path,
)
from lab.tune.results import TuneResult, changes, collect, drafting_words  # noqa: F401 - in one place
from lab.tune.saved import RECIPE, SCHEMA, load_tune_rows  # noqa: F401 - in one place


# --------------------------------------------------------------------------- the run
def _same_release(want: str | None, have: str | None) -> bool:
    a, b = parse_version(want), parse_version(have)
    return a is None or b is None or a.release[:3] == b.release[:3]


def _failure(stage: str, exc: BaseException, **extra: Any) -> dict[str, Any]:
    """A failure record: stage, error type, the message's first part, the diagnosis."""
    text = str(exc)
    message = text.split("\n--- last log lines ---")[0].strip()
    rec: dict[str, Any] = {"stage": stage, "error": type(exc).__name__, "message": message}
    diag = getattr(exc, "diagnosis", None)
    if diag is not None:
        rec["diagnosis"] = {"name": diag.name, "cause": diag.cause, "fix": diag.fix}
    log = getattr(exc, "log_path", None)
    if log:
        rec["log"] = str(log)
    rec.update(extra)
    rec["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return rec


def _say(progress: bool, text: str) -> None:
    if progress:
        print(f"[tune] {text}", flush=True)


@contextlib.contextmanager
def _only_run_on(folder: Path):
    """Hold ``folder`` for one tuning run (a lock file in it, ``filelock``): a second run on
    the same folder would launch its servers beside this one's and write the same points.

    Raises:
        BenchError: another run holds it (names the folder and the fix).
    """
    from filelock import FileLock, Timeout

    try:
        with FileLock(str(folder / ".tune.lock"), timeout=0):
            yield
    except Timeout:
        raise BenchError(
            f"Another tuning run is using {folder}: two runs on one out_dir would serve their "
            "candidates side by side and write the same points. Wait for it to finish, or pass "
            "another out_dir."
        ) from None


def _host_of(url: str | None) -> str:
    """The machine a candidate is measured on: this one (launched here, or attached on its
    loopback), else the attached server's host name."""
    import socket
    from urllib.parse import urlparse

    host = urlparse(url).hostname if url else None
    return socket.gethostname() if host in (None, "127.0.0.1", "localhost", "::1") else host


def _measured(folder: Path) -> bool:
    """``folder`` holds at least one finished point (a ``*-c<N>.json`` that completed requests)."""
    return any(point_done(p) for p in folder.rglob("*-c*.json"))


#: Record keys added after records were saved: ``num_prompts`` (per concurrency, 2026-12-05).
LATER_KEYS = ("num_prompts",)


def _check_record(
    path: Path, want: Mapping[str, Any], what: str, folder: Path, write: bool = True
) -> None:
    """Compare a saved record with what this run would write (writing it when there is none
    and ``write``): a difference raises when points were measured for the saved one, else the
    record (and its failures) is replaced."""
    have = _read_json(path)
    diff = []
    if have is not None:  # a key added to records later: a record saved without it matches
        diff = sorted(
            k for k in want if have.get(k, want[k] if k in LATER_KEYS else None) != want[k]
        )
    if write and (have is None or (diff and not _measured(folder))):
        if diff:
            (folder / "failures.json").unlink(missing_ok=True)
        _write_json(path, dict(want))
    elif diff and _measured(folder):
        raise BenchError(
            f"{path} holds {what} with other {', '.join(diff)} (saved: "
            f"{ {k: have.get(k) for k in diff} }, now: { {k: want[k] for k in diff} }): its points "
            f"were measured for that, not this. Name the candidate or the workload differently, "
            f"pass another out_dir, or delete {folder} to measure again."
        )


def tune(
    target: Any,
    workload: Any,
    slo: slos.SLO | Mapping[str, Any] | None = None,
    candidates: Iterable[Candidate | Mapping[str, Any]] | None = None,
    *,
    mode: str = "download",
    concurrencies: Sequence[int] | None = None,
    num_prompts: int | None = None,
    gpu_hour_usd: float | None = None,
    gpu_count: int | None = None,
    out_dir: str | Path | None = None,
    servers: Mapping[str, str] | None = None,
    include_recipe: bool = True,
    retry_failed: bool = False,
    only: Sequence[str] | None = None,
    remeasure: Sequence[str] = (),
    progress: bool = True,
    startup_timeout: float | None = None,
    bench_args: Sequence[str] = (),
    server_factory: Callable[[Any], Any] | None = None,
    repeats: int | None = None,
    slo_search: int = 2,
    api_prices: Any = None,
) -> TuneResult:
    """Measure each candidate at each workload's concurrencies; return what was measured.

    Args:
        target: the target's :class:`~helpers.config.serveconfig.ServeConfig`
            (``resolve("h200")``); it is the ``"recipe"`` candidate.
        workload: a scenario name, a Scenario, a mapping of lengths, or a list of them
            (:func:`workloads`; names are scaled for the stand-in in ``mode="stand_in"``).
        slo: the bounds (:class:`lab.tune.slo.SLO` or a mapping; None:
            :data:`lab.tune.slo.DEFAULT_SLO`), also sent to vLLM as ``--goodput``.
        candidates: more candidates (:func:`make_candidates`: :class:`Candidate` objects or
            spec mappings), after ``"recipe"``.
        mode: what is served (:func:`helpers.weights.prepare.served_config`): ``"download"``,
            ``"weightless"`` or ``"stand_in"``, or a :class:`helpers.config.run.Run`.
        concurrencies: ``--max-concurrency`` values for every workload (default: each
            workload's own).
        num_prompts: requests per point for every workload (default: the workload's rule).
        gpu_hour_usd: price of one GPU hour in US dollars, for the cost per million tokens.
        gpu_count: GPUs behind each server (default: each config's, at least 1; the stand-in
            counts as 1).
        out_dir: the run's folder (default ``out/tune/<target>[-standin]``); reused to resume.
            A relative one is under the cookbook's ``out/`` wherever this runs
            (:func:`run_folder`).
        servers: ``{candidate name: base URL}`` of servers already running that candidate:
            measured there, never launched or stopped.
        include_recipe: measure the target's own command as ``"recipe"``.
        retry_failed: launch again a candidate whose start failed before (default: report the
            recorded failure and skip it), and rerun failed points.
        only: measure only these candidate names now (the others' saved points still count).
        remeasure: candidate names whose saved points are deleted and measured again now
            (even when ``only`` leaves them out; :meth:`TuneResult.measured_apart`).
        progress: one line per candidate and step, the server's start-up phases, a bar per sweep.
        startup_timeout: seconds to wait for ``/health`` (default: the server manager's).
        bench_args: more ``vllm bench serve`` flags for every point.
        server_factory: ``config -> VLLMServer`` (not started) instead of
            ``VLLMServer(config, ...)``; a seam for process tests.
        repeats: runs of each candidate's decision points (the lowest concurrency and its
            best under the SLO), each with its own seed. Default 3 on a GPU (``vllm bench sweep
            serve --num-runs``'s, 0.32.0 ``vllm/benchmarks/sweep/serve.py``), 2 on the stand-in
            (a spread, and CI stays short).
        slo_search: at most this many extra points per candidate and workload, bisecting
            between its highest concurrency that meets the SLO and the lowest that misses
            (:func:`lab.tune.slo.next_probe`); 0: only the grid. One run each.
        api_prices: the hosted API's prices the cost is set beside
            (:meth:`lab.tune.slo.APIPrice.coerce`; None: :data:`lab.tune.slo.API_PRICES`).

    Returns:
        A :class:`TuneResult`; ``tune.json`` in the folder holds the same (:data:`SCHEMA`).

    Raises:
        BenchError: bad arguments (named: ``repeats`` below 1, ``slo_search`` below 0, an API
            price without its fields), or a saved record of this folder that was measured
            for another command or workload (resume would mix them).
        HardwareError: a GPU candidate is to be launched here and this machine cannot run the
            target (no GPU, too few, too small; :func:`_check_gpu_here`), before anything is
            downloaded or launched.
        KeyboardInterrupt: the candidate's server was stopped first; finished points stay saved.
    """
    if isinstance(mode, Run):
        mode = mode.weights
    if mode not in MODES or mode == "attach":
        raise BenchError(
            f"mode={mode!r}: pass 'download', 'weightless' or 'stand_in' (what each candidate "
            "serves); servers={name: url} measures servers that already run."
        )
    run = Run(mode, target=target)
    stand_in = run.stand_in
    reps = (2 if stand_in else 3) if repeats is None else repeats
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise BenchError(
            f"repeats={repeats!r}: pass an int of 1 or more (runs of each decision point; 3 is "
            "vLLM's sweep default, 1 measures no spread), or None for the default."
        )
    if isinstance(slo_search, bool) or not isinstance(slo_search, int) or slo_search < 0:
        raise BenchError(
            f"slo_search={slo_search!r}: pass an int of 0 or more (extra points of the SLO "
            "limit's bisection per candidate and workload; 0 measures only the grid)."
        )
    if gpu_hour_usd is not None and (
        isinstance(gpu_hour_usd, bool)
        or not isinstance(gpu_hour_usd, (int, float))
        or not math.isfinite(gpu_hour_usd)
        or gpu_hour_usd < 0
    ):
        raise BenchError(
            f"gpu_hour_usd={gpu_hour_usd!r}: pass the price of one GPU hour in US dollars, a "
            "number of 0 or more (e.g. 3.5), or None for no cost; checked before anything runs."
        )
    prices = slos.APIPrice.coerce(api_prices)
    bounds = slos.SLO.coerce(slo)
    cands = make_candidates(target, candidates, include_recipe=include_recipe)
    loads = workloads(workload, run=run)
    if num_prompts is not None:
        loads = [w.with_num_prompts(num_prompts) for w in loads]
    if concurrencies is not None:
        from helpers.bench.sweep import _check_concurrencies

        cs = tuple(_check_concurrencies(concurrencies))
        loads = [dataclasses.replace(w, concurrencies=cs) for w in loads]
    servers = dict(servers or {})
    unknown = sorted((set(servers) | set(only or ()) | set(remeasure)) - {c.name for c in cands})
    if unknown:
        raise BenchError(
            f"servers / only / remeasure name {unknown}, which are not candidates of this run: "
            f"{[c.name for c in cands]}."
        )
    tag = f"{target.target}{'-standin' if stand_in else ''}"
    folder = run_folder(out_dir, tag)
    folder.mkdir(parents=True, exist_ok=True)
    with _only_run_on(folder):
        installed = installed_vllm_version()
        skipped: dict[str, dict[str, Any]] = {}
        gpu_checked = False
        for i, cand in enumerate(cands, 1):
            head = f"{i}/{len(cands)} {cand.name!r}"
            cdir = folder / cand.name
            # what is saved must have been measured for this command and these workloads
            record = {"name": cand.name, "command": cand.config.shell_command()}
            if stand_in and cand.standin_args is not None:  # what the stand-in serves differs
                record["standin_args"] = {k: v for k, v in cand.standin_args.items()}
            if stand_in and cand.standin_drafting:
                record["standin_drafting"] = cand.standin_drafting
            measuring = only is None or cand.name in only or cand.name in remeasure
            _check_record(
                cdir / "candidate.json", record, f"candidate {cand.name!r}", cdir, measuring
            )
            for w in loads:
                shape = {"input_len": w.input_len, "output_len": w.output_len,
                         "prefix_len": w.prefix_len, "goodput": bounds.goodput_args(),
                         "num_prompts": {str(c): w.num_prompts_for(c) for c in w.concurrencies}}  # fmt: skip
                _check_record(cdir / w.name / "workload.json", shape, f"workload {w.name!r}",
                              cdir / w.name, measuring)  # fmt: skip
            if not measuring:
                continue
            if cand.name in remeasure:
                for w in loads:
                    for c in w.concurrencies:
                        for path in point_runs(folder, cand.name, w, c):
                            path.unlink(missing_ok=True)
                    shutil.rmtree(cdir / w.name / SEARCH, ignore_errors=True)
            fails_path = cdir / "failures.json"
            failures = _read_json(fails_path) or []
            started = [f for f in failures if f.get("stage") in ("prepare", "validate", "start")]
            if started and not retry_failed:
                _say(progress, f"{head}: skipped, its start failed before ({started[-1]['message'][:160]}); "
                     "retry_failed=True launches it again")  # fmt: skip
                continue
            if retry_failed:
                failures = []
            steps = {w.name: _next_step(folder, cand.name, w, bounds, reps, slo_search, failures)
                     for w in loads}  # fmt: skip
            if not any(steps.values()):
                unused = (
                    f"; the server at {servers[cand.name]} was not contacted"
                    if cand.name in servers
                    else ""
                )
                _say(progress, f"{head}: every point saved, nothing to run (saved runs are "
                     f"kept: another out_dir, or remeasure=[...], measures anew){unused}")  # fmt: skip
                continue
            url = servers.get(cand.name)
            attached_release = _served_version(VLLMServer.attach(url, check=False)) if url else None
            if url and not _same_release(cand.config.vllm_version, attached_release):
                reason = (
                    f"the server at {url} runs vLLM {attached_release} (its /version), but this "
                    f"candidate is vLLM {cand.config.vllm_version}: attach a server of that "
                    "release, or name the candidate for what it serves"
                )
                skipped[cand.name] = {"stage": "release", "message": reason}
                _say(progress, f"{head}: refused, {reason}")
                continue
            if url is None and not _same_release(cand.config.vllm_version, installed):
                reason = (
                    f"needs vLLM {cand.config.vllm_version}, this environment has {installed}: run it "
                    "where that release is installed (same out_dir: the results merge)"
                )
                skipped[cand.name] = {"stage": "release", "message": reason}
                _say(progress, f"{head}: skipped, {reason}")
                continue
            if url is None and not stand_in and not gpu_checked:
                _check_gpu_here(run, servers)  # before a download or a doomed launch
                gpu_checked = True
            try:
                served = cand.served("stand_in" if stand_in else ("attach" if url else mode))
            except CookbookError as exc:
                failures.append(_failure("prepare", exc))
                _write_json(fails_path, failures)
                _say(progress, f"{head}: could not prepare it: {exc}")
                continue
            record["served"] = f"attached: {url}" if url else " ".join(map(str, served.cli_flags()))
            if stand_in and cand.standin_drafting not in (None, "ngram"):
                _say(progress, f"{head}: the stand-in drafts {cand.standin_drafting}, the one drafter of "
                     f"the CPU build: its speed here says nothing of {cand.config.speculative} on a GPU")  # fmt: skip
            # drafting on random weights: at a stated acceptance (an attached server of a
            # weightless run was started with it: the candidate's command says which)
            weightless = url and mode == "weightless"
            point = describe(with_synthetic_acceptance(cand.config) if weightless else served)
            record["acceptance"] = point.caption() if point else None
            cand_loads = _within_cap(loads, served, head, progress)
            steps = {w.name: _next_step(folder, cand.name, w, bounds, reps, slo_search, failures)
                     for w in cand_loads}  # fmt: skip
            n_points = sum(len(s[2]) for s in steps.values() if s and s[0] == "first")
            what = f"{n_points} point(s)" if n_points else "the saved points' next runs"
            then = (
                f"; repeats: {reps} runs of each decision point" if reps > 1 else "; one run each"
            )
            if url:
                _say(progress, f"{head}: measuring {what} on the server at {url}{then}")
                srv = VLLMServer.attach(url)
            else:
                _say(progress, f"{head}: launching, then {what}{then}")
                srv = (
                    server_factory(served)
                    if server_factory is not None
                    else VLLMServer(served, progress=progress, **(
                        {"startup_timeout": startup_timeout} if startup_timeout else {}))
                )  # fmt: skip
                # its launch line says how it differs from the candidate's command
                srv.run = dataclasses.replace(srv.run, target=cand.config)
            try:
                if not url:
                    try:
                        srv.start()
                    except ServerStartError as exc:
                        failures.append(_failure("start", exc))
                        _say(progress, f"{head}: did not start: {failures[-1]['message'][:400]}")
                        continue
                    except CookbookError as exc:  # refused before a process existed (flags, values)
                        failures.append(_failure("validate", exc))
                        _say(progress, f"{head}: refused before launch: {exc}")
                        continue
                version = installed if not url else _served_version(srv)
                record.update(vllm_version=version, host=_host_of(url))
                _write_json(cdir / "candidate.json", record)
                gpus = gpu_count or max(int(getattr(served, "gpu_count", 1) or 1), 1)
                for w in cand_loads:
                    _run_steps(srv, cand.name, head, w, folder, bounds, gpus, bench_args,
                               progress, failures, reps, slo_search)  # fmt: skip
                    if failures and failures[-1].get("stage") == "crash":
                        break
            finally:
                if failures or fails_path.exists():
                    _write_json(fails_path, failures)
                srv.stop()
        result = collect(folder, target, cands, loads, bounds, gpu_hour_usd=gpu_hour_usd,
                         run=run, skipped=skipped, repeats=reps, api_prices=prices)  # fmt: skip
        result.save()
    return result


def run_folder(out_dir: str | Path | None, tag: str) -> Path:
    """The tuning run's folder, absolute: ``out_dir`` as given when absolute; a relative one
    under the cookbook's ``out/`` (:func:`helpers.paths.out_dir`, ``$COOKBOOK_OUT`` if set),
    a leading ``out/`` read as that folder, so ``"out/tune/mine"`` and ``"tune/mine"`` are
    both ``<out>/tune/mine`` from a notebook (which runs in ``notebooks/``), a script or a
    shell alike; None: ``<out>/tune/<tag>``."""
    if out_dir is None:
        return _out_dir("tune", tag)
    path = Path(out_dir).expanduser()
    if path.is_absolute():
        return path
    parts = path.parts[1:] if path.parts[:1] == ("out",) else path.parts
    return _out_dir(*parts)


def _check_gpu_here(run: Run, servers: Mapping[str, str]) -> None:
    """Refuse to launch a GPU candidate on a machine that cannot run the target
    (:func:`helpers.machine.hardware.check_machine`: no GPU, too few, too small), so no
    checkpoint is downloaded and no server launched only to fail.

    Raises:
        HardwareError: check_machine's refusal, with the tuning step's ways out added.
    """
    from helpers.errors import HardwareError
    from helpers.machine.hardware import check_machine

    try:
        check_machine(run, quiet=True)
    except HardwareError as exc:
        attached = f" (given now: {', '.join(servers)})" if servers else ""
        raise HardwareError(
            f"{exc} Tuning launched nothing. To measure GPU servers that run elsewhere, pass "
            f"servers={{candidate name: URL}} for every candidate{attached}.",
            report=exc.report,
        ) from None


def _within_cap(loads: Sequence[Scenario], cfg: Any, head: str, progress: bool) -> list[Scenario]:
    """``loads`` without the concurrencies above what ``cfg`` serves at all
    (:data:`helpers.bench.sizing.OVERSUBSCRIPTION` x its ``--max-num-seqs``: a sweep caps them,
    so the point asked for is never saved and its repeats never run); said once each."""
    from helpers.bench.sizing import OVERSUBSCRIPTION, _max_num_seqs

    known = _max_num_seqs(None, cfg)
    if known is None:
        return list(loads)
    cap = OVERSUBSCRIPTION * known[0]
    out = []
    for w in loads:
        over = [c for c in w.concurrencies if c > cap]
        if over:
            _say(progress, f"{head} {w.name}: concurrency {', '.join(map(str, over))} not measured: "
                 f"above {cap} ({OVERSUBSCRIPTION} x {known[1]}), where requests only queue")  # fmt: skip
        kept = [c for c in w.concurrencies if c <= cap]
        if kept:
            out.append(dataclasses.replace(w, concurrencies=kept))
    return out


def _served_version(srv: Any) -> str | None:
    """The release an attached server reports on ``GET /version`` (vLLM's own route)."""
    try:
        status, body = httpio.get(srv.url + "/version", timeout=10.0)
        return json.loads(body).get("version") if status == 200 else None
    except (ConnectionError, ValueError, AttributeError):
        return None


def _next_step(
    folder: Path,
    name: str,
    w: Scenario,
    bounds: slos.SLO,
    repeats: int,
    slo_search: int,
    failures: Sequence[Mapping[str, Any]],
) -> tuple[str, int, list[int]] | None:
    """What candidate ``name`` still has to measure at workload ``w``, one step at a time, from
    what is saved (so a run resumes anywhere): ``("first", 0, concurrencies)`` (repeat 0 of the
    grid), then ``("repeat", k, decision concurrencies)`` for k in 1..repeats-1, then
    ``("search", 0, [concurrency])`` (the next bisection probe, while fewer than
    ``slo_search`` ran); None when nothing is left. A failed point is not proposed again."""
    failed = _failed(failures, w)
    first = [c for c in w.concurrencies
             if not point_done(point_path(folder, name, w, c)) and (c, 0, False) not in failed]  # fmt: skip
    if first:
        return "first", 0, first
    decision = decision_concurrencies(folder, name, w, bounds)
    for r in range(1, repeats):
        todo = [c for c in decision
                if not point_done(point_path(folder, name, w, c, r)) and (c, r, False) not in failed]  # fmt: skip
        if todo:
            return "repeat", r, todo
    if slo_search:
        meets, probes = search_meets(folder, name, w, bounds, [c for c, _, s in failed if s])
        nxt = slos.next_probe(meets)
        if nxt is not None and probes < slo_search:
            return "search", 0, [nxt]
    return None


def _run_steps(
    srv: Any,
    name: str,
    head: str,
    w: Scenario,
    folder: Path,
    bounds: slos.SLO,
    gpus: int,
    bench_args: Sequence[str],
    progress: bool,
    failures: list[dict[str, Any]],
    repeats: int,
    slo_search: int,
) -> None:
    """Run :func:`_next_step` after step on ``srv`` until nothing is left, the server died (a
    ``crash`` record) or a step would repeat itself. Each step is one sweep (repeat ``k``: label
    ``<name>-r<k>``, seed ``k``); a failed point is recorded and the others go on."""
    from helpers.bench.sweep import sweep

    tried: set[tuple[str, int, tuple[int, ...]]] = set()
    while (step := _next_step(folder, name, w, bounds, repeats, slo_search, failures)) is not None:
        kind, r, remaining = step
        if (kind, r, tuple(remaining)) in tried:
            _say(
                progress, f"{head} {w.name}: {kind} c={remaining} was not saved as asked; going on"
            )
            return
        tried.add((kind, r, tuple(remaining)))
        if kind == "repeat":
            _say(progress, f"{head} {w.name}: run {r + 1} of {repeats} at concurrency "
                 f"{', '.join(map(str, remaining))} (seed {r}: other prompts)")  # fmt: skip
        elif kind == "search":
            meets, _ = search_meets(folder, name, w, bounds)
            low, high = slos.slo_limit(meets)
            _say(progress, f"{head} {w.name}: SLO limit search at concurrency {remaining[0]} "
                 f"(meets at {low}, misses at {high})")  # fmt: skip

        def path(c: int, kind=kind, r=r) -> Path:
            return search_path(folder, name, w, c) if kind == "search" else point_path(folder, name, w, c, r)  # fmt: skip

        while remaining:
            try:
                sweep(
                    srv, remaining, scenario=w, out_dir=path(remaining[0]).parent,
                    label=name if not r else f"{name}-r{r}", keep_other_points=True,
                    gpu_count=gpus, slo=bounds.goodput_args(), seed=r, seed_label=w.name,
                    extra_args=bench_args, progress=progress,
                )  # fmt: skip
                break
            except BenchError as exc:
                done = [c for c in remaining if point_done(path(c))]
                failed = next(c for c in remaining if c not in done)
                where = {"repeat": r} if r else ({"search": True} if kind == "search" else {})
                failures.append(
                    _failure("bench", exc, workload=w.name, concurrency=failed, **where)
                )
                _say(progress, f"{name!r} {w.name} c={failed}: {failures[-1]['message'][:300]}")
                remaining = [c for c in remaining if c not in done and c != failed]
                if not srv.is_running():
                    failures.append(
                        {"stage": "crash", "message": f"the server ended during {w.name} c={failed}",
                         "crash": getattr(srv, "crash", None), "workload": w.name}
                    )  # fmt: skip
                    return
