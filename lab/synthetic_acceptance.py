"""Drafting on random weights, said honestly: the synthetic acceptance length a weightless
server drafts at, where that number comes from, and the caption every figure carries.

On dummy weights a drafter predicts nothing the target keeps, so drafting looks useless. vLLM
0.32.0 times drafting at a stated acceptance instead: ``--speculative-config '{...,
"rejection_sample_method": "synthetic", "synthetic_acceptance_length": L}'``
(``vllm/config/speculative.py``, ``SpeculativeConfig``): the target and the drafter run as
usual, and draft tokens are accepted on a schedule whose mean is ``L`` tokens per target step
(``_acceptance_length_to_rates``: the minimum-variance schedule, ``L - 1`` drafts accepted on
average). The speed is drafting's at that acceptance; the text is not the model's (lossy by
design), so such a point never enters a lossless or quality check.

The registry (``speculative.<mode>.synthetic_acceptance``) states, per drafting method, the
acceptance length a public benchmark configuration uses, at its number of draft tokens ``K``.
A server drafting another ``K`` gets a length derived from it
(:func:`helpers.config.resolve.derived_length`: what a weightless server runs by default,
:func:`helpers.config.resolve.synthetic_drafting`) and says so; a notebook parameter overrides
either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from helpers.config.resolve import derived_length, per_position_rate
from helpers.errors import RecipeError

#: The words every synthetic-acceptance figure carries (:meth:`SyntheticAcceptance.caption`);
#: ``tests/project/test_synthetic_captions.py`` scans notebooks and results pages for them.
CAPTION_WORDS = "synthetic acceptance"
#: The ``--speculative-config`` keys this module adds (vLLM 0.32.0 ``SpeculativeConfig``).
SYNTHETIC_KEYS = ("rejection_sample_method", "synthetic_acceptance_length")
#: :meth:`SyntheticAcceptance.caption`'s words as a pattern (its inverse, ``from_caption``).
_CAPTION = (
    rf"{CAPTION_WORDS} (?P<length>[\d.e+-]+) at K=(?P<k>\d+) \((?P<source>.*)\): "
    "speed at that acceptance, text not the model's"
)


@dataclass(frozen=True)
class SyntheticAcceptance:
    """The acceptance a weightless drafting server runs at.

    Attributes:
        mode: the registry's speculative mode (``mtp``, ``dflash``, ``dspark``).
        num_speculative_tokens: draft tokens per step ``K`` of the served config.
        length: the mean acceptance length ``L`` (tokens per target step, 1 + drafts kept).
        source: where ``L`` comes from: the registry's public source, the derivation from it,
            or ``"the notebook's parameter"``.
    """

    mode: str
    num_speculative_tokens: int
    length: float
    source: str

    def caption(self) -> str:
        """One line for every table, plot and summary that shows this point."""
        return (
            f"{CAPTION_WORDS} {self.length:g} at K={self.num_speculative_tokens} "
            f"({self.source}): speed at that acceptance, text not the model's"
        )

    @classmethod
    def from_caption(cls, caption: Any, mode: str = "") -> SyntheticAcceptance | None:
        """The point a :meth:`caption` describes (a saved record keeps the caption), or None
        for anything else (no caption: a candidate that did not draft, or drafted on real
        weights)."""
        found = re.fullmatch(_CAPTION, caption) if isinstance(caption, str) else None
        if found is None:
            return None
        return cls(mode, int(found["k"]), float(found["length"]), found["source"])

    def speculative_config(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``spec`` (a ``--speculative-config`` mapping) drafting at this acceptance."""
        return {
            **spec,
            "rejection_sample_method": "synthetic",
            "synthetic_acceptance_length": self.length,
        }


