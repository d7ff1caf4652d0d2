"""Send chat requests to a vLLM server through the ``openai`` SDK and parse the replies;
HTTP failures become one sentence naming the URL and the fix."""

from __future__ import annotations

import re
import warnings
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from helpers.chat.parse import _parse_reply, _Turn, _warn, warn_from_caller
from helpers.chat.request import (
    DEFAULT_MAX_TOKENS,
    ChatOptions,
    _check_client,
    _check_model,
    _options_from,
    as_messages,
    build_request,
)
from helpers.chat.types import (
    REASONING_PARSER_FLAGS,
    THINK_END,
    THINK_START,
    TOOL_PARSER_FLAGS,
    ChatResult,
    ForcedToolCallIgnoredWarning,
    ReasoningTruncatedWarning,
    ServerLimitUnknownWarning,
    _client_url,
    _get,
    per_client,
)
from helpers.errors import ResponseError, ServerConnectionError, ServerRequestError
from helpers.server.endpoint import server_root
from helpers.server.request_failure import describe_server_error, error_words

# ─── what the server allows (GET /v1/models) and how it fails ─────────────────────────

# Per client object, per base URL: {model id: max_model_len}.
_LIMITS: weakref.WeakKeyDictionary[Any, dict[str, dict[str, int | None]]] = (
    weakref.WeakKeyDictionary()
)


def remember_max_model_len(client: Any, max_model_len: int, model: str | None = None) -> None:
    """Tell the helpers this client's server limit, so :func:`chat` does not ask ``GET
    /v1/models`` (behind vllm-router that fails while a replica is down).

    Args:
        client: from :func:`~helpers.server.endpoint.make_client` (or ``Fleet.client()``).
        max_model_len: the served ``--max-model-len`` in tokens (prompt + output), >= 1.
        model: the served model name it holds for; ``None``: the client's default model.

    Raises:
        ValueError: ``max_model_len`` is not a positive integer.
    """
    if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or max_model_len < 1:
        raise ValueError(
            f"remember_max_model_len: `max_model_len` must be a positive number of tokens; got "
            f"{max_model_len!r}."
        )
    cached = per_client(_LIMITS, client)
    cached[model or ""] = max_model_len
    cached.setdefault("", max_model_len)


def server_max_model_len(client: Any, model: str | None = None) -> int | None:
    """The server's ``max_model_len`` (tokens, prompt + output) for ``model``, from ``GET
    /v1/models`` (``ModelCard.max_model_len``, ``vllm/entrypoints/openai/models/serving.py``,
    vLLM 0.32.0), cached per client and base URL.

    Args:
        client: from :func:`~helpers.server.endpoint.make_client`.
        model: the served model name; ``None`` takes the first model listed.

    Returns:
        The limit in tokens, or ``None`` when it is unknown: the server does not report one
        (an OpenAI-compatible server that is not vLLM), or the probe answered an HTTP error
        (then :class:`~helpers.chat.types.ServerLimitUnknownWarning`, once per client).

    Raises:
        ServerConnectionError: nothing answers at the client's URL in time, or it is not an
            OpenAI-compatible server (names the URL and the fix).
    """
    _check_client("server_max_model_len", client)
    cached = per_client(_LIMITS, client)
    key = model or ""
    if key in cached:
        return cached[key]
    import openai

    try:
        listed = list(client.models.list())
    except openai.APIStatusError as e:
        err = _translate_api_error(client, e, "GET /v1/models", model)
        if err is not e:  # not a vLLM server at all (a 404 page): the chat cannot work either
            raise err from None
        # An HTTP error from something that serves the API (vllm-router with its first worker
        # down answers 500 "Request failed: error sending request for url (.../v1/models)"):
        # the limit is unknown, the chat itself may still be served.
        cached[key] = None
        warn_from_caller(
            ServerLimitUnknownWarning,
            f"GET /v1/models at {_client_url(client)} answered HTTP {e.status_code} "
            f"({error_words(e)}), so the server's max_model_len is unknown: requests are sent with "
            f"max_tokens={DEFAULT_MAX_TOKENS} (the default) unchecked, and fitted if the server "
            "names a smaller limit. Behind vllm-router this is a worker that is down "
            "(vllm-project/router#135); pass max_tokens=..., or take the client from "
            "Fleet.client(), which knows the limit.",
        )
        return None
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


class _LimitNamed(Exception):
    """The server refused the default ``max_tokens`` and named its ``max_model_len``, now
    remembered (:func:`remember_max_model_len`): send again, fitted."""


