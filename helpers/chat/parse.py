"""Check a vLLM chat reply (:func:`check_reply`: the ``ChatCompletion`` that
``client.chat.completions.create`` returned) and read it into a
:class:`~helpers.chat.types.ChatResult`, with the checks that tell a real answer from a
truncated, misparsed or misplaced one (:data:`FINISH_CHECKS`, shared with
:func:`helpers.chat.stream.check_stream`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helpers.chat.toolargs import fit_calls
from helpers.chat.types import (
    REASONING_PARSER_FLAGS,
    THINK_END,
    THINK_START,
    TOOL_MARKUP,
    TOOL_PARSER_FLAGS,
    ChatResult,
    ForcedToolCallIgnoredWarning,
    ReasoningParserMissingWarning,
    ReasoningTruncatedWarning,
    ToolCall,
    ToolCallInReasoningWarning,
    ToolCallsMissingWarning,
    ToolCallTruncatedWarning,
    Usage,
    _get,
    _reasoning_of,
    _warn,
)
from helpers.errors import ResponseError, check_number

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
    qwen3_coder does; :mod:`helpers.chat.toolargs` then fits them to the schema."""
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


def _check_tool_truncation(result: ChatResult, turn: _Turn) -> str | None:
    """Where a reply that offered tools was cut inside a tool call, move the fragment out of
    the answer and return a description of it (``None`` when it was not)."""
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
            _calls_to_fragment(result)
            return "the server streamed the start of a call whose arguments never ended"
        reasoning_ended = (
            u.reasoning_tokens is not None and u.reasoning_tokens < u.completion_tokens
        )
        if not result.content.strip() and reasoning_ended:
            return (
                "the reasoning ended but nothing after it arrived: the server's tool parser "
                "holds back a tool call until it is complete"
            )
        return None
    # vLLM 0.32 reports a cut call as finish_reason="tool_calls" (it parses the fragment:
    # chat_completion_full_generator). The token count is what gives it away.
    max_tokens, max_model_len = turn.max_tokens, turn.max_model_len
    used_all = (max_tokens is not None and u.completion_tokens >= max_tokens) or (
        max_tokens is None
        and max_model_len is not None
        and u.prompt_tokens + u.completion_tokens >= max_model_len
    )
    if result.finish_reason == "tool_calls" and result.tool_calls and used_all:
        _calls_to_fragment(result)
        return (
            f"all {u.completion_tokens} tokens were used and the server still reported "
            "finish_reason='tool_calls' (vLLM parses the unfinished call)"
        )
    return None


def _calls_to_fragment(result: ChatResult) -> None:
    """Move the (unfinished) parsed calls out of ``tool_calls`` into ``tool_call_fragment``."""
    result.tool_call_fragment = "\n".join(
        f"{tc.name}({tc.raw_arguments})" for tc in result.tool_calls
    )
    result.tool_calls = []


@dataclass(frozen=True)
class _Turn:
    """What a turn's checks read besides the reply: what the request asked for (the keywords
    of :func:`check_reply`, read as ``chat.completions.create`` reads them)."""

    thinking: bool = True
    force_nonempty_content: bool = False
    max_tokens: int | None = None
    tool_schemas: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    recover_tool_calls: bool = False
    max_model_len: int | None = None

    @property
    def tools_requested(self) -> bool:
        """Tools were offered and ``tool_choice`` is not ``"none"``: only then does the server
        parse calls, so only then is unparsed markup an error."""
        return bool(self.tool_schemas) and self.tool_choice != "none"

    @property
    def forces_tool_call(self) -> bool:
        """Tools offered with ``tool_choice="required"`` or a named function."""
        return bool(self.tool_schemas) and (
            self.tool_choice == "required" or isinstance(self.tool_choice, Mapping)
        )

    @property
    def limit(self) -> str:
        """The limit a cut reply ran into, as the warnings word it."""
        if self.max_tokens is not None:
            return f"max_tokens={self.max_tokens}"
        if self.max_model_len is not None:
            return f"max_tokens (unset: the rest of max_model_len={self.max_model_len})"
        return "max_tokens"


