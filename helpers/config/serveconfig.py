"""``ServeConfig``: one resolved deployment, and its renderings (``vllm serve`` argv, shell,
``docker run``, Baseten truss, the flag reference table).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from helpers.config.flagcheck import VALUE_BOUNDS, _number, derived_max_model_len, validate_argv
from helpers.config.load import flag_reasons
from helpers.errors import RecipeError

# Flags the server manager owns; the registry never sets them.
_MANAGED_FLAGS = ("--host", "--port", "--model")
#: Flags the config holds as fields (``cli_flags`` renders them first): ``{flag: attribute}``.
_FIELD_FLAGS = {"--served-model-name": "served_model_name", "--revision": "revision"}


def _check_type(
    name: str, value: Any, expected: type | tuple[type, ...], words: str, example: str
) -> None:
    """Raise a RecipeError naming argument ``name`` when ``value`` is not ``expected``."""
    bool_ok = bool in (expected if isinstance(expected, tuple) else (expected,))
    if not isinstance(value, expected) or (isinstance(value, bool) and not bool_ok):
        raise RecipeError(
            f"{name}={value!r} ({type(value).__name__}): {name} must be {words}, e.g. {example}."
        )


def _check_port(port: Any) -> None:
    if port is None:
        return
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise RecipeError(
            f"port={port!r} ({type(port).__name__}): port must be an int from 1 to 65535, or None "
            "to let the server manager pick a free one, e.g. port=8000."
        )


def _merge_args(args: dict, layer: Mapping[str, Any]) -> None:
    for flag, value in (layer or {}).items():
        if not str(flag).startswith("--"):
            raise RecipeError(
                f"Registry flag {flag!r} must start with '--'; fix cookbook/recipe.yaml."
            )
        if flag in _MANAGED_FLAGS:
            raise RecipeError(f"{flag} is set by the server manager, not the registry; remove it.")
        if value is None:
            args.pop(flag, None)
        else:
            args[flag] = value


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
        target, variant, speculative, features: what was resolved; stand_in: the CPU stand-in.
        model: hub id or local folder; revision: its pinned hub commit (None: local / unpinned).
        served_model_name: the name clients pass as ``model=``.
        args: ordered ``{flag: value}``; ``True`` is a bare switch, dicts are JSON, lists several values.
        env: extra environment variables for the server process.
        host, port: where the API listens (``port=None``: the server manager picks one).
        gpu: the target's GPU record (name, memory_gb, compute_capability, arch, count).
        vllm_version, docker_image, pip: what to install on the target.
        drafters: the draft checkpoints the speculative mode needs.
        notes, sources: prose for the notebook (target notes, seed citations).
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
    #: Registry facts the planner and the installer need, carried here so that no consumer
    #: looks the registry up again: the model's ``architecture`` (``model.architecture``),
    #: its default context (tokens) and minimum vLLM; the weights to hold (GiB: the
    #: target's measured ``planner.weights_gib``, else the variant's ``weights_gb``), the
    #: target's measured activation reserve (GiB, None: the planner's default) and the
    #: drafter's size (GiB, 0 without a separate drafter).
    architecture: Any = None
    context_length_default: int | None = None
    min_vllm_version: str | None = None
    weights_gib: float = 0.0
    activation_reserve_gib: float | None = None
    drafter_gib: float = 0.0
    #: flags that came from the caller's ``extra_args`` (resolve / with_args), not the
    #: registry: a rejected one is blamed on extra_args, not on cookbook/recipe.yaml.
    extra_flags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # a name or revision given as a flag (extra_args) replaces the config's own: rendered
        # once, where cli_flags puts it (it was rendered twice, the registry's first)
        for flag, attr in _FIELD_FLAGS.items():
            if flag in self.args:
                args = dict(self.args)
                setattr(self, attr, str(args.pop(flag)))
                self.args = args

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

    def cli_flags(self, *, weights: bool = True) -> list[str]:
        """Flags after the model, as argv items, without ``--host``/``--port``/``--model``.

        ``--served-model-name`` comes first; ``--revision`` follows when the model is a hub id
        with a pinned revision. ``weights=False``: without those two, the part every rendering
        carries byte for byte (KServe and production-stack name the weights in fields of their
        own, :mod:`lab.fleet.render`).
        """
        argv = ["--served-model-name", self.served_model_name] if weights else []
        if weights and self.revision and self.model and not Path(self.model).exists():
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
        lines.append(command_lines(self.serve_argv()))
        return "\n".join(lines)

    def docker_command(self) -> str:
        """A ``docker run`` command for the target's pinned image (recipe ``docker_command`` style).

        Raises:
            RecipeError: the target has no docker image (the CPU stand-in).
        """
        if not self.docker_image:
            raise RecipeError(f"Target {self.target!r} has no docker image; use shell_command().")
        head = [
            f"docker run --gpus all --ipc=host -p {self.port or 8000}:8000",
            "-v ~/.cache/huggingface:/root/.cache/huggingface",
            *(f"-e {shlex.quote(f'{k}={v}')}" for k, v in self.env.items()),
            "-e HF_TOKEN",
        ]
        tail = command_lines([self.docker_image, self.model or "<model>", *self.cli_flags()])
        return " \\\n  ".join([*head, tail])

    def truss_config(self) -> str:
        """A Baseten truss ``config.yaml`` (shape of seed 000) serving this config.

        Weights are mounted at ``/models/<name>`` at their pinned revisions; the
        ``start_command`` serves the mounted paths.
        """
        mount = f"/models/{self.served_model_name}"
        weights = [_truss_weight(self.model, self.revision, mount, self.allow_patterns)]
        cfg = self.with_model(mount).with_port(8000, host="0.0.0.0")
        for d in self.drafters:
            weights.append(_truss_weight(d.repo, d.revision, f"{mount}-{d.mode}", d.allow_patterns))
            cfg = cfg.with_drafter_path(f"{mount}-{d.mode}")
        doc = {
            "model_name": f"{self.served_model_name} ({self.target})",
            "model_metadata": {
                "description": f"{self.label} — {self.variant} — speculative: {self.speculative}",
                "repo_id": self.model,
                "example_model_input": {
                    "model": self.served_model_name,
                    "messages": [
                        {"role": "user", "content": "Reply with exactly: deployment healthy"}
                    ],
                    "max_tokens": 32,
                    "temperature": 0,
                },
            },
            "base_image": {"image": self.docker_image},
            "weights": weights,
            "secrets": {"hf_access_token": None},
            "docker_server": {
                "start_command": shlex.join(cfg.serve_argv()),
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
        """A copy serving ``model`` (e.g. the local snapshot path from ``helpers.weights.download``)."""
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
            "extra",
            extra,
            (Mapping, type(None)),
            "a mapping {flag: value} (None removes a flag)",
            "with_args({'--max-model-len': 8192})",
        )
        args = dict(self.args)
        _merge_args(args, extra or {})
        added = tuple(f for f, val in (extra or {}).items() if val is not None)
        return dataclasses.replace(
            self,
            args=args,
            env={**self.env, **env},
            extra_flags=tuple(dict.fromkeys((*self.extra_flags, *added))),
        )

    def with_drafter_path(self, path: str | Path) -> ServeConfig:
        """A copy whose speculative config points at a local drafter folder."""
        spec = self.speculative_config
        if spec is None or "model" not in spec:
            raise RecipeError(
                f"Speculative mode {self.speculative!r} has no draft model to replace."
            )
        spec["model"] = str(path)
        spec.pop("revision", None)
        return self.with_args({"--speculative-config": spec})

    # ---- validation ----------------------------------------------------------------
    def check_values(self) -> None:
        """Reject flag values that vLLM would refuse only after launch (bounds: :data:`VALUE_BOUNDS`).

        Also, for a local checkpoint folder, ``--max-model-len`` above
        :func:`derived_max_model_len` unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set (in
        ``self.env`` or the environment), as vLLM 0.32.0's ``_get_and_verify_max_len`` does.

        Raises:
            RecipeError: names the flag, the value, the bound and where the flag came from.
        """
        for flag, (low, high, words) in VALUE_BOUNDS.items():
            if flag not in self.args:
                continue
            raw = self.args[flag]
            value = _number(raw)
            if flag == "--max-model-len" and (value == -1 or str(raw).strip().lower() == "auto"):
                continue
            origin = "from extra_args" if flag in self.extra_flags else "from cookbook/recipe.yaml"
            if value is None:
                raise RecipeError(f"{flag} {raw!r} ({origin}) is not a number: it must be {words}.")
            if (low is not None and value < low) or (high is not None and value > high):
                raise RecipeError(
                    f"{flag} {raw} ({origin}) is out of range: it must be {words} (vLLM 0.32.0 config "
                    f"bounds); fix the value{' in the extra_args you passed' if flag in self.extra_flags else ''}."
                )
        mml = _number(self.args.get("--max-model-len"))
        allow = str(
            self.env.get(
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN", os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")
            )
        )
        if mml and mml > 0 and allow.strip().lower() not in ("1", "true"):
            derived = derived_max_model_len(self.model)
            if derived and mml > derived[0]:
                raise RecipeError(
                    f"--max-model-len {self.args['--max-model-len']} is greater than the model's derived "
                    f"maximum of {derived[0]:,} tokens ({derived[1]}); vLLM 0.32.0 refuses to start "
                    f"(config/model.py _get_and_verify_max_len): set --max-model-len {derived[0]} or less, "
                    "or, only if the model really handles longer positions, set "
                    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (extra_env)."
                )

    def validate(self) -> None:
        """Check the flags before launch: :meth:`check_values`, then the installed vLLM's own
        ``vllm serve`` parser (:func:`helpers.config.flagcheck.validate_argv`, which also checks
        ``--speculative-config`` keys and ``method`` against its ``SpeculativeConfig``).

        Raises:
            RecipeError: an impossible number (see :meth:`check_values`), naming the bound.
            FlagError: names every rejected flag, where it came from (``extra_args`` or the
                registry) and a close match; the target's pin when it differs from the installed vLLM.
        """
        self.check_values()
        validate_argv(
            [self.model or "model", *self.cli_flags()],
            target_version=self.vllm_version,
            extra_flags=self.extra_flags,
        )


def command_lines(argv: Sequence[str]) -> str:
    """``argv`` for a terminal: the program (with its subcommand and model, or the docker image
    and model) on the first line, then each ``--flag`` with its values on a line of its own,
    joined by `` \\`` continuations."""
    items = [str(a) for a in argv]
    starts = [0] + [i for i, a in enumerate(items) if i and a.startswith("--")]
    ends = [*starts[1:], len(items)]
    return " \\\n  ".join(shlex.join(items[a:b]) for a, b in zip(starts, ends, strict=True))


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
    if isinstance(value, (list, tuple)):  # a flag of several values: --lora-modules a=P b=Q
        return [flag, *map(str, value)]
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
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0 runs the CPU worker inside the engine-core process: one spawn and one vLLM import fewer per start (stand-in only).",
    "OMP_NUM_THREADS": "1 engine thread: the CPU build skips vLLM's own reduction to one, and idle OpenMP threads spin (stand-in: 1.6-3x less CPU per token).",
}
