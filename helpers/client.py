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

Facts from vLLM 0.32's source that shape this module (``vllm/parser/nemotron_v3.py``,
``vllm/parser/qwen3.py``, ``vllm/entrypoints/openai/chat_completion/serving.py``):

- Reasoning tokens count against ``max_tokens``. A request that runs out while the model
  is still reasoning ends with ``finish_reason="length"`` and empty content
  (:class:`ReasoningTruncatedWarning`).
- With ``enable_thinking=False`` or ``force_nonempty_content=True``, when the answer
  would be empty the nemotron_v3 parser moves the reasoning into ``content`` (streaming:
  the last delta repeats the streamed reasoning as content). So with
  ``force_nonempty_content`` a length-truncated reply has content that is really
  unfinished reasoning; :class:`ChatResult` flags it the same way.
- ``qwen3_coder`` converts parameter values to the types in the tool's JSON schema
  (``"3"`` becomes ``3`` for an ``integer`` parameter); values of parameters without a
  schema type stay strings.
- The first content after ``</think>`` keeps its leading newline (``"\\nParis..."``);
  :attr:`ChatResult.content` keeps the server's text as is, :func:`show` trims it.
"""

from __future__ import annotations

import inspect
import json
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from helpers.errors import ResponseError

# Sampling and length defaults: seed 004 ("Recommended sampling settings are a temperature
# of 1.0 and top_p of 0.95"; every example uses max_tokens=16000).
DEFAULT_MAX_TOKENS = 16000
DEFAULT_TEMPERATURE = 1.0
DEFAULT_TOP_P = 0.95

# Server flags named in error and warning messages (seeds 002/004, vLLM 0.32 parser names).
REASONING_PARSER_FLAGS = "--reasoning-parser nemotron_v3"
TOOL_PARSER_FLAGS = "--enable-auto-tool-choice --tool-call-parser qwen3_coder"

THINK_START = "<think>"
THINK_END = "</think>"
# Markup of the qwen3_coder tool-call format (vllm/parser/qwen3.py).
TOOL_MARKUP = ("<tool_call>", "<function=")


class ReasoningTruncatedWarning(UserWarning):
    """``max_tokens`` ran out while the model was still reasoning: there is no answer."""


class ReasoningParserMissingWarning(UserWarning):
    """The server returned reasoning inside ``content``: it runs without a reasoning parser."""


# ─── results ──────────────────────────────────────────────────────────────────────────


@dataclass
class ToolCall:
    """One tool call the model asked for.

    Attributes:
        id: the server's call id (``chatcmpl-tool-...``); a ``role="tool"`` reply quotes it.
        name: function name.
        arguments: the parsed JSON arguments (``{}`` when they could not be parsed).
        raw_arguments: the JSON string exactly as the server sent it.
        error: why ``raw_arguments`` is not a JSON object, or ``None``.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str = ""
    error: str | None = None

    @classmethod
    def from_raw(cls, id: str | None, name: str | None, raw_arguments: str | None) -> ToolCall:
        raw = raw_arguments or ""
        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as e:
            return cls(id or "", name or "", {}, raw, f"arguments are not valid JSON ({e})")
        if not isinstance(args, dict):
            return cls(id or "", name or "", {}, raw, "arguments are JSON but not an object")
        return cls(id or "", name or "", args, raw, None)

    def to_message_dict(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry for this call (to send the turn back)."""
        raw = self.raw_arguments if self.error is None and self.raw_arguments else None
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": raw or json.dumps(self.arguments)},
        }


@dataclass
class Usage:
    """Token counts of one response (tokens, not characters).

    ``reasoning_tokens`` comes from ``usage.completion_tokens_details.reasoning_tokens``,
    which vLLM 0.32 reports only when launched with ``--reasoning-parser``; else ``None``.
    Reasoning tokens are part of ``completion_tokens``.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def from_raw(cls, usage: Any) -> Usage:
        if usage is None:
            return cls()
        details = _get(usage, "completion_tokens_details")
        reasoning = _get(details, "reasoning_tokens") if details is not None else None
        return cls(
            prompt_tokens=_get(usage, "prompt_tokens") or 0,
            completion_tokens=_get(usage, "completion_tokens") or 0,
            reasoning_tokens=reasoning,
        )

    def __add__(self, other: Usage) -> Usage:
        r = None
        if self.reasoning_tokens is not None or other.reasoning_tokens is not None:
            r = (self.reasoning_tokens or 0) + (other.reasoning_tokens or 0)
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            r,
        )


