"""Streamed chat: :func:`stream_chat` yields typed events as vLLM sends them and assembles
the same :class:`~helpers.chat.types.ChatResult` as :func:`helpers.chat.completions.chat`, checked the
same way (:mod:`helpers.chat.parse`) when the stream ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from helpers.chat.completions import _create, _fit_to_server, _LimitNamed
from helpers.chat.parse import _finish, _Turn
from helpers.chat.request import (
    ChatOptions,
    _check_client,
    _check_model,
    _options_from,
    build_request,
)
from helpers.chat.types import (
    ChatResult,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    Usage,
    _get,
    _reasoning_of,
)


class ChatStream:
    """Iterate for :class:`StreamEvent` s as they arrive; afterwards ``.result`` holds the
    assembled :class:`ChatResult` (same shape as :func:`~helpers.chat.completions.chat`'s)."""

    def __init__(self, chunks: Iterable[Any], turn: _Turn):
        self._chunks = chunks
        self._turn = turn
        self._result: ChatResult | None = None
        self._started = False

    def __iter__(self) -> Iterator[StreamEvent]:
        if self._started:
            raise RuntimeError(
                "A ChatStream can be iterated once; read .result or call stream_chat again."
            )
        self._started = True
        reasoning: list[str] = []
        content: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        chunks: list[Any] = []
        finish_reason, usage = None, Usage()
        for chunk in self._chunks:
            chunks.append(chunk)
            if _get(chunk, "usage") is not None:
                usage = Usage.from_raw(_get(chunk, "usage"))
            for choice in _get(chunk, "choices") or []:
                if (_get(choice, "index") or 0) != 0:
                    continue  # n > 1: only the first choice is assembled
                delta = _get(choice, "delta")
                for kind, text, parts in (
                    ("reasoning", _reasoning_of(delta), reasoning),
                    ("content", _get(delta, "content"), content),
                ):
                    if text:
                        parts.append(text)
                        yield StreamEvent(kind, text)
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
                    yield StreamEvent("tool_call", d)
                finish_reason = _get(choice, "finish_reason") or finish_reason
        turn = self._turn
        said, thought = "".join(content), "".join(reasoning)
        # nemotron_v3 streams unfinished reasoning as reasoning, then (thinking off or
        # force_nonempty_content) repeats it as content in the last delta; the
        # non-streamed reply has it only in content. Match that shape.
        if (turn.force_nonempty_content or not turn.thinking) and said.strip() == thought.strip():
            thought = ""
        result = ChatResult(
            reasoning=thought,
            content=said,
            tool_calls=[
                ToolCall.from_raw(s["id"], s["name"], s["arguments"])
                for _, s in sorted(calls.items())
            ],
            finish_reason=finish_reason,
            usage=usage,
            raw=chunks,
        )
        self._result = _finish(result, turn)

    @property
    def result(self) -> ChatResult:
        """The assembled turn; drains the stream first if it was not iterated."""
        if self._result is None:
            if not self._started:
                for _ in self:
                    pass
            else:
                raise RuntimeError("The stream was not read to the end; iterate it fully first.")
        assert self._result is not None
        return self._result


def stream_chat(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    options: ChatOptions | None = None,
    **overrides: Any,
) -> ChatStream:
    """Streaming :func:`~helpers.chat.completions.chat`: returns a :class:`ChatStream` of typed events.

    ``for kind, data in stream_chat(...)`` gives ``("reasoning", text)``, ``("content",
    text)`` and ``("tool_call", ToolCallDelta)`` as the server sends them; ``.result`` the
    :class:`ChatResult`, checked when the stream ends. ``options`` and ``**overrides`` as in
    ``chat``; the budget is always the server's (no two-pass stream). Without
    ``--reasoning-parser`` the reasoning streams as ``"content"``; ``.result`` splits it.

    Raises:
        TypeError, ValueError, ServerConnectionError: as ``chat`` (at once).
        ResponseError: as ``chat`` (raised when the stream ends).

    Warns:
        ServerLimitUnknownWarning: as ``chat`` (``GET /v1/models`` failed: the request is sent,
            fitted if the server names a smaller ``max_model_len``).
    """
    _check_client("stream_chat", client)
    _check_model("stream_chat", model)
    opts, extra = _options_from("stream_chat", options, overrides)
    opts, max_model_len, unchecked = _fit_to_server("stream_chat", client, model, opts)
    kwargs = build_request(model, messages_or_prompt, opts, stream=True, **extra)
    try:
        response = _create(client, kwargs, unchecked=unchecked)
    except _LimitNamed:  # the server named a smaller max_model_len: fitted to it now
        return stream_chat(client, model, messages_or_prompt, options, **overrides)
    return ChatStream(response, _Turn.of(opts, max_model_len))


def collect_stream(stream: ChatStream | Iterable[Any], **asked: Any) -> ChatResult:
    """Reassemble a stream into a :class:`ChatResult`.

    Args:
        stream: a :class:`ChatStream` (its own settings are used), or any iterable of
            ``ChatCompletionChunk`` objects / chunk dicts (then pass what the request
            asked for as ``**asked``, the keywords of :func:`~helpers.chat.parse.parse_response`).
    """
    if isinstance(stream, ChatStream):
        return stream.result
    return ChatStream(stream, _Turn(**asked)).result
