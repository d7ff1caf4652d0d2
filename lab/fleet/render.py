"""One :class:`~helpers.config.serveconfig.ServeConfig` and a replica count, rendered for the
engines users scale out on: docker compose, KServe (which is also llm-d's) and the vLLM
production-stack chart. Each carries the same engine flags byte for byte
(``cfg.cli_flags(weights=False)``), the GPU count, host memory, model id, revision and drafter;
:func:`helpers.config.flagtable.check_config` reads each back and checks it against the
release's flag table.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from typing import Any

import yaml

from helpers.config import flagtable
from helpers.config.serveconfig import ServeConfig
from helpers.errors import RecipeError
from lab.fleet.deployment import Deployment, resolve_deployment
from lab.fleet.router import ROUTER_VERSION

#: Where a served ``vllm serve`` listens inside a container (each engine's default port).
PORT = flagtable.PORT


def _host_memory_gib(cfg: ServeConfig) -> int:
    """Host memory to request (GiB): the checkpoint and drafter, which vLLM reads through the
    page cache while it loads (``ServeConfig.weights_gib`` + ``drafter_gib``), rounded up."""
    return max(1, math.ceil(cfg.weights_gib + cfg.drafter_gib))


def _cpus(cfg: ServeConfig) -> int:
    """CPU cores to request: vLLM's API server and engine core processes, and one worker
    process per GPU (vLLM 0.32.0's process layout, ``vllm/v1/engine/core.py``)."""
    return 2 + cfg.gpu_count


def _gpu_target(cfg: ServeConfig) -> None:
    if cfg.stand_in or not cfg.docker_image or not cfg.model:
        raise RecipeError(
            f"Target {cfg.target!r} has no GPU image or hub model to render for a cluster: pick a "
            "GPU target (the stand-in runs on this machine only)."
        )


def _replicas(replicas: object) -> int:
    """``replicas`` checked: a whole number of 1 or more (-1, 1.5, "2" and None were rendered).

    Raises:
        RecipeError: naming the value and what it takes.
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise RecipeError(
            f"replicas={replicas!r}: pass a whole number of 1 or more (copies of the server)."
        )
    return replicas


def compose(dep: Deployment | ServeConfig, replicas: int = 2, *, hf_cache: str = "~/.cache/huggingface") -> str:  # fmt: skip
    """A docker compose file: one service per replica (or the DP+EP server) + the router.

    Replicas run the same command (port :data:`PORT` inside, host port ``8000 + i``), reserving
    GPUs and host memory through ``deploy.resources.reservations`` (Compose Specification,
    docker-compose 1.29.2 ``compose/config/compose_spec.json``); the router, from a Python image
    with the pinned ``vllm-router``, waits for their health checks. ``vllm/vllm-openai``'s
    entrypoint is ``vllm serve``, so ``command`` starts at the model.

    Args:
        dep: a resolved deployment, or one config (then ``replicas`` copies of it behind the
            router: ``resolve_deployment("replicas", ..., base=dep)``).
        replicas: replicas when ``dep`` is a config.
        hf_cache: the host's Hugging Face cache, mounted into every replica.

    Raises:
        RecipeError: as :func:`lab.fleet.deployment.resolve_deployment` (a bad count).
    """
    replicas = _replicas(replicas)
    if isinstance(dep, ServeConfig):
        dep = resolve_deployment("replicas", dep.target, base=dep, count=replicas)
    services: dict[str, Any] = {}
    cfgs = [dep.nodes["head"]] if dep.nodes else dep.servers
    for i, cfg in enumerate(cfgs):
        name = f"vllm-{i}" if dep.layout == "replicas" else "vllm"
        env = {k: v for k, v in cfg.env.items() if k != "CUDA_VISIBLE_DEVICES"}
        svc: dict[str, Any] = {
            "image": cfg.docker_image or dep.base.docker_image or "vllm/vllm-openai",
            "ipc": "host",
            "command": cfg.with_port(PORT, host="0.0.0.0").serve_argv()[2:],
            "environment": {**env, "HF_TOKEN": "${HF_TOKEN:-}"},
            "volumes": [f"{hf_cache}:/root/.cache/huggingface"],
            "ports": [f"{8000 + i}:{PORT}"],
            "healthcheck": {
                "test": ["CMD", "curl", "-fs", f"http://localhost:{PORT}/health"],
                "interval": "10s",
                "retries": 180,
            },
        }
        gpus = cfg.env.get("CUDA_VISIBLE_DEVICES")
        if gpus:
            devices = [{"driver": "nvidia", "device_ids": gpus.split(","), "capabilities": ["gpu"]}]
            reserve = {"memory": f"{_host_memory_gib(cfg)}g", "devices": devices}
            svc["deploy"] = {"resources": {"reservations": reserve}}
        services[name] = svc
    if dep.router is not None:
        r = dataclasses.replace(
            dep.router,
            worker_urls=[f"http://vllm-{i}:{PORT}" for i in range(len(dep.servers))],
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


def _k8s_name(cfg: ServeConfig) -> str:
    return "-".join(p for p in (cfg.served_model_name, cfg.target) if p).lower().replace(".", "-")


def kserve(cfg: ServeConfig, replicas: int = 2, *, hf_secret: str = "hf-token") -> str:
    """A KServe ``LLMInferenceService`` (``serving.kserve.io/v1alpha2``) serving ``cfg``.

    KServe's ``LLMInferenceService`` is built on llm-d (its router's scheduler is llm-d's
    endpoint picker; vLLM docs "KServe"), so this is the llm-d rendering too. Field names
    from KServe's Go types (``pkg/apis/serving/v1alpha2/llm_inference_service_types.go``,
    main branch of August 2026, before v0.21.0): ``spec.model.uri`` / ``name``,
    ``spec.replicas``, ``spec.template`` (a ``corev1.PodSpec``), ``spec.router.route`` /
    ``gateway`` / ``scheduler``. The storage initializer downloads ``hf://MODEL:REVISION``
    (kserve-storage 0.21.0: ``hf://owner/model[:revision]``) to ``/mnt/models``; KServe's
    ``kserve-config-llm-template`` preset runs ``vllm serve /mnt/models --served-model-name
    NAME --port 8000 ... $@`` with the container's ``args`` as ``$@``, so ``args`` is
    ``cfg.cli_flags(weights=False)``. ``spec.parallelism`` stays unset: the preset would add a second
    ``--tensor-parallel-size`` to the one in the flags; the GPU count is the container's
    ``nvidia.com/gpu`` limit.

    Args:
        cfg: one server's config (a GPU target).
        replicas: pods, each one copy of the server (``spec.replicas``).
        hf_secret: the Kubernetes Secret holding the Hugging Face token (key ``token``).

    Raises:
        RecipeError: ``cfg`` is the CPU stand-in (no image, no hub model).
    """
    replicas = _replicas(replicas)
    _gpu_target(cfg)
    env = [{"name": k, "value": str(v)} for k, v in cfg.env.items()]
    secret = {"name": hf_secret, "key": "token", "optional": True}
    env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": secret}})
    gpus = str(cfg.gpu_count)
    main = {
        "name": "main",
        "image": cfg.docker_image,
        "args": cfg.cli_flags(weights=False),
        "env": env,
        "resources": {
            "limits": {"nvidia.com/gpu": gpus},
            "requests": {
                "nvidia.com/gpu": gpus,
                "cpu": str(_cpus(cfg)),
                "memory": f"{_host_memory_gib(cfg)}Gi",
            },
        },
    }
    uri = f"hf://{cfg.model}" + (f":{cfg.revision}" if cfg.revision else "")
    doc = {
        "apiVersion": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "metadata": {"name": _k8s_name(cfg)},
        "spec": {
            "model": {"uri": uri, "name": cfg.served_model_name},
            "replicas": replicas,
            "template": {"containers": [main]},
            "router": {"route": {}, "gateway": {}, "scheduler": {}},
        },
    }
    return yaml.safe_dump(doc, sort_keys=False, width=100)


#: The prefix-caching switch the production-stack chart always writes (``vllmConfig``).
_PREFIX = {"--enable-prefix-caching": True, "--no-enable-prefix-caching": False}


def production_stack(cfg: ServeConfig, replicas: int = 2, *, hf_secret: str = "hf-token") -> str:
    """The vLLM production-stack Helm chart's ``values.yaml`` serving ``cfg``.

    Keys as the chart ``vllm-stack`` 0.1.12 documents them (``helm/README.md``,
    ``helm/values.yaml``): ``servingEngineSpec.modelSpec[]`` with ``name``, ``repository`` /
    ``tag`` (the image), ``modelURL``, ``modelRevision``, ``replicaCount``, ``requestCPU`` /
    ``requestMemory`` / ``requestGPU``, ``hf_token`` (a Secret reference), ``env`` and
    ``vllmConfig``. Its template runs ``vllm serve MODEL_URL --host 0.0.0.0 --port 8000``,
    then ``vllmConfig``'s switches, ``vllmConfig.extraArgs`` verbatim, then ``--revision``
    (``helm/templates/deployment-vllm-multi.yaml``), so ``extraArgs`` is
    ``--served-model-name NAME`` + ``cfg.cli_flags(weights=False)``. The template always writes one of
    ``--enable-prefix-caching`` / ``--no-enable-prefix-caching`` from
    ``vllmConfig.enablePrefixCaching``: it is set to the command's own choice (vLLM takes the
    repeated switch). NOT checked against a published schema: the chart's
    ``values.schema.json`` is on GitHub only (CI reaches PyPI alone, and copies of it are not
    committed here); ``tests/lab/fleet/test_renderings.py`` checks the keys listed here.

    Args:
        cfg: one server's config (a GPU target).
        replicas: ``replicaCount``.
        hf_secret: the Kubernetes Secret holding the Hugging Face token (key ``token``).

    Raises:
        RecipeError: ``cfg`` is the CPU stand-in, or its command sets neither prefix-caching
            switch (the chart would choose one for it).
    """
    replicas = _replicas(replicas)
    _gpu_target(cfg)
    choice = [_PREFIX[f] for f in _PREFIX if cfg.args.get(f)]
    if len(choice) != 1:
        raise RecipeError(
            f"The {cfg.target} command sets {'both' if choice else 'neither'} of "
            "--enable-prefix-caching / --no-enable-prefix-caching; the production-stack chart "
            "always passes one, so set exactly one (extra_args)."
        )
    image, _, tag = cfg.docker_image.rpartition(":")
    spec: dict[str, Any] = {
        "name": _k8s_name(cfg),
        "repository": image,
        "tag": tag,
        "modelURL": cfg.model,
        "replicaCount": replicas,
        "requestCPU": _cpus(cfg),
        "requestMemory": f"{_host_memory_gib(cfg)}Gi",
        "requestGPU": cfg.gpu_count,
        "vllmConfig": {
            "enablePrefixCaching": choice[0],
            "extraArgs": [
                "--served-model-name",
                cfg.served_model_name,
                *cfg.cli_flags(weights=False),
            ],
        },
        "hf_token": {"secretName": hf_secret, "secretKey": "token"},
        "env": [{"name": k, "value": str(v)} for k, v in cfg.env.items()],
    }
    if cfg.revision:
        spec["modelRevision"] = cfg.revision
    return yaml.safe_dump({"servingEngineSpec": {"modelSpec": [spec]}}, sort_keys=False, width=100)


def renderings(cfg: ServeConfig, replicas: int = 2) -> dict[str, str]:
    """All six renderings of ``cfg``, ``{rendering: text}`` in the order of
    :data:`helpers.config.flagtable.RENDERINGS`: its own three, then :func:`compose`,
    :func:`kserve` and :func:`production_stack` with ``replicas`` copies.

    Raises:
        RecipeError: as the renderers (the stand-in has no cluster rendering).
    """
    replicas = _replicas(replicas)
    return {
        **flagtable.renderings(cfg),
        "compose": compose(cfg, replicas),
        "kserve": kserve(cfg, replicas),
        "production-stack": production_stack(cfg, replicas),
    }
