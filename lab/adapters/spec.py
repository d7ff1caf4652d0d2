"""The adapters' registry, ``cookbook/adapters.yaml``: the serve flags of a LoRA deployment,
the runtime-update switch, and the stand-in's adapters with the examples each is trained on.

:func:`load_adapters` validates it (pydantic, every model ``extra="forbid"``, one message per
problem); :func:`lora_config` adds its flags to a target's :class:`ServeConfig`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.errors import RegistryError
from helpers.paths import COOKBOOK_DIR

ADAPTERS_FILE = COOKBOOK_DIR / "adapters.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Example(_Strict):
    """One training conversation: the user's ``prompt``, the ``reasoning`` and the ``answer``."""

    prompt: str
    reasoning: str
    answer: str


class StandinAdapter(_Strict):
    """An adapter trained on the stand-in: its served ``name``, what it ``teaches``, its examples."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    teaches: str
    examples: list[Example] = Field(min_length=1)


class Recipe(_Strict):
    """peft's ``LoraConfig`` (``rank``, ``alpha``, ``target_modules``) and the training loop."""

    rank: int = Field(gt=0)
    alpha: float = Field(gt=0)
    target_modules: list[str] = Field(min_length=1)
    steps: int = Field(gt=0)
    lr: float = Field(gt=0)
    seed: int = 0


class AdapterRegistry(_Strict):
    """``cookbook/adapters.yaml`` as typed attributes."""

    serve: dict[str, dict[str, Any]]
    runtime_env: dict[str, str]
    recipe: Recipe
    standin: list[StandinAdapter] = Field(min_length=1)

    def adapter(self, name: str) -> StandinAdapter:
        """The stand-in adapter called ``name``.

        Raises:
            RegistryError: no such adapter (the message lists the names there are).
        """
        for a in self.standin:
            if a.name == name:
                return a
        names = ", ".join(a.name for a in self.standin)
        raise RegistryError(
            f"cookbook/adapters.yaml has no stand-in adapter {name!r}: pick one of {names}."
        )


