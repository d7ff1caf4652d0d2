"""Run-to-run spread of repeated benchmark points, and rankings that call a difference inside
it noise, not a win (the speculative-decoding notebook's; the tuning step's rule:
:mod:`lab.tune.noise`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from helpers.errors import BenchError


@dataclass(frozen=True)
class Spread:
    """Run-to-run spread of one metric over repeats of one point.

    ``noise_pct`` = (max - min) / mean × 100: a difference between configurations smaller
    than this is not distinguishable from repeating the same configuration (a heuristic for
    the noise of three or so runs, not a confidence interval).
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
    """The spread of ``metric`` over the rows of ``df`` (e.g. the output of
    :func:`lab.bench.repeats.repeat_point`).

    Raises:
        BenchError: ``metric`` is not a column or has fewer than 2 values.
    """
    if metric not in df.columns:
        raise BenchError(f"No column {metric!r}; pass one of {list(df.columns)}.")
    values = pd.to_numeric(df[metric], errors="coerce").dropna()
    if len(values) < 2:
        raise BenchError(
            f"{metric!r} has {len(values)} value(s); a spread needs 2 or more (repeat_point)."
        )
    return Spread(metric, int(len(values)), float(values.mean()), float(values.std(ddof=1)),
                  float(values.min()), float(values.max()))  # fmt: skip


def higher_is_better(metric: str) -> bool:
    """False for latencies (``*_ms``, ``duration_s``, ``failed``), True for throughputs and the rest."""
    return not (metric.endswith("_ms") or metric in ("duration_s", "failed"))


@dataclass(frozen=True)
class Comparison:
    """The verdict of :func:`compare`: ``winner`` is None when the difference is noise."""

    delta_pct: float
    winner: str | None
    verdict: str


def compare(
    value_a: float,
    value_b: float,
    *,
    metric: str = "output_throughput",
    noise: float | Spread | Sequence[Spread] | None = None,
    names: tuple[str, str] = ("A", "B"),
    sides: tuple[Spread, Spread] | None = None,
) -> Comparison:
    """Compare two measurements of ``metric``; a difference inside the noise is no win.

    Args:
        value_a, value_b: the two measurements (e.g. the mean of a :class:`Spread`).
        metric: the column compared; its direction comes from :func:`higher_is_better`.
        noise: run-to-run spread in percent, or :class:`Spread` (s) from :func:`spread`:
            the largest applies. Without it (and without ``sides``) every non-zero difference
            counts, and the verdict says the noise is unknown.
        names: labels for the verdict.
        sides: the runs of ``value_a`` and of ``value_b`` (a :class:`Spread` each), instead
            of ``noise``: a win needs every run of one beyond every run of the other (their
            ranges apart, the tuning step's rule for one candidate, :mod:`lab.tune.noise`).

    Returns:
        A :class:`Comparison`; ``verdict`` reads e.g. ``"B beats A on output_throughput:
        1.12x (noise ±3.1%)"`` or ``"A vs B: 1.2% on output_throughput is
        noise, not a win (run-to-run spread 4.0%)"``.
    """
    if isinstance(noise, Spread):
        noise = [noise]
    a, b = float(value_a), float(value_b)
    delta = 100.0 * (b - a) / (abs(a) if a else abs(b) or 1.0)
    n_a, n_b = names
    if sides is not None:  # both sides' runs: the tuning step's rule
        lo, hi = max(s.min for s in sides), min(s.max for s in sides)
        if lo <= hi:
            return Comparison(delta, None, f"{n_a} vs {n_b}: {abs(delta):.1f}% on {metric} is "
                              "noise, not a win (their runs' ranges overlap)")  # fmt: skip
        widest = max(s.noise_pct for s in sides)
        return _won(a, b, delta, metric, names, f"every run apart; noise ±{widest / 2:.1f}%")
    if isinstance(noise, Sequence):
        noise = max((s.noise_pct for s in noise), default=None)
    if noise is not None and abs(delta) <= noise:
        return Comparison(delta, None, f"{n_a} vs {n_b}: {abs(delta):.1f}% on {metric} is noise, "
                          f"not a win (run-to-run spread {noise:.1f}%)")  # fmt: skip
    if a == b:
        return Comparison(0.0, None, f"{n_a} and {n_b} tie on {metric}")
    note = "noise unknown: measure it with repeat_point"
    return _won(
        a, b, delta, metric, names, f"noise ±{noise / 2:.1f}%" if noise is not None else note
    )


