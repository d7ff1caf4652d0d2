"""Copies of the committed H200 tuning results (``docs/results/h200/tune/``) for tests that
change a point and read what the notebooks' table (``tools/tune_pages.py``) makes of it."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers.paths import REPO_ROOT


def copy_tune_results(tmp_path: Path, sessions: set[str] | None = None) -> Path:
    """``tmp_path/results``, a results root holding a copy of ``docs/results/h200/tune/``;
    with ``sessions`` (folder names such as ``"grid-0.32.0"``), of those tuning folders alone
    (the single-run seed files are kept)."""
    root = tmp_path / "results"
    shutil.copytree(REPO_ROOT / "docs" / "results" / "h200" / "tune", root / "h200" / "tune")
    if sessions is not None:
        for run in (root / "h200" / "tune").glob("*/tune.json"):
            if run.parent.name not in sessions:
                shutil.rmtree(run.parent)
    return root


def seeds_only(tmp_path: Path) -> Path:
    """:func:`copy_tune_results` without the repeated tuning runs (``*/tune.json`` folders: the
    H200 grid and the c1 candidates), which, once they have a workload's points, alone decide
    it: the single-run seed files are left."""
    root = copy_tune_results(tmp_path)
    for run in (root / "h200" / "tune").glob("*/tune.json"):
        shutil.rmtree(run.parent)
    return root
