"""Resolve the recipe registry (``cookbook/recipe.yaml``) into a :class:`ServeConfig`.

The registry is the only place a flag, model id or pinned revision is written. This module
turns (target, variant, speculative mode, features) into one ``ServeConfig``: the model, the
ordered ``vllm serve`` flags, the environment, the served model name and port. It also
checks the seeds' rules before anything launches, renders the config three ways (shell,
``docker run``, Baseten truss ``config.yaml``) and validates the flags with the installed
vLLM's own argument parser.

Everything here is pure except :meth:`ServeConfig.validate`, which imports vLLM.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .errors import FlagError, RecipeError
from .paths import COOKBOOK_DIR

REGISTRY_PATH = COOKBOOK_DIR / "recipe.yaml"
FLAGS_PATH = COOKBOOK_DIR / "flags.yaml"

# Flags the server manager owns; the registry never sets them.
_MANAGED_FLAGS = ("--host", "--port", "--model")


# --------------------------------------------------------------------------------------
# Registry loading
# --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _load_yaml(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def load_registry(path: str | Path | None = None) -> dict:
    """Return the parsed registry (a deep copy, safe to mutate).

    Args:
        path: a registry YAML; default ``cookbook/recipe.yaml``.

    Raises:
        RecipeError: the file is missing or is not valid YAML.
    """
    path = Path(path or REGISTRY_PATH)
    try:
        return copy.deepcopy(_load_yaml(str(path)))
    except FileNotFoundError as exc:
        raise RecipeError(f"Registry {path} not found: run from a checkout of the cookbook.") from exc
    except yaml.YAMLError as exc:
        raise RecipeError(f"Registry {path} is not valid YAML ({exc}); fix the file.") from exc


def flag_reasons() -> dict[str, str]:
    """Return ``{flag: why}`` from ``cookbook/flags.yaml`` (the reference table's why column)."""
    return dict(_load_yaml(str(FLAGS_PATH)))


def list_targets(registry: dict | None = None) -> list[str]:
    """Names of every hardware target in the registry, in file order."""
    return list((registry or load_registry())["targets"])


def _suggest(name: str, valid: Iterable[str]) -> str:
    """``" Did you mean 'x'?"`` for the closest of ``valid`` (difflib), or ""."""
    valid = [str(v) for v in valid]
    lowered = {v.lower(): v for v in valid}
    close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=0.6)
    return f" Did you mean {lowered[close[0]]!r}?" if close else ""


def _choose(kind: str, name: str, valid: Iterable[str], *, where: str = "") -> str:
    """The entry of ``valid`` that ``name`` names, matched case-insensitively.

    Raises:
        RecipeError: no match; names the closest valid name (difflib) and lists them all.
    """
    valid = list(valid)
    if not isinstance(name, str):
        raise RecipeError(
            f"The {kind} must be a name (str), got {type(name).__name__} {name!r}. "
            f"Valid {kind}s{where}: {', '.join(valid)}."
        )
    if name in valid:
        return name
    folded = [v for v in valid if v.lower() == name.strip().lower()]
    if folded:
        return folded[0]
    raise RecipeError(
        f"Unknown {kind} {name!r}{where}.{_suggest(name, valid)} Valid {kind}s{where}: {', '.join(valid)}."
    )


def _check_type(name: str, value: Any, expected: type | tuple[type, ...], words: str, example: str) -> None:
    """Raise a RecipeError naming argument ``name`` when ``value`` is not ``expected``."""
    if isinstance(value, bool) and bool not in (expected if isinstance(expected, tuple) else (expected,)):
        ok = False
    else:
        ok = isinstance(value, expected)
    if not ok:
        raise RecipeError(
            f"{name}={value!r} ({type(value).__name__}): {name} must be {words}, e.g. {example}."
        )


# --------------------------------------------------------------------------------------
# ServeConfig
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Drafter:
    """A speculative-decoding draft checkpoint to download before launch."""

    repo: str
    revision: str | None
    allow_patterns: list[str]
    mode: str
    local_path: str | None = None


