"""Where the cookbook reads its registry and writes what it generates.

Everything generated (stand-in models, server logs, executed notebooks, benchmark JSON,
plots) lands under one ignored folder, ``out/`` at the repository root, or the folder
named by the ``COOKBOOK_OUT`` environment variable.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
COOKBOOK_DIR = REPO_ROOT / "cookbook"


def out_dir(*parts: str) -> Path:
    """Return ``$COOKBOOK_OUT/<parts>`` (default ``<repo>/out/<parts>``), created if missing.

    Args:
        *parts: sub-folder names, e.g. ``out_dir("bench", "quickstart")``.
    """
    base = Path(os.environ.get("COOKBOOK_OUT") or REPO_ROOT / "out")
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
