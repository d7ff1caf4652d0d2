"""Check a streamed chat reply: :func:`check_stream` reads the chunks of
``client.chat.completions.create(..., stream=True)`` as they arrive (handing each piece to a
callback, e.g. to print it) and assembles the same :class:`~helpers.chat.types.ChatResult` as
:func:`helpers.chat.parse.check_reply`, checked the same way when the stream ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from helpers.chat.parse import _finish, asked_turn
from helpers.chat.types import (
    ChatResult,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    Usage,
    _get,
    _reasoning_of,
)


def check_stream(
    stream: Iterable[Any],
    *,
    on_piece: Callable[[StreamEvent], None] | None = None,
    **asked: Any,
) -> ChatResult:
    """Read a chat-completions stream to its end and check it as :func:`check_reply` does.

    Args:
        stream: what ``client.chat.completions.create(..., stream=True)`` returned (send
            ``stream_options={"include_usage": True}`` too: the last chunk then carries the
            token counts), or any iterable of ``ChatCompletionChunk`` objects / chunk dicts.
            Only the first choice is assembled (``n`` > 1 streams the others alongside).
        on_piece: called with each :class:`~helpers.chat.types.StreamEvent` as it arrives:
            ``("reasoning", text)``, ``("content", text)``, ``("tool_call", ToolCallDelta)``.
        **asked: what the request was sent with, as :func:`~helpers.chat.parse.check_reply`
            takes it.

    Returns:
        The checked :class:`ChatResult`; ``raw`` is the list of chunks.

    Raises:
        TypeError: a keyword of the wrong shape.
        ResponseError: as ``check_reply`` (raised when the stream ends).
    """
    turn = asked_turn("check_stream", **asked)
    reasoning: list[str] = []
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    chunks: list[Any] = []
    finish_reason, usage = None, Usage()
    for chunk in stream:
        chunks.append(chunk)
        if _get(chunk, "usage") is not None:
            usage = Usage.from_raw(_get(chunk, "usage"))
        for choice in _get(chunk, "choices") or []:
            if (_get(choice, "index") or 0) != 0:
                continue
            delta = _get(choice, "delta")
            pieces: list[StreamEvent] = []
            for kind, text, parts in (
                ("reasoning", _reasoning_of(delta), reasoning),
                ("content", _get(delta, "content"), content),
            ):
                if text:
                    parts.append(text)
                    pieces.append(StreamEvent(kind, text))
            for tc in _get(delta, "tool_calls") or []:
                fn = _get(tc, "function")
                d = ToolCallDelta(
                    index=_get(tc, "index") or 0,
                    id=_get(tc, "id"),
                    name=_get(fn, "name"),
                    arguments=_get(fn, "arguments") or "",
                )
                slot = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = slot["id"] or d.id
                slot["name"] += d.name or ""
                slot["arguments"] += d.arguments
                pieces.append(StreamEvent("tool_call", d))
            if on_piece is not None:
                for piece in pieces:
                    on_piece(piece)
            finish_reason = _get(choice, "finish_reason") or finish_reason
    said, thought = "".join(content), "".join(reasoning)
    # nemotron_v3 streams unfinished reasoning as reasoning, then (thinking off or
    # force_nonempty_content) repeats it as content in the last delta; the non-streamed
    # reply has it only in content. Match that shape.
    if (turn.force_nonempty_content or not turn.thinking) and said.strip() == thought.strip():
        thought = ""
    result = ChatResult(
        reasoning=thought,
        content=said,
        tool_calls=[
            ToolCall.from_raw(s["id"], s["name"], s["arguments"]) for _, s in sorted(calls.items())
        ],
        finish_reason=finish_reason,
        usage=usage,
        raw=chunks,
    )
    return _finish(result, turn)
