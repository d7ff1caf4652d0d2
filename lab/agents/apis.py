"""The same chat turn on vLLM's other two APIs: OpenAI Responses and Anthropic Messages.

Coding agents and agent SDKs speak ``POST /v1/responses`` (the ``openai`` SDK's
``client.responses.create``) or ``POST /v1/messages`` (the ``anthropic`` SDK); vLLM 0.32.0
serves both next to chat completions. :func:`check_responses_reply` and
:func:`check_messages_reply` read what each SDK call returned (the calls are written in
``notebooks/agents.ipynb``) into the :class:`~helpers.chat.types.ChatResult` that
:func:`~helpers.chat.parse.check_reply` gives a chat completion; :func:`responses_chat` and
:func:`messages_chat` send one turn on each with the same keywords (``thinking``,
``max_tokens``, ``temperature``, ``top_p``, ``tools``, ``tool_choice``, ``schema``). Reply shapes (vLLM
0.32.0 source, measured on the stand-in, ``tests/lab/agents/test_apis.py``): Responses items are built in ``vllm/entrypoints/openai/responses/serving.py``
(``_make_response_output_items``); Messages requests are converted to chat completions
(``vllm/entrypoints/anthropic/serving.py``, same parsers). Thinking on or off is
``chat_template_kwargs.enable_thinking`` on both (in ``extra_body``; Responses'
``ResponsesRequest.build_chat_params`` also derives it from ``reasoning.effort``); Anthropic's
``thinking={"type": "disabled"}`` would send ``reasoning_effort`` (``_handle_thinking``),
which the Nemotron template does not read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from helpers.chat.types import (
    ChatResult,
    ReasoningTruncatedWarning,
    ToolCall,
    Usage,
    _get,
    _warn,
    skip_in_warnings,
)
from helpers.errors import ResponseError
from helpers.server.endpoint import server_root
from lab.agents.send import send

#: The functions here that read a vLLM reply with :func:`~helpers.chat.types._get`, by API: the
#: lab's part of :data:`helpers.chat.types.REPLY_READERS` (``python -m tools.drift`` reads both
#: tables and checks every offered vLLM release still defines the fields they read).
REPLY_READERS: dict[str, tuple[str, ...]] = {
    "responses": ("lab.agents.apis.parse_responses_reply",),
    "messages": ("lab.agents.apis.parse_messages_reply",),
    "models": ("lab.verify.served_max_model_len",),  # the endpoint check's read of /v1/models
}

skip_in_warnings(__file__)  # a reply's warning points at the caller, as the chat modules' do

# ─── tools in each API's shape ────────────────────────────────────────────────────────


def _flat_tools(tools: Iterable[Mapping[str, Any]] | None, schema_key: str, **extra: Any):
    return [
        {
            **extra,
            "name": t["function"]["name"],
            "description": t["function"].get("description") or "",
            schema_key: t["function"].get("parameters") or {"type": "object", "properties": {}},
        }
        for t in tools or []
    ]


def responses_tools(tools: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Chat-completions function tools (``[{"type": "function", "function": {...}}]``, as
    :func:`~helpers.chat.tools.tool_schema` builds them) in the Responses API's flat shape
    ``{"type": "function", "name", "description", "parameters"}``."""
    return _flat_tools(tools, "parameters", type="function")


