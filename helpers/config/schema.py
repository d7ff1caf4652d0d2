"""The schema of ``cookbook/recipe.yaml`` and ``cookbook/flags.yaml``: typed pydantic v2 models.

Every mapping forbids extra keys, so a misspelled key is an error. Closed vocabularies are
``Literal`` fields; names the registry defines itself (variants, modes, features) are checked
by :meth:`Registry.reference_errors`, so each name is written once.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictInt,
    StrictStr,
    StringConstraints,
)

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
#: ``deployments.<d>.layout`` (lab.fleet.fleet): N replicas behind a router, or one DP+EP server.
Layout = Literal["replicas", "dp_ep"]


def _flag_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, dict)):
        return value
    raise ValueError("a flag value must be true (a bare switch), a number, a string, a mapping (passed as JSON) "
                     "or null (removes the flag)")  # fmt: skip


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


def _closest(name: Any, valid: Iterable[str], cutoff: float = 0.6) -> str:
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=cutoff)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Model(BaseModel):
    """Base: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------


class ArchitectureSpec(_Model):
    """``model.architecture``: the Nemotron-H shape (docs/DESIGN.md "Architecture numbers").

    Keys are ``config.json``'s names (``model_dump()`` gives them in file order);
    :class:`helpers.memory.architecture.Architecture` reads them.
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
    mtp_hybrid_override_pattern: Annotated[str, StringConstraints(pattern=r"^[ME*-]*$")] = ""


class FlagRealityCheck(_Model):
    """``model.flag_reality_check``: the flags checked on a real H200 (vLLM 0.26.0)."""

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
    """A ``hardware_overrides`` / ``speculative_overrides`` layer of a speculative mode:
    ``config`` merges into ``--speculative-config``; ``args`` (hardware overrides) are server
    flags the mode needs on that hardware, layered after the target's own (``None`` removes
    a flag)."""

    config: SpeculativeConfigLayer = SpeculativeConfigLayer()
    args: Args = {}


class DrafterSpec(_Model):
    """``speculative.<mode>.drafter``: a separate draft checkpoint."""

    repo: str
    revision: str | None = None
    allow_patterns: list[str]
    size_gb: GB = 0
    block_size: Annotated[StrictInt, Field(ge=1)] | None = None


class SyntheticAcceptance(_Model):
    """``speculative.<mode>.synthetic_acceptance``: the acceptance length a weightless server
    drafts at (vLLM 0.32.0's ``rejection_sample_method: synthetic``), as a public benchmark
    configuration states it: ``length`` tokens per target step (1 + accepted drafts) at
    ``num_speculative_tokens`` drafts, from ``source`` (where, and its date)."""

    num_speculative_tokens: Annotated[StrictInt, Field(ge=1)]
    length: Annotated[float, Field(ge=1.0)]
    source: str


class SpeculativeMode(_Model):
    """``speculative.<name>``: one speculative-decoding mode (``none``: no config)."""

    label: str
    description: str = ""
    notes: list[str] = []
    variants: list[str] | None = None
    drafter: DrafterSpec | None = None
    config: SpeculativeConfigLayer | None = None
    hardware_overrides: dict[HardwareKey, SpeculativeOverride] = {}
    synthetic_acceptance: SyntheticAcceptance | None = None


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
    """``targets.<t>.planner``: measured inputs for helpers.memory.planner."""

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
    """``deployments.<name>``: a layout over several servers (lab.fleet.fleet)."""

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
                    errors.append(
                        f"{path}: unknown {kind} {name!r}{_closest(name, valid)}; allowed: {', '.join(valid)}"
                    )

        check("default_features", self.default_features, "feature", self.features)
        for name, mode in self.speculative.items():
            check(f"speculative.{name}.variants", mode.variants, "variant", self.variants)
            if mode.config is not None and not mode.config.method:
                errors.append(
                    f"speculative.{name}.config: no 'method' (vLLM's SpeculativeConfig.method)"
                )
        for name, t in self.targets.items():
            where = f"targets.{name}"
            for key, names, kind, valid in (
                ("variant", [t.variant], "variant", self.variants),
                ("variants", t.variants, "variant", self.variants),
                ("speculative", [t.speculative], "speculative mode", self.speculative),
                ("speculative_modes", t.speculative_modes, "speculative mode", self.speculative),
                ("features", t.features, "feature", self.features),
                (
                    "speculative_overrides",
                    t.speculative_overrides,
                    "speculative mode",
                    self.speculative,
                ),
            ):
                check(f"{where}.{key}", names, kind, valid)
            if t.variants and t.variant not in t.variants:
                errors.append(
                    f"{where}.variant: {t.variant!r} is not in its own variants list ({', '.join(t.variants)})"
                )
            if t.speculative_modes and t.speculative not in t.speculative_modes:
                errors.append(
                    f"{where}.speculative: {t.speculative!r} is not in its own speculative_modes "
                    f"({', '.join(t.speculative_modes)})"
                )
        return errors


class FlagReasons(RootModel[dict[FlagName, str]]):
    """``cookbook/flags.yaml``: ``{flag: why}`` for the notebooks' reference table."""
