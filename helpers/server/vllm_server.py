"""Start, watch and stop a vLLM OpenAI-compatible server as a managed subprocess."""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import re
import subprocess
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from helpers.config.run import Run
from helpers.errors import CookbookError, ServerStartError
from helpers.paths import out_dir, slug
from helpers.server.command import (
    CACHE_VARS,
    compile_cache_key,
    launch_argv,
    launch_changes,
    launch_environment,
    launched_exports,
    shell_text,
)
from helpers.server.diagnose import start_failure
from helpers.server.endpoint import ServerEndpoint
from helpers.server.failures import Diagnosis
from helpers.server.phase_line import PhaseLine
from helpers.server.processes import (
    ServerRecord,
    connect_host,
    create_time,
    deferred_interrupts,
    describe_port,
    describe_procs,
    end_processes,
    exit_words,
    find_leftovers,
    free_port,
    handle_leftovers,
    port_holder,
    port_is_free,
)
from helpers.server.review import warn_findings
from helpers.server.stall import StallDetector, engine_counters, engine_hung, silent_phase
from helpers.server.vllm_log import LogFollower, phase_kind, read_tail, startup_phase

#: Seconds to wait for ``/health``: a cold 30 GB BF16 start from a network disk (read,
#: torch.compile, CUDA graphs) takes 5-15 min; 30 leave room without hiding a real hang.
DEFAULT_STARTUP_TIMEOUT = 1800.0
#: Seconds between SIGTERM and SIGKILL on stop: vLLM's own shutdown takes 1-3 s on the CPU
#: stand-in; GPU workers releasing NCCL and CUDA memory take longer.
DEFAULT_GRACE_PERIOD = 30.0
#: Seconds between progress lines while the phase does not change.
HEARTBEAT_S = 30.0
#: Seconds between looks at the log and ``/health`` while waiting for the start.
POLL_S = 0.5
#: Seconds without a log line before the start wait calls its phase silent (stall.silent_phase).
SILENT_S = 120.0
_DEFAULT = object()


# ---------------------------------------------------------------------------- the server

_LIVE: weakref.WeakSet[VLLMServer] = weakref.WeakSet()


@atexit.register
def _stop_all_at_exit() -> None:  # pragma: no cover - runs at interpreter exit
    for srv in list(_LIVE):
        with contextlib.suppress(Exception):
            srv.stop(verbose=False)


