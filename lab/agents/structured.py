"""JSON-schema answers: vLLM's constrained decoding, validated with pydantic.

Two ways to send the schema (vLLM 0.32.0 source):

- ``compact=True`` (default): compiled here by ``xgrammar`` with no optional whitespace and
  sent as ``structured_outputs={"grammar": ...}``. Why: vLLM 0.32.0 turns xgrammar's unbounded
  whitespace off only server-wide (``--structured-outputs-config.disable_any_whitespace``;
  ``vllm/v1/structured_output/backend_xgrammar.py`` ignores the request's). On the stand-in,
  greedy, ``response_format`` gave ``"{"`` then newlines to ``max_tokens``
  (``tests/data/responses/structured_whitespace_runaway.json``), the grammar a valid object
  in 17 tokens. A trained model writes the JSON either way.
- ``compact=False``: the OpenAI ``response_format`` json_schema, which vLLM turns into the
  same ``StructuredOutputsParams(json=schema)`` (``structured_outputs_from_response_format``,
  ``vllm/entrypoints/generate/base/protocol.py``).

Not ``guided_json``: removed in 0.32.0 (``_REMOVED_GUIDED_FIELDS``,
``vllm/entrypoints/serve/engine/protocol.py``) and ignored as an extra field: HTTP 200 with
*unconstrained* output (vllm-project/vllm #53975).

With a reasoning parser vLLM applies the grammar only after ``</think>``
(``StructuredOutputsConfig.enable_in_reasoning=False``, ``vllm/config/structured_outputs.py``),
so a reasoning that runs to ``max_tokens`` leaves no answer
(:class:`~helpers.errors.StructuredAnswerMissingError`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from helpers.chat.parse import skip_in_warnings, warn_from_caller
from helpers.chat.request import ChatOptions, _options_from
from helpers.chat.types import ChatResult, StreamEvent
from helpers.errors import (
    SchemaNotEnforcedError,
    StructuredAnswerInReasoningError,
    StructuredAnswerMissingError,
    StructuredOutputError,
    StructuredOutputInvalidError,
)
from helpers.server.request_failure import error_words

skip_in_warnings(__file__)  # a schema answer's warning points at the caller, as chat's do

#: Reports of constrained decoding breaking with drafting + a reasoning parser (vLLM tracker).
DRAFTING_REPORTS = "vllm-project/vllm #34650, #44012, #47027, #48863"


class StructuredOutputDraftingWarning(UserWarning):
    """A JSON-schema answer with reasoning on was asked of a server that drafts.

    Speculative decoding + a reasoning parser + structured outputs breaks when ``</think>`` lands
    inside one step's drafted tokens: the drafts after it must be checked against the grammar, and
    on several releases were not (#34650; fixes #44297, masking the rest of the window, and #44993,
    advancing the grammar across the boundary; #48516 on the doubled ``{{`` of #48228; #44012 the
    Responses ``text.format`` variant; #47027 and #48863 are cited by the cookbook's issue (threads
    not read here)). 0.28.0 only "tolerates rejection" of those drafts
    (``StructuredOutputManager.grammar_bitmask``, ``vllm/v1/structured_output/__init__.py``); 0.32.0
    and 0.33.0 keep their longest grammar-valid prefix (``validate_tokens``). Not measured on a
    drafting GPU here, so every drafting server is warned about. ``thinking=False`` constrains from
    the first token: no warning.
    """


@dataclass
class StructuredResult:
    """A validated JSON-schema answer: ``value`` the pydantic instance validated from
    ``chat.content``, ``chat`` the :class:`~helpers.chat.types.ChatResult`, ``events`` the
    stream's :class:`~helpers.chat.types.StreamEvent` s (``[]`` when not streamed)."""

    value: Any
    chat: ChatResult
    events: list[StreamEvent]


def json_schema_of(schema: type) -> dict[str, Any]:
    """``schema.model_json_schema()``, checked before anything is compiled or sent.

    Raises:
        StructuredOutputError: pydantic cannot render the schema (its words, the fix).
    """
    import pydantic

    try:
        return schema.model_json_schema()
    except (pydantic.PydanticUserError, KeyError, TypeError, ValueError) as e:
        reason = str(e).split("\n")[0]
        raise StructuredOutputError(
            f"pydantic cannot write a JSON schema for {schema.__name__}: {reason or type(e).__name__}. "
            "Fix the model (every field a type pydantic renders as JSON schema, every "
            "annotation defined), then send it again; no backend can enforce a schema pydantic "
            "cannot write."
        ) from None


