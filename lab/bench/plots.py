"""The lab's figures of :func:`helpers.bench.results.load_results` DataFrames, drawn as
:mod:`helpers.bench.plots` draws a target notebook's (its axes, labels and subtitle): the
acceptance length per speculative mode (the speculative-decoding notebook) and a tuning run's
frontier (:mod:`lab.tune`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from helpers.bench.plots import _finish, _lines, _require
from helpers.errors import PlotError


def acceptance_length(
    df: pd.DataFrame,
    *,
    by: str = "label",
    title: str = "Speculative decoding: acceptance length",
    target: str | None = None,
    variant: str | None = None,
    vllm_version: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Bar chart of mean acceptance length (1 + accepted / drafts: tokens per target forward
    pass, 1.0 = no gain) per speculative mode (``by``), bars per concurrency.

    Args:
        df: :func:`helpers.bench.results.load_results` output.
        by: column naming the speculative mode (default ``label``).
        title, target, variant, vllm_version: title and subtitle parts.
        path: PNG to write, optional.

    Raises:
        PlotError: no row has ``spec_decode_acceptance_length``.
    """
    col = "spec_decode_acceptance_length"
    if col not in df.columns or df[col].isna().all():
        raise PlotError(
            "No speculative-decoding results in the DataFrame: run the sweep against a "
            "server started with a speculative mode (recipe 'speculative=...')."
        )
    _require(df, [by, "concurrency"], "acceptance_length()")
    data = df[df[col].notna()]
    table = data.pivot_table(index=by, columns="concurrency", values=col, aggfunc="mean")
    modes, concs = list(table.index), list(table.columns)
    width = 0.8 / max(len(concs), 1)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(modes) * max(1, len(concs)) ** 0.5), 4.5))
    for j, c in enumerate(concs):
        pairs = [
            (i - 0.4 + width * (j + 0.5), v) for i, v in enumerate(table[c].values) if pd.notna(v)
        ]  # a mode not measured at this concurrency gets no bar
        bars = ax.bar(
            [x for x, _ in pairs], [v for _, v in pairs], width=width, label=f"c={int(c)}"
        )
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.set_xticks(range(len(modes)), [str(m) for m in modes])
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xlabel("Speculative mode")
    ax.set_ylabel("Acceptance length [tokens per target step]")
    ax.set_ylim(0, max(1.0, float(table.max().max())) * 1.15)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(title="concurrency", fontsize=8, loc="lower right")
    return _finish(fig, title, target, variant, vllm_version, path)


def tune_frontier(
    df: pd.DataFrame,
    *,
    recommended: tuple[str, int] | None = None,
    by: str = "candidate",
    x: str = "tokens_per_s_per_user",
    y: str = "output_throughput_per_gpu",
    title: str = "Tuning: throughput vs. interactivity",
    target: str | None = None,
    vllm_version: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Each candidate's frontier of a tuning run: ``y`` against ``x``, a line per ``by`` value,
    points that meet the SLO filled, points that miss it hollow, the recommended one starred,
    and the range of a point's runs as bars where ``df`` has ``<x or y>_min`` / ``_max``.

    Args:
        df: :attr:`lab.tune.tune.TuneResult.points` of one workload (columns ``by``,
            ``x``, ``y``, ``concurrency``, ``meets_slo``).
        recommended: ``(candidate, concurrency)`` of the chosen point, or None.
        by, x, y: the configuration column and the axes (per-user speed, throughput per GPU;
            on the stand-in ``e2e_tokens_per_s_per_user`` and ``output_throughput``).
        title, target, vllm_version: title and subtitle parts.
        path: PNG to write, optional.

    Raises:
        PlotError: a needed column is missing, or no point to draw.
    """
    _require(df, [by, x, y, "concurrency", "meets_slo"], "tune_frontier()")
    if df.empty:
        raise PlotError("tune_frontier(): no measured point to draw (every candidate failed?).")
    fig, ax = plt.subplots(figsize=(7.5, 5))
    ranged = False
    for g, color in _lines(ax, df, by, x, y):
        met = g["meets_slo"].astype(bool)
        ax.scatter(g[x][met], g[y][met], color=color, zorder=3)
        ax.scatter(g[x][~met], g[y][~met], facecolors="white", edgecolors=color, zorder=3)
        err = {}  # the runs' range (min-max) where the frame carries it: none at one run
        for axis, col in (("xerr", x), ("yerr", y)):
            if f"{col}_min" in g and f"{col}_max" in g:
                err[axis] = [
                    (g[col] - g[f"{col}_min"]).fillna(0),
                    (g[f"{col}_max"] - g[col]).fillna(0),
                ]
        if err:
            ranged = True
            ax.errorbar(g[x], g[y], fmt="none", ecolor=color, alpha=0.5, capsize=3, zorder=2, **err)
    if recommended is not None:
        pick = df[(df[by] == recommended[0]) & (df["concurrency"] == recommended[1])]
        if not pick.empty:
            ax.scatter(pick[x], pick[y], marker="*", s=320, color="gold", edgecolors="black",
                       zorder=4, label=f"recommended: {recommended[0]}, c={recommended[1]}")  # fmt: skip
    ax.scatter([], [], facecolors="white", edgecolors="grey", label="misses the SLO")
    if ranged:
        ax.errorbar(
            [],
            [],
            xerr=[],
            yerr=[],
            fmt="none",
            ecolor="grey",
            label="range of the runs (no bar: one run)",
        )
        ax.autoscale()  # the axes were fixed at 0 before the bars: fit them, still from 0
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
    ax.legend(title=by, fontsize=8)
    return _finish(fig, title, target, None, vllm_version, path)
