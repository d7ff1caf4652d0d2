"""vLLM's router (``vllm-router``, PyPI ``vllm-router==0.1.17``, vLLM's own Rust router) that
``replicas`` deployments (:mod:`lab.fleet.deployment`) put N copies of ``vllm serve`` behind:
where it is, what its ``--help`` accepts, how it runs under the server manager.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helpers.config.serveconfig import command_lines
from helpers.errors import CookbookError, FlagError, RecipeError
from helpers.server.vllm_server import VLLMServer

#: The router release the registry pins (cookbook/recipe.yaml deployments.replicas.router).
ROUTER_VERSION = "0.1.17"
#: Router flags the fleet sets itself (like --host/--port for vLLM); the registry never does.
ROUTER_MANAGED = ("--host", "--port", "--worker-urls", "--prometheus-port", "--prometheus-host")


def find_router(binary: str | Path | Sequence[str] | None = None) -> list[str]:
    """The argv prefix that runs ``vllm-router``, looked up in order: ``binary`` (a path, a
    command name, or an argv list); ``$VLLM_ROUTER``; ``vllm-router`` on ``PATH``; next to this
    Python; ``python -m vllm_router.launch_router`` when the package is importable.

    Raises:
        CookbookError: not found; names the install command.
    """
    if binary is not None and not isinstance(binary, (str, Path)):
        return [str(b) for b in binary]
    for cand in (binary, os.environ.get("VLLM_ROUTER")):
        if cand:
            found = shutil.which(str(cand)) or (str(cand) if Path(str(cand)).is_file() else None)
            if not found:
                raise CookbookError(
                    f"vllm-router not found at {cand!r}: pass the path of the `vllm-router` "
                    f"script, or `pip install vllm-router=={ROUTER_VERSION}`."
                )
            return [found]
    found = shutil.which("vllm-router")
    if found:
        return [found]
    sibling = Path(sys.executable).parent / "vllm-router"
    if sibling.is_file():
        return [str(sibling)]
    if importlib.util.find_spec("vllm_router") is not None:
        return [sys.executable, "-m", "vllm_router.launch_router"]
    raise CookbookError(
        f"vllm-router is not installed: `pip install vllm-router=={ROUTER_VERSION}` (a prebuilt "
        "Rust binary with a `vllm-router` command), or pass its path (router=...)."
    )


@functools.lru_cache(maxsize=8)
def _router_help(prefix: tuple[str, ...]) -> str:
    try:
        proc = subprocess.run(
            [*prefix, "--help"], capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CookbookError(
            f"`{shlex.join(prefix)} --help` did not run ({e}): reinstall vllm-router."
        ) from e
    if proc.returncode != 0 or "usage:" not in proc.stdout:
        raise CookbookError(
            f"`{shlex.join(prefix)} --help` failed (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout)[-400:]}; reinstall vllm-router=={ROUTER_VERSION}."
        )
    return proc.stdout


def router_options(router: str | Path | Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """The options the installed router accepts, read from its own ``--help`` usage block.

    Returns:
        ``{"--policy": {"takes": "one", "choices": ["random", "round_robin", ...]}, ...}``
        with ``takes`` one of ``"none"`` (a switch), ``"one"`` (one value), ``"many"``
        (a list, ``[X ...]``), and ``choices`` when the help lists them.

    Raises:
        CookbookError: the router is not installed or ``--help`` fails.
    """
    text = _router_help(tuple(find_router(router)))
    usage = text.split("\n\n", 1)[0]
    opts: dict[str, dict[str, Any]] = {}
    for item in re.findall(r"\[(--[\w-]+(?:[^\[\]]|\[[^\[\]]*\])*)\]", usage):
        parts = item.split(None, 1)
        name, rest = parts[0], (parts[1].strip() if len(parts) > 1 else "")
        entry: dict[str, Any] = {"takes": "none"}
        if rest:
            entry["takes"] = "many" if "..." in rest else "one"
            m = re.match(r"\{([^}]*)\}", rest)
            if m:
                entry["choices"] = m.group(1).split(",")
        opts[name] = entry
    if "--worker-urls" not in opts:
        raise CookbookError(f"Could not read the options from `vllm-router --help`:\n{usage[:400]}")
    return opts


def validate_router_argv(
    argv: Sequence[str], router: str | Path | Sequence[str] | None = None
) -> None:
    """Check router flags (``argv`` without the program) against the installed ``--help``.

    Every ``--flag`` must be an option the binary lists; a switch takes no value, a single
    option exactly one, a list option at least one; a value must be one of the listed
    choices (e.g. ``--policy``).

    Raises:
        FlagError: naming each rejected flag and the accepted values.
    """
    opts = router_options(router)
    problems: list[str] = []
    bad: list[str] = []
    argv = [str(a) for a in argv]
    i = 0
    while i < len(argv):
        flag = argv[i]
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        values, spec = argv[i + 1 : j], opts.get(flag)
        if not flag.startswith("--"):
            problem = f"{flag!r} is not a flag (a value without a flag before it)"
            j = i + 1
        elif spec is None:
            problem = f"{flag} is not an option of vllm-router"
        elif spec["takes"] == "none" and values:
            problem = f"{flag} is a switch but got {values}"
        elif spec["takes"] == "one" and len(values) != 1:
            problem = f"{flag} takes one value, got {values}"
        elif spec["takes"] == "many" and not values:
            problem = f"{flag} needs at least one value"
        elif spec.get("choices") and any(v not in spec["choices"] for v in values):
            problem = f"{flag} {' '.join(values)}: valid values are {', '.join(spec['choices'])}"
        else:
            problem = ""
        if problem:
            bad.append(flag)
            problems.append(problem)
        i = j
    if bad:
        raise FlagError(
            f"vllm-router rejects {', '.join(dict.fromkeys(bad))} ({'; '.join(problems)}): fix the "
            "scale-out notebook's policy parameter (or resolve_deployment's policy=), the router "
            "args in cookbook/recipe.yaml (deployments.replicas.router), or install "
            f"vllm-router=={ROUTER_VERSION}.",
            flags=list(dict.fromkeys(bad)),
        )


@dataclasses.dataclass
class RouterConfig:
    """One ``vllm-router`` process: workers, policy, flags; duck-types what
    :class:`helpers.server.vllm_server.VLLMServer` reads of a ServeConfig.

    Attributes:
        worker_urls: replica roots, ``http://host:port``.
        policy: ``--policy`` (``round_robin``, ``cache_aware``, ``power_of_two``, ...).
        args: more router flags ``{flag: value}`` (``True``: a switch).
        host, port: where the router listens (``port=None``: picked at launch).
        prometheus_port: the router's own Prometheus endpoint (``None``: picked at launch;
            its default 29000 would clash between two routers on one machine).
        env: extra environment for the router process.
        router: the binary (see :func:`find_router`); None looks it up at launch.
    """

    worker_urls: list[str]
    policy: str = "round_robin"
    args: dict[str, Any] = dataclasses.field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int | None = None
    prometheus_port: int | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    router: Any = None
    served_model_name: str = "vllm-router"
    model: str = "vllm-router"
    target: str | None = None
    vllm_version: str | None = None

    def cli_flags(self) -> list[str]:
        """Router flags without the program, ``--host`` and ``--port``."""
        argv = ["--worker-urls", *self.worker_urls, "--policy", self.policy]
        for flag, value in self.args.items():
            if flag in ROUTER_MANAGED:
                raise RecipeError(f"{flag} is set by the fleet; remove it from the router args.")
            if value is None or value is False:
                continue
            argv += [flag] if value is True else [flag, str(value)]
        if self.prometheus_port:
            argv += ["--prometheus-host", "127.0.0.1", "--prometheus-port"]
            argv.append(str(self.prometheus_port))
        return argv

    def argv(self, program: Sequence[str] = ("vllm-router",)) -> list[str]:
        """``[program..., --host H --port P, *flags]``."""
        return [*program, "--host", self.host, "--port", str(self.port or 30000), *self.cli_flags()]

    def shell_command(self) -> str:
        """The router command for a terminal (one flag per line)."""
        return command_lines(self.argv())

    def validate(self) -> None:
        """Check the flags with the installed router's ``--help`` (:func:`validate_router_argv`)."""
        validate_router_argv(self.argv(()), self.router)


