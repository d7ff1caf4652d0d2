"""Repeats of a point and the noise they measure (pure functions over point rows).

**Why repeats.** One H200 measured the same command at 5,007 and 6,711 output tok/s at
concurrency 256 on two days, and Marlin vs Humming at concurrency 1 flipped between two single
runs (docs/DESIGN.md). vLLM's own sweep repeats every point 3 times (``vllm bench sweep serve
--num-runs``, vLLM 0.32.0 ``vllm/benchmarks/sweep/serve.py``; docs/DESIGN.md); the cookbook does
too on a GPU, each repeat with a seed of its own (:func:`helpers.bench.sizing.point_seed`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import statistics
from collections.abc import Sequence

import numpy as np
import pandas as pd

from helpers.errors import BenchError

#: The figures whose spread over repeats the tables show beside the median (``<name>_min``,
#: ``<name>_max``): output tok/s per GPU, goodput tok/s per GPU, p50 TPOT (ms).
SPREAD_METRICS = (
    "output_throughput_per_gpu", "goodput_tok_s_per_gpu", "p50_tpot_ms", "tokens_per_s_per_user",
)  # fmt: skip
#: What names one point: its repeats are the rows that share these.
POINT_KEYS = ("candidate", "workload", "concurrency")
#: With one run of either side no spread is measured: a margin under this share is a tie.
#: docs/results/README.md: "One run per point unless said otherwise: treat differences under
#: about 5 % as noise."
SINGLE_RUN_TIE = 0.05
#: The chance of a lead by luck a win may have (:func:`verdict`): 1 in 20, what 3 runs each give
#: when every run of the candidate beats every run of the recipe (:func:`sweep_chance`).
ALPHA = 0.05
#: Runs of two candidates measured further apart than this (seconds) do not decide between them:
#: load and machine change in between (a resumed run measured the recipe under load and a
#: candidate on idle cores: "17.74x the recipe's", the same speed measured side by side; the
#: recipe's tune-1k point on two H200 machines, 2026-12-02 and -03: 5,143 and 4,684 output
#: tok/s at concurrency 64, 244 and 212 at concurrency 1, each the median of 3 runs whose
#: ranges do not overlap, docs/results/h200/tune/README.md).
MEASURED_APART_S = 3600
#: The format of the ``date`` vLLM's ``bench serve`` writes into each point's JSON.
VLLM_DATE = "%Y%m%d-%H%M%S"


def aggregate(runs: pd.DataFrame, keys: Sequence[str] = POINT_KEYS) -> pd.DataFrame:
    """One row per point from one row per run: the median over its repeats of every numeric
    column (a column of numbers and None counts as numeric: the median of its numbers), the
    first repeat's value of the others (path, date, flags), ``repeats`` (how many
    runs) and ``<metric>_min`` / ``<metric>_max`` of :data:`SPREAD_METRICS` (and of
    ``score`` when the rows have it).

    Args:
        runs: point rows (:func:`lab.tune.points.points_frame`), several per point when
            repeated (a ``repeat`` column, 0-based, is optional and left out of the result).
        keys: the columns that name a point.

    Returns:
        A new frame, points in the order of their first run. Empty in, empty out.

    Raises:
        BenchError: a key column missing.
    """
    if runs.empty:
        return runs.copy()
    missing = [k for k in keys if k not in runs]
    if missing:
        raise BenchError(f"aggregate: the rows lack {missing}; pass point rows with {list(keys)}.")
    runs = runs.copy()  # numbers beside None (a drafter's acceptance length, the recipe's None)
    for c in runs.columns.difference(list(keys)):
        values = runs[c].dropna() if pd.api.types.is_object_dtype(runs[c]) else ()
        if len(values) and all(
            isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_) for v in values
        ):
            runs[c] = runs[c].astype(float)
    numeric = [c for c in runs.select_dtypes("number").columns if c not in keys and c != "repeat"]
    others = [c for c in runs.columns if c not in numeric and c not in keys and c != "repeat"]
    groups = runs.groupby(list(keys), sort=False, dropna=False)
    out = groups[numeric].median()
    if others:
        out = out.join(groups[others].first())
    out["repeats"] = groups.size()
    for m in (*SPREAD_METRICS, "score"):
        if m in runs:
            out[f"{m}_min"], out[f"{m}_max"] = groups[m].min(), groups[m].max()
    out = out.reset_index()
    return out[[*keys, *[c for c in runs.columns if c in out and c not in keys], *[
        c for c in out.columns if c not in runs.columns and c not in keys]]]  # fmt: skip


def run_dates(rows: pd.DataFrame) -> pd.Series:
    """When each row was measured: its ``date`` (vLLM's, :data:`VLLM_DATE`) as timestamps, rows
    without a readable one left out; empty when the rows have no ``date`` column."""
    if "date" not in rows:
        return pd.Series(dtype="datetime64[ns]")
    return pd.to_datetime(rows["date"], format=VLLM_DATE, errors="coerce").dropna()


def apart(mine: pd.DataFrame, ref: pd.DataFrame, name: str) -> list[str]:
    """Why the runs ``mine`` (of candidate ``name``) may not be compared with the recipe's runs
    ``ref``: a median ``date`` (vLLM's, :data:`VLLM_DATE`) more than :data:`MEASURED_APART_S`
    apart, or another ``host``; [] when measured together or when the rows do not say.

    Args:
        mine, ref: run rows (one per run) with ``date`` and, optionally, ``host`` columns.
        name: the candidate, for the words.

    Returns:
        One phrase per reason: ``"measured 7.4 h apart (bf16: 2026-12-03 03:44; the recipe:
        2026-12-03 11:10)"``, ``"on another host (bf16: box-b; the recipe: box-a)"``.
    """
    reasons = []
    a, b = run_dates(mine), run_dates(ref)
    if len(a) and len(b):
        gap = abs((a.median() - b.median()).total_seconds())
        if gap > MEASURED_APART_S:
            reasons.append(f"measured {gap / 3600:.1f} h apart ({name}: {a.min():%Y-%m-%d %H:%M}; "
                           f"the recipe: {b.min():%Y-%m-%d %H:%M})")  # fmt: skip
    if "host" in mine and "host" in ref:
        a, b = set(mine["host"].dropna()), set(ref["host"].dropna())
        if a and b and a != b:
            reasons.append(f"on another host ({name}: {', '.join(map(str, sorted(a)))}; "
                           f"the recipe: {', '.join(map(str, sorted(b)))})")  # fmt: skip
    return reasons


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether a candidate beats the recipe beyond the noise (:func:`verdict`).

    Attributes:
        beats: True only when the margin is beyond the noise (the rule of :func:`verdict`).
        ratio: the candidate's median over the recipe's median.
        runs: repeats of the candidate's point and of the recipe's.
        text: the words for the summary: ``"1.31x the recipe's median (3 runs each; ...)"``
            or ``"tie (within noise): ..."`` / ``"tie (measured apart): ..."``.
    """

    beats: bool
    ratio: float | None
    runs: tuple[int, int]
    text: str

    @property
    def tie(self) -> str | None:
        """The kind of tie, as a table row names it: ``"tie (within noise)"`` or ``"tie
        (measured apart)"``; None when the candidate beats the recipe."""
        return None if self.beats else self.text.split(":", 1)[0]


def sweep_chance(candidate: Sequence[float], recipe: Sequence[float]) -> float:
    """The chance that a configuration no faster than the recipe leads it as far as
    ``candidate``'s runs lead ``recipe``'s: the exact one-sided Mann-Whitney p-value
    (``scipy.stats.mannwhitneyu(..., alternative="greater", method="exact")``). All ``n`` runs
    of one side above all ``n`` of the other: ``1 / C(2n, n)``, 1 in 20 at 3 runs each, 1 in 6
    at 2, 1 in 252 at 5.

    Args:
        candidate, recipe: each run's score (higher is better), at least one each.

    Raises:
        BenchError: scipy is missing (names the install line).
    """
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:
        raise BenchError(
            "The tuning step's verdict needs scipy (the Mann-Whitney test): "
            "%pip install 'scipy>=1.11' (or the cookbook with its notebook extra: "
            "%pip install -e '..[notebook]'), then restart the kernel."
        ) from None
    return float(mannwhitneyu(candidate, recipe, alternative="greater", method="exact").pvalue)


def screened_count(points: pd.DataFrame, keys: Sequence[str] = ("candidate",)) -> int:
    """How many configurations a choice among ``points`` was made from, the recipe's not
    counted (:func:`verdict`'s ``screened``): the distinct ``keys`` of the rows whose ``recipe``
    is false; at least 1.

    Args:
        points: point rows with a ``recipe`` column and ``keys``.
        keys: what names a configuration (the notebooks' table: candidate and release,
            ``tools.tune_pages.CONFIGURATION``).
    """
    others = points[~points["recipe"].astype(bool)]
    return max(len(others.drop_duplicates(list(keys))), 1)


def runs_to_show(screened: int = 1, alpha: float = ALPHA) -> int:
    """The fewest runs of each side whose clean sweep (every candidate run above every recipe
    run) is a win when ``screened`` candidates were compared with the recipe: the smallest ``n``
    with ``1 / C(2n, n) <= alpha / screened``; 3 for one candidate, 5 for up to 12."""
    n = 1
    while 1 / math.comb(2 * n, n) > alpha / max(screened, 1):
        n += 1
    return n


def verdict(
    candidate: Sequence[float],
    recipe: Sequence[float],
    measured_apart: Sequence[str] = (),
    screened: int = 1,
) -> Verdict:
    """The rule that lets a candidate replace the recipe: a margin beyond the noise.

    - **Repeated** (2 or more runs of each point): the candidate wins only when a configuration
      no faster than the recipe would lead this far by chance (:func:`sweep_chance`, the exact
      one-sided Mann-Whitney test) at most :data:`ALPHA` (5 %) divided by ``screened``, the
      candidates compared with the recipe to find this one (Bonferroni: the best of 12
      configurations of equal speed sweeps the recipe's 3 runs with all 3 of its own by chance
      nearly half the time, 1 - (19/20)^12). One candidate at 3 runs each wins only when its
      worst run beats the recipe's best (1 in 20); at 2 runs each (the stand-in's CI
      rehearsal) no margin shows a win (1 in 6); the best of 12 needs 5 runs each
      (:func:`runs_to_show`); else a tie, and the text says how many runs would show it.
    - **One run** of each: no spread was measured; the candidate wins only when its median is
      more than :data:`SINGLE_RUN_TIE` (5 %) above the recipe's, and the text says it was one run.
    - **One run against repeats** (one side repeated, the other not): never a win, "undecided",
      naming the side to run again (a capped candidate's single run once beat three of the
      recipe's inside their own range).
    - **Measured apart** (``measured_apart`` gives reasons, :func:`apart`): never a win, a tie
      until both are measured side by side. The runs' spread is one machine's within an hour;
      between machines and days the same command moved more than any margin measured so far
      (:data:`MEASURED_APART_S`).

    Args:
        candidate, recipe: each run's score at the chosen point (higher is better, e.g.
            goodput tok/s per GPU: :func:`lab.tune.slo.scores`).
        measured_apart: why the two sides may not compare (:func:`apart`); () when measured
            together.
        screened: how many candidates (the recipe not counted) the choice of this one was made
            from, at least 1 (:func:`screened_count`).

    Returns:
        A :class:`Verdict`.

    Raises:
        BenchError: no value on either side (or scipy missing, :func:`sweep_chance`).
    """
    a = [float(v) for v in candidate if v == v]
    b = [float(v) for v in recipe if v == v]
    if not a or not b:
        raise BenchError(
            "verdict: each side needs at least one measured value (the runs' scores); "
            f"got {len(a)} and {len(b)}."
        )
    screened = max(int(screened), 1)
    med_a, med_b = statistics.median(a), statistics.median(b)
    ratio = med_a / med_b if med_b else None
    say = f"{ratio:.2f}x the recipe's" if ratio is not None else "the recipe's is 0"
    runs = (len(a), len(b))
    if min(runs) >= 2:
        each = f"{runs[0]} runs each" if runs[0] == runs[1] else f"{runs[0]} and {runs[1]} runs"
        ranges = f"{min(a):,.0f}-{max(a):,.0f} vs the recipe's {min(b):,.0f}-{max(b):,.0f}"
        p, need = sweep_chance(a, b), ALPHA / screened
        if (p <= need or min(a) > max(b)) and measured_apart:
            return Verdict(False, ratio, runs, f"tie (measured apart): {say} median ({each}; "
                           f"{ranges}), but {'; '.join(measured_apart)}: only runs side by side "
                           "decide")  # fmt: skip
        if p <= need:
            sweep = "worst run above the recipe's best: " if min(a) > max(b) else ""
            of = "" if sweep and screened == 1 else f"; one-sided Mann-Whitney p = {p:.2g}" + (
                f", the best of {screened} candidates" if screened > 1 else "")  # fmt: skip
            return Verdict(True, ratio, runs, f"{say} median ({each}; {sweep}{ranges}{of})")
        if min(a) > max(b):  # a clean sweep that the runs or the screen cannot show
            best_of = f"the best of {screened} candidates: " if screened > 1 else ""
            share = f"{need:.2%} ({ALPHA:.0%} over {screened})" if screened > 1 else f"{ALPHA:.0%}"
            return Verdict(False, ratio, runs, f"tie (within noise): {say} median ({each}: "
                           f"{ranges}); {best_of}a lead this clean has a {p:.1%} chance for a "
                           f"configuration no faster, a win needs {share}: "
                           f"{runs_to_show(screened)} runs of each can show it")  # fmt: skip
        return Verdict(False, ratio, runs, f"tie (within noise): {say} median, ranges overlap "
                       f"({each}: {ranges})")  # fmt: skip
    if max(runs) >= 2:  # one side repeated, the other not: no rule compares them
        short = "candidate" if runs[0] < runs[1] else "recipe"
        return Verdict(False, ratio, runs, f"undecided: {say} ({runs[0]} run(s) vs {runs[1]}): the "
                       f"{short}'s point has no spread while the other's has; run it "
                       f"{max(runs)} times before it can decide")  # fmt: skip
    one = "one run each" if runs == (1, 1) else f"{runs[0]} run(s) vs {runs[1]}"
    if ratio is not None and ratio > 1 + SINGLE_RUN_TIE and measured_apart:
        return Verdict(False, ratio, runs, f"tie (measured apart): {say} ({one}), but "
                       f"{'; '.join(measured_apart)}: only runs side by side decide")  # fmt: skip
    if ratio is not None and ratio > 1 + SINGLE_RUN_TIE:
        return Verdict(True, ratio, runs, f"{say} ({one}: no spread measured)")
    return Verdict(False, ratio, runs, f"tie (within noise): {say} ({one}: no spread measured, "
                   f"under the {SINGLE_RUN_TIE:.0%} a single run cannot tell apart)")  # fmt: skip
