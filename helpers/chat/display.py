"""Show a chat reply in a notebook: :func:`show` checks what ``client.chat.completions.create``
returned (a reply or a stream, printed as it arrives) and prints it labelled; and
:func:`budget_report` (one line on a reasoning budget).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from helpers.chat.parse import check_reply
from helpers.chat.stream import check_stream
from helpers.chat.types import ChatResult, StreamEvent, _get


def _live_printer(out: Any):
    """A ``check_stream`` callback that prints each piece, labelling where reasoning, answer
    and tool calls start."""
    state = {"kind": None, "calls": 0}

    def on_piece(piece: StreamEvent) -> None:
        kind, data = piece
        if kind != state["kind"]:
            label = {"reasoning": "reasoning", "content": "answer", "tool_call": "tool calls"}[kind]
            print(("\n" if state["kind"] else "") + f"── {label} ──", file=out, flush=True)
            state["kind"] = kind
        text = data
        if kind == "tool_call":
            text = data.arguments
            if data.name:  # the first piece of a call
                text = ("\n" if state["calls"] else "") + f"[{data.index}] {data.name} " + text
                state["calls"] += 1
        print(text, end="", file=out, flush=True)

    return on_piece


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


def _footer(r: ChatResult, out: Any) -> None:
    print(
        f"── finish_reason={r.finish_reason} · prompt {r.usage.prompt_tokens} · "
        f"completion {r.usage.completion_tokens} tokens ──",
        file=out,
        flush=True,
    )
    for w in r.warnings:
        print(f"!! {w}", file=out, flush=True)


def show(reply: Any, *, file: Any = None, **asked: Any) -> ChatResult | None:
    """Check a chat reply and print it: reasoning, answer, tool calls, token counts, and each
    warning the checks gave (``!! ...``).

    Args:
        reply: what ``client.chat.completions.create`` returned: a ``ChatCompletion``
            (checked by :func:`~helpers.chat.parse.check_reply`) or, sent with
            ``stream=True``, its stream (printed as the chunks arrive, then checked by
            :func:`~helpers.chat.stream.check_stream`); or a :class:`ChatResult` already
            checked (printed as it is). None (a weightless reply that failed on noise text,
            already reported) prints nothing.
        file: where to print (default stdout).
        **asked: what the request was sent with (``max_tokens``, ``tools``, ``tool_choice``,
            ``extra_body``; ``recover_tool_calls``), as ``check_reply`` takes them.

    Returns:
        The checked :class:`ChatResult` (assign it: a cell's last expression is displayed).

    Raises:
        TypeError, ResponseError: as ``check_reply``.
    """
    out = file or sys.stdout
    if reply is None:
        return None
    if isinstance(reply, ChatResult):
        result = reply
    elif _get(reply, "choices") is not None:
        result = check_reply(reply, **asked)
    else:
        result = check_stream(reply, on_piece=_live_printer(out), **asked)
        print(file=out, flush=True)
        _footer(result, out)
        return result
    _show_turn(result, out)
    _footer(result, out)
    return result


def budget_report(result: ChatResult | None, budget: int, *, drafting: bool = False) -> str:
    """One line saying whether a ``thinking_token_budget`` request behaved as it should.

    Args:
        result: the checked reply to a request sent with
            ``extra_body={"thinking_token_budget": budget}`` (or from
            :func:`helpers.chat.drafting.two_pass_budget`).
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
                "helpers.chat.drafting.two_pass_budget"
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