def _won(
    a: float, b: float, delta: float, metric: str, names: tuple[str, str], note: str
) -> Comparison:
    """The winning :class:`Comparison` of :func:`compare`: its verdict gives the ratio of the
    better to the worse (``2.10x``; for a latency, ``2.10x lower``)."""
    better_b = (b > a) if higher_is_better(metric) else (b < a)
    (winner, loser), (w, lo) = ((names[1], names[0]), (b, a)) if better_b else (names, (a, b))
    if w > 0 and lo > 0:  # a ratio of positive figures; else the difference in percent
        by = f"{w / lo if higher_is_better(metric) else lo / w:.2f}x" + (
            "" if higher_is_better(metric) else " lower"
        )
    else:
        by = f"{abs(delta):.1f}%"
    return Comparison(delta, winner, f"{winner} beats {loser} on {metric}: {by} ({note})")


def rank(
    df: pd.DataFrame,
    metric: str,
    *,
    concurrency: int | None = None,
    by: str = "label",
    noise: float | Spread | Sequence[Spread] | Mapping[str, Spread] | None = None,
) -> pd.DataFrame:
    """Rank configurations on ``metric`` at one concurrency, each against the best, with noise.

    Args:
        df: :func:`helpers.bench.results.load_results` / :func:`helpers.bench.sweep.sweep` rows
            of several configurations (``by``).
        metric: e.g. ``output_throughput_per_gpu`` (throughput) or ``tokens_per_s_per_user``
            / ``median_tpot_ms`` (latency).
        concurrency: the point compared (default: the largest concurrency every configuration has).
        noise: as :func:`compare` (the largest spread given judges every pair), or
            ``{configuration: Spread}``: each configuration against the best by their runs,
            a win only when the two ranges are apart (``compare``'s ``sides``: the tuning
            step's rule, the results pages' too, ``tools/drafting_pages.py``); one without a
            spread is judged with the best's alone.

    Returns:
        DataFrame sorted best first: ``by``, ``concurrency``, ``metric``, ``vs_best_pct``,
        ``verdict`` ("best", "within noise of best", or the :func:`compare` verdict).
    """
    if by not in df.columns or metric not in df.columns:
        raise BenchError(f"rank() needs columns {by!r} and {metric!r}; pass load_results() output.")
    if concurrency is None:
        common = set.intersection(
            *(set(g["concurrency"].dropna().astype(int)) for _, g in df.groupby(by))
        )
        if not common:
            raise BenchError(
                "The configurations share no concurrency; pass concurrency= explicitly."
            )
        concurrency = max(common)
    at = df[df["concurrency"] == int(concurrency)]
    means = at.groupby(by)[metric].mean().dropna()
    if means.empty:
        raise BenchError(f"No {metric} values at concurrency {concurrency}.")
    means = means.sort_values(ascending=not higher_is_better(metric))
    best_name, best = means.index[0], float(means.iloc[0])
    rows = []
    for name, value in means.items():
        pair, sides = noise, None
        if isinstance(noise, Mapping):  # each configuration's own runs
            pair = [noise[n] for n in (best_name, name) if n in noise] or None
            sides = (noise[best_name], noise[name]) if pair and len(pair) == 2 else None
        c = compare(best, value, metric=metric, noise=pair, names=(str(best_name), str(name)),
                    sides=sides)  # fmt: skip
        verdict = "within noise of best" if c.winner is None else c.verdict
        rows.append({by: name, "concurrency": int(concurrency), metric: float(value),
                     "vs_best_pct": round(c.delta_pct, 1),
                     "verdict": "best" if name == best_name else verdict})  # fmt: skip
    return pd.DataFrame(rows)


def winner(ranking: pd.DataFrame, by: str = "label") -> str:
    """One line from a :func:`rank` table: the best configuration, or the tie when the
    runners-up are within the run-to-run noise."""
    if ranking.empty:
        raise BenchError("Empty ranking: run rank() on results with at least one configuration.")
    best = str(ranking.iloc[0][by])
    tied = [
        str(r[by]) for _, r in ranking.iloc[1:].iterrows() if r["verdict"] == "within noise of best"
    ]
    if tied:
        return f"no clear winner: {', '.join([best, *tied])} are within the noise of each other"
    if len(ranking) > 1:
        return f"{best} — {ranking.iloc[1]['verdict']}"
    return best
