"""Measured results committed under ``docs/results/``: what a notebook may quote.

A notebook quotes a measurement only when it was taken on that notebook's own target.
:func:`measured_reference` renders the "measured reference" paragraph of a target from the
committed summary JSON files that ``docs/results/<target>/run_<target>.py`` wrote
(``docs/results/h200/summary-<variant>.json``), listing every flag the run adapted away
from the recipe and why. Targets without such files get None (no paragraph).
"""

from __future__ import annotations

import json
from pathlib import Path

from .paths import REPO_ROOT

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


def measured_reference(target: str, results_dir: Path | None = None) -> str | None:
    """The "measured reference" paragraph for ``target`` (markdown lines without the
    leading ``# ``), or None when nothing was measured on that target.

    Each variant gives its vLLM version, endpoint, lengths, output tokens/s per
    concurrency, mean TPOT range, and the flags its run adapted (flag, value, what it
    became, why), all read from the summary JSON.
    """
    runs = summaries(target, results_dir)
    if not runs:
        return None
    lines = [f"**Measured reference** ([docs/results/{target}.md](../docs/results/{target}.md)), "
             f"the weightless architecture on {runs[0]['versions'].get('gpu', target).split(',')[0]}:"]
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
            lines.append(f"  - adapted: `{a['flag']} {a['value']}` {now} ({a.get('stage')}: {why[:160]})")
    return "\n".join(lines)
