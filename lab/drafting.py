"""What the speculative-decoding notebook serves for each mode: the target's config with the
notebook's overrides (:func:`mode_config`), and the run that serves it in the notebook's mode
(:func:`mode_run`: n-gram on the CPU stand-in, the checkpoint or the weightless architecture
on a GPU, weightless drafting at a stated acceptance).
"""

from __future__ import annotations

from typing import Any


def mode_config(target: str, mode: str, overrides: Any = None) -> Any:
    """The target's resolved config for speculative ``mode``, with ``overrides[mode]`` (a
    ``{--speculative-config key: value}`` mapping, e.g. ``{"num_speculative_tokens": 7}``)
    layered on its ``--speculative-config``.

    Raises:
        RecipeError: as :func:`helpers.config.resolve.resolve`.
    """
    from helpers.config.resolve import resolve

    cfg = resolve(target, speculative=mode)
    layer = (overrides or {}).get(mode)
    if layer and cfg.speculative_config:
        cfg = cfg.with_args({"--speculative-config": {**cfg.speculative_config, **layer}})
    return cfg


def mode_run(run: Any, target: str, mode: str, *, model_path: Any = None, overrides: Any = None,
             length: Any = None) -> tuple[Any, str, Any]:  # fmt: skip
    """What the notebook serves for ``mode``: ``(run, name, acceptance)``.

    On the stand-in the mode's drafting becomes n-gram (the one method the CPU build drafts
    with; prefix caching off: the CPU build's aligned Mamba cache has no kernel for the state
    copies drafting needs); on a GPU the checkpoint or the weightless architecture
    (:func:`helpers.weights.prepare.fetch`), weightless drafting at a synthetic acceptance
    (:func:`lab.synthetic_acceptance.with_synthetic_acceptance`; ``length``: a number, a
    ``{mode: L}`` mapping, or None for the registry's).

    Args:
        run: the notebook's run (:func:`helpers.weights.prepare.prepare`).
        target, mode: the registry's target and speculative mode.
        model_path: the stand-in's folder (stand-in runs).
        overrides: as :func:`mode_config`.
        length: as above.

    Returns:
        The run serving it, its name (``"ngram (for mtp)"`` when the stand-in serves another
        mode), and its :class:`~lab.synthetic_acceptance.SyntheticAcceptance` or None.
    """
    from helpers.config.resolve import standin_config
    from helpers.weights.prepare import fetch
    from lab.synthetic_acceptance import describe, with_synthetic_acceptance

    this = run.for_target(mode_config(target, mode, overrides))
    if run.stand_in:
        cfg = standin_config(this.target, model_path, drafting=True)
        this = this.serving(cfg.with_args({"--no-enable-prefix-caching": True}))
    else:
        this = fetch(this)
    if run.weightless:  # random drafters predict nothing: drafting timed at a stated acceptance
        given = length.get(mode) if isinstance(length, dict) else length
        this = this.serving(with_synthetic_acceptance(this.served, given))
    served = this.served
    name = mode if served.speculative == mode else f"{served.speculative} (for {mode})"
    return this, name, describe(served)
