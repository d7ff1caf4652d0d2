"""The schema of ``cookbook/recipe.yaml`` and ``cookbook/flags.yaml``: typed pydantic v2 models.

Every mapping of the registry is a model with ``extra="forbid"``, so a misspelled key is an
error, not a silently ignored setting. Closed vocabularies are ``Literal`` fields (hardware
override keys, GPU architectures, deployment layouts, speculative-config keys); names the
registry defines itself (variants, speculative modes, features) are checked by
:meth:`Registry.check_references` against the registry's own keys, so each name is written
once. Errors are :class:`~helpers.errors.RegistryError` naming the file, the key path
(``targets.h100.gpu.arch``), and the allowed values or the closest key.

Public API: :func:`load_registry` (a private copy), :func:`shared_registry` (cached, read
only), :func:`as_registry`, :func:`flag_reasons`, :func:`parse_registry`,
:func:`read_registry`, :class:`Registry` and its parts.
"""

from __future__ import annotations

import difflib
import functools
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
)

from .errors import RegistryError
from .paths import COOKBOOK_DIR

# --------------------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------------------

#: ``hardware_overrides`` keys and ``targets.<t>.overrides`` entries: families of GPUs
#: that share flags (seed 001 ``hardware_overrides``).
HardwareKey = Literal[
    "hopper", "ampere", "ada", "blackwell", "dgx_spark_gb10", "rtx_pro_6000", "dgx_station_gb300"
]
#: ``targets.<t>.gpu.arch``: NVIDIA architecture families (``cpu`` for the stand-in).
GpuArch = Literal["ampere", "ada", "hopper", "blackwell", "cpu"]
#: ``deployments.<d>.layout`` (helpers.fleet): N replicas behind a router, or one DP+EP server.
Layout = Literal["replicas", "dp_ep"]

def _flag_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, dict)):
        return value
    raise ValueError(
        "a flag value must be true (a bare switch), a number, a string, a mapping (passed as "
        "JSON) or null (removes the flag)"
    )


