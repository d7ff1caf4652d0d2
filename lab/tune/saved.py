"""The saved form of a tuning run, ``tune.json`` (:data:`SCHEMA`), also the committed results
under ``docs/results/<target>/tune/`` that :func:`load_tune_rows` reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.errors import BenchError
from lab.tune.points import PERCENTILE_COLUMNS, _read_json

#: ``schema`` of ``tune.json`` and of the committed files under ``docs/results/<target>/tune/``.
SCHEMA = "cookbook-tune/1"
#: The name of the candidate that serves the target's own command.
RECIPE = "recipe"


def _where(df: pd.DataFrame, **eq: Any) -> pd.DataFrame:
    """The rows of ``df`` whose columns ``eq`` names hold its values (``df`` itself when empty)."""
    return df if df.empty else df[(df[list(eq)] == pd.Series(eq)).all(axis=1)]


def document(result: Any, applies_to: Sequence[str] = ()) -> dict[str, Any]:
    """The :data:`SCHEMA` document: ``measured_on``, ``applies_to`` (more targets whose
    notebooks may quote it, e.g. an H100 for H200 results: same kernels), ``slo``,
    ``workloads``, and per candidate its command, what it changes against the recipe,
    status, failures and points (the row columns of :data:`ROW_COLUMNS`)."""
    from helpers.machine.gpus import detect_gpus

    gpus = [] if result.stand_in else detect_gpus().gpus
    gpu = "CPU stand-in" if result.stand_in else gpus[0].name if gpus else None
    cands = []
    for row in result.candidates.to_dict("records"):
        name = row["candidate"]
        cfg = result.configs[name]
        pts, lim = _where(result.runs, candidate=name), _where(result.limits, candidate=name)
        cands.append({
            "name": name, "recipe": name == RECIPE, "status": row["status"],
            "variant": cfg.variant, "speculative": cfg.speculative,
            "moe_backend": cfg.args.get("--moe-backend"), "vllm_version": cfg.vllm_version,
            "command": cfg.shell_command(), "changes": row["changes"], "note": row["note"],
            "acceptance": row.get("acceptance"), "spec": result.specs.get(name, {}),
            "failures": result.failures.get(name, []),
            "points": [{**_saved_row(p), "repeat": int(p.get("repeat") or 0)}
                       for p in pts.to_dict("records")],
            "slo_limits": [_saved_row(r, tuple(r)) for r in lim.to_dict("records")],
        })  # fmt: skip
    return {
        "schema": SCHEMA,
        "measured_on": {
            "target": result.target.target,
            "gpu": gpu or result.target.gpu.get("name"),
            "stand_in": result.stand_in,
        },
        "applies_to": list(applies_to),
        "slo": result.slo.model_dump(exclude_none=True),
        "workloads": [
            {
                **{k: getattr(w, k) for k in ("name", "input_len", "output_len", "prefix_len")},
                "concurrencies": list(w.concurrencies),
            }
            for w in result.workloads
        ],  # fmt: skip
        "candidates": cands,
    }


#: The per-point fields the saved form keeps (units as in :func:`load_results`).
ROW_COLUMNS = (
    "workload", "concurrency", "input_len", "output_len", "num_prompts", "gpu_count",
    "completed", "failed", "duration_s", "request_throughput", "request_goodput",
    "output_throughput", "output_throughput_per_gpu", "tokens_per_s_per_user",
    "e2e_tokens_per_s_per_user", *PERCENTILE_COLUMNS, "vllm_version", "endpoint_type", "date",
    "spec_decode_acceptance_length", "prefix_cache_hit_rate", "source",
)  # fmt: skip


def _saved_row(point: Mapping[str, Any], columns: Sequence[str] = ROW_COLUMNS) -> dict[str, Any]:
    row = {k: point.get(k) for k in columns if k != "source"}
    if "source" in columns:
        row["source"] = point.get("source") or point.get("path")
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}


def load_tune_rows(paths: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """The points of saved tuning results (``tune.json`` files or a folder of them) as one flat
    DataFrame: :data:`ROW_COLUMNS` plus the candidate's fields and ``measured_on`` / ``file``.

    Raises:
        BenchError: a file that is not JSON or not of :data:`SCHEMA`; no file found.
    """
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    files: list[Path] = []
    for item in items:
        p = Path(item)
        files += sorted(p.glob("*.json")) if p.is_dir() else [p]
    rows = []
    for f in files:
        doc = _read_json(f)
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise BenchError(
                f"{f} is not a tuning result (schema {SCHEMA!r}); remove it or regenerate it."
            )
        where = doc.get("measured_on") or {}
        for cand in doc.get("candidates") or []:
            for point in cand.get("points") or []:
                rows.append({
                    **point, "candidate": cand["name"], "recipe": bool(cand.get("recipe")),
                    "variant": cand.get("variant"), "moe_backend": cand.get("moe_backend"),
                    "vllm_version": point.get("vllm_version") or cand.get("vllm_version"),
                    "command": cand.get("command"), "changes": cand.get("changes", ""),
                    "spec": cand.get("spec") or {},
                    "note": cand.get("note", ""), "acceptance": cand.get("acceptance"),
                    "measured_on": where.get("gpu"),
                    "stand_in": bool(where.get("stand_in")),
                    "target": where.get("target"), "applies_to": list(doc.get("applies_to") or []),
                    "file": f.name,
                })  # fmt: skip
    if not files:
        raise BenchError(f"No tuning result under {paths}: run lab.tune.tune.tune(...) first.")
    return pd.DataFrame(rows)
