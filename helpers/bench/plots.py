"""Matplotlib figures of :func:`helpers.bench.results.load_results` DataFrames: each function
returns the Figure and, given ``path``, writes a PNG whose subtitle (``target``, ``variant``,
``vllm_version``) says what it measured. Without a display and outside Jupyter, Agg is selected.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

if (
    "ipykernel" not in sys.modules
    and not os.environ.get("MPLBACKEND")
    and not os.environ.get("DISPLAY")
    and not os.environ.get("WAYLAND_DISPLAY")
):
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from helpers.errors import PlotError  # noqa: E402

#: Axis wording per latency metric (vLLM's names, ``vllm/benchmarks/serve.py``).
LATENCY_NAMES = {
    "ttft": "Time to first token",
    "tpot": "Time per output token",
    "itl": "Inter-token latency",
    "e2el": "End-to-end latency",
}
#: Axis labels (with units) of the DataFrame columns a Pareto chart is usually drawn from.
AXIS_LABELS = {
    "tokens_per_s_per_user": "Tokens/s per user (1000 / mean TPOT) [tokens/s]",
    "e2e_tokens_per_s_per_user": "Tokens/s per user (output tokens / mean E2EL) [tokens/s]",
    "output_throughput_per_gpu": "Output tokens/s per GPU [tokens/s/GPU]",
    "output_throughput": "Output tokens/s [tokens/s]",
    "total_token_throughput": "Input + output tokens/s [tokens/s]",
    "request_throughput": "Requests/s [req/s]",
    "request_goodput": "Requests/s meeting the SLOs [req/s]",
}


def subtitle(
    target: str | None = None, variant: str | None = None, vllm_version: str | None = None
) -> str:
    """``"target · variant · vLLM <version>"`` from whichever parts are given ("" if none)."""
    parts = [p for p in (target, variant) if p]
    if vllm_version:
        parts.append(f"vLLM {vllm_version}")
    return " · ".join(parts)


def _require(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise PlotError(
            f"{what} needs column(s) {missing}; pass the DataFrame from "
            "helpers.bench.results.load_results() or helpers.bench.sweep.sweep()."
        )


def _finish(
    fig: Figure,
    title: str,
    target: str | None,
    variant: str | None,
    vllm_version: str | None,
    path: str | Path | None,
) -> Figure:
    sub = subtitle(target, variant, vllm_version)
    fig.suptitle(title + (f"\n{sub}" if sub else ""), fontsize=12)
    fig.tight_layout()
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"Title": " · ".join(t for t in (title, sub) if t)}  # travels with the PNG
        fig.savefig(path, format="png", dpi=120, bbox_inches="tight", metadata=meta)
    return fig


def pareto(
    df: pd.DataFrame,
    *,
    by: str = "label",
    x: str = "tokens_per_s_per_user",
    y: str = "output_throughput_per_gpu",
    title: str = "Throughput vs. interactivity",
    target: str | None = None,
    variant: str | None = None,
    vllm_version: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Output tokens/s per GPU (y) against tokens/s per user (x), one line per ``by`` value.

    Each point is one concurrency (annotated ``c=N``); the upper-right envelope across lines
    is the Pareto front of the configurations.

    Args:
        df: :func:`helpers.bench.results.load_results` output.
        by: column naming the configuration (default ``label``).
        x, y: columns for the axes (on the CPU stand-in, whose TPOT reads near 0,
            ``x="e2e_tokens_per_s_per_user"``).
        title, target, variant, vllm_version: title and subtitle parts.
        path: PNG to write, optional.

    Raises:
        PlotError: a needed column is missing.
    """
    _require(df, [by, x, y, "concurrency"], "pareto()")
    fig, ax = plt.subplots(figsize=(7.5, 5))
    _lines(ax, df, by, x, y, marker="o")
    ax.legend(title=by)
    return _finish(fig, title, target, variant, vllm_version, path)


def _lines(ax, df: pd.DataFrame, by: str, x: str, y: str, **style: Any) -> list:
    """One line of ``y`` against ``x`` per ``by`` value, each point annotated ``c=N``, on axes
    labelled with units from 0; returns ``[(the group's rows, its colour)]``."""
    drawn = []
    for name, group in df.groupby(by, sort=True):
        g = group.sort_values("concurrency")
        (line,) = ax.plot(g[x], g[y], label=str(name), **style)
        drawn.append((g, line.get_color()))
        for _, row in g.iterrows():
            ax.annotate(f"c={int(row['concurrency'])}", (row[x], row[y]), textcoords="offset points",
                        xytext=(4, 4), fontsize=8, color=line.get_color())  # fmt: skip
    ax.set_xlabel(AXIS_LABELS.get(x, x))
    ax.set_ylabel(AXIS_LABELS.get(y, y))
    ax.grid(True, alpha=0.3)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    return drawn