@dataclasses.dataclass
class ServeConfig:
    """Everything needed to launch one vLLM server for one target.

    Attributes:
        target, variant, speculative, features: what was resolved.
        model: hub id (``nvidia/...``) or local folder path served by vLLM.
        revision: pinned hub commit of ``model`` (None for local paths / unpinned).
        served_model_name: the name clients pass as ``model=``.
        args: ordered ``{flag: value}``; ``True`` is a bare switch, dicts are JSON.
        env: extra environment variables for the server process.
        host, port: where the API listens (``port=None``: the server manager picks one).
        gpu: the target's GPU record (name, memory_gb, compute_capability, arch, count).
        vllm_version, docker_image, pip: what to install on the target.
        drafters: draft checkpoints the speculative mode needs.
        notes, sources: prose for the notebook (target notes, seed citations).
        stand_in: True for the CPU stand-in target.
    """

    target: str
    variant: str
    speculative: str
    features: tuple[str, ...]
    model: str | None
    revision: str | None
    served_model_name: str
    args: dict[str, Any]
    env: dict[str, str]
    gpu: dict[str, Any]
    vllm_version: str
    docker_image: str | None = None
    pip: str | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    drafters: list[Drafter] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    pip_extras: list[str] = dataclasses.field(default_factory=list)
    allow_patterns: list[str] = dataclasses.field(default_factory=list)
    label: str = ""
    stand_in: bool = False
    seed_vllm_version: str | None = None
    #: flags that came from the caller's ``extra_args`` (resolve / with_args), not the
    #: registry: a rejected one is blamed on extra_args, not on cookbook/recipe.yaml.
    extra_flags: tuple[str, ...] = ()

    # ---- derived -------------------------------------------------------------------
    @property
    def gpu_count(self) -> int:
        """GPUs one server uses (tensor parallel size), 1 at least; 0 on the CPU stand-in."""
        if self.stand_in:
            return 0
        return int(self.args.get("--tensor-parallel-size") or self.gpu.get("count") or 1)

    @property
    def speculative_config(self) -> dict | None:
        """The ``--speculative-config`` mapping, or None without speculative decoding."""
        value = self.args.get("--speculative-config")
        return dict(value) if isinstance(value, Mapping) else None

    def cli_flags(self) -> list[str]:
        """Flags after the model, as argv items, without ``--host``/``--port``/``--model``.

        ``--served-model-name`` comes first; ``--revision`` follows when the model is a hub id
        with a pinned revision.
        """
        argv = ["--served-model-name", self.served_model_name]
        if self.revision and self.model and not Path(self.model).exists():
            argv += ["--revision", self.revision]
        for flag, value in self.args.items():
            argv += _flag_argv(flag, value)
        return argv

    def serve_argv(self, *, with_host_port: bool = True) -> list[str]:
        """``["vllm", "serve", MODEL, *flags]`` as the target's docs write it."""
        argv = ["vllm", "serve", self.model or "<model>", *self.cli_flags()]
        if with_host_port:
            argv += ["--host", self.host if self.host != "127.0.0.1" else "0.0.0.0"]
            argv += ["--port", str(self.port or 8000)]
        return argv

    # ---- renderings ----------------------------------------------------------------
    def shell_command(self) -> str:
        """The ``vllm serve`` command for a terminal, one flag per line, env exported first."""
        lines = [f"export {k}={shlex.quote(v)}" for k, v in self.env.items()]
        lines.append(_multiline(self.serve_argv()))
        return "\n".join(lines)

    def docker_command(self, *, hf_cache: str = "~/.cache/huggingface") -> str:
        """A ``docker run`` command for the target's pinned image (recipe ``docker_command`` style).

        Raises:
            RecipeError: the target has no docker image (the CPU stand-in).
        """
        if not self.docker_image:
            raise RecipeError(f"Target {self.target!r} has no docker image; use shell_command().")
        head = [
            f"docker run --gpus all --ipc=host -p {self.port or 8000}:8000",
            f"-v {hf_cache}:/root/.cache/huggingface",
            *(f"-e {shlex.quote(f'{k}={v}')}" for k, v in self.env.items()),
            "-e HF_TOKEN",
        ]
        tail = _multiline([self.docker_image, self.model or "<model>", *self.cli_flags()], first_break=2)
        return " \\\n  ".join([*head, tail])

    def truss_config(self) -> str:
        """A Baseten truss ``config.yaml`` (shape of seed 000) serving this config.

        Weights are mounted at ``/models/<name>`` at their pinned revisions; the
        ``start_command`` serves the mounted paths.
        """
        mount = f"/models/{self.served_model_name}"
        weights = [_truss_weight(self.model, self.revision, mount, self.allow_patterns)]
        cfg = copy.deepcopy(self)
        cfg.model, cfg.revision = mount, None
        spec = cfg.speculative_config
        for d in self.drafters:
            d_mount = f"{mount}-{d.mode}"
            weights.append(_truss_weight(d.repo, d.revision, d_mount, d.allow_patterns))
            if spec is not None:
                spec["model"] = d_mount
                spec.pop("revision", None)
                cfg.args["--speculative-config"] = spec
        argv = cfg.serve_argv(with_host_port=False) + ["--host", "0.0.0.0", "--port", "8000"]
        doc = {
            "model_name": f"{self.served_model_name} ({self.target})",
            "model_metadata": {
                "description": f"{self.label} — {self.variant} — speculative: {self.speculative}",
                "repo_id": self.model,
                "example_model_input": {
                    "model": self.served_model_name,
                    "messages": [{"role": "user", "content": "Reply with exactly: deployment healthy"}],
                    "max_tokens": 32,
                    "temperature": 0,
                },
            },
            "base_image": {"image": self.docker_image},
            "weights": weights,
            "secrets": {"hf_access_token": None},
            "docker_server": {
                "start_command": shlex.join(argv),
                "readiness_endpoint": "/health",
                "liveness_endpoint": "/health",
                "predict_endpoint": "/v1/chat/completions",
                "server_port": 8000,
            },
            "resources": {
                "accelerator": f"{self.gpu.get('name', 'GPU')}:{self.gpu_count}"
                if self.gpu_count > 1
                else self.gpu.get("name", "GPU"),
                "use_gpu": True,
            },
            "runtime": {"predict_concurrency": int(self.args.get("--max-num-seqs") or 256)},
            "environment_variables": {**self.env, "HF_HUB_OFFLINE": "1"},
        }
        return yaml.safe_dump(doc, sort_keys=False, width=100)

    def reference_table(self) -> list[dict[str, str]]:
        """One row per flag: ``{"flag", "value", "why"}`` for the notebook's reference table.

        Raises:
            RecipeError: a flag has no explanation in ``cookbook/flags.yaml``.
        """
        reasons = flag_reasons()
        rows = []
        argv = self.cli_flags()
        for flag, value in _pairs(argv):
            if flag not in reasons:
                raise RecipeError(f"Flag {flag} has no 'why' in cookbook/flags.yaml: add one.")
            rows.append({"flag": flag, "value": value, "why": reasons[flag]})
        for k, v in self.env.items():
            rows.append({"flag": f"env {k}", "value": v, "why": _ENV_REASONS.get(k, "")})
        return rows

    # ---- modifiers -----------------------------------------------------------------
    def with_model(self, model: str | Path, *, revision: str | None = None) -> ServeConfig:
        """A copy serving ``model`` (e.g. the local snapshot path from ``helpers.weights``)."""
        return dataclasses.replace(self, model=str(model), revision=revision)

    def with_port(self, port: int | None, host: str | None = None) -> ServeConfig:
        """A copy listening on ``port`` (None: the server manager picks a free one).

        Raises:
            RecipeError: ``port`` is not an int in 1..65535 (or None).
        """
        _check_port(port)
        return dataclasses.replace(self, port=port, host=host or self.host)

    def with_args(self, extra: Mapping[str, Any] | None = None, **env: str) -> ServeConfig:
        """A copy with flags added/overridden (``None`` removes a flag) and env added."""
        _check_type(
            "extra", extra, (Mapping, type(None)), "a mapping {flag: value} (None removes a flag)",
            "with_args({'--max-model-len': 8192})",
        )
        args = dict(self.args)
        _merge_args(args, extra or {})
        added = tuple(f for f, val in (extra or {}).items() if val is not None)
        return dataclasses.replace(
            self, args=args, env={**self.env, **env},
            extra_flags=tuple(dict.fromkeys((*self.extra_flags, *added))),
        )

    def with_drafter_path(self, path: str | Path) -> ServeConfig:
        """A copy whose speculative config points at a local drafter folder."""
        spec = self.speculative_config
        if spec is None or "model" not in spec:
            raise RecipeError(f"Speculative mode {self.speculative!r} has no draft model to replace.")
        spec["model"] = str(path)
        spec.pop("revision", None)
        return self.with_args({"--speculative-config": spec})

    # ---- validation ----------------------------------------------------------------
    def validate(self) -> None:
        """Parse the flags with the installed vLLM's own ``vllm serve`` argument parser.

        Also checks ``--speculative-config`` keys and ``method`` against vLLM's
        ``SpeculativeConfig``.

        Before the parser, :func:`check_values` rejects numbers vLLM would refuse at start-up
        (negative lengths, a ``--max-model-len`` above the local checkpoint's derived maximum).

        Raises:
            RecipeError: an impossible number (see :func:`check_values`), naming the bound.
            FlagError: names every rejected flag and where it came from (the caller's
                ``extra_args`` or the registry), with a close match; the target's pinned
                version is named only when it differs from the installed one.
        """
        check_values(self)
        validate_argv(
            [self.model or "model", *self.cli_flags()],
            target_version=self.vllm_version,
            extra_flags=self.extra_flags,
        )