class RouterServer(VLLMServer):
    """``vllm-router`` under the server manager: own process group, log, record, ``stop()``.
    Its ``/health`` answers 200 once it runs, before any worker is healthy:
    :meth:`lab.fleet.fleet.Fleet.wait_workers` waits for ``/readiness``."""

    def _launch_argv(self) -> list[str]:
        cfg: RouterConfig = self.config
        cfg.port = self.port
        return cfg.argv(find_router(cfg.router))

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({k: str(v) for k, v in self.config.env.items()})
        return env

    def readiness(self, timeout: float = 5.0) -> dict[str, Any]:
        """``GET /readiness``: ``{"status", "healthy_workers", "total_workers"}`` (any status code)."""
        try:
            status, body = self._get("/readiness", timeout=timeout)
        except OSError as e:
            return {"status": f"no answer ({e})", "healthy_workers": 0, "total_workers": None}
        try:
            data = json.loads(body)
        except ValueError:
            data = {"status": body[:200]}
        data["http_status"] = status
        return data

    def workers(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        """``GET /workers``: one dict per worker with ``url``, ``is_healthy``, ``load``."""
        status, body = self._get("/workers", timeout=timeout)
        if status != 200:
            raise CookbookError(f"{self.url}/workers answered HTTP {status}: {body[:200]}")
        return list(json.loads(body).get("workers", []))