def response_format_for(schema: type, *, strict: bool = True) -> dict[str, Any]:
    """The OpenAI ``response_format`` dict for a pydantic model class.

    Args:
        schema: a ``pydantic.BaseModel`` subclass; its ``model_json_schema()`` is sent.
        strict: sent as ``json_schema.strict`` (vLLM enforces the schema either way).

    Raises:
        TypeError: ``schema`` is not a pydantic model class.
        StructuredOutputError: pydantic cannot write its JSON schema (:func:`json_schema_of`).
    """
    _check_schema("response_format_for", schema)
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema.__name__,
            "schema": json_schema_of(schema),
            "strict": strict,
        },
    }


def compact_grammar_for(schema: type) -> str:
    """A ``pydantic.BaseModel`` subclass as an xgrammar EBNF grammar with no optional
    whitespace (``{"a":1,"b":"x"}``), for vLLM's ``structured_outputs={"grammar": ...}``.

    Raises:
        TypeError: ``schema`` is not a pydantic model class.
        StructuredOutputError: ``xgrammar`` is not installed here (it comes with vLLM;
            ``pip install xgrammar``, or pass ``compact=False``), or it cannot compile the
            schema (the message quotes it).
    """
    _check_schema("compact_grammar_for", schema)
    try:
        import xgrammar
    except ImportError:
        raise StructuredOutputError(
            "compact=True compiles the schema with xgrammar, which is not installed here: "
            "`pip install xgrammar` (vLLM installs it), or pass compact=False to send "
            "response_format instead."
        ) from None
    rendered = json.dumps(json_schema_of(schema))  # pydantic's own failure, not xgrammar's
    try:
        grammar = xgrammar.Grammar.from_json_schema(
            rendered, any_whitespace=False, separators=(",", ":")
        )
    except Exception as e:  # noqa: BLE001 - xgrammar raises RuntimeError/ValueError by case
        raise StructuredOutputError(
            f"xgrammar cannot compile the schema of {schema.__name__}: {e}. Simplify the "
            "schema, or pass compact=False to let the server's backend try it."
        ) from None
    return str(grammar)


def _check_schema(fn: str, schema: Any) -> None:
    import pydantic

    if not (isinstance(schema, type) and issubclass(schema, pydantic.BaseModel)):
        raise TypeError(
            f"{fn}: `schema` must be a pydantic model class (class Answer(pydantic.BaseModel): "
            f"...); got {schema!r:.80}."
        )


def warn_if_drafting(client: Any, thinking: bool) -> bool:
    """Warn (:class:`StructuredOutputDraftingWarning`) when a reasoning request
    (``thinking``) goes to a server that drafts (:func:`helpers.chat.drafting.server_facts`);
    return whether it warned."""
    from helpers.chat.drafting import warn_if_drafting as warn

    return thinking and warn(
        client,
        StructuredOutputDraftingWarning,
        " and constrained decoding with a reasoning parser is reported broken there when the "
        f"reasoning end (</think>) lands inside drafted tokens ({DRAFTING_REPORTS}): the answer "
        "may ignore the schema or be invalid JSON. It is still validated here "
        "(StructuredOutputInvalidError if it breaks); to avoid the combination pass "
        "thinking=False, or serve without --speculative-config.",
    )


