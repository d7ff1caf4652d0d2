"""Execute a notebook with papermill, with progress lines in the terminal.

:func:`run_notebook` runs one notebook into ``out/notebooks/`` (written under a temporary
name and moved into place only when every cell passed), printing a line per section, the
server's start-up phases and a heartbeat while a step runs (``_Progress``). Given a kernel
(the test suite's ``tests/support/shared_kernel.py``), several runs share it, so the imports are paid
once; :data:`FOLLOWED_ENV` is what such a kernel takes from its caller. Also
:func:`resolve_notebook`, :data:`HEARTBEAT_S`.

Runs started at the same moment (two terminals, a CI matrix) stay apart: each fresh kernel
gets its IPC sockets and connection file in a private temporary folder (jupyter_client's
default is ``kernel-ipc-N`` relative to the notebook's folder, where two runs pick the same
N), its own running copy (``.<name>.running-<pid>-<id>.ipynb``), and one absolute output
folder (a relative ``COOKBOOK_OUT`` is resolved against the runner's folder before the
kernel, which runs in the notebook's folder, inherits it). A benchmark sweep keeps its
points private until it ends (:func:`helpers.bench.sweep.sweep`).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

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
        #: what stopped the run ("Ctrl-C", "SIGTERM", "SIGHUP"; None while it goes on)
        self.stopped_by: str | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="notebook-heartbeat")

    def line(self, text: str) -> str:
        """``text`` stamped with the seconds since the run began, as every progress line is."""
        return f"[{time.monotonic() - self.t0:5.0f} s] {text}"

    def say(self, text: str) -> None:
        with self._lock:
            print(self.line(text), file=self.out, flush=True)
            self.last = time.monotonic()

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
        self.progress, self.buf, self.heading = progress, "", None

    def write(self, text: str) -> None:
        # a phase line updated in place (\r) shows each update on a line of its own here; a
        # heading ("...:") is said only with its "  - " items (the launch's differences), so a
        # heading whose body is a multi-line command is left to the notebook
        self.buf += text
        *lines, self.buf = re.split(r"[\r\n]", self.buf)
        for line in lines:
            if line.startswith("[vllm"):
                self.heading = line.strip() if line.rstrip().endswith(":") else None
                if self.heading is None:
                    self.progress.say("  " + line.strip())
            elif self.heading is not None and line.startswith("  - "):
                if self.heading:
                    self.progress.say("  " + self.heading)
                    self.heading = ""
                self.progress.say("  " + line.rstrip())
            elif line.strip():
                self.heading = None

    def flush(self) -> None:
        pass


class NotebookInterrupted(CookbookError):
    """Ctrl-C stopped a notebook run (the running cell was interrupted, as Jupyter's stop
    button does); :func:`tools.notebooks.main` prints it as one line and exits 130."""


@contextlib.contextmanager
def _forward_interrupts(client, report: _Progress):
    """While a notebook runs, the first Ctrl-C interrupts the kernel's running cell (SIGINT to
    the kernel, Jupyter's stop button: the cell's own clean-up runs, a benchmark cancels its
    point) instead of tearing the runner down mid-cell; a second one stops the runner at once.
    SIGTERM and SIGHUP (a CI job's timeout or cancel, ``timeout``, a closed terminal) do the
    same: they reach the runner alone, and a kernel whose runner dies exits without its
    clean-up (ipykernel's parent poller: ``os._exit``), leaving its vLLM server running. One
    between two cells stops the run before the next (:attr:`_Progress.stopped_by`)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = {"n": 0}

    def handler(signum, frame):
        pressed["n"] += 1
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        report.stopped_by = report.stopped_by or name
        proc = getattr(getattr(getattr(client, "km", None), "provisioner", None), "process", None)
        if pressed["n"] > 1 or proc is None:
            raise KeyboardInterrupt
        with contextlib.suppress(OSError):  # the kernel first: the line below may fail
            proc.send_signal(signal.SIGINT)
        # not report.say: its lock may be held by the code this handler interrupted, and a
        # hung-up terminal refuses the write
        with contextlib.suppress(OSError, ValueError):
            print(report.line(f"{name}: interrupting the running cell (again: stop at once)"),
                  file=report.out, flush=True)  # fmt: skip

    # SIGHUP ignored where the run started stays ignored (nohup); SIGINT is taken even when
    # ignored (a pytest-xdist worker's child starts with it ignored, and Ctrl-C is asked for)
    stops = [signal.SIGINT, signal.SIGTERM]
    stops += [signal.SIGHUP] if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN else []
    old = {s: signal.signal(s, handler) for s in stops}
    try:
        yield
    finally:
        for s in stops:
            signal.signal(s, old[s])


def _engine():
    """Papermill's nbclient engine, with a per-cell hook for :class:`_Progress` and Ctrl-C
    forwarded to the kernel (:func:`_forward_interrupts`)."""
    from papermill.engines import NBClientEngine, papermill_engines

    class CookbookEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(
            cls, nb_man, kernel_name, cookbook_progress=None, km=None, **kwargs
        ):
            if cookbook_progress is not None:
                start = nb_man.cell_start

                def cell_start(cell, cell_index=None, **kw):
                    if cookbook_progress.stopped_by:  # a stop between two cells
                        raise NotebookInterrupted(
                            f"interrupted: {cookbook_progress.name} stopped before its next cell "
                            f"({cookbook_progress.stopped_by})"
                        )
                    cookbook_progress.cell_start(cell)
                    return start(cell, cell_index, **kw)

                nb_man.cell_start = cell_start
            # The client papermill's NBClientEngine would make; with a kernel of the caller's
            # (tests/support/shared_kernel.py) nbclient neither starts nor shuts it down (``owns_km``
            # is False) and its per-run client channels are closed here.
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
                with _forward_interrupts(client, cookbook_progress or _Progress("", io.StringIO())):
                    return client.execute()
            finally:
                if km is not None and client.kc is not None:
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


def check_parameters_declared(notebook: Path, parameters: dict[str, Any]) -> None:
    """Refuse a parameter the notebook's ``parameters`` cell does not declare (papermill only
    warns and runs with the default: ``-p gpu_hours_usd 1.2`` priced at the default).

    Raises:
        CookbookError: naming each unknown parameter, the closest declared name, and the list.
    """
    import difflib

    import papermill

    declared = list(papermill.inspect_notebook(str(notebook)))
    unknown = [name for name in parameters if name not in declared]
    if not unknown:
        return
    said = []
    for name in unknown:
        close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
        said.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise CookbookError(
        f"{notebook.name} declares no parameter {', '.join(said)}: nothing was run. Its "
        f"parameters: {', '.join(declared)}."
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
            ``km``: the suite's ``tests/support/shared_kernel.py``) instead of a fresh one.

    Returns:
        The executed notebook's path.

    Raises:
        CookbookError: no such notebook (lists them); a parameter it does not declare
            (:func:`check_parameters_declared`); a cell failed (names the cell and the
            executed copy with the error).
        NotebookInterrupted: Ctrl-C interrupted the running cell (the first Ctrl-C goes to
            the kernel as Jupyter's stop button does; a second stops the run at once, as
            KeyboardInterrupt).
    """
    import papermill

    src = resolve_notebook(notebook)
    check_parameters_declared(src, parameters or {})
    _pin_output_folder()
    dest = Path(output).resolve() if output else out_dir("notebooks") / src.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    # this run's own copy: another run of the same notebook may be writing its own next to it;
    # a killed run's (SIGKILL: nothing of it ran again) goes once its pid is gone
    for stale in dest.parent.glob(f".{dest.stem}.running-*.ipynb"):
        if not psutil.pid_exists(int(stale.name.rsplit(".running-", 1)[1].split("-")[0])):
            stale.unlink(missing_ok=True)
    running = dest.with_name(f".{dest.stem}.running-{os.getpid()}-{uuid.uuid4().hex[:8]}.ipynb")
    failed = dest.with_name(f"{dest.stem}.failed.ipynb")
    report = _Progress(src.name, out=sys.stdout if progress else io.StringIO())
    report.say(f"running {_rel(src)} -> {_rel(dest)}")
    start = time.monotonic()
    engine_kwargs = {}
    if kernel is not None:
        kernel.reset(src.parent, {k: os.environ.get(k) for k in FOLLOWED_ENV})
        engine_kwargs["km"] = kernel.km
    sockets = tempfile.TemporaryDirectory(prefix="cookbook-nb-") if kernel is None else None
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
                # about unencrypted TCP on start, jupyter's ipykernel/kernelapp.py), in this
                # run's own folder
                config=kernel_config(Path(sockets.name) if sockets else None),
                # a line updated in place (\r: the server's phase lines, progress bars) is
                # saved as its last state, as the notebook showed it
                coalesce_streams=True,
                **engine_kwargs,
            )
    except papermill.PapermillExecutionError as exc:
        running.replace(failed)
        if exc.ename == "KeyboardInterrupt":
            raise NotebookInterrupted(
                f"interrupted: {src.name} stopped in cell {exc.exec_count} "
                f"({report.stopped_by or 'Ctrl-C'}); the executed copy up to there is {failed}"
            ) from None
        raise CookbookError(
            f"{src.name} failed in cell {exc.exec_count} ({exc.ename}: {exc.evalue}); "
            f"the executed copy with the error is {failed}"
            + (f"; the last good run stays at {dest}." if dest.exists() else ".")
        ) from exc
    except BaseException:
        running.unlink(missing_ok=True)
        raise
    finally:
        if sockets is not None:
            sockets.cleanup()
    running.replace(dest)
    failed.unlink(missing_ok=True)
    report.say(f"done: executed {src.name} in {time.monotonic() - start:.0f} s -> {_rel(dest)}")
    return dest


def kernel_config(folder: Path | None = None):
    """The kernel manager's settings: IPC transport; with ``folder``, its sockets
    (``<folder>/kernel-ipc-N``) and connection file there, at absolute paths private to one
    run (jupyter_client's ``KernelManager.ip`` is the socket path prefix under IPC)."""
    from traitlets.config import Config

    km: dict[str, Any] = {"transport": "ipc"}
    if folder is not None:
        km["ip"] = str(Path(folder).resolve() / "kernel-ipc")
        km["connection_file"] = str(Path(folder).resolve() / "kernel.json")
    return Config({"KernelManager": km})


def _pin_output_folder() -> None:
    """A relative ``COOKBOOK_OUT`` becomes absolute (against this process's folder) before the
    kernel inherits it: the kernel runs in the notebook's folder, where the same relative path
    would name another folder (:func:`helpers.paths.out_dir` does the same in-process)."""
    value = os.environ.get("COOKBOOK_OUT")
    if value and not Path(value).expanduser().is_absolute():
        os.environ["COOKBOOK_OUT"] = str((Path.cwd() / Path(value).expanduser()).resolve())


#: Environment variables a shared kernel (tests/support/shared_kernel.py) takes from its caller before
#: each notebook: where the run writes its outputs (:func:`helpers.paths.out_dir`).
FOLLOWED_ENV = ("COOKBOOK_OUT",)