def asked_turn(
    fn: str,
    *,
    max_tokens: int | None = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    extra_body: Mapping[str, Any] | None = None,
    recover_tool_calls: bool = False,
    max_model_len: int | None = None,
) -> _Turn:
    """The turn a request asked for, from the keywords it was sent with (the names and shapes
    of ``client.chat.completions.create``): thinking and ``force_nonempty_content`` from
    ``extra_body["chat_template_kwargs"]`` (thinking on when unset, the model card's default).

    Raises:
        TypeError: a keyword of the wrong shape (the message names it and ``fn``).
    """
    check_number(fn, "max_tokens", max_tokens, integer=True, minimum=1, optional=True)
    check_number(fn, "max_model_len", max_model_len, integer=True, minimum=1, optional=True)
    if tools is not None and (
        isinstance(tools, Mapping)
        or not isinstance(tools, (list, tuple))
        or not all(isinstance(t, Mapping) and "function" in t for t in tools)
    ):
        raise TypeError(
            f"{fn}: `tools` must be the list of function-tool schemas the request sent "
            '([{"type": "function", "function": {...}}], e.g. [tool_schema(fn)]); got '
            f"{tools!r:.100}."
        )
    if extra_body is not None and not isinstance(extra_body, Mapping):
        raise TypeError(
            f"{fn}: `extra_body` must be the dict the request sent; got {extra_body!r:.80}."
        )
    template = (extra_body or {}).get("chat_template_kwargs") or {}
    return _Turn(
        thinking=bool(template.get("enable_thinking", True)),
        force_nonempty_content=bool(template.get("force_nonempty_content", False)),
        max_tokens=max_tokens,
        tool_schemas=list(tools) if tools else None,
        tool_choice=tool_choice,
        recover_tool_calls=bool(recover_tool_calls),
        max_model_len=max_model_len,
    )


def _reasoning_left_in_content(result: ChatResult, turn: _Turn) -> bool:
    """Reasoning inside ``content``: the server runs without ``--reasoning-parser``. Split
    it into ``reasoning`` and ``content`` and say so; the other checks still run."""
    content = result.content
    if result.reasoning:
        return False
    if THINK_END in content:
        before, _, after = content.partition(THINK_END)
        before = before.strip()
        if before.startswith(THINK_START):
            before = before[len(THINK_START) :].strip()
        result.reasoning, result.content = before, after.lstrip("\n")
        said = (
            "The server returned the model's reasoning inside `content` (ended by a lone "
            "</think>): it runs without a reasoning parser. The helper split it into "
            "`reasoning` and `content`; restart vLLM with "
            f"`{REASONING_PARSER_FLAGS}` so the server does this (and so "
            "`thinking_token_budget` works)."
        )
    elif content.lstrip().startswith(THINK_START):
        # An opened, never-closed think block: all of it is reasoning.
        result.reasoning, result.content = content.lstrip()[len(THINK_START) :].strip(), ""
        said = (
            "The server returned an unclosed <think> block inside `content`: it runs without "
            f"a reasoning parser. Restart vLLM with `{REASONING_PARSER_FLAGS}`."
        )
    elif (
        turn.thinking
        and not turn.force_nonempty_content
        and result.finish_reason == "length"
        and content.strip()
        and not result.tool_calls
        and result.usage.reasoning_tokens is None
    ):
        # Cut at max_tokens before any </think>, and no reasoning_tokens in usage (vLLM
        # reports them only with a reasoning parser): the template opened <think> in the
        # prompt, so this text is unfinished reasoning.
        result.reasoning, result.content = content.strip(), ""
        said = (
            "The server runs without a reasoning parser (usage has no reasoning_tokens) and "
            "the reply was cut at max_tokens before </think>: the text in `content` is "
            "unfinished reasoning, moved to `reasoning` by the helper. Restart vLLM with "
            f"`{REASONING_PARSER_FLAGS}`."
        )
    else:
        return False
    result.reasoning_parser_missing = True
    _warn(result, ReasoningParserMissingWarning, said)
    return False


def _cut_inside_tool_call(result: ChatResult, turn: _Turn) -> bool:
    """Cut by max_tokens inside a tool call: nothing usable, the fragment is no answer."""
    if not turn.tools_requested:
        return False
    cut = _check_tool_truncation(result, turn)
    if not cut:
        return False
    result.truncated_in_tool_call = True
    _warn(
        result,
        ToolCallTruncatedWarning,
        f"Truncated inside a tool call: raise max_tokens. The model used all {turn.limit} "
        f"while writing a tool call ({cut}); no call was returned or run, and the "
        "fragment is in `tool_call_fragment`, not in `content`.",
    )
    return True


