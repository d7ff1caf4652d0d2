"""The notebook verbs for one server: ``launch_server``, ``attach_server``, ``stop_server``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from helpers.config.run import Run
from helpers.errors import CookbookError
from helpers.server.vllm_server import _LIVE, VLLMServer


def running_servers() -> list[VLLMServer]:
    """The servers this Python process launched that are still running (newest last)."""
    live = [
        s
        for s in list(_LIVE)
        if s.owned and not s._stopped and s._proc is not None and s._proc.poll() is None
    ]
    return sorted(live, key=lambda s: s._launched_at or 0.0)


def _same_launch(a: Any, b: Any) -> bool:
    def key(cfg: Any):
        flags = (
            [str(f) for f in cfg.cli_flags()] if callable(getattr(cfg, "cli_flags", None)) else []
        )
        return (str(getattr(cfg, "model", "")), flags, dict(getattr(cfg, "env", None) or {}))

    return key(a) == key(b)


def launch_server(
    config: Any, *, server_url: str | None = None, reuse: bool = True, **kwargs: Any
) -> VLLMServer:
    """Start a vLLM server for ``config`` and wait until it is ready (one notebook line).

    With ``server_url``, attach to the server running there instead (``stop()`` leaves it
    running). Re-running the cell never starts a second server: one of this process with the
    same model, flags and environment is reused (``reuse=True``); any other it launched, or a
    fleet it runs (as a whole), is stopped first (one GPU, one server). Every case is printed.

    Args:
        config: the run :func:`helpers.weights.prepare.fetch` returned (kept as ``srv.run``),
            or a :class:`helpers.config.serveconfig.ServeConfig` with a model.
        server_url: ``http://host:port`` of a running server (default: the run's).
        reuse: reuse a running server of this process with the same command.
        **kwargs: :class:`VLLMServer` options (``startup_timeout``, ``progress``, ...).
    Returns:
        The running :class:`VLLMServer` (``.base_url``, ``.client()``, ``.stop()``).
    Raises:
        ServerStartError: see :meth:`VLLMServer.start`.
        KeyboardInterrupt: interrupted during start-up; the server was ended first.
        CookbookError: a run that was not fetched (names :func:`~helpers.weights.prepare.fetch`).
    """
    if isinstance(config, Run):
        run = config
        if run.served is None and not run.attached:
            raise CookbookError(
                "launch_server: this run has nothing to serve yet: run = fetch(run) gets the "
                "checkpoint, the weightless architecture or the stand-in first."
            )
        server_url = server_url or run.server_url
        config = run.config
    else:
        run = Run.of_config(config, server_url)
    run = replace(run, server_url=server_url or None)
    srv = _launch(config, run, reuse=reuse, **kwargs)
    srv.run = run
    return srv


def _launch(config: Any, run: Run, *, reuse: bool, **kwargs: Any) -> VLLMServer:
    """:func:`launch_server` on a config: attach (``run.server_url``), reuse, or start."""
    if run.server_url:
        srv = attach_server(run.server_url)
        srv.intended = config  # the notebook's own config: serves() skips what it lacks
        srv.progress = True  # say what stop() leaves running
        print(f"[vllm] attached to {srv.base_url}: serving {srv.model_name}", flush=True)
        return srv
    running = running_servers()
    fleets = {id(s.part_of): s.part_of for s in running if s.part_of is not None}
    for fleet in fleets.values():  # a fleet is stopped whole, and said so, never replica by replica
        what = fleet.describe() if callable(getattr(fleet, "describe", None)) else repr(fleet)
        print(
            f"[vllm] stopping the fleet this kernel started ({what}): one kernel serves one "
            "deployment, and this server needs its GPUs (launch_fleet again to go back)",
            flush=True,
        )
        fleet.stop(check=False)
    for old in [s for s in running if s.part_of is None]:
        if reuse and _same_launch(old.config, config) and old.healthy():
            print(
                f"[vllm] reusing the server this kernel already runs: pid {old.pid}, {old.base_url} "
                f"(srv.stop() first to start afresh); the same command:\n{old.launched_command()}",
                flush=True,
            )
            return old
        print(
            f"[vllm] stopping the server this kernel started earlier (pid {old.pid}, port {old.port}): "
            "its command differs, and one GPU runs one server",
            flush=True,
        )
        old.stop()
    srv = VLLMServer(config, **kwargs)
    srv.run = run  # before start(): it prints how the launch differs from run.target's command
    return srv.start()


def attach_server(base_url: str, config: Any = None) -> VLLMServer:
    """Use a server that is already running at ``base_url`` (it is never stopped by us)."""
    return VLLMServer.attach(base_url, config)


def stop_server(server: VLLMServer) -> None:
    """Stop ``server`` if this process launched it (see :meth:`VLLMServer.stop`)."""
    server.stop()
