"""Generate the notebooks from one template, and execute them with papermill.

Every notebook in ``notebooks/`` comes from ``cookbook/notebook_template.py`` (a jupytext
"percent" script with Jinja placeholders) filled with one registry target's data, so the
per-target notebooks differ only in data. ``check`` fails when a committed notebook differs
from what the template produces.

Command line (from the repo root)::

    python -m helpers.notebooks build            # rewrite notebooks/*.ipynb
    python -m helpers.notebooks check            # exit 1 if any notebook is stale
    python -m helpers.notebooks run NOTEBOOK [-p NAME VALUE ...]

``run`` resolves NOTEBOOK from the current folder, prints a line per section as the notebook
runs, and says where the executed copy is (``out/notebooks/``).
"""

from __future__ import annotations

import argparse
import io
import json
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
HEARTBEAT_S = 30.0  # seconds: the longest a notebook run stays silent in the terminal


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
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    try:
        text = env.from_string(TEMPLATE.read_text()).render(
            target=spec.target, t=t, stand_in=spec.stand_in, title=spec.title, intro=spec.intro
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


class _Progress:
    """Terminal progress of a notebook run: one line per section (``## N. heading``) as it
    starts, with the time since the run began; the notebook's own ``[vllm ...]`` lines
    (server launch phases, ``helpers.server``); and a line every ``heartbeat`` seconds
    while a step runs without printing, so a long step never looks like a hang."""

    def __init__(self, name: str, out=None, heartbeat: float | None = None):
        import threading

        self.name, self.out = name, out or sys.stdout
        self.heartbeat = HEARTBEAT_S if heartbeat is None else heartbeat
        self.t0 = self.last = time.monotonic()
        self.step, self.step_t0 = "start", self.t0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="notebook-heartbeat")

    def say(self, text: str) -> None:
        with self._lock:
            now = time.monotonic()
            print(f"[{now - self.t0:5.0f} s] {text}", file=self.out, flush=True)
            self.last = now

    def cell_start(self, cell) -> None:
        if cell.get("cell_type") != "markdown":
            return
        for line in "".join(cell.get("source", "")).splitlines():
            if line.startswith("## "):
                self.step, self.step_t0 = line[3:].strip(), time.monotonic()
                self.say(self.step)

    def _beat(self) -> None:
        while not self._done.wait(min(1.0, self.heartbeat / 4)):
            now = time.monotonic()
            if now - self.last >= self.heartbeat:
                self.say(f"  ... still in '{self.step}' ({now - self.step_t0:.0f} s)")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join(timeout=5)


class _ServerLines:
    """A file-like sink for the kernel's stdout (papermill ``stdout_file``): forwards the
    ``[vllm ...]`` lines (server start-up phases and heartbeats) to the terminal."""

    def __init__(self, progress: _Progress):
        self.progress, self.buf = progress, ""

    def write(self, text: str) -> None:
        self.buf += text
        *lines, self.buf = self.buf.split("\n")
        for line in lines:
            if line.startswith("[vllm"):
                self.progress.say("  " + line.strip())

    def flush(self) -> None:
        pass


def _engine():
    """Papermill's nbclient engine, with a per-cell hook for :class:`_Progress`."""
    from papermill.engines import NBClientEngine, papermill_engines

    class CookbookEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, cookbook_progress=None, **kwargs):
            if cookbook_progress is not None:
                start = nb_man.cell_start

                def cell_start(cell, cell_index=None, **kw):
                    cookbook_progress.cell_start(cell)
                    return start(cell, cell_index, **kw)

                nb_man.cell_start = cell_start
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    papermill_engines.register("cookbook", CookbookEngine)
    return "cookbook"


def _kernel_config():
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc"}})


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def resolve_notebook(notebook: str | Path) -> Path:
    """The notebook file ``notebook`` names, relative to the current folder (or absolute).

    Raises:
        CookbookError: no such file; the message lists the cookbook's notebooks.
    """
    src = Path(notebook).expanduser()
    if src.is_file():
        return src.resolve()
    known = "\n  ".join(_rel(p) for p in sorted(NOTEBOOK_DIR.glob("*.ipynb")))
    raise CookbookError(
        f"No notebook at {src} (from {Path.cwd()}). The cookbook's notebooks:\n  {known}"
    )


def run_notebook(
    notebook: str | Path,
    parameters: dict[str, Any] | None = None,
    *,
    output: str | Path | None = None,
    timeout: float = 1800,
    progress: bool = True,
) -> Path:
    """Execute ``notebook`` with papermill; the executed copy lands in ``out/notebooks/``.

    The run writes to a temporary name next to ``output`` and moves it there only when
    every cell passed: a failed run keeps the last good executed copy, and its own copy
    (with the traceback) is ``<name>.failed.ipynb``.

    Args:
        notebook: path to an ``.ipynb``, relative to the current folder or absolute.
        parameters: injected into the ``parameters`` cell (e.g. ``{"stand_in": True}``).
        output: where to write the executed notebook; default ``out/notebooks/<name>``.
        timeout: seconds per cell.
        progress: print a line per section (with the elapsed time), the server's start-up
            phases, and a line at least every 30 s while a step runs.

    Returns:
        The executed notebook's path.

    Raises:
        CookbookError: no such notebook (lists them); a cell failed (names the cell and the
            executed copy with the error).
    """
    import papermill

    src = resolve_notebook(notebook)
    dest = Path(output) if output else out_dir("notebooks") / src.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    running = dest.with_name(f".{dest.stem}.running.ipynb")
    failed = dest.with_name(f"{dest.stem}.failed.ipynb")
    report = _Progress(src.name, out=sys.stdout if progress else io.StringIO())
    report.say(f"running {_rel(src)} -> {_rel(dest)}")
    start = time.monotonic()
    try:
        with report:
            papermill.execute_notebook(
                str(src),
                str(running),
                parameters=parameters or {},
                cwd=str(src.parent),
                kernel_name="python3",
                engine_name=_engine(),
                execution_timeout=timeout,
                progress_bar=False,
                log_output=False,
                stdout_file=_ServerLines(report),
                cookbook_progress=report,
                # kernel and runner on one machine: IPC sockets, not TCP (the kernel warns
                # about unencrypted TCP on start, jupyter's ipykernel/kernelapp.py)
                config=_kernel_config(),
            )
    except papermill.PapermillExecutionError as exc:
        running.replace(failed)
        raise CookbookError(
            f"{src.name} failed in cell {exc.exec_count} ({exc.ename}: {exc.evalue}); "
            f"the executed copy with the error is {failed}"
            + (f"; the last good run stays at {dest}." if dest.exists() else ".")
        ) from exc
    except BaseException:
        running.unlink(missing_ok=True)
        raise
    running.replace(dest)
    failed.unlink(missing_ok=True)
    report.say(f"done: executed {src.name} in {time.monotonic() - start:.0f} s -> {_rel(dest)}")
    return dest


def _parse_value(text: str) -> Any:
    """A ``-p NAME VALUE`` value: JSON (``3``, ``1.5``, ``true``, ``null``, ``[1, 2]``,
    ``"text"``), Python's ``True`` / ``False`` / ``None``, otherwise the string itself."""
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
    run.add_argument(
        "-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
        help="set a parameter; VALUE is read as JSON (3, 1.5, true, [1, 2], \"text\"), "
        "True / False / None as in Python, anything else as a string",
    )
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
