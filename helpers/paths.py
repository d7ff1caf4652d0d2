"""Where the cookbook reads its registry and writes what it generates.

Everything generated (stand-in models, server logs, executed notebooks, benchmark JSON,
plots) lands under one ignored folder, ``out/`` at the repository root, or the folder
named by the ``COOKBOOK_OUT`` environment variable.
"""

from __future__ import annotations

import os
from pathlib import Path

from helpers.errors import CookbookError

REPO_ROOT = Path(__file__).resolve().parent.parent
COOKBOOK_DIR = REPO_ROOT / "cookbook"


def out_dir(*parts: str) -> Path:
    """Return ``$COOKBOOK_OUT/<parts>`` (default ``<repo>/out/<parts>``), created if missing.

    Args:
        *parts: sub-folder names, e.g. ``out_dir("bench", "quickstart")``.

    Raises:
        CookbookError: the folder cannot be created or written (a read-only or wrong
            ``COOKBOOK_OUT``); one sentence naming the folder and the fix.
    """
    env = os.environ.get("COOKBOOK_OUT")
    base = Path(env).expanduser() if env else REPO_ROOT / "out"
    path = base.joinpath(*parts)
    problem = None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = exc.strerror or str(exc)
    else:
        if not os.access(path, os.W_OK) or os.statvfs(path).f_flag & os.ST_RDONLY:
            problem = "Read-only file system" if os.statvfs(path).f_flag & os.ST_RDONLY else "Permission denied"
    if problem:
        how = (
            f"COOKBOOK_OUT={env} names it: set COOKBOOK_OUT to a writable folder"
            if env
            else "set COOKBOOK_OUT to a writable folder"
        )
        raise CookbookError(
            f"The cookbook cannot write its output folder {path} ({problem}): {how} "
            "(e.g. `export COOKBOOK_OUT=$HOME/cookbook-out`, or os.environ['COOKBOOK_OUT'] in a notebook)."
        )
    return path
