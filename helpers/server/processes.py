"""The processes of launched vLLM servers: ports, process groups, and records of every launch.

A vLLM server is several processes (API server, engine core, workers) in one process group;
each launch is recorded in ``out/run/vllm-<pid>.json`` (:class:`ServerRecord`) so what a dead
kernel left running (a *leftover*) can be found and ended. Scans use ``psutil``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

import psutil

from helpers.errors import CookbookError
from helpers.paths import out_dir


class LeftoverServerWarning(UserWarning):
    """A vLLM server from an earlier Python process is still running (see find_leftovers)."""


# ---- ports ----------------------------------------------------------------------------


def connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a server could bind ``host:port`` now.

    Binds with ``SO_REUSEADDR`` as vLLM does (``create_server_socket`` in
    vllm/entrypoints/launchers/launcher.py), so closed connections in TIME_WAIT do not
    count as "in use".
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_holder(port: int) -> tuple[int, str] | None:
    """``(pid, command line)`` of the process listening on TCP ``port``, if it can be seen."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, OSError):
        return None
    for c in conns:
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid:
            try:
                return c.pid, " ".join(psutil.Process(c.pid).cmdline())[:200]
            except psutil.Error:
                return c.pid, "?"
    return None


def describe_port(port: int | None) -> str:
    """Words on who holds ``port``: one of our recorded vLLM servers, or another process
    ("" when nothing is known)."""
    if not port:
        return ""
    for rec in find_leftovers(include_owned=True):
        if rec.port == port:
            state = f"still owned by the running Python process {rec.owner_pid}"
            state = "a leftover whose Python process is gone" if rec.orphaned else state
            return (
                f" (it is our vLLM server pid {rec.pid} started {rec.started_text}, {state}; "
                f"log {rec.log}; end it with helpers.server.processes.end_leftovers())"
            )
    holder = port_holder(port)
    if holder:
        return f" (held by pid {holder[0]}: {holder[1]})"
    return ""


# ---- records of launched servers, and leftovers ---------------------------------------


def create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def same_process(pid: int | None, create_time: float | None) -> psutil.Process | None:
    """The process ``pid`` if it is still the one created at ``create_time`` and alive."""
    if not pid:
        return None
    try:
        p = psutil.Process(pid)
        if create_time is not None and abs(p.create_time() - create_time) > 1.0:
            return None  # the pid was reused
        return p if _alive(p) else None
    except psutil.Error:
        return None


_OURS = re.compile(r"vllm|VLLM|multiprocessing", re.IGNORECASE)


def group_processes(
    pid: int, pgid: int, since: float, pid_created: float | None
) -> list[psutil.Process]:
    """Live processes of one launch: ``pid`` and its descendants, plus the members of
    process group ``pgid`` created after ``since`` that look like vLLM (API server, engine
    core, workers, multiprocessing helpers) - those survive as orphans if ``pid`` dies."""
    found: dict[int, psutil.Process] = {}
    root = same_process(pid, pid_created)
    if root is not None:
        found[root.pid] = root
        with contextlib.suppress(psutil.Error):
            for c in root.children(recursive=True):
                if _alive(c):
                    found[c.pid] = c
    for p in psutil.process_iter(["pid", "name", "cmdline", "create_time"]):
        if p.pid in found or p.pid == os.getpid():
            continue
        try:
            if os.getpgid(p.pid) != pgid:
                continue
        except OSError:
            continue
        info = p.info
        if (info.get("create_time") or 0) < since - 1.0:
            continue
        text = f"{info.get('name') or ''} {' '.join(info.get('cmdline') or [])}"
        if _OURS.search(text) and _alive(p):
            found[p.pid] = p
    return list(found.values())


def describe_procs(procs: Iterable[psutil.Process]) -> str:
    out = []
    for p in procs:
        try:
            name = " ".join(p.cmdline()[:4]) or p.name()
        except psutil.Error:
            name = "?"
        out.append(f"{p.pid} ({name[:80]})")
    return ", ".join(out)


def _signal_all(pgid: int | None, procs: Iterable[psutil.Process], sig: int) -> None:
    if pgid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.send_signal(sig)


def end_processes(
    pgid: int | None,
    procs: list[psutil.Process],
    grace_period: float,
    popen: subprocess.Popen | None = None,
) -> list[psutil.Process]:
    """SIGTERM the group and ``procs``, SIGKILL what is left after ``grace_period``.

    Returns the processes still alive at the end (normally none).
    """
    _signal_all(pgid, procs, signal.SIGTERM)
    deadline = time.monotonic() + grace_period
    others = [p for p in procs if popen is None or p.pid != popen.pid]
    if popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=grace_period)
    left = [p for p in others if _alive(p)]
    if left:
        _, left = psutil.wait_procs(left, timeout=max(0.1, deadline - time.monotonic()))
        left = [p for p in left if _alive(p)]
    if (popen is not None and popen.poll() is None) or left:
        _signal_all(pgid, left, signal.SIGKILL)
        if popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=10)
        if left:
            _, left = psutil.wait_procs(left, timeout=10)
    return [p for p in left if _alive(p)]


