"""The break-even acceptance length: below which acceptance drafting is slower than none.

Drafting costs the same work per target step whatever the drafter gets right: ``K`` draft
tokens proposed, ``K + 1`` verified. What it buys is ``L`` tokens per step, the acceptance
length. So, at one concurrency, speed grows about linearly in ``L`` for a fixed ``K``, and the
break-even ``L*`` is where that line meets the speed of the same server without drafting.

The points come from servers drafting at a synthetic acceptance length (on random weights:
:mod:`lab.synthetic_acceptance`), each timed at several lengths; the baseline from the same
command without drafting, measured in the same session. :func:`break_even` fits one line per
``(K, concurrency)`` and reads ``L*`` off it, with the range that the baseline's run-to-run
spread gives; :func:`plot_break_even` draws it. A user with real weights reads their own ``L``
from ``/metrics`` on real prompts (``lab.bench.acceptance.measure_acceptance``) and
compares it with ``L*``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.errors import BenchError

#: Per-point columns :func:`break_even` reads: the concurrency, the drafting configuration,
#: the acceptance length measured by vLLM (``spec_decode_acceptance_length``), the metric.
GROUP = ("num_speculative_tokens", "concurrency")


def _acceptance(points: pd.DataFrame) -> pd.Series:
    """vLLM's measured acceptance length where the point has it, else the configured one."""
    nan = pd.Series(np.nan, index=points.index)

    def column(name: str) -> pd.Series:
        return pd.to_numeric(points[name], errors="coerce") if name in points else nan

    return column("spec_decode_acceptance_length").fillna(column("synthetic_acceptance_length"))


def break_even(
    points: pd.DataFrame,
    baseline: pd.DataFrame,
    metric: str = "output_throughput",
    *,
    model: str = "line",
) -> pd.DataFrame:
    """One row per ``(num_speculative_tokens, concurrency)``: the least-squares line of
    ``metric`` against the acceptance length, and where it meets the baseline.

    ``model="line"`` fits slope and intercept and needs two or more lengths per group;
    ``model="origin"`` fits a line through the origin (speed proportional to ``L``, the
    per-step cost independent of ``L``): an estimate from one timed length, said so by the
    ``model`` column.

    Args:
        points: drafting points, a row per run (repeats included): columns ``concurrency``,
            ``num_speculative_tokens`` (K), ``synthetic_acceptance_length`` (the configured
            L) and/or ``spec_decode_acceptance_length`` (vLLM's measured L, preferred), and
            ``metric``.
        baseline: the same command without drafting, a row per run: ``concurrency`` and
            ``metric``.
        metric: higher is better: ``output_throughput`` (tokens/s, the default) or
            ``tokens_per_s_per_user`` (1000 / mean TPOT).
        model: ``"line"`` or ``"origin"`` (above).

    Returns:
        Columns ``num_speculative_tokens``, ``concurrency``, ``lengths`` (the distinct L
        measured, rounded to 0.01), ``runs``, ``slope`` (metric per unit of L), ``intercept``,
        ``baseline`` (median), ``baseline_min`` / ``baseline_max``, ``break_even_length``
        (L*, NaN when the line is flat or falls), ``break_even_low`` / ``break_even_high``
        (L* at the baseline's min and max), ``extrapolated`` (L* outside the measured Ls), ``model``.

    Raises:
        BenchError: a column is missing, a group has fewer than two distinct lengths (a line
            needs two), or a concurrency has no baseline run.
    """
    for name, df, cols in (("points", points, ("concurrency", "num_speculative_tokens", metric)),
                           ("baseline", baseline, ("concurrency", metric))):  # fmt: skip
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise BenchError(f"break_even: {name} lacks {missing}; it has {list(df.columns)}.")
    df = points.assign(_L=_acceptance(points), _y=pd.to_numeric(points[metric], errors="coerce"))
    df = df.dropna(subset=["_L", "_y"])
    rows = []
    for (k, c), g in df.groupby(list(GROUP)):
        lengths = sorted({round(float(x), 2) for x in g["_L"]})
        configured = (
            g["synthetic_acceptance_length"] if "synthetic_acceptance_length" in g else g["_L"]
        )
        if model == "line" and configured.nunique() < 2:
            raise BenchError(
                f"break_even: K={k} at concurrency {c} was timed at one acceptance length "
                f"({lengths}); time it at two or more (e.g. 1.5 and {k + 1 - 0.5:g})."
            )
        base = pd.to_numeric(baseline.loc[baseline["concurrency"] == c, metric], errors="coerce")
        base = base.dropna()
        if base.empty:
            raise BenchError(
                f"break_even: no baseline run at concurrency {c}: measure the command without "
                "drafting at the same concurrencies."
            )
        x, y = g["_L"].astype(float), g["_y"].astype(float)
        if model == "origin":
            slope, intercept = float((x * y).sum() / (x * x).sum()), 0.0
        else:
            slope, intercept = np.polyfit(x, y, 1)

        def at(level: float, slope=slope, intercept=intercept) -> float:
            return (level - intercept) / slope if slope > 0 else float("nan")

        star = at(float(base.median()))
        rows.append({
            "num_speculative_tokens": int(k), "concurrency": int(c), "lengths": lengths,
            "runs": int(len(g)), "slope": float(slope), "intercept": float(intercept),
            "baseline": float(base.median()), "baseline_min": float(base.min()),
            "baseline_max": float(base.max()), "break_even_length": star,
            "break_even_low": at(float(base.min())), "break_even_high": at(float(base.max())),
            "extrapolated": bool(np.isfinite(star) and not lengths[0] <= star <= lengths[-1]),
            "model": model,
        })  # fmt: skip
    return pd.DataFrame(rows)


