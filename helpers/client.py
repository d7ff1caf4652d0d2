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

Tool-call replies that are not what they look like (issue 14; each sets a flag on the
:class:`ChatResult`, warns, and makes :func:`run_tool_loop` stop with the transcript
instead of taking the turn as the answer):

- A complete call at the end of reasoning that never reached ``</think>``: vLLM 0.32's
  ``nemotron_v3`` parser (the parser engine) ends reasoning at ``<tool_call>``, but a
  reasoning parser that does not (``deepseek_r1`` in 0.32, the ``nemotron_v3`` reasoning
  parser of releases before the engine) keeps the call as reasoning and returns no
  ``tool_calls``. :class:`ToolCallInReasoningWarning`; ``recover_tool_calls=True`` parses
  it (qwen3_coder format) into a call.
- Cut by ``max_tokens`` inside a call. Three shapes, all flagged ``truncated_in_tool_call``
  (:class:`ToolCallTruncatedWarning`, "truncated inside a tool call: raise max_tokens"):
  ``finish_reason="length"`` with the unfinished markup in ``content`` (a tool parser that
  leaves it there); vLLM 0.32 not streamed, which parses the fragment into a call and
  reports ``finish_reason="tool_calls"`` (told by ``completion_tokens`` reaching
  ``max_tokens``); vLLM 0.32 streamed, ``"length"`` with the call's arguments unfinished
  or held back by the parser.
- ``finish_reason="tool_calls"`` with no call (vLLM 0.32 with ``tool_choice="required"``
  when nothing parses): :class:`ToolCallsMissingWarning`.
- Arguments are fitted to the tool's JSON schema (:mod:`helpers.toolargs`: jsonschema to
  find the misfits, pydantic to convert losslessly): ``"140.0"`` or ``140.0`` for an
  ``integer`` becomes ``140``; ``"140.5"`` stays, with a :class:`ToolArgumentWarning`.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from helpers.errors import CookbookError, ResponseError

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


class ToolCallInReasoningWarning(UserWarning):
    """A complete tool call sits at the end of the reasoning (the model never wrote
    ``</think>``) and the server returned no ``tool_calls``: its reasoning parser kept the
    call as reasoning. ``recover_tool_calls=True`` turns it into a call."""


class ToolCallTruncatedWarning(UserWarning):
    """``max_tokens`` ran out while the model was writing a tool call: no call is usable."""


class ToolCallsMissingWarning(UserWarning):
    """``finish_reason`` is ``"tool_calls"`` but the reply holds no tool call."""


class ToolArgumentWarning(UserWarning):
    """A tool-call argument does not fit the tool's JSON schema and could not be coerced."""


class ServerConnectionError(CookbookError, ConnectionError):
    """No vLLM OpenAI-compatible server answers at the client's URL (closed port, wrong
    URL, another HTTP server, timeout). The message names the URL and what to do."""