@contextlib.contextmanager
def deferred_interrupts():
    """Hold Ctrl-C (SIGINT) back for a few lines that must run together (a launch and its
    record), then hand it to the handler that was in place. Outside the main thread (no
    signal handler runs there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    try:
        old = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    except ValueError:  # pragma: no cover - no signals here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if held:
            if callable(old):
                old(signal.SIGINT, None)
            elif old == signal.SIG_DFL:
                raise KeyboardInterrupt


@dataclasses.dataclass
class ServerRecord:
    """What ``out/run/vllm-<pid>.json`` says about one launched server: its API server
    ``pid`` and process group ``pgid`` (= pid), ``port``, ``host``, ``log``, ``started`` (epoch
    seconds), ``pid_created`` (guards against pid reuse), ``cmdline``, the launching process
    (``owner_pid``, ``owner_created``) and the record file ``path``."""

    pid: int
    pgid: int
    port: int
    host: str
    log: str
    started: float
    cmdline: list[str]
    owner_pid: int
    owner_created: float | None = None
    pid_created: float | None = None
    path: str = ""

    @classmethod
    def load(cls, path: Path) -> ServerRecord | None:
        try:
            data = json.loads(Path(path).read_text())
            fields = {f.name for f in dataclasses.fields(cls)}
            rec = cls(**{k: v for k, v in data.items() if k in fields})
            rec.path = str(path)
            return rec
        except (OSError, ValueError, TypeError):
            return None

    def save(self) -> None:
        path = Path(self.path) if self.path else out_dir("run") / f"vllm-{self.pid}.json"
        self.path = str(path)
        tmp = path.with_suffix(".tmp")
        data = {k: v for k, v in dataclasses.asdict(self).items() if k != "path"}
        try:
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, path)
        except OSError as exc:  # a full disk: no half-written record left behind
            tmp.unlink(missing_ok=True)
            raise CookbookError(f"Cannot write {path} ({exc.strerror or exc}): free space on its "
                                "disk, or set COOKBOOK_OUT to a folder on a disk with room.") from None  # fmt: skip

    def remove(self) -> None:
        if self.path:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    @property
    def started_text(self) -> str:
        return _dt.datetime.fromtimestamp(self.started).strftime("%Y-%m-%d %H:%M:%S")

    @property
    def owner_alive(self) -> bool:
        return same_process(self.owner_pid, self.owner_created) is not None

    def processes(self) -> list[psutil.Process]:
        """The launch's live processes (API server, engine core, workers)."""
        return group_processes(self.pid, self.pgid, self.started, self.pid_created)

    @property
    def alive(self) -> bool:
        return bool(self.processes())

    @property
    def orphaned(self) -> bool:
        """Still running, but the Python process that launched it is gone."""
        return not self.owner_alive and self.alive

    def __str__(self) -> str:
        procs = self.processes()
        return (
            f"vLLM server pid {self.pid} on port {self.port}, started {self.started_text} by "
            f"pid {self.owner_pid} ({'alive' if self.owner_alive else 'gone'}), "
            f"processes: {describe_procs(procs) or 'none'}; log {self.log}"
        )


def server_records() -> list[ServerRecord]:
    """Every launch record under ``out/run/`` (running or not), oldest file name first."""
    recs = [ServerRecord.load(path) for path in sorted(out_dir("run").glob("vllm-*.json"))]
    return [rec for rec in recs if rec is not None]  # None: unreadable


def find_leftovers(*, include_owned: bool = False) -> list[ServerRecord]:
    """Recorded vLLM servers that still run although their launching Python process is gone
    (records of servers no longer running are deleted on the way).

    Args:
        include_owned: also the running servers whose owner is alive (for "who holds this
            port?"); :func:`end_leftovers` ends those only when passed them.
    """
    out = []
    for rec in server_records():
        if not rec.alive:
            rec.remove()
            continue
        if include_owned or not rec.owner_alive:
            out.append(rec)
    return out


def end_leftovers(
    leftovers: Iterable[ServerRecord] | None = None,
    *,
    verbose: bool = True,
) -> list[ServerRecord]:
    """End leftover servers (default: all of :func:`find_leftovers`) and their engine cores:
    SIGTERM, SIGKILL after 10 s, then the record is removed.

    Returns:
        The records that were ended.
    Raises:
        CookbookError: a process survived SIGKILL (names its pid).
    """
    recs = list(find_leftovers() if leftovers is None else leftovers)
    ended = []
    for rec in recs:
        procs = rec.processes()
        if procs:
            left = end_processes(rec.pgid, procs, 10.0)
            if left:
                raise CookbookError(
                    f"Leftover vLLM processes survived SIGKILL: {describe_procs(left)}; end them "
                    "as their owner (`kill -9 PID`) or check for an uninterruptible GPU driver call."
                )
            if verbose:
                print(f"ended leftover {rec.pid} (port {rec.port}, {len(procs)} processes); log {rec.log}")  # fmt: skip
        rec.remove()
        ended.append(rec)
    return ended


def handle_leftovers(cleanup: bool, *, verbose: bool = True) -> None:
    """Before a launch: end the servers an earlier Python process left running
    (``cleanup=True``, :func:`end_leftovers`), or warn with each of them
    (:class:`LeftoverServerWarning`, naming how to end them). Nothing when there are none."""
    leftovers = find_leftovers()
    if not leftovers:
        return
    if cleanup:
        end_leftovers(leftovers, verbose=verbose)
        return
    names = "\n  ".join(str(r) for r in leftovers)
    warnings.warn(
        f"{len(leftovers)} vLLM server(s) from an earlier Python process are still running "
        f"and hold memory:\n  {names}\nEnd them with helpers.server.processes.end_leftovers() or "
        "start with cleanup_leftovers=True.",
        LeftoverServerWarning,
        stacklevel=3,
    )


def exit_words(rc: int) -> str:
    """``"with code 1"`` / ``"killed by SIGKILL (from outside: ...)"`` for a return code."""
    if rc >= 0:
        return f"with code {rc}"
    sig = signal.Signals(-rc).name if -rc in signal.valid_signals() else -rc
    return f"killed by {sig}" + (
        " (from outside: often the kernel's out-of-memory killer, see `dmesg`)"
        if rc == -signal.SIGKILL
        else ""
    )
