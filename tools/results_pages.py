"""Committed measurements a notebook quotes: the "measured reference" paragraph of a target.

A notebook quotes a measurement only when it was taken on its own target:
:func:`measured_reference` renders it from the summary JSON files under
``docs/results/<target>/`` and the target notebook's own GPU sweeps (:func:`notebook_runs`:
the point JSONs under ``docs/results/<target>/vllm-<release>/<variant>-<moe kernel>/``).
Targets without such files get None (no paragraph). Used when the notebooks are built.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.results import load_results
from helpers.paths import REPO_ROOT

RESULTS_DIR = REPO_ROOT / "docs" / "results"


def _fmt(value: float) -> str:
    return f"{value:,.0f}"


def summaries(target: str, results_dir: Path | None = None) -> list[dict]:
    """The committed ``summary-<variant>.json`` files of ``target`` (the main profile only:
    ``summary-<variant>-<profile>.json`` files are left out), sorted by variant."""
    folder = Path(results_dir or RESULTS_DIR) / target
    out = []
    for path in sorted(folder.glob("summary-*.json")):
        if path.stem.count("-") != 1:
            continue
        data = json.loads(path.read_text())
        data["_file"] = f"docs/results/{target}/{path.name}"
        out.append(data)
    return out


#: Where an executed target notebook's sweep is committed: ``vllm-<release>/<variant>-<moe kernel>``
#: under ``docs/results/<target>/`` (e.g. ``vllm-0.32.0/nvfp4-humming``).
_NOTEBOOK_RUN = re.compile(r"^vllm-(\d+\.\d+\.\d+)/(nvfp4|bf16)-([a-z_]+)$")


def _first(points: pd.DataFrame, column: str) -> Any:
    """The first non-null value of ``column`` (None when the column is absent or empty)."""
    values = points[column].dropna() if column in points else ()
    return values.iloc[0] if len(values) else None


def notebook_runs(target: str, results_dir: Path | None = None) -> list[dict]:
    """The target notebook's own sweeps executed on the GPU and committed under
    ``docs/results/<target>/vllm-<release>/<variant>-<moe kernel>/`` (one
    ``vllm bench serve --save-result`` JSON per concurrency).

    Returns one dict per run, the default vLLM release first (then newest first), variant
    and kernel in name order: ``release``, ``variant``, ``moe_backend``, ``folder`` (repo
    path), ``date`` (``YYYY-MM-DD``), ``input_len`` / ``output_len`` (tokens) and ``points``
    (a DataFrame from :func:`load_results`: ``concurrency``, ``output_throughput`` tok/s,
    ``median_ttft_ms``, ``mean_tpot_ms``, ...). An empty list when there are none.
    """
    from helpers.config.load import shared_registry

    root = Path(results_dir or RESULTS_DIR) / target
    default = str(shared_registry().model.default_vllm_version)
    runs = []
    for folder in sorted(root.glob("vllm-*/*/")):
        m = _NOTEBOOK_RUN.match(folder.relative_to(root).as_posix())
        files = sorted(folder.glob("*-c*.json"))
        if not m or not files:
            continue
        points = load_results(files)
        date = json.loads(files[0].read_text()).get("date", "")
        runs.append(
            {
                "release": m.group(1),
                "variant": m.group(2),
                "moe_backend": m.group(3),
                "folder": f"docs/results/{target}/{folder.relative_to(root).as_posix()}",
                "date": f"{date[:4]}-{date[4:6]}-{date[6:8]}" if len(date) >= 8 else "",
                "input_len": _first(points, "input_len"),
                "output_len": _first(points, "output_len"),
                "points": points.sort_values("concurrency").reset_index(drop=True),
            }
        )
    runs.sort(
        key=lambda r: (
            r["release"] != default,
            [-int(x) for x in r["release"].split(".")],  # newest release first
            r["variant"],
            r["moe_backend"],
        )
    )
    return runs


def _notebook_lines(target: str, results_dir: Path | None) -> list[str]:
    """The measured-reference lines for :func:`notebook_runs` (empty when there are none)."""
    runs = notebook_runs(target, results_dir)
    if not runs:
        return []
    first = runs[0]
    cs = " / ".join(str(c) for c in first["points"]["concurrency"])
    lines = [
        f"- This notebook itself, executed by papermill on the GPU ({first['date']}; weightless, "
        f"the recipe's command with the kernel named; {first['input_len']:.0f} in / "
        f"{first['output_len']:.0f} out, chat endpoint, one run per point), output tok/s at "
        f"concurrency {cs}:"
    ]
    for r in runs:
        p = r["points"]
        tok = " / ".join(_fmt(v) for v in p["output_throughput"])
        ttft = " / ".join(_fmt(v) for v in p["median_ttft_ms"])
        lines.append(
            f"  - vLLM {r['release']}, {r['variant'].upper()}, {r['moe_backend']} MoE: {tok} "
            f"(median TTFT {ttft} ms); source `{r['folder']}/`."
        )
    return lines


def measured_reference(target: str, results_dir: Path | None = None) -> str | None:
    """The "measured reference" paragraph for ``target`` (markdown lines without the
    leading ``# ``), or None when nothing was measured on that target.

    Each variant gives its vLLM version, endpoint, lengths, output tokens/s per
    concurrency, mean TPOT range, and the flags its run adapted (flag, value, what it
    became, why), all read from the summary JSON.
    """
    runs = summaries(target, results_dir)
    notebook = _notebook_lines(target, results_dir)
    if not runs and not notebook:
        return None
    head = f"**Measured reference** ([docs/results/{target}.md](../docs/results/{target}.md))"
    if runs:
        gpu = runs[0]["versions"].get("gpu", target).split(",")[0]
        head += f", the weightless architecture on {gpu}"
    lines = [head + ":"]
    for run in runs:
        table = sorted(run.get("table") or [], key=lambda r: r["concurrency"])
        if not table:
            continue
        v = run["versions"]
        cs = " / ".join(str(r["concurrency"]) for r in table)
        tok = " / ".join(_fmt(r["output_tok_s"]) for r in table)
        tpot = [r["mean_tpot_ms"] for r in table]
        lines.append(
            f"- {run['variant'].upper()} on vLLM {v.get('vllm')} (torch {v.get('torch')}, "
            f"{v.get('date_utc', '')[:10]}), 1024 in / 256 out, {run.get('endpoint') or 'chat'} endpoint: "
            f"{tok} output tok/s at concurrency {cs} (mean TPOT {min(tpot):.1f} to {max(tpot):.0f} ms); "
            f"source `{run['_file']}`."
        )
        for a in run.get("adaptations") or []:
            now = "dropped" if a.get("now") is None else f"replaced by `{a['now']}`"
            why = str(a.get("error", "")).split(" ... ")[0].split(". The target")[0]
            lines.append(
                f"  - adapted: `{a['flag']} {a['value']}` {now} ({a.get('stage')}: {why[:160]})"
            )
    return "\n".join(lines + notebook)
