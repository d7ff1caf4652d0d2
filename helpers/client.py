"""Talk to a vLLM server running Nemotron 3.5 Lightning through the ``openai`` SDK.

The story a notebook tells, one call per step::

    client = make_client(server.base_url)                 # http://host:port[/v1]
    r = chat(client, MODEL, "Write a haiku about GPUs")   # reasoning on (the default)
    show(r)                                               # reasoning and answer, labelled
    r = chat(client, MODEL, "Capital of Japan?", thinking=False)
    r = chat(client, MODEL, "Prove ...", reasoning_budget=512)
    result = print_stream(stream_chat(client, MODEL, "Explain speculative decoding"))
    loop = run_tool_loop(client, MODEL, "Weather in Santa Clara?", {"get_weather": get_weather})

Every call returns a :class:`ChatResult` with the same shape (reasoning, content, parsed
tool calls, finish reason, token usage), streamed or not, so cells and tests read one
structure.

What the server must be launched with (seed ``004_*``: "Ensure your serving backend is
launched with appropriate parsers"), and what this module does when it was not:

- ``--reasoning-parser nemotron_v3`` fills ``message.reasoning`` (vLLM >= 0.10; older
  servers call it ``reasoning_content``, read as a fallback) and enables the
  ``thinking_token_budget`` request field. Without it the reasoning arrives inside
  ``content``, ended by a lone ``</think>``: :func:`chat` splits it and warns
  (:class:`ReasoningParserMissingWarning`).
  The same split applies to a reply cut at ``max_tokens`` before ``</think>`` (then
  all of ``content`` is unfinished reasoning; vLLM omits ``reasoning_tokens`` from
  ``usage`` without a reasoning parser, which is how the helper tells).
- ``--enable-auto-tool-choice --tool-call-parser qwen3_coder`` turns the model's
  ``<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...`` markup into
  ``message.tool_calls``. Without any tool parser vLLM 0.32 refuses requests that offer
  tools (HTTP 400); with another parser (e.g. ``hermes``) the markup stays in
  ``content``. Both raise :class:`~helpers.errors.ResponseError` naming the flags.

The chat API lives in one module per job; this module is its notebook-facing front and
re-exports every public name, so ``helpers.client.X`` keeps working:

- :mod:`helpers.responses`  result types (:class:`ChatResult`, :class:`ToolCall`, :class:`Usage`)
  and the warnings a reply can raise
- :mod:`helpers.parsing`    a reply -> :class:`ChatResult`, with the truncation / parser checks
- :mod:`helpers.request`    request bodies (:func:`build_request`) and argument checks
- :mod:`helpers.chat`       :func:`make_client`, :func:`chat`, the server's ``max_model_len``
- :mod:`helpers.streaming`  :func:`stream_chat`, :class:`ChatStream`, :func:`collect_stream`
- :mod:`helpers.tools`      :func:`tool_schema`, :func:`run_tool_loop`
- :mod:`helpers.display`    :func:`show`, :func:`print_stream`, :func:`budget_report`
"""

from __future__ import annotations

from helpers.chat import chat, make_client, server_max_model_len
from helpers.display import budget_report, print_stream, show
from helpers.errors import ResponseError, ServerConnectionError, ToolLoopError
from helpers.parsing import parse_response
from helpers.request import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    as_messages,
    build_request,
)
from helpers.responses import (
    REASONING_PARSER_FLAGS,
    THINK_END,
    THINK_START,
    TOOL_MARKUP,
    TOOL_PARSER_FLAGS,
    ChatResult,
    ReasoningParserMissingWarning,
    ReasoningTruncatedWarning,
    StreamEvent,
    ToolArgumentWarning,
    ToolCall,
    ToolCallDelta,
    ToolCallInReasoningWarning,
    ToolCallsMissingWarning,
    ToolCallTruncatedWarning,
    Usage,
)
from helpers.streaming import ChatStream, collect_stream, stream_chat
from helpers.tools import ToolLoopResult, ToolRun, run_tool_loop, tool_schema

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TEMPERATURE",
    "DEFAULT_TOP_P",
    "REASONING_PARSER_FLAGS",
    "THINK_END",
    "THINK_START",
    "TOOL_MARKUP",
    "TOOL_PARSER_FLAGS",
    "ChatResult",
    "ChatStream",
    "ReasoningParserMissingWarning",
    "ReasoningTruncatedWarning",
    "ResponseError",
    "ServerConnectionError",
    "StreamEvent",
    "ToolArgumentWarning",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallInReasoningWarning",
    "ToolCallTruncatedWarning",
    "ToolCallsMissingWarning",
    "ToolLoopError",
    "ToolLoopResult",
    "ToolRun",
    "Usage",
    "as_messages",
    "budget_report",
    "build_request",
    "chat",
    "collect_stream",
    "make_client",
    "parse_response",
    "print_stream",
    "run_tool_loop",
    "server_max_model_len",
    "show",
    "stream_chat",
    "tool_schema",
]