def _multiline(argv: list[str], first_break: int = 3) -> str:
    head = shlex.join(argv[:first_break])
    rest = argv[first_break:]
    lines = [head]
    i = 0
    while i < len(rest):
        item = rest[i]
        if item.startswith("-") and i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            lines.append(f"{shlex.quote(item)} {shlex.quote(rest[i + 1])}")
            i += 2
        else:
            lines.append(shlex.quote(item))
            i += 1
    return " \\\n  ".join(lines)


def _truss_weight(repo, revision, mount, patterns) -> dict:
    src = f"hf://{repo}" + (f"@{revision}" if revision else "")
    return {
        "source": src,
        "mount_location": mount,
        "auth_secret_name": "hf_access_token",
        "allow_patterns": list(patterns),
    }


def _flag_argv(flag: str, value: Any) -> list[str]:
    if value is True:
        return [flag]
    if value is None or value is False:
        return []
    if isinstance(value, Mapping):
        return [flag, json.dumps(value, separators=(",", ":"))]
    return [flag, str(value)]


def _pairs(argv: list[str]):
    i = 0
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            yield argv[i], argv[i + 1]
            i += 2
        else:
            yield argv[i], "(switch)"
            i += 1


_ENV_REASONS = {
    "VLLM_USE_FASTOKENS": "Fast tokenizer required by the BF16 checkpoint (recipe; pip install fastokens).",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "Allows --max-model-len above the checkpoint's configured 256K default (recipe long_context).",
    "VLLM_WORKER_MULTIPROC_METHOD": "spawn starts workers cleanly in containers (Baseten preset).",
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0 skips the CUDA-graph memory estimate at start-up (Baseten preset).",
    "VLLM_CPU_KVCACHE_SPACE": "GiB of RAM the CPU build reserves for the KV cache (stand-in only).",
}


# --------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------


def _merge_args(args: dict, layer: Mapping[str, Any]) -> None:
    for flag, value in (layer or {}).items():
        if not str(flag).startswith("--"):
            raise RecipeError(f"Registry flag {flag!r} must start with '--'; fix cookbook/recipe.yaml.")
        if flag in _MANAGED_FLAGS:
            raise RecipeError(f"{flag} is set by the server manager, not the registry; remove it.")
        if value is None:
            args.pop(flag, None)
        else:
            args[flag] = value


