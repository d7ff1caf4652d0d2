"""The reasoning-budget curve: accuracy and tokens spent against ``thinking_token_budget``
(reasoning off, caps, no cap), scored by :func:`lab.evals.step.quality_step`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.paths import out_dir, slug
from lab.evals.accuracy import AccuracyResult
from lab.evals.settings import RequestSettings


def budget_plan(budgets, base: RequestSettings) -> list[tuple[str, RequestSettings]]:
    """``[(name, options)]`` for budgets ``"off"`` (reasoning off), an int (the cap in
    tokens) or None (reasoning on, no cap).

    Raises:
        ValueError: any other value, or a cap at or above ``base.max_tokens``.
    """
    plan = []
    for b in budgets:
        if b == "off":
            opts = base.replace(thinking=False, reasoning_budget=None)
        elif b is None:
            opts = base.replace(thinking=True, reasoning_budget=None)
        elif isinstance(b, int) and not isinstance(b, bool) and b >= 0:
            check_budgets([b], base.max_tokens)
            opts = base.replace(thinking=True, reasoning_budget=b)
        else:
            raise ValueError(f"budget {b!r}: use 'off', None (no cap) or a token count >= 0")
        plan.append(("off" if b == "off" else ("no cap" if b is None else str(b)), opts))
    return plan


def check_budgets(budgets: Any, max_tokens: int | None) -> None:
    """Refuse a reasoning cap that leaves the answer no room, before a launch (step 1: the
    notebook's ``max_tokens`` or its mode's; :func:`budget_plan` checks again as served).

    Args:
        budgets: the ``quality["budgets"]`` list (None: the defaults, nothing to check).
        max_tokens: tokens per request, reasoning included (None: no limit to check).

    Raises:
        ValueError: a cap (tokens) at or above ``max_tokens``, naming a budget that fits.
    """
    for b in budgets or []:
        if (
            isinstance(b, int)
            and not isinstance(b, bool)
            and max_tokens is not None
            and b >= max_tokens
        ):
            raise ValueError(
                f"budget {b} is not below max_tokens={max_tokens}: the reasoning cap must leave "
                "room for the answer. Lower the budget (quality={'budgets': "
                f"['off', {max(max_tokens // 4, 1)}, None]}}) or raise max_tokens."
            )


def curve_table(
    plan: list[tuple[str, RequestSettings]], runs: list[AccuracyResult]
) -> pd.DataFrame:
    """One row per budget: ``budget``, ``accuracy``, ``low``, ``high`` (95 % Wilson,
    fractions), ``mean_tokens`` (generated per item, reasoning included), ``seconds``."""
    return pd.DataFrame(
        [
            {
                "budget": name,
                "accuracy": run.accuracy.value,
                "low": run.accuracy.low,
                "high": run.accuracy.high,
                "mean_tokens": run.mean_tokens,
                "seconds": run.seconds,
            }
            for (name, _), run in zip(plan, runs, strict=True)
        ]
    )


def plot_budget_curve(curve: pd.DataFrame, title: str, path: Path | None = None) -> Path:
    """Accuracy (with its interval) against mean tokens per item, one point per budget;
    saved as PNG (default ``out/plots/<title slug>-budget.png``); returns the path."""
    # a Figure of its own, not pyplot: the kernel's backend (inline plots) stays as it is
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    x = curve["mean_tokens"].fillna(0)
    y = curve["accuracy"]
    ax.errorbar(
        x, y, yerr=[y - curve["low"], curve["high"] - y], fmt="o-", capsize=4, label="accuracy"
    )
    for xi, yi, name in zip(x, y, curve["budget"], strict=True):
        ax.annotate(str(name), (xi, yi), textcoords="offset points", xytext=(6, 6))
    ax.set_xlabel("mean tokens generated per item (reasoning + answer)")
    ax.set_ylabel("accuracy (95 % Wilson interval)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(textwrap.fill(title, 58), fontsize=10)  # whole, on a 6-inch figure
    ax.grid(alpha=0.3)
    path = path or out_dir("plots") / f"{slug(title.lower(), 'accuracy')}-budget.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Title": title})  # the title travels with the PNG
    return path