def messages_tools(tools: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The same tools in the Anthropic Messages shape ``{"name", "description",
    "input_schema"}``."""
    return _flat_tools(tools, "input_schema")


def _messages_of(fn: str, messages_or_prompt: Any) -> list[dict[str, Any]]:
    if isinstance(messages_or_prompt, str):
        return [{"role": "user", "content": messages_or_prompt}]
    messages = [dict(m) for m in messages_or_prompt]
    for m in messages:
        if m.get("role") not in ("system", "user", "assistant") or not isinstance(
            m.get("content"), str
        ):
            raise TypeError(
                f"{fn}: each message must be {{'role': 'system'|'user'|'assistant', 'content': "
                f"str}}; got {m!r:.100}. Tool turns differ per API: continue those on chat completions."
            )
    return messages


# ─── Responses API ────────────────────────────────────────────────────────────────────


def responses_chat(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    *,
    thinking: bool = True,
    max_tokens: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | None = None,
    schema: type | None = None,
    compact: bool = True,
    **create_kwargs: Any,
) -> ChatResult:
    """One turn on the Responses API (``client.responses.create``), read into a ChatResult.

    Args:
        client: an ``openai.OpenAI`` client (:func:`~helpers.server.endpoint.make_client`).
        model: the served model name.
        messages_or_prompt: a prompt string, or ``{"role", "content": str}`` messages.
        thinking: sent as ``chat_template_kwargs.enable_thinking`` (in ``extra_body``).
        max_tokens: sent as ``max_output_tokens`` (tokens; ``None`` sends none: the
            server's limit).
        temperature, top_p: sampling (``None``: not sent, the server's default).
        tools: chat-completions function tools, converted by :func:`responses_tools`.
        tool_choice: ``"auto"``, ``"none"`` or ``"required"``.
        schema: a pydantic model class to constrain the answer to (validate it with
            :func:`lab.agents.structured.validate_answer`); refused with forced tools
            (vllm #32006).
        compact: ``True`` sends the whitespace-free grammar as ``structured_outputs``
            (a ``ResponsesRequest`` field in vLLM 0.32.0), ``False`` the ``text.format``
            json_schema, which ran on newlines on the stand-in (:mod:`lab.agents.structured`)
            and was unconstrained with a reasoning parser before vLLM PR #44084 (#44012).
        **create_kwargs: more ``client.responses.create`` keywords (``extra_body`` merged).

    Returns:
        A :class:`~helpers.chat.types.ChatResult` (:func:`parse_responses_reply`).

    Raises:
        TypeError: a bad argument (the message names it).
        ServerConnectionError: nothing answers at the client's URL.
        ServerRequestError: the server failed the request (HTTP 5xx).
        ResponseError: the server refused the request (HTTP 4xx; its words quoted).
    """
    import openai

    if not hasattr(getattr(client, "responses", None), "create"):
        raise TypeError(
            "responses_chat: `client` must be an openai.OpenAI client (make_client(url) or "
            f"srv.client()); got {type(client).__name__}."
        )
    extra_body = _settings(
        "responses_chat", model, thinking, tools, tool_choice, create_kwargs, schema
    )
    kwargs: dict[str, Any] = dict(
        model=model, input=_messages_of("responses_chat", messages_or_prompt)
    )
    for name, value in (
        ("temperature", temperature),
        ("top_p", top_p),
        ("max_output_tokens", max_tokens),
    ):
        if value is not None:
            kwargs[name] = value
    if tools:
        kwargs["tools"] = responses_tools(tools)
    if isinstance(tool_choice, str):
        kwargs["tool_choice"] = tool_choice
    if schema is not None:
        from lab.agents.structured import compact_grammar_for, response_format_for

        if compact:
            extra_body["structured_outputs"] = {"grammar": compact_grammar_for(schema)}
        else:
            fmt = response_format_for(schema)["json_schema"]
            kwargs["text"] = {"format": {"type": "json_schema", **fmt}}
    kwargs["extra_body"] = extra_body
    kwargs.update(create_kwargs)
    response = send(openai, client, client.responses.create, "/v1/responses", kwargs)
    return check_responses_reply(response, max_output_tokens=max_tokens)


def check_responses_reply(response: Any, *, max_output_tokens: int | None = None) -> ChatResult:
    """What ``client.responses.create`` returned, read (:func:`parse_responses_reply`) and
    checked (:func:`warn_if_reasoning_cut`; ``max_output_tokens``: what was sent, tokens)."""
    result = parse_responses_reply(response)
    return warn_if_reasoning_cut(result, max_output_tokens, "max_output_tokens")


def _settings(
    fn: str,
    model: Any,
    thinking: Any,
    tools: Any,
    tool_choice: Any,
    create_kwargs: dict[str, Any],
    schema: Any,
) -> dict[str, Any]:
    """``extra_body`` with ``enable_thinking`` for one turn (popped from ``create_kwargs``),
    after the checks.

    Refused by name: ``stream=True`` (the parser would read the event stream as an empty
    turn), and a schema with forced tools (vllm-project/vllm #32006; 0.32.0's
    ``check_structured_outputs_count`` refuses a schema with a named tool choice).
    """
    if not isinstance(model, str) or not model:
        raise TypeError(f"{fn}: `model` must be the served model name; got {model!r:.60}.")
    if not isinstance(thinking, bool):
        raise TypeError(f"{fn}: `thinking` must be True or False; got {thinking!r:.60}.")
    forced = bool(tools) and (tool_choice == "required" or isinstance(tool_choice, Mapping))
    if schema is not None and forced:
        raise TypeError(
            f"{fn}: a `schema` answer with tool_choice={tool_choice!r} is not sent: vLLM "
            "has crashed on structured outputs with forced tools (vllm-project/vllm #32006). "
            "Run the tools first (tool_choice='auto'), then ask for the schema answer."
        )
    if create_kwargs.get("stream"):
        raise TypeError(
            f"{fn}: stream=True is not supported here (the reply would read as empty while the "
            "server generates the whole answer). Send without stream, or stream on chat "
            "completions (client.chat.completions.create(..., stream=True), checked by "
            "helpers.chat.stream.check_stream)."
        )
    extra_body = dict(create_kwargs.pop("extra_body", None) or {})
    extra_body.setdefault("chat_template_kwargs", {})["enable_thinking"] = thinking
    return extra_body


def warn_if_reasoning_cut(result: ChatResult, max_tokens: int | None, field: str) -> ChatResult:
    """``result``, with a :class:`~helpers.chat.types.ReasoningTruncatedWarning` (also on
    ``result.warnings``) when it ended at the token limit with no answer and no tool call.
    ``max_tokens``: what was sent (None: the server's limit); ``field``: the API's name for it.
    """
    if result.finish_reason == "length" and not result.content.strip() and not result.tool_calls:
        limit = f"{field}={max_tokens}" if max_tokens is not None else "the server's token limit"
        _warn(
            result,
            ReasoningTruncatedWarning,
            f"The model used all {limit} while still reasoning, so there is no answer "
            f"({len(result.reasoning)} characters of reasoning, no text). Reasoning tokens count "
            f"against {field}. Fix: raise {field}, or pass thinking=False.",
        )
    return result


def parse_responses_reply(response: Any) -> ChatResult:
    """A Responses API ``Response`` (SDK object or its JSON dict) as a ChatResult:
    ``reasoning`` from the reasoning items, ``content`` from the ``output_text`` parts,
    ``tool_calls`` from the ``function_call`` items (``id``: the ``call_id``),
    ``finish_reason`` ``"length"`` (``status="incomplete"``), ``"tool_calls"`` or ``"stop"``,
    ``usage`` with reasoning tokens, ``raw`` the response."""
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[ToolCall] = []
    for item in _get(response, "output") or []:
        kind = _get(item, "type")
        if kind == "reasoning":
            parts = _get(item, "content") or _get(item, "summary") or []
            reasoning.extend(_get(p, "text") or "" for p in parts)
        elif kind == "message":
            for part in _get(item, "content") or []:
                if _get(part, "type") == "output_text":
                    content.append(_get(part, "text") or "")
        elif kind == "function_call":
            calls.append(
                ToolCall.from_raw(
                    _get(item, "call_id") or _get(item, "id"),
                    _get(item, "name"),
                    _get(item, "arguments"),
                )
            )
    status = _get(response, "status")
    if status == "incomplete":
        why = _get(_get(response, "incomplete_details"), "reason")
        finish = "length" if why in (None, "max_output_tokens") else str(why)
    else:
        finish = "tool_calls" if calls else "stop"
    usage = _get(response, "usage")
    details = _get(usage, "output_tokens_details")
    return ChatResult(
        reasoning="".join(reasoning),
        content="".join(content),
        tool_calls=calls,
        finish_reason=finish,
        usage=Usage(
            prompt_tokens=_get(usage, "input_tokens") or 0,
            completion_tokens=_get(usage, "output_tokens") or 0,
            reasoning_tokens=_get(details, "reasoning_tokens"),
        ),
        raw=response,
    )


# ─── Anthropic Messages API ───────────────────────────────────────────────────────────


def make_anthropic_client(base_url: str, timeout: float = 600, api_key: str = "EMPTY"):
    """An ``anthropic.Anthropic`` client for a vLLM server's ``/v1/messages``, with no
    retries (a failing server shows its error at once).

    Args:
        base_url: ``http://host:port`` or ``http://host:port/v1`` (the SDK adds ``/v1``
            itself, so a trailing ``/v1`` is dropped).
        timeout: seconds per request.
        api_key: the server's ``--api-key`` (any string when it was launched without one).

    Raises:
        TypeError: ``base_url`` is not a string.
        CookbookError (ResponseError): the ``anthropic`` package is not installed
            (``pip install -r requirements.txt``).
    """
    if not isinstance(base_url, str):
        raise TypeError(
            f"make_anthropic_client: `base_url` must be a URL string like "
            f"'http://127.0.0.1:8000'; got {type(base_url).__name__} (pass srv.base_url)."
        )
    try:
        import anthropic
    except ImportError:
        raise ResponseError(
            "The anthropic SDK is not installed: `pip install -r requirements.txt` (it pins "
            "anthropic)."
        ) from None
    root = server_root(base_url.strip())
    return anthropic.Anthropic(base_url=root, api_key=api_key, timeout=timeout, max_retries=0)


_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}


def messages_chat(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    *,
    max_tokens: int | None = None,
    thinking: bool = True,
    temperature: float | None = None,
    top_p: float | None = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | None = None,
    schema: type | None = None,
    **create_kwargs: Any,
) -> ChatResult:
    """One turn on the Anthropic Messages API (``client.messages.create``), as a ChatResult.

    Args:
        client: from :func:`make_anthropic_client`.
        model: the served model name.
        messages_or_prompt: a prompt string, or ``{"role", "content": str}`` messages (a
            ``system`` message becomes the top-level ``system``).
        max_tokens: tokens, required: the Messages API has no default.
        thinking: sent as ``chat_template_kwargs.enable_thinking``.
        temperature, top_p: sampling, sent in the body (the SDK's typed call lacks them;
            ``None``: not sent).
        tools: chat-completions function tools (:func:`messages_tools`).
        tool_choice: ``"auto"``, ``"required"`` (sent as ``any``) or ``"none"``.
        schema: a pydantic model class, sent as ``output_config={"format": {"type":
            "json_schema", ...}}`` (vLLM 0.32.0 ``_handle_output_config`` maps it to
            ``response_format``). No compact mode: ``AnthropicMessagesRequest`` ignores a
            ``structured_outputs`` field (measured: unconstrained, HTTP 200). Validate with
            :func:`lab.agents.structured.validate_answer`.
        **create_kwargs: more ``client.messages.create`` keywords (``extra_body`` merged).

    Returns:
        A :class:`~helpers.chat.types.ChatResult` (:func:`parse_messages_reply`).

    Raises:
        TypeError / ValueError: a bad argument, or no ``max_tokens``.
        ServerConnectionError: nothing answers at the client's URL.
        ServerRequestError: the server failed the request (HTTP 5xx).
        ResponseError: the server refused the request (HTTP 4xx; its words quoted).
    """
    import anthropic

    if not hasattr(getattr(client, "messages", None), "create"):
        raise TypeError(
            "messages_chat: `client` must be an anthropic.Anthropic client: "
            f"make_anthropic_client(url); got {type(client).__name__}."
        )
    extra_body = _settings(
        "messages_chat", model, thinking, tools, tool_choice, create_kwargs, schema
    )
    if max_tokens is None:
        raise ValueError(
            "messages_chat: the Messages API requires max_tokens (tokens): pass max_tokens=..."
        )
    messages = _messages_of("messages_chat", messages_or_prompt)
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    kwargs: dict[str, Any] = dict(
        model=model,
        max_tokens=max_tokens,
        messages=[m for m in messages if m["role"] != "system"],
    )
    if system:
        kwargs["system"] = system
    if schema is not None:
        from lab.agents.structured import response_format_for

        fmt = response_format_for(schema)["json_schema"]["schema"]
        kwargs["output_config"] = {"format": {"type": "json_schema", "schema": fmt}}
    if tools:
        kwargs["tools"] = messages_tools(tools)
    if isinstance(tool_choice, str):
        kwargs["tool_choice"] = {"type": {"required": "any"}.get(tool_choice, tool_choice)}
    # anthropic 2.15's typed Messages.create has no temperature / top_p; vLLM 0.32.0's
    # AnthropicMessagesRequest still reads both, so they go in the body.
    for name, value in (("temperature", temperature), ("top_p", top_p)):
        if value is not None:
            extra_body.setdefault(name, value)
    kwargs["extra_body"] = extra_body
    kwargs.update(create_kwargs)
    message = send(anthropic, client, client.messages.create, "/v1/messages", kwargs)
    return check_messages_reply(message, max_tokens=max_tokens)


def check_messages_reply(message: Any, *, max_tokens: int | None = None) -> ChatResult:
    """What ``client.messages.create`` returned, read (:func:`parse_messages_reply`) and
    checked (:func:`warn_if_reasoning_cut`; ``max_tokens``: what was sent, tokens)."""
    return warn_if_reasoning_cut(parse_messages_reply(message), max_tokens, "max_tokens")


def parse_messages_reply(message: Any) -> ChatResult:
    """An Anthropic ``Message`` (SDK object or its JSON dict) as a ChatResult: ``reasoning``
    from ``thinking`` blocks (vLLM 0.32.0 gives each a random ``signature``), ``content``
    from ``text`` blocks, ``tool_calls`` from ``tool_use`` blocks (their ``input`` comes
    JSON-decoded; it is re-encoded as ``arguments``), ``finish_reason`` from ``stop_reason``
    (``end_turn`` -> ``"stop"``, ``max_tokens`` -> ``"length"``, ``tool_use`` ->
    ``"tool_calls"``), ``usage`` without a reasoning count (the Messages API has none),
    ``raw`` the message."""
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[ToolCall] = []
    for block in _get(message, "content") or []:
        kind = _get(block, "type")
        if kind == "thinking":
            reasoning.append(_get(block, "thinking") or "")
        elif kind == "text":
            content.append(_get(block, "text") or "")
        elif kind == "tool_use":
            args = _get(block, "input")
            raw = json.dumps(args) if args is not None else ""
            calls.append(ToolCall.from_raw(_get(block, "id"), _get(block, "name"), raw))
    stop = _get(message, "stop_reason")
    usage = _get(message, "usage")
    return ChatResult(
        reasoning="".join(reasoning),
        content="".join(content),
        tool_calls=calls,
        finish_reason=_STOP.get(stop, stop),
        usage=Usage(
            prompt_tokens=_get(usage, "input_tokens") or 0,
            completion_tokens=_get(usage, "output_tokens") or 0,
        ),
        raw=message,
    )
