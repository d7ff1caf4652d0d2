"""The installer's argv: ``install`` / ``uninstall`` with uv or pip (:func:`install_argv`,
:func:`uninstall_argv`), given where pip looks (:class:`lab.workshop.cpu_torch.PackageSources`);
and the torch companions every CPU install removes.

Where the CPU torch comes from (pip's own sources, else PyTorch's CPU index) is
:mod:`lab.workshop.cpu_torch`, asked by ``make setup`` and the workshop notebook. Stdlib only:
``make setup`` imports this module before any install.
"""

from __future__ import annotations

from typing import Any

#: What vLLM's CPU build pulls from PyPI beside its torch, built for another torch: they break
#: ``transformers`` model imports (``operator torchvision::nms does not exist``, measured,
#: docs/DESIGN.md), so every CPU install removes them afterwards.
TORCH_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")


def install_argv(
    python: str,
    args: list[str],
    *,
    uv: list[str] | None = None,
    sources: Any = None,
    pip_base: Any = None,
) -> list[str]:
    """``install args`` into ``python``'s environment: with uv (``uv`` is the argv that runs
    it) given every source, else with pip given the sources beyond ``pip_base`` (pip reads its
    own configuration); ``sources`` / ``pip_base``: :class:`lab.workshop.cpu_torch.PackageSources`
    or None (PyPI)."""
    if uv:
        return [
            *uv,
            "pip",
            "install",
            "--python",
            python,
            *(sources.uv_args() if sources else []),
            *args,
        ]
    return [python, "-m", "pip", "install", *(sources.pip_args(pip_base) if sources else []), *args]


def uninstall_argv(
    python: str, names: tuple[str, ...], *, uv: list[str] | None = None
) -> list[str]:
    """Uninstall ``names`` from ``python``'s environment, with uv or pip (no prompt)."""
    if uv:
        return [*uv, "pip", "uninstall", "--python", python, *names]
    return [python, "-m", "pip", "uninstall", "-y", *names]
