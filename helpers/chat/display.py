"""Print chat results in a notebook: :func:`show` (a turn or a whole tool loop, labelled),
:func:`print_stream` (a stream as it arrives) and :func:`budget_report` (one line on a
reasoning budget).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from helpers.chat.stream import ChatStream
from helpers.chat.tools import ToolLoopResult
from helpers.chat.types import ChatResult


def print_stream(stream: ChatStream, file: Any = None) -> ChatResult:
    """Print a stream live, labelling where reasoning, answer and tool calls start;
    return the assembled :class:`ChatResult`."""
    out = file or sys.stdout
    kind_now = None
    calls_started = 0
    for kind, data in stream:
        if kind != kind_now:
            label = {"reasoning": "reasoning", "content": "answer", "tool_call": "tool calls"}[kind]
            print(("\n" if kind_now else "") + f"── {label} ──", file=out, flush=True)
            kind_now = kind
        if kind == "tool_call":
            text = data.arguments
            if data.name:  # the first piece of a call
                text = ("\n" if calls_started else "") + f"[{data.index}] {data.name} " + text
                calls_started += 1
        else:
            text = data
        print(text, end="", file=out, flush=True)
    print(file=out, flush=True)
    result = stream.result
    print(f"── finish_reason={result.finish_reason} ──", file=out, flush=True)
    for w in result.warnings:
        print(f"!! {w}", file=out, flush=True)
    return result


def _show_turn(r: ChatResult, out: Any) -> None:
    if r.reasoning:
        n = f" ({r.usage.reasoning_tokens} tokens)" if r.usage.reasoning_tokens is not None else ""
        print(f"── reasoning{n} ──\n{r.reasoning.strip()}", file=out)
    if r.content.strip() or not r.tool_calls:
        print(f"── answer ──\n{r.content.strip() or '(empty)'}", file=out)
    if r.tool_calls:
        print("── tool calls ──", file=out)
        for tc in r.tool_calls:
            print(
                f"{tc.name}({json.dumps(tc.arguments, ensure_ascii=False)})  id={tc.id}", file=out
            )
    print(
        f"── finish_reason={r.finish_reason} · prompt {r.usage.prompt_tokens} · "
        f"completion {r.usage.completion_tokens} tokens ──",
        file=out,
    )
    for w in r.warnings:
        print(f"!! {w}", file=out)


def show(result: ChatResult | ToolLoopResult | None, file: Any = None) -> None:
    """Print a :class:`ChatResult` (reasoning, answer, tool calls, usage, warnings) or a
    :class:`ToolLoopResult` (each turn and each tool reply), clearly labelled. None (a
    weightless-mode reply that failed on noise text, already reported) prints nothing."""
    out = file or sys.stdout
    if result is None:
        return
    if isinstance(result, ToolLoopResult):
        runs = iter(result.tool_runs)
        for i, turn in enumerate(result.turns, 1):
            print(f"════ turn {i} ════", file=out)
            _show_turn(turn, out)
            for _ in turn.tool_calls:
                run = next(runs, None)
                if run is not None:
                    print(
                        f"── tool {run.call.name} returned ──\n{run.message['content']}", file=out
                    )
        if result.warning:
            print(f"!! {result.warning}", file=out)
        return
    _show_turn(result, out)


def budget_report(result: ChatResult | None, budget: int, *, drafting: bool = False) -> str:
    """One line saying whether a ``thinking_token_budget`` request behaved as it should.

    Args:
        result: the reply to a request sent with ``reasoning_budget=budget``.
        budget: the ``thinking_token_budget`` it was sent with (tokens).
        drafting: the server runs speculative decoding: an overrun is then put down to vLLM
            not applying the budget while drafting (vllm-project/vllm #39573, #54906).

    Returns:
        ``"... N reasoning tokens (budget B), then an answer of M characters"`` when the
        reasoning stayed within B + 1 (the forced ``</think>``) and an answer followed; else
        a line starting ``"UNEXPECTED"`` saying what failed (and why, where known). N is
        ``usage.completion_tokens_details.reasoning_tokens`` (needs ``--reasoning-parser``).
    """
    if result is None:
        return f"thinking_token_budget={budget}: no reply to judge (weightless mode reported why)"
    n = result.usage.reasoning_tokens
    problems = []
    if n is None:
        problems.append("the server reported no reasoning_tokens (is --reasoning-parser set?)")
    elif n > budget + 1:
        problems.append(f"{n} reasoning tokens exceed the budget of {budget}")
        if drafting:
            problems.append(
                "cause: the server drafts (speculative decoding) and vLLM does not apply "
                "thinking_token_budget on that path (vllm-project/vllm #39573, #54906); use "
                "chat(..., budget_method='two_pass')"
            )
    if not result.content.strip():
        held = (
            f"{n} reasoning tokens (budget {budget}), but "
            if n is not None and not problems
            else ""
        )
        problems.append(
            f"{held}no answer followed the reasoning (finish_reason={result.finish_reason!r})"
        )
    if problems:
        return f"UNEXPECTED thinking_token_budget={budget}: " + "; ".join(problems)
    return (
        f"thinking_token_budget={budget}: {n} reasoning tokens (budget {budget}), then an answer "
        f"of {len(result.content.strip())} characters"
    )