def structured_chat(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    schema: type,
    options: ChatOptions | None = None,
    *,
    stream: bool = False,
    compact: bool = True,
    on_event: Callable[[StreamEvent], None] | None = None,
    from_reasoning: bool = False,
    **overrides: Any,
) -> StructuredResult | None:
    """Ask for an answer constrained to ``schema`` and return it validated.

    Args:
        client, model, messages_or_prompt, options, **overrides: as in
            :func:`~helpers.chat.completions.chat`; ``tools`` are refused (a schema answer is
            the final answer).
        schema: a ``pydantic.BaseModel`` subclass: its JSON schema is sent (see
            ``compact``) and ``content`` is validated with ``schema.model_validate_json``.
        stream: stream the turn (:func:`~helpers.chat.stream.stream_chat`); the JSON is
            validated once the stream ends.
        compact: ``True`` sends :func:`compact_grammar_for` (needs ``xgrammar``); ``False``
            the OpenAI ``response_format`` (:func:`response_format_for`). Module notes: why.
        on_event: called with each :class:`~helpers.chat.types.StreamEvent` as it arrives
            (``stream=True`` only), e.g. to print the JSON as it is written.
        from_reasoning: as in :func:`validate_answer`.

    Returns:
        A :class:`StructuredResult`: ``.value`` the validated instance, ``.chat`` the turn.
        ``None`` when ``noise_tolerant`` and the answer failed on noise text (printed,
        :func:`helpers.chat.noise.noise_tolerant`).

    Raises:
        TypeError: ``schema`` is not a pydantic model class, ``tools`` or
            ``response_format`` given (the helper sets it), ``on_event`` without ``stream``.
        StructuredOutputError: ``compact=True`` without ``xgrammar``, or xgrammar cannot
            compile the schema.
        SchemaNotEnforcedError: the server answered HTTP 400 to the schema (quoted).
        StructuredAnswerInReasoningError, StructuredAnswerMissingError,
            StructuredOutputInvalidError: as :func:`validate_answer`.
        ServerConnectionError, ResponseError: as ``chat``.

    Warns:
        StructuredOutputDraftingWarning: reasoning on and the server drafts
            (:data:`DRAFTING_REPORTS`).
        ReasoningTruncatedWarning: as ``chat`` (before the missing-answer error).
    """
    import openai

    _check_schema("structured_chat", schema)
    if "response_format" in overrides:
        raise TypeError(
            "structured_chat: pass the answer's shape as `schema` (a pydantic model class), "
            "not `response_format`: the helper builds it."
        )
    if on_event is not None and not stream:
        raise TypeError("structured_chat: `on_event` needs stream=True.")
    merged, _ = _options_from("structured_chat", options, overrides)  # checks the arguments
    opts = options if options is not None else ChatOptions()
    if merged.tools:
        raise TypeError(
            "structured_chat: `tools` are not sent with a schema answer (vLLM 0.32 refuses "
            "structured outputs with a named tool_choice). Run the tools first "
            "(run_tool_loop), then ask for the schema answer."
        )
    if merged.noise_tolerant:  # weightless: report, not raise
        from helpers.chat.noise import noise_tolerant

        overrides["noise_tolerant"] = False
        with noise_tolerant(True, "schema answer"):
            return structured_chat(
                client,
                model,
                messages_or_prompt,
                schema,
                opts,
                stream=stream,
                compact=compact,
                on_event=on_event,
                from_reasoning=from_reasoning,
                **overrides,
            )
        return None
    warn_if_drafting(client, merged.thinking)
    if compact:
        extra_body = dict(overrides.pop("extra_body", None) or {})
        extra_body["structured_outputs"] = {"grammar": compact_grammar_for(schema)}
        overrides["extra_body"] = extra_body
    else:
        overrides["response_format"] = response_format_for(schema)
    events: list[StreamEvent] = []
    try:
        if stream:
            from helpers.chat.stream import stream_chat

            chat_stream = stream_chat(client, model, messages_or_prompt, opts, **overrides)
            for event in chat_stream:
                events.append(event)
                if on_event is not None:
                    on_event(event)
            result = chat_stream.result
        else:
            from helpers.chat.completions import chat

            result = chat(client, model, messages_or_prompt, opts, **overrides)
    except openai.BadRequestError as e:
        raise SchemaNotEnforcedError(
            f"The server refused to enforce the schema {schema.__name__} (HTTP 400): "
            f"{error_words(e)} Simplify the schema (drop features the backend lacks), or "
            "send it without tools / structured_outputs alongside.",
            server_message=error_words(e),
        ) from None
    value = validate_answer(result, schema, from_reasoning=from_reasoning)
    if merged.thinking and not (result.reasoning or "").strip():
        warn_unreasoned(result, schema)
    return StructuredResult(value=value, chat=result, events=events)


class StructuredAnswerNotReasonedWarning(UserWarning):
    """A schema answer asked with thinking on came back without reasoning."""


def warn_unreasoned(result: ChatResult, schema: type) -> None:
    """Warn :class:`StructuredAnswerNotReasonedWarning` for a valid schema answer asked with
    thinking on that has no reasoning (null ``reasoning_tokens`` in vLLM 0.32.0: no
    ``--reasoning-parser``, vllm-project/vllm #47027; 0: the model skipped it)."""
    if result.usage.reasoning_tokens is None:
        why = (
            "the server reports no reasoning tokens, so it runs without a reasoning parser (or "
            "is not known to run one): vLLM then applies the schema's grammar from the first "
            "token and the model cannot reason (vllm-project/vllm #47027). Serve with "
            "--reasoning-parser nemotron_v3 for reasoning before the answer, or ask with "
            "thinking=False to say it"
        )
    else:
        why = "the model wrote no reasoning before the answer (0 reasoning tokens)"
    warn_from_caller(
        StructuredAnswerNotReasonedWarning,
        f"The {schema.__name__} answer is valid but the model did not reason, though "
        f"thinking was on: {why}.",
    )