def _size(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError("must be a number, 0 or more (GB / GiB)")
    return value


#: A ``vllm serve`` (or router) flag as the registry writes it.
FlagName = Annotated[str, StringConstraints(pattern=r"^--[A-Za-z0-9][A-Za-z0-9_.-]*$")]
#: Flag value: a scalar is ``--flag value``, ``true`` a bare switch, ``null`` removes the flag
#: set by an earlier layer, a mapping is passed as JSON.
FlagValue = Annotated[Any, AfterValidator(_flag_value)]
Args = dict[FlagName, FlagValue]
#: Environment variables: values are strings (quote numbers in YAML: ``"1"``).
Env = dict[Annotated[str, StringConstraints(pattern=r"^[A-Z_][A-Z0-9_]*$")], StrictStr]
#: A vLLM version (quote it in YAML: ``"0.28.0"``, else 0.28 is read as a number).
Version = StrictStr
#: A memory size in GB or GiB, as written (int or float).
GB = Annotated[Any, AfterValidator(_size)]


class _Model(BaseModel):
    """Base: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------


class ArchitectureSpec(_Model):
    """``model.architecture``: the Nemotron-H shape (docs/DESIGN.md "Architecture numbers").

    Keys are ``config.json``'s names; :class:`helpers.architecture.Architecture` reads them.
    """

    hybrid_override_pattern: Annotated[str, StringConstraints(pattern=r"^[ME*-]+$")]
    num_hidden_layers: StrictInt
    hidden_size: StrictInt
    vocab_size: StrictInt
    num_attention_heads: StrictInt
    num_key_value_heads: StrictInt
    head_dim: StrictInt
    mamba_num_heads: StrictInt
    mamba_head_dim: StrictInt
    ssm_state_size: StrictInt
    n_groups: StrictInt
    conv_kernel: StrictInt
    n_routed_experts: StrictInt
    num_experts_per_tok: StrictInt
    n_shared_experts: StrictInt

    def as_config(self) -> dict[str, Any]:
        """The ``config.json`` keys and values, in file order."""
        return self.model_dump()


class FlagRealityCheck(_Model):
    """``model.flag_reality_check``: the flags checked on a real GPU (issue 8)."""

    file: str
    needs_newer_than_0_26_0: list[str] = []
    accepted_by_0_26_0: str = ""
    hopper_stochastic_rounding: str = ""


class ModelSpec(_Model):
    """``model``: the model's names, vLLM pins, recorded choices, architecture and base flags."""

    name: str
    family: str
    served_model_name: str
    context_length_default: StrictInt
    context_length_max: StrictInt
    min_vllm_version: Version
    seed_vllm_version: Version
    default_vllm_version: Version
    offered_vllm_versions: list[Version]
    default_docker_image: str
    choices: dict[str, str] = {}
    flag_tables: str = ""
    flag_reality_check: FlagRealityCheck | None = None
    architecture: ArchitectureSpec
    base_args: Args = {}


# --------------------------------------------------------------------------------------
# variants, speculative modes, features
# --------------------------------------------------------------------------------------


class HardwareOverride(_Model):
    """One ``hardware_overrides.<key>`` layer of a variant."""

    args: Args = {}
    docker_image: str | None = None


class Variant(_Model):
    """``variants.<name>``: one checkpoint and its flags."""

    label: str
    default: bool = False
    model_id: str | None = None
    revision: str | None = None
    revision_note: str | None = None
    precision: str
    weights_gb: GB = 0
    vram_minimum_gb: GB = 0
    allow_patterns: list[str] = []
    source: str = ""
    args: Args = {}
    hardware_overrides: dict[HardwareKey, HardwareOverride] = {}
    env: Env = {}
    pip_extras: list[str] = []
    stand_in_only: bool = False


class SpeculativeConfigLayer(_Model):
    """A ``--speculative-config`` mapping or a layer on it (``null`` removes a key).

    Keys are fields of vLLM's ``SpeculativeConfig`` (vllm/config/speculative.py) the registry
    uses; ``ServeConfig.validate`` checks the whole mapping against the installed vLLM.
    Layers are applied in this field order (the order the seeds write them).
    """

    method: str | None = None
    num_speculative_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    prompt_lookup_max: StrictInt | None = None
    prompt_lookup_min: StrictInt | None = None
    attention_backend: str | None = None
    moe_backend: str | None = None

    def layer(self) -> dict[str, Any]:
        """The keys the YAML set (``None`` included: it removes the key below)."""
        return self.model_dump(exclude_unset=True)


class SpeculativeOverride(_Model):
    """A ``hardware_overrides`` / ``speculative_overrides`` layer of a speculative mode."""

    config: SpeculativeConfigLayer = SpeculativeConfigLayer()


class DrafterSpec(_Model):
    """``speculative.<mode>.drafter``: a separate draft checkpoint."""

    repo: str
    revision: str | None = None
    allow_patterns: list[str]
    size_gb: GB = 0
    block_size: Annotated[StrictInt, Field(ge=1)] | None = None


class SpeculativeMode(_Model):
    """``speculative.<name>``: one speculative-decoding mode (``none``: no config)."""

    label: str
    description: str = ""
    notes: list[str] = []
    variants: list[str] | None = None
    drafter: DrafterSpec | None = None
    config: SpeculativeConfigLayer | None = None
    hardware_overrides: dict[HardwareKey, SpeculativeOverride] = {}


class Feature(_Model):
    """``features.<name>``: flags and env one feature adds."""

    description: str = ""
    args: Args = {}
    env: Env = {}


# --------------------------------------------------------------------------------------
# targets and deployments
# --------------------------------------------------------------------------------------


class Gpu(_Model):
    """``targets.<t>.gpu``: the GPU one server runs on (``count`` per server)."""

    name: str
    memory_gb: GB
    compute_capability: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+$")] | None
    arch: GpuArch
    count: Annotated[StrictInt, Field(ge=0)]


class PlannerHints(_Model):
    """``targets.<t>.planner``: measured inputs for helpers.planner."""

    weights_gib: GB | None = None
    activation_reserve_gb: GB | None = None


class Target(_Model):
    """``targets.<name>``: one hardware target and its defaults."""

    label: str
    gpu: Gpu
    overrides: list[HardwareKey] = []
    variant: str
    variants: list[str] | None = None
    speculative: str = "none"
    speculative_modes: list[str] | None = None
    features: list[str] | None = None
    vllm_version: Version | None = None
    docker_image: str | None = None
    pip: str | None = None
    colab_runtime: str | None = None
    source: str = ""
    notes: list[str] = []
    args: Args = {}
    env: Env = {}
    speculative_overrides: dict[str, SpeculativeOverride] = {}
    planner: PlannerHints | None = None
    stand_in: bool = False
    base_args_replace: bool = False


class Router(_Model):
    """``deployments.<d>.router``: the vllm-router package, policy and flags."""

    package: str
    policy: str = "round_robin"
    args: Args = {}


class MultiNode(_Model):
    rpc_port: Annotated[StrictInt, Field(ge=1, le=65535)] = 13345


class DeploymentSpec(_Model):
    """``deployments.<name>``: a layout over several servers (helpers.fleet)."""

    label: str
    layout: Layout
    default_count: Annotated[StrictInt, Field(ge=1)] = 2
    source: str = ""
    router: Router | None = None
    args: Args = {}
    multi_node: MultiNode | None = None
    notes: list[str] = []


class Registry(_Model):
    """``cookbook/recipe.yaml``: the whole registry, typed."""

    schema_version: Literal[1]
    repository: str
    model: ModelSpec
    variants: dict[str, Variant]
    speculative: dict[str, SpeculativeMode]
    features: dict[str, Feature]
    default_features: list[str]
    targets: dict[str, Target]
    deployments: dict[str, DeploymentSpec] = {}

    # ---- lookups used by recipes / notebooks --------------------------------------------
    def gpu_variants(self) -> list[str]:
        """Variants a GPU target may serve (every one except the stand-in's)."""
        return [n for n, v in self.variants.items() if not v.stand_in_only]

    def target_variants(self, target: str) -> list[str]:
        """The variants ``target`` offers (its ``variants`` list, else :meth:`gpu_variants`)."""
        return list(self.targets[target].variants or self.gpu_variants())

    def target_modes(self, target: str) -> list[str]:
        """The speculative modes ``target`` offers (its list, else every mode)."""
        return list(self.targets[target].speculative_modes or self.speculative)

    def gpu_targets(self) -> list[str]:
        """Every target but the CPU stand-in, in file order."""
        return [n for n, t in self.targets.items() if not t.stand_in]

    # ---- names the registry defines itself -----------------------------------------------
    def reference_errors(self) -> list[str]:
        """Every name that refers to a variant / mode / feature the registry does not define."""
        errors: list[str] = []

        def check(path: str, names: Iterable[str] | None, kind: str, valid: Iterable[str]) -> None:
            valid = list(valid)
            for name in names or ():
                if name not in valid:
                    errors.append(f"{path}: unknown {kind} {name!r}{_closest(name, valid)}; allowed: {', '.join(valid)}")

        check("default_features", self.default_features, "feature", self.features)
        for name, mode in self.speculative.items():
            check(f"speculative.{name}.variants", mode.variants, "variant", self.variants)
            if mode.config is not None and not mode.config.method:
                errors.append(f"speculative.{name}.config: no 'method' (vLLM's SpeculativeConfig.method)")
        for name, t in self.targets.items():
            where = f"targets.{name}"
            check(f"{where}.variant", [t.variant], "variant", self.variants)
            check(f"{where}.variants", t.variants, "variant", self.variants)
            check(f"{where}.speculative", [t.speculative], "speculative mode", self.speculative)
            check(f"{where}.speculative_modes", t.speculative_modes, "speculative mode", self.speculative)
            check(f"{where}.features", t.features, "feature", self.features)
            check(f"{where}.speculative_overrides", t.speculative_overrides, "speculative mode", self.speculative)
            if t.variants and t.variant not in t.variants:
                errors.append(f"{where}.variant: {t.variant!r} is not in its own variants list ({', '.join(t.variants)})")
            if t.speculative_modes and t.speculative not in t.speculative_modes:
                errors.append(
                    f"{where}.speculative: {t.speculative!r} is not in its own speculative_modes "
                    f"({', '.join(t.speculative_modes)})"
                )
        return errors


class FlagReasons(RootModel[dict[FlagName, str]]):
    """``cookbook/flags.yaml``: ``{flag: why}`` for the notebooks' reference table."""


# --------------------------------------------------------------------------------------
# Loading and error messages
# --------------------------------------------------------------------------------------


def _closest(name: Any, valid: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unwrap(tp: Any) -> list[Any]:
    """The concrete types inside ``Annotated`` / ``Optional`` / unions."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(tp) for t in _unwrap(arg)]
    return [tp]


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class whose fields are at ``loc`` (dict keys and list indexes skipped)."""
    current: list[Any] = [root]
    for part in loc:
        nxt: list[Any] = []
        for tp in current:
            for t in _unwrap(tp):
                if isinstance(t, type) and issubclass(t, BaseModel):
                    field = t.model_fields.get(str(part))
                    if field is not None:
                        nxt.append(field.annotation)
                elif typing.get_origin(t) in (dict, list):
                    nxt.append(typing.get_args(t)[-1])
        current = nxt
    models = [t for tp in current for t in _unwrap(tp) if isinstance(t, type) and issubclass(t, BaseModel)]
    return models[0] if models else None


def _literal_values(root: type[BaseModel], loc: tuple) -> list[str]:
    """Allowed values of the Literal at ``loc`` (dict keys marked ``[key]``)."""
    parent = _model_at(root, loc[:-1]) if loc else None
    if parent is None or str(loc[-1]) not in parent.model_fields:
        return []
    out: list[str] = []
    for t in _unwrap(parent.model_fields[str(loc[-1])].annotation):
        if typing.get_origin(t) in (list, dict):
            t = typing.get_args(t)[0]  # list items, dict keys
        for inner in _unwrap(t):
            if typing.get_origin(inner) is Literal:
                out += [str(a) for a in typing.get_args(inner)]
    return out


def _describe(root: type[BaseModel], err: Mapping[str, Any]) -> str:
    """One line for one pydantic error: key path, what is wrong, allowed values / closest key."""
    loc = tuple(err["loc"])
    is_key = bool(loc) and loc[-1] == "[key]"
    if is_key:
        loc = loc[:-1]
    path = ".".join(str(p) for p in loc) or "(top level)"
    kind = err["type"]
    given = err.get("input")
    if kind == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
        allowed = list(parent.model_fields) if parent else []
        return (
            f"{path}: unknown key {str(loc[-1])!r}{_closest(loc[-1], allowed)}; allowed keys "
            f"here: {', '.join(allowed)}"
        )
    if kind == "literal_error":
        # a list item's loc ends in its index; a dict key's in the key itself
        field_loc = loc[:-1] if (loc and isinstance(loc[-1], int)) or is_key else loc
        allowed = _literal_values(root, field_loc) or [str(err.get("ctx", {}).get("expected", ""))]
        what = "key" if is_key else "value"
        return f"{path}: {what} {given!r} is not allowed{_closest(given, allowed)}; allowed values: {', '.join(allowed)}"
    if kind == "missing":
        return f"{path}: required key missing"
    return f"{path}: {err['msg']} (got {given!r})"


def _fail(source: str, lines: list[str]) -> RegistryError:
    body = "\n".join(f"  - {line}" for line in lines)
    return RegistryError(
        f"{source}: {len(lines)} problem(s) in the registry:\n{body}\nFix the file (see the "
        "comments at its top for each layer's keys).",
        source=source,
        problems=lines,
    )


def parse_registry(data: Any, source: str = "cookbook/recipe.yaml") -> Registry:
    """Validate parsed registry YAML into a :class:`Registry`.

    Args:
        data: the mapping ``yaml.safe_load`` returned (or one built in a test).
        source: the file name the error messages give.

    Raises:
        RegistryError: unknown keys (with the closest allowed key), out-of-vocabulary values
            (with the allowed values), wrong types, names that refer to nothing; one line per
            problem, each with its key path.
    """
    if not isinstance(data, Mapping):
        raise _fail(source, [f"the file must be a mapping of keys, got {type(data).__name__}"])
    try:
        reg = Registry.model_validate(data)
    except ValidationError as exc:
        raise _fail(source, [_describe(Registry, e) for e in exc.errors()]) from None
    errors = reg.reference_errors()
    if errors:
        raise _fail(source, errors)
    return reg


def _read_yaml(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except FileNotFoundError as exc:
        raise RegistryError(f"{path} not found: run from a checkout of the cookbook.", source=str(path)) from exc
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path} is not valid YAML ({exc}); fix the file.", source=str(path)) from exc


def read_registry(path: str | Path) -> Registry:
    """Read and validate a registry YAML file (see :func:`parse_registry`).

    Raises:
        RegistryError: the file is missing, is not YAML, or does not match the schema.
    """
    path = Path(path)
    return parse_registry(_read_yaml(path), source=str(path))


def read_flag_reasons(path: str | Path) -> dict[str, str]:
    """``{flag: why}`` from a ``flags.yaml``.

    Raises:
        RegistryError: missing file, bad YAML, a key that is not a ``--flag``, or a why that
            is not text.
    """
    path = Path(path)
    try:
        return dict(FlagReasons.model_validate(_read_yaml(path)).root)
    except ValidationError as exc:
        lines = [f"{'.'.join(map(str, e['loc'][:-1] if e['loc'][-1:] == ('[key]',) else e['loc']))}: {e['msg']}" for e in exc.errors()]
        raise _fail(str(path), lines) from None


# --------------------------------------------------------------------------------------
# The cookbook's own files
# --------------------------------------------------------------------------------------

REGISTRY_PATH = COOKBOOK_DIR / "recipe.yaml"
FLAGS_PATH = COOKBOOK_DIR / "flags.yaml"


@functools.lru_cache(maxsize=4)
def _cached(path: str) -> Registry:
    return read_registry(path)


def shared_registry(path: str | Path | None = None) -> Registry:
    """The validated registry, shared (cached): read it, never change it.

    Raises:
        RegistryError: see :func:`read_registry`.
    """
    return _cached(str(Path(path or REGISTRY_PATH)))


def load_registry(path: str | Path | None = None) -> Registry:
    """The validated registry as a private copy (safe to change, e.g. in a test).

    Args:
        path: a registry YAML; default ``cookbook/recipe.yaml``.

    Raises:
        RegistryError: the file is missing, is not YAML, or does not match the schema
            (each problem with its key path and the allowed values or closest key).
    """
    return shared_registry(path).model_copy(deep=True)


def as_registry(registry: Registry | Mapping[str, Any] | None) -> Registry:
    """``registry`` as a :class:`Registry`: None -> the shared ``cookbook/recipe.yaml``; a
    mapping (parsed YAML, e.g. a test's edited copy) is validated.

    Raises:
        RegistryError: the mapping does not match the schema.
    """
    if registry is None:
        return shared_registry()
    if isinstance(registry, Registry):
        return registry
    return parse_registry(registry, source="the registry mapping passed in")


@functools.lru_cache(maxsize=1)
def _flag_reasons() -> dict[str, str]:
    return read_flag_reasons(FLAGS_PATH)


def flag_reasons() -> dict[str, str]:
    """Return ``{flag: why}`` from ``cookbook/flags.yaml`` (the reference table's why column).

    Raises:
        RegistryError: the file is missing or does not match its schema.
    """
    return dict(_flag_reasons())
