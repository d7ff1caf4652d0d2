"""The per-mode checks of the speculative-decoding notebook on one running server
(:func:`mode_checks`), besides the speed sweep.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.bench.acceptance import measure_acceptance
from helpers.bench.metrics import scrape_metrics, spec_decode_counters
from helpers.chat.completions import chat
from helpers.chat.drafting import ReasoningBudgetUnenforcedWarning
from helpers.chat.request import ChatOptions
from helpers.chat.types import ChatResult
from helpers.config.run import run_of
from helpers.server.endpoint import make_client
from lab.evals.lossless import LOSSLESS_PROMPTS, greedy_tokens

#: The reasoning budget the budget check asks for (tokens).
CHECK_BUDGET = 8


@dataclass
class ModeChecks:
    """What :func:`mode_checks` measured on one mode's server.

    Attributes:
        greedy: token ids per lossless prompt (greedy, 64 tokens at most each).
        drafting: the server runs speculative decoding.
        greedy_accepted: draft tokens accepted during the greedy requests (the server's
            counter before and after; drafting only, None when it has no such counter).
        acceptance: :func:`~helpers.bench.acceptance.measure_acceptance`'s row (drafting only).
        budget: the reply to a request with a server budget of :data:`CHECK_BUDGET` reasoning
            tokens (drafting only; None on weightless noise that could not be parsed).
    """

    greedy: list[list[int]]
    drafting: bool = False
    greedy_accepted: int | None = None
    acceptance: dict[str, Any] | None = None
    budget: ChatResult | None = None


def _accepted(base_url: str) -> float | None:
    """The server's accepted-draft-token counter, or None (no drafting counters, no metrics)."""
    try:
        counters = spec_decode_counters(scrape_metrics(base_url))
    except Exception:  # noqa: BLE001 - a server without /metrics: not measured
        return None
    return counters.num_accepted_tokens if counters is not None else None


def mode_checks(
    srv: Any,
    *,
    real_prompts: int = 32,
    label: str = "mode",
    out_dir: str | Path | None = None,
) -> ModeChecks:
    """Greedy outputs for the lossless check, and for a drafting server its acceptance on
    ``real_prompts`` real prompts (0 skips it) and one server-budget reply.

    Args:
        srv: a running server with ``base_url`` and ``config`` (its ``speculative`` says
            whether it drafts) and ``run`` (answer lengths: 128 tokens on the stand-in, 256 on
            a GPU; weightless noise is reported, not raised).
        real_prompts: requests of the acceptance run.
        label: the acceptance run's name.
        out_dir: the acceptance run's folder.

    Raises:
        BenchError, ResponseError: as :func:`measure_acceptance` and :func:`chat`.
    """
    cfg = getattr(srv, "intended", None) or srv.config  # attached: the config the notebook resolved
    drafting = getattr(cfg, "speculative", "none") != "none"
    before = _accepted(srv.base_url) if drafting else None
    out = ModeChecks(greedy_tokens(srv, LOSSLESS_PROMPTS, max_tokens=64), drafting)
    if not drafting:
        return out
    after = _accepted(srv.base_url)
    if before is not None and after is not None:
        out.greedy_accepted = int(after - before)
    if real_prompts:
        out.acceptance = measure_acceptance(
            srv, num_prompts=real_prompts, output_len=128 if run_of(srv).stand_in else 256, label=label,
            out_dir=out_dir,
        )  # fmt: skip
    opts = ChatOptions.for_run(srv, max_tokens=256, temperature=0.0)
    with warnings.catch_warnings():  # asked on purpose: the check measures what it warns of
        warnings.simplefilter("ignore", ReasoningBudgetUnenforcedWarning)
        out.budget = chat(
            make_client(srv.base_url), cfg.served_model_name, "Briefly explain: what is vLLM?",
            opts, reasoning_budget=CHECK_BUDGET,
        )  # fmt: skip
    return out
