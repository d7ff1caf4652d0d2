"""Generate the notebooks from one template, and execute them with papermill.

Every notebook in ``notebooks/`` comes from ``cookbook/notebook_template.py`` (a jupytext
"percent" script with Jinja placeholders) filled with one registry target's data, so the
per-target notebooks differ only in data. ``check`` fails when a committed notebook differs
from what the template produces.

Command line (from the repo root)::

    python -m helpers.notebooks build            # rewrite notebooks/*.ipynb
    python -m helpers.notebooks check            # exit 1 if any notebook is stale
    python -m helpers.notebooks run NOTEBOOK [-p NAME VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import CookbookError
from .paths import COOKBOOK_DIR, REPO_ROOT, out_dir

TEMPLATE = COOKBOOK_DIR / "notebook_template.py"
TOPICS_DIR = COOKBOOK_DIR / "topics"  # topic notebooks: plain jupytext scripts, one per notebook
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
QUICKSTART = "quickstart_cpu_standin"


@dataclass(frozen=True)
class NotebookSpec:
    """One generated notebook: file stem, target, stand-in default and prose."""

    stem: str
    target: str
    stand_in: bool
    title: str
    intro: str


def notebook_specs(registry: dict | None = None) -> list[NotebookSpec]:
    """The quickstart plus one notebook per GPU target in the registry (file order)."""
    from . import recipes

    reg = registry or recipes.load_registry()
    specs = [
        NotebookSpec(
            stem=QUICKSTART,
            target="h100",
            stand_in=True,
            title="Quickstart: Nemotron 3.5 Lightning on vLLM, end to end, on a CPU stand-in",
            intro=(
                "The whole story on any laptop or CI box, no GPU: check the machine, pick the "
                "vLLM build, show and validate the real 1x H100 serve command, build a tiny "
                "stand-in model, launch a real vLLM server, talk to it (reasoning on/off, a "
                "reasoning budget, streaming, tool calls), benchmark it, plot, and stop it. "
                "On an H100, open `h100.ipynb` instead (or set `stand_in = False`)."
            ),
        )
    ]
    for name, t in reg["targets"].items():
        if t.get("stand_in"):
            continue
        specs.append(
            NotebookSpec(
                stem=name.replace("-", "_"),
                target=name,
                stand_in=False,
                title=f"Nemotron 3.5 Lightning on {t['label']} with vLLM",
                intro=(
                    f"Deploy NVIDIA Nemotron 3.5 Lightning on {t['label']}: check the machine, "
                    "install the pinned vLLM, download the checkpoint, launch, talk to it, "
                    "benchmark and plot. Set `stand_in = True` to rehearse on a CPU first."
                ),
            )
        )
    return specs


def render(spec: NotebookSpec, registry: dict | None = None):
    """Render one notebook (an ``nbformat.NotebookNode`` without outputs) from the template.

    Raises:
        CookbookError: the template fails to render or parse.
    """
    import jinja2
    import jupytext

    from . import recipes

    reg = registry or recipes.load_registry()
    t = dict(reg["targets"][spec.target])
    t.setdefault("variants", [v for v in reg["variants"] if v != "standin"])
    t.setdefault("speculative_modes", list(reg["speculative"]))
    t.setdefault("notes", [])
    t.setdefault("docker_image", None)
    t["seed_vllm_version"] = str(t.get("vllm_version") or reg["model"]["seed_vllm_version"])
    t["vllm_version"] = recipes.target_vllm_version(spec.target, reg)
    from .results import measured_reference

    # a measurement is quoted only in the notebook of the target it was taken on
    measured = None if spec.stand_in else measured_reference(spec.target)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    try:
        text = env.from_string(TEMPLATE.read_text()).render(
            target=spec.target, t=t, stand_in=spec.stand_in, title=spec.title, intro=spec.intro,
            measured=measured,
        )
    except jinja2.TemplateError as exc:
        raise CookbookError(f"{TEMPLATE} does not render for {spec.target}: {exc}; fix the template.") from exc
    nb = jupytext.reads(text, fmt="py:percent")
    return _finalize(nb, spec.stem, "cookbook/notebook_template.py", spec.target)


def _finalize(nb, stem: str, generated_from: str, target: str | None):
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "cookbook": {"generated_from": generated_from, "target": target},
    }
    for i, cell in enumerate(nb.cells):
        cell.id = f"{stem[:40]}-{i:02d}"
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        tags = cell.metadata.get("tags")
        cell.metadata = {"tags": tags} if tags else {}
    return nb


def render_topic(path: Path):
    """Render a topic notebook from its jupytext script in ``cookbook/topics/``."""
    import jupytext

    nb = jupytext.reads(path.read_text(), fmt="py:percent")
    return _finalize(nb, path.stem, f"cookbook/topics/{path.name}", None)


def _all_rendered():
    for spec in notebook_specs():
        yield spec.stem, render(spec)
    for path in sorted(TOPICS_DIR.glob("*.py")):
        yield path.stem, render_topic(path)


def _dumps(nb) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def build(check: bool = False) -> list[Path]:
    """Write (or, with ``check=True``, compare) every generated notebook.

    Returns:
        The stale notebook paths (``check=True``) or the written paths.
    """
    paths = []
    known = set()
    for stem, nb in _all_rendered():
        path = NOTEBOOK_DIR / f"{stem}.ipynb"
        known.add(path.name)
        text = _dumps(nb)
        if check:
            if not path.exists() or path.read_text() != text:
                paths.append(path)
        else:
            NOTEBOOK_DIR.mkdir(exist_ok=True)
            path.write_text(text)
            paths.append(path)
    extra = [p for p in NOTEBOOK_DIR.glob("*.ipynb") if p.name not in known and _is_generated(p)]
    if check:
        paths += extra
    else:
        for p in extra:
            p.unlink()
    return paths


def _is_generated(path: Path) -> bool:
    try:
        return "cookbook" in json.loads(path.read_text()).get("metadata", {})
    except (OSError, ValueError):
        return False


def run_notebook(
    notebook: str | Path,
    parameters: dict[str, Any] | None = None,
    *,
    output: str | Path | None = None,
    timeout: float = 1800,
) -> Path:
    """Execute ``notebook`` with papermill; the executed copy lands in ``out/notebooks/``.

    Args:
        notebook: path to an ``.ipynb`` (relative to the repo root or absolute).
        parameters: injected into the ``parameters`` cell (e.g. ``{"stand_in": True}``).
        output: where to write the executed notebook; default ``out/notebooks/<name>``.
        timeout: seconds per cell.

    Returns:
        The executed notebook's path.

    Raises:
        CookbookError: a cell failed; the message names the cell and the executed copy.
    """
    import papermill

    src = Path(notebook)
    if not src.is_absolute():
        src = (REPO_ROOT / src).resolve()
    if not src.exists():
        raise CookbookError(f"No notebook at {src}: run `python -m helpers.notebooks build`.")
    dest = Path(output) if output else out_dir("notebooks") / src.name
    start = time.monotonic()
    try:
        papermill.execute_notebook(
            str(src),
            str(dest),
            parameters=parameters or {},
            cwd=str(src.parent),
            kernel_name="python3",
            execution_timeout=timeout,
            progress_bar=False,
            log_output=False,
        )
    except papermill.PapermillExecutionError as exc:
        raise CookbookError(
            f"{src.name} failed in cell {exc.exec_count} ({exc.ename}: {exc.evalue}); "
            f"the executed copy with the error is {dest}."
        ) from exc
    print(f"executed {src.name} in {time.monotonic() - start:.0f} s -> {dest}")
    return dest


_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "None": (type(None),),
}


def _type_ok(value: Any, annotation: str) -> bool:
    """Does ``value`` fit ``annotation`` (``int``, ``Optional[list[int]]``, ``str | None``...)?"""
    text = annotation.replace(" ", "")
    m = re.fullmatch(r"Optional\[(.+)\]", text)
    if m:
        return value is None or _type_ok(value, m.group(1))
    if "|" in text:
        return any(_type_ok(value, part) for part in text.split("|"))
    m = re.fullmatch(r"(?:list|List)\[(.+)\]", text)
    if m:
        return isinstance(value, (list, tuple)) and all(_type_ok(v, m.group(1)) for v in value)
    if text in ("list", "List"):
        return isinstance(value, (list, tuple))
    if text in _SIMPLE_TYPES:
        if isinstance(value, bool) and text in ("int", "float"):
            return False
        return isinstance(value, _SIMPLE_TYPES[text])
    return True  # an annotation this checker does not read: accept


def _example(name: str, annotation: str) -> str:
    text = annotation.replace(" ", "")
    if "list[int]" in text:
        return f"papermill -y '{name}: [1, 2, 4]' (or parameters={{{name!r}: [1, 2, 4]}})"
    if re.search(r"\bint\b", text):
        return f"papermill -p {name} 64"
    if re.search(r"\bfloat\b", text):
        return f"papermill -p {name} 0.5"
    if "bool" in text:
        return f"papermill -p {name} True"
    return f"papermill -p {name} VALUE"


def check_parameters(namespace: dict[str, Any]) -> None:
    """Check a notebook's parameters against the types its ``parameters`` cell declares.

    Called in a notebook right after the parameters (and papermill's injected values) are
    set, so a wrong type fails at once, naming the parameter, instead of many cells later.
    The declarations are the parameters cell's annotations (``name: "Optional[list[int]]"
    = None``), which papermill also shows in ``--help-notebook``; the checker reads
    ``str``, ``int``, ``float``, ``bool``, ``None``, ``list[X]``, ``Optional[X]`` and
    ``X | Y`` (bool is not accepted as int).

    Args:
        namespace: the notebook's globals (``globals()``).
    Raises:
        CookbookError: one line per parameter of the wrong type, with the expected type
            and how to pass it.
    """
    declared = namespace.get("__annotations__") or {}
    bad = []
    for name, annotation in declared.items():
        if name not in namespace:
            continue
        ann = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
        value = namespace[name]
        if not _type_ok(value, ann):
            bad.append(
                f"{name} = {value!r} ({type(value).__name__}), but the parameters cell declares "
                f"{ann}: pass e.g. {_example(name, ann)}"
            )
    if bad:
        raise CookbookError("Notebook parameter of the wrong type: " + "; ".join(bad) + ".")


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return {"True": True, "False": False, "None": None}.get(text, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.notebooks", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="rewrite notebooks/*.ipynb from the template")
    sub.add_parser("check", help="exit 1 when a committed notebook differs from the template")
    run = sub.add_parser("run", help="execute a notebook with papermill into out/notebooks/")
    run.add_argument("notebook")
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    args = parser.parse_args(argv)
    if args.cmd == "build":
        for p in build():
            print("wrote", p.relative_to(REPO_ROOT))
        return 0
    if args.cmd == "check":
        stale = build(check=True)
        for p in stale:
            print(f"stale: {p.relative_to(REPO_ROOT)} (run `python -m helpers.notebooks build`)")
        return 1 if stale else 0
    try:
        run_notebook(args.notebook, {k: _parse_value(v) for k, v in args.parameter})
    except CookbookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
