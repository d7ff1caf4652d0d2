"""What a vLLM chat reply is once checked: the result types (the same for streamed and
non-streamed turns), the warnings a reply can raise, and reading fields off the ``openai``
SDK's objects or their JSON dicts.
"""

from __future__ import annotations

import json
import sys
import warnings
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

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
    call as reasoning. The checker's ``recover_tool_calls=True`` turns it into a call."""


class ToolCallTruncatedWarning(UserWarning):
    """``max_tokens`` ran out while the model was writing a tool call: no call is usable."""


class ToolCallsMissingWarning(UserWarning):
    """``finish_reason`` is ``"tool_calls"`` but the reply holds no tool call."""


class ForcedToolCallIgnoredWarning(UserWarning):
    """The request forced a tool call and the reply holds none (text instead)."""


class ToolArgumentWarning(UserWarning):
    """A tool-call argument does not fit the tool's JSON schema and could not be coerced."""


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
    """One assistant turn, checked (:func:`helpers.chat.parse.check_reply`,
    :func:`helpers.chat.stream.check_stream`).

    Attributes:
        reasoning: the model's thinking (``""`` when off or absent).
        content: the answer, as the server sent it (``""`` when absent).
        tool_calls: parsed tool calls, in the order the model made them.
        finish_reason: ``"stop"``, ``"length"`` (hit ``max_tokens``), ``"tool_calls"``...
        usage: token counts.
        raw: the SDK response object (a ``ChatCompletion``), the list of stream chunks, or
            the two replies of :func:`helpers.chat.drafting.two_pass_budget`.
        truncated_in_reasoning, reasoning_parser_missing, tool_call_in_reasoning,
            truncated_in_tool_call, tool_calls_missing, forced_call_ignored: set with the
            warning of the same name (:class:`ReasoningTruncatedWarning`...): ``content`` is
            then no real answer, except after a recovered call or a split-off reasoning.
        tool_call_fragment: the unfinished markup or arguments of a call cut by
            ``max_tokens``, or the recovered calls' markup (not in ``content``).
        warnings: the text of every warning raised while parsing this turn.
        notes: info lines about what parsing changed and why (also logged to the
            ``helpers.chat`` logger at INFO).
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
    forced_call_ignored: bool = False
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_message(self, include_reasoning: bool = True) -> dict[str, Any]:
        """This turn as an assistant message to append to ``messages``; vLLM hands its
        ``reasoning`` to the chat template (``vllm/renderers/chat_utils.py``), which decides
        whether to render it. ``include_reasoning=False`` leaves it out."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if include_reasoning and self.reasoning:
            msg["reasoning"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [tc.to_message_dict() for tc in self.tool_calls]
        return msg


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


# ─── reading SDK objects ──────────────────────────────────────────────────────────────


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


#: The functions that read a vLLM reply with :func:`_get`, by the API whose reply they read:
#: ``python -m tools.drift`` reads their code (each ``_get(x, "field")``, the ``or`` fallbacks,
#: the values a field is compared with) and checks every offered vLLM release still defines
#: those fields (``tools/drift_reads.py``; ``tests/tools/test_drift_behaviour.py`` fails on a
#: ``_get(x, "field")`` call in ``helpers/`` or ``lab/`` outside these functions). The
#: Responses and Messages readers are the lab's: ``lab.agents.apis.REPLY_READERS``.
REPLY_READERS: dict[str, tuple[str, ...]] = {
    "chat completions": (
        "helpers.chat.display.show",
        "helpers.chat.parse.check_reply",
        "helpers.chat.stream.check_stream",
        "helpers.chat.types.Usage.from_raw",
        "helpers.chat.types._reasoning_of",
    ),
}


def _reasoning_of(message: Any) -> str:
    """``reasoning`` (vLLM >= 0.10), else ``reasoning_content`` (older vLLM)."""
    return _get(message, "reasoning") or _get(message, "reasoning_content") or ""


def _client_url(client: Any) -> str:
    return str(getattr(client, "base_url", "") or "").rstrip("/")


def per_client(cache: weakref.WeakKeyDictionary, client: Any) -> dict[str, Any]:
    """The dict ``cache`` keeps for ``client`` at its current base URL (a new one, not kept,
    for a client that cannot be weakly referenced). A new client, or a new URL, asks again."""
    try:
        return cache.setdefault(client, {}).setdefault(_client_url(client), {})
    except TypeError:
        return {}


# ─── warnings that point at the notebook cell ────────────────────────────────────────

# The chat modules a warning's stack walk skips (:func:`warn_from_caller`), and the modules
# built on them that ask to be skipped too (:func:`skip_in_warnings`).
_CHAT_MODULES = {str(f) for f in Path(__file__).parent.glob("*.py")}


def skip_in_warnings(module_file: str) -> None:
    """Make the warnings the chat modules raise point past the module ``module_file`` (its
    ``__file__``) too, at its caller: a module that wraps the chat helpers calls it once at
    import (``lab.agents.structured``: a schema answer's warning points at the notebook cell)."""
    _CHAT_MODULES.add(str(module_file))


def _warn(result: ChatResult, category: type[Warning], text: str) -> None:
    """Record ``text`` on the result and :func:`warn_from_caller`."""
    result.warnings.append(text)
    warn_from_caller(category, text)


def warn_from_caller(category: type[Warning], text: str) -> None:
    """``warnings.warn(text, category)`` pointing at the first caller outside the chat
    modules (the notebook cell or test), however deep the helper chain was."""
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_code.co_filename in _CHAT_MODULES:
        frame, level = frame.f_back, level + 1
    warnings.warn(text, category, stacklevel=level)
