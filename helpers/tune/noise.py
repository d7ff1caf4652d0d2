"""Repeats of a point and the noise they measure (pure functions over point rows).

**Why repeats.** One H200 measured the same command at 5,007 and 6,711 output tok/s at
concurrency 256 on two days, and Marlin vs Humming at concurrency 1 flipped between two single
runs (docs/DESIGN.md). vLLM's own sweep repeats every point 3 times (``vllm bench sweep serve
--num-runs``, vLLM 0.32.0 ``vllm/benchmarks/sweep/serve.py``; docs/DESIGN.md); the cookbook does
too on a GPU, each repeat with a seed of its own (:func:`helpers.bench.sizing.point_seed`).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

import pandas as pd

from helpers.errors import BenchError

#: The figures whose spread over repeats the tables show beside the median (``<name>_min``,
#: ``<name>_max``): output tok/s per GPU, goodput tok/s per GPU, p50 TPOT (ms).
SPREAD_METRICS = ("output_throughput_per_gpu", "goodput_tok_s_per_gpu", "p50_tpot_ms")
#: What names one point: its repeats are the rows that share these.
POINT_KEYS = ("candidate", "workload", "concurrency")
#: With one run of either side no spread is measured: a margin under this share is a tie.
#: docs/results/README.md: "One run per point unless said otherwise: treat differences under
#: about 5 % as noise."
SINGLE_RUN_TIE = 0.05


def aggregate(runs: pd.DataFrame, keys: Sequence[str] = POINT_KEYS) -> pd.DataFrame:
    """One row per point from one row per run: the median over its repeats of every numeric
    column, the first repeat's value of the others (path, date, flags), ``repeats`` (how many
    runs) and ``<metric>_min`` / ``<metric>_max`` of :data:`SPREAD_METRICS` (and of
    ``score`` when the rows have it).

    Args:
        runs: point rows (:func:`helpers.tune.points.points_frame`), several per point when
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


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether a candidate beats the recipe beyond the noise (:func:`verdict`).

    Attributes:
        beats: True only when the margin is beyond the noise (the rule of :func:`verdict`).
        ratio: the candidate's median over the recipe's median.
        runs: repeats of the candidate's point and of the recipe's.
        text: the words for the summary: ``"1.31x the recipe's median (3 runs each; ...)"``
            or ``"tie (within noise): ..."``.
    """

    beats: bool
    ratio: float | None
    runs: tuple[int, int]
    text: str


def verdict(candidate: Sequence[float], recipe: Sequence[float]) -> Verdict:
    """The rule that lets a candidate replace the recipe: a margin beyond the noise.

    - **Repeated** (2 or more runs of each point): the candidate wins only when its worst run
      beats the recipe's best (their ranges do not overlap); else a tie. For two configurations
      of equal speed, all ``n`` runs of one land above all ``n`` of the other by chance once in
      ``C(2n, n)`` orderings: 1 in 20 at 3 runs each (the exact one-sided Mann-Whitney test at
      5 %), 1 in 6 at 2 (the stand-in's CI rehearsal, not a GPU's choice).
    - **One run** of either: no spread was measured; the candidate wins only when its median is
      more than :data:`SINGLE_RUN_TIE` (5 %) above the recipe's, and the text says it was one run.

    Args:
        candidate, recipe: each run's score at the chosen point (higher is better, e.g.
            goodput tok/s per GPU: :func:`helpers.tune.slo.scores`).

    Returns:
        A :class:`Verdict`.

    Raises:
        BenchError: no value on either side.
    """
    a = [float(v) for v in candidate if v == v]
    b = [float(v) for v in recipe if v == v]
    if not a or not b:
        raise BenchError(
            "verdict: each side needs at least one measured value (the runs' scores); "
            f"got {len(a)} and {len(b)}."
        )
    med_a, med_b = statistics.median(a), statistics.median(b)
    ratio = med_a / med_b if med_b else None
    say = f"{ratio:.2f}x the recipe's" if ratio is not None else "the recipe's is 0"
    runs = (len(a), len(b))
    if min(runs) >= 2:
        each = f"{runs[0]} runs each" if runs[0] == runs[1] else f"{runs[0]} and {runs[1]} runs"
        ranges = f"{min(a):,.0f}-{max(a):,.0f} vs the recipe's {min(b):,.0f}-{max(b):,.0f}"
        if min(a) > max(b):
            return Verdict(True, ratio, runs, f"{say} median ({each}; worst run above the "
                           f"recipe's best: {ranges})")  # fmt: skip
        return Verdict(False, ratio, runs, f"tie (within noise): {say} median, ranges overlap "
                       f"({each}: {ranges})")  # fmt: skip
    one = "one run each" if runs == (1, 1) else f"{runs[0]} run(s) vs {runs[1]}"
    if ratio is not None and ratio > 1 + SINGLE_RUN_TIE:
        return Verdict(True, ratio, runs, f"{say} ({one}: no spread measured)")
    return Verdict(False, ratio, runs, f"tie (within noise): {say} ({one}: no spread measured, "
                   f"under the {SINGLE_RUN_TIE:.0%} a single run cannot tell apart)")  # fmt: skip
