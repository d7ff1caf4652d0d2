"""Which registry targets this machine's GPUs match, and whether a config fits them.

Notebook verb: :func:`check_machine` (step 2 of every notebook: before anything is installed,
downloaded or launched). Memory is in GiB.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from helpers.config.load import as_registry
from helpers.config.run import run_of
from helpers.config.schema import Registry, Target
from helpers.config.serveconfig import ServeConfig
from helpers.errors import HardwareError
from helpers.machine.gpus import (
    GPU,
    GPUProcess,
    Probe,
    _cc_tuple,
    detect_gpus,
    system_memory_gib,
)
from helpers.memory.planner import DEFAULT_GPU_MEMORY_UTILIZATION

# The registry's "GB" vs the GiB a GPU reports: an "80 GB" H100 reports 79.6 GiB.
MEMORY_TOLERANCE = 0.10
# Memory another process may hold before the check mentions it (GiB); a fresh driver shows 0.
HELD_WARN_GIB = 1.0
# NVFP4 (Marlin W4A16 / ModelOpt FP4 kernels) and BF16 both need Ampere (sm_80) or newer
# (vLLM quantization docs: modelopt / marlin supported on compute capability >= 8.0).
MIN_COMPUTE_CAPABILITY = (8, 0)

# How a registry target's ``gpu.name`` appears in the driver's device name. Default: the
# name as a whole word. Overrides where one target covers several products.
_NAME_PATTERNS: dict[str, str] = {
    "RTX 5090": r"RTX 50[5-9]0\b",  # rtx-50xx: GeForce RTX 5090 / 5080 (/ 5070, too small)
    "B200": r"\bG?B200\b",  # b200 target: "B200 / GB200"
    "B300": r"\bG?B300\b",  # b300 target: "B300 / GB300"
    "Thor": r"\bThor\b",  # Jetson AGX Thor reports "NVIDIA Thor"
}


# ---- Matching GPUs to registry targets ------------------------------------------------


def _name_pattern(registry_name: str) -> re.Pattern:
    pat = _NAME_PATTERNS.get(registry_name) or rf"\b{re.escape(registry_name)}\b"
    return re.compile(pat, re.IGNORECASE)


def match_targets(gpus: Sequence[GPU], registry: Registry | Mapping | None = None) -> list[str]:
    """Registry targets this machine can play, in registry order.

    A target matches when its ``gpu.name`` pattern (``_NAME_PATTERNS``) is in the first GPU's
    name, its compute capability equals the GPU's (when both are known), and the machine has at
    least ``gpu.count`` such GPUs; of several name matches, those whose ``memory_gb`` exceeds the
    card are dropped while one fits (a 40 GB A100 is ``a100-40gb``). With no name match (e.g.
    GH200): the targets of the same compute capability whose ``memory_gb`` fits.

    Returns:
        Target names; ``["cpu"]`` (the stand-in) when ``gpus`` is empty.
    """
    targets = as_registry(registry).targets
    if not gpus:
        return [n for n, t in targets.items() if t.stand_in] or ["cpu"]
    first = gpus[0]
    same = sum(1 for g in gpus if g.name == first.name)
    cc, mem = first.cc_tuple, first.memory_total_gib
    # GPU targets of no more GPUs than this machine has of the first one's product
    enough = {n: t for n, t in targets.items() if not t.stand_in and int(t.gpu.count or 1) <= same}

    def cc_ok(t: Target) -> bool:
        want = _cc_tuple(t.gpu.compute_capability)
        return want is None or cc is None or want == cc

    def fits(t: Target) -> bool:
        return mem is None or float(t.gpu.memory_gb or 0) <= mem * (1 + MEMORY_TOLERANCE)

    by_name = [n for n, t in enough.items() if _name_pattern(t.gpu.name).search(first.name)]
    by_name = [n for n in by_name if cc_ok(enough[n])]
    # One product in several sizes (A100 40 GB / 80 GB): keep the sizes this card has room
    # for; when none fits, keep them all so check_machine refuses with the numbers.
    by_name = [n for n in by_name if fits(enough[n])] or by_name
    if by_name or cc is None:
        return by_name
    return [n for n, t in enough.items() if _cc_tuple(t.gpu.compute_capability) == cc and fits(t)]


# ---- check_machine --------------------------------------------------------------------


@dataclasses.dataclass
class MachineReport:
    """What :func:`check_machine` found (``gpus``, ``processes``, ``source``, ``detail``: see
    :class:`Probe`).

    Attributes:
        matches: targets this machine can play.
        memory_gib: capacity of the GPUs one server uses (per GPU x count), GiB.
        held_gib: memory already held on those GPUs by other processes, GiB.
        warnings: sentences, each naming what to do. errors: reasons the launch is refused.
    """

    target: str
    gpus: list[GPU]
    matches: list[str]
    processes: list[GPUProcess] = dataclasses.field(default_factory=list)
    source: str | None = None
    detail: str = ""
    memory_gib: float | None = None
    held_gib: float | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    stand_in: bool = False

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def target_matches(self) -> bool:
        return self.target in self.matches

    def summary(self) -> str:
        lines = []
        if self.gpus:
            counts = collections.Counter(g.describe() for g in self.gpus)
            gpu_txt = ", ".join(f"{n}x {d}" for d, n in counts.items())
            lines.append(f"GPUs ({self.source}): {gpu_txt}")
        else:
            lines.append(f"GPUs: none found ({self.detail or 'no NVIDIA driver'})")
        lines.append(f"Matching targets: {', '.join(self.matches) or 'none in the registry'}")
        if self.held_gib and self.gpus:
            lines.append(f"GPU memory held by other processes: {self.held_gib:.1f} GiB")
        for p in self.processes:
            used = f"{p.used_gib:.1f} GiB" if p.used_gib is not None else "?"
            lines.append(f"  pid {p.pid} {p.name or ''} {used}".rstrip())
        lines += [f"WARNING: {w}" for w in self.warnings]
        lines += [f"REFUSED: {e}" for e in self.errors]
        if self.ok:
            if self.stand_in:
                lines.append("OK for the CPU stand-in.")
            elif self.warnings:
                lines.append(f"OK to launch target {self.target!r} (read the warnings above).")
            else:
                lines.append(f"OK: this machine can run target {self.target!r}.")
        return "\n".join(lines)


def check_machine(
    run: Any,
    *,
    gpus: Sequence[GPU] | None = None,
    processes: Sequence[GPUProcess] | None = None,
    raise_on_error: bool = True,
    quiet: bool = False,
    registry: Registry | Mapping | None = None,
) -> MachineReport | None:
    """Check that this machine can run ``run``'s target; print a short summary and return the report.

    Refuses (:class:`HardwareError`, naming the fix) when: there is no GPU and the run does not
    serve the stand-in; fewer GPUs than ``cfg.gpu_count``; compute capability below 8.0; the
    variant's ``vram_minimum_gb`` exceeds GPU memory x count (within :data:`MEMORY_TOLERANCE`);
    NVFP4 on SM12x with a ``--moe-backend`` other than ``marlin`` (the FP4 MoE kernels are
    SM100-only: registry rtx-50xx note); other processes hold more than vLLM's start-up check
    allows (free < ``--gpu-memory-utilization`` x total). Warns when the target does not match
    these GPUs, and when others hold more than :data:`HELD_WARN_GIB` GiB.

    Args:
        run: the notebook's :class:`helpers.config.run.Run` or a resolved ``ServeConfig``. Serving
            the stand-in: refusals become warnings. Attached (``server_url``): nothing is
            checked; returns None.
        gpus, processes: the machine's GPUs and GPU processes; default: :func:`detect_gpus`.
        raise_on_error: False returns the report with ``errors`` filled instead of raising.
        quiet: do not print the summary.
        registry: an already loaded registry (tests).

    Raises:
        HardwareError: the first refusal, with ``.report``.
    """
    r = run_of(run)
    cfg, stand_in, server_url = r.target, r.stand_in, r.server_url
    if server_url:
        if not quiet:
            print(
                f"attach mode: the server at {server_url} runs elsewhere; this machine's GPUs are not checked"
            )
        return None
    reg = as_registry(registry)
    if gpus is None:
        probe = detect_gpus()
    else:
        probe = Probe(list(gpus), list(processes or []), "given", "" if gpus else "no GPU given")
    if processes is not None:
        probe.processes = list(processes)
    report = MachineReport(cfg.target, probe.gpus, match_targets(probe.gpus, reg), probe.processes,
                           probe.source, probe.detail, stand_in=stand_in)  # fmt: skip
    problems: list[str] = []
    warnings = report.warnings

    if not probe.gpus:
        if not stand_in and not cfg.stand_in:
            problems.append(
                f"No NVIDIA GPU found ({probe.detail or 'no driver'}), so {cfg.label} cannot run here: "
                "run the notebook with stand_in=True to use the CPU stand-in, or open it on a GPU machine."
            )
        elif not cfg.stand_in:
            warnings.append(
                f"No NVIDIA GPU here: stand-in mode serves the tiny CPU model; the real {cfg.label} "
                "needs its GPU (set stand_in=False on that machine)."
            )
    elif not cfg.stand_in:
        problems += _gpu_problems(cfg, probe, report, reg)
        if cfg.target not in report.matches:
            alt = ", ".join(report.matches) or "none in the registry"
            warnings.append(
                f"This notebook is for {cfg.label}, but this machine has {probe.gpus[0].name} "
                f"(matching targets: {alt}): open the notebook of a matching target, or keep going "
                "knowing the flags were chosen for other hardware."
            )
        if stand_in:
            warnings.append(
                "Stand-in mode on a GPU machine: the CPU stand-in is served; set stand_in=False "
                f"to serve {cfg.label} on these GPUs."
            )

    if stand_in:
        # Nothing launches on the GPU: keep the reasons as warnings.
        warnings += [f"(on the real target) {p}" for p in problems]
    else:
        report.errors = problems
    if not quiet:
        print(report.summary())
    if report.errors and raise_on_error:
        raise HardwareError(report.errors[0], report)
    return report


def _gpu_problems(
    cfg: ServeConfig, probe: Probe, report: MachineReport, reg: Registry
) -> list[str]:
    problems: list[str] = []
    need_n = max(1, cfg.gpu_count)
    used = probe.gpus[:need_n]
    if len(probe.gpus) < need_n:
        problems.append(
            f"{cfg.label} uses {need_n} GPUs (--tensor-parallel-size {need_n}) but this machine has "
            f"{len(probe.gpus)}: pick a target for {len(probe.gpus)} GPU(s) (matching: "
            f"{', '.join(report.matches) or 'none'}), or lower --tensor-parallel-size."
        )
    variant = reg.variants.get(cfg.variant)
    vlabel = variant.label if variant is not None else cfg.variant

    old = [g for g in used if g.cc_tuple is not None and g.cc_tuple < MIN_COMPUTE_CAPABILITY]
    if old:
        g = old[0]
        problems.append(
            f"{vlabel} kernels need compute capability 8.0 (Ampere) or newer, but {g.name} is "
            f"{g.compute_capability}: use an Ampere-or-newer GPU (A100, L40S, H100, ...), or "
            "run the notebook with stand_in=True."
        )

    # Capacity: per-GPU memory x GPUs one server uses; unified memory = system memory.
    sys_mem = system_memory_gib() if any(g.unified_memory for g in used) else None
    per_gpu = [g.memory_total_gib if not g.unified_memory else sys_mem for g in used]
    if used and all(m is not None for m in per_gpu):
        report.memory_gib = min(per_gpu) * len(used)  # type: ignore[type-var]
    need_gb = float(variant.vram_minimum_gb or 0) if variant is not None else 0.0
    if (
        report.memory_gib is not None
        and need_gb
        and report.memory_gib * (1 + MEMORY_TOLERANCE) < need_gb
    ):
        fix = (
            "use the NVFP4 variant (18 GB), more GPUs (--tensor-parallel-size), or a larger GPU"
            if cfg.variant != "nvfp4"
            else f"use a GPU with at least {need_gb:g} GB, or run the notebook with stand_in=True"
        )
        problems.append(
            f"{vlabel} needs at least {need_gb:g} GB of GPU memory (registry vram_minimum_gb), but "
            f"{len(used)}x {used[0].name} has {report.memory_gib:.1f} GiB: {fix}."
        )

    sm12 = [g for g in used if g.cc_tuple is not None and g.cc_tuple[0] == 12]
    moe = str(cfg.args.get("--moe-backend") or "auto")
    if sm12 and cfg.variant == "nvfp4" and moe != "marlin":
        problems.append(
            f"On SM12x GPUs ({sm12[0].name}) vLLM's FP4 MoE kernels for --moe-backend {moe} are "
            "built for SM100 and fail to load: pass extra_args={'--moe-backend': 'marlin'} "
            "(the rtx-50xx target's setting)."
        )

    # Memory held by other processes.
    held = None
    if any(g.memory_used_gib is not None for g in used):
        held = sum(g.memory_used_gib or 0.0 for g in used)
    elif probe.processes and any(p.used_gib is not None for p in probe.processes):
        held = sum(p.used_gib or 0.0 for p in probe.processes)
    report.held_gib = held
    if held is not None and held > HELD_WARN_GIB:
        pids = ", ".join(str(p.pid) for p in probe.processes) or "see nvidia-smi"
        util = float(cfg.args.get("--gpu-memory-utilization") or DEFAULT_GPU_MEMORY_UTILIZATION)
        worst = max(used, key=lambda g: (g.memory_used_gib or 0) / (g.memory_total_gib or 1))
        if (
            worst.memory_total_gib
            and worst.memory_used_gib is not None
            and worst.memory_total_gib - worst.memory_used_gib < util * worst.memory_total_gib
        ):
            free_frac = (worst.memory_total_gib - worst.memory_used_gib) / worst.memory_total_gib
            problems.append(
                f"GPU {worst.index} ({worst.name}) has {worst.memory_used_gib:.1f} of "
                f"{worst.memory_total_gib:.1f} GiB held by other processes (pids: {pids}), leaving less "
                f"free than vLLM's --gpu-memory-utilization {util:g} asks for: stop those processes "
                f"(e.g. a previous server or notebook kernel), or lower --gpu-memory-utilization "
                f"below {max(free_frac - 0.02, 0.05):.2f}."
            )
        else:
            report.warnings.append(
                f"{held:.1f} GiB of GPU memory is held by other processes (pids: {pids}): stop them "
                "before launching if that memory is needed (vLLM claims --gpu-memory-utilization "
                "of the total)."
            )
    return problems