class ToolLoopError(ResponseError):
    """:func:`run_tool_loop` stopped. ``messages``, ``turns`` and ``tool_runs`` hold the
    conversation so far (the same attributes are set on any other error the loop lets
    through), so nothing is lost."""

    def __init__(self, message: str, messages=None, turns=None, tool_runs=None):
        super().__init__(message)
        self.messages = list(messages or [])
        self.turns = list(turns or [])
        self.tool_runs = list(tool_runs or [])


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
        tool_call_in_reasoning: the reasoning ends with a complete tool call that the
            server did not return as one (see :class:`ToolCallInReasoningWarning`); when
            recovered, the call is in ``tool_calls`` and its markup is gone from
            ``reasoning``.
        truncated_in_tool_call: ``max_tokens`` ran out inside a tool call; ``tool_calls``
            is empty and the unfinished markup or arguments are in ``tool_call_fragment``,
            not in ``content`` (see :class:`ToolCallTruncatedWarning`).
        tool_call_fragment: see ``truncated_in_tool_call``.
        tool_calls_missing: ``finish_reason == "tool_calls"`` with no tool call, so
            ``content`` is not a final answer (see :class:`ToolCallsMissingWarning`).
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
    tool_call_in_reasoning: bool = False
    truncated_in_tool_call: bool = False
    tool_call_fragment: str = ""
    tool_calls_missing: bool = False
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

    Raises:
        TypeError: ``base_url`` is not a string (e.g. a server object: pass
            ``srv.base_url``).
        ValueError: ``base_url`` is not an ``http(s)://`` URL.
    """
    import openai

    if not isinstance(base_url, str):
        hint = " (pass srv.base_url)" if hasattr(base_url, "base_url") else ""
        raise TypeError(
            f"make_client: `base_url` must be a URL string like 'http://127.0.0.1:8000'; got "
            f"{type(base_url).__name__}{hint}."
        )
    if not re.match(r"^https?://[^/\s]+", base_url.strip()):
        raise ValueError(
            f"make_client: `base_url`={base_url!r} is not a server URL: pass http://host:port "
            "(or http://host:port/v1)."
        )
    _check_number("make_client", "timeout", timeout, minimum=0, exclusive=True)
    url = base_url.strip().rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    return openai.OpenAI(base_url=url, api_key=api_key, timeout=timeout, max_retries=max_retries)


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


def _check_number(
    fn: str,
    name: str,
    value: Any,
    *,
    integer: bool = False,
    minimum: float | None = None,
    exclusive: bool = False,
    optional: bool = False,
) -> None:
    if value is None and optional:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an integer" if integer else "a number"
        raise TypeError(
            f"{fn}: `{name}` must be {what}{' or None' if optional else ''}; got "
            f"{type(value).__name__} {value!r:.60}."
        )
    if minimum is not None and (value <= minimum if exclusive else value < minimum):
        bound = f"> {minimum}" if exclusive else f">= {minimum}"
        raise ValueError(f"{fn}: `{name}`={value!r} must be {bound}.")


def _check_client(fn: str, client: Any) -> None:
    if isinstance(client, str):
        raise TypeError(
            f"{fn}: `client` must be an OpenAI client, not the URL string {client!r}: pass "
            "helpers.client.make_client(url)."
        )
    if not hasattr(getattr(client, "chat", None), "completions"):
        raise TypeError(
            f"{fn}: `client` must be an openai.OpenAI client (helpers.client.make_client(url) "
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
    _check_number(fn, "max_tokens", max_tokens, integer=True, minimum=1, optional=True)
    _check_number(fn, "reasoning_budget", reasoning_budget, integer=True, minimum=0, optional=True)
    _check_number(fn, "temperature", temperature, minimum=0)
    _check_number(fn, "top_p", top_p, minimum=0, exclusive=True)
    if tools is not None:
        if isinstance(tools, Mapping) or not isinstance(tools, (list, tuple)) or not all(
            isinstance(t, Mapping) and "function" in t for t in tools
        ):
            raise TypeError(
                f"{fn}: `tools` must be a list of OpenAI function-tool schemas "
                '([{"type": "function", "function": {...}}], e.g. [tool_schema(fn)]); got '
                f"{tools!r:.100}. To let the model call Python functions, use "
                "run_tool_loop(client, model, prompt, {name: function})."
            )


# ─── what the server allows (GET /v1/models) and how it fails ─────────────────────────

# Per client object, per base URL: {model id: max_model_len}. A new client (or a server
# restarted behind a new client) reads it again.
_LIMITS: weakref.WeakKeyDictionary[Any, dict[str, dict[str, int | None]]] = (
    weakref.WeakKeyDictionary()
)


def _client_url(client: Any) -> str:
    return str(getattr(client, "base_url", "") or "").rstrip("/")


def server_max_model_len(client: Any, model: str | None = None) -> int | None:
    """The server's ``max_model_len`` (tokens, prompt + output) for ``model``.

    vLLM lists it per model in ``GET /v1/models`` (``ModelCard.max_model_len``,
    ``vllm/entrypoints/openai/models/serving.py``, vLLM 0.32.0). Read once per client and
    base URL, then cached.

    Args:
        client: from :func:`make_client`.
        model: the served model name; ``None`` takes the first model listed.

    Returns:
        The limit in tokens, or ``None`` when the server does not report one (an
        OpenAI-compatible server that is not vLLM).

    Raises:
        ServerConnectionError: nothing answers at the client's URL, or what answers is not
            an OpenAI-compatible server (the message names the URL and the fix).
    """
    _check_client("server_max_model_len", client)
    try:
        cached = _LIMITS.setdefault(client, {}).setdefault(_client_url(client), {})
    except TypeError:  # a client object that cannot be weakly referenced: no cache
        cached = {}
    key = model or ""
    if key in cached:
        return cached[key]
    import openai

    try:
        listed = list(client.models.list())
    except openai.APIError as e:
        raise _translate_api_error(client, e, "GET /v1/models", model) from None
    limits = {}
    for m in listed:
        value = _get(m, "max_model_len")
        limits[_get(m, "id") or ""] = int(value) if isinstance(value, (int, float)) else None
    if model is not None and model in limits:
        cached[key] = limits[model]
    else:
        cached[key] = next(iter(limits.values()), None)
    return cached[key]


def _resolve_max_tokens(
    client: Any, model: str, max_tokens: int | None
) -> tuple[int | None, int | None]:
    """``(max_tokens to send, max_model_len or None)``.

    ``max_tokens=None`` means "the default that fits this server": seed 004's 16000 when
    the server's ``max_model_len`` is larger, else nothing is sent and vLLM generates up to
    the end of the context (``max_model_len`` minus the prompt; ``get_max_tokens`` in
    ``vllm/entrypoints/serve/utils/api_utils.py``, vLLM 0.32.0). An explicit value above
    ``max_model_len`` raises here, before the request (vLLM 0.32 answers it with HTTP 400
    "max_tokens=... cannot be greater than max_model_len=...").
    """
    if max_tokens is None:
        limit = server_max_model_len(client, model)
        if limit is None or limit > DEFAULT_MAX_TOKENS:
            return DEFAULT_MAX_TOKENS, limit
        return None, limit
    return max_tokens, None


def _max_tokens_error(limit: int, asked: Any, said: str = "") -> ResponseError:
    return ResponseError(
        f"max_tokens={asked} does not fit this server: its max_model_len is {limit} tokens "
        f"(prompt + output). Pass max_tokens below {limit} (or leave max_tokens unset: the "
        "helper then fits it to the server), or restart vLLM with a larger --max-model-len."
        + (f" Server said: {said}" if said else "")
    )


def _translate_api_error(client: Any, e: Exception, what: str, model: str | None) -> Exception:
    """One sentence naming the URL and the fix for HTTP-level failures (the wording of
    ``helpers.server.VLLMServer.attach``); other errors come back unchanged."""
    import openai

    url = _client_url(client)
    root = url[: -len("/v1")] if url.endswith("/v1") else url
    if isinstance(e, openai.APITimeoutError):
        return ServerConnectionError(
            f"The server at {url} did not answer {what} within the client's timeout: it may "
            "be overloaded or stalled; check its log, or pass a larger timeout to "
            "make_client(url, timeout=...)."
        )
    if isinstance(e, openai.APIConnectionError):
        return ServerConnectionError(
            f"No vLLM server answers {url} ({what} failed: {e.__cause__ or e}): start one "
            "(launch_server(cfg)) or check the URL and that the port is reachable from here."
        )
    if isinstance(e, openai.APIStatusError):
        status = e.status_code
        body = getattr(e, "body", None)
        text = str(e)
        if status == 404 and model and "does not exist" in text:
            try:
                served = [m.id for m in client.models.list()]
            except Exception:
                served = []
            return ResponseError(
                f"The server at {url} does not serve model {model!r}"
                + (f"; it serves {served}: pass one of them" if served else "")
                + " (the --served-model-name / --model it was launched with)."
            )
        vllm_shaped = isinstance(body, Mapping) and ("message" in body or "error" in body)
        if status in (404, 405, 501) and not vllm_shaped:
            return ServerConnectionError(
                f"The server at {root} answered {what} with HTTP {status}: it is not a vLLM "
                "OpenAI-compatible server (vLLM answers /health and /v1/models there). Check "
                "the URL and port, or start vLLM with launch_server(cfg)."
            )
    return e


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


# One qwen3_coder call: optional <tool_call> wrapper, <function=NAME> ... </function>, any
# whitespace between tags (vllm/tool_parsers/qwen3coder_tool_parser.py's format).
_CALL_RE = re.compile(
    r"(?:<tool_call>\s*)?<function=([^>]*)>(.*?)</function>\s*(?:</tool_call>)?", re.S
)
_PARAM_RE = re.compile(r"<parameter=([^>]*)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.S)


def _trailing_tool_calls(text: str) -> tuple[int, list[tuple[str, dict[str, str]]]] | None:
    """Complete qwen3_coder calls that end ``text`` (only whitespace after and between
    them): ``(start index of the first, [(name, {param: value})])``, else ``None``.
    Values are strings, each with one leading and one trailing newline removed, as
    qwen3_coder does; :mod:`helpers.toolargs` then fits them to the schema."""
    end = len(text.rstrip())
    start, calls = None, []
    for m in reversed(list(_CALL_RE.finditer(text))):
        if text[m.end() : end].strip():
            break
        params = {}
        for p in _PARAM_RE.finditer(m.group(2)):
            value = p.group(2)
            value = value[1:] if value.startswith("\n") else value
            value = value[:-1] if value.endswith("\n") else value
            params[p.group(1).strip()] = value
        calls.insert(0, (m.group(1).strip(), params))
        start = end = m.start()
    return (start, calls) if calls else None


def _unfinished_tool_call(text: str) -> int | None:
    """Index where an opened, never-closed tool call starts at the end of ``text``."""
    i = text.rfind("<tool_call>")
    if i >= 0 and "</tool_call>" not in text[i:]:
        j = text.rfind("</function>", i)
        if j < 0 or text[j:].strip() != "</function>":
            return i
    i = text.rfind("<function=")
    if i >= 0 and "</function>" not in text[i:]:
        k = text.rfind("<tool_call>", 0, i)
        return k if k >= 0 and not text[k:i].replace("<tool_call>", "").strip() else i
    return None


def _check_tool_truncation(
    result: ChatResult,
    *,
    max_tokens: int | None,
    max_model_len: int | None,
    tools_requested: bool,
) -> str | None:
    """Where a reply was cut inside a tool call, move the fragment out of the answer and
    return a description of it (``None`` when it was not)."""
    u = result.usage
    if result.finish_reason == "length":
        for part in ("content", "reasoning"):
            text = getattr(result, part)
            i = _unfinished_tool_call(text)
            if i is not None:
                result.tool_call_fragment = text[i:]
                setattr(result, part, text[:i].rstrip())
                return f"the unfinished markup {text[i:][:60]!r} was left in `{part}`"
        if result.tool_calls:  # streamed: the parser sent the call's start
            result.tool_call_fragment = "\n".join(
                f"{tc.name}({tc.raw_arguments})" for tc in result.tool_calls
            )
            result.tool_calls = []
            return "the server streamed the start of a call whose arguments never ended"
        reasoning_ended = u.reasoning_tokens is not None and u.reasoning_tokens < u.completion_tokens
        if tools_requested and not result.content.strip() and reasoning_ended:
            return (
                "the reasoning ended but nothing after it arrived: the server's tool parser "
                "holds back a tool call until it is complete"
            )
        return None
    # vLLM 0.32 reports a cut call as finish_reason="tool_calls" (it parses the fragment:
    # chat_completion_full_generator). The token count is what gives it away.
    used_all = (max_tokens is not None and u.completion_tokens >= max_tokens) or (
        max_tokens is None
        and max_model_len is not None
        and u.prompt_tokens + u.completion_tokens >= max_model_len
    )
    if result.finish_reason == "tool_calls" and result.tool_calls and used_all:
        result.tool_call_fragment = "\n".join(
            f"{tc.name}({tc.raw_arguments})" for tc in result.tool_calls
        )
        result.tool_calls = []
        return (
            f"all {u.completion_tokens} tokens were used and the server still reported "
            "finish_reason='tool_calls' (vLLM parses the unfinished call)"
        )
    return None


def _finish(
    result: ChatResult,
    *,
    thinking: bool,
    force_nonempty_content: bool,
    max_tokens: int | None,
    tools_requested: bool = True,
    tool_schemas: list[dict[str, Any]] | None = None,
    recover_tool_calls: bool = False,
    max_model_len: int | None = None,
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

    limit = f"max_tokens={max_tokens}" if max_tokens is not None else "max_tokens"
    if max_tokens is None and max_model_len is not None:
        limit = f"max_tokens (unset: the rest of max_model_len={max_model_len})"

    # 2a. Cut by max_tokens inside a tool call: nothing usable, the fragment is no answer.
    cut = None
    if tools_requested:
        cut = _check_tool_truncation(
            result, max_tokens=max_tokens, max_model_len=max_model_len, tools_requested=True
        )
    if cut:
        result.truncated_in_tool_call = True
        _warn(
            result,
            ToolCallTruncatedWarning,
            f"Truncated inside a tool call: raise max_tokens. The model used all {limit} "
            f"while writing a tool call ({cut}); no call was returned or run, and the "
            "fragment is in `tool_call_fragment`, not in `content`.",
        )
        return _coerce_calls(result, tool_schemas)

    # 2b. A complete call at the end of unfinished reasoning (no </think>): a reasoning
    #     parser that does not stop at <tool_call> kept it as reasoning (e.g. deepseek_r1
    #     in vLLM 0.32; the pre-engine nemotron_v3 reasoning parser).
    if tools_requested and not result.tool_calls and not result.content.strip():
        found = _trailing_tool_calls(result.reasoning)
        if found:
            start, calls = found
            result.tool_call_in_reasoning = True
            names = ", ".join(f"{n}({json.dumps(a, ensure_ascii=False)})" for n, a in calls)
            if recover_tool_calls:
                result.tool_calls = [
                    ToolCall.from_raw(f"chatcmpl-tool-recovered-{i}", n, json.dumps(a))
                    for i, (n, a) in enumerate(calls)
                ]
                result.tool_call_fragment = result.reasoning[start:]
                result.reasoning = result.reasoning[:start].rstrip()
                _warn(
                    result,
                    ToolCallInReasoningWarning,
                    f"The model wrote tool call(s) {names} at the end of its reasoning without "
                    "closing </think>, and the server's reasoning parser kept them as "
                    "reasoning (no tool_calls). Recovered them as tool calls "
                    "(recover_tool_calls=True). The server-side fix: a reasoning parser "
                    f"that ends reasoning at <tool_call> (`{REASONING_PARSER_FLAGS}` on vLLM "
                    ">= 0.32).",
                )
            else:
                _warn(
                    result,
                    ToolCallInReasoningWarning,
                    f"The model wrote tool call(s) {names} at the end of its reasoning without "
                    "closing </think>, and the server's reasoning parser kept them as "
                    "reasoning, so the reply has no tool_calls and no answer. Pass "
                    "recover_tool_calls=True to run them, or serve with a reasoning parser "
                    f"that ends reasoning at <tool_call> (`{REASONING_PARSER_FLAGS}` on vLLM "
                    ">= 0.32).",
                )
            return _coerce_calls(result, tool_schemas)

    # 2c. finish_reason "tool_calls" but no call (vLLM 0.32 does this for
    #     tool_choice="required" when nothing parses): not an answer.
    if result.finish_reason == "tool_calls" and not result.tool_calls:
        result.tool_calls_missing = True
        _warn(
            result,
            ToolCallsMissingWarning,
            "The server reported finish_reason='tool_calls' but the reply holds no tool call, "
            "so `content` is not a final answer: the model's tool call did not parse. Retry "
            "the request, check the server's --tool-call-parser (Nemotron: "
            f"`{TOOL_PARSER_FLAGS}`), or use tool_choice='auto'.",
        )
        return result

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
            _warn(
                result,
                ReasoningTruncatedWarning,
                f"The model used all {limit} while still reasoning, so there is no answer: "
                f"{where}. Reasoning tokens count against max_tokens. Fix: raise max_tokens, "
                "set reasoning_budget=N (sent as thinking_token_budget, N below max_tokens), "
                "or pass thinking=False.",
            )
    return _coerce_calls(result, tool_schemas)


def _schema_parameters(tool_schemas: list[dict[str, Any]] | None, name: str) -> Any:
    for t in tool_schemas or []:
        fn = t.get("function") if isinstance(t, Mapping) else None
        if isinstance(fn, Mapping) and fn.get("name") == name:
            return fn.get("parameters")
    return None


def _coerce_calls(result: ChatResult, tool_schemas: list[dict[str, Any]] | None) -> ChatResult:
    """Fit each call's arguments to its tool's JSON schema (:mod:`helpers.toolargs`)."""
    from helpers.toolargs import coerce_arguments

    for call in result.tool_calls:
        params = _schema_parameters(tool_schemas, call.name)
        if call.error is not None or not params:
            continue
        call.arguments, problems = coerce_arguments(call.arguments, params)
        for p in problems:
            _warn(
                result,
                ToolArgumentWarning,
                f"Tool {call.name!r}: {p}. The function gets the value as the model wrote it; "
                "check the tool's schema or the function's handling of it.",
            )
    return result


def parse_response(
    response: Any,
    *,
    thinking: bool = True,
    force_nonempty_content: bool = False,
    max_tokens: int | None = None,
    tools_requested: bool = True,
    tool_schemas: list[dict[str, Any]] | None = None,
    recover_tool_calls: bool = False,
    max_model_len: int | None = None,
) -> ChatResult:
    """Turn a ``ChatCompletion`` (SDK object or its JSON dict) into a :class:`ChatResult`.

    Args:
        thinking, force_nonempty_content, max_tokens: what the request asked for; they
            decide the truncation checks and their messages.
        tools_requested: the request offered tools (and not ``tool_choice="none"``);
            only then is unparsed tool-call markup an error.
        tool_schemas: the tools the request offered; each call's arguments are fitted to
            its schema (:func:`helpers.toolargs.coerce_arguments`).
        recover_tool_calls: turn complete tool calls found at the end of unfinished
            reasoning into ``tool_calls`` (see :class:`ToolCallInReasoningWarning`).
        max_model_len: the server's limit (tokens), when the request sent no
            ``max_tokens``; used to tell a reply cut at the end of the context.

    Raises:
        ResponseError: tool-call markup in ``content`` with no ``tool_calls`` (the server
            lacks ``--enable-auto-tool-choice --tool-call-parser qwen3_coder``), or a
            response with no choices.

    Warns:
        ReasoningTruncatedWarning, ReasoningParserMissingWarning, ToolCallInReasoningWarning,
        ToolCallTruncatedWarning, ToolCallsMissingWarning, ToolArgumentWarning (see their
        docs; each sets a flag on the result too).
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
        tool_schemas=tool_schemas,
        recover_tool_calls=recover_tool_calls,
        max_model_len=max_model_len,
    )