def _merge_dict(base: dict, layer: Mapping[str, Any]) -> dict:
    out = dict(base)
    for k, v in (layer or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def _check_resolve_types(variant, speculative, features, extra_args, extra_env, port, host) -> None:
    """resolve()'s argument checks: each wrong type is named with an example of the right one."""
    _check_type("variant", variant, (str, type(None)), "a variant name or None", "variant='nvfp4'")
    _check_type(
        "speculative", speculative, (str, type(None)), "a speculative mode name or None", "speculative='mtp'"
    )
    if features is not None and (isinstance(features, (str, bytes, Mapping)) or not isinstance(features, Iterable)):
        raise RecipeError(
            f"features={features!r} ({type(features).__name__}): features must be a list of feature "
            f"names, e.g. features=[{features!r}] or features=['reasoning', 'tool_calling']."
            if isinstance(features, str)
            else f"features={features!r} ({type(features).__name__}): features must be a list of "
            "feature names, e.g. features=['reasoning', 'tool_calling']."
        )
    _check_type(
        "extra_args", extra_args, (Mapping, type(None)), "a mapping {flag: value} (None removes a flag)",
        "extra_args={'--max-model-len': 8192}",
    )
    _check_type(
        "extra_env", extra_env, (Mapping, type(None)), "a mapping {variable: value}",
        "extra_env={'VLLM_LOGGING_LEVEL': 'DEBUG'}",
    )
    _check_port(port)
    _check_type("host", host, str, "a host name or IP address (str)", "host='0.0.0.0'")


def _check_port(port: Any) -> None:
    if port is None:
        return
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise RecipeError(
            f"port={port!r} ({type(port).__name__}): port must be an int from 1 to 65535, or None "
            "to let the server manager pick a free one, e.g. port=8000."
        )


def resolve(
    target: str,
    variant: str | None = None,
    speculative: str | None = None,
    features: Iterable[str] | None = None,
    *,
    extra_args: Mapping[str, Any] | None = None,
    extra_env: Mapping[str, str] | None = None,
    port: int | None = None,
    host: str = "127.0.0.1",
    registry: dict | None = None,
    vllm_version: str | None = None,
) -> ServeConfig:
    """Resolve one deployment from the registry.

    Args:
        target: a key of ``targets`` in ``cookbook/recipe.yaml`` (e.g. ``"h100"``, ``"cpu"``).
        variant: ``"nvfp4"`` / ``"bf16"`` (``"standin"`` on ``cpu``); default: the target's.
        speculative: ``"none"``, ``"mtp"``, ``"dflash"``, ``"dspark"`` (``"ngram"``);
            default: the target's.
        features: feature names (``reasoning``, ``tool_calling``, ``fast_ssm_cache``,
            ``long_context``); default: the target's list.
        extra_args: flags layered last (``{"--max-model-len": 8192}``; ``None`` removes).
        extra_env: environment variables layered last.
        port, host: where the API listens (``port=None``: chosen at launch).
        registry: an already loaded registry (tests); default: load ``cookbook/recipe.yaml``.
        vllm_version: the vLLM release that will serve (``"0.32.0"``, ``"0.28.0"``, ...);
            default: :func:`target_vllm_version` (the registry's ``default_vllm_version``,
            0.32.0, for GPU targets; a nightly pin stays nightly). The docker image follows it.

    Returns:
        A :class:`ServeConfig`. For the ``cpu`` stand-in, ``model`` is None until
        :meth:`ServeConfig.with_model` sets the built stand-in folder.

    Raises:
        RecipeError: unknown names (the message lists the valid ones) or a broken rule
            (see :func:`check_rules`), each naming the fix.
    """
    _check_resolve_types(variant, speculative, features, extra_args, extra_env, port, host)
    reg = registry or load_registry()
    target = _choose("target", target, reg["targets"])
    t = reg["targets"][target]
    variant = variant or t["variant"]
    variant = _choose("variant", variant, t.get("variants") or [v for v in reg["variants"] if v != "standin"])
    v = reg["variants"][variant]
    if v.get("stand_in_only") and not t.get("stand_in"):
        raise RecipeError(f"Variant {variant!r} is the CPU stand-in only; use target 'cpu'.")
    speculative = speculative or t.get("speculative", "none")
    modes = list(t.get("speculative_modes") or reg["speculative"])
    if not any(speculative.strip().lower() == m.lower() for m in reg["speculative"]):
        _choose("speculative mode", speculative, modes)  # unknown anywhere: lists this target's
    speculative = _choose("speculative mode", speculative, reg["speculative"])
    s = reg["speculative"][speculative]
    allowed = s.get("variants")
    if allowed and variant not in allowed:
        raise RecipeError(
            f"{s['label']} drafts are published for {', '.join(allowed)} only, not {variant}: "
            f"use variant={allowed[0]!r}, or speculative='mtp' (built into every checkpoint)."
        )
    if speculative not in modes:
        raise RecipeError(
            f"Speculative mode {speculative!r} is not offered for {target}. Valid speculative "
            f"modes for {target}: {', '.join(modes)}."
        )
    features = tuple(t.get("features", reg["default_features"]) if features is None else features)
    features = tuple(_choose("feature", f, reg["features"]) for f in features)
    overrides = list(t.get("overrides") or [])

    args: dict[str, Any] = {}
    env: dict[str, str] = {}
    if not t.get("base_args_replace"):
        _merge_args(args, reg["model"]["base_args"])
    _merge_args(args, v.get("args"))
    env.update(v.get("env") or {})
    seed_version = str(t.get("vllm_version") or reg["model"]["seed_vllm_version"])
    version = str(vllm_version or target_vllm_version(target, reg))
    docker_image = t.get("docker_image") or reg["model"]["default_docker_image"]
    if version != seed_version and version != "nightly":
        docker_image = DOCKER_IMAGE.format(version=version)
    for key in overrides:
        ov = (v.get("hardware_overrides") or {}).get(key) or {}
        _merge_args(args, ov.get("args"))
        docker_image = ov.get("docker_image", docker_image)
    for f in features:
        _merge_args(args, reg["features"][f].get("args"))
        env.update(reg["features"][f].get("env") or {})

    drafters: list[Drafter] = []
    if speculative != "none":
        spec = dict(s["config"])
        for key in overrides:
            spec = _merge_dict(spec, ((s.get("hardware_overrides") or {}).get(key) or {}).get("config"))
        spec = _merge_dict(spec, ((t.get("speculative_overrides") or {}).get(speculative) or {}).get("config"))
        d = s.get("drafter")
        if d:
            spec = {"method": spec.pop("method"), "model": d["repo"], **spec}
            if d.get("revision"):
                spec["revision"] = d["revision"]
            drafters.append(Drafter(d["repo"], d.get("revision"), list(d["allow_patterns"]), speculative))
        args["--speculative-config"] = spec

    _merge_args(args, t.get("args"))
    env.update(t.get("env") or {})
    _merge_args(args, extra_args)
    env.update(extra_env or {})

    notes = list(t.get("notes") or [])
    from_extra = tuple(f for f, val in (extra_args or {}).items() if val is not None)
    cfg = ServeConfig(
        target=target,
        variant=variant,
        speculative=speculative,
        features=features,
        model=v.get("model_id"),
        revision=v.get("revision"),
        served_model_name=reg["model"]["served_model_name"],
        args=args,
        env={k: str(val) for k, val in env.items()},
        gpu=dict(t["gpu"]),
        vllm_version=version,
        seed_vllm_version=seed_version,
        docker_image=None if t.get("stand_in") else docker_image,
        pip=t.get("pip"),
        host=host,
        port=port,
        drafters=drafters,
        notes=notes,
        sources={"target": t.get("source", ""), "variant": v.get("source", "")},
        pip_extras=list(v.get("pip_extras") or []),
        allow_patterns=list(v.get("allow_patterns") or []),
        label=t.get("label", target),
        stand_in=bool(t.get("stand_in")),
        extra_flags=from_extra,
    )
    check_rules(cfg, reg)
    return cfg


DOCKER_IMAGE = "vllm/vllm-openai:v{version}"  # vLLM docs "Using Docker": one tag per release


def offered_vllm_versions(registry: dict | None = None) -> list[str]:
    """The vLLM releases the registry offers for GPU targets (``model.offered_vllm_versions``),
    default first; each has a flag table in ``docs/results/flags/`` (see :mod:`helpers.flagtables`)."""
    reg = registry or load_registry()
    return [str(v) for v in reg["model"]["offered_vllm_versions"]]


def target_vllm_version(target: str, registry: dict | None = None) -> str:
    """The vLLM release a target's notebook installs by default.

    GPU targets get ``model.default_vllm_version`` (0.32.0: the release CI runs as
    vllm-cpu, see ``model.choices.vllm_version``), except a target pinned to ``nightly``
    (DGX Spark), which keeps it. The stand-in keeps its own pin (the CPU build). The target's
    seed pin (``targets.<name>.vllm_version``) stays selectable with
    ``resolve(..., vllm_version=...)``.
    """
    reg = registry or load_registry()
    t = reg["targets"][target]
    seed = str(t.get("vllm_version") or reg["model"]["seed_vllm_version"])
    if t.get("stand_in") or seed == "nightly":
        return seed
    return str(reg["model"]["default_vllm_version"])


def check_rules(cfg: ServeConfig, registry: dict | None = None) -> None:
    """Check the seeds' deployment rules; raise the first broken one.

    Rules (seed in brackets):
      * DFlash / DSpark only on NVFP4 [recipe: "the only one the drafts are published for"]
        (checked in :func:`resolve`).
      * Tensor parallel 8 without expert parallel is unsupported on NVFP4 [vendor note].
      * The variant's ``vram_minimum_gb`` (BF16: 72 GB) must fit one replica's GPU memory
        (``memory_gb`` x tensor-parallel size) [recipe].
      * ``--quantization modelopt_fp4`` only where NVFP4 is not auto-detected (Ampere, Ada,
        Hopper); on Blackwell it must go [vendor note].
      * ``--quantization modelopt*`` (ModelOpt checkpoints) only on the NVFP4 variant: the
        BF16 checkpoint is not ModelOpt-quantized [recipe: ``modelopt_fp4`` appears only in
        the NVFP4 variant's overrides].
      * FP16 Mamba-cache stochastic rounding needs Blackwell or ``--mamba-backend
        flashinfer`` [vllm/config/mamba.py; measured failing on an H200 otherwise].
      * DSpark ``num_speculative_tokens`` >= the drafter's block size [vLLM
        ``config/speculative.py`` reads ``block_size`` from the drafter].

    Args:
        cfg: a resolved config (possibly changed afterwards with ``with_args``).
        registry: an already loaded registry; default: load ``cookbook/recipe.yaml``.

    Raises:
        RecipeError: naming the fix.
    """
    reg = registry or load_registry()
    variant = reg["variants"][cfg.variant]
    arch = cfg.gpu.get("arch")
    tp = int(cfg.args.get("--tensor-parallel-size") or 1)
    if cfg.variant == "nvfp4" and tp >= 8 and not cfg.args.get("--enable-expert-parallel"):
        raise RecipeError(
            f"Tensor parallel {tp} without expert parallel is not supported on the NVFP4 checkpoint "
            "(vendor note): add --enable-expert-parallel, or use the BF16 variant."
        )
    if not cfg.stand_in:
        replica_gb = float(cfg.gpu.get("memory_gb") or 0) * tp
        need = float(variant.get("vram_minimum_gb") or 0)
        if replica_gb < need:
            raise RecipeError(
                f"{variant['label']} needs at least {need:g} GB of GPU memory per replica, but "
                f"{cfg.gpu.get('name')} x{tp} has {replica_gb:g} GB: use the NVFP4 variant, or a "
                f"larger --tensor-parallel-size."
            )
    quant = cfg.args.get("--quantization")
    if isinstance(quant, str) and quant.startswith("modelopt") and cfg.variant != "nvfp4":
        raise RecipeError(
            f"--quantization {quant} is for the ModelOpt NVFP4 checkpoint, but variant "
            f"{cfg.variant!r} ({variant['label']}) is not ModelOpt-quantized: drop the flag "
            f"(extra_args={{'--quantization': None}}), or use variant='nvfp4'."
        )
    if quant == "modelopt_fp4" and arch == "blackwell":
        raise RecipeError(
            "--quantization modelopt_fp4 is only for GPUs where NVFP4 is not auto-detected "
            "(Hopper, Ampere, Ada); on Blackwell remove it (extra_args={'--quantization': None})."
        )
    if (
        cfg.args.get("--enable-mamba-cache-stochastic-rounding")
        and arch not in ("blackwell", "cpu")
        and cfg.args.get("--mamba-backend") != "flashinfer"
    ):
        raise RecipeError(
            "Stochastic rounding of the FP16 Mamba cache needs a Blackwell GPU or "
            "--mamba-backend flashinfer (vllm/config/mamba.py; on an H200 the Triton kernel fails "
            "in ptxas): keep --mamba-backend flashinfer, or drop the fast_ssm_cache feature."
        )
    spec = cfg.speculative_config
    if spec and spec.get("method") == "dspark":
        block = (reg["speculative"]["dspark"].get("drafter") or {}).get("block_size")
        n = int(spec.get("num_speculative_tokens") or 0)
        if block and n < int(block):
            raise RecipeError(
                f"DSpark num_speculative_tokens={n} is below the drafter's block size {block}: "
                f"set num_speculative_tokens to at least {block}."
            )


def standin_config(
    cfg: ServeConfig, model_path: str | Path, *, drafting: bool = False, registry: dict | None = None
) -> ServeConfig:
    """The CPU stand-in config that plays ``cfg`` on this machine.

    Keeps what the CPU build can honour (the reasoning and tool parsers of ``cfg``'s
    features). Speculative decoding is off unless ``drafting=True``: then a speculative mode
    becomes n-gram drafting, the one method the CPU build runs, so acceptance metrics are
    real. It is off by default because on vllm-cpu 0.32.0 n-gram drafting with the Mamba-2
    stand-in changes the greedy output (measured: the same prompt at temperature 0 answers
    correctly without drafting and with word salad with it; see the ``ngram`` entry of
    cookbook/recipe.yaml), so the stand-in's chat demos would show noise.

    Args:
        cfg: the real target's resolved config.
        model_path: the stand-in folder from ``helpers.standin.build_standin_model()``.
        drafting: map ``cfg``'s speculative mode (if any) to n-gram drafting, for measuring
            the acceptance pipeline (the speculative-decoding notebook).
    """
    feats = tuple(f for f in cfg.features if f in ("reasoning", "tool_calling"))
    spec = "ngram" if drafting and cfg.speculative != "none" else "none"
    return resolve("cpu", speculative=spec, features=feats, registry=registry).with_model(model_path)


# --------------------------------------------------------------------------------------
# Numbers vLLM would refuse at start-up
# --------------------------------------------------------------------------------------

#: ``flag: (lowest, highest, words)`` from the field constraints of vLLM 0.32.0's config
#: classes: ``ModelConfig.max_model_len`` Field(ge=-1), -1 = auto-fit (config/model.py);
#: ``SchedulerConfig.max_num_seqs`` / ``max_num_batched_tokens`` Field(ge=1)
#: (config/scheduler.py); ``CacheConfig.gpu_memory_utilization`` Field(gt=0, le=1)
#: (config/cache.py); ``ParallelConfig.tensor_parallel_size`` / ``data_parallel_size``
#: Field(ge=1) (config/parallel.py).
VALUE_BOUNDS: dict[str, tuple[float | None, float | None, str]] = {
    "--max-model-len": (1, None, "a positive number of tokens, or -1 / auto (fit to memory)"),
    "--max-num-seqs": (1, None, "at least 1 (sequences in one batch)"),
    "--max-num-batched-tokens": (1, None, "at least 1 (tokens per scheduler step)"),
    "--gpu-memory-utilization": (1e-9, 1.0, "a fraction above 0 and at most 1"),
    "--tensor-parallel-size": (1, None, "at least 1 (GPUs)"),
    "--data-parallel-size": (1, None, "at least 1 (replicas)"),
}
_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _number(value: Any) -> float | None:
    """A flag value as a number, reading vLLM's human-readable ints ("32k", "1K",
    vllm/utils/argparse_utils.py human_readable_int); None when it is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)([kKmMgGtT])?", text)
    if not m:
        return None
    number = float(m.group(1)) * _SUFFIX.get(m.group(2) or "", 1)
    return int(number) if number.is_integer() else number


def derived_max_model_len(model: str | Path | None) -> tuple[int, str] | None:
    """The longest ``--max-model-len`` vLLM accepts for a local checkpoint, and its source.

    Follows vLLM 0.32.0: the smallest of ``max_position_embeddings``, ``n_positions``,
    ``max_seq_len``, ``seq_length``, ``model_max_length``, ``max_target_positions``,
    ``max_sequence_length``, ``max_seq_length``, ``seq_len`` in ``config.json``
    (``model_max_length`` wins when set), capped by ``tokenizer_config.json``'s
    ``model_max_length`` (transformers_utils/model_arch_config_convertor.py
    ``derive_max_model_len_and_key``; config/model.py ``_get_and_verify_max_len``).

    Returns:
        ``(tokens, "key in <folder>/config.json")``, or None when the model is not a local
        folder, its config cannot be read, or RoPE scaling changes the maximum (then vLLM's
        own check at start-up is the judge).
    """
    if not model:
        return None
    folder = Path(model).expanduser()
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    cfg = cfg.get("text_config") or cfg if isinstance(cfg, dict) else {}
    if cfg.get("rope_scaling") or cfg.get("rope_parameters"):
        rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
        if isinstance(rope, dict) and rope.get("factor") not in (None, 1, 1.0):
            return None
    keys = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
            "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")  # fmt: skip
    found = [(cfg[k], k) for k in keys if isinstance(cfg.get(k), (int, float)) and not isinstance(cfg.get(k), bool)]
    if not found:
        return None
    best, key = min(found)
    if isinstance(cfg.get("model_max_length"), (int, float)):
        best, key = cfg["model_max_length"], "model_max_length"
    where = f"{key} in {folder / 'config.json'}"
    try:
        tok = json.loads((folder / "tokenizer_config.json").read_text()).get("model_max_length")
    except (OSError, ValueError, AttributeError):
        tok = None
    if isinstance(tok, (int, float)) and tok < best:
        best, where = tok, f"model_max_length in {folder / 'tokenizer_config.json'}"
    return int(best), where


def check_values(cfg: ServeConfig) -> None:
    """Reject flag values that vLLM would refuse only after launch (bounds: :data:`VALUE_BOUNDS`).

    Also, for a local checkpoint folder, ``--max-model-len`` above
    :func:`derived_max_model_len` unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set (in
    ``cfg.env`` or the environment), as vLLM 0.32.0's ``_get_and_verify_max_len`` does.

    Raises:
        RecipeError: names the flag, the value, the bound and where the flag came from.
    """
    for flag, (low, high, words) in VALUE_BOUNDS.items():
        if flag not in cfg.args:
            continue
        raw = cfg.args[flag]
        value = _number(raw)
        if flag == "--max-model-len" and (value == -1 or str(raw).strip().lower() == "auto"):
            continue
        origin = "from extra_args" if flag in cfg.extra_flags else "from cookbook/recipe.yaml"
        if value is None:
            raise RecipeError(f"{flag} {raw!r} ({origin}) is not a number: it must be {words}.")
        if (low is not None and value < low) or (high is not None and value > high):
            raise RecipeError(
                f"{flag} {raw} ({origin}) is out of range: it must be {words} (vLLM 0.32.0 config "
                f"bounds); fix the value{' in the extra_args you passed' if flag in cfg.extra_flags else ''}."
            )
    mml = _number(cfg.args.get("--max-model-len"))
    allow = str(cfg.env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")))
    if mml and mml > 0 and allow.strip().lower() not in ("1", "true"):
        derived = derived_max_model_len(cfg.model)
        if derived and mml > derived[0]:
            raise RecipeError(
                f"--max-model-len {cfg.args['--max-model-len']} is greater than the model's derived "
                f"maximum of {derived[0]:,} tokens ({derived[1]}); vLLM 0.32.0 refuses to start "
                f"(config/model.py _get_and_verify_max_len): set --max-model-len {derived[0]} or less, "
                "or, only if the model really handles longer positions, set "
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (extra_env)."
            )


# --------------------------------------------------------------------------------------
# Validation with vLLM's own parser
# --------------------------------------------------------------------------------------


class _ParseFailure(Exception):
    pass


@functools.lru_cache(maxsize=1)
def _serve_parser():
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise FlagError(
            "vLLM is not installed, so flags cannot be checked: install it (see helpers.install)."
        ) from exc
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    except ImportError:  # older vLLM
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))

    def _error(message):
        raise _ParseFailure(message)

    parser.error = _error
    return parser


def installed_vllm_version() -> str | None:
    """The installed vLLM's version string (CUDA ``vllm`` or CPU ``vllm-cpu``), or None."""
    from .install import detect_vllm

    return detect_vllm().version


def _close_flag(name: str, known: Iterable[str]) -> str | None:
    """The release's flag closest to a rejected ``name`` (difflib), e.g. --max-model-len."""
    close = difflib.get_close_matches(name, sorted(k for k in known if k.startswith("--")), n=1, cutoff=0.75)
    return close[0] if close else None


def validate_argv(
    argv: list[str], *, target_version: str | None = None, extra_flags: Iterable[str] = ()
) -> None:
    """Parse ``[MODEL, *flags]`` with the installed ``vllm serve`` parser.

    Besides the parser itself, ``--speculative-config`` keys are checked against vLLM's
    ``SpeculativeConfig`` fields and its ``method`` against :func:`speculative_methods`.

    Raises:
        FlagError: with ``.flags`` the rejected flag names; the message gives the installed
            vLLM version and ``target_version`` so a flag newer than the install is clear
            (and, for a bad speculative method, the method and the valid ones).
    """
    parser = _serve_parser()
    import argparse

    known = {s for a in parser._actions for s in a.option_strings}
    rejected: list[str] = []
    reasons: list[str] = []
    for item in argv:
        if item.startswith("--"):
            name = item.split("=", 1)[0]
            base = name.split(".", 1)[0]
            if base not in known and base.replace("_", "-") not in known:
                rejected.append(name)
    if not rejected:
        try:
            ns, unknown = parser.parse_known_args(argv, namespace=argparse.Namespace())
        except _ParseFailure as exc:
            msg = str(exc)
            reasons.append(msg)
            named = re.search(r"argument (--[\w.-]+)", msg) or re.search(r"(--[\w.-]+)", msg)
            rejected.append(named.group(1) if named else msg)
        else:
            rejected += [u for u in unknown if u.startswith("-")]
            spec = getattr(ns, "speculative_config", None)
            if spec:
                bad = _unknown_spec_keys(spec)
                if bad:
                    rejected.append("--speculative-config")
                    reasons.append(f"unknown speculative-config keys: {', '.join(bad)}")
                method = spec.get("method") if isinstance(spec, Mapping) else None
                valid_methods = speculative_methods()
                if method is not None and valid_methods and method not in valid_methods:
                    rejected.append("--speculative-config")
                    reasons.append(
                        f"unknown speculative-config method {method!r}; "
                        f"valid methods: {', '.join(valid_methods)}"
                    )
    if rejected:
        installed = installed_vllm_version()
        names = list(dict.fromkeys(rejected))
        extra = set(extra_flags)
        described = []
        for name in names:
            origin = "from extra_args" if name in extra else "from cookbook/recipe.yaml"
            close = _close_flag(name, known) if name not in known else None
            described.append(f"{name} ({origin}{f'; did you mean {close}?' if close else ''})")
        detail = f" ({'; '.join(reasons)})" if reasons else ""
        where = (
            "the extra_args you passed"
            if all(n in extra for n in names)
            else "cookbook/recipe.yaml"
            if not any(n in extra for n in names)
            else "extra_args / cookbook/recipe.yaml"
        )
        fix = f"fix the flag's spelling in {where}"
        if target_version and installed and str(target_version) != str(installed):
            fix += (
                f", or install the target's vLLM {target_version} (helpers.install), which may "
                "know the flag"
            )
        raise FlagError(
            f"vLLM {installed} rejects {', '.join(described)}{detail}: {fix}.",
            flags=names,
        )


def _unknown_spec_keys(spec: Any) -> list[str]:
    if not isinstance(spec, Mapping):
        return []
    try:
        from vllm.config import SpeculativeConfig
    except ImportError:  # pragma: no cover
        return []
    fields = getattr(SpeculativeConfig, "__dataclass_fields__", None) or getattr(
        SpeculativeConfig, "model_fields", {}
    )
    return [k for k in spec if k not in fields]


def _literal_strings(annotation: Any) -> list[str]:
    """The string values of a ``Literal`` annotation, looking through ``Optional``/``Union``."""
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        out: list[str] = []
        for arg in typing.get_args(annotation):
            out += _literal_strings(arg) if typing.get_origin(arg) is not None else [arg]
        return [a for a in out if isinstance(a, str)]
    if origin is not None:  # Union / Optional / X | None
        return [v for arg in typing.get_args(annotation) for v in _literal_strings(arg)]
    return []


@functools.lru_cache(maxsize=1)
def speculative_methods() -> tuple[str, ...]:
    """The ``method`` names the installed vLLM's ``SpeculativeConfig`` accepts, in its order.

    Read from the annotation of ``SpeculativeConfig.method`` (the ``SpeculativeMethod``
    Literal in ``vllm/config/speculative.py``), so the list follows the installed vLLM.

    Returns:
        The names, or an empty tuple when vLLM is not installed or the annotation is not a
        Literal (then methods are not checked).
    """
    import typing

    try:
        from vllm.config import SpeculativeConfig
    except ImportError:  # pragma: no cover
        return ()
    try:
        annotation = typing.get_type_hints(SpeculativeConfig)["method"]
    except Exception:  # pragma: no cover - unresolvable forward references
        field = (getattr(SpeculativeConfig, "__dataclass_fields__", None) or {}).get("method")
        annotation = getattr(field, "type", None)
    return tuple(dict.fromkeys(_literal_strings(annotation)))