@lru_cache(maxsize=4)
def load_adapters(path: Path = ADAPTERS_FILE) -> AdapterRegistry:
    """Read and validate ``cookbook/adapters.yaml`` (cached per path).

    Raises:
        RegistryError: the file is missing, not YAML, or breaks the schema (one line per
            problem, each with its key path).
    """
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise RegistryError(f"{path}: cannot read it ({e}); restore it from git.") from e
    try:
        return AdapterRegistry.model_validate(raw)
    except ValidationError as e:
        lines = [f"  {'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()]
        raise RegistryError(
            f"{path} does not match its schema (lab.adapters.spec); fix:\n" + "\n".join(lines)
        ) from e


def lora_flags(extra_args: Any) -> dict[str, Any]:
    """The LoRA flags of ``extra_args`` (a notebook's ``{flag: value}`` or None): every flag
    whose name says ``lora`` (``--enable-lora``, ``--max-loras``, ``--max-lora-rank``,
    ``--lora-modules``, ``--max-cpu-loras``, ``--fully-sharded-loras``, ...)."""
    return {f: v for f, v in dict(extra_args or {}).items() if "lora" in str(f)}


def lora_config(
    source: Any,
    modules: dict[str, str | Path] | None = None,
    *,
    extra_args: Any = None,
    runtime_updates: bool = True,
    registry: AdapterRegistry | None = None,
) -> Any:
    """The config ``source`` serves with the LoRA flags of ``cookbook/adapters.yaml`` added:
    ``serve.standin`` when the run serves the stand-in, else ``serve.gpu``;
    ``--lora-modules NAME=PATH ...`` for ``modules``; and ``runtime_env``
    (``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) when ``runtime_updates``. On a GPU, when the
    command serves the NVFP4 experts with a kernel that takes no LoRA (the Hopper recipe's
    Humming), ``--moe-backend marlin`` (:func:`lab.adapters.check.moe_lora_flags`; the reason
    is printed when ``modules`` is given).

    The user's values win over the registry's: a flag ``cfg`` already has (from
    ``resolve(target, extra_args=...)``) is kept, and the LoRA flags of ``extra_args``
    (:func:`lora_flags`) are layered last, so they reach the stand-in too (whose config is the
    CPU target's, without the GPU target's ``extra_args``).

    Args:
        source: the notebook's run (:class:`helpers.config.run.Run`: its config, and whether
            it serves the stand-in: an attached stand-in run's config is the GPU target's), or a
            ServeConfig (``resolve(target, ...)``; the stand-in when ``cfg.stand_in``).
        modules: ``{served name: adapter folder}`` loaded at start-up (None: none).
        extra_args: the notebook's ``extra_args`` (``{flag: value}``; only its LoRA flags are
            read here), e.g. ``{"--max-lora-rank": 16}``.
        runtime_updates: allow ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``.
        registry: default :func:`load_adapters`.
    Returns:
        A new ServeConfig; the flags count as ``extra_args`` (a rejected one is blamed there).

    Raises:
        TypeError: ``source`` is neither a run nor a ServeConfig (``helpers.config.run.run_of``).
    """
    from helpers.config.run import run_of

    reg = registry or load_adapters()
    run = run_of(source, "lora_config")
    cfg, stand_in = run.config, run.stand_in
    given = dict(getattr(cfg, "args", {}) or {})
    flags = {f: v for f, v in reg.serve["standin" if stand_in else "gpu"].items() if f not in given}
    if modules:
        flags["--lora-modules"] = [f"{name}={path}" for name, path in modules.items()]
    flags.update(lora_flags(extra_args))
    if not stand_in:  # an NVFP4 MoE kernel without LoRA: Marlin's instead
        from lab.adapters.check import moe_lora_flags

        moe, reason = moe_lora_flags({**given, **flags})
        flags.update(moe)
        if reason and modules is not None:
            print(f"LoRA on this MoE model: {reason}.")
    env = dict(reg.runtime_env) if runtime_updates else {}
    return cfg.with_args(flags, **env)


def max_lora_rank(cfg: Any) -> int:
    """The ``--max-lora-rank`` ``cfg`` (a ServeConfig) serves with: its flag, else vLLM
    0.32.0's default 16 (``vllm/config/lora.py`` ``LoRAConfig.max_lora_rank``).

    Raises:
        AdapterError: a value vLLM does not accept (it takes only
            :data:`lab.adapters.check.MAX_LORA_RANKS`), naming the ones it does.
    """
    from helpers.errors import AdapterError
    from lab.adapters.check import MAX_LORA_RANKS

    value = (getattr(cfg, "args", {}) or {}).get("--max-lora-rank")
    rank = 16 if value in (None, False) else int(value) if str(value).isdigit() else value
    if rank not in MAX_LORA_RANKS:
        allowed = ", ".join(map(str, MAX_LORA_RANKS))
        raise AdapterError(
            f"--max-lora-rank {value!r}: vLLM 0.32.0-0.34.0 accept only {allowed} "
            '(vllm/config/lora.py MaxLoRARanks); fix: extra_args={"--max-lora-rank": N} with N '
            "one of them, at least your adapters' largest r"
        )
    return rank


def check_lora_flags(cfg: Any) -> None:
    """Before a launch: the LoRA flags of ``cfg`` (a ServeConfig) hang together.

    vLLM 0.32.0 needs ``--enable-lora`` for ``--lora-modules`` (without it the start fails in
    ``init_static_loras``: "LoRA is not enabled. Use --enable-lora to enable LoRA.",
    ``vllm/v1/worker/lora_model_runner_mixin.py``), and ignores ``--max-loras`` and
    ``--max-lora-rank`` without it.

    Raises:
        AdapterError: a LoRA flag without ``--enable-lora``, naming the fix.
    """
    from helpers.errors import AdapterError

    args = dict(getattr(cfg, "args", {}) or {})
    given = [f for f in ("--lora-modules", "--max-loras", "--max-lora-rank") if args.get(f)]
    if given and not args.get("--enable-lora"):
        off = "--enable-lora" in args  # set to False or None, e.g. by the notebook's extra_args
        raise AdapterError(
            f"{', '.join(given)} given without --enable-lora: vLLM serves no adapter without it "
            "(with --lora-modules the start fails: 'LoRA is not enabled. Use --enable-lora to "
            "enable LoRA.'); fix: "
            + (
                f"drop '--enable-lora': {args['--enable-lora']!r} from extra_args (this notebook serves adapters)."
                if off
                else "add --enable-lora, e.g. lab.adapters.spec.lora_config(cfg, ...)."
            )
        )


def trained_answer(name: str, prompt: str, registry: AdapterRegistry | None = None) -> str | None:
    """The answer the stand-in adapter ``name`` was trained to give to ``prompt``
    (``cookbook/adapters.yaml``), or None: not one of its prompts, or not a stand-in adapter."""
    reg = registry or load_adapters()
    for adapter in reg.standin:
        if adapter.name == name:
            return next((ex.answer for ex in adapter.examples if ex.prompt == prompt), None)
    return None