# ─── chat ─────────────────────────────────────────────────────────────────────────────


def _create(client: Any, kwargs: dict[str, Any]) -> Any:
    """``client.chat.completions.create`` with vLLM's parser-missing 400s turned into
    :class:`ResponseError` s naming the flags, a ``max_tokens`` above the server's
    ``max_model_len`` into one naming the limit, and connection failures or a non-vLLM
    server into :class:`ServerConnectionError` naming the URL."""
    import openai

    try:
        response = client.chat.completions.create(**kwargs)
    except openai.BadRequestError as e:
        text = str(e)
        m = re.search(r"max_(?:completion_)?tokens=(\d+) cannot be greater than max_model_len=(\d+)", text)
        if m:  # vllm/renderers/params.py (vLLM 0.32.0)
            raise _max_tokens_error(int(m.group(2)), m.group(1), text) from None
        m = re.search(r"maximum context length is (\d+) tokens", text)
        if m:  # the prompt (plus output, older releases) exceeds max_model_len
            raise ResponseError(
                f"The request does not fit the server's max_model_len of {m.group(1)} tokens: "
                "shorten the conversation, lower max_tokens, or restart vLLM with a larger "
                "--max-model-len. Server said: " + text
            ) from None
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
    except openai.APIError as e:
        err = _translate_api_error(client, e, "POST /v1/chat/completions", kwargs.get("model"))
        if err is e:
            raise
        raise err from None
    if isinstance(response, (str, bytes)):  # a 200 that is not JSON: not an OpenAI server
        raise ServerConnectionError(
            f"The server at {_client_url(client)} answered POST /v1/chat/completions with "
            f"something that is not JSON ({str(response)[:80]!r}): it is not a vLLM "
            "OpenAI-compatible server. Check the URL and port, or start vLLM with "
            "launch_server(cfg)."
        )
    return response