def summary(result: pd.DataFrame, *, with_k: bool = True) -> list[str]:
    """One sentence per row of :func:`break_even`: ``K=7 at concurrency 16: drafting pays
    above L = 2.9 (2.8-3.0 over the baseline's spread; measured at L = 1.5-5.5)``, or "cannot
    pay" where that L is above K + 1 (the most a step accepts); without
    ``with_k`` (a caller whose label already names K), ``at concurrency 16: ...``."""
    lines = []
    for r in result.itertuples():
        lo_l, hi_l = r.lengths[0], r.lengths[-1]
        measured = f"measured at L = {lo_l:g}" + (f"-{hi_l:g}" if hi_l > lo_l else "")
        origin = getattr(r, "model", "line") == "origin"
        head = (
            f"K={r.num_speculative_tokens} " if with_k else ""
        ) + f"at concurrency {r.concurrency}"
        if not np.isfinite(r.break_even_length):
            lines.append(f"{head}: no break-even (speed does not grow with L; {measured})")
            continue
        lo, hi = sorted((r.break_even_low, r.break_even_high))
        spread = (
            f"{lo:.2f}-{hi:.2f} over the baseline's spread"
            if hi - lo >= 0.005
            else "one baseline run"
        )
        if origin:
            note = ", assuming speed proportional to L"
        else:
            note = ", extrapolated" if r.extrapolated else ""
        k = int(r.num_speculative_tokens)
        if r.break_even_length > k + 1:  # a step keeps at most its K drafts and one token more
            lines.append(f"{head}: drafting cannot pay: its break-even L = {r.break_even_length:.2f} "
                         f"is above K + 1 = {k + 1}, the most a step can accept ({spread}; {measured}{note})")  # fmt: skip
            continue
        lines.append(
            f"{head}: drafting pays above L = {r.break_even_length:.2f} ({spread}; {measured}{note})"
        )
    return lines


def plot_break_even(
    points: pd.DataFrame,
    baseline: pd.DataFrame,
    result: pd.DataFrame,
    path: str | Path,
    *,
    metric: str = "output_throughput",
    caption: str = "",
    concurrencies: Sequence[int] | None = None,
) -> Path:
    """One panel per concurrency: each run's ``metric`` against its acceptance length, the
    fitted line per K, the baseline's range as a band, ``L*`` marked. ``caption`` (the
    synthetic-acceptance provenance, :meth:`lab.synthetic_acceptance.SyntheticAcceptance.caption`)
    goes under the figure. Writes a PNG and returns its path. When ``result`` and ``points``
    both have a ``series`` column (two drafters of one K: MTP and DSpark at K=7), a line and its
    runs are those of one series, labelled by it, instead of one K.

    Raises:
        BenchError: nothing to plot (``result`` empty).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if result.empty:
        raise BenchError("plot_break_even: no break-even rows; run break_even(points, baseline).")
    concs = list(concurrencies or sorted(result["concurrency"].unique()))
    ncols = min(len(concs), 2)
    nrows = -(-len(concs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 4 * nrows), squeeze=False)
    pts = points.assign(_L=_acceptance(points))
    for ax, c in zip(axes.flat, concs, strict=False):
        band = result[result["concurrency"] == c].iloc[0]
        ax.axhspan(band.baseline_min, band.baseline_max, color="0.85", label="no drafting (range)")
        ax.axhline(band.baseline, color="0.4", lw=1)
        by_series = "series" in result and "series" in pts
        for n, r in enumerate(result[result["concurrency"] == c].itertuples()):
            key, value = (
                ("series", r.series)
                if by_series
                else ("num_speculative_tokens", r.num_speculative_tokens)
            )
            sel = pts[(pts["concurrency"] == c) & (pts[key] == value)]
            name = r.series if by_series else f"K={r.num_speculative_tokens}"
            color = f"C{n}"
            ax.scatter(sel["_L"], sel[metric], s=18, color=color, label=f"{name} runs")
            xs = np.linspace(
                1.0,
                max(r.lengths[-1], r.break_even_length if np.isfinite(r.break_even_length) else 1.0)
                + 0.3,
                20,
            )
            ax.plot(xs, r.slope * xs + r.intercept, lw=1, color=color)
            if np.isfinite(r.break_even_length):
                ax.axvline(r.break_even_length, ls="--", lw=1, color=color)
                ax.annotate(f"L* = {r.break_even_length:.2f}", (r.break_even_length, band.baseline),
                            textcoords="offset points", xytext=(4, 6 + 12 * n), fontsize=8,
                            color=color)  # fmt: skip
        ax.set_title(f"concurrency {c}")
        ax.set_xlabel("acceptance length L (tokens per target step)")
        ax.set_ylabel(metric.replace("_", " "))
        ax.legend(fontsize=7)
    bottom = 0.0
    if caption:  # about 190 characters a line at this width and size
        bottom = min(0.4, (len(caption) // 190 + 1) * 0.045 / nrows)
        fig.text(0.01, 0.005, caption, fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