@dataclass
class ChatResult:
    """One assistant turn, parsed.

    Attributes:
        reasoning: the model's thinking (``""`` when off or absent).
        content: the answer, as the server sent it (``""`` when absent).
        tool_calls: parsed tool calls, in the order the model made them.
        finish_reason: ``"stop"``, ``"length"`` (hit ``max_tokens``), ``"tool_calls"``...
        usage: token counts.
        raw: the SDK response object (a ``ChatCompletion``), or the list of stream chunks.
        truncated_in_reasoning: ``max_tokens`` ran out before the model finished
            reasoning, so there is no real answer (see :class:`ReasoningTruncatedWarning`).
        reasoning_parser_missing: the reasoning was found in ``content`` and split off here
            (see :class:`ReasoningParserMissingWarning`).
        warnings: the text of every warning raised while parsing this turn.
    """

    reasoning: str = ""
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    raw: Any = None
    truncated_in_reasoning: bool = False
    reasoning_parser_missing: bool = False
    warnings: list[str] = field(default_factory=list)

    def to_message(self, include_reasoning: bool = True) -> dict[str, Any]:
        """This turn as an assistant message to append to ``messages``.

        vLLM hands ``reasoning`` to the chat template (as ``reasoning`` and
        ``reasoning_content``; ``vllm/renderers/chat_utils.py``); the Nemotron template
        decides whether to render it, e.g. for the tool-calling turns of the current
        question. ``include_reasoning=False`` leaves it out.
        """
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if include_reasoning and self.reasoning:
            msg["reasoning"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [tc.to_message_dict() for tc in self.tool_calls]
        return msg


# ─── client and request ───────────────────────────────────────────────────────────────


def make_client(base_url: str, api_key: str = "EMPTY", timeout: float = 600, max_retries: int = 0):
    """An ``openai.OpenAI`` client for a vLLM server.

    Args:
        base_url: ``http://host:port`` or ``http://host:port/v1`` (``/v1`` is added if
            missing).
        api_key: vLLM accepts any key unless launched with ``--api-key`` (seed 004 uses
            ``"EMPTY"``).
        timeout: seconds per HTTP request; reasoning at 16k tokens on a slow box is long.
        max_retries: SDK retries; 0 so a failing server shows its error at once.
    """
    import openai

    url = base_url.rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    return openai.OpenAI(base_url=url, api_key=api_key, timeout=timeout, max_retries=max_retries)


def as_messages(messages_or_prompt: str | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A prompt string becomes ``[{"role": "user", "content": prompt}]``; a list is copied."""
    if isinstance(messages_or_prompt, str):
        return [{"role": "user", "content": messages_or_prompt}]
    return [dict(m) for m in messages_or_prompt]


def build_request(
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    *,
    thinking: bool = True,
    max_tokens: int = DEFAULT_MAX_TOKENS,
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
        max_tokens: cap on reasoning + answer tokens together.
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
        if reasoning_budget >= max_tokens:
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
        "max_tokens": max_tokens,
        "temperature": temperature,
        "top_p": top_p,
    }
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


# ─── parsing a response ───────────────────────────────────────────────────────────────


def _get(obj: Any, name: str) -> Any:
    """Attribute of an SDK object (extra fields included) or key of a dict."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


def _reasoning_of(message: Any) -> str:
    """``reasoning`` (vLLM >= 0.10), else ``reasoning_content`` (older vLLM)."""
    return _get(message, "reasoning") or _get(message, "reasoning_content") or ""


def _warn(result: ChatResult, category: type[Warning], text: str) -> None:
    """Record ``text`` on the result and warn, pointing at the first caller outside this
    module (the notebook cell or test), however deep the helper chain was."""
    result.warnings.append(text)
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_code.co_filename == __file__:
        frame, level = frame.f_back, level + 1
    warnings.warn(text, category, stacklevel=level)


def _finish(
    result: ChatResult,
    *,
    thinking: bool,
    force_nonempty_content: bool,
    max_tokens: int | None,
    tools_requested: bool = True,
) -> ChatResult:
    """The checks shared by streamed and non-streamed turns (see the module docstring)."""
    content = result.content
    # 1. Reasoning inside content: server launched without --reasoning-parser.
    if not result.reasoning and THINK_END in content:
        before, _, after = content.partition(THINK_END)
        before = before.strip()
        if before.startswith(THINK_START):
            before = before[len(THINK_START) :].strip()
        result.reasoning, result.content = before, after.lstrip("\n")
        result.reasoning_parser_missing = True
        _warn(
            result,
            ReasoningParserMissingWarning,
            "The server returned the model's reasoning inside `content` (ended by a lone "
            "</think>): it runs without a reasoning parser. The helper split it into "
            "`reasoning` and `content`; restart vLLM with "
            f"`{REASONING_PARSER_FLAGS}` so the server does this (and so "
            "`thinking_token_budget` works).",
        )
    elif (
        thinking
        and not result.reasoning
        and not force_nonempty_content
        and result.finish_reason == "length"
        and content.strip()
        and not result.tool_calls
        and result.usage.reasoning_tokens is None
        and not content.lstrip().startswith(THINK_START)
    ):
        # Cut at max_tokens before any </think>, and no reasoning_tokens in usage (vLLM
        # reports them only with a reasoning parser): the template opened <think> in the
        # prompt, so this text is unfinished reasoning.
        result.reasoning, result.content = content.strip(), ""
        result.reasoning_parser_missing = True
        _warn(
            result,
            ReasoningParserMissingWarning,
            "The server runs without a reasoning parser (usage has no reasoning_tokens) and "
            "the reply was cut at max_tokens before </think>: the text in `content` is "
            "unfinished reasoning, moved to `reasoning` by the helper. Restart vLLM with "
            f"`{REASONING_PARSER_FLAGS}`.",
        )
    elif not result.reasoning and content.lstrip().startswith(THINK_START):
        # An opened, never-closed think block: all of it is reasoning.
        result.reasoning = content.lstrip()[len(THINK_START) :].strip()
        result.content = ""
        result.reasoning_parser_missing = True
        _warn(
            result,
            ReasoningParserMissingWarning,
            "The server returned an unclosed <think> block inside `content`: it runs without "
            f"a reasoning parser. Restart vLLM with `{REASONING_PARSER_FLAGS}`.",
        )

    # 2. Tool-call markup the server did not parse (only an error when tools were offered:
    #    with tool_choice="none" or no tools, vLLM does not parse calls by design).
    if tools_requested and not result.tool_calls and any(m in result.content for m in TOOL_MARKUP):
        err = ResponseError(
            "The model wrote tool-call markup (<tool_call>/<function=...>) in `content` but "
            "the server returned no `tool_calls`: its tool parser is not configured for "
            f"Nemotron. Restart vLLM with `{TOOL_PARSER_FLAGS}` (another parser, e.g. "
            "hermes, leaves this XML format in content)."
        )
        err.result = result  # type: ignore[attr-defined]
        raise err

    # 3. max_tokens ran out during reasoning. With force_nonempty_content (or thinking
    #    off) nemotron_v3 moves unfinished reasoning into content, so "reasoning empty,
    #    content set, no </think> ever seen" is the same situation.
    if thinking and result.finish_reason == "length" and not result.tool_calls:
        no_answer = not result.content.strip()
        # When the server counts reasoning tokens, "all of them were reasoning" confirms it.
        counted = result.usage.reasoning_tokens
        moved = (
            force_nonempty_content
            and not result.reasoning
            and not result.reasoning_parser_missing
            and bool(result.content.strip())
            and (counted is None or counted >= result.usage.completion_tokens)
        )
        if no_answer or moved:
            result.truncated_in_reasoning = True
            where = (
                "`content` holds the unfinished reasoning (the nemotron_v3 parser moves it "
                "there when force_nonempty_content=True)"
                if moved
                else "`content` is empty"
            )
            limit = f"max_tokens={max_tokens}" if max_tokens is not None else "max_tokens"
            _warn(
                result,
                ReasoningTruncatedWarning,
                f"The model used all {limit} while still reasoning, so there is no answer: "
                f"{where}. Reasoning tokens count against max_tokens. Fix: raise max_tokens, "
                "set reasoning_budget=N (sent as thinking_token_budget, N below max_tokens), "
                "or pass thinking=False.",
            )
    return result


def parse_response(
    response: Any,
    *,
    thinking: bool = True,
    force_nonempty_content: bool = False,
    max_tokens: int | None = None,
    tools_requested: bool = True,
) -> ChatResult:
    """Turn a ``ChatCompletion`` (SDK object or its JSON dict) into a :class:`ChatResult`.

    Args:
        thinking, force_nonempty_content, max_tokens: what the request asked for; they
            decide the truncation check and its message.
        tools_requested: the request offered tools (and not ``tool_choice="none"``);
            only then is unparsed tool-call markup an error.

    Raises:
        ResponseError: tool-call markup in ``content`` with no ``tool_calls`` (the server
            lacks ``--enable-auto-tool-choice --tool-call-parser qwen3_coder``), or a
            response with no choices.

    Warns:
        ReasoningTruncatedWarning, ReasoningParserMissingWarning (see their docs).
    """
    choices = _get(response, "choices") or []
    if not choices:
        raise ResponseError(
            "The server's response has no choices; check the server log for the error "
            "(helpers.server keeps it) and retry."
        )
    choice = choices[0]
    message = _get(choice, "message")
    tool_calls = [
        ToolCall.from_raw(
            _get(tc, "id"),
            _get(_get(tc, "function"), "name"),
            _get(_get(tc, "function"), "arguments"),
        )
        for tc in (_get(message, "tool_calls") or [])
    ]
    result = ChatResult(
        reasoning=_reasoning_of(message),
        content=_get(message, "content") or "",
        tool_calls=tool_calls,
        finish_reason=_get(choice, "finish_reason"),
        usage=Usage.from_raw(_get(response, "usage")),
        raw=response,
    )
    return _finish(
        result,
        thinking=thinking,
        force_nonempty_content=force_nonempty_content,
        max_tokens=max_tokens,
        tools_requested=tools_requested,
    )


# ─── chat ─────────────────────────────────────────────────────────────────────────────


def _create(client: Any, kwargs: dict[str, Any]) -> Any:
    """``client.chat.completions.create`` with vLLM's parser-missing 400s turned into
    :class:`ResponseError` s naming the flags."""
    import openai

    try:
        return client.chat.completions.create(**kwargs)
    except openai.BadRequestError as e:
        text = str(e)
        if "thinking_token_budget" in text:
            raise ResponseError(
                "The server rejected `thinking_token_budget`: it was launched without a "
                f"reasoning parser. Restart vLLM with `{REASONING_PARSER_FLAGS}`, or call "
                "with budget_method='two_pass'. Server said: " + text
            ) from e
        if "tool choice requires" in text or "requires --tool-call-parser" in text:
            # vllm/renderers/online_renderer.py: tools sent to a server without a parser.
            raise ResponseError(
                "The server refused the tools: it was launched without tool calling. "
                f"Restart vLLM with `{TOOL_PARSER_FLAGS}`. Server said: " + text
            ) from e
        raise


def chat(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    *,
    thinking: bool = True,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    reasoning_budget: int | None = None,
    budget_method: str = "server",
    temperature: float = DEFAULT_TEMPERATURE,
    top_p: float = DEFAULT_TOP_P,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    force_nonempty_content: bool = False,
    **extra: Any,
) -> ChatResult:
    """Send one chat request and parse the reply.

    Args:
        client: from :func:`make_client`.
        model: the served model name (the ``--model`` / ``--served-model-name`` value).
        messages_or_prompt: a user prompt string, or OpenAI-format messages.
        thinking: reasoning on (default, as the model card) or off.
        max_tokens: cap on reasoning + answer tokens (seed 004 uses 16000).
        reasoning_budget: cap on reasoning tokens (see ``budget_method``).
        budget_method: ``"server"`` sends ``thinking_token_budget`` (vLLM >= 0.32 with
            ``--reasoning-parser``: the server forces ``</think>`` itself; on the CPU
            stand-in a budget of N gave N-1 reasoning tokens, the forced end taking one).
            ``"two_pass"`` is for older servers, which ignore that field: a first request
            reasons with ``max_tokens=reasoning_budget``; if it was cut off, a second
            request continues an assistant message holding the closed think block
            (``continue_final_message=True``, ``add_generation_prompt=False``). It relies
            on the chat template rendering a final assistant message's
            ``<think>...</think>`` as given, which Qwen3/Nemotron-style templates do.
        temperature, top_p: seed 004's recommended 1.0 / 0.95.
        tools, tool_choice: OpenAI function tools (see :func:`tool_schema`).
        force_nonempty_content: seed 004's advice for coding agents.
        **extra: ``extra_body=`` and other ``chat.completions.create`` arguments.

    Returns:
        A :class:`ChatResult`.

    Raises:
        ResponseError: unparsed tool-call markup (names the tool-parser flags), a budget
            the server rejects (names ``--reasoning-parser nemotron_v3``).
        ValueError: a bad ``reasoning_budget`` or ``budget_method``.
        openai.APIError: any other HTTP failure, unchanged.

    Warns:
        ReasoningTruncatedWarning: thinking on, ``finish_reason == "length"``, no answer.
        ReasoningParserMissingWarning: reasoning found in ``content`` and split off.
    """
    if budget_method not in ("server", "two_pass"):
        raise ValueError(f"budget_method={budget_method!r}: use 'server' or 'two_pass'.")
    common = dict(
        thinking=thinking,
        temperature=temperature,
        top_p=top_p,
        tools=tools,
        tool_choice=tool_choice,
        force_nonempty_content=force_nonempty_content,
        **extra,
    )
    if reasoning_budget is not None and budget_method == "two_pass" and thinking:
        return _chat_two_pass(
            client, model, messages_or_prompt, max_tokens, reasoning_budget, common
        )
    kwargs = build_request(
        model,
        messages_or_prompt,
        max_tokens=max_tokens,
        reasoning_budget=reasoning_budget,
        **common,
    )
    return parse_response(
        _create(client, kwargs),
        thinking=thinking,
        force_nonempty_content=force_nonempty_content,
        max_tokens=max_tokens,
        tools_requested=bool(tools) and tool_choice != "none",
    )


def _chat_two_pass(
    client: Any,
    model: str,
    messages_or_prompt: Any,
    max_tokens: int,
    budget: int,
    common: dict[str, Any],
) -> ChatResult:
    """Client-side reasoning budget for servers without ``thinking_token_budget``."""
    build_request(
        model, messages_or_prompt, max_tokens=max_tokens, reasoning_budget=budget
    )  # checks
    messages = as_messages(messages_or_prompt)
    tools_requested = bool(common.get("tools")) and common.get("tool_choice") != "none"
    with warnings.catch_warnings():
        # Running out at the budget is the point of pass 1; don't warn about it.
        warnings.simplefilter("ignore", ReasoningTruncatedWarning)
        first = parse_response(
            _create(client, build_request(model, messages, max_tokens=budget, **common)),
            thinking=True,
            max_tokens=budget,
            tools_requested=tools_requested,
        )
    if first.finish_reason != "length" or first.tool_calls or first.content.strip():
        # Reasoning ended inside the budget (answer possibly cut at the budget: then the
        # caller sees finish_reason="length" with content, as with any max_tokens).
        first.warnings = [w for w in first.warnings if "while still reasoning" not in w]
        first.truncated_in_reasoning = False
        return first
    prefix = f"{THINK_START}\n{first.reasoning.rstrip()}\n{THINK_END}\n\n"
    extra_body = dict(common.get("extra_body") or {})
    extra_body.update(continue_final_message=True, add_generation_prompt=False)
    second_kwargs = build_request(
        model,
        messages + [{"role": "assistant", "content": prefix}],
        max_tokens=max(1, max_tokens - first.usage.completion_tokens),
        **{**common, "extra_body": extra_body},
    )
    second = parse_response(
        _create(client, second_kwargs),
        thinking=False,
        max_tokens=second_kwargs["max_tokens"],
        tools_requested=tools_requested,
    )
    return ChatResult(
        reasoning=first.reasoning,
        # The think block is closed in the prompt, so all new text is the answer; a
        # parser that still counts it as reasoning puts it in `reasoning`.
        content=second.content or second.reasoning,
        tool_calls=second.tool_calls,
        finish_reason=second.finish_reason,
        usage=first.usage + second.usage,
        raw=[first.raw, second.raw],
        reasoning_parser_missing=first.reasoning_parser_missing,
        warnings=first.warnings + second.warnings,
    )


# ─── streaming ────────────────────────────────────────────────────────────────────────


@dataclass
class ToolCallDelta:
    """A piece of a streamed tool call. ``id`` and ``name`` come in the first piece of
    each call (vLLM 0.32); ``arguments`` are JSON fragments to concatenate by ``index``."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class StreamEvent(NamedTuple):
    """``(kind, data)``: ``("reasoning", str)``, ``("content", str)`` or
    ``("tool_call", ToolCallDelta)``."""

    kind: str
    data: Any


class _Assembler:
    """Accumulates stream chunks into the parts of a :class:`ChatResult`."""

    def __init__(self) -> None:
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage = Usage()
        self.chunks: list[Any] = []

    def feed(self, chunk: Any) -> list[StreamEvent]:
        self.chunks.append(chunk)
        events: list[StreamEvent] = []
        if _get(chunk, "usage") is not None:
            self.usage = Usage.from_raw(_get(chunk, "usage"))
        for choice in _get(chunk, "choices") or []:
            if (_get(choice, "index") or 0) != 0:
                continue  # n > 1: only the first choice is assembled
            delta = _get(choice, "delta")
            text = _reasoning_of(delta)
            if text:
                self.reasoning.append(text)
                events.append(StreamEvent("reasoning", text))
            text = _get(delta, "content")
            if text:
                self.content.append(text)
                events.append(StreamEvent("content", text))
            for tc in _get(delta, "tool_calls") or []:
                fn = _get(tc, "function")
                d = ToolCallDelta(
                    index=_get(tc, "index") or 0,
                    id=_get(tc, "id"),
                    name=_get(fn, "name"),
                    arguments=_get(fn, "arguments") or "",
                )
                slot = self.calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = slot["id"] or d.id
                if d.name:
                    slot["name"] = d.name if not slot["name"] else slot["name"] + d.name
                slot["arguments"] += d.arguments
                events.append(StreamEvent("tool_call", d))
            if _get(choice, "finish_reason"):
                self.finish_reason = _get(choice, "finish_reason")
        return events

    def result(
        self,
        *,
        thinking: bool,
        force_nonempty_content: bool,
        max_tokens: int | None,
        tools_requested: bool,
    ) -> ChatResult:
        reasoning, content = "".join(self.reasoning), "".join(self.content)
        # nemotron_v3 streams unfinished reasoning as reasoning, then (thinking off or
        # force_nonempty_content) repeats it as content in the last delta; the
        # non-streamed reply has it only in content. Match that shape.
        if (
            (force_nonempty_content or not thinking)
            and reasoning
            and content.strip() == reasoning.strip()
        ):
            reasoning = ""
        result = ChatResult(
            reasoning=reasoning,
            content=content,
            tool_calls=[
                ToolCall.from_raw(s["id"], s["name"], s["arguments"])
                for _, s in sorted(self.calls.items())
            ],
            finish_reason=self.finish_reason,
            usage=self.usage,
            raw=self.chunks,
        )
        return _finish(
            result,
            thinking=thinking,
            force_nonempty_content=force_nonempty_content,
            max_tokens=max_tokens,
            tools_requested=tools_requested,
        )


class ChatStream:
    """Iterate for :class:`StreamEvent` s as they arrive; afterwards ``.result`` holds the
    assembled :class:`ChatResult` (same shape as :func:`chat`'s)."""

    def __init__(
        self,
        chunks: Iterable[Any],
        *,
        thinking: bool,
        force_nonempty_content: bool,
        max_tokens: int | None,
        tools_requested: bool = True,
    ):
        self._chunks = chunks
        self._opts = dict(
            thinking=thinking,
            force_nonempty_content=force_nonempty_content,
            max_tokens=max_tokens,
            tools_requested=tools_requested,
        )
        self._assembler = _Assembler()
        self._result: ChatResult | None = None
        self._started = False

    def __iter__(self) -> Iterator[StreamEvent]:
        if self._started:
            raise RuntimeError(
                "A ChatStream can be iterated once; read .result or call stream_chat again."
            )
        self._started = True
        for chunk in self._chunks:
            yield from self._assembler.feed(chunk)
        self._result = self._assembler.result(**self._opts)

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
    *,
    thinking: bool = True,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    reasoning_budget: int | None = None,
    temperature: float = DEFAULT_TEMPERATURE,
    top_p: float = DEFAULT_TOP_P,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    force_nonempty_content: bool = False,
    **extra: Any,
) -> ChatStream:
    """Streaming :func:`chat`: returns a :class:`ChatStream` of typed events.

    ``for kind, data in stream_chat(...)`` gives ``("reasoning", text)``,
    ``("content", text)`` and ``("tool_call", ToolCallDelta)`` as the server sends them;
    ``.result`` (or :func:`collect_stream`) gives the assembled :class:`ChatResult`,
    whose checks and warnings run when the stream ends. Arguments as :func:`chat`
    (the budget is the server's ``thinking_token_budget``; there is no two-pass stream).
    On a server without ``--reasoning-parser`` the reasoning streams as ``"content"``
    events; ``.result`` splits it at ``</think>`` as :func:`chat` does.

    Raises:
        ResponseError: see :func:`chat` (raised when the stream ends).
    """
    kwargs = build_request(
        model,
        messages_or_prompt,
        thinking=thinking,
        max_tokens=max_tokens,
        reasoning_budget=reasoning_budget,
        temperature=temperature,
        top_p=top_p,
        tools=tools,
        tool_choice=tool_choice,
        force_nonempty_content=force_nonempty_content,
        stream=True,
        **extra,
    )
    return ChatStream(
        _create(client, kwargs),
        thinking=thinking,
        force_nonempty_content=force_nonempty_content,
        max_tokens=max_tokens,
        tools_requested=bool(tools) and tool_choice != "none",
    )


def collect_stream(
    stream: ChatStream | Iterable[Any],
    *,
    thinking: bool = True,
    force_nonempty_content: bool = False,
    max_tokens: int | None = None,
    tools_requested: bool = True,
) -> ChatResult:
    """Reassemble a stream into a :class:`ChatResult`.

    Args:
        stream: a :class:`ChatStream` (its own settings are used), or any iterable of
            ``ChatCompletionChunk`` objects / chunk dicts (then pass what the request
            asked for, as in :func:`parse_response`).
    """
    if isinstance(stream, ChatStream):
        return stream.result
    return ChatStream(
        stream,
        thinking=thinking,
        force_nonempty_content=force_nonempty_content,
        max_tokens=max_tokens,
        tools_requested=tools_requested,
    ).result


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


# ─── tool loop ────────────────────────────────────────────────────────────────────────

_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def tool_schema(fn: Callable[..., Any], description: str | None = None) -> dict[str, Any]:
    """An OpenAI function-tool schema from a Python function's signature.

    Parameter types come from annotations (``str``, ``int``, ``float``, ``bool``,
    ``list``, ``dict``; anything else is left untyped), required = no default; the
    description is the docstring's first line unless given. qwen3_coder converts the
    model's values to these types.
    """
    props: dict[str, Any] = {}
    required: list[str] = []
    hints: dict[str, Any] = {}
    try:
        import typing

        hints = typing.get_type_hints(fn)
    except Exception:
        pass
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        t = _JSON_TYPES.get(hints.get(name, p.annotation))
        props[name] = {"type": t} if t else {}
        if p.default is p.empty:
            required.append(name)
    doc = (description or (inspect.getdoc(fn) or "").strip().split("\n")[0]) or fn.__name__
    return {
        "type": "function",
        "function": {
            "name": fn.__name__,
            "description": doc,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


@dataclass
class ToolRun:
    """One executed tool call: the call, what the function returned, the text sent back."""

    call: ToolCall
    output: Any
    message: dict[str, Any]


@dataclass
class ToolLoopResult:
    """Attributes:
    messages: the whole transcript (user, assistant turns with tool_calls, tool replies,
        final answer), ready to continue the conversation.
    final: the last :class:`ChatResult` (the answer).
    turns: every model turn in order (the last one is ``final``).
    tool_runs: every executed call in order.
    """

    messages: list[dict[str, Any]]
    final: ChatResult
    turns: list[ChatResult]
    tool_runs: list[ToolRun]


def _tool_output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


def run_tool_loop(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    tools: Mapping[str, Callable[..., Any]],
    tool_schemas: list[dict[str, Any]] | None = None,
    *,
    max_rounds: int = 5,
    **chat_kwargs: Any,
) -> ToolLoopResult:
    """Let the model call Python functions until it answers.

    Each round: :func:`chat` with the tools; every tool call in the reply (several when
    the model calls in parallel) runs ``tools[name](**arguments)``; each result goes back
    as ``{"role": "tool", "tool_call_id": id, "content": text}`` (non-strings as JSON);
    repeat until a reply has no tool calls.

    Args:
        tools: ``{name: function}``.
        tool_schemas: OpenAI function-tool schemas; default :func:`tool_schema` of each
            function.
        max_rounds: model turns allowed, the final answer included.
        **chat_kwargs: passed to :func:`chat` (``thinking``, ``max_tokens``...).

    Raises:
        ResponseError: the model called an unknown tool, sent arguments that are not a
            JSON object, or did not answer within ``max_rounds`` (each message names the
            fix); also :func:`chat`'s errors. Exceptions of the tool functions propagate.
    """
    schemas = tool_schemas if tool_schemas is not None else [tool_schema(f) for f in tools.values()]
    messages = as_messages(messages_or_prompt)
    turns: list[ChatResult] = []
    runs: list[ToolRun] = []
    for _ in range(max_rounds):
        result = chat(client, model, messages, tools=schemas, **chat_kwargs)
        turns.append(result)
        messages.append(result.to_message())
        if not result.tool_calls:
            return ToolLoopResult(messages, result, turns, runs)
        for call in result.tool_calls:
            if call.name not in tools:
                raise ResponseError(
                    f"The model called tool {call.name!r}, which is not in tools "
                    f"({sorted(tools)}). Pass a function under that name in `tools`, or "
                    "remove its schema from `tool_schemas`."
                )
            if call.error is not None:
                raise ResponseError(
                    f"The model's arguments for tool {call.name!r} cannot be used: "
                    f"{call.error}; raw arguments: {call.raw_arguments!r}. Retry, or raise "
                    "max_tokens if the reply was cut off (finish_reason="
                    f"{result.finish_reason!r})."
                )
            fn = tools[call.name]
            try:
                inspect.signature(fn).bind(**call.arguments)
            except TypeError as e:
                raise ResponseError(
                    f"The model called {call.name}({call.raw_arguments}), which does not fit "
                    f"the function's signature ({e}). Make the tool schema's parameters match "
                    "the function (helpers.client.tool_schema(fn) builds them from it)."
                ) from e
            except ValueError:  # no signature (some builtins): just call it
                pass
            output = fn(**call.arguments)
            reply = {"role": "tool", "tool_call_id": call.id, "content": _tool_output_text(output)}
            messages.append(reply)
            runs.append(ToolRun(call, output, reply))
    raise ResponseError(
        f"The model was still calling tools after max_rounds={max_rounds} turns. Raise "
        "max_rounds, or check the transcript for a tool whose output the model keeps "
        "retrying."
    )


# ─── printing ─────────────────────────────────────────────────────────────────────────


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


def show(result: ChatResult | ToolLoopResult, file: Any = None) -> None:
    """Print a :class:`ChatResult` (reasoning, answer, tool calls, usage, warnings) or a
    :class:`ToolLoopResult` (each turn and each tool reply), clearly labelled."""
    out = file or sys.stdout
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
        return
    _show_turn(result, out)


def budget_report(result: ChatResult, budget: int) -> str:
    """One line saying whether a ``thinking_token_budget`` request behaved as it should.

    Args:
        result: the reply to a request sent with ``reasoning_budget=budget``.
        budget: the ``thinking_token_budget`` it was sent with (tokens).

    Returns:
        ``"... N reasoning tokens (budget B), then an answer of M characters"`` when the
        reasoning stayed within the budget (vLLM may let one token through: the forced
        ``</think>``) and an answer followed; otherwise a line starting with ``"UNEXPECTED"``
        that says which part failed. The token count comes from
        ``usage.completion_tokens_details.reasoning_tokens`` (set when the server runs a
        ``--reasoning-parser``).
    """
    n = result.usage.reasoning_tokens
    problems = []
    if n is None:
        problems.append("the server reported no reasoning_tokens (is --reasoning-parser set?)")
    elif n > budget + 1:
        problems.append(f"{n} reasoning tokens exceed the budget of {budget}")
    if not result.content.strip():
        problems.append(f"no answer followed the reasoning (finish_reason={result.finish_reason!r})")
    if problems:
        return f"UNEXPECTED thinking_token_budget={budget}: " + "; ".join(problems)
    return (
        f"thinking_token_budget={budget}: {n} reasoning tokens (budget {budget}), then an answer "
        f"of {len(result.content.strip())} characters"
    )
