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

from helpers.chat.parse import check_reply
from helpers.chat.stream import check_stream
from helpers.chat.types import ChatResult, StreamEvent, skip_in_warnings, warn_from_caller
from helpers.errors import (
    SchemaNotEnforcedError,
    StructuredAnswerInReasoningError,
    StructuredAnswerMissingError,
    StructuredOutputError,
    StructuredOutputInvalidError,
)
from lab.agents.request_failure import error_words
from lab.agents.send import send

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
    from helpers.chat.drafting import server_facts

    facts = server_facts(client) if thinking else {"drafting": False}
    if facts["drafting"]:
        release = facts["version"] or "an unknown release"
        warn_from_caller(
            StructuredOutputDraftingWarning,
            f"This server drafts (speculative decoding; vLLM {release}) and constrained "
            "decoding with a reasoning parser is reported broken there when the reasoning end "
            f"(</think>) lands inside drafted tokens ({DRAFTING_REPORTS}): the answer may "
            "ignore the schema or be invalid JSON. It is still validated here "
            "(StructuredOutputInvalidError if it breaks); to avoid the combination pass "
            "thinking=False, or serve without --speculative-config.",
        )
    return bool(facts["drafting"])


def structured_chat(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    schema: type,
    *,
    thinking: bool = True,
    max_tokens: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    stream: bool = False,
    compact: bool = True,
    on_event: Callable[[StreamEvent], None] | None = None,
    from_reasoning: bool = False,
    noise_tolerant: bool = False,
    **create_kwargs: Any,
) -> StructuredResult | None:
    """Ask for an answer constrained to ``schema`` and return it validated: one
    ``client.chat.completions.create`` with the schema in the body, checked by
    :func:`~helpers.chat.parse.check_reply` (or :func:`~helpers.chat.stream.check_stream`).

    Args:
        client, model: an ``openai.OpenAI`` client and the served model name.
        messages_or_prompt: a user prompt string, or OpenAI-format messages.
        schema: a ``pydantic.BaseModel`` subclass: its JSON schema is sent (see
            ``compact``) and ``content`` is validated with ``schema.model_validate_json``.
        thinking: sent as ``chat_template_kwargs.enable_thinking``.
        max_tokens, temperature, top_p: sent when not None (tokens; sampling).
        stream: stream the turn; the JSON is validated once the stream ends.
        compact: ``True`` sends :func:`compact_grammar_for` (needs ``xgrammar``); ``False``
            the OpenAI ``response_format`` (:func:`response_format_for`). Module notes: why.
        on_event: called with each :class:`~helpers.chat.types.StreamEvent` as it arrives
            (``stream=True`` only), e.g. to print the JSON as it is written.
        from_reasoning: as in :func:`validate_answer`.
        noise_tolerant: weightless mode (``srv.run.noise``): an answer that fails on noise
            text is printed and None returned (:func:`lab.agents.noise.noise_tolerant`).
        **create_kwargs: more ``create`` keywords (``extra_body`` merged, ``seed``...);
            ``tools`` are refused (a schema answer is the final answer).

    Returns:
        A :class:`StructuredResult`: ``.value`` the validated instance, ``.chat`` the turn;
        ``None`` as ``noise_tolerant`` says.

    Raises:
        TypeError: ``schema`` is not a pydantic model class, ``tools`` or
            ``response_format`` given (the helper sets it), ``on_event`` without ``stream``.
        StructuredOutputError: ``compact=True`` without ``xgrammar``, or xgrammar cannot
            compile the schema.
        SchemaNotEnforcedError: the server answered HTTP 400 to the schema (quoted).
        StructuredAnswerInReasoningError, StructuredAnswerMissingError,
            StructuredOutputInvalidError: as :func:`validate_answer`.
        ServerConnectionError, ServerRequestError: as :func:`lab.agents.send.send`.

    Warns:
        StructuredOutputDraftingWarning: reasoning on and the server drafts
            (:data:`DRAFTING_REPORTS`).
        ReasoningTruncatedWarning: as ``check_reply`` (before the missing-answer error).
    """
    import openai

    _check_schema("structured_chat", schema)
    if "response_format" in create_kwargs:
        raise TypeError(
            "structured_chat: pass the answer's shape as `schema` (a pydantic model class), "
            "not `response_format`: the helper builds it."
        )
    if on_event is not None and not stream:
        raise TypeError("structured_chat: `on_event` needs stream=True.")
    if not isinstance(thinking, bool):
        raise TypeError(f"structured_chat: `thinking` must be True or False; got {thinking!r:.60}.")
    if create_kwargs.get("tools"):
        raise TypeError(
            "structured_chat: `tools` are not sent with a schema answer (vLLM 0.32 refuses "
            "structured outputs with a named tool_choice). Run the tools first, then ask for "
            "the schema answer."
        )
    if noise_tolerant:  # weightless: report, not raise
        from lab.agents.noise import noise_tolerant as tolerant

        with tolerant(True, "schema answer"):
            return structured_chat(
                client, model, messages_or_prompt, schema, thinking=thinking,
                max_tokens=max_tokens, temperature=temperature, top_p=top_p, stream=stream,
                compact=compact, on_event=on_event, from_reasoning=from_reasoning,
                **create_kwargs,
            )  # fmt: skip
        return None
    warn_if_drafting(client, thinking)
    extra_body = dict(create_kwargs.pop("extra_body", None) or {})
    extra_body["chat_template_kwargs"] = {
        **(extra_body.get("chat_template_kwargs") or {}),
        "enable_thinking": thinking,
    }
    if compact:
        extra_body["structured_outputs"] = {"grammar": compact_grammar_for(schema)}
    else:
        create_kwargs["response_format"] = response_format_for(schema)
    messages = (
        [{"role": "user", "content": messages_or_prompt}]
        if isinstance(messages_or_prompt, str)
        else [dict(m) for m in messages_or_prompt]
    )
    kwargs: dict[str, Any] = dict(model=model, messages=messages, extra_body=extra_body)
    for name, value in (("max_tokens", max_tokens), ("temperature", temperature), ("top_p", top_p)):
        if value is not None:
            kwargs[name] = value
    if stream:
        kwargs.update(stream=True, stream_options={"include_usage": True})
    kwargs.update(create_kwargs)

    def refused(e: Exception) -> Exception | None:
        if not isinstance(e, openai.BadRequestError):
            return None
        return SchemaNotEnforcedError(
            f"The server refused to enforce the schema {schema.__name__} (HTTP 400): "
            f"{error_words(e)} Simplify the schema (drop features the backend lacks), or "
            "send it without tools / structured_outputs alongside.",
            server_message=error_words(e),
        )

    reply = send(openai, client, client.chat.completions.create, "/v1/chat/completions", kwargs,
                 refused=refused)  # fmt: skip
    return check_structured(reply, schema, on_event=on_event, from_reasoning=from_reasoning,
                            max_tokens=max_tokens, extra_body=extra_body)  # fmt: skip