def json_in(text: str) -> str | None:
    """The last JSON object in ``text`` (a ``{...}`` that ``json`` decodes whole), or None."""
    decoder = json.JSONDecoder()
    for start in range(len(text) - 1, -1, -1):
        if text[start] != "{":
            continue
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return text[start:end]
    return None


class StructuredAnswerRecoveredWarning(UserWarning):
    """A schema answer was validated from ``reasoning`` (``from_reasoning=True``): the server
    put it there, with ``content`` empty."""


def validate_answer(result: ChatResult, schema: type, *, from_reasoning: bool = False) -> Any:
    """``schema`` validated from ``result.content``; the reasoning is read only when
    ``content`` is empty and holds a JSON object (the answer put in the wrong field).

    Args:
        result: a turn from ``chat`` / ``stream_chat`` (or :func:`structured_chat`'s ``.chat``).
        schema: a ``pydantic.BaseModel`` subclass.
        from_reasoning: validate a JSON object found in ``reasoning`` when ``content`` is empty
            (warns :class:`StructuredAnswerRecoveredWarning`) instead of raising
            :class:`~helpers.errors.StructuredAnswerInReasoningError`.

    Raises:
        StructuredAnswerInReasoningError: ``content`` empty, a JSON object in ``reasoning``
            (vllm-project/vllm #19222), ``from_reasoning`` False.
        StructuredAnswerMissingError: ``finish_reason == "length"`` and ``content`` is empty.
        StructuredOutputInvalidError: ``content`` is not JSON, or does not validate.
    """
    import pydantic

    _check_schema("validate_answer", schema)
    text = result.content or ""
    found = json_in(result.reasoning or "") if not text.strip() else None
    if found is not None and result.finish_reason != "length":
        if not from_reasoning:
            raise StructuredAnswerInReasoningError(
                f"The {schema.__name__} answer came back in `reasoning`, with `content` empty: "
                "the reasoning parser put the JSON there (the model never closed its reasoning "
                "with </think>, e.g. a grammar applied inside the reasoning: "
                "--structured-outputs-config enable_in_reasoning, vllm-project/vllm #19222). "
                "Fix: ask with thinking=False, serve without enable_in_reasoning, or pass "
                "from_reasoning=True to validate it from `reasoning`. "
                f"Found: {found[:200]!r}.",
                text=text,
                reasoning=result.reasoning,
                finish_reason=result.finish_reason,
            )
        warn_from_caller(
            StructuredAnswerRecoveredWarning,
            f"The {schema.__name__} answer was in `reasoning` (content empty): validated from "
            "there, as from_reasoning=True asked.",
        )
        text = found
    reply = dict(text=text, reasoning=result.reasoning, finish_reason=result.finish_reason)
    if not text.strip():
        if result.finish_reason == "length":
            raise StructuredAnswerMissingError(
                f"No answer: max_tokens ran out after {result.usage.completion_tokens} tokens "
                f"while the model was still reasoning ({len(result.reasoning)} characters of "
                "reasoning, empty content), and vLLM constrains only the answer after the "
                "reasoning ends. Raise max_tokens, set a reasoning_budget, or pass "
                "thinking=False.",
                **reply,
            )
        raise StructuredOutputInvalidError(
            f"The reply's content is empty (finish_reason={result.finish_reason!r}): no "
            f"{schema.__name__} to validate.",
            **reply,
        )
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        cut = " (cut off at max_tokens)" if result.finish_reason == "length" else ""
        raise StructuredOutputInvalidError(
            f"The reply's content is not valid JSON{cut}: {e}. Text: {text[:200]!r}. Was the "
            "schema enforced? (a server without structured outputs, a drafting server, or "
            "max_tokens too small for the object).",
            **reply,
        ) from None
    try:
        return schema.model_validate_json(text)
    except pydantic.ValidationError as e:
        raise StructuredOutputInvalidError(
            f"The reply's content is JSON but not a valid {schema.__name__}: "
            f"{e.error_count()} error(s), first: {e.errors()[0]['msg']} at "
            f"{'.'.join(str(p) for p in e.errors()[0]['loc']) or '(root)'}. Text: {text[:200]!r}.",
            **reply,
            errors=e.errors(),
        ) from None
