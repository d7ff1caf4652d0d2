"""A notebook run in two verbs: :func:`prepare` (the mode, from the notebook's parameters) and
:func:`fetch` (the config actually served, :func:`served_config`).

:func:`prepare` is the one function that reads the ``stand_in`` / ``weightless`` /
``server_url`` parameters; the :class:`helpers.config.run.Run` it returns carries the mode and
every default that follows from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from helpers.config.run import Run
from helpers.errors import CookbookError

MODES = ("download", "weightless", "stand_in", "attach")


#: The notebook parameters :func:`prepare` reads (their defaults: a GPU, launched here).
RUN_PARAMETERS = {"stand_in": False, "weightless": False, "server_url": None, "max_tokens": None}


def prepare(cfg: Any, parameters: Mapping[str, Any] | None = None, **given: Any) -> Run:
    """The run a notebook's parameters ask for: nothing is downloaded or launched yet.

    A notebook passes ``prepare(cfg, globals())``, so no later cell names the mode flags; keywords win.

    Args:
        cfg: the resolved GPU target (``helpers.config.resolve.resolve``).
        parameters: a mapping holding some of :data:`RUN_PARAMETERS` (others are ignored).
        **given: the same parameters as keywords: ``stand_in`` (the CPU stand-in; wins over
            ``weightless``), ``weightless`` (the exact architecture, random weights),
            ``server_url`` (attach to that server), ``max_tokens`` (tokens; None: the mode's).

    Returns:
        A :class:`~helpers.config.run.Run`; :func:`fetch` gets what it serves.

    Raises:
        TypeError: ``stand_in`` or ``weightless`` is not True/False; a keyword that is not
            one of :data:`RUN_PARAMETERS`.
        ValueError: ``max_tokens`` is not a whole number >= 1.
    """
    unknown = sorted(set(given) - set(RUN_PARAMETERS))
    if unknown:
        raise TypeError(
            f"prepare: {', '.join(unknown)} is not a run parameter; pass "
            f"{', '.join(RUN_PARAMETERS)}."
        )
    values = {k: (parameters or {}).get(k, v) for k, v in RUN_PARAMETERS.items()} | given
    stand_in, weightless = values["stand_in"], values["weightless"]
    server_url, max_tokens = values["server_url"], values["max_tokens"]
    for name, flag in (("stand_in", stand_in), ("weightless", weightless)):
        if not isinstance(flag, bool):
            raise TypeError(f"prepare: `{name}` must be True or False; got {flag!r:.60}.")
    weights = "stand_in" if stand_in else "weightless" if weightless else "download"
    return Run(weights, server_url or None, max_tokens, cfg)


def fetch(run: Run, **download_kwargs: Any) -> Run:
    """``run`` with the config it serves (:func:`served_config` in its mode): the download,
    the weightless architecture folder or the stand-in; attached, the target as it is.

    Args:
        run: :func:`prepare`'s run.
        **download_kwargs: passed to :func:`helpers.weights.download.download`, e.g.
            ``cache_dir=...``.

    Raises:
        TypeError: ``run`` is not a Run (names :func:`prepare`).
        CookbookError: whatever the mode's own step raises (``HubAccessError``, ...).
    """
    if not isinstance(run, Run):
        raise TypeError(
            f"fetch: pass the run prepare() returned (run = prepare(cfg, ...)); got "
            f"{type(run).__name__}."
        )
    return dataclasses.replace(run, served=served_config(run.target, run.mode, **download_kwargs))


def served_config(cfg: Any, mode: str = "download", **download_kwargs: Any) -> Any:
    """The config to serve for ``cfg`` in ``mode`` (one of :data:`MODES`).

    Args:
        cfg: a resolved ``ServeConfig`` of a GPU target.
        mode: ``"download"`` (checkpoint and drafter at their pins), ``"weightless"`` (random
            weights, ``out/arch``, a DFlash / DSpark drafter's too: nothing is downloaded),
            ``"stand_in"`` (the shipped stand-in, hash-checked into ``out/models``; retrained
            only when its inputs changed) or ``"attach"`` (``cfg`` as it is).
        **download_kwargs: for :func:`helpers.weights.download.download`, e.g. ``cache_dir=...``.

    Raises:
        CookbookError: an unknown mode (names the four); whatever the mode's own step
            raises (e.g. ``HubAccessError``, ``WeightlessError``).
    """
    if mode not in MODES:
        raise CookbookError(
            f"Unknown mode {mode!r}: pass one of {', '.join(MODES)} "
            "(prepare(cfg, stand_in=..., weightless=...) maps a notebook's parameters)."
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

        # the architecture folder and a DFlash / DSpark drafter's are local: nothing to fetch
        return download(arch_config(cfg, build_arch_model(cfg.variant)), **download_kwargs)
    return download(cfg, **download_kwargs)