def _tool_call_in_reasoning(result: ChatResult, turn: _Turn) -> bool:
    """A complete call at the end of unfinished reasoning (no ``</think>``): a reasoning
    parser that does not stop at ``<tool_call>`` kept it as reasoning (e.g. deepseek_r1 in
    vLLM 0.32; the pre-engine nemotron_v3 reasoning parser). Recovered when asked."""
    if not turn.tools_requested or result.tool_calls or result.content.strip():
        return False
    found = _trailing_tool_calls(result.reasoning)
    if not found:
        return False
    start, calls = found
    result.tool_call_in_reasoning = True
    names = ", ".join(f"{n}({json.dumps(a, ensure_ascii=False)})" for n, a in calls)
    said = (
        f"The model wrote tool call(s) {names} at the end of its reasoning without closing "
        "</think>, and the server's reasoning parser kept them as reasoning"
    )
    fix = (
        "a reasoning parser that ends reasoning at <tool_call> "
        f"(`{REASONING_PARSER_FLAGS}` on vLLM >= 0.32)."
    )
    if turn.recover_tool_calls:
        result.tool_calls = [
            ToolCall.from_raw(f"chatcmpl-tool-recovered-{i}", n, json.dumps(a))
            for i, (n, a) in enumerate(calls)
        ]
        result.tool_call_fragment = result.reasoning[start:]
        result.reasoning = result.reasoning[:start].rstrip()
        said += " (no tool_calls). Recovered them as tool calls (recover_tool_calls=True). The "
        said += f"server-side fix: {fix}"
    else:
        said += ", so the reply has no tool_calls and no answer. Check it with "
        said += f"recover_tool_calls=True to run them, or serve with {fix}"
    _warn(result, ToolCallInReasoningWarning, said)
    return True


def _tool_calls_missing(result: ChatResult, turn: _Turn) -> bool:
    """``finish_reason="tool_calls"`` but no call (vLLM 0.32 does this for
    ``tool_choice="required"`` when nothing parses): not an answer."""
    if result.finish_reason != "tool_calls" or result.tool_calls:
        return False
    result.tool_calls_missing = True
    _warn(
        result,
        ToolCallsMissingWarning,
        "The server reported finish_reason='tool_calls' but the reply holds no tool call, "
        "so `content` is not a final answer: the model's tool call did not parse. Retry "
        "the request, check the server's --tool-call-parser (Nemotron: "
        f"`{TOOL_PARSER_FLAGS}`), or use tool_choice='auto'.",
    )
    return True


def _unparsed_tool_markup(result: ChatResult, turn: _Turn) -> bool:
    """Tool-call markup the server did not parse: its tool parser is not Nemotron's. Only an
    error when tools were offered (with tool_choice="none" or no tools, vLLM does not parse
    calls by design).

    Raises:
        ResponseError: naming the parser flags; ``err.result`` holds the reply.
    """
    if (
        turn.tools_requested
        and not result.tool_calls
        and any(m in result.content for m in TOOL_MARKUP)
    ):
        err = ResponseError(
            "The model wrote tool-call markup (<tool_call>/<function=...>) in `content` but "
            "the server returned no `tool_calls`: its tool parser is not configured for "
            f"Nemotron. Restart vLLM with `{TOOL_PARSER_FLAGS}` (another parser, e.g. "
            "hermes, leaves this XML format in content)."
        )
        err.result = result  # type: ignore[attr-defined]
        raise err
    return False


def _cut_while_reasoning(result: ChatResult, turn: _Turn) -> bool:
    """max_tokens ran out during reasoning. With force_nonempty_content (or thinking off)
    nemotron_v3 moves unfinished reasoning into content, so "reasoning empty, content set,
    no ``</think>`` ever seen" is the same situation."""
    if not (turn.thinking and result.finish_reason == "length" and not result.tool_calls):
        return False
    no_answer = not result.content.strip()
    # When the server counts reasoning tokens, "all of them were reasoning" confirms it.
    counted = result.usage.reasoning_tokens
    moved = (
        turn.force_nonempty_content
        and not result.reasoning
        and not result.reasoning_parser_missing
        and bool(result.content.strip())
        and (counted is None or counted >= result.usage.completion_tokens)
    )
    if no_answer or moved:
        result.truncated_in_reasoning = True
        where = (
            "`content` holds the unfinished reasoning (the nemotron_v3 parser moves it "
            "there when force_nonempty_content is set)"
            if moved
            else "`content` is empty"
        )
        _warn(
            result,
            ReasoningTruncatedWarning,
            f"The model used all {turn.limit} while still reasoning, so there is no answer: "
            f"{where}. Reasoning tokens count against max_tokens. Fix: raise max_tokens, cap "
            'the reasoning (extra_body={"thinking_token_budget": N}, N below max_tokens), or '
            'turn it off (extra_body={"chat_template_kwargs": {"enable_thinking": False}}).',
        )
    return True