def _fit_to_server(
    fn: str, client: Any, model: str, opts: ChatOptions
) -> tuple[ChatOptions, int | None, bool]:
    """``(opts with max_tokens fitted and checked again, the server's max_model_len in tokens
    or None, whether the default goes out unchecked)``.

    ``max_tokens=None``: seed 004's 16000 when ``max_model_len`` is larger, else none is sent
    and vLLM generates to the end of the context (``get_max_tokens``,
    ``vllm/entrypoints/serve/utils/api_utils.py``, vLLM 0.32.0). An explicit value is sent as
    it is (too large: HTTP 400, worded by :func:`explain_bad_request`).
    """
    if opts.max_tokens is not None:
        return opts, None, False
    limit = server_max_model_len(client, model)
    if limit is None or limit > DEFAULT_MAX_TOKENS:
        opts, _ = _options_from(fn, opts, {"max_tokens": DEFAULT_MAX_TOKENS})
    return opts, limit, limit is None


def _max_tokens_error(limit: int, asked: Any, said: str = "") -> ResponseError:
    return ResponseError(
        f"max_tokens={asked} does not fit this server: its max_model_len is {limit} tokens "
        f"(prompt + output). Pass max_tokens below {limit} (or leave max_tokens unset: the "
        "helper then fits it to the server), or restart vLLM with a larger --max-model-len."
        + (f" Server said: {said}" if said else "")
    )


def _translate_api_error(
    client: Any, e: Exception, what: str, model: str | None, sdk: Any = None
) -> Exception:
    """One sentence naming the URL and the fix for HTTP-level failures; other errors come
    back unchanged. ``sdk``: ``e``'s module (``openai``, the default, or ``anthropic``)."""
    import openai

    sdk = sdk or openai
    url = _client_url(client)
    root = server_root(url)
    if isinstance(e, sdk.APITimeoutError):
        return ServerConnectionError(
            f"The server at {url} did not answer {what} within the client's timeout: it may "
            "be overloaded or stalled; check its log, or pass a larger timeout to "
            "make_client(url, timeout=...)."
        )
    if isinstance(e, sdk.APIConnectionError):
        return ServerConnectionError(
            f"No vLLM server answers {url} ({what} failed: {e.__cause__ or e}): start one "
            "(launch_server(cfg)) or check the URL and that the port is reachable from here."
        )
    if isinstance(e, sdk.APIStatusError):
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
        if status >= 500 and status != 501 and what.startswith("POST"):
            return ServerRequestError(describe_server_error(url, what, status, e))
        if status in (404, 405, 501) and not vllm_shaped:
            return ServerConnectionError(
                f"The server at {root} answered {what} with HTTP {status}: it is not a vLLM "
                "OpenAI-compatible server (vLLM answers /health and /v1/models there). Check "
                "the URL and port, or start vLLM with launch_server(cfg)."
            )
    return e


#: vLLM 0.32.0's 400 for a max_tokens above max_model_len (``vllm/renderers/params.py``).
_MAX_TOKENS_400 = re.compile(
    r"max_(?:completion_)?tokens=(\d+) cannot be greater than max_model_len=(\d+)"
)


def explain_bad_request(text: str) -> str | None:
    """The cookbook's sentence (cause, fix, the server's words) for a known HTTP 400 of vLLM
    0.32.0 in ``text`` (the error's text); None for any other. Also used by
    :func:`lab.evals.accuracy.evaluate`.

    Known: ``max_tokens=N cannot be greater than max_model_len=M`` (``vllm/renderers/
    params.py``), "maximum context length is N tokens", ``thinking_token_budget is set but
    reasoning_config is not configured`` (``vllm/v1/engine/input_processor.py``; NeMo-RL PR
    #4220 met it) and tools without a tool parser (``vllm/renderers/online_renderer.py``).
    """
    m = _MAX_TOKENS_400.search(text)
    if m:
        return str(_max_tokens_error(int(m.group(2)), m.group(1), text))
    m = re.search(r"maximum context length is (\d+) tokens", text)
    if m:  # the prompt (plus output, older releases) exceeds max_model_len
        return (
            f"The request does not fit the server's max_model_len of {m.group(1)} tokens: "
            "shorten the conversation, lower max_tokens, or restart vLLM with a larger "
            "--max-model-len. Server said: " + text
        )
    if "thinking_token_budget" in text:
        return (
            "The server rejected `thinking_token_budget`: it was launched without a reasoning "
            f"parser. Restart vLLM with `{REASONING_PARSER_FLAGS}`, or call with "
            "budget_method='two_pass'. Server said: " + text
        )
    if "tool choice requires" in text or "requires --tool-call-parser" in text:
        return (
            "The server refused the tools: it was launched without tool calling. "
            f"Restart vLLM with `{TOOL_PARSER_FLAGS}`. Server said: " + text
        )
    return None


