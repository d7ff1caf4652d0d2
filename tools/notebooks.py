"""Generate the notebooks from one template, lint them, and execute them with papermill.

Command line (from the repo root)::

    python -m tools.notebooks build            # rewrite notebooks/*.ipynb
    python -m tools.notebooks check            # exit 1 if any notebook is stale
    python -m tools.notebooks lint             # exit 1 on background shell cells / unbounded waits
    python -m tools.notebooks run NOTEBOOK [-p NAME VALUE ...]

Building is :mod:`tools.notebook_build`, running :mod:`tools.notebook_run` (``run`` resolves
NOTEBOOK from the current folder and writes the executed copy to ``out/notebooks/``); this
module holds the static checks (:func:`lint_cells`, :func:`lint_notebook`) and :func:`main`.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

from helpers.errors import CookbookError
from helpers.paths import REPO_ROOT
from tools.notebook_build import (
    NOTEBOOK_DIR,
    build,
)
from tools.notebook_run import NotebookInterrupted, run_notebook

# --------------------------------------------------------------------------------------
# Static checks: no background shell command, no wait without a deadline
# --------------------------------------------------------------------------------------

_SHELL_CELL = re.compile(r"^\s*%%(bash|sh|script\b.*|system)\b", re.M)
_DEADLINE_WORDS = re.compile(r"deadline|timeout|time_limit|until", re.I)
_CLOCKS = {"monotonic", "time", "perf_counter", "monotonic_ns", "time_ns"}


def _python_of(cell_source: str) -> str | None:
    """The cell as plain Python (IPython magics translated), or None when it is not Python."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(cell_source)
    except Exception:  # IPython missing, or a cell it cannot translate
        return None


def _bounded(loop: ast.While) -> bool:
    """A ``while`` loop is bounded when its test is not constant-true, or its body reads a clock
    or a deadline / timeout name (and so can break on time)."""
    for node in ast.walk(loop):
        if isinstance(node, ast.Attribute) and node.attr in _CLOCKS:
            return True
        if isinstance(node, ast.Name) and _DEADLINE_WORDS.search(node.id):
            return True
        if isinstance(node, ast.Attribute) and _DEADLINE_WORDS.search(node.attr):
            return True
    return False


def _waits(loop: ast.While) -> bool:
    """The loop waits: its test is constant-true, or its body sleeps."""
    if isinstance(loop.test, ast.Constant) and bool(loop.test.value):
        return True
    return any(
        isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Attribute) and n.func.attr == "sleep")
            or (isinstance(n.func, ast.Name) and n.func.id == "sleep")
        )
        for n in ast.walk(loop)
    )


#: The most lines a notebook code cell may have: cells stay thin, the logic lives in helpers.
MAX_CELL_LINES = 25


def lint_cells(cells: list[str]) -> list[str]:
    """Problems in notebook code cells (sources), one sentence each naming the fix:

    * a cell of more than :data:`MAX_CELL_LINES` lines: the logic belongs in ``helpers``;
    * a ``!cmd &`` line, or a ``%%bash`` / ``%%sh`` / ``%%script`` / ``%%system`` cell with a
      line ending in ``&``: a background process nothing will stop (ipykernel refuses ``!cmd &``
      outside Colab: "Background processes not supported"); start servers with
      ``helpers.server.launch.launch_server`` instead;
    * a shell ``while`` loop without ``timeout`` in such a cell;
    * a Python ``while`` loop that waits (``while True`` or a ``sleep`` in it) and reads no clock
      and no deadline / timeout name: a wait that can hang the notebook forever.
    """
    problems = []
    for i, src in enumerate(cells):
        where = f"code cell {i}"
        lines = len(src.splitlines())
        if lines > MAX_CELL_LINES:
            problems.append(
                f"{where}: {lines} lines (at most {MAX_CELL_LINES}): move the "
                "logic into helpers and call it from the cell."
            )
        if _SHELL_CELL.search(src):
            body = src.split("\n", 1)[1] if "\n" in src else ""
            if re.search(r"&\s*(#.*)?$", body, re.M) and not re.search(r"&&\s*(#.*)?$", body, re.M):
                problems.append(
                    f"{where}: a shell cell starts a background process (`&`): launch it with helpers.server.vllm_server instead."
                )
            if re.search(r"^\s*(while|until)\b", body, re.M) and "timeout" not in body:
                problems.append(
                    f"{where}: a shell wait loop without `timeout`: bound it (timeout 300 ...)."
                )
            continue
        if re.search(r"^\s*!.*(?<!&)&\s*(#.*)?$", src, re.M):
            problems.append(
                f"{where}: `!cmd &` starts a background process: launch it with helpers.server.vllm_server instead."
            )
        code = _python_of(src)
        try:
            tree = ast.parse(code) if code is not None else None
        except SyntaxError:
            tree = None
        if tree is None:
            if re.search(r"^\s*while\s+(True|1)\s*:", src, re.M):
                problems.append(
                    f"{where}: `while True` without a deadline: bound the wait with time.monotonic()."
                )
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.While) and _waits(node) and not _bounded(node):
                problems.append(
                    f"{where} line {node.lineno}: a wait loop without a deadline: compare time.monotonic() "
                    "with a deadline in the loop (or use a helper that has a timeout)."
                )
    return problems


def lint_notebook(path: str | Path) -> list[str]:
    """:func:`lint_cells` over one ``.ipynb`` file's code cells."""
    nb = json.loads(Path(path).read_text())
    cells = [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in nb["cells"]
        if c["cell_type"] == "code"
    ]
    return [f"{Path(path).name}: {p}" for p in lint_cells(cells)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.notebooks", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="rewrite notebooks/*.ipynb from the template")
    sub.add_parser("check", help="exit 1 when a committed notebook differs from the template")
    sub.add_parser(
        "lint",
        help="exit 1 when a notebook backgrounds a shell command or waits without a deadline",
    )
    run = sub.add_parser("run", help="execute a notebook with papermill into out/notebooks/")
    run.add_argument("notebook")
    run.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help='set a parameter; VALUE is read as JSON (3, 1.5, true, [1, 2], "text"), '
        "True / False / None as in Python, anything else as a string",
    )
    args = parser.parse_args(argv)
    if args.cmd == "build":
        for p in build():
            print("wrote", p.relative_to(REPO_ROOT))
        return 0
    if args.cmd == "lint":
        found = [p for nb in sorted(NOTEBOOK_DIR.glob("*.ipynb")) for p in lint_notebook(nb)]
        print("\n".join(found) or "no problems")
        return 1 if found else 0
    if args.cmd == "check":
        stale = build(check=True)
        for p in stale:
            print(f"stale: {p.relative_to(REPO_ROOT)} (run `python -m tools.notebooks build`)")
        return 1 if stale else 0
    try:
        run_notebook(args.notebook, {k: _parse_value(v) for k, v in args.parameter})
    except NotebookInterrupted as exc:
        print(str(exc), file=sys.stderr)  # one line: Ctrl-C is an answer, not a crash
        return 130
    except KeyboardInterrupt:
        print(f"interrupted: {args.notebook} stopped at once (Ctrl-C twice)", file=sys.stderr)
        return 130
    except CookbookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _parse_value(text: str) -> Any:
    """A ``-p NAME VALUE`` value: JSON (``3``, ``1.5``, ``true``, ``null``, ``[1, 2]``,
    ``"text"``), Python's ``True`` / ``False`` / ``None``, otherwise the string itself."""
    try:
        return json.loads(text)
    except ValueError:
        return {"True": True, "False": False, "None": None}.get(text, text)


if __name__ == "__main__":
    sys.exit(main())
