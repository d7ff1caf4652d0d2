"""Where each run of a tuning point lives (:func:`point_path`, :func:`search_path`), the saved
points as rows, and what :func:`lab.tune.tune.tune` measures next from them (decision points,
the SLO limit's probes). Reads files only; no server is touched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.metrics import _num
from helpers.bench.point import _safe
from helpers.bench.results import load_results, read_point
from helpers.errors import BenchError
from lab.bench.scenarios import Scenario
from lab.tune import slo as slos

#: The folder of a workload that holds the SLO limit's bisection probes (one run each).
SEARCH = "search"
#: Latency columns kept per point: vLLM's ``{mean,median,p50,p90,p99}_{ttft,tpot,itl,e2el}_ms``.
PERCENTILE_COLUMNS = tuple(
    f"{stat}_{m}_ms"
    for m in ("ttft", "tpot", "itl", "e2el")
    for stat in ("mean", "median", "p50", "p90", "p99")
)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    tmp.replace(path)


def point_path(
    folder: Path, name: str, workload: Scenario, concurrency: int, repeat: int = 0
) -> Path:
    """Where :func:`tune` keeps one run of a point: ``<folder>/<name>/<workload>/<name>-c<N>.json``
    for repeat 0, ``<name>-r<k>-c<N>.json`` (the sweep's label ``<name>-r<k>``) for repeat ``k``."""
    label = _safe(name) if not repeat else f"{_safe(name)}-r{int(repeat)}"
    return folder / name / workload.name / f"{label}-c{int(concurrency)}.json"


def search_path(folder: Path, name: str, workload: Scenario, concurrency: int) -> Path:
    """Where :func:`tune` keeps one probe of the SLO limit's bisection:
    ``<folder>/<name>/<workload>/search/<name>-c<N>.json``."""
    return folder / name / workload.name / SEARCH / f"{_safe(name)}-c{int(concurrency)}.json"


def point_runs(folder: Path, name: str, workload: Scenario, concurrency: int) -> list[Path]:
    """The saved, completed runs of one point (:func:`point_path` of each repeat), repeat 0 first."""
    base = point_path(folder, name, workload, concurrency)
    pat = re.compile(rf"^{re.escape(_safe(name))}-r(\d+)-c{int(concurrency)}\.json$")
    more = sorted(
        (int(m.group(1)), f)
        for f in (base.parent.iterdir() if base.parent.is_dir() else ())
        if (m := pat.match(f.name))
    )
    return [f for f in [base, *(f for _, f in more)] if point_done(f)]


def _repeat_of(path: str | Path) -> int:
    m = re.search(r"-r(\d+)-c\d+\.json$", str(path))
    return int(m.group(1)) if m else 0


def point_done(path: Path) -> bool:
    """A saved point counts as done when vLLM's JSON reads and completed at least one request."""
    if not path.is_file():
        return False
    try:
        return bool(read_point(path).get("completed"))
    except BenchError:
        return False


# --------------------------------------------------------------------------- what to run next


def _first_runs(folder: Path, name: str, w: Scenario) -> pd.DataFrame:
    paths = [p for c in w.concurrencies if point_done(p := point_path(folder, name, w, c))]
    return slos.with_goodput(points_frame(paths)) if paths else pd.DataFrame()


def decision_concurrencies(folder: Path, name: str, w: Scenario, bounds: slos.SLO) -> list[int]:
    """The points of candidate ``name`` at workload ``w`` that :func:`tune` repeats: the lowest
    concurrency and the best under the SLO (:func:`lab.tune.slo.choose`), both read from
    the first runs (repeat 0, so the same on resume). Empty before any first run is saved."""
    pts = _first_runs(folder, name, w)
    if pts.empty:
        return []
    out = {int(pts["concurrency"].min())}
    best = slos.choose(pts, bounds)
    if best is not None:
        out.add(int(best["concurrency"]))
    return sorted(out)


def search_meets(
    folder: Path, name: str, w: Scenario, bounds: slos.SLO, failed: Iterable[int] = ()
) -> tuple[dict[int, bool], int]:
    """``({concurrency: meets the SLO}, probes run)`` of candidate ``name`` at ``w``: its first
    runs at the grid's concurrencies and its bisection probes (a probe in ``failed``, which
    completed nothing, counts as a miss). :func:`lab.tune.slo.next_probe` reads it."""
    pts = _first_runs(folder, name, w)
    meets = {int(r["concurrency"]): bounds.meets(r) for r in pts.to_dict("records")}
    probes = sorted((folder / name / w.name / SEARCH).glob(f"{_safe(name)}-c*.json"))
    probes = [p for p in probes if point_done(p)]
    for r in points_frame(probes).to_dict("records") if probes else []:
        meets[int(r["concurrency"])] = bounds.meets(r)
    for c in failed:
        meets.setdefault(int(c), False)
    return meets, len(probes) + len(set(failed))


def points_frame(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Saved ``vllm bench serve`` points as rows: :func:`load_results`'s columns plus vLLM's
    percentiles (:data:`PERCENTILE_COLUMNS`), ``date``, ``endpoint_type``,
    ``total_output_tokens`` and ``request_goodput``.

    Raises:
        BenchError: as :func:`load_results`.
    """
    extra = ("date", "endpoint_type", "total_output_tokens", "request_goodput")
    return load_results(list(paths), extra=(*PERCENTILE_COLUMNS, *extra))


def limit(
    folder: Path, name: str, w: Scenario, bounds: slos.SLO, gpu_hour_usd: float | None
) -> dict[str, Any]:
    """One row of :attr:`TuneResult.limits`: the highest concurrency known to meet the SLO
    (``limit``), the lowest known to miss it (``misses_at``), the probes the bisection ran,
    and the goodput, throughput and cost at the limit (its first run, or its probe)."""
    fails = _read_json(folder / name / "failures.json") or []
    failed = [c for c, _, search in _failed(fails, w) if search]
    meets, probes = search_meets(folder, name, w, bounds, failed)
    low, high = slos.slo_limit(meets)
    row: dict[str, Any] = {"candidate": name, "workload": w.name, "limit": low,
                           "misses_at": high, "probes": probes,
                           "found": low is not None and high is not None and high - low <= 1}  # fmt: skip
    if low is not None:
        at = search_path(folder, name, w, low)
        path = at if point_done(at) else point_path(folder, name, w, low)
        if point_done(path):
            pt = slos.with_goodput(points_frame([path])).iloc[0]
            row["runs"] = 1  # the figures below are of one run: the first, or the probe
            row["goodput_tok_s_per_gpu"] = _num(pt.get("goodput_tok_s_per_gpu"))
            row["output_throughput_per_gpu"] = _num(pt.get("output_throughput_per_gpu"))
            tput, gpus = _num(pt.get("output_throughput")), _num(pt.get("gpu_count")) or 1
            row["cost_per_m_output_tokens_usd"] = slos.cost_per_million(tput, gpu_hour_usd, gpus)
    return row


def _failed(failures: Iterable[Mapping[str, Any]], w: Scenario) -> set[tuple[int, int, bool]]:
    """``{(concurrency, repeat, is a search probe)}`` of the failed points of workload ``w``."""
    return {(int(f["concurrency"]), int(f.get("repeat") or 0), bool(f.get("search")))
            for f in failures if f.get("workload") == w.name and f.get("concurrency") is not None}  # fmt: skip