def chat(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    *,
    thinking: bool = True,
    max_tokens: int | None = None,
    reasoning_budget: int | None = None,
    budget_method: str = "server",
    temperature: float = DEFAULT_TEMPERATURE,
    top_p: float = DEFAULT_TOP_P,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    force_nonempty_content: bool = False,
    recover_tool_calls: bool = False,
    **extra: Any,
) -> ChatResult:
    """Send one chat request and parse the reply.

    Args:
        client: from :func:`make_client`.
        model: the served model name (the ``--model`` / ``--served-model-name`` value).
        messages_or_prompt: a user prompt string, or OpenAI-format messages.
        thinking: reasoning on (default, as the model card) or off.
        max_tokens: cap on reasoning + answer tokens. ``None`` (default): seed 004's 16000
            when the server's ``max_model_len`` (read once from ``GET /v1/models``) is
            larger, else none is sent and vLLM generates up to the end of the context
            (the CPU stand-in has ``max_model_len`` 2048).
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
        recover_tool_calls: a complete tool call at the end of unfinished reasoning
            becomes a tool call (off: a :class:`ToolCallInReasoningWarning` only).
        **extra: ``extra_body=`` and other ``chat.completions.create`` arguments.

    Returns:
        A :class:`ChatResult`. Tool-call arguments are fitted to the ``tools`` schemas.

    Raises:
        TypeError / ValueError: an argument of the wrong type or range (the message names
            it), a bad ``reasoning_budget`` or ``budget_method``.
        ServerConnectionError: nothing (or no vLLM server) answers at the client's URL.
        ResponseError: unparsed tool-call markup (names the tool-parser flags), a budget
            the server rejects (names ``--reasoning-parser nemotron_v3``), ``max_tokens``
            above the server's ``max_model_len`` (names the limit), an unknown model.
        openai.APIError: any other HTTP failure, unchanged.

    Warns:
        ReasoningTruncatedWarning: thinking on, ``finish_reason == "length"``, no answer.
        ReasoningParserMissingWarning: reasoning found in ``content`` and split off.
        ToolCallInReasoningWarning, ToolCallTruncatedWarning, ToolCallsMissingWarning,
        ToolArgumentWarning: see each class.
    """
    _check_chat_args(
        "chat",
        client,
        model,
        thinking=thinking,
        max_tokens=max_tokens,
        reasoning_budget=reasoning_budget,
        temperature=temperature,
        top_p=top_p,
        tools=tools,
        recover_tool_calls=recover_tool_calls,
    )
    if budget_method not in ("server", "two_pass"):
        raise ValueError(f"budget_method={budget_method!r}: use 'server' or 'two_pass'.")
    max_tokens, max_model_len = _resolve_max_tokens(client, model, max_tokens)
    if max_tokens is None and reasoning_budget is not None and max_model_len is not None:
        if reasoning_budget >= max_model_len:
            raise _max_tokens_error(max_model_len, f"(reasoning_budget={reasoning_budget})")
    common = dict(
        thinking=thinking,
        temperature=temperature,
        top_p=top_p,
        tools=tools,
        tool_choice=tool_choice,
        force_nonempty_content=force_nonempty_content,
        **extra,
    )
    checks = dict(
        tool_schemas=tools, recover_tool_calls=recover_tool_calls, max_model_len=max_model_len
    )
    if reasoning_budget is not None and budget_method == "two_pass" and thinking:
        return _chat_two_pass(
            client,
            model,
            messages_or_prompt,
            max_tokens if max_tokens is not None else max_model_len,
            reasoning_budget,
            common,
            checks,
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
        **checks,
    )