def _create(client: Any, kwargs: dict[str, Any], *, unchecked: bool = False) -> Any:
    """``client.chat.completions.create`` with known 400s as :class:`ResponseError`
    (:func:`explain_bad_request`; ``unchecked``: a ``max_tokens`` 400 raises
    :class:`_LimitNamed` to send again, fitted) and HTTP failures as
    :func:`_translate_api_error` says them."""
    import openai

    try:
        response = client.chat.completions.create(**kwargs)
    except openai.BadRequestError as e:
        text = str(e)
        m = _MAX_TOKENS_400.search(text)
        if m and unchecked:
            remember_max_model_len(client, int(m.group(2)), kwargs.get("model"))
            raise _LimitNamed from None
        said = explain_bad_request(text)
        if said:
            raise ResponseError(said) from None
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
    options: ChatOptions | None = None,
    *,
    budget_method: str = "server",
    **overrides: Any,
) -> ChatResult:
    """Send one chat request and parse the reply.

    Args:
        client: from :func:`~helpers.server.endpoint.make_client`.
        model: the served model name (the ``--model`` / ``--served-model-name`` value).
        messages_or_prompt: a user prompt string, or OpenAI-format messages.
        options: a :class:`ChatOptions` (units, defaults and ranges there); ``None``: its
            defaults.
        budget_method: ``"server"`` sends ``thinking_token_budget`` (vLLM >= 0.32 with
            ``--reasoning-parser``; on the stand-in a budget of N gave N-1 reasoning tokens).
            ``"two_pass"``, for older servers: reason with ``max_tokens=reasoning_budget``,
            then, if cut off, continue an assistant message holding the closed think block
            (``continue_final_message=True``; Qwen3/Nemotron templates render it as given).
        **overrides: :class:`ChatOptions` fields (``thinking=False``...), which win over
            ``options``; any other keyword (``extra_body=``, ``seed``, ``stop``...) goes to
            ``chat.completions.create``, which refuses a name it does not know.

    Returns:
        A :class:`ChatResult`. Tool-call arguments are fitted to the ``tools`` schemas.

    Raises:
        TypeError / ValueError: an argument of the wrong type or range (the message names
            it); an unknown keyword (from the ``openai`` SDK).
        ServerConnectionError: nothing (or no vLLM server) answers at the client's URL.
        ResponseError: unparsed tool-call markup (names the tool-parser flags), a budget
            the server rejects (names ``--reasoning-parser nemotron_v3``), ``max_tokens``
            above the server's ``max_model_len`` (names the limit), an unknown model.
        openai.APIError: any other HTTP failure, unchanged.

    Warns:
        ServerLimitUnknownWarning: ``GET /v1/models`` failed (vllm-router with a worker
            down): the default ``max_tokens`` is sent, and fitted if the server names a limit.
        The reply's warnings (:mod:`helpers.chat.types`), each with its flag on the result.
        helpers.chat.drafting.ReasoningBudgetUnenforcedWarning: a server budget asked of a
            server that drafts (vLLM may ignore it there; ``budget_method="two_pass"`` holds).
    """
    _check_client("chat", client)
    _check_model("chat", model)
    opts, extra = _options_from("chat", options, overrides)
    if opts.noise_tolerant:  # weightless mode: a failure on noise text is reported, not raised
        from helpers.chat.noise import noise_tolerant

        with noise_tolerant(True, "chat"):
            plain = opts.replace(noise_tolerant=False)
            return chat(
                client, model, messages_or_prompt, plain, budget_method=budget_method, **extra
            )
        return None
    if budget_method not in ("server", "two_pass"):
        raise ValueError(f"budget_method={budget_method!r}: use 'server' or 'two_pass'.")
    budget = opts.reasoning_budget
    two_pass = budget is not None and budget_method == "two_pass" and opts.thinking
    if two_pass and budget == 0:
        raise ValueError(
            "chat: reasoning_budget=0 with budget_method='two_pass' would make a first "
            "request with max_tokens=0: pass reasoning_budget >= 1, or thinking=False for "
            "no reasoning."
        )
    if budget is not None and opts.thinking and not two_pass:
        from helpers.chat.drafting import warn_if_unenforced

        warn_if_unenforced(client)  # a drafting server may ignore thinking_token_budget
    opts, max_model_len, unchecked = _fit_to_server("chat", client, model, opts)
    max_tokens = opts.max_tokens
    if max_tokens is None and budget is not None and max_model_len is not None:
        if budget >= max_model_len:
            raise _max_tokens_error(max_model_len, f"(reasoning_budget={budget})")
    turn = _Turn.of(opts, max_model_len)
    try:
        if two_pass:
            return _chat_two_pass(
                client,
                model,
                messages_or_prompt,
                opts,
                max_tokens if max_tokens is not None else max_model_len,
                extra,
                turn,
                unchecked=unchecked,
            )
        kwargs = build_request(model, messages_or_prompt, opts, **extra)
        return check_forced_call(
            _parse_reply(_create(client, kwargs, unchecked=unchecked), turn), opts
        )
    except _LimitNamed:  # the server named a smaller max_model_len: fitted to it now
        return chat(
            client, model, messages_or_prompt, options, budget_method=budget_method, **overrides
        )


