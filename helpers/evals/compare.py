"""Two configurations on the same items, paired: what the 4-bit checkpoint (or a kernel, a
Mamba-state dtype, a budget) costs on the user's own box.

Notebook verbs: :func:`compare` (two :class:`~helpers.evals.accuracy.AccuracyResult` already
scored) and :func:`compare_configs` (serves each configuration in turn on this machine, or
uses a running server per ``server_url``, scores both, stops what it started).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from helpers.chat.request import ChatOptions
from helpers.config.evalsets import load_items
from helpers.evals.accuracy import AccuracyResult, EvalError, evaluate
from helpers.evals.stats import McNemar, PairedDifference, mcnemar, paired_bootstrap


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
        """Three lines: each accuracy with its interval, then the paired difference and test."""
        d = self.difference
        return "\n".join(
            [
                self.a.summary(),
                self.b.summary(),
                f"{self.b.label} - {self.a.label}: {d.difference:+.1%} (95 % paired bootstrap "
                f"{d.low:+.1%} to {d.high:+.1%}); they disagree on {self.test.only_a + self.test.only_b} "
                f"items ({self.test.only_a} only {self.a.label} right, {self.test.only_b} only "
                f"{self.b.label} right), McNemar exact p = {self.test.p_value:.3g}",
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


def compare_configs(
    configs: Mapping[str, Any],
    items: list[dict] | int | None = None,
    *,
    options: ChatOptions | None = None,
    concurrency: int = 4,
    startup_timeout: float = 1800,
) -> Comparison:
    """Score two configurations on the same items, one after the other, and pair them.

    Args:
        configs: ``{label: what}``, two entries in order A, B; each ``what`` is a
            :class:`~helpers.config.serveconfig.ServeConfig` (served here in turn by a
            :class:`~helpers.server.vllm_server.VLLMServer` of its own and stopped before the
            next; servers you already run are left alone, so on one GPU stop yours first) or
            a ``server_url`` string (a server that runs elsewhere, attached, left running).
        items: as :func:`~helpers.evals.accuracy.evaluate` (the same list for both).
        options: request settings for both (thinking, budget, sampling).
        concurrency: requests in flight.
        startup_timeout: seconds to wait for each server's ``/health``.

    Raises:
        EvalError: not exactly two configurations; whatever a launch or a run raises (the
            server started for it is stopped first).
    """
    from helpers.server.launch import attach_server
    from helpers.server.vllm_server import VLLMServer

    if len(configs) != 2:
        raise EvalError(
            f"compare_configs takes two configurations, got {len(configs)}: {list(configs)}."
        )
    if items is None or isinstance(items, int):
        every = load_items()
        items = every if items is None else every[: max(0, items)]
    runs: list[AccuracyResult] = []
    for label, what in configs.items():
        if isinstance(what, str):
            srv = attach_server(what)
            runs.append(evaluate(srv, items, options=options, label=label, concurrency=concurrency))
            continue
        srv = VLLMServer(what, startup_timeout=startup_timeout).start()
        try:
            runs.append(evaluate(srv, items, options=options, label=label, concurrency=concurrency))
        finally:
            srv.stop()
    return compare(runs[0], runs[1])
