"""Which runtime a workshop notebook landed on, and where that runtime honestly routes.

Notebook verb: :func:`route_runtime`. :func:`classify` names a Colab-style runtime from the GPU
the driver reports; :func:`route` maps it to a registry target with the memory planner's
verdict, or to the CPU stand-in with the reason.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from helpers.config.load import as_registry
from helpers.config.schema import Registry
from helpers.config.versions import is_colab
from helpers.errors import CookbookError
from helpers.machine.gpus import GPU, detect_gpus
from helpers.machine.hardware import MIN_COMPUTE_CAPABILITY, match_targets

if TYPE_CHECKING:
    from helpers.config.resolve import RegistryLike

#: (runtime key, label, pattern on the driver's product name). Checked in order; the A100
#: is split by memory in :func:`classify`.
RUNTIMES: tuple[tuple[str, str, str], ...] = (
    ("t4", "T4 (16 GB, Turing)", r"\bT4\b"),
    ("l4", "L4 (24 GB, Ada)", r"\bL4\b"),
    ("a100", "A100", r"\bA100\b"),
    ("h100", "H100 (80 GB, Hopper)", r"\bH100\b"),
    ("g4", 'RTX PRO 6000 Blackwell ("G4")', r"\bRTX PRO 6000\b"),
)
#: Runtime -> registry target (None: the CPU stand-in).
TARGET_OF: dict[str, str | None] = {
    "cpu": None,
    "t4": None,
    "l4": "l4",
    "a100-40gb": "a100-40gb",
    "a100-80gb": "a100",
    "h100": "h100",
    "g4": "rtx-pro-6000",
}
#: An A100 at or above this many GiB is the 80 GB part (the 40 GB one reports 40960 MiB).
A100_80GB_MIN_GIB = 60.0
STANDIN_TARGET = "cpu"


@dataclasses.dataclass(frozen=True)
class Runtime:
    """The runtime this kernel runs on.

    Attributes:
        key: a key of :data:`TARGET_OF`, or ``"unknown"``.
        label: for people, e.g. ``"L4 (24 GB, Ada)"``.
        gpu: the first GPU (None on ``cpu``); gpu_count: how many GPUs of any kind.
        colab: True inside Google Colab; detail: why no GPU was found, or "".
    """

    key: str
    label: str
    gpu: GPU | None = None
    gpu_count: int = 0
    colab: bool = False
    detail: str = ""

    def describe(self) -> str:
        where = "Colab" if self.colab else "this machine"
        if self.gpu is None:
            return f"{where}: CPU only ({self.detail or 'no NVIDIA GPU'})"
        return f"{where}: {self.label} — {self.gpu_count}x {self.gpu.describe()}"


@dataclasses.dataclass
class Route:
    """Where a runtime goes: ``target`` (``"cpu"`` for the stand-in, then ``stand_in``), the
    ``reason`` in one or two sentences, and the memory planner's ``plan`` of the target (None for
    the stand-in).
    """

    runtime: Runtime
    target: str
    stand_in: bool
    reason: str
    plan: object | None = None

    def summary(self) -> str:
        where = (
            f"the CPU stand-in (target {self.target!r})"
            if self.stand_in
            else f"registry target {self.target!r} (Nemotron 3.5 Lightning)"
        )
        lines = [f"Runtime: {self.runtime.describe()}", f"Route: {where}.", f"Why: {self.reason}"]
        if self.plan is not None:
            lines.append(self.plan.summary())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()


def classify(gpus: Sequence[GPU], *, colab: bool | None = None, detail: str = "") -> Runtime:
    """Name the runtime from the GPUs the driver reports (empty: a CPU runtime; an unlisted GPU:
    ``key="unknown"``). ``colab`` overrides Colab detection; ``detail`` (why no GPU was found) is
    carried into the description.
    """
    colab = is_colab() if colab is None else bool(colab)
    if not gpus:
        return Runtime("cpu", "CPU only", None, 0, colab, detail)
    first = gpus[0]
    for key, label, pattern in RUNTIMES:
        if re.search(pattern, first.name, re.IGNORECASE):
            if key == "a100":
                big = (
                    first.memory_total_gib is not None
                    and first.memory_total_gib >= A100_80GB_MIN_GIB
                )
                key, label = (
                    ("a100-80gb", "A100 80 GB (Ampere)")
                    if big
                    else ("a100-40gb", "A100 40 GB (Ampere)")
                )
            return Runtime(key, label, first, len(gpus), colab, detail)
    return Runtime("unknown", first.name, first, len(gpus), colab, detail)


def _t4_reason(gpu: GPU, registry: Registry) -> str:
    """17.2 GiB: the NVFP4 weights as vLLM 0.32.0 loads them (W4A16;
    docs/results/README.md#nvfp4-weight-size), recorded as ``targets.l4.planner``."""
    l4 = registry.targets.get("l4")
    weights = float(
        (l4.planner.weights_gib if l4 is not None and l4.planner is not None else None) or 17.2
    )
    mem = f"{gpu.memory_total_gib:.1f} GiB" if gpu.memory_total_gib is not None else "its memory"
    cc = gpu.compute_capability or "?"
    return (
        f"Nemotron 3.5 Lightning does not fit a {gpu.name}: the NVFP4 weights alone are "
        f"{weights:g} GiB (as vLLM loads them, W4A16) and the card has {mem}; and its compute "
        f"capability {cc} (Turing) has no FP4 tensor cores and is below the "
        f"{MIN_COMPUTE_CAPABILITY[0]}.{MIN_COMPUTE_CAPABILITY[1]} that vLLM's W4A16 / NVFP4 kernels "
        "need. The workshop serves the tiny CPU stand-in with the same flags, parsers and code; "
        "for the real model pick an L4, A100 or H100 runtime."
    )


def route(runtime: Runtime, *, registry: Registry | Mapping | None = None) -> Route:
    """Map a runtime (:func:`classify`) to a registry target, or to the stand-in with the reason.

    ``cpu`` and ``t4`` (15 GiB, cc 7.5: below the 8.0 vLLM's W4A16 / NVFP4 kernels need) go to the
    stand-in; ``l4``, ``a100-40gb``, ``a100-80gb`` (``a100``), ``h100`` and ``g4`` (Colab's RTX PRO
    6000 Blackwell: ``rtx-pro-6000``) to their targets; ``unknown`` by
    :func:`helpers.machine.hardware.match_targets`, else the stand-in. A target whose plan cannot
    start goes to the stand-in too, with the planner's reasons. Never raises for an unknown GPU.
    """
    from helpers.config import resolve as recipes
    from helpers.memory import planner

    reg = as_registry(registry)
    key, gpu = runtime.key, runtime.gpu

    def standin(reason: str, plan: object | None = None) -> Route:
        return Route(runtime, STANDIN_TARGET, True, reason, plan)

    if key == "cpu":
        return standin(
            "No NVIDIA GPU in this runtime: vLLM's CPU build serves the tiny stand-in model "
            "(same flags, parsers and client code; the numbers are a CPU's). On Colab, "
            "Runtime > Change runtime type > L4 or A100 serves the real model."
        )
    if key == "t4":
        return standin(_t4_reason(gpu, reg))
    if key in TARGET_OF:
        target = TARGET_OF[key]
        why = f"{runtime.label}: registry target {target!r}"
        t = reg.targets[target]
        if target in ("l4", "a100-40gb", "a100"):
            why += " — no FP4 tensor cores here, so the NVFP4 checkpoint is served W4A16 (4-bit weights, 16-bit activations)"
        if target == "l4":
            why += f", with --max-model-len {t.args['--max-model-len']} from the memory planner"
        why += f" ({t.source or 'registry'})."
    else:
        matches = match_targets([gpu], reg) if gpu is not None else []
        cc = gpu.cc_tuple if gpu is not None else None
        too_old = cc is not None and cc < MIN_COMPUTE_CAPABILITY
        if not matches or too_old:
            below = (
                f" (compute capability {gpu.compute_capability} is below the 8.0 vLLM's "
                "W4A16 / NVFP4 kernels need)"
            )
            return standin(
                f"No registry target for {gpu.name if gpu else 'this GPU'}{below if too_old else ''}"
                ": serving the CPU stand-in. Add a target to cookbook/recipe.yaml, or "
                "open the notebook of the closest target."
            )
        target = matches[0]
        why = f"{gpu.name} matches registry target {target!r} by name / compute capability (hardware.match_targets)."
    plan = planner.plan(recipes.resolve(target, registry=reg))
    if not plan.starts:
        return standin(
            f"{why} But the memory planner says it cannot start: {' '.join(plan.reasons)}", plan
        )
    return Route(runtime, target, False, why, plan)


def route_runtime(*, quiet: bool = False) -> Route:
    """Read this machine's GPUs (NVML, else nvidia-smi; never raises), :func:`classify` and
    :func:`route` them, print the summary (notebook verb)."""
    probe = detect_gpus()
    r = route(classify(probe.gpus, detail=probe.detail))
    if not quiet:
        print(r.summary())
    return r


def repository(registry: RegistryLike = None) -> str:
    """The GitHub ``owner/name`` of this cookbook: registry key ``repository`` (the one place).

    Raises:
        CookbookError: the key is missing or not ``owner/name``.
    """
    from helpers.config import load

    repo = load.as_registry(registry).repository
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
        raise CookbookError(
            f"cookbook/recipe.yaml `repository` is {repo!r}: set it to the GitHub owner/name, "
            "e.g. repository: my-org/nemotron-lightning-cookbook."
        )
    return repo


def colab_url(path: str, registry: RegistryLike = None) -> str:
    """``https://colab.research.google.com/github/<owner>/<repo>/blob/main/<path>``.

    Args:
        path: the notebook's path in the repository, e.g. ``"notebooks/h100.ipynb"``.
    """
    return f"https://colab.research.google.com/github/{repository(registry)}/blob/main/{path}"
