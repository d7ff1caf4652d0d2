"""The installer's argv for this machine's package sources: ``install`` / ``uninstall`` with uv
or pip (:func:`install_argv`, :func:`uninstall_argv`), given where pip looks
(:class:`PackageSources`); and the torch companions every CPU install removes.

Where the CPU torch comes from (pip's own sources, else PyTorch's CPU index) is
:mod:`lab.workshop.cpu_torch`, asked by ``make setup`` and the workshop notebook. Stdlib only:
``make setup`` imports this module before any install.
"""

from __future__ import annotations

from dataclasses import dataclass

#: What vLLM's CPU build pulls from PyPI beside its torch, built for another torch: they break
#: ``transformers`` model imports (``operator torchvision::nms does not exist``, measured,
#: docs/DESIGN.md), so every CPU install removes them afterwards.
TORCH_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")


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


def install_argv(
    python: str,
    args: list[str],
    *,
    uv: list[str] | None = None,
    sources: PackageSources | None = None,
    pip_base: PackageSources | None = None,
) -> list[str]:
    """``install args`` into ``python``'s environment: with uv (``uv`` is the argv that runs
    it) given every source, else with pip given the sources beyond ``pip_base`` (pip reads its
    own configuration)."""
    sources = sources or PackageSources()
    if uv:
        return [*uv, "pip", "install", "--python", python, *sources.uv_args(), *args]
    return [python, "-m", "pip", "install", *sources.pip_args(pip_base), *args]


def uninstall_argv(
    python: str, names: tuple[str, ...], *, uv: list[str] | None = None
) -> list[str]:
    """Uninstall ``names`` from ``python``'s environment, with uv or pip (no prompt)."""
    if uv:
        return [*uv, "pip", "uninstall", "--python", python, *names]
    return [python, "-m", "pip", "uninstall", "-y", *names]
