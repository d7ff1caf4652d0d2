"""The notebooks' answer-quality step (:func:`quality_step`): accuracy with its interval, then
the budget curve. Where the curve's items are the accuracy run's (the stand-in), that run is the
curve's point at the same settings and everything runs in one lm-eval process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from helpers.config.demo import load_demo
from helpers.config.evalsets import ITEM_SETS
from helpers.config.run import run_defaults, run_of
from lab.evals.accuracy import (
    REFERENCE_FLOORS,
    REFERENCES,
    AccuracyResult,
    default_items,
    evaluate_runs,
)
from lab.evals.budget import budget_plan, curve_table
from lab.evals.settings import RequestSettings
from lab.evals.stats import wilson


def below_the_floor(result: AccuracyResult, run: Any) -> str | None:
    """A warning when a real checkpoint's whole interval lies below the family's published
    floor (:data:`~lab.evals.accuracy.REFERENCE_FLOORS`): a collapsed checkpoint
    (vllm-project/vllm #36094, #33560), not noise. None on the stand-in or random weights,
    above the floor, or for a set without one.

    Args:
        result: the accuracy run (its ``item_set`` and Wilson interval).
        run: the server or its run (:func:`helpers.config.run.run_of`).
    """
    floor = REFERENCE_FLOORS.get(result.item_set)
    if floor is None or run_of(run).weights != "download" or result.accuracy.high >= floor:
        return None
    return (
        f"WARNING: {result.accuracy} lies wholly below {floor:.0%}, the floor vLLM's CI holds this "
        "model family to on GSM8K (other settings: 5-shot completions), so this is more than "
        "noise: the checkpoint may be broken on this stack. Usual causes: the MoE or linear kernel "
        "(--moe-backend), the KV cache dtype (--kv-cache-dtype), the Mamba state dtype "
        "(--mamba-ssm-cache-dtype). Score the BF16 checkpoint on the same items, paired: "
        'notebooks/quality.ipynb with quality = {"compare": {"variant": "bf16"}}, or '
        '{"compare": {"extra_args": {"--moe-backend": "marlin"}}} for the kernel.'
    )


def quality_step(
    server,
    *,
    items: int | None = None,
    budgets: Sequence[str | int | None] | None = None,
    options: RequestSettings | None = None,
    label: str = "accuracy",
) -> tuple[AccuracyResult | None, pd.DataFrame | None]:
    """Score the run, print the accuracy with its interval, the published reference with its
    source and what the figure means on this run; then the budget curve.

    Args:
        server: the running server (``base_url``, ``model_name``; its ``srv.run`` says the
            mode: what the figure can mean, the default sizes).
        items: how many items (None: the mode's, :func:`helpers.config.run.run_defaults`;
            0 skips the step).
        budgets: ``thinking_token_budget`` values for the curve (``"off"``, a token count
            below ``max_tokens``, None for no cap); None: the mode's (``run_defaults``: its
            budgets, on its first ``budget_items`` items); empty: no curve.
        options: the request settings of every item (None: the run's,
            :meth:`~lab.evals.settings.RequestSettings.for_run`); ``max_tokens`` per item.
        label: names the runs' folders ``out/evals/<label>*/``.

    Raises:
        ValueError: a budget that is not ``"off"``, None or a token count below
            ``options.max_tokens`` (the message names both and the fix), before anything
            is sent.

    Returns:
        ``(accuracy, curve)``: the :class:`AccuracyResult` and the curve's table
        (:func:`lab.evals.budget.curve_table`), each None when skipped.
    """
    if items == 0:
        print("Accuracy step skipped (quality items = 0).")
        return None, None
    opts = options or RequestSettings.for_run(server)
    run = run_of(server)
    d = run_defaults(run.weights, opts.max_tokens)
    chosen = default_items(run, items if items is not None or run.stand_in else d.eval_items)
    budgets = list(budgets if budgets is not None else d.budgets)
    plan = budget_plan(budgets, opts)
    curve_items = chosen[: d.budget_items]
    concurrency = d.eval_concurrency  # requests in flight: 4 on the stand-in, 32 on a GPU
    print(
        f"Scoring {len(chosen)} items through lm-eval; the item set: {ITEM_SETS['gsm8k'].source} ...",
        flush=True,
    )

    def same(o: RequestSettings) -> bool:
        return (o.thinking, o.reasoning_budget) == (opts.thinking, opts.reasoning_budget)

    shared = curve_items == chosen
    extra = [(name, o) for name, o in plan if not (shared and same(o))]
    runs = [(label, opts)] + (
        [(f"{label}-budget-{n.replace(' ', '')}", o) for n, o in extra] if shared else []
    )
    results = evaluate_runs(server, runs, chosen, concurrency=concurrency)
    result = results[0]
    print(result.summary())
    print(f"Per-item table: {result.path / 'items.csv'}")
    if run.stand_in:
        acc = load_demo()["accuracy"]
        t = result.items
        for group in ("trained", "held_out"):
            part = t[t["id"].isin(acc[group])]
            if len(part):
                seen = "trained on" if group == "trained" else "never shown"
                print(
                    f"  items the stand-in was {seen}: {wilson(int(part['correct'].sum()), len(part))}"
                )
        print(
            "The stand-in knows only the items it was trained on: the score shows the scorer reads "
            "the model's answers, not the real model's quality."
        )
    elif run.weightless:
        print(
            "Weightless run (random weights): the answers are noise, so this figure is too. It shows "
            "the pipeline works; real accuracy needs the downloaded checkpoint."
        )
    print(f"Published reference: {REFERENCES['gsm8k']}")
    below = below_the_floor(result, run)
    if below:
        print(below)
    if not plan:
        return result, None
    if shared:
        by_name = dict(zip([n for n, _ in extra], results[1:], strict=True))
        curve_runs = [result if same(o) else by_name[n] for n, o in plan]
    else:
        curve_runs = evaluate_runs(
            server,
            [(f"{label}-budget-{n.replace(' ', '')}", o) for n, o in plan],
            curve_items,
            concurrency=concurrency,
        )
    curve = curve_table(plan, curve_runs)
    print(f"Reasoning-budget curve on {len(curve_items)} items (one run per budget):")
    return result, curve