def check_forced_call(result: ChatResult, opts: ChatOptions) -> ChatResult:
    """``result``, marked ``forced_call_ignored`` (with a
    :class:`~helpers.chat.types.ForcedToolCallIgnoredWarning`) when ``opts`` forced a tool
    call (``tool_choice="required"`` or a named tool) and the reply holds none: vLLM with
    ``qwen3_coder`` has answered a forced choice with text and ``finish_reason="stop"``
    (vllm-project/vllm #54808; PRs #35936, #44447; #49712)."""
    if opts.forces_tool_call and not result.tool_calls and not result.tool_calls_missing:
        result.forced_call_ignored = True
        _warn(
            result,
            ForcedToolCallIgnoredWarning,
            f"The request forced a tool call (tool_choice={opts.tool_choice!r}) but the server "
            f"answered with text (finish_reason={result.finish_reason!r}) and no call: vLLM "
            "with the qwen3_coder parser has ignored forced tool choices (vllm-project/vllm "
            "#54808). The text is not the call that was asked for; use tool_choice='auto' (the "
            "model calls tools as it was trained to), or retry.",
        )
    return result


def _chat_two_pass(
    client: Any,
    model: str,
    messages_or_prompt: Any,
    options: ChatOptions,
    max_tokens: int,
    extra: dict[str, Any],
    turn: _Turn,
    *,
    unchecked: bool = False,
) -> ChatResult:
    """Client-side reasoning budget (``options.reasoning_budget``, >= 1) for servers
    without ``thinking_token_budget``; ``max_tokens`` caps both requests together; ``turn``
    as the request asked (each pass is checked as what it is)."""
    budget = options.reasoning_budget
    assert budget is not None
    messages = as_messages(messages_or_prompt)
    first_opts = options.replace(max_tokens=budget, reasoning_budget=None)
    with warnings.catch_warnings():
        # Running out at the budget is the point of pass 1; don't warn about it.
        warnings.simplefilter("ignore", ReasoningTruncatedWarning)
        first = _parse_reply(
            _create(
                client, build_request(model, messages, first_opts, **extra), unchecked=unchecked
            ),
            replace(turn, thinking=True, force_nonempty_content=False, max_tokens=budget),
        )
    if first.finish_reason != "length" or first.tool_calls or first.content.strip():
        # Reasoning ended inside the budget (answer possibly cut at the budget: then the
        # caller sees finish_reason="length" with content, as with any max_tokens).
        first.warnings = [w for w in first.warnings if "while still reasoning" not in w]
        first.truncated_in_reasoning = False
        return first
    prefix = f"{THINK_START}\n{first.reasoning.rstrip()}\n{THINK_END}\n\n"
    extra_body = dict(extra.get("extra_body") or {})
    extra_body.update(continue_final_message=True, add_generation_prompt=False)
    second_opts = options.replace(
        max_tokens=max(1, max_tokens - first.usage.completion_tokens), reasoning_budget=None
    )
    second_kwargs = build_request(
        model,
        messages + [{"role": "assistant", "content": prefix}],
        second_opts,
        **{**extra, "extra_body": extra_body},
    )
    second = _parse_reply(
        _create(client, second_kwargs, unchecked=unchecked),
        replace(
            turn, thinking=False, force_nonempty_content=False, max_tokens=second_opts.max_tokens
        ),
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
