"""One verb for what a notebook serves: ``prepare(cfg, mode)``.

A resolved :class:`helpers.config.serveconfig.ServeConfig` names the real checkpoint. Before a
launch it becomes the config actually served, in one of four modes: ``"download"`` (the
checkpoint and a separate DFlash / DSpark drafter at their pinned revisions,
:func:`helpers.weights.download.download`); ``"weightless"`` (the exact architecture with
random weights and ``--load-format dummy``, :mod:`helpers.weights.weightless`: real memory and
speed, noise text; only a separate drafter is downloaded); ``"stand_in"`` (the tiny CPU
stand-in, :func:`helpers.config.resolve.standin_config` on
:func:`helpers.standin.build.build_standin_model`); ``"attach"`` (a server that runs
elsewhere: nothing to prepare). The notebooks' ``server_url`` / ``stand_in`` /
``weightless`` parameters pick the mode (:func:`mode_of`).
"""

from __future__ import annotations

from typing import Any

from helpers.errors import CookbookError

MODES = ("download", "weightless", "stand_in", "attach")


def mode_of(stand_in: bool = False, weightless: bool = False, server_url: str | None = None) -> str:
    """The mode a notebook's parameters ask for: ``"attach"`` when it uses a running server
    (``server_url``: nothing to prepare), then ``stand_in``, then ``weightless``, else
    ``"download"``."""
    if server_url:
        return "attach"
    return "stand_in" if stand_in else "weightless" if weightless else "download"


def prepare(cfg: Any, mode: str = "download", **download_kwargs: Any) -> Any:
    """The config to serve for ``cfg`` in ``mode`` (one of :data:`MODES`).

    Args:
        cfg: a resolved ``ServeConfig`` of a GPU target (``helpers.config.resolve.resolve``).
        mode: ``"download"``, ``"weightless"``, ``"stand_in"`` (see the module docstring) or
            ``"attach"`` (a server that runs elsewhere: ``cfg`` is returned as it is).
        **download_kwargs: passed to :func:`helpers.weights.download.download` (``"download"`` and
            ``"weightless"``), e.g. ``force_download=True``.

    Returns:
        A ``ServeConfig`` whose model is a local folder: the downloaded snapshot, the
        weightless architecture folder (written under ``out/arch``; about 1 s), or the
        stand-in (the copy shipped with the package, hash-checked and copied into ``out/models``
        on first use; retrained only when the training inputs changed).

    Raises:
        CookbookError: an unknown mode (names the four); whatever the mode's own step
            raises (e.g. ``HubAccessError`` for a gated download, ``WeightlessError``).
    """
    if mode not in MODES:
        raise CookbookError(
            f"Unknown mode {mode!r}: pass one of {', '.join(MODES)} "
            "(prepare.mode_of(stand_in=..., weightless=...) maps a notebook's parameters)."
        )
    if mode == "attach":
        print("attach mode: the server runs elsewhere, nothing to download")
        return cfg
    if mode == "stand_in":
        from helpers.config.resolve import standin_config
        from helpers.standin.build import build_standin_model

        return standin_config(cfg, build_standin_model())
    from helpers.weights.download import download

    if mode == "weightless":
        from helpers.weights.weightless import arch_config, build_arch_model

        # the architecture folder is local: download() fetches only a separate drafter
        return download(
            arch_config(cfg, build_arch_model(cfg.variant), allow_hub_drafter=True),
            **download_kwargs,
        )
    return download(cfg, **download_kwargs)
