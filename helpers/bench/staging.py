"""A sweep's private stage inside ``out_dir``, published in one step under a lock
(:func:`publish`), so a folder never mixes two runs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from helpers.bench.point import _safe

#: The lock file :func:`publish` holds in a results folder while it moves points in (in the
#: folder it guards, not the system's temp folder, where one empty file per folder piled up).
PUBLISH_LOCK = ".publish.lock"


def publish(
    stage: Path, folder: Path, label: str, paths: list[Path], keep_other_points: bool = False
) -> list[Path]:
    """Move this run's points from ``stage`` into ``folder``, replacing the label's earlier
    points there (JSON, sidecar, log, an agent workload's JSONL; with ``keep_other_points``
    only those of the concurrencies this run measured) in one step under a lock; returns the
    new paths."""
    from filelock import FileLock

    prefix = re.compile(rf"^{re.escape(_safe(label))}-c\d+\.(json|json\.annotations|log|jsonl)$")
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / PUBLISH_LOCK)):
        measured = {src.name for src in stage.iterdir() if src.is_file()}
        for old in folder.iterdir():
            if old.is_file() and prefix.match(old.name):
                if not keep_other_points or old.name in measured:
                    old.unlink()
            elif old.name.removesuffix(".failed.log") + ".json" in measured:  # fixed since
                old.unlink()  # an earlier run's failure at a concurrency this run measured
        for src in stage.iterdir():
            if src.is_file():
                os.replace(src, folder / src.name)
    return [folder / p.name for p in paths]


def keep_failed_log(e: BaseException, stage: Path, folder: Path) -> None:
    """The failed point's console log (the error's ``log_path``, in the private stage) moves
    to ``folder`` as ``<point>.failed.log``, and the error names it there."""
    log = getattr(e, "log_path", None)
    if log is None or not Path(log).is_file() or Path(log).parent != stage:
        return
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / (Path(log).stem + ".failed.log")
    os.replace(log, kept)
    e.log_path = kept  # type: ignore[attr-defined]
    e.args = tuple(str(a).replace(str(log), str(kept)) for a in e.args)
