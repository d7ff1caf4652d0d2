"""The "measured best" table of a Hopper notebook, rendered from committed tuning results.

The tuning step (:mod:`lab.tune.tune`) saves ``tune.json`` files; the ones committed under
``docs/results/<gpu>/tune/`` (measured there, or converted from earlier sweeps by
:mod:`tools.seed_tune_results`) are read here and, per workload goal (:data:`GOALS`), the best
measured configuration is picked by the tuning step's own rule (:func:`lab.tune.slo.choose`)
and set next to the recipe's command, the reference row. Only releases the registry offers
(``model.offered_vllm_versions``: a user can install them) are ranked. A target shows the table
when a result was measured on it or lists it in ``applies_to``. Used when the notebooks are built
(:func:`tools.notebook_build.render`), so changing the data changes the notebooks.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.metrics import _num
from helpers.paths import REPO_ROOT
from lab.synthetic_acceptance import CAPTION_WORDS, SyntheticAcceptance
from lab.tune import noise
from lab.tune import slo as slos
from lab.tune.results import drafting_words
from lab.tune.saved import load_tune_rows
from tools.weightless_routing import DUMMY_ROUTING, MEASURED, uniform_routing

RESULTS_DIR = REPO_ROOT / "docs" / "results"
#: Said when a point ran on a release whose dummy norms are random (vLLM before 0.33.0: every
#: token of a step on the same experts, benchmarks/dummy_moe_routing.py).
DUMMY_ROUTING_NOTE = (
    f". Points on vLLM 0.32.0 and earlier ran on such dummy weights: {DUMMY_ROUTING}; so above "
    "one user such a step reads less expert weight than a trained model's, which flatters "
    f"throughput at high concurrency and the configurations whose experts weigh more (BF16); "
    f"{MEASURED}"
)


#: Said when a point's command exports vLLM's uniform routing simulation (tune_h200.py's
#: default since 2026-12-05).
UNIFORM_ROUTING_NOTE = (
    ". Points whose command exports `VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random` ran "
    "vLLM's uniform routing simulation: each token's experts drawn uniformly, so a step reads "
    "at least as many experts as a trained router's (a pessimistic lean above one user)"
)


def _dummy_routing(rows: pd.DataFrame) -> bool:
    """Whether any point ran on a release before 0.33.0 (dummy norms of +-1e-3) with its
    routing as loaded (a command that exports the uniform routing simulation did not)."""
    from helpers.config.versions import parse_version

    def as_loaded(version: Any, command: str | None) -> bool:
        v = parse_version(str(version))  # None for a missing one
        return v is not None and v < parse_version("0.33.0") and not uniform_routing(command)

    return any(map(as_loaded, rows["vllm_version"], rows["command"]))


#: One run per point: a gap under this between two configurations is noise
#: (docs/results/README.md: "treat differences under about 5 % as noise").
NOISE_PCT = 5.0


@dataclass(frozen=True)
class Goal:
    """One row pair of the table: a workload (a scenario of ``cookbook/scenarios.yaml``), the
    concurrency it is read at (None: any), the SLO the point must meet, what is maximised."""

    name: str
    workload: str
    what: str
    objective: str
    concurrency: int | None = None
    slo: slos.SLO | None = None
    #: the lowest concurrency a point may be read at ("many users": not a one-user point,
    #: whose lead over its recipe says nothing about throughput)
    min_concurrency: int = 1

    def reads(self, concurrency: int) -> bool:
        """Whether a point at ``concurrency`` (requests in flight) can decide this goal."""
        return concurrency >= self.min_concurrency and self.concurrency in (None, concurrency)


GOALS = (
    Goal("latency", "tune-1k", "1024 in / 256 out, one user: the fastest decode",
         "per_user", concurrency=1),
    Goal("throughput", "tune-1k", f"1024 in / 256 out, many users: the most output tokens/s per GPU "
         f"within {slos.DEFAULT_SLO.describe()}", "goodput", slo=slos.DEFAULT_SLO,
         min_concurrency=2),
    Goal("long prompt", "tune-8k", "8K in / 256 out: the most output tokens/s per GPU within "
         f"{slos.DEFAULT_SLO.describe()}", "goodput", slo=slos.DEFAULT_SLO, min_concurrency=2),
    Goal("agent", "agent", "agent sessions (a 5K shared system prompt and tools, 4 turns): the "
         f"most output tokens/s per GPU within {slos.DEFAULT_SLO.describe()}", "goodput",
         slo=slos.DEFAULT_SLO, min_concurrency=2),
)  # fmt: skip


def slo_limits(results_dir: Path | None, files: set[str], workload: str) -> list[dict[str, Any]]:
    """The SLO limits the tuning step bisected (``slo_limits`` of each candidate in a tuning
    folder's ``tune.json``) for ``workload``, from the committed ``files`` (names as in the
    ``file`` column: ``grid-0.32.0/tune.json``), with the candidate's row label fields. A
    candidate measured at one concurrency only (the concurrency-1 candidates) had no limit to
    search: left out. Each limit names its ``file``."""
    out = []
    for path in sorted(Path(results_dir or RESULTS_DIR).glob("*/tune/*/tune.json")):
        if f"{path.parent.name}/tune.json" not in files:
            continue
        for cand in json.loads(path.read_text()).get("candidates") or []:
            levels = {p.get("concurrency") for p in cand.get("points") or []
                      if p.get("workload") == workload}  # fmt: skip
            for lim in cand.get("slo_limits") or []:
                if len(levels) < 2 and not lim.get("probes"):
                    continue
                if lim.get("workload") == workload and lim.get("limit") is not None:
                    out.append({**lim, "variant": cand.get("variant"),
                                "moe_backend": cand.get("moe_backend"), "spec": cand.get("spec"),
                                "recipe": bool(cand.get("recipe")),
                                "file": f"{path.parent.name}/tune.json"})  # fmt: skip
    return out


def co_tenancy(folder: Path) -> str | None:
    """How a tuning folder's servers shared their GPU (``tools/device/tune_h200.py --co-tenant``
    writes ``co-tenant.json`` beside ``tune.json``): ``"2 servers at a time on the GPU, each
    with --gpu-memory-utilization 0.2 --kv-cache-memory-bytes 4294967296"``; None for a server
    that had its GPU alone."""
    path = folder / "co-tenant.json"
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    flags = " ".join(f"{k} {v}" for k, v in (record.get("co_tenant_flags") or {}).items())
    return f"{record.get('slots', '?')} servers at a time on the GPU" + (
        f", each with {flags}" if flags else ""
    )


def tune_runs(target: str, results_dir: Path | None = None) -> pd.DataFrame | None:
    """Every committed tuning run that applies to ``target`` (measured on it, or listed in its
    file's ``applies_to``; never a CPU stand-in rehearsal), one row per run with its own goodput
    (:func:`lab.tune.slo.with_goodput`: a point's goodput is then the median of its runs',
    never a share of medians taken from different runs), or None when there is none."""
    root = Path(results_dir or RESULTS_DIR)
    # a converted or single file (tune/<name>.json) or a tuning folder (tune/<run>/tune.json,
    # with its points and logs beside it, e.g. the H200 grid resumed across device sessions)
    files = sorted(root.glob("*/tune/*.json")) + sorted(root.glob("*/tune/*/tune.json"))
    if not files:
        return None
    rows = pd.concat(
        [load_tune_rows(f).assign(file=str(f.relative_to(f.parents[1]).as_posix()),
                                  co_tenant=co_tenancy(f.parent))
         if f.name == "tune.json" else load_tune_rows(f) for f in files],
        ignore_index=True,
    )  # fmt: skip
    if rows.empty:
        return None
    applies = [
        t == target or target in (a or [])
        for t, a in zip(rows["target"], rows["applies_to"], strict=True)
    ]
    rows = rows[
        pd.Series(applies, index=rows.index) & ~rows["stand_in"].astype(bool)
    ]  # no CPU rehearsal
    return None if rows.empty else slos.with_goodput(rows).reset_index(drop=True)


def tune_rows(target: str, results_dir: Path | None = None) -> pd.DataFrame | None:
    """:func:`tune_runs` with one row per point: a repeated point is the median of its runs
    (never its luckiest run), with ``repeats`` and the spread (``<metric>_min`` / ``_max``)."""
    runs = tune_runs(target, results_dir)
    return None if runs is None else noise.aggregate(runs, POINT).reset_index(drop=True)


#: What names one point across the committed files.
POINT = ("file", "candidate", "vllm_version", "workload", "concurrency")
#: What names one configuration across the committed files (measured in one or more sessions).
CONFIGURATION = ("candidate", "vllm_version")


def _label(row: dict[str, Any]) -> str:
    """``NVFP4, humming MoE``, with ``, 64 sequences`` when the candidate sets
    ``--max-num-seqs`` (the grid measures each kernel at 256 and 64) and each other flag it
    sets (the concurrency-1 candidates): ``, --stream-interval 4``,
    ``, --compilation-config {"cudagraph_mode": "FULL"}``."""
    kernel = row.get("moe_backend") or "default"
    spec = row.get("spec") if isinstance(row.get("spec"), dict) else {}
    extra = dict(spec.get("extra_args") or {})
    seqs = extra.pop("--max-num-seqs", None)
    flags = [
        flag
        if value is True
        else f"{flag} {json.dumps(value) if isinstance(value, dict) else value}"
        for flag, value in extra.items()
        if value is not None and value is not False
    ]
    return f"{str(row.get('variant') or '?').upper()}, {kernel} MoE" + "".join(
        [f", {seqs} sequences"] * bool(seqs) + [f", {f}" for f in flags] + [_drafting(row)]
    )


@functools.cache
def _drafter_labels() -> dict[str, str]:
    """The registry's name of each drafting mode (``mtp``: ``MTP``, ``dspark``: ``DSpark``)."""
    from helpers.config.load import as_registry

    return {name: mode.label for name, mode in as_registry(None).speculative.items()}


def _drafting(row: dict[str, Any]) -> str:
    """``, MTP K=7 drafting at synthetic acceptance 3.687 (ai-dynamo/dynamo; below)`` for a
    candidate that drafted (its acceptance caption, :mod:`lab.synthetic_acceptance`, is the
    note under the table), ``, MTP K=7 drafting`` without a caption (real weights), else ""."""
    spec = row.get("spec") if isinstance(row.get("spec"), dict) else {}
    mode = spec.get("speculative")
    if not mode or mode == "none":
        return ""
    said = f", {_drafter_labels().get(mode, mode)} K={spec.get('speculative_tokens', '?')} drafting"
    point = SyntheticAcceptance.from_caption(row.get("acceptance"))
    if point is None:
        return said
    derived = point.source.startswith("derived from")
    base = point.source.split(", ", 1)[1] if derived and ", " in point.source else point.source
    name = "ai-dynamo/dynamo" if "ai-dynamo/dynamo" in base else base
    return f"{said} at {CAPTION_WORDS} {point.length:g} ({'derived from ' * derived}{name}; below)"


def _runs_at(runs: pd.DataFrame | None, row: dict[str, Any]) -> pd.DataFrame | None:
    """The runs (one row each) of the point ``row`` names; None when the runs are not given
    or hold none of it."""
    if runs is None:
        return None
    mine = runs[[all(r[k] == row[k] for k in POINT) for r in runs.to_dict("records")]]
    return None if mine.empty else mine


def _run_scores(runs: pd.DataFrame | None, row: dict[str, Any], goal: Goal) -> list[float]:
    """Each run's score (by ``goal``'s objective) at the point ``row`` names; the point's
    median alone when the runs are not given."""
    mine = _runs_at(runs, row)
    if mine is None:
        return [float(row["score"])]
    # by the objective the point was chosen by (reference_beside's: throughput)
    return [float(v) for v in slos.scores(mine, row.get("objective") or goal.objective)]


def _apart(runs: pd.DataFrame | None, best: dict[str, Any], recipe: dict[str, Any]) -> list[str]:
    """Why ``best``'s runs may not compare with the recipe's (:func:`lab.tune.noise.apart`),
    read from their runs, or from the two points when the runs are not given."""
    mine, ref = _runs_at(runs, best), _runs_at(runs, recipe)
    mine = pd.DataFrame([dict(best)]) if mine is None else mine
    ref = pd.DataFrame([dict(recipe)]) if ref is None else ref
    return noise.apart(mine, ref, best["candidate"])


def _decision_points(pts: pd.DataFrame) -> pd.DataFrame:
    """The points a goal is decided on: when any file measured this workload with repeats (a
    tuning run, every candidate on one machine on one day), those files alone; points of
    single-run files (converted from earlier sweeps, other days) then stay out of the ranking,
    since one H200 measured the same command 25 % apart on two days (docs/DESIGN.md)."""
    if pts.empty or "repeats" not in pts:
        return pts
    repeated = set(pts.loc[pts["repeats"] > 1, "file"])
    return pts[pts["file"].isin(repeated)] if repeated else pts


def _evidence(rows: pd.DataFrame) -> dict[str, Any]:
    """Columns that order measurements by their weight, ascending: ``_runs`` (repeats; 1
    without the column), then ``_date`` (its text; an undated row counts as the oldest)."""
    return {
        "_runs": rows["repeats"] if "repeats" in rows else 1,
        "_date": rows["date"].fillna("").astype(str) if "date" in rows else "",
    }


def _one_measurement_each(pts: pd.DataFrame) -> pd.DataFrame:
    """One measurement per configuration other than the recipe: where a candidate ran in
    several sessions, the one with the most runs, the latest of those. A confirmation measured
    again beside the recipe with more runs then replaces the screen that picked it, whatever
    either showed, so a lucky screen is not the one a choice rests on and each configuration
    has one chance to lead (:func:`lab.tune.noise.screened_count` counts it once). The
    recipe keeps its point in every file: each session's anchor (:func:`_recipe_for`)."""
    if pts.empty or "repeats" not in pts:
        return pts
    others = pts[~pts["recipe"].astype(bool)]
    last = (
        others.assign(**_evidence(others))
        .sort_values(["_runs", "_date"], kind="stable")
        .drop_duplicates(list(CONFIGURATION), keep="last")
    )
    return pts[pts["recipe"].astype(bool) | pts.index.isin(last.index)]


def _recipe_for(pts: pd.DataFrame, best: Any, goal: Goal, *, beside: bool = True) -> Any:
    """The recipe's point ``best`` is compared with: the recipe's best point in ``best``'s own
    file when it has one (the same tuning run: the c1 candidates' session measures the recipe
    again as their anchor); when none there meets the SLO, its point in that file at ``best``'s
    concurrency (:func:`lab.tune.slo.reference_beside`: runs side by side, its ``over_slo``
    saying what it missed; ``beside=False`` skips it); else its best point in any file; None
    without a recipe point."""
    if pts.empty or not pts["recipe"].any():
        return None
    mine = pts[pts["recipe"]]
    if best is not None and (mine["file"] == best["file"]).any():
        here = mine[mine["file"] == best["file"]]
        same = slos.choose(here, goal.slo, goal.objective)
        if same is not None:
            return same
        at = best.get("concurrency") if beside else None
        same = slos.reference_beside(here, at, goal.slo, goal.objective) if at else None
        if same is not None:
            return same
    return slos.choose(mine, goal.slo, goal.objective)


def _choose_anchored(pts: pd.DataFrame, goal: Goal, among: pd.DataFrame) -> Any:
    """The point of ``among`` (rows of ``pts``) that leads its own anchor most: among those that
    meet ``goal``'s SLO, the highest score (``goal``'s objective) over the score of the recipe's
    point it is compared with (:func:`_recipe_for`: its own session's). The same command moved
    12 % between two H200 sessions of one afternoon (``docs/results/h200/tune/README.md``), so
    a raw score ranks sessions, not configurations: a candidate from a slow session would hide
    behind a recipe measured on a fast one. Ties (each session's recipe leads itself 1.00x) go
    to the measurement with the most runs, then the latest; then as :func:`lab.tune.slo.choose`.

    Returns:
        The row as :func:`lab.tune.slo.choose` gives it (``score`` its own, not relative),
        with ``lead`` (that score over its anchor's; its own score without a recipe point), or
        None when no row of ``among`` meets the SLO.
    """
    rows = among if goal.slo is None else goal.slo.meeting(among)
    if rows.empty:
        return None
    at = list(zip(rows["file"], rows["concurrency"], strict=True))
    refs = {(f, c): _recipe_for(pts, {"file": f, "concurrency": c}, goal) for f, c in set(at)}
    # NaN: no recipe point at all; an inf lead over a recipe point that scored 0
    anchor = [float("nan") if refs[k] is None else float(refs[k]["score"]) for k in at]
    score = slos.scores(rows, goal.objective).astype(float)
    base = pd.Series(anchor, index=rows.index)
    lead = (score / base.where(base != 0)).mask((base == 0) & (score > 0), float("inf"))
    ranked = rows.assign(
        _lead=lead.fillna(score),  # no recipe point at all: every row by its own score
        **_evidence(rows),
        _tput=slos.scores(rows, "throughput"),
    ).sort_values(["_lead", "_runs", "_date", "_tput", "concurrency"],
                  ascending=[False, False, False, False, True], kind="stable")  # fmt: skip
    chosen = slos.choose(pts.loc[[ranked.index[0]]], goal.slo, goal.objective)
    return {**chosen, "lead": float(ranked.iloc[0]["_lead"])}


def _goal_points(rows: pd.DataFrame, goal: Goal, offered: list[str]) -> pd.DataFrame:
    """The points ``goal`` is decided on (:func:`recommendations`): its workload, at its
    concurrency or from its lowest, of an offered release, the repeated files only, one
    measurement per configuration."""
    pts = rows[(rows["workload"] == goal.workload) & rows["vllm_version"].astype(str).isin(offered)]
    reads = (
        pts["concurrency"].map(goal.reads).astype(bool)
    )  # bool even when empty: rows, not columns
    return _one_measurement_each(_decision_points(pts.loc[reads]))


def runs_needed(
    planned: dict[str, tuple[list[int], list[str]]],
    target: str = "h200",
    results_dir: Path | None = None,
    registry: Any = None,
) -> list[tuple[str, int, int]]:
    """Before a tuning session: per goal a planned candidate would join, how many
    configurations its choice would then be made from (the committed ones at the goal's
    decision points, counted as :func:`recommendations` counts them, plus the planned ones not
    among them) and the runs of each side a win needs over that many
    (:func:`lab.tune.noise.runs_to_show`).

    Args:
        planned: workload name -> (the concurrencies the session measures it at, the
            candidates measured on it, the recipe not counted); the planned candidates run on
            the registry's default release.
        target: whose committed results count (``applies_to`` included).
        results_dir: the results root (default ``docs/results``).
        registry: a loaded registry (default ``cookbook/recipe.yaml``): the offered releases.

    Returns:
        ``(goal name, configurations screened, runs needed)`` per goal the plan reaches (a
        goal none of whose workload's concurrencies qualifies, or with no candidate, is left
        out).

    Raises:
        BenchError: a committed tuning file that is not one (:func:`lab.tune.saved.load_tune_rows`).
    """
    from helpers.config.load import as_registry

    reg = as_registry(registry)
    offered = [str(v) for v in reg.model.offered_vllm_versions]
    rows = tune_rows(target, results_dir)
    out = []
    for goal in GOALS:
        concurrencies, names = planned.get(goal.workload, ([], []))
        if not names or not any(map(goal.reads, concurrencies)):
            continue
        seen = {(n, str(reg.model.default_vllm_version)) for n in names}
        if rows is not None:
            others = _goal_points(rows, goal, offered)
            others = others[~others["recipe"].astype(bool)]
            seen |= set(
                zip(
                    others["candidate"].astype(str), others["vllm_version"].astype(str), strict=True
                )
            )
        out.append((goal.name, len(seen), noise.runs_to_show(len(seen))))
    return out


def recommendations(
    rows: pd.DataFrame, offered: list[str], runs: pd.DataFrame | None = None
) -> list[dict[str, Any]]:
    """Per goal of :data:`GOALS`, the tuning step's choice on the committed points: the
    configuration that leads its own session's recipe most (:func:`_choose_anchored`).

    A configuration replaces the recipe only beyond the noise (:func:`lab.tune.noise.verdict`:
    with repeats, a lead that a configuration no faster has at most a 5 % chance of, over the
    configurations screened (:func:`lab.tune.noise.screened_count`: each candidate and
    release, measured once: :func:`_one_measurement_each`); with one run, more than 5 %), and
    only against the recipe measured in its session (:func:`_recipe_for`,
    :func:`lab.tune.noise.apart`);
    else the recipe stays recommended and the faster-by-median one is ``tied``.

    Args:
        rows: the points (:func:`tune_rows`, medians).
        offered: the releases the registry offers (others are not ranked).
        runs: the runs behind them (:func:`tune_runs`), for the verdict; None: one run each.

    Returns:
        One dict per goal: ``best`` (the recommended row, or None when the workload has no
        point), ``recipe``, ``tied`` (the faster-by-median row when it did not beat the recipe
        beyond the noise, else None), ``verdict`` (a :class:`lab.tune.noise.Verdict`, or
        None when the best is the recipe), ``ratio`` (recommended over recipe, by the goal's
        objective), ``runner_vs_recipe`` (the runner-up over the recipe when nothing tied:
        median ratio, lowest, highest, runs of each; the runner-up compared with its own
        session's recipe), ``ratio_range`` (its lowest and highest over the runs: the worst
        candidate run over the best recipe run, and the other way), ``runner_up`` (the best
        other configuration), ``runner_anchor`` (the recipe's point it is compared with) and
        ``gap_pct`` (how far its lead is below the best's, %). Where the recipe's only
        reference was over the SLO (:func:`lab.tune.slo.reference_beside`), the best tied with
        it and no session's recipe met the SLO: ``best`` None, ``recipe`` that point, ``tied``
        the candidate, and ``none_reason`` what the recipe missed (else None).
    """
    out = []
    for goal in GOALS:
        pts = _goal_points(rows, goal, offered)
        best = _choose_anchored(pts, goal, pts) if not pts.empty else None
        recipe = _recipe_for(pts, best, goal)
        tied, verdict, ratio_range = None, None, None
        if best is not None and recipe is not None and any(best[k] != recipe[k] for k in POINT):
            verdict, ratio_range = _verdict(pts, runs, best, recipe, goal)
            if not verdict.beats and recipe.get("over_slo"):  # a recipe over the SLO can't stay
                within = _recipe_for(pts, best, goal, beside=False)  # another session's
                if within is not None:
                    recipe = within
                    verdict, ratio_range = _verdict(pts, runs, best, recipe, goal)
            if not verdict.beats:  # over the SLO still: no session's recipe within it, no verdict
                tied, best = best, (None if recipe.get("over_slo") else recipe)
        runner, gap = None, None
        if best is not None:
            others = pts[
                (pts["candidate"] != best["candidate"])
                | (pts["vllm_version"] != best["vllm_version"])
            ]
            runner = _choose_anchored(pts, goal, others) if not others.empty else None
            if runner is not None and best.get("lead"):  # by what ranked them
                gap = 100.0 * (best["lead"] - runner["lead"]) / best["lead"]
        ratio = best["score"] / recipe["score"] if best and recipe and recipe["score"] else None
        runner_vs_recipe = None
        anchor = _recipe_for(pts, runner, goal) if runner is not None else None
        if runner is not None and anchor is not None and tied is None:
            a, b = _run_scores(runs, runner, goal), _run_scores(runs, anchor, goal)
            if min(b) > 0:
                runner_vs_recipe = (statistics.median(a) / statistics.median(b),
                                    min(a) / max(b), max(a) / min(b), len(a), len(b))  # fmt: skip
        none_reason = recipe["over_slo"] if best is None and tied is not None else None
        out.append({"goal": goal, "best": best, "recipe": recipe, "tied": tied, "none_reason": none_reason,
                    "verdict": verdict, "ratio_range": ratio_range, "runner_up": runner, "gap_pct": gap,
                    "runner_vs_recipe": runner_vs_recipe, "runner_anchor": anchor,
                    "ratio": ratio})  # fmt: skip
    return out


def _verdict(
    pts: pd.DataFrame, runs: pd.DataFrame | None, best: Any, recipe: Any, goal: Goal
) -> tuple[noise.Verdict, tuple[float, float] | None]:
    """:func:`lab.tune.noise.verdict` of ``best``'s runs against ``recipe``'s, and the range
    of their ratio (the worst run of ``best`` over the best of ``recipe``, and the other way;
    None when a recipe run scored 0). A recipe point over the SLO
    (:func:`lab.tune.slo.reference_beside`) says so in the verdict's text
    (:func:`lab.tune.slo.with_over_slo`)."""
    a, b = _run_scores(runs, best, goal), _run_scores(runs, recipe, goal)
    v = noise.verdict(a, b, _apart(runs, best, recipe), noise.screened_count(pts, CONFIGURATION))
    v = dataclasses.replace(v, text=slos.with_over_slo(v.text, recipe))
    return v, ((min(a) / max(b), max(a) / min(b)) if min(b) > 0 else None)


def _parameters(spec: dict[str, Any]) -> str:
    """A candidate's spec as this notebook's parameters: ``variant = "bf16"``,
    ``vllm_version = "0.28.0"``, ``moe_backend = ...``, ``extra_args = {...}``."""
    names = {"variant": "variant", "speculative": "speculative", "moe_backend": "moe_backend",
             "vllm_version": "vllm_version", "extra_args": "extra_args"}  # fmt: skip
    parts = [f"`{names[k]} = {v!r}`".replace("'", '"') for k, v in spec.items() if k in names]
    return ", ".join(parts)


def _fmt(value: Any, digits: int = 0) -> str:
    v = _num(value)
    return "" if v is None else f"{v:,.{digits}f}"


def _spread(row: dict[str, Any], metric: str, digits: int = 0) -> str:
    """The median, and its runs' min-max when the point was repeated: ``1,917 (1,880-1,950)``."""
    text = _fmt(row.get(metric), digits)
    lo, hi = _num(row.get(f"{metric}_min")), _num(row.get(f"{metric}_max"))
    if (_num(row.get("repeats")) or 1) > 1 and lo is not None and hi is not None:
        text += f" ({lo:,.{digits}f}-{hi:,.{digits}f})"
    return text


def _ratio(rec: dict[str, Any]) -> str:
    """The recommended over the recipe, with the range its runs allow when both were repeated."""
    v = rec["verdict"]
    if v is None or rec["tied"] is not None:
        return "1.00x" if rec["ratio"] is not None else ""
    return _verdict_ratio(rec)


def _verdict_ratio(rec: dict[str, Any]) -> str:
    """The measured configuration over the recipe (median ratio), with the lowest and highest
    its runs allow when both were repeated."""
    v = rec["verdict"]
    if v.ratio is None:
        return ""
    return _ratio_text(v.ratio, rec.get("ratio_range") if min(v.runs) > 1 else None)


def _ratio_text(ratio: float, ratio_range: tuple[float, float] | None) -> str:
    """``1.05x (0.95-1.18)``: a ratio over the recipe and, when both sides were repeated, the
    lowest and highest its runs allow (None: one run, no range)."""
    return f"{ratio:.2f}x" + (
        f" ({ratio_range[0]:.2f}-{ratio_range[1]:.2f})" if ratio_range else ""
    )


def _gpu(row: dict[str, Any]) -> str:
    """The GPU a row was measured on, as its file names it: ``H100 80GB HBM3``, ``H200``;
    ``?`` when the file names none."""
    gpu = row.get("measured_on")
    return gpu.split(" (")[0].removeprefix("NVIDIA ") if isinstance(gpu, str) and gpu else "?"


def _measured_on(row: dict[str, Any], here: str) -> bool:
    """Whether ``row`` ran on the GPU a notebook's target names (``H100``: its first word)."""
    return _gpu(row).split()[0] == here


def _cells(row: dict[str, Any], role: str, ratio: str, here: str = "") -> str:
    """One table row's cells after the workload's; the data cell names the GPU when it is not
    ``here`` (the notebook's GPU, ``H100``)."""
    runs = int(_num(row.get("repeats")) or 1)
    where = "" if here and _measured_on(row, here) else f", on {_gpu(row)}"
    return (
        f" {role} | {_label(row)} | {row['vllm_version']} | {int(row['concurrency'])} | {runs} | "
        f"{_spread(row, 'output_throughput_per_gpu')} | {_spread(row, 'tokens_per_s_per_user')} | "
        f"{_fmt(row.get('p99_ttft_ms'))} | {_spread(row, 'p50_tpot_ms', 1)} | {ratio} | "
        f"`{row['file']}`{where} |"
    )


def _drafting_note(goal: Goal, row: dict[str, Any], recipe: dict[str, Any] | None) -> str | None:
    """What a drafting row's speed rests on (:func:`lab.tune.results.drafting_words`): the
    acceptance it drafted at with its source, the break-even acceptance length against the
    recipe's row, how to measure one's own; None for a row that did not draft at a caption."""
    caption = row.get("acceptance")
    if not isinstance(caption, str) or not caption or recipe is None:
        return None
    # the goal's own measure (the score: per-user speed at one user, output tokens/s above)
    words = drafting_words(caption, _num(row.get("spec_decode_acceptance_length")),
                           float(row["score"]), _num(recipe.get("score")))  # fmt: skip
    return f"{goal.name}: {_label({**row, 'acceptance': None})}: {words}"


def command_for(target: str, row: dict[str, Any]) -> tuple[str, str]:
    """The exact ``vllm serve`` command of a committed row on ``target`` (the registry's command
    with the row's spec applied, as the tuning step built it) and what it changes, in command
    words: ``"the recipe's with --moe-backend marlin"``, ``"the BF16 variant's command;
    vllm version 0.28.0"`` (``""`` for the recipe itself)."""
    from helpers.config.resolve import resolve
    from lab.tune.inputs import SPEC_KEYS, candidate
    from lab.tune.results import changes

    base = resolve(target)
    # the registry choices and flags; not the stand-in's flags, nor a measurement's env (the
    # uniform routing simulation of a weightless run is no part of a user's command)
    drop = ("name", "standin_args", "env", "note")
    keep = {k: v for k, v in (row.get("spec") or {}).items() if k in SPEC_KEYS and k not in drop}
    if not keep:
        return base.shell_command(), ""
    cfg = candidate(base, str(row["candidate"]), **keep).config
    if not keep.get("variant"):
        return cfg.shell_command(), f"the recipe's with {changes(cfg, base)}"
    # another variant: its own recipe command is the reference, not the NVFP4 one's flags
    own = candidate(base, "variant", variant=keep["variant"]).config
    said = [f"the {keep['variant'].upper()} variant's command", changes(cfg, own)]
    return cfg.shell_command(), "; ".join(w for w in said if w)


def recommendation_markdown(
    target: str, results_dir: Path | None = None, registry: Any = None
) -> str | None:
    """The "measured best" paragraph and table for ``target``'s notebook (markdown, no leading
    ``# ``), or None when no committed tuning result applies to it.

    Per workload: the recommended row (a configuration replaces the recipe only beyond the
    noise, :func:`recommendations`), the recipe's row, the ratio with the range its runs allow,
    each figure the median of its runs with their min-max, and the exact command.

    Args:
        target: a registry target (``"h200"``).
        results_dir: the results root (default ``docs/results``; its ``*/tune/*.json`` are read).
        registry: a loaded registry (default ``cookbook/recipe.yaml``): the offered releases.
    """
    from helpers.config.load import as_registry

    runs = tune_runs(target, results_dir)
    if runs is None:
        return None
    rows = noise.aggregate(runs, POINT).reset_index(drop=True)
    reg = as_registry(registry)
    offered = [str(v) for v in reg.model.offered_vllm_versions]
    gpus = sorted({str(g).split(" (")[0] for g in rows["measured_on"] if g})
    here = reg.targets[target].gpu.name
    measured_here = any(_measured_on({"measured_on": g}, here) for g in rows["measured_on"])
    elsewhere = sorted({_gpu({"measured_on": g}) for g in rows["measured_on"]})
    most = int(rows["repeats"].max())
    how = (
        f"one run per point: a gap under {NOISE_PCT:.0f} % is a tie"
        if most == 1
        else f"the points a choice rests on run up to {most} times, each with its own seed: "
        "figures are the median with the runs' min-max in brackets, and a configuration "
        "replaces the recipe only when its runs lead the recipe's beyond chance (a one-sided "
        "Mann-Whitney p of at most 5 % over the configurations screened: one candidate at 3 runs "
        "each needs its worst run above the recipe's best, the best of 12 needs 5 runs each), "
        "else the row says tie (within noise), or tie (measured apart) when the two ran in "
        "different sessions; a configuration measured in several sessions counts once, by its "
        "measurement with the most runs (a confirmation replaces the screen that picked it); "
        "configurations are ranked by their lead over the recipe measured in their own "
        "session, since the same command moved 12 % between two sessions"
    )
    # vllm bench serve's backend per workload: openai-chat (the chat endpoint) or openai (the
    # completions endpoint: the agent workload's turns are sent as text, and vLLM 0.26.0's seeds)
    ranked = rows[rows["vllm_version"].astype(str).isin(offered)]
    text_only = sorted(set(ranked.loc[ranked["endpoint_type"] == "openai", "workload"]))
    endpoint = "chat endpoint" + (
        f" (completions endpoint for {', '.join(text_only)})" if text_only else ""
    )
    lines = [
        f"**Measured best per workload** (rendered from the committed tuning results, "
        f"`docs/results/*/tune/`, by `tools/tune_pages.py`; {', '.join(gpus)}, weightless "
        f"architecture, {endpoint}; {how}; "
        f"vLLM {' and '.join(offered)}, the releases this notebook installs with `vllm_version`)"
        + (f". A data cell that names another GPU ({', '.join(g for g in elsewhere if g.split()[0] != here)}) "
           f"was measured there, not on this {here}" if measured_here and len(elsewhere) > 1 else
           "" if measured_here else f". Measured on {' and '.join(elsewhere)}, not on this {here}")
        + ("" if measured_here and len(elsewhere) == 1 else
           ": the same Hopper kernels, so expect the ranking to hold, not the figures"
           + (" (BF16's 59 GiB of weights leave an 80 GB card little KV cache: see the memory plan)"
              if reg.targets[target].gpu.memory_gb < 100 else ""))
        + ". The configuration is the registry's command with the changes the data file records"
          " (`moe_backend`, `variant`, `vllm_version` are this notebook's parameters)"
        + (DUMMY_ROUTING_NOTE if _dummy_routing(rows) else "")
        + (UNIFORM_ROUTING_NOTE if any(map(uniform_routing, rows["command"])) else "") + ":",
        "",
        "| workload | row | configuration | vLLM | c | runs | output tok/s/GPU | tok/s per user | "
        "p99 TTFT ms | p50 TPOT ms | vs recipe | data |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]  # fmt: skip
    notes, commands = [], {}
    for rec in recommendations(rows, offered, runs):
        goal, best, recipe, tied = rec["goal"], rec["best"], rec["recipe"], rec["tied"]
        head = f"| {goal.name}: {goal.what} |"
        if best is None and rec.get("none_reason"):  # every recipe point over the SLO, a tie
            lines.append(head + " no recommendation | | | | | | | | | | |")
            over = "recipe's command (over the SLO)"
            over = over if measured_here else f"{recipe['target']} {over}"
            lines.append("| |" + _cells(recipe, over, "1.00x", here))
            lines.append("| |" + _cells(tied, rec["verdict"].tie, _verdict_ratio(rec), here))
            notes.append(f"{goal.name}: no recommendation: the recipe missed the SLO at every "
                         f"point of its session this goal reads (at concurrency "
                         f"{recipe['concurrency']}: {rec['none_reason']}) and {_label(tied)} "
                         f"measured {rec['verdict'].text}: measure both again with more runs, "
                         "or the recipe at a lower concurrency")  # fmt: skip
            continue
        if best is None:
            lines.append(
                head + " not measured yet | | | | | | | | | | `tools/device/tune_h200.py` |"
            )
            continue
        is_recipe = recipe is not None and all(best[k] == recipe[k] for k in POINT)
        role = "**recommended: the recipe's command**" if is_recipe else "**recommended**"
        lines.append(head + _cells(best, role, _ratio(rec), here))
        if recipe is not None and not is_recipe:
            ref = (
                "recipe's command (reference)"
                if measured_here
                else f"{recipe['target']} recipe's command (reference)"
            )
            lines.append("| |" + _cells(recipe, ref, "1.00x", here))  # fmt: skip
        if tied is not None:
            lines.append("| |" + _cells(tied, rec["verdict"].tie, _verdict_ratio(rec), here))
            notes.append(f"{goal.name}: {_label(tied)} on vLLM {tied['vllm_version']} measured "
                         f"{rec['verdict'].text}: the recipe stays")  # fmt: skip
        elif rec["verdict"] is not None:
            notes.append(
                f"{goal.name}: {_label(best)} on vLLM {best['vllm_version']}: {rec['verdict'].text}"
            )
        runner, rr = rec["runner_up"], rec["runner_vs_recipe"]
        if is_recipe and runner is not None and rr is not None:
            ratio = _ratio_text(rr[0], rr[1:3] if min(rr[3:]) > 1 else None)
            lines.append("| |" + _cells(runner, "next best", ratio, here))
        shown = [(best, recipe)] * (not is_recipe) + [(tied, recipe)] * (tied is not None)
        shown += [(runner, rec["runner_anchor"])] * bool(is_recipe and runner is not None and rr)
        notes += [n for n in (_drafting_note(goal, r, ref) for r, ref in shown) if n]
        if (tied is None and runner is not None and rec["gap_pct"] is not None
                and rec["gap_pct"] < NOISE_PCT and most == 1):  # fmt: skip
            notes.append(
                f"{goal.name}: {_label(best)} on vLLM {best['vllm_version']} and {_label(runner)} on "
                f"vLLM {runner['vllm_version']} are {rec['gap_pct']:.1f} % apart, within one run's noise"
            )
        params = _parameters(best.get("spec") or {})
        if params:
            notes.append(f"{goal.name}: the recommended row is this notebook with {params}")
        if not is_recipe:
            command, change = command_for(target, best)
            commands.setdefault(command, [change, []])[1].append(goal.name)
    for goal in GOALS:
        if goal.slo is None:
            continue
        # the repeated files the goal is decided on (its concurrencies: not a one-user screen)
        decided = set(_goal_points(rows, goal, offered).query("repeats > 1")["file"])
        lims = slo_limits(results_dir, decided, goal.workload)
        if lims:
            said = "; ".join(
                f"{'the recipe' if lim['recipe'] else _label(lim)} meets it at concurrency "
                f"{lim['limit']}" + (f", misses at {lim['misses_at']}" if lim.get("misses_at") else
                                     " (the highest probed)")
                + f" ({_fmt(lim.get('goodput_tok_s_per_gpu'))} goodput tok/s/GPU there, "
                f"`{lim['file']}`)"
                for lim in sorted(lims, key=lambda x: -(x.get("goodput_tok_s_per_gpu") or 0))
            )  # fmt: skip
            notes.append(f"{goal.name}: the SLO limit, bisected (one run per probe): {said}")
    table = "\n".join(lines)
    if "co_tenant" in rows:  # a file whose servers shared the GPU: not a server with it alone
        for file, how in sorted({(f, h) for f, h in zip(rows["file"], rows["co_tenant"], strict=True)
                                 if isinstance(h, str) and f"`{f}`" in table}):  # fmt: skip
            notes.append(f"rows from `{file}` ran as {how}: each server a small KV cache, its "
                         "figures not those of a server with the GPU alone")  # fmt: skip
    not_ranked = sorted({str(v) for v in rows["vllm_version"]} - set(offered))
    if not_ranked:
        notes.append(
            f"points measured on vLLM {', '.join(not_ranked)} (not offered by the registry) are in the "
            "data but not ranked"
        )
    out = lines + [""] + [f"- {n}." for n in notes]
    for command, (change, goals) in commands.items():
        out += ["", f"The recommended command for {', '.join(goals)} ({change}):",
                "", "```sh", command, "```"]  # fmt: skip
    return "\n".join(out)
