"""Outgrow one server: run a :class:`~lab.fleet.deployment.Deployment`'s servers and router::

    dep = deployment.resolve_deployment("replicas", "h200", count=2)   # pure: render, validate
    with fleet.Fleet(dep) as fl:                # N servers + router, stopped on exit
        bench.sweep(fl, ...)                    # the client and sweep, unchanged

The notebook verbs (launch or reuse, attach) are in :mod:`lab.fleet.launch`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helpers.errors import CookbookError, ServerStartError
from helpers.server.processes import deferred_interrupts, free_port
from helpers.server.vllm_server import VLLMServer
from lab.fleet.deployment import Deployment
from lab.fleet.router import RouterConfig, RouterServer

#: The fleets this Python process started and has not stopped (one kernel, one deployment).
_FLEETS: weakref.WeakSet[Fleet] = weakref.WeakSet()


class Fleet:
    """The running processes of a :class:`Deployment`: servers (+ router); a context manager
    (everything stops on exit, on an exception or Ctrl-C), or :meth:`start` / :meth:`stop`.

    Args:
        deployment: from :func:`lab.fleet.deployment.resolve_deployment`.
        startup_timeout: seconds for every server to answer ``/health`` (they start in
            parallel), and again for the router to count them healthy.
        grace_period: seconds between SIGTERM and SIGKILL per process on stop.
        progress: print phase lines (``[fleet] ...`` plus each server's own).
        router: the router binary (:func:`lab.fleet.router.find_router`; default: the
            deployment's).
        log_dir: folder for the logs (default ``out/logs/``).
        cache_dirs: one compile/Triton cache folder per server (``VLLMServer(cache_dir=...)``);
            default: replica ``i`` of several gets ``out/cache/<release>-<GPUs>/replica<i>``, so
            replicas started together never share (or load half-written) artifacts. A
            ``VLLM_CACHE_ROOT`` already set wins.
        keep_ports: launch on the deployment's ports (the rendered 8000, 8001, ...); default:
            each server picks a free port and the router is given those.
        server_kwargs: more :class:`helpers.server.vllm_server.VLLMServer` options for the servers.
    """

    def __init__(
        self,
        deployment: Deployment,
        *,
        startup_timeout: float = 1800.0,
        grace_period: float = 30.0,
        progress: bool = True,
        router: Any = None,
        log_dir: str | Path | None = None,
        cache_dirs: Sequence[Any] | None = None,
        keep_ports: bool = False,
        **server_kwargs: Any,
    ):
        if deployment.nodes:
            raise CookbookError(
                "A multi-node DP+EP deployment runs one command per node: start them there "
                "(deployment.shell_commands()); Fleet runs single-node deployments."
            )
        self.deployment = deployment
        self.startup_timeout = float(startup_timeout)
        self.grace_period = float(grace_period)
        self.progress = progress
        self.router_binary = (
            router if router is not None else getattr(deployment.router, "router", None)
        )
        self.log_dir = Path(log_dir) if log_dir else None
        self.server_kwargs = server_kwargs
        self.cache_dirs = list(cache_dirs) if cache_dirs is not None else None
        self.keep_ports = keep_ports
        self.servers: list[VLLMServer] = []
        self.router: RouterServer | None = None
        self.startup_seconds: float | None = None
        self._names: dict[int, str] = {}  # id(process handle) -> "replica0" / "router"

    @property
    def attached(self) -> bool:
        """True for :func:`attach_fleet`'s handle: every process is someone else's (none
        owned here), so :meth:`stop` leaves them running."""
        procs = ([self.router] if self.router else []) + self.servers
        return bool(procs) and not any(p.owned for p in procs)

    # ---- addresses -----------------------------------------------------------------
    @property
    def entry(self) -> VLLMServer:
        """What clients talk to: the router (replicas) or the one server (DP+EP)."""
        if self.router is not None:
            return self.router
        if not self.servers:
            raise CookbookError("The fleet is not running: call start() first.")
        return self.servers[0]

    @property
    def url(self) -> str:
        """Root of the entry point (``http://host:port``)."""
        return self.entry.url

    @property
    def base_url(self) -> str:
        """OpenAI base of the entry point (``http://host:port/v1``): pass to the client / sweep."""
        return self.entry.base_url

    def client(self, **kwargs):
        """An ``openai.OpenAI`` client for the entry point (``kwargs``: the client's, e.g.
        ``timeout``). Send ``max_tokens`` with each request: the router's ``GET /v1/models``
        is no guide, vllm-router answers it from its first worker without a health check
        (HTTP 500 while that worker is down, vllm-project/router#135)."""
        return self.entry.client(**kwargs)

    @property
    def max_model_len(self) -> int | None:
        """Tokens per sequence the servers were launched with: their ``--max-model-len``, else
        what vLLM derives from a local checkpoint's ``config.json``
        (:func:`helpers.config.flagcheck.derived_max_model_len`); None when neither says."""
        from helpers.config.flagcheck import derived_max_model_len

        cfg = self.deployment.servers[0] if self.deployment.servers else self.deployment.base
        value = cfg.args.get("--max-model-len")
        if value not in (None, False, True):
            try:
                return int(value)
            except (TypeError, ValueError):
                return None
        derived = derived_max_model_len(cfg.model)
        return derived[0] if derived else None

    @property
    def served_model_name(self) -> str:
        return self.deployment.base.served_model_name

    @property
    def config(self):
        """One server's :class:`~helpers.config.serveconfig.ServeConfig` (the deployment's
        base): its served model name, model folder (the tokenizer) and ``--max-num-seqs``."""
        return self.deployment.base

    @property
    def gpu_count(self) -> int:
        """GPUs the deployment holds: replicas x GPUs each (at least 1 per replica: a CPU
        stand-in replica counts as one), for per-GPU throughput (:func:`helpers.bench.sweep.sweep`)."""
        return max(self.deployment.gpus_per_server, 1) * self.deployment.count

    def is_running(self) -> bool:
        """Every server (and the router) this fleet launched is running."""
        procs = ([self.router] if self.router else []) + self.servers
        return bool(self.servers) and all(p.is_running() for p in procs)

    def replica_states(self) -> list[tuple[int, bool, str]]:
        """``[(index, serving, why not)]`` per server: serving = running and ``/health`` 200.

        A replica stopped (:meth:`kill_replica`) or crashed says so (its ``crash`` text)."""
        out = []
        for i, srv in enumerate(self.servers):
            if srv.owned and not srv.is_running():
                why = srv.crash or ("stopped" if srv._stopped else "not running")
                out.append((i, False, why))
            elif not srv.healthy():
                out.append((i, False, f"{srv.url}/health does not answer 200"))
            else:
                out.append((i, True, ""))
        return out

    def describe(self) -> str:
        """``"2 replicas + router (replicas x h200): ports 8001, 8002 -> router 30001"``."""
        dep = self.deployment
        what = (
            f"{dep.count} replicas + router" if dep.layout == "replicas" else f"DP+EP x{dep.count}"
        )
        ports = ", ".join(str(s.port) for s in self.servers)
        tail = f" -> router {self.router.port}" if self.router is not None else ""
        return f"{what} ({dep.name} on {dep.base.target}): ports {ports}{tail}"

    def _same_deployment(self, other: Deployment) -> bool:
        def key(dep: Deployment):
            servers = [
                (str(c.model), [str(f) for f in c.with_port(None).cli_flags()], dict(c.env))
                for c in dep.servers
            ]
            r = dep.router
            router = (r.policy, dict(r.args), dict(r.env)) if r else None
            return (dep.name, dep.layout, dep.count, servers, router)

        return key(self.deployment) == key(other)

    def _say(self, msg: str) -> None:
        if self.progress:
            print(f"[fleet] {msg}", flush=True)

    def _log_path(self, stem: str) -> Path | None:
        if self.log_dir is None:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return self.log_dir / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.log"

    # ---- start ---------------------------------------------------------------------
    def _progress_for(self, name: str):
        """Each server's start-up phases as whole lines prefixed by its name (the servers
        start together: one updating line each would overwrite the others)."""
        if self.progress is not True:
            return self.progress
        said: dict[str, str] = {}

        def show(phase: str, elapsed: float) -> None:
            if said.get("phase") != phase:
                said["phase"] = phase
                print(f"[fleet] {name} [{elapsed:5.0f}s] {phase}", flush=True)

        return show

    def start(self) -> Fleet:
        """Launch every server (in parallel), wait for all their ``/health``, then the router
        and its ``/readiness`` with every worker healthy. Running: returns itself; stopped or
        with a process ended: stopped fully and started clean.

        Raises:
            FlagError: a flag rejected by vLLM's parser or the router's ``--help`` (nothing
                launched).
            CookbookError: an attached fleet (it belongs to whoever launched it).
            ServerStartError: a server or the router failed to start (everything already
                launched is stopped first; the message names which one and carries its log);
                a server that dies is reported at once, whichever it is. A port the fleet
                picked that another process takes before vLLM binds it is picked again, once
                a server (not with ``keep_ports``).
            KeyboardInterrupt: interrupted; every process launched so far was ended first.
        """
        if self.attached:
            raise CookbookError(
                "This fleet is attached (attach_fleet): its processes belong to whoever "
                "launched them; it cannot start them."
            )
        if self.is_running():
            self._say(
                f"already running: {self.describe()} ({self.base_url}); stop() first to start afresh"
            )
            return self
        if self.servers or self.router:
            self._say("starting afresh: a process of the earlier start has ended")
            self.stop(check=False)
        self.servers, self.router, self._names = [], None, {}
        dep = self.deployment
        t0 = time.monotonic()
        for cfg in dep.servers:  # every line checked before the first process exists
            cfg.validate()
        if dep.router is not None:
            dataclasses.replace(dep.router, router=self.router_binary).validate()
        _FLEETS.add(self)
        try:
            for i, cfg in enumerate(dep.servers):
                stem = f"replica{i}" if dep.layout == "replicas" else "dp-ep"
                kw = self.server_options(i, stem)
                if not self.keep_ports:  # the rendered 8000, 8001, ... may be taken here
                    cfg = cfg.with_port(None)
                srv = VLLMServer(cfg, log_path=self._log_path(stem), **kw)
                srv.part_of = self
                self._names[id(srv)] = stem
                self.servers.append(srv)  # known to the fleet before its process exists
                srv.start(wait=False)
                self._say(f"{stem}: pid {srv.pid}, port {srv.port}, log {srv.log_path}")
            self._wait_all(t0)
            if dep.router is not None:
                self.start_router(timeout=max(30.0, self.startup_timeout - (time.monotonic() - t0)))
        except BaseException:
            self.stop(check=False)
            raise
        self.startup_seconds = time.monotonic() - t0
        self._say(f"ready in {self.startup_seconds:.0f} s: {self.base_url}")
        return self

    def server_options(self, index: int, stem: str | None = None) -> dict[str, Any]:
        """The :class:`~helpers.server.vllm_server.VLLMServer` options of server ``index``: the
        fleet's timeouts and progress, ``server_kwargs`` and its cache folder (``cache_dirs``,
        else :func:`replica_cache_root` ``/replica<index>`` when there are several servers)."""
        kw: dict[str, Any] = {
            "startup_timeout": self.startup_timeout,
            "grace_period": self.grace_period,
            "progress": self._progress_for(stem) if stem is not None else self.progress,
        }
        kw.update(self.server_kwargs)
        if self.cache_dirs is not None:
            kw["cache_dir"] = self.cache_dirs[index]
        elif len(self.deployment.servers) > 1 and "cache_dir" not in self.server_kwargs:
            kw["cache_dir"] = replica_cache_root() / f"replica{index}"
        return kw

    def _wait_all(self, t0: float) -> None:
        """Wait on every server at once (:meth:`VLLMServer.readiness`): the first failure, of
        whichever server, ends the wait."""
        left = max(1.0, self.startup_timeout - (time.monotonic() - t0))
        pending = {i: srv.readiness(timeout=left) for i, srv in enumerate(self.servers)}
        again: set[int] = set()
        while pending:
            for i, look in list(pending.items()):
                try:
                    ready = next(look)
                except ServerStartError as e:
                    srv = self.servers[i]
                    # a port picked here and taken before vLLM bound it (a stranger answers on
                    # it, or vLLM's bind finds it held): once more, as VLLMServer.start does
                    if srv.phase == "port taken" and not self.keep_ports and i not in again:
                        again.add(i)
                        self._say(f"{self._names[id(srv)]}: port {srv.port} was taken while "
                                  "vLLM started; starting again on another")  # fmt: skip
                        srv.port = None
                        srv.start(wait=False)
                        pending[i] = srv.readiness(timeout=left)
                        continue
                    raise ServerStartError(
                        f"Server {i} of the {self.deployment.label} deployment failed to start. {e}",
                        log_tail=e.log_tail,
                        diagnosis=e.diagnosis,
                    ) from e
                if ready:
                    del pending[i]
            if pending:
                time.sleep(0.5)

    def start_router(
        self, router: RouterConfig | None = None, *, timeout: float = 120.0
    ) -> RouterServer:
        """Start the router in front of the running servers (:meth:`start` calls it; call it
        yourself to add one later) and wait for ``/readiness``.

        Args:
            router: the router config (default: the deployment's); its ``worker_urls`` are
                replaced by the running servers' URLs, its Prometheus port by a free one.
            timeout: seconds for every worker to be counted healthy.
        Raises:
            CookbookError: no router config, or the servers are not running.
            FlagError: a router flag the installed binary rejects.
            ServerStartError: the router failed to start or to see its workers; the router
                (only) is stopped again.
        """
        cfg = router or self.deployment.router
        if cfg is None:
            raise CookbookError("This deployment has no router: resolve the 'replicas' deployment.")
        if not self.servers or not all(s.is_running() for s in self.servers):
            raise CookbookError("The servers are not running: call start() first.")
        cfg = dataclasses.replace(
            cfg,
            worker_urls=[s.url for s in self.servers],
            router=self.router_binary if self.router_binary is not None else cfg.router,
            prometheus_port=free_port(),
        )
        self.router = RouterServer(
            cfg,
            log_path=self._log_path("router"),
            startup_timeout=60.0,
            grace_period=min(self.grace_period, 10.0),
            progress=False,
            cache_dir=None,
        )
        self.router.part_of = self
        self._names[id(self.router)] = "router"
        try:
            self.router.start()
            self._say(
                f"router: pid {self.router.pid}, {self.router.url} -> {', '.join(cfg.worker_urls)}"
            )
            self.wait_workers(timeout=timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                self.router.stop(verbose=False)
            self.router = None
            raise
        return self.router

    def wait_workers(self, expected: int | None = None, timeout: float = 120.0) -> dict[str, Any]:
        """Wait until the router's ``/readiness`` counts ``expected`` (default: all) workers
        healthy; return its last answer.

        Raises:
            ServerStartError: the router exited, or ``timeout`` seconds passed (names the
                workers ``/workers`` reports unhealthy and the router log tail).
        """
        if self.router is None:
            raise CookbookError("This deployment has no router.")
        want = len(self.servers) if expected is None else int(expected)
        t0 = time.monotonic()
        last: dict[str, Any] = {}
        while True:
            if not self.router.is_running():
                raise ServerStartError(
                    f"vllm-router exited while waiting for its workers. Log: {self.router.log_path}\n"
                    + self.router.log_tail(30),
                    log_tail=self.router.log_tail(30),
                )
            last = self.router.readiness()
            healthy = int(last.get("healthy_workers") or 0)
            if healthy >= want and last.get("total_workers") == len(self.servers):
                self._say(
                    f"router reports {last['healthy_workers']}/{last['total_workers']} workers healthy"
                )
                return last
            if time.monotonic() - t0 > timeout:
                try:
                    sick = [w["url"] for w in self.router.workers() if not w.get("is_healthy")]
                except Exception:  # noqa: BLE001
                    sick = ["(no /workers answer)"]
                raise ServerStartError(
                    f"vllm-router counted {last.get('healthy_workers')} of {want} workers healthy "
                    f"after {timeout:.0f} s (unhealthy: {sick}); check those servers' logs and "
                    f"the router log {self.router.log_path}.",
                    log_tail=self.router.log_tail(30),
                )
            time.sleep(0.5)

    def healthy_workers(self) -> list[str]:
        """URLs the router currently marks healthy (``GET /workers``)."""
        if self.router is None:
            return [s.url for s in self.servers if s.healthy()]
        return [w["url"] for w in self.router.workers() if w.get("is_healthy")]

    def kill_replica(self, index: int) -> None:
        """Stop replica ``index`` (its whole process group) while the rest keep serving (failure
        drills: the router's health checks notice, every 2 s, unhealthy after 2 failures)."""
        self.servers[index].stop()
        self._say(f"replica {index} stopped")

    # ---- stop ----------------------------------------------------------------------
    def _name(self, proc: VLLMServer) -> str:
        return self._names.get(id(proc), f"pid {proc.pid}")

    def stop(self, *, check: bool = True) -> None:
        """Stop the router first (no new requests), then every server; idempotent. All get
        SIGTERM at once, SIGKILL after ``grace_period``; a Ctrl-C while waiting kills them all at
        once, then the KeyboardInterrupt goes on.

        Raises:
            CookbookError: ``check`` and a process survived (names them); every process is
                still signalled before the error is raised.
        """
        procs = ([self.router] if self.router else []) + list(reversed(self.servers))
        live = [p for p in procs if p.owned and p._proc is not None and not p._stopped]
        interrupted = False
        if live:
            self._say(
                f"stopping {', '.join(self._name(p) for p in live)} (SIGTERM, SIGKILL after "
                f"{self.grace_period:.0f} s; Ctrl-C kills at once)"
            )
            try:
                self._end_together(live)
            except KeyboardInterrupt:
                interrupted = True
                self._say("Ctrl-C: killing every process of the fleet now")
        errors: list[str] = []
        with deferred_interrupts():  # the last kills and checks run to the end
            if interrupted:
                for p in live:
                    _signal_group(p, signal.SIGKILL)
            for proc in procs:
                try:
                    proc.stop(verbose=False)
                except Exception as e:  # noqa: BLE001 - stop the rest, then report
                    errors.append(str(e))
        _FLEETS.discard(self)
        if self.attached:
            self._say("attached fleet: left running (stop it where it was launched)")
        elif (self.servers or self.router) and not errors:
            self._say("stopped: router and servers ended")
        if interrupted:
            raise KeyboardInterrupt
        if errors and check:
            raise CookbookError("Some fleet processes did not stop: " + " | ".join(errors))

    def _end_together(self, live: list[VLLMServer]) -> None:
        """SIGTERM every live process group at once; wait for all of them (up to
        ``grace_period``), naming each as it ends; SIGKILL the rest."""
        t0 = time.monotonic()
        for p in live:
            _signal_group(p, signal.SIGTERM)
        waiting = list(live)
        while waiting and time.monotonic() - t0 < self.grace_period:
            for p in list(waiting):
                rec = p._record
                if rec is None or not rec.processes():
                    waiting.remove(p)
                    self._say(f"{self._name(p)} ended ({time.monotonic() - t0:.1f} s)")
            if waiting:
                time.sleep(0.2)
        for p in waiting:
            self._say(f"{self._name(p)}: still running after {self.grace_period:.0f} s: SIGKILL")
            _signal_group(p, signal.SIGKILL)

    def processes(self) -> list[int]:
        """PIDs still alive of every process the fleet launched (empty after :meth:`stop`)."""
        pids = []
        for proc in ([self.router] if self.router else []) + self.servers:
            rec = proc._record
            if rec is not None:
                pids += [p.pid for p in rec.processes()]
        return pids

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop(check=exc[0] is None)

    def __repr__(self) -> str:
        return f"<Fleet {self.deployment.name} x{self.deployment.count} servers={self.servers} router={self.router}>"


def replica_cache_root() -> Path:
    """``out/cache/<release>-<GPUs>``: the folder whose ``replica<i>`` subfolders hold each
    replica's compile and Triton caches (:func:`helpers.server.command.compile_cache_key`)."""
    from helpers.paths import out_dir
    from helpers.server.command import compile_cache_key

    return out_dir("cache") / compile_cache_key()


def _signal_group(proc: VLLMServer, sig: int) -> None:
    """``sig`` to every process of one launch (its process group and recorded processes)."""
    rec = proc._record
    if rec is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(rec.pgid, sig)
    for q in rec.processes():
        with contextlib.suppress(Exception):
            q.send_signal(sig)


def running_fleets() -> list[Fleet]:
    """The fleets this Python process launched and has not stopped."""
    return [f for f in list(_FLEETS) if not f.attached and (f.servers or f.router)]


def metric_total(base_url: str, name: str = "vllm:request_success_total") -> float:
    """Sum of a Prometheus counter over its labels at ``<root>/metrics`` (e.g. one replica's
    finished requests; ``vllm:request_success_total`` is labelled by finish reason)."""
    from helpers.bench.metrics import parse_prometheus, scrape_metrics

    return float(parse_prometheus(scrape_metrics(base_url)).get(name, 0.0))
