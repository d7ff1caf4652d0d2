"""The body of one chat request to vLLM, and the argument checks at the boundary.

:func:`build_request` turns the cookbook's arguments (thinking on/off, reasoning budget,
tools, streaming) into the keyword arguments of ``client.chat.completions.create``; the
``_check_*`` functions give a wrong argument one sentence naming it and the shape expected.
Sampling defaults come from seed 004.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from helpers.errors import check_number

# Sampling and length defaults: seed 004 ("Recommended sampling settings are a temperature
# of 1.0 and top_p of 0.95"; every example uses max_tokens=16000).
DEFAULT_MAX_TOKENS = 16000
DEFAULT_TEMPERATURE = 1.0
DEFAULT_TOP_P = 0.95


def as_messages(messages_or_prompt: str | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A prompt string becomes ``[{"role": "user", "content": prompt}]``; a list is copied.

    Raises:
        TypeError: neither a string nor a list of ``{"role": ..., "content": ...}`` dicts.
    """
    if isinstance(messages_or_prompt, str):
        return [{"role": "user", "content": messages_or_prompt}]
    shape = (
        "`messages_or_prompt` must be a prompt string or a list of message dicts like "
        '[{"role": "user", "content": "..."}]'
    )
    if isinstance(messages_or_prompt, (Mapping, bytes)) or not isinstance(
        messages_or_prompt, Iterable
    ):
        raise TypeError(f"{shape}; got {type(messages_or_prompt).__name__}.")
    out = []
    for i, m in enumerate(messages_or_prompt):
        if not isinstance(m, Mapping) or "role" not in m:
            raise TypeError(f"{shape}; item {i} is {m!r:.80}.")
        out.append(dict(m))
    return out


# ─── argument checks at the boundary (each names the argument and the shape) ─────────


def _check_client(fn: str, client: Any) -> None:
    if isinstance(client, str):
        raise TypeError(
            f"{fn}: `client` must be an OpenAI client, not the URL string {client!r}: pass "
            "helpers.server.endpoint.make_client(url)."
        )
    if not hasattr(getattr(client, "chat", None), "completions"):
        raise TypeError(
            f"{fn}: `client` must be an openai.OpenAI client (helpers.server.endpoint.make_client(url) "
            f"or srv.client()); got {type(client).__name__}."
        )


def _check_chat_args(
    fn: str,
    client: Any,
    model: Any,
    *,
    thinking: Any,
    max_tokens: Any,
    reasoning_budget: Any,
    temperature: Any,
    top_p: Any,
    tools: Any,
    recover_tool_calls: Any = False,
) -> None:
    _check_client(fn, client)
    if not isinstance(model, str) or not model:
        raise TypeError(
            f"{fn}: `model` must be the served model name (a string, e.g. srv.models()[0]); got "
            f"{type(model).__name__} {model!r:.60}."
        )
    for name, value in (("thinking", thinking), ("recover_tool_calls", recover_tool_calls)):
        if not isinstance(value, bool):
            raise TypeError(f"{fn}: `{name}` must be True or False; got {value!r:.60}.")
    check_number(fn, "max_tokens", max_tokens, integer=True, minimum=1, optional=True)
    check_number(fn, "reasoning_budget", reasoning_budget, integer=True, minimum=0, optional=True)
    check_number(fn, "temperature", temperature, minimum=0)
    check_number(fn, "top_p", top_p, minimum=0, exclusive=True)
    if tools is not None:
        if (
            isinstance(tools, Mapping)
            or not isinstance(tools, (list, tuple))
            or not all(isinstance(t, Mapping) and "function" in t for t in tools)
        ):
            raise TypeError(
                f"{fn}: `tools` must be a list of OpenAI function-tool schemas "
                '([{"type": "function", "function": {...}}], e.g. [tool_schema(fn)]); got '
                f"{tools!r:.100}. To let the model call Python functions, use "
                "run_tool_loop(client, model, prompt, {name: function})."
            )


def build_request(
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    *,
    thinking: bool = True,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    reasoning_budget: int | None = None,
    temperature: float = DEFAULT_TEMPERATURE,
    top_p: float = DEFAULT_TOP_P,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    force_nonempty_content: bool = False,
    stream: bool = False,
    extra_body: Mapping[str, Any] | None = None,
    **create_kwargs: Any,
) -> dict[str, Any]:
    """The keyword arguments :func:`chat` passes to ``client.chat.completions.create``.

    Args:
        thinking: sent as ``extra_body.chat_template_kwargs.enable_thinking`` (seed 004).
        max_tokens: cap on reasoning + answer tokens together; ``None`` sends none (vLLM
            then generates up to ``max_model_len`` minus the prompt).
        reasoning_budget: cap on reasoning tokens, sent as the vLLM request field
            ``thinking_token_budget`` (vLLM >= 0.32; the server needs
            ``--reasoning-parser``). Must be below ``max_tokens``.
        force_nonempty_content: sent as ``chat_template_kwargs.force_nonempty_content``;
            seed 004 advises it for coding agents.
        tools: OpenAI function-tool schemas; ``tool_choice`` defaults to the server's
            ``"auto"`` when tools are given.
        stream: adds ``stream=True`` and ``stream_options.include_usage`` (usage arrives in
            a last chunk with no choices).
        extra_body: more vLLM request fields (``top_k``, ``min_p``...); its
            ``chat_template_kwargs`` are merged with the ones set here.
        **create_kwargs: other SDK arguments (``seed``, ``stop``, ``n``...).

    Raises:
        ValueError: ``reasoning_budget`` is negative or not below ``max_tokens``.
    """
    if reasoning_budget is not None:
        if reasoning_budget < 0:
            raise ValueError(f"reasoning_budget={reasoning_budget}: pass a token count >= 0.")
        if max_tokens is not None and reasoning_budget >= max_tokens:
            raise ValueError(
                f"reasoning_budget={reasoning_budget} is not below max_tokens={max_tokens}: "
                "reasoning tokens count against max_tokens, so leave room for the answer "
                "(raise max_tokens or lower the budget)."
            )
    body: dict[str, Any] = dict(extra_body or {})
    template_kwargs = dict(body.pop("chat_template_kwargs", None) or {})
    template_kwargs["enable_thinking"] = bool(thinking)
    if force_nonempty_content:
        template_kwargs["force_nonempty_content"] = True
    body["chat_template_kwargs"] = template_kwargs
    if reasoning_budget is not None:
        body["thinking_token_budget"] = int(reasoning_budget)

    kwargs: dict[str, Any] = {
        "model": model,
        "messages": as_messages(messages_or_prompt),
        "temperature": temperature,
        "top_p": top_p,
    }
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    if tools:
        kwargs["tools"] = tools
    if tool_choice is not None:
        kwargs["tool_choice"] = tool_choice
    if stream:
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
    kwargs.update(create_kwargs)
    kwargs["extra_body"] = body
    return kwargs
