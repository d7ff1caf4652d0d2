"""Intervals and paired tests for accuracy figures (scipy, numpy).

Every figure a notebook shows carries its interval: :func:`wilson` for one accuracy,
:func:`mcnemar` and :func:`paired_bootstrap` for two configurations scored on the same items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Proportion:
    """``k`` right of ``n``, with its 95 % Wilson interval (``low``, ``high``, fractions)."""

    k: int
    n: int
    low: float
    high: float
    confidence: float = 0.95

    @property
    def value(self) -> float:
        """``k / n`` (0.0 when ``n`` is 0)."""
        return self.k / self.n if self.n else 0.0

    def __str__(self) -> str:
        pct = int(round(self.confidence * 100))
        return (
            f"{self.value:.1%} ({self.k}/{self.n}; {pct} % Wilson interval "
            f"{self.low:.1%}-{self.high:.1%})"
        )


def wilson(k: int, n: int, confidence: float = 0.95) -> Proportion:
    """The Wilson score interval of ``k`` successes in ``n`` trials
    (``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``).

    Raises:
        ValueError: ``n`` < 1 or ``k`` outside 0..n.
    """
    from scipy.stats import binomtest

    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1 (got k={k}, n={n}): score at least one item")
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Proportion(k, n, float(ci.low), float(ci.high), confidence)


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test on paired right/wrong outcomes.

    Attributes:
        only_a: items A got right and B wrong.
        only_b: items B got right and A wrong.
        p_value: two-sided exact binomial p-value on the discordant items (1.0 when none).
    """

    only_a: int
    only_b: int
    p_value: float


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """McNemar's exact test of ``a`` against ``b`` (per-item correctness, same items, same order).

    Raises:
        ValueError: the two lists differ in length or are empty.
    """
    from scipy.stats import binomtest

    a_, b_ = _paired(a, b)
    only_a = int(np.sum(a_ & ~b_))
    only_b = int(np.sum(~a_ & b_))
    d = only_a + only_b
    p = 1.0 if d == 0 else float(binomtest(only_a, d, 0.5).pvalue)
    return McNemar(only_a, only_b, p)


@dataclass(frozen=True)
class PairedDifference:
    """Accuracy of B minus accuracy of A on the same items, with a paired bootstrap interval
    (fractions; ``resamples`` resamples of the items, percentile interval)."""

    difference: float
    low: float
    high: float
    resamples: int
    confidence: float = 0.95


def paired_bootstrap(
    a: Sequence[bool],
    b: Sequence[bool],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedDifference:
    """The paired bootstrap of ``mean(b) - mean(a)``: items are resampled with replacement,
    keeping each item's pair together (numpy, fixed ``seed``: the same inputs give the same
    interval).

    Raises:
        ValueError: the two lists differ in length or are empty.
    """
    a_, b_ = _paired(a, b)
    diff = b_.astype(float) - a_.astype(float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[idx].mean(axis=1)
    tail = (1 - confidence) / 2
    return PairedDifference(
        float(diff.mean()),
        float(np.quantile(means, tail)),
        float(np.quantile(means, 1 - tail)),
        resamples,
        confidence,
    )


def _paired(a: Sequence[bool], b: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    if len(a) != len(b) or not len(a):
        raise ValueError(
            f"paired outcomes need the same items on both sides (got {len(a)} and {len(b)}): "
            "score both configurations on one item list"
        )
    return np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
