"""Two configurations scored on the same items, paired (:func:`compare`): what the 4-bit
checkpoint (or a kernel, a Mamba-state dtype, a budget) costs on the user's own box.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lab.evals.accuracy import AccuracyResult, EvalError
from lab.evals.stats import McNemar, PairedDifference, mcnemar, paired_bootstrap


@dataclass
class Comparison:
    """A against B on the same items.

    Attributes:
        a, b: the two scored runs (same item ids, same order).
        test: McNemar's exact test on the items they disagree on.
        difference: accuracy of B minus A, with its 95 % paired bootstrap interval.
    """

    a: AccuracyResult
    b: AccuracyResult
    test: McNemar
    difference: PairedDifference

    def summary(self) -> str:
        """Four lines: each accuracy with its interval, the paired difference and test, then the
        verdict: a tie unless the difference's interval excludes 0."""
        d = self.difference
        better = self.b.label if d.low > 0 else self.a.label if d.high < 0 else None
        verdict = (f"verdict: {better} is more accurate (the interval excludes 0)" if better else
                   "verdict: a tie (the interval includes 0: these items cannot tell them apart)")  # fmt: skip
        return "\n".join(
            [
                self.a.summary(),
                self.b.summary(),
                f"{self.b.label} - {self.a.label}: {d.difference:+.1%} (95 % paired bootstrap "
                f"{d.low:+.1%} to {d.high:+.1%}); they disagree on {self.test.only_a + self.test.only_b} "
                f"items ({self.test.only_a} only {self.a.label} right, {self.test.only_b} only "
                f"{self.b.label} right), McNemar exact p = {self.test.p_value:.3g}",
                verdict,
            ]
        )

    def table(self) -> pd.DataFrame:
        """Per item: id, target, each side's extracted answer and correctness."""
        a, b = self.a.items, self.b.items
        return pd.DataFrame(
            {
                "id": a["id"],
                "target": a["target"],
                f"{self.a.label}": a["extracted"],
                f"{self.a.label} right": a["correct"],
                f"{self.b.label}": b["extracted"],
                f"{self.b.label} right": b["correct"],
            }
        )


def compare(a: AccuracyResult, b: AccuracyResult) -> Comparison:
    """Pair two runs scored on the same items.

    Raises:
        EvalError: the runs scored different items (names the first mismatch).
    """
    ids_a, ids_b = list(a.items["id"]), list(b.items["id"])
    if ids_a != ids_b:
        first = next(
            (i for i, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y),
            min(len(ids_a), len(ids_b)),
        )
        raise EvalError(
            f"{a.label} and {b.label} scored different items ({len(ids_a)} vs {len(ids_b)}; first "
            f"difference at position {first}): score both on one item list."
        )
    return Comparison(
        a, b, mcnemar(a.correct(), b.correct()), paired_bootstrap(a.correct(), b.correct())
    )