def synthetic_acceptance(
    reg: Any, mode: str, num_speculative_tokens: int, length: float | None = None
) -> SyntheticAcceptance:
    """The acceptance a weightless server drafting ``num_speculative_tokens`` with ``mode``
    runs at: ``length`` when given (a notebook parameter), else the registry's
    ``speculative.<mode>.synthetic_acceptance`` at its own ``K``, else derived from it for this
    ``K`` (:func:`derived_length`).

    Args:
        reg: the loaded registry (``helpers.config.load.load_registry()``).
        mode: a drafting mode of the registry.
        num_speculative_tokens: ``K`` of the served ``--speculative-config``.
        length: an explicit acceptance length (tokens per step), or None.

    Raises:
        RecipeError: the mode states no synthetic acceptance (n-gram drafts from the prompt:
            its acceptance is real on any weights) and no ``length`` was given; a length
            outside ``[1, K + 1]``.
    """
    k = int(num_speculative_tokens)
    if length is not None:
        per_position_rate(float(length), k)  # range check
        return SyntheticAcceptance(mode, k, float(length), "the notebook's parameter")
    spec = reg.speculative[mode].synthetic_acceptance if mode in reg.speculative else None
    if spec is None:
        raise RecipeError(
            f"Speculative mode {mode!r} states no synthetic acceptance "
            f"(speculative.{mode}.synthetic_acceptance in cookbook/recipe.yaml): pass "
            "synthetic_acceptance_length=L, the acceptance length to time drafting at."
        )
    if spec.num_speculative_tokens == k:
        return SyntheticAcceptance(mode, k, spec.length, spec.source)
    derived = derived_length(spec.length, spec.num_speculative_tokens, k)
    a = per_position_rate(spec.length, spec.num_speculative_tokens)
    return SyntheticAcceptance(
        mode,
        k,
        derived,
        f"derived from {spec.length:g} at K={spec.num_speculative_tokens}, {spec.source}, "
        f"at a constant per-position acceptance of {a:.2f}",
    )


def of_config(spec: dict[str, Any] | None, mode: str = "") -> SyntheticAcceptance | None:
    """The synthetic acceptance a ``--speculative-config`` mapping drafts at (read back from
    the mapping itself: no source beyond the choice), or None when it drafts
    with real acceptance."""
    if not spec or spec.get("rejection_sample_method") != "synthetic":
        return None
    return SyntheticAcceptance(
        mode or str(spec.get("method", "")),
        int(spec.get("num_speculative_tokens") or 0),
        float(spec.get("synthetic_acceptance_length") or 0.0),
        "a chosen length, not a published or measured one",
    )


def _registry() -> Any:
    from helpers.config.load import shared_registry

    return shared_registry()


def with_synthetic_acceptance(cfg: Any, length: float | None = None) -> Any:
    """``cfg`` (a ``ServeConfig``) drafting at synthetic acceptance, for a weightless server:
    unchanged when it does not draft, or drafts with n-gram (real acceptance on any weights).

    Args:
        cfg: the served config (``helpers.weights.weightless.arch_config``'s).
        length: the acceptance length to time drafting at (tokens per target step), or None
            for the registry's (:func:`synthetic_acceptance`).

    Raises:
        RecipeError: as :func:`synthetic_acceptance`.
    """
    spec = cfg.speculative_config
    reg = _registry()
    mode = cfg.speculative
    if not spec or mode not in reg.speculative:
        return cfg
    if length is None and reg.speculative[mode].synthetic_acceptance is None:
        return cfg
    k = int(spec.get("num_speculative_tokens") or 1)
    point = synthetic_acceptance(reg, mode, k, length)
    return cfg.with_args({"--speculative-config": point.speculative_config(spec)})


def describe(cfg: Any) -> SyntheticAcceptance | None:
    """The synthetic acceptance ``cfg`` drafts at, with its source when it is the registry's
    (cited or derived), else "a chosen length"; None when ``cfg``'s
    drafting (if any) has real acceptance."""
    point = of_config(cfg.speculative_config, cfg.speculative)
    if point is None:
        return None
    try:
        known = synthetic_acceptance(_registry(), cfg.speculative, point.num_speculative_tokens)
    except (RecipeError, KeyError):
        return point
    return known if abs(known.length - point.length) < 1e-9 else point