def latency_vs_concurrency(
    df: pd.DataFrame,
    metrics: Sequence[str] = ("ttft", "tpot"),
    percentiles: Sequence[str] = ("median", "p99"),
    *,
    by: str = "label",
    log_x: bool = True,
    title: str = "Latency vs. concurrency",
    target: str | None = None,
    variant: str | None = None,
    vllm_version: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """One panel per latency metric: ms against concurrency, a line per (``by``, percentile).

    Args:
        df: :func:`helpers.bench.results.load_results` output.
        metrics: any of ``ttft``, ``tpot``, ``itl``, ``e2el``.
        percentiles: any of ``mean``, ``median``, ``p99`` (columns ``<p>_<metric>_ms``).
        by: configuration column.
        log_x: log2 concurrency axis (sweeps usually double the concurrency).
        title, target, variant, vllm_version: title and subtitle parts.
        path: PNG to write, optional.

    Raises:
        PlotError: an unknown metric, or a needed column is missing.
    """
    unknown = [m for m in metrics if m not in LATENCY_NAMES]
    if unknown:
        raise PlotError(f"Unknown latency metric(s) {unknown}; use {sorted(LATENCY_NAMES)}.")
    columns = [f"{p}_{m}_ms" for m in metrics for p in percentiles]
    _require(df, [by, "concurrency", *columns], "latency_vs_concurrency()")
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 4.5), squeeze=False)
    styles = ["-", "--", ":", "-."]
    for ax, metric in zip(axes[0], metrics, strict=True):
        for i, (name, group) in enumerate(df.groupby(by, sort=True)):
            g = group.sort_values("concurrency")
            color = f"C{i % 10}"
            for j, pct in enumerate(percentiles):
                style = {"marker": "o", "linestyle": styles[j % len(styles)], "color": color}
                ax.plot(g["concurrency"], g[f"{pct}_{metric}_ms"], label=f"{name} {pct}", **style)
        if log_x:
            ax.set_xscale("log", base=2)
            ticks = sorted({int(c) for c in df["concurrency"].dropna()})
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.minorticks_off()
        ax.set_xlabel("Concurrency [requests in flight]")
        ax.set_ylabel(f"{metric.upper()} [ms]")
        ax.set_title(f"{LATENCY_NAMES[metric]} ({metric.upper()})")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    return _finish(fig, title, target, variant, vllm_version, path)


def plot_sweep(
    results: pd.DataFrame,
    cfg,
    *,
    run: Any = None,
    folder: str | Path | None = None,
) -> None:
    """A notebook's two figures of one sweep: :func:`pareto` and :func:`latency_vs_concurrency`,
    saved as ``<folder>/<target>[-standin]-{pareto,latency}.png``. On the stand-in (tokens
    arrive in bursts on 2 shared cores, so 1000 / TPOT is no measurement) the axes are end-to-end
    per-user speed, whole-server output tokens/s, TTFT and E2EL. The subtitle says one run per
    point and names the installed vLLM, or an attached server's release ("not checked").

    Args:
        results: the DataFrame of :func:`helpers.bench.sweep.sweep`.
        cfg: the notebook's resolved ``ServeConfig`` (``target``, ``label``, ``variant``).
        run: the server the sweep measured, its ``srv.run`` or a
            :class:`helpers.config.run.Run` (the stand-in's axes; attached: its vLLM is not
            this environment's); None: a GPU server launched here.
        folder: where the PNGs go; default ``out/plots``.

    Raises:
        PlotError: a column the plots need is missing (see :func:`pareto`).
    """
    from helpers.config.run import run_of
    from helpers.config.versions import installed_vllm_version
    from helpers.paths import out_dir

    r = run_of(run) if run is not None else None
    stand_in, attached = bool(r and r.stand_in), bool(r and r.attached)
    figs = Path(folder) if folder else out_dir("plots")
    tag = f"{cfg.target}{'-standin' if stand_in else ''}"
    version = (
        f"{cfg.vllm_version} (attached; not checked)" if attached else installed_vllm_version()
    )
    shown_as = cfg.label + (" (CPU stand-in)" if stand_in else "") + ", one run per point"
    x = "e2e_tokens_per_s_per_user" if stand_in else "tokens_per_s_per_user"
    paths = [figs / f"{tag}-pareto.png", figs / f"{tag}-latency.png"]
    common = {"target": shown_as, "variant": cfg.variant, "vllm_version": version}
    y = "output_throughput" if stand_in else "output_throughput_per_gpu"
    pareto(results, x=x, y=y, path=paths[0], **common)
    metrics = ("ttft", "e2el") if stand_in else ("ttft", "tpot")
    latency_vs_concurrency(results, metrics, path=paths[1], **common)
    print("plots:", *paths)
