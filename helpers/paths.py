"""Where the cookbook reads its registry and writes what it generates.

Everything generated lands under ``out/`` at the repository root, or ``$COOKBOOK_OUT``. In a
pip-installed package (the workshop on Colab) ``cookbook/`` ships as ``helpers/cookbook``
(pyproject ``package-dir``) and outputs default to ``./out``, never into site-packages.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from helpers.errors import CookbookError

REPO_ROOT = Path(__file__).resolve().parent.parent
#: True in a checkout (or an editable install); False when installed as a package.
IN_CHECKOUT = (REPO_ROOT / "cookbook" / "recipe.yaml").is_file()
COOKBOOK_DIR = (
    REPO_ROOT / "cookbook" if IN_CHECKOUT else Path(__file__).resolve().parent / "cookbook"
)


def out_dir(*parts: str) -> Path:
    """Return ``$COOKBOOK_OUT/<parts>`` (default ``<repo>/out/<parts>``; ``./out/<parts>`` when
    installed as a package), created if missing. A relative ``COOKBOOK_OUT`` is resolved
    against the current folder on first use and written back to ``os.environ`` as an absolute
    path, so this process, a later ``chdir`` and every child process share one folder.

    Args:
        *parts: sub-folder names, e.g. ``out_dir("bench", "quickstart")``.

    Raises:
        CookbookError: the folder cannot be created or written (a read-only or wrong
            ``COOKBOOK_OUT``); one sentence naming the folder and the fix.
    """
    env = os.environ.get("COOKBOOK_OUT")
    if env and not Path(env).expanduser().is_absolute():
        env = str((Path.cwd() / Path(env).expanduser()).resolve())
        os.environ["COOKBOOK_OUT"] = env
    default = REPO_ROOT / "out" if IN_CHECKOUT else Path.cwd() / "out"
    base = Path(env).expanduser() if env else default
    path = base.joinpath(*parts)
    problem = None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = exc.strerror or str(exc)
    else:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            problem = "Read-only file system"
        elif not os.access(path, os.W_OK):
            problem = "Permission denied"
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


def slug(text: str, default: str = "out") -> str:
    """``text`` as a file-name part: runs of anything but letters, digits, ``_``, ``.`` and
    ``-`` become one ``-``; at most 60 characters, a longer one cut to 51 and ended with 8 hex
    digits of its SHA-1, so two texts that differ only past the cut get two names (two plot
    titles that differ in their last words wrote one file); ``default`` when nothing is left."""
    import hashlib

    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
    if len(name) > 60:
        name = name[:51].strip("-") + "-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return name or default
