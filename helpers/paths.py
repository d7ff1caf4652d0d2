"""Where the cookbook reads its registry and writes what it generates.

Everything generated (stand-in models, server logs, executed notebooks, benchmark JSON,
plots) lands under one ignored folder, ``out/`` at the repository root, or the folder
named by the ``COOKBOOK_OUT`` environment variable.

Two layouts: a checkout (``helpers/`` next to ``cookbook/``: the registry is read from the
checkout) and a pip-installed package (``pip install git+https://github.com/...``, as the
workshop notebook does on Colab), where ``cookbook/`` ships inside the package as
``helpers/cookbook`` (pyproject ``package-dir``) and outputs default to ``./out`` in the
current folder, never into site-packages.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
#: True in a checkout (or an editable install); False when installed as a package.
IN_CHECKOUT = (REPO_ROOT / "cookbook" / "recipe.yaml").is_file()
COOKBOOK_DIR = REPO_ROOT / "cookbook" if IN_CHECKOUT else Path(__file__).resolve().parent / "cookbook"


def out_dir(*parts: str) -> Path:
    """Return ``$COOKBOOK_OUT/<parts>`` (default ``<repo>/out/<parts>``; ``./out/<parts>`` when
    installed as a package), created if missing.

    Args:
        *parts: sub-folder names, e.g. ``out_dir("bench", "quickstart")``.
    """
    default = REPO_ROOT / "out" if IN_CHECKOUT else Path.cwd() / "out"
    base = Path(os.environ.get("COOKBOOK_OUT") or default)
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
