"""A notebook run in two verbs: :func:`prepare` (the mode, from the notebook's parameters: the
one function that reads ``stand_in`` / ``weightless`` / ``server_url``; its
:class:`helpers.config.run.Run` carries every default that follows) and :func:`fetch` (the
config actually served, :func:`served_config`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from helpers.config.run import Run
from helpers.errors import CookbookError

MODES = ("download", "weightless", "stand_in", "attach")


#: The keywords :func:`prepare` takes (the notebook parameters that choose the run).
RUN_PARAMETERS = ("stand_in", "weightless", "server_url", "max_tokens")


def prepare(
    cfg: Any,
    *,
    stand_in: bool = False,
    weightless: bool = False,
    server_url: str | None = None,
    max_tokens: int | None = None,
    **unknown: Any,
) -> Run:
    """The run a notebook's parameters, passed by name, ask for: nothing is fetched or launched.

    Args:
        cfg: the resolved GPU target (``helpers.config.resolve.resolve``).
        stand_in: serve the CPU stand-in (wins over ``weightless``).
        weightless: serve the exact architecture with random weights and uniform MoE routing
            (GPU sizing, no download; :func:`helpers.weights.weightless.arch_config`).
        server_url: ``http://host:port`` of a running server to attach to (None: launch one).
        max_tokens: tokens per chat request; None: the mode's default.

    Returns:
        A :class:`~helpers.config.run.Run`; :func:`fetch` gets what it serves.

    Raises:
        TypeError: ``cfg`` is not a resolved target (a target's name: names ``resolve``);
            ``stand_in`` or ``weightless`` is not True/False; ``server_url`` not a string; a
            keyword that is not one of :data:`RUN_PARAMETERS` (the error names them).
        ValueError: ``max_tokens`` is not a whole number >= 1; ``server_url`` not ``http(s)://``.
    """
    if unknown:
        raise TypeError(f"prepare: {', '.join(sorted(unknown))} is not a run parameter; "
                        f"pass {', '.join(RUN_PARAMETERS)}.")  # fmt: skip
    for name, flag in (("stand_in", stand_in), ("weightless", weightless)):
        if not isinstance(flag, bool):
            raise TypeError(f"prepare: `{name}` must be True or False; got {flag!r:.60}.")
    if not callable(getattr(cfg, "cli_flags", None)):
        raise TypeError(f"prepare: pass the resolved target, cfg = resolve({cfg!r:.40}) "
                        f"(helpers.config.resolve); got {type(cfg).__name__} {cfg!r:.60}.")  # fmt: skip
    if server_url and not str(server_url).startswith(("http://", "https://")):
        err = ValueError if isinstance(server_url, str) else TypeError
        raise err(f"prepare: `server_url` must be a URL like 'http://127.0.0.1:8000' (or None "
                  f"to launch one); got {server_url!r:.60}.")  # fmt: skip
    if stand_in and weightless:  # say it: a rehearsal that looks weightless but is not
        print("weightless=True is not played: stand_in=True serves the CPU stand-in instead")
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
        from helpers.config.resolve import synthetic_drafting
        from helpers.weights.weightless import arch_config, build_arch_model

        # local folders (nothing to fetch); random drafters draft at the registry's acceptance
        served = download(arch_config(cfg, build_arch_model(cfg.variant)), **download_kwargs)
        return synthetic_drafting(served)
    return download(cfg, **download_kwargs)