class VLLMServer(ServerEndpoint):
    """One vLLM OpenAI-compatible server: launched and owned, or attached.

    Args:
        config: a :class:`~helpers.config.serveconfig.ServeConfig` (duck type: ``model``, ``host``,
            ``port`` (None: a free one), ``env``, ``cli_flags()``; ``target``, ``vllm_version``
            and ``served_model_name`` optional).
        log_path: the log file (default ``out/logs/vllm-<name>-<port>-<time>.log``).
        startup_timeout: seconds to wait for ``/health`` (:data:`DEFAULT_STARTUP_TIMEOUT`).
        grace_period: seconds between SIGTERM and SIGKILL on :meth:`stop`.
        cache_dir: the compile caches' folder (:func:`helpers.server.command.launch_environment`);
            default ``out/cache/<release>-<GPUs>`` (:func:`helpers.server.command.compile_cache_key`),
            ``None`` vLLM's own.
        cleanup_leftovers: end leftovers (below) before starting (default: warn only).
        progress: True prints phase changes and a line every 30 s; False is silent; a
            callable gets ``(phase, seconds_since_launch)``.
        validate_flags: parse the flags with the installed vLLM's own parser first
            (``config.validate()``; skipped where vLLM is not importable): a misspelled flag
            fails by name with no process started.
        check_model: check a local checkpoint folder first
            (:func:`helpers.standin.build.check_checkpoint`).

    The constructor does no work; :meth:`start` (or ``with``) launches.
    """

    def __init__(
        self,
        config: Any,
        *,
        log_path: str | Path | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        cache_dir: Any = _DEFAULT,
        cleanup_leftovers: bool = False,
        progress: bool | Callable[[str, float], None] = True,
        validate_flags: bool = True,
        check_model: bool = True,
    ):
        self.config = config
        #: the run this server serves (its mode and defaults; launch_server sets the notebook's)
        self.run: Run = Run.of_config(config)
        self.host: str = getattr(config, "host", None) or "127.0.0.1"
        self.port: int | None = getattr(config, "port", None)
        self.log_path: Path | None = Path(log_path) if log_path else None
        self.startup_timeout, self.grace_period = float(startup_timeout), float(grace_period)
        self.cache_dir = cache_dir
        self.cleanup_leftovers = cleanup_leftovers
        self.progress = progress
        self.validate_flags, self.check_model = validate_flags, check_model
        self.owned = True
        self.intended: Any = None  # attached: the config the caller resolved (serves())
        self.phase: str | None = None
        self._line = PhaseLine()  # the start-up's phase line on the console
        self.startup_seconds: float | None = None  #: launch -> /health 200
        self.stop_seconds: float | None = None  #: stop() duration
        self._proc: subprocess.Popen | None = None
        self._log_fh = None
        self._record: ServerRecord | None = None
        self._launched_at: float | None = None
        self._launched: tuple[list[str], dict[str, str]] | None = None  # argv, exports
        self._stopped = False
        #: after the API server died without stop(): what died, how, and what was ended
        self.crash: str | None = None
        #: the fleet (lab.fleet.fleet.Fleet) this server is part of, when one launched it:
        #: launch_server stops or reuses that fleet as a whole, never one replica of it
        self.part_of: Any = None

    # ---- attach --------------------------------------------------------------------
    @classmethod
    def attach(cls, url: str, config: Any = None, *, check: bool = True) -> VLLMServer:
        """A handle on the server already running at ``url`` (``http://host:port[/v1]``;
        ``config`` optional); :meth:`stop` leaves it alone. ``check``: ``/health`` must be 200.

        Raises:
            CookbookError: ``check`` and the server does not answer (names the URL).
        """
        m = re.match(r"^(https?)://([^/:]+|\[[^\]]+\])(?::(\d+))?", url.strip())
        if not m:
            raise CookbookError(f"{url!r} is not a server URL: pass http://host:port (or .../v1).")
        srv = cls(config, progress=False)
        srv.owned = False
        srv._scheme = m.group(1)
        srv.host = m.group(2)
        srv.port = int(m.group(3)) if m.group(3) else (443 if m.group(1) == "https" else 80)
        if check and not srv.healthy():
            raise CookbookError(
                f"No vLLM server answers {srv.url}/health: check the URL and that the port is "
                "reachable from here, or start one (in a notebook: server_url = None launches "
                "its own; in code: launch_server(cfg))."
            )
        return srv

    # ---- url, base_url, client, models, healthy...: helpers.server.endpoint.ServerEndpoint
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        """Owned: the API server process is alive (if it died without :meth:`stop`, the rest
        of its group is ended here and :attr:`crash` says so). Attached: ``/health`` is 200."""
        if not self.owned:
            return self.healthy()
        if self._proc is None:
            return False
        if self._proc.poll() is None:
            return True
        self._end_after_crash()
        return False

    def survivors(self) -> list[psutil.Process]:
        """Live processes of this launch (API server, engine core, workers); [] when attached."""
        if not self.owned or self._record is None:
            return []
        return self._record.processes()

    def _end_after_crash(self) -> None:
        """The API server exited without stop(): end the rest of its group, note it in crash."""
        if self._proc is None or self._stopped or self._proc.poll() is None:
            return
        rc = self._proc.returncode
        others = [p for p in self.survivors() if p.pid != self._proc.pid]
        names = describe_procs(others)
        left = self._terminate(min(self.grace_period, 5.0)) if others else self.survivors()
        what = f"the API server pid {self._proc.pid} exited {exit_words(rc)} without stop()"
        if left:
            self.crash = (
                f"{what}; these processes of its group survive and hold memory: "
                f"{describe_procs(left)}; end them with srv.stop() or `kill -9 PID`"
            )
            return
        self.crash = what + (
            f"; ended the {len(others)} processes it left running: {names}" if others else ""
        )
        self._done(remove_record=True)

    def _done(self, remove_record: bool) -> None:
        """The launch is over: not running, not ended at exit; its record goes when asked."""
        if remove_record and self._record is not None:
            self._record.remove()
        self._stopped = True
        _LIVE.discard(self)

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` non-empty lines of the server log ("" before start / attached)."""
        return read_tail(self.log_path, n)

    # ---- launch --------------------------------------------------------------------
    def _launch_argv(self) -> list[str]:
        return launch_argv(self.config, self.host, self.port)

    def command(self) -> list[str]:
        """The argv :meth:`start` runs (the port must be known: ``config.port`` or after start)."""
        if self.port is None:
            raise CookbookError("No port yet: set config.port or call start() first.")
        return self._launched[0] if self._launched else self._launch_argv()

    def launched_command(self) -> str:
        """The command :meth:`start` ran as shell text (a shell starts the same server with it):
        ``export`` lines (:func:`~helpers.server.command.launched_exports`), then the argv.

        Raises:
            CookbookError: nothing launched yet (or attached: launched elsewhere).
        """
        if self._launched is None:
            raise CookbookError("Nothing launched by this handle: call start() first.")
        return shell_text(*self._launched)

    def environment(self) -> dict[str, str]:
        """The server process's environment (:func:`helpers.server.command.launch_environment`):
        ``os.environ``, the ``cache_dir`` folders, ``PYTHONUNBUFFERED=1``, ``config.env`` on top."""
        cache = (
            out_dir("cache") / compile_cache_key() if self.cache_dir is _DEFAULT else self.cache_dir
        )
        return launch_environment(self.config, cache)

    @property
    def _verbose(self) -> bool:
        return self.progress is True

    def start(self, *, wait: bool = True, _repick: bool = True) -> VLLMServer:
        """Launch the server and (``wait=True``) block until ``/health`` answers 200.

        Returns:
            self (so ``srv = VLLMServer(cfg).start()`` works).
        Raises:
            FlagError: a flag the installed vLLM does not accept (``validate_flags``), by name.
            RecipeError: a flag value vLLM would refuse (``ServeConfig.check_values``).
            CookbookError: a damaged local checkpoint (``check_model``, naming the rebuild), an
                attached server, no model in the config, vLLM not installed, no room for the
                launch record (a full disk: the launched process is ended, nothing left behind).
            ServerStartError: the port is taken (names the holder; a port picked here that another
                process takes before vLLM binds it, or answers on, is picked again, once), the
                process exited during start-up, or ``startup_timeout`` passed (names the phase),
                with the log tail and, when the log matches :mod:`helpers.server.diagnose`, the fix.
        """
        if not self.owned:
            raise CookbookError(
                "This handle is attached to a server it does not own; it cannot start one."
            )
        if self._proc is not None and self._proc.poll() is None:
            return self
        validate = getattr(self.config, "validate", None) if self.validate_flags else None
        if callable(validate) and importlib.util.find_spec("vllm") is not None:
            validate()
        model = getattr(self.config, "model", None)
        local = Path(str(model)).expanduser() if model else None  # a hub id has one "/" at most
        if self.check_model and local and (local.is_dir() or str(model)[:1] in "/.~" or str(model).count("/") > 1):  # fmt: skip
            from helpers.standin.build import check_checkpoint

            check_checkpoint(local)
        handle_leftovers(self.cleanup_leftovers, verbose=self._verbose)  # warns at start's caller
        picked = self.port is None  # a port picked here is picked again if another process takes it
        if picked:
            self.port = free_port(self.host)
        elif not port_is_free(self.port, self.host) or any(
            r.port == self.port for r in find_leftovers(include_owned=True)
        ):
            msg = (f"Port {self.port} on {self.host} is already in use{describe_port(self.port)}: stop that "
                   "server, or pass port=None (ServeConfig.with_port(None)) so a free port is picked.")  # fmt: skip
            raise ServerStartError(msg, log_tail="", diagnosis=Diagnosis("port_in_use", msg, ""))
        argv = self._launch_argv()
        if self.log_path is None:
            name = slug(getattr(self.config, "served_model_name", "") or "server", "server")
            self.log_path = out_dir("logs") / f"vllm-{name}-{self.port}-{time.strftime('%Y%m%d-%H%M%S')}.log"  # fmt: skip
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = self.environment()
        self._launched = (argv, launched_exports(self.config, env))
        self._log_fh = open(self.log_path, "ab", buffering=0)  # noqa: SIM115 - kept for the child's life
        # its command, and the folders it really uses (a diagnosis of its compile cache names them)
        cache = " ".join(f"{k}={env[k]}" for k in CACHE_VARS if env.get(k)) or "vLLM's defaults"
        for what, text in (("launch", subprocess.list2cmdline(argv)), ("cache", cache)):
            self._log_fh.write(f"# helpers.server.vllm_server {what}: {text}\n".encode())
        self._stopped, self.crash, self.phase = False, None, "launching"
        self._launched_at = time.monotonic()
        started = time.time()
        me = psutil.Process()
        # the process and its record come into being together: a Ctrl-C between them would
        # leave a server that neither this handle nor the leftover records know about
        with deferred_interrupts():
            self._proc = subprocess.Popen(
                argv,
                stdout=self._log_fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,  # a prompt (e.g. trust_remote_code) must fail, not hang
                env=env,
                start_new_session=True,
            )
            _LIVE.add(self)
            pid = self._proc.pid
            self._record = ServerRecord(
                pid, pid, self.port, self.host, str(self.log_path), started, argv, me.pid,
                owner_created=me.create_time(), pid_created=create_time(pid),
            )  # fmt: skip
            try:
                self._record.save()
            except CookbookError:  # a launch no record tracks must not live on
                self._abandon("its launch record could not be written")
                raise
        if self._verbose:
            changes = launch_changes(self.run.target, *self._launched, self.run.weights)
            print(f"[vllm] launched pid {self._proc.pid} on port {self.port}; log: {self.log_path}\n"
                  "[vllm] the command, as launched (a shell of this environment starts the same "
                  f"server with it):\n{self.launched_command()}",
                  *(["[vllm] how it differs from the target's command, and why:"] if changes else []),
                  *(f"  - {line}" for line in changes), sep="\n", flush=True)  # fmt: skip
        if wait:
            try:
                self.wait_ready()
            except KeyboardInterrupt:
                # Jupyter's stop button (SIGINT): a starting server must not outlive the cell
                self._abandon("interrupted during start-up")
                raise
            except ServerStartError:  # the picked port taken before vLLM bound it: once more
                if not (picked and _repick and self.phase == "port taken"):
                    raise
                print(f"[vllm] port {self.port} was taken while vLLM started; starting again on another", flush=True)  # fmt: skip
                self.port, self.log_path, self._proc = None, None, None
                return self.start(wait=wait, _repick=False)
        return self

    def _release(self) -> list[psutil.Process]:
        """End what is left of a launch that will not serve (a failed or interrupted start): a
        grace of at most 5 s (in early init vLLM can sit on SIGTERM for the whole grace), then
        SIGKILL. Returns the survivors; the record goes when none."""
        self._line.end()
        left = self._terminate(grace_period=min(self.grace_period, 5.0))
        self._done(remove_record=not left)
        return left

    def _abandon(self, why: str) -> None:
        """End a launch that will not be used (interrupt during start-up); say so."""
        left = self._release()
        if self._verbose:
            print(f"[vllm] {why}: ended pid {self._proc.pid if self._proc else '?'} (port {self.port})"
                  f"{'; left: ' + describe_procs(left) if left else ''}", flush=True)  # fmt: skip

    def wait_ready(self, timeout: float | None = None) -> VLLMServer:
        """Block until ``/health`` is 200, showing the start-up phase; raises as :meth:`start`.

        Args:
            timeout: seconds from launch (default ``startup_timeout``).
        """
        for ready in self.readiness(timeout):
            if ready:
                return self
            time.sleep(POLL_S)
        return self  # pragma: no cover - readiness() ends by returning True or raising

    def readiness(self, timeout: float | None = None):
        """The readiness wait one look at a time: each step reads the new log lines, shows the
        phase, and yields False, or True once ``/health`` answers 200 (then it ends). A
        :class:`lab.fleet.fleet.Fleet` waits on several servers this way.

        Args:
            timeout: seconds from launch (default ``startup_timeout``).

        Raises:
            ServerStartError: as :meth:`start` (exited, another process on the port, timeout).
        """
        if self._proc is None:
            raise CookbookError("Nothing launched: call start() first.")
        timeout = self.startup_timeout if timeout is None else timeout
        follower = LogFollower(self.log_path)
        t0 = self._launched_at or time.monotonic()
        last_said, said_phase, last_line = 0.0, None, ""
        phase_since = heard = 0.0
        while True:
            for line in follower.new_lines():
                if not line.startswith("# helpers.server.vllm_server"):
                    last_line, heard = line, time.monotonic() - t0
                ph = startup_phase(line)
                if ph:
                    if phase_kind(ph) != phase_kind(self.phase):
                        phase_since = time.monotonic() - t0
                    self.phase = ph
            elapsed = time.monotonic() - t0
            if self.phase != said_phase:  # announced before any failure names it
                self._line.say(self.progress, self.phase or "launching", elapsed)
                said_phase, last_said = self.phase, elapsed
            rc = self._proc.poll()
            if rc is not None:
                self._fail(f"vLLM exited {exit_words(rc)} during start-up", elapsed)
            if self.healthy():
                stranger = self._stranger_on_port()
                if stranger:
                    self.phase = "port taken"  # start() picks another port once
                    self._fail(
                        f"another process answers /health on port {self.port}, which this "
                        f"server was to listen on ({stranger}): it took the port after it was "
                        "picked; start again (a new free port is picked)",
                        elapsed,
                    )
                self.startup_seconds, self.phase = elapsed, "ready"
                self._line.say(
                    self.progress,
                    f"ready: {self.base_url} ({elapsed:.0f} s)",
                    elapsed,
                    kind="ready",
                )
                self._line.end()
                warn_findings(self.log_tail(5000), self.config)  # what the running log shows wrong
                yield True
                return
            quiet = elapsed - heard
            silent = (
                f"; no log line for {quiet:.0f} s: {silent_phase(self.phase, self.config)}"
                if quiet >= SILENT_S
                else ""
            )
            if elapsed > timeout:
                self._fail(
                    f"vLLM did not answer /health within {timeout:.0f} s; it was "
                    f"'{self.phase}' since {phase_since:.0f} s{silent} (last log line: "
                    f"{last_line[:200]!r}). If the start is just slow (first download, cold "
                    "compile), raise startup_timeout; otherwise read the log",
                    elapsed,
                )
            if elapsed - last_said >= HEARTBEAT_S:
                self._line.say(
                    self.progress,
                    f"still {self.phase} ({elapsed - phase_since:.0f} s in this phase{silent})",
                    elapsed,
                    kind=phase_kind(self.phase),
                )
                last_said = elapsed
            yield False

    def engine_counters(self) -> dict[str, float]:
        """:func:`helpers.server.stall.engine_counters` of ``GET /metrics`` now (``running``,
        ``waiting``, ``tokens``; 0 where the scrape lacks one).

        Raises:
            CookbookError: ``/metrics`` does not answer 200 (names the URL).
        """
        status, body = self._get("/metrics", timeout=10)
        if status != 200:
            raise CookbookError(f"{self.url}/metrics answered HTTP {status}: is it a vLLM server?")
        return {k: v or 0.0 for k, v in engine_counters(body).items()}

    def progress_check(self, seconds: float = 60.0, poll: float = 2.0) -> Diagnosis | None:
        """Watch :meth:`engine_counters` for ``seconds`` (a look every ``poll`` s) with a
        :class:`~helpers.server.stall.StallDetector` (``seconds`` above the longest prefill): a
        :class:`~helpers.server.failures.Diagnosis` when requests run all along and no token is
        counted (:func:`helpers.server.stall.engine_hung` names the kind it matches,
        and how long the log has been silent), None as soon as one moves or nothing runs.

        Raises:
            CookbookError: as :meth:`engine_counters`.
        """
        watch, first = StallDetector(seconds), self.engine_counters()
        while True:
            now = self.engine_counters()
            if not now["running"] or now["tokens"] != first["tokens"]:
                return None
            if watch.observe(time.monotonic(), **now):
                break
            time.sleep(poll)
        log = Path(self.log_path) if self.log_path else None
        quiet = time.time() - log.stat().st_mtime if log and log.exists() else None
        return engine_hung(seconds, int(now["running"]), self.config, self.log_tail(1), quiet)

    def _stranger_on_port(self) -> str | None:
        """Who listens on our port when it is not our process group (None: ours, or unseen)."""
        holder = port_holder(self.port)
        if holder is None or self._proc is None:
            return None
        try:
            if os.getpgid(holder[0]) == self._proc.pid:
                return None
        except OSError:  # it ended meanwhile
            return None
        return f"pid {holder[0]}: {holder[1][:120]}"

    def _fail(self, what: str, elapsed: float) -> None:
        self._release()
        time.sleep(0.2)
        err = start_failure(what, self.phase, elapsed, self.log_path, self.config)
        self.phase = "port taken" if getattr(err.diagnosis, "name", "") == "port_in_use" else self.phase  # vLLM's bind found it held: start() and a fleet pick another port once  # fmt: skip
        raise err

    # ---- stop ----------------------------------------------------------------------
    def _terminate(self, grace_period: float | None = None) -> list[psutil.Process]:
        """SIGTERM, then SIGKILL after ``grace_period`` (default :attr:`grace_period`) s, the
        launch's process group; returns what still lives after it (:meth:`survivors` too)."""
        rec = self._record
        grace = self.grace_period if grace_period is None else grace_period
        left = end_processes(rec.pgid if rec else None, self.survivors(), grace, popen=self._proc)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        if self._log_fh is not None:
            with contextlib.suppress(OSError):
                self._log_fh.close()
            self._log_fh = None
        return left + [p for p in self.survivors() if p.pid not in {q.pid for q in left}]

    def stop(self, *, verbose: bool | None = None) -> None:
        """End the server's whole process group (SIGTERM, SIGKILL after ``grace_period`` s) and
        check that nothing is left and the port binds again. Nothing for an attached or
        already stopped server.

        Raises:
            CookbookError: a process survived SIGKILL, or the port stays taken (names pid / port).
        """
        verbose = self._verbose if verbose is None else verbose
        if not self.owned:
            if verbose:
                print(f"[vllm] left the server at {self.url} running: this process attached to it")
            return
        if self._proc is None or self._stopped:
            return
        t0 = time.monotonic()
        left = self._terminate()
        if left:
            raise CookbookError(
                f"vLLM processes survived SIGKILL: {describe_procs(left)}; end them by pid "
                "(`kill -9 PID`); a process stuck in the GPU driver needs `nvidia-smi` to check."
            )
        deadline = time.monotonic() + 10
        while not port_is_free(self.port, self.host) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not port_is_free(self.port, self.host):
            raise CookbookError(
                f"Port {self.port} is still taken after the server stopped{describe_port(self.port)}."
            )
        self._done(remove_record=True)
        self.stop_seconds = time.monotonic() - t0
        if verbose:
            print(
                f"[vllm] stopped pid {self._proc.pid} in {self.stop_seconds:.1f} s; port {self.port} is free",
                flush=True,
            )

    def __enter__(self) -> VLLMServer:
        if self.owned:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        if not self.owned or self.is_running():
            state = "running" if self.owned else "attached"
        else:
            state = f"crashed ({self.crash})" if self.crash else "stopped" if self._proc else "new"
        where = f"{connect_host(self.host)}:{self.port}" if self.port else "no port yet"
        return f"<VLLMServer {state} {where} log={self.log_path}>"