def check_structured(
    reply: Any,
    schema: type,
    *,
    on_event: Callable[[StreamEvent], None] | None = None,
    from_reasoning: bool = False,
    **asked: Any,
) -> StructuredResult:
    """Check and validate what ``client.chat.completions.create`` returned for a schema request:
    :func:`~helpers.chat.parse.check_reply` (a stream: :func:`~helpers.chat.stream.check_stream`),
    then :func:`validate_answer`, then :func:`warn_unreasoned` when thinking was on and no
    reasoning came back.

    Args:
        reply: the ``ChatCompletion``, or the stream ``stream=True`` returned.
        schema: the ``pydantic.BaseModel`` subclass the request's schema came from.
        on_event: called with each stream event as it arrives (a stream only).
        from_reasoning: as in :func:`validate_answer`.
        **asked: what the request was sent with, as ``check_reply`` takes it (``max_tokens``,
            ``extra_body``: its ``chat_template_kwargs.enable_thinking``, on when unset).

    Returns:
        A :class:`StructuredResult` (``events``: the stream's, ``[]`` for a reply).

    Raises:
        TypeError, ResponseError: as ``check_reply``.
        StructuredAnswerInReasoningError, StructuredAnswerMissingError,
            StructuredOutputInvalidError: as :func:`validate_answer`.
    """
    events: list[StreamEvent] = []

    def seen(event: StreamEvent) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    if isinstance(reply, Mapping) or hasattr(reply, "choices"):  # a ChatCompletion or its dict
        result = check_reply(reply, **asked)
    else:
        result = check_stream(reply, on_piece=seen, **asked)
    value = validate_answer(result, schema, from_reasoning=from_reasoning)
    template = (asked.get("extra_body") or {}).get("chat_template_kwargs") or {}
    if template.get("enable_thinking", True) and not (result.reasoning or "").strip():
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
        result: a checked turn (:func:`~helpers.chat.parse.check_reply`, or
            :func:`structured_chat`'s ``.chat``).
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
                "reasoning ends. Raise max_tokens, cap the reasoning (thinking_token_budget), "
                "or pass thinking=False.",
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