def _chat_two_pass(
    client: Any,
    model: str,
    messages_or_prompt: Any,
    max_tokens: int,
    budget: int,
    common: dict[str, Any],
    checks: dict[str, Any] | None = None,
) -> ChatResult:
    """Client-side reasoning budget for servers without ``thinking_token_budget``."""
    checks = dict(checks or {})
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
            **checks,
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
        **checks,
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
        **checks: Any,
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
            **checks,
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
        tool_schemas: list[dict[str, Any]] | None = None,
        recover_tool_calls: bool = False,
        max_model_len: int | None = None,
    ):
        self._chunks = chunks
        self._opts = dict(
            thinking=thinking,
            force_nonempty_content=force_nonempty_content,
            max_tokens=max_tokens,
            tools_requested=tools_requested,
            tool_schemas=tool_schemas,
            recover_tool_calls=recover_tool_calls,
            max_model_len=max_model_len,
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
    max_tokens: int | None = None,
    reasoning_budget: int | None = None,
    temperature: float = DEFAULT_TEMPERATURE,
    top_p: float = DEFAULT_TOP_P,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    force_nonempty_content: bool = False,
    recover_tool_calls: bool = False,
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
        TypeError, ValueError, ServerConnectionError: see :func:`chat` (at once).
        ResponseError: see :func:`chat` (raised when the stream ends).
    """
    _check_chat_args(
        "stream_chat",
        client,
        model,
        thinking=thinking,
        max_tokens=max_tokens,
        reasoning_budget=reasoning_budget,
        temperature=temperature,
        top_p=top_p,
        tools=tools,
        recover_tool_calls=recover_tool_calls,
    )
    max_tokens, max_model_len = _resolve_max_tokens(client, model, max_tokens)
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
        tool_schemas=tools,
        recover_tool_calls=recover_tool_calls,
        max_model_len=max_model_len,
    )


def collect_stream(
    stream: ChatStream | Iterable[Any],
    *,
    thinking: bool = True,
    force_nonempty_content: bool = False,
    max_tokens: int | None = None,
    tools_requested: bool = True,
    tool_schemas: list[dict[str, Any]] | None = None,
    recover_tool_calls: bool = False,
    max_model_len: int | None = None,
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
        tool_schemas=tool_schemas,
        recover_tool_calls=recover_tool_calls,
        max_model_len=max_model_len,
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


def tool_schema(
    fn: Callable[..., Any], description: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """An OpenAI function-tool schema from a Python function's signature.

    Parameter types come from annotations (``str``, ``int``, ``float``, ``bool``,
    ``list``, ``dict``; anything else is left untyped), required = no default; the
    description is the docstring's first line unless given. qwen3_coder converts the
    model's values to these types.

    Args:
        fn: the function.
        description: overrides the docstring's first line.
        name: the tool's name (default ``fn.__name__``); :func:`run_tool_loop` passes the
            key the function is registered under, so a lambda is not ``<lambda>``.

    Raises:
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"tool_schema: `fn` must be a function; got {type(fn).__name__}.")
    tool_name = name or getattr(fn, "__name__", None) or type(fn).__name__
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
    doc = (description or (inspect.getdoc(fn) or "").strip().split("\n")[0]) or tool_name
    return {
        "type": "function",
        "function": {
            "name": tool_name,
            "description": doc,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


@dataclass
class ToolRun:
    """One tool call handled by :func:`run_tool_loop`: the call, what the function returned
    (``None`` when it failed), the ``role="tool"`` message sent back, and the error sent
    back instead of a result (``None`` when the call ran)."""

    call: ToolCall
    output: Any
    message: dict[str, Any]
    error: str | None = None


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


def _check_tools_mapping(tools: Any) -> None:
    shape = "a dict {name: function}, e.g. {'get_weather': get_weather}"
    if isinstance(tools, Mapping):
        bad = [k for k, f in tools.items() if not isinstance(k, str) or not callable(f)]
        if bad:
            raise TypeError(
                f"run_tool_loop: `tools` must be {shape}; the entries {bad!r} are not "
                "name -> callable."
            )
        return
    hint = ""
    if isinstance(tools, (list, tuple)) and tools and all(callable(f) for f in tools):
        hint = " Wrap the list: {f.__name__: f for f in tools}."
    elif isinstance(tools, (list, tuple)) and tools and all(isinstance(t, Mapping) for t in tools):
        hint = " Schemas go in `tool_schemas`; `tools` maps each name to its Python function."
    raise TypeError(
        f"run_tool_loop: `tools` must be {shape}; got {type(tools).__name__} "
        f"{tools!r:.80}.{hint}"
    )


def _attach_transcript(e: BaseException, messages, turns, runs) -> BaseException:
    """Give an error the conversation so far (``.messages``, ``.turns``, ``.tool_runs``)."""
    try:
        e.messages = list(messages)  # type: ignore[attr-defined]
        e.turns = list(turns)  # type: ignore[attr-defined]
        e.tool_runs = list(runs)  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # an exception type without a __dict__
        pass
    return e


def _run_call(call: ToolCall, tools: Mapping[str, Callable[..., Any]], finish_reason: Any):
    """Run one call: ``(output, error text or None, fix for a raised error, cause)``."""
    fn = tools.get(call.name)
    if fn is None:
        return (
            None,
            f"no tool named {call.name!r}; the tools are {sorted(tools)}",
            "Pass a function under that name in `tools`, or remove its schema from "
            "`tool_schemas`.",
            None,
        )
    if call.error is not None:
        return (
            None,
            f"the arguments for {call.name} cannot be used: {call.error}; raw arguments: "
            f"{call.raw_arguments!r}",
            f"Retry, or raise max_tokens if the reply was cut off (finish_reason={finish_reason!r}).",
            None,
        )
    try:
        inspect.signature(fn).bind(**call.arguments)
    except TypeError as e:
        return (
            None,
            f"{call.name}({call.raw_arguments}) does not fit the function's signature ({e})",
            "Make the tool schema's parameters match the function "
            "(helpers.client.tool_schema(fn) builds them from it).",
            e,
        )
    except ValueError:  # no signature (some builtins): just call it
        pass
    try:
        return fn(**call.arguments), None, "", None
    except Exception as e:
        return (
            None,
            f"{call.name} raised {type(e).__name__}: {e}",
            "Fix the tool, or leave on_tool_error='return' so the model gets the error as "
            "the tool's result.",
            e,
        )


def run_tool_loop(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    tools: Mapping[str, Callable[..., Any]],
    tool_schemas: list[dict[str, Any]] | None = None,
    *,
    max_rounds: int = 5,
    on_tool_error: str = "return",
    recover_tool_calls: bool = False,
    **chat_kwargs: Any,
) -> ToolLoopResult:
    """Let the model call Python functions until it answers.

    Each round: :func:`chat` with the tools; every tool call in the reply (several when
    the model calls in parallel) runs ``tools[name](**arguments)``, with the arguments
    fitted to the tool's JSON schema first (``"140.0"`` for an ``integer`` becomes
    ``140``; :mod:`helpers.toolargs`); each result goes back as ``{"role": "tool",
    "tool_call_id": id, "content": text}`` (non-strings as JSON); repeat until a reply
    has no tool calls.

    A call that cannot run (the function raised, a tool name the model invented,
    arguments that are not a JSON object or do not fit the function) goes back to the
    model as that tool's result, ``"Error: ..."`` (the usual agent convention, so the
    model can correct itself), unless ``on_tool_error="raise"``.

    Args:
        tools: ``{name: function}``; the model calls each function by its key.
        tool_schemas: OpenAI function-tool schemas; default :func:`tool_schema` of each
            function, named after its key.
        max_rounds: model turns allowed, the final answer included (>= 1).
        on_tool_error: ``"return"`` (default) or ``"raise"`` (:class:`ToolLoopError`,
            chained to the tool's exception).
        recover_tool_calls: run complete tool calls found at the end of unfinished
            reasoning (see :class:`ToolCallInReasoningWarning`); without it such a turn
            raises instead of ending the loop silently.
        **chat_kwargs: passed to :func:`chat` (``thinking``, ``max_tokens``...).

    Returns:
        A :class:`ToolLoopResult`.

    Raises:
        TypeError / ValueError: an argument of the wrong type (the message names it and
            the shape expected).
        ToolLoopError: the last turn is not an answer (a tool call left in the reasoning
            without ``recover_tool_calls``, a reply cut inside a tool call,
            ``finish_reason="tool_calls"`` with no call), no answer within ``max_rounds``,
            or a failing call with ``on_tool_error="raise"``.
        Any error :func:`chat` raises. Every error raised carries the conversation so far
        as ``.messages``, ``.turns`` and ``.tool_runs``.
    """
    _check_client("run_tool_loop", client)
    _check_tools_mapping(tools)
    if tool_schemas is not None and (
        isinstance(tool_schemas, Mapping)
        or not isinstance(tool_schemas, (list, tuple))
        or not all(isinstance(t, Mapping) and "function" in t for t in tool_schemas)
    ):
        raise TypeError(
            "run_tool_loop: `tool_schemas` must be None or a list of OpenAI function-tool "
            'schemas [{"type": "function", "function": {...}}]; got '
            f"{tool_schemas!r:.100}."
        )
    _check_number("run_tool_loop", "max_rounds", max_rounds, integer=True, minimum=1)
    if on_tool_error not in ("return", "raise"):
        raise ValueError(
            f"run_tool_loop: `on_tool_error`={on_tool_error!r}: use 'return' (send the error "
            "to the model as the tool's result) or 'raise'."
        )
    schemas = (
        list(tool_schemas)
        if tool_schemas is not None
        else [tool_schema(f, name=k) for k, f in tools.items()]
    )
    messages = as_messages(messages_or_prompt)
    turns: list[ChatResult] = []
    runs: list[ToolRun] = []

    def stop(text: str, cause: BaseException | None = None) -> ToolLoopError:
        err = ToolLoopError(text, messages, turns, runs)
        err.__cause__ = cause
        return err

    try:
        for _ in range(max_rounds):
            result = chat(
                client,
                model,
                messages,
                tools=schemas,
                recover_tool_calls=recover_tool_calls,
                **chat_kwargs,
            )
            turns.append(result)
            messages.append(result.to_message())
            if not result.tool_calls:
                if result.tool_call_in_reasoning:
                    raise stop(
                        "The model's last turn has a tool call inside its unfinished "
                        "reasoning (no </think>), which the server did not return as a tool "
                        "call, so there is no answer. Pass recover_tool_calls=True to run it."
                    )
                if result.truncated_in_tool_call:
                    raise stop(
                        "Truncated inside a tool call: raise max_tokens (no call was run; the "
                        f"fragment: {result.tool_call_fragment[:120]!r})."
                    )
                if result.tool_calls_missing:
                    raise stop(
                        "The server reported finish_reason='tool_calls' but returned no tool "
                        "call, so the last turn is not an answer; retry, or check the "
                        f"server's tool parser (`{TOOL_PARSER_FLAGS}`)."
                    )
                return ToolLoopResult(messages, result, turns, runs)
            for call in result.tool_calls:
                output, error, fix, cause = _run_call(call, tools, result.finish_reason)
                if error is not None and on_tool_error == "raise":
                    raise stop(f"Tool call failed: {error}. {fix}", cause)
                content = f"Error: {error}" if error is not None else _tool_output_text(output)
                reply = {"role": "tool", "tool_call_id": call.id, "content": content}
                messages.append(reply)
                runs.append(ToolRun(call, output, reply, error))
    except ToolLoopError:
        raise
    except BaseException as e:
        raise _attach_transcript(e, messages, turns, runs)
    raise stop(
        f"The model was still calling tools after max_rounds={max_rounds} turns. Raise "
        "max_rounds, or check the transcript (this error's .messages) for a tool whose "
        "output the model keeps retrying."
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
