"""Execute a notebook with papermill, with progress lines in the terminal.

:func:`run_notebook` runs one notebook into ``out/notebooks/`` (written under a temporary
name and moved into place only when every cell passed), printing a line per section, the
server's start-up phases and a heartbeat while a step runs (``_Progress``). Given a kernel
(the test suite's ``tests/shared_kernel.py``), several runs share it, so the imports are paid
once; :data:`FOLLOWED_ENV` is what such a kernel takes from its caller. Also
:func:`resolve_notebook`, :data:`HEARTBEAT_S`.
"""

from __future__ import annotations

import io
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from helpers.errors import CookbookError
from helpers.paths import out_dir
from tools.notebook_build import NOTEBOOK_DIR

HEARTBEAT_S = 30.0  # seconds: the longest a notebook run stays silent in the terminal


class _Progress:
    """Terminal progress of a notebook run: one line per section (``## N. heading``) as it
    starts, with the time since the run began; the notebook's own ``[vllm ...]`` lines
    (server launch phases, ``helpers.server.vllm_server``); and a line every ``heartbeat`` seconds
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
        # a phase line updated in place (\r) shows each update on a line of its own here
        self.buf += text
        *lines, self.buf = re.split(r"[\r\n]", self.buf)
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
        def execute_managed_notebook(
            cls, nb_man, kernel_name, cookbook_progress=None, km=None, **kwargs
        ):
            if cookbook_progress is not None:
                start = nb_man.cell_start

                def cell_start(cell, cell_index=None, **kw):
                    cookbook_progress.cell_start(cell)
                    return start(cell, cell_index, **kw)

                nb_man.cell_start = cell_start
            if km is None:
                return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)
            # A kernel of the caller's (tests/shared_kernel.py): nbclient neither starts nor
            # shuts it down (``owns_km`` is False); its per-run client channels are closed here.
            from papermill.clientwrap import PapermillNotebookClient
            from papermill.engines import logger, remove_args

            kwargs = remove_args(["input_path", "timeout", "startup_timeout"], **kwargs)
            timeout = kwargs.pop("execution_timeout", None)
            startup = kwargs.pop("start_timeout", 60)
            client = PapermillNotebookClient(
                nb_man,
                km=km,
                timeout=timeout,
                startup_timeout=startup,
                kernel_name=kernel_name,
                log=logger,
                **kwargs,
            )
            try:
                return client.execute()
            finally:
                if client.kc is not None:
                    client.kc.stop_channels()

    papermill_engines.register("cookbook", CookbookEngine)
    return "cookbook"


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
    kernel: Any = None,
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
        kernel: run in this already started kernel (an object with ``reset(cwd, env)`` and
            ``km``: the suite's ``tests/shared_kernel.py``) instead of a fresh one.

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
    engine_kwargs = {}
    if kernel is not None:
        kernel.reset(src.parent, {k: os.environ.get(k) for k in FOLLOWED_ENV})
        engine_kwargs["km"] = kernel.km
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
                config=kernel_config(),
                # a line updated in place (\r: the server's phase lines, progress bars) is
                # saved as its last state, as the notebook showed it
                coalesce_streams=True,
                **engine_kwargs,
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


def kernel_config():
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc"}})


#: Environment variables a shared kernel (tests/shared_kernel.py) takes from its caller before
#: each notebook: where the run writes its outputs (:func:`helpers.paths.out_dir`).
FOLLOWED_ENV = ("COOKBOOK_OUT",)