#: The checks of a finished turn, in order; the first that returns True ends them.
FINISH_CHECKS = (
    _reasoning_left_in_content,
    _cut_inside_tool_call,
    _tool_call_in_reasoning,
    _tool_calls_missing,
    _unparsed_tool_markup,
    _cut_while_reasoning,
)


def _forced_call_ignored(result: ChatResult, turn: _Turn) -> None:
    """A forced tool call (``tool_choice="required"`` or a named tool) answered with text and no
    call: vLLM with ``qwen3_coder`` has done it with ``finish_reason="stop"``
    (vllm-project/vllm #54808; PRs #35936, #44447; #49712). Run after :data:`FINISH_CHECKS`."""
    if turn.forces_tool_call and not result.tool_calls and not result.tool_calls_missing:
        result.forced_call_ignored = True
        _warn(
            result,
            ForcedToolCallIgnoredWarning,
            f"The request forced a tool call (tool_choice={turn.tool_choice!r}) but the server "
            f"answered with text (finish_reason={result.finish_reason!r}) and no call: vLLM "
            "with the qwen3_coder parser has ignored forced tool choices (vllm-project/vllm "
            "#54808). The text is not the call that was asked for; use tool_choice='auto' (the "
            "model calls tools as it was trained to), or retry.",
        )


def _finish(result: ChatResult, turn: _Turn) -> ChatResult:
    """The checks shared by streamed and non-streamed turns.

    What vLLM 0.32 does that they rely on (``vllm/parser/nemotron_v3.py``,
    ``vllm/parser/qwen3.py``, ``vllm/entrypoints/openai/chat_completion/serving.py``):
    reasoning tokens count against ``max_tokens``; with ``enable_thinking=False`` or
    ``force_nonempty_content=True`` nemotron_v3 moves the reasoning into an otherwise empty
    ``content``; the first content after ``</think>`` keeps its leading newline. A reply cut
    inside a call comes as ``"length"`` with the markup in ``content``; not streamed, as a
    parsed call with ``"tool_calls"`` (told by the token count); streamed, as ``"length"``
    with the arguments unfinished or held back.
    """
    for check in FINISH_CHECKS:
        if check(result, turn):
            break
    fit_calls(result, turn.tool_schemas)
    _forced_call_ignored(result, turn)
    return result


def check_reply(reply: Any, **asked: Any) -> ChatResult:
    """Check a ``client.chat.completions.create`` reply and read it into a :class:`ChatResult`:
    the reasoning apart from the answer, the tool calls with their arguments fitted to the
    tools' schemas, and a warning for each way the reply is no real answer.

    Args:
        reply: the ``ChatCompletion`` (SDK object or its JSON dict).
        **asked: what the request was sent with, by ``create``'s names, each optional:
            ``max_tokens`` (tokens; a call cut at it is told by the token count),
            ``tools`` (the schemas sent: calls are checked and fitted to them),
            ``tool_choice``, ``extra_body`` (its ``chat_template_kwargs``: thinking off,
            ``force_nonempty_content``); and the checker's own ``recover_tool_calls`` (a
            complete call left at the end of the reasoning becomes a call) and
            ``max_model_len`` (tokens; the server's limit when no ``max_tokens`` was sent).

    Returns:
        The checked :class:`ChatResult`; each warning also sets its flag on it.

    Raises:
        TypeError: a keyword of the wrong shape, or an unknown one.
        ResponseError: tool-call markup in ``content`` with no ``tool_calls`` while tools
            were offered (the server lacks ``--enable-auto-tool-choice --tool-call-parser
            qwen3_coder``), or a reply with no choices.

    Warns:
        The warnings of :mod:`helpers.chat.types` (:data:`FINISH_CHECKS`, then a forced
        tool choice answered with text; :class:`ToolArgumentWarning` per argument that does
        not fit its schema).
    """
    turn = asked_turn("check_reply", **asked)
    choices = _get(reply, "choices") or []
    if not choices:
        raise ResponseError(
            "The server's response has no choices; check the server log for the error "
            "(helpers.server.vllm_server keeps it) and retry."
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
        usage=Usage.from_raw(_get(reply, "usage")),
        raw=reply,
    )
    return _finish(result, turn)
