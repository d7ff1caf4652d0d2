"""The "measured best" table of a Hopper notebook, rendered from committed tuning results.

The tuning step (:mod:`helpers.tune.tune`) saves ``tune.json`` files; the ones committed under
``docs/results/<gpu>/tune/`` (measured there, or converted from earlier sweeps by
:mod:`tools.seed_tune_results`) are read here and, per workload goal (:data:`GOALS`), the best
measured configuration is picked by the tuning step's own rule (:func:`helpers.tune.slo.choose`)
and set next to the recipe's command, the reference row. Only releases the registry offers
(``model.offered_vllm_versions``: a user can install them) are ranked. A target shows the table
when a result was measured on it or lists it in ``applies_to``. Used when the notebooks are built
(:func:`tools.notebook_build.render`), so changing the data changes the notebooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.metrics import _num
from helpers.paths import REPO_ROOT
from helpers.tune import noise
from helpers.tune import slo as slos
from helpers.tune.saved import load_tune_rows

RESULTS_DIR = REPO_ROOT / "docs" / "results"
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


GOALS = (
    Goal("latency", "tune-1k", "1024 in / 256 out, one user: the fastest decode",
         "per_user", concurrency=1),
    Goal("throughput", "tune-1k", f"1024 in / 256 out, many users: the most output tokens/s per GPU "
         f"within {slos.DEFAULT_SLO.describe()}", "goodput", slo=slos.DEFAULT_SLO),
    Goal("long prompt", "tune-8k", "8K in / 256 out: the most output tokens/s per GPU within "
         f"{slos.DEFAULT_SLO.describe()}", "goodput", slo=slos.DEFAULT_SLO),
)  # fmt: skip


def tune_rows(target: str, results_dir: Path | None = None) -> pd.DataFrame | None:
    """Every committed tuning point that applies to ``target`` (measured on it, or listed in its
    file's ``applies_to``; never a CPU stand-in rehearsal), or None when there is none."""
    root = Path(results_dir or RESULTS_DIR)
    files = sorted(root.glob("*/tune/*.json"))
    if not files:
        return None
    rows = load_tune_rows(files)
    if rows.empty:
        return None
    applies = [
        t == target or target in (a or [])
        for t, a in zip(rows["target"], rows["applies_to"], strict=True)
    ]
    rows = rows[
        pd.Series(applies, index=rows.index) & ~rows["stand_in"].astype(bool)
    ]  # no CPU rehearsal
    if rows.empty:
        return None
    # a repeated point is the median of its runs (never its luckiest run), with its spread
    keys = ("file", "candidate", "vllm_version", "workload", "concurrency")
    return noise.aggregate(rows, keys).reset_index(drop=True)


def _label(row: dict[str, Any]) -> str:
    kernel = row.get("moe_backend") or "default"
    return f"{str(row.get('variant') or '?').upper()}, {kernel} MoE"


def recommendations(rows: pd.DataFrame, offered: list[str]) -> list[dict[str, Any]]:
    """Per goal of :data:`GOALS`: ``best`` and ``recipe`` (rows as dicts, or None), the
    ``runner_up`` (the best other configuration) and ``gap_pct`` to it, ``ratio`` (best over
    recipe, by the goal's objective)."""
    rows = slos.with_goodput(rows[rows["vllm_version"].astype(str).isin(offered)])
    out = []
    for goal in GOALS:
        pts = rows[rows["workload"] == goal.workload]
        if goal.concurrency is not None:
            pts = pts[pts["concurrency"] == goal.concurrency]
        best = slos.choose(pts, goal.slo, goal.objective) if not pts.empty else None
        recipe = (
            slos.choose(pts[pts["recipe"]], goal.slo, goal.objective)
            if not pts.empty and pts["recipe"].any()
            else None
        )
        runner, gap = None, None
        if best is not None:
            others = pts[
                (pts["candidate"] != best["candidate"])
                | (pts["vllm_version"] != best["vllm_version"])
            ]
            runner = slos.choose(others, goal.slo, goal.objective) if not others.empty else None
            if runner is not None and best["score"]:
                gap = 100.0 * (best["score"] - runner["score"]) / best["score"]
        ratio = best["score"] / recipe["score"] if best and recipe and recipe["score"] else None
        out.append({"goal": goal, "best": best, "recipe": recipe, "runner_up": runner,
                    "gap_pct": gap, "ratio": ratio})  # fmt: skip
    return out


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


def _cells(row: dict[str, Any], role: str, ratio: float | None) -> str:
    return (
        f" {role} | {_label(row)} | {row['vllm_version']} | {int(row['concurrency'])} | "
        f"{_fmt(row['output_throughput_per_gpu'])} | {_fmt(row['tokens_per_s_per_user'])} | "
        f"{_fmt(row.get('p99_ttft_ms'))} | {_fmt(row.get('p50_tpot_ms'), 1)} | "
        f"{'' if ratio is None else f'{ratio:.2f}x'} | `{row['file']}` |"
    )


def recommendation_markdown(
    target: str, results_dir: Path | None = None, registry: Any = None
) -> str | None:
    """The "measured best" paragraph and table for ``target``'s notebook (markdown, no leading
    ``# ``), or None when no committed tuning result applies to it.

    Args:
        target: a registry target (``"h200"``).
        results_dir: the results root (default ``docs/results``; its ``*/tune/*.json`` are read).
        registry: a loaded registry (default ``cookbook/recipe.yaml``): the offered releases.
    """
    from helpers.config.load import as_registry

    rows = tune_rows(target, results_dir)
    if rows is None:
        return None
    reg = as_registry(registry)
    offered = [str(v) for v in reg.model.offered_vllm_versions]
    gpus = sorted({str(g) for g in rows["measured_on"] if g})
    measured_here = bool((rows["target"] == target).any())
    lines = [
        f"**Measured best per workload** (rendered from the committed tuning results, "
        f"`docs/results/*/tune/`, by `tools/tune_pages.py`; {', '.join(gpus)}, weightless "
        f"architecture, chat endpoint, one run per point: a gap under {NOISE_PCT:.0f} % is noise; "
        f"vLLM {' and '.join(offered)}, the releases this notebook installs with `vllm_version`)"
        + ("" if measured_here else f". Measured on {' and '.join(sorted(set(rows['target'])))}, not on this "
           f"{reg.targets[target].gpu.name}: the same Hopper kernels, so expect the ranking to hold, not "
           "the figures (BF16's 59 GiB of weights leave an 80 GB card little KV cache: see the memory plan)")
        + ". The configuration is the registry's command with the changes the data file records"
          " (`moe_backend`, `variant`, `vllm_version` are this notebook's parameters):",
        "",
        "| workload | row | configuration | vLLM | c | output tok/s/GPU | tok/s per user | p99 TTFT ms | "
        "p50 TPOT ms | vs recipe | data |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]  # fmt: skip
    notes = []
    for rec in recommendations(rows, offered):
        goal, best, recipe = rec["goal"], rec["best"], rec["recipe"]
        head = f"| {goal.name}: {goal.what} |"
        if best is None:
            lines.append(head + " not measured yet | | | | | | | | | `tools/device/tune_h200.py` |")
            continue
        lines.append(head + _cells(best, "**measured best**", rec["ratio"]))
        if recipe is not None:
            role = (
                "recipe's command (reference)"
                if measured_here
                else f"{recipe['target']} recipe's command (reference)"
            )
            lines.append("| |" + _cells(recipe, role, 1.0))
        runner = rec["runner_up"]
        if runner is not None and rec["gap_pct"] is not None and rec["gap_pct"] < NOISE_PCT:
            notes.append(
                f"{goal.name}: {_label(best)} on vLLM {best['vllm_version']} and {_label(runner)} on "
                f"vLLM {runner['vllm_version']} are {rec['gap_pct']:.1f} % apart, within one run's noise"
            )
        how = _parameters(best.get("spec") or {})
        if how:
            notes.append(f"{goal.name}: the measured best is this notebook with {how}")
    not_ranked = sorted({str(v) for v in rows["vllm_version"]} - set(offered))
    if not_ranked:
        notes.append(
            f"points measured on vLLM {', '.join(not_ranked)} (not offered by the registry) are in the "
            "data but not ranked"
        )
    return "\n".join(lines + [""] + [f"- {n}." for n in notes])
