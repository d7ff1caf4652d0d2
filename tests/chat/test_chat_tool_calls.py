"""Tool calls the server left in the reasoning, cut inside a call, or reported wrongly; arguments
fitted to the tool's JSON schema; a failing tool that goes back to the model; wrong types named
at the boundary. Requests are the SDK's own calls, checked by the helpers' checker (recorded
replies: tests/support/chat_replay.py).
"""

from __future__ import annotations

import json
import re
import warnings

import pytest

from helpers.chat import parse, types
from helpers.chat import tools as tools_mod
from helpers.server import endpoint
from tests.support.chat_replay import (
    DATA,
    TOOLS,
    WEATHER_TOOLS,
    ask,
    get_time,
    load,
    tool_loop,
)

# ─── tool calls the server left in the reasoning, cut, or reported wrongly ────────────

IN_REASONING_TAIL = "The user wants the weather in Santa Clara. I will call the tool."


def _with_reasoning(text: str) -> dict:
    """The recorded tool_call_in_reasoning reply with another reasoning text (same shape)."""
    r = load("tool_call_in_reasoning")
    r["choices"][0]["message"]["reasoning"] = text
    return r


@pytest.mark.parametrize("name", ["tool_call_in_reasoning", "stream_tool_call_in_reasoning"])
def test_tool_call_in_reasoning_warns_without_opt_in(rec, client, name):
    rec.queue(name)
    with pytest.warns(types.ToolCallInReasoningWarning) as caught:
        r = ask(client, "Weather in Santa Clara?", tools=TOOLS, stream=name.startswith("stream"))
    text = str(caught[0].message)
    assert 'get_weather({"city": "Santa Clara"})' in text
    assert "without closing </think>" in text and "recover_tool_calls=True" in text
    assert r.tool_call_in_reasoning and r.tool_calls == [] and r.content == ""
    assert r.finish_reason == "stop"


@pytest.mark.parametrize("name", ["tool_call_in_reasoning", "stream_tool_call_in_reasoning"])
def test_tool_call_in_reasoning_recovered_on_opt_in(rec, client, name):
    rec.queue(name)
    with pytest.warns(types.ToolCallInReasoningWarning, match="Recovered"):
        if name.startswith("stream"):
            r = ask(client, "q", stream=True, tools=TOOLS, recover_tool_calls=True)
        else:
            r = ask(client, "q", tools=TOOLS, recover_tool_calls=True)
    assert [(tc.name, tc.arguments) for tc in r.tool_calls] == [
        ("get_weather", {"city": "Santa Clara"})
    ]
    assert r.reasoning == IN_REASONING_TAIL and r.tool_call_in_reasoning
    assert r.tool_calls[0].id and r.to_message()["tool_calls"][0]["function"]["arguments"] == (
        '{"city": "Santa Clara"}'
    )


def test_tool_call_in_reasoning_compact_two_calls(rec, client):
    rec.queue("tool_call_in_reasoning_compact")
    with pytest.warns(types.ToolCallInReasoningWarning):
        r = ask(client, "q", tools=TOOLS, recover_tool_calls=True)
    assert [(tc.name, tc.arguments) for tc in r.tool_calls] == [
        ("get_weather", {"city": "Santa Clara", "days": 2}),  # "2" fitted to the integer schema
        ("get_time", {"city": "Tokyo"}),
    ]
    assert r.reasoning == "Both lookups."


@pytest.mark.parametrize(
    "reasoning, calls",
    [
        # no <tool_call> wrapper (qwen3_coder parses bare <function=...> blocks too)
        (
            "ok\n<function=get_time>\n<parameter=city>\nTokyo\n</parameter>\n</function>",
            [("get_time", {"city": "Tokyo"})],
        ),
        # blank lines and spaces between the tags, trailing whitespace
        (
            "ok<tool_call>\n\n  <function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
            "  <parameter=days>\n3\n</parameter>\n</function>\n\n</tool_call>\n\n",
            [("get_weather", {"city": "Oslo", "days": 3})],
        ),
        # a parameter value over several lines keeps its inner newline
        (
            "<tool_call><function=get_time><parameter=city>\nNew\nYork\n</parameter></function></tool_call>",
            [("get_time", {"city": "New\nYork"})],
        ),
    ],
)
def test_tool_call_in_reasoning_wordings(reasoning, calls):
    with pytest.warns(types.ToolCallInReasoningWarning):
        r = parse.check_reply(_with_reasoning(reasoning), tools=TOOLS, recover_tool_calls=True)
    assert [(tc.name, tc.arguments) for tc in r.tool_calls] == calls


def test_reasoning_that_goes_on_after_a_tool_call_is_left_alone():
    text = (
        "<tool_call><function=get_time><parameter=city>Tokyo</parameter></function></tool_call>"
        " On second thought, no tool is needed"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", types.ToolCallInReasoningWarning)
        r = parse.check_reply(_with_reasoning(text), tools=TOOLS, recover_tool_calls=True)
    assert r.tool_calls == [] and not r.tool_call_in_reasoning


def test_the_tool_loop_ends_on_a_tool_call_in_reasoning_with_the_warning(rec, client):
    """The notebooks' loop: no call in the turn ends it; the warning says why there is no
    answer. Checked with ``recover_tool_calls=True`` the call runs and goes back."""
    rec.queue("tool_call_in_reasoning")
    with pytest.warns(types.ToolCallInReasoningWarning, match="recover_tool_calls=True"):
        messages, turns, outputs = tool_loop(client, "q", WEATHER_TOOLS)
    assert len(turns) == 1 and outputs == [] and turns[0].tool_call_in_reasoning
    assert [m["role"] for m in messages] == ["user"]
    calls = []
    rec.queue("tool_call_in_reasoning", "tool_final_answer")
    tools = {"get_weather": lambda **kw: calls.append(kw) or "sunny", "get_time": get_time}
    with pytest.warns(types.ToolCallInReasoningWarning):
        _, turns, _ = tool_loop(client, "q", tools, recover_tool_calls=True)
    assert calls == [{"city": "Santa Clara"}]
    assert turns[-1].content.strip().startswith("Santa Clara will be sunny")
    sent = rec.bodies[-1]["messages"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent[2] == {
        "role": "tool",
        "tool_call_id": sent[1]["tool_calls"][0]["id"],
        "content": "sunny",
    }


TRUNCATED = r"(?i)truncated inside a tool call: raise max_tokens"


def test_cut_inside_a_tool_call_with_markup_in_content(rec, client):
    """The issue's shape: finish_reason=length, no tool_calls, content ends '<function=...'."""
    rec.queue("length_in_tool_call")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = ask(client, "q", tools=TOOLS, max_tokens=20)
    texts = [str(w.message) for w in caught]
    assert len(texts) == 1 and re.match(TRUNCATED, texts[0]) and "max_tokens=20" in texts[0]
    assert r.truncated_in_tool_call and r.tool_calls == []
    assert r.content == "" and r.tool_call_fragment == "<tool_call>\n<function=get_wea"
    assert not r.truncated_in_reasoning


def test_cut_inside_a_tool_call_that_vllm_reports_as_a_call(rec, client):
    """vLLM 0.32 parses the fragment and says finish_reason=tool_calls; all max_tokens used."""
    resp = load("length_in_tool_call_reported_as_call")
    assert resp["choices"][0]["finish_reason"] == "tool_calls"  # as the server sends it
    rec.queue(resp)
    used = resp["usage"]["completion_tokens"]
    with pytest.warns(types.ToolCallTruncatedWarning, match=TRUNCATED):
        r = ask(client, "q", tools=TOOLS, max_tokens=used)
    assert r.truncated_in_tool_call and r.tool_calls == [] and "get_weather" in r.tool_call_fragment
    rec.queue(resp)  # the same reply under a larger max_tokens is a call, not a cut
    r = ask(client, "q", tools=TOOLS, max_tokens=used + 100)
    assert not r.truncated_in_tool_call and r.tool_calls[0].name == "get_weather"


@pytest.mark.parametrize("name", ["stream_length_in_tool_call", "stream_length_in_tool_call_name"])
def test_cut_inside_a_tool_call_streamed(rec, client, name):
    rec.queue(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = ask(client, "q", stream=True, tools=TOOLS, max_tokens=30)
    kinds = [w.category for w in caught]
    assert kinds == [types.ToolCallTruncatedWarning], [str(w.message) for w in caught]
    assert re.match(TRUNCATED, str(caught[0].message))
    assert r.finish_reason == "length" and r.truncated_in_tool_call and r.tool_calls == []
    assert r.content.strip() == "" and not r.truncated_in_reasoning


def test_the_tool_loop_runs_nothing_when_cut_inside_a_tool_call(rec, client):
    rec.queue("length_in_tool_call")
    ran = []
    with pytest.warns(types.ToolCallTruncatedWarning, match=TRUNCATED):
        _, turns, outputs = tool_loop(
            client, "q", {"get_weather": lambda **kw: ran.append(kw)}, max_tokens=20
        )
    assert ran == [] and outputs == [] and len(turns) == 1 and turns[0].truncated_in_tool_call


def test_finish_reason_tool_calls_without_a_call_is_flagged(rec, client):
    resp = load("tool_calls_finish_without_call")
    assert resp["choices"][0]["finish_reason"] == "tool_calls"
    assert not resp["choices"][0]["message"].get("tool_calls")
    stream = load("stream_tool_calls_finish_without_call")
    last = [c for c in stream if c.get("choices")][-1]
    last["choices"][0]["finish_reason"] = "tool_calls"  # the streamed form of the report
    rec.queue(resp, stream)
    with pytest.warns(types.ToolCallsMissingWarning, match="no tool call"):
        r = ask(client, "q", tools=TOOLS, tool_choice="required")
    with pytest.warns(types.ToolCallsMissingWarning, match="not a final answer"):
        s = ask(client, "q", stream=True, tools=TOOLS, tool_choice="required")
    for x in (r, s):
        assert x.tool_calls_missing and x.tool_calls == [] and x.finish_reason == "tool_calls"


def test_the_tool_loop_ends_on_tool_calls_without_a_call_with_the_warning(rec, client):
    rec.queue("tool_calls_finish_without_call")
    with pytest.warns(types.ToolCallsMissingWarning, match="not a final answer"):
        _, turns, outputs = tool_loop(client, "q", WEATHER_TOOLS, tool_choice="required")
    assert turns[0].content.strip() == "It is sunny." and turns[0].tool_calls_missing
    assert outputs == []


# ─── arguments fitted to the tool's JSON schema ─────────────────────────────────────────

SEARCH_TOOLS = json.loads((DATA / "index.json").read_text())["integer_as_float"]["request"]["tools"]


def _as_string_limit(name: str, value: str) -> dict:
    """The recorded reply as older qwen3_coder releases send it: the value that failed the
    integer conversion passed through as a string."""
    r = load(name)
    r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"query": "GPUs", "limit": value}
    )
    return r


@pytest.mark.parametrize("reply", ["integer_as_float", "stream_integer_as_float", "string_140.0"])
def test_integer_written_as_a_float_is_coerced_before_the_tool_runs(rec, client, reply):
    seen = []

    def search(query: str, limit: int) -> str:
        seen.append(limit)
        return "ok"

    payload = _as_string_limit("integer_as_float", "140.0") if reply == "string_140.0" else reply
    rec.queue(payload, "tool_final_answer")
    with warnings.catch_warnings():
        warnings.simplefilter("error", types.ToolArgumentWarning)
        if reply.startswith("stream"):  # the streamed turn assembles to the same fitted call
            r = ask(client, "q", stream=True, tools=SEARCH_TOOLS)
            assert r.tool_calls[0].arguments == {"query": "GPUs", "limit": 140}
            assert type(r.tool_calls[0].arguments["limit"]) is int
            return
        _, _, outputs = tool_loop(client, "q", {"search": search}, SEARCH_TOOLS)
    assert seen == [140] and type(seen[0]) is int and outputs == ["ok"]


@pytest.mark.parametrize(
    "payload, value",
    [
        ("integer_as_fraction", 140.5),
        ("stream_integer_as_fraction", 140.5),
        ("integer_as_word", "abc"),
        ("stream_integer_as_word", "abc"),
        ("string_140.5", "140.5"),
    ],
)
def test_integer_that_cannot_be_coerced_stays_and_warns(rec, client, payload, value):
    if payload == "string_140.5":
        payload = _as_string_limit("integer_as_fraction", "140.5")
    rec.queue(payload)
    with pytest.warns(types.ToolArgumentWarning, match=r"limit=.* is not of type 'integer'"):
        stream = isinstance(payload, str) and payload.startswith("stream")
        r = ask(client, "q", stream=stream, tools=SEARCH_TOOLS)
    assert r.tool_calls[0].arguments == {"query": "GPUs", "limit": value}  # never dropped


def test_tool_loop_runs_a_call_whose_argument_does_not_fit(rec, client):
    seen = []
    rec.queue("integer_as_word", "tool_final_answer")
    with pytest.warns(types.ToolArgumentWarning):
        tool_loop(
            client, "q", {"search": lambda query, limit: seen.append(limit) or "ok"}, SEARCH_TOOLS
        )
    assert seen == ["abc"]


# Recorded with vLLM 0.32.0's qwen3_coder parser (index.json "optional_arguments_empty"): the
# model wrote an empty parameter, None and null for optional ones, and the parser passed on
# {"query": "GPUs", "limit": "", "tags": "None", "filters": null, "order": "", "note": "null"}.
CATALOGUE_TOOLS = json.loads((DATA / "index.json").read_text())["optional_arguments_empty"][
    "request"
]["tools"]


@pytest.mark.parametrize("reply", ["optional_arguments_empty", "stream_optional_arguments_empty"])
def test_optional_arguments_written_empty_are_left_out_so_defaults_apply(
    rec, client, reply, caplog
):
    received = []

    def search_catalogue(
        query: str,
        limit: int = 10,
        tags: list | None = None,
        filters: dict | None = None,
        order: str = "asc",
        note: str = "",
    ) -> str:
        received.append(
            {"query": query, "limit": limit, "tags": tags, "filters": filters, "order": order,
             "note": note}
        )  # fmt: skip
        return "ok"

    raw = load(reply)
    raw_args = (
        raw["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        if isinstance(raw, dict)
        else "".join(
            tc["function"].get("arguments", "")
            for c in raw
            for ch in c.get("choices", [])
            for tc in (ch.get("delta", {}).get("tool_calls") or [])
        )
    )
    assert json.loads(raw_args) == {  # what vLLM 0.32.0 hands on
        "query": "GPUs", "limit": "", "tags": "None", "filters": None, "order": "", "note": "null"
    }  # fmt: skip
    rec.queue(reply, "tool_final_answer")
    caplog.set_level("INFO", logger="helpers.chat")
    with warnings.catch_warnings():
        warnings.simplefilter("error", types.ToolArgumentWarning)
        if reply.startswith("stream"):  # the streamed turn assembles to the same call
            turn = ask(client, "q", stream=True, tools=CATALOGUE_TOOLS)
        else:
            _, turns, _ = tool_loop(
                client, "q", {"search_catalogue": search_catalogue}, CATALOGUE_TOOLS
            )
            turn = turns[0]
            # the function got only what the model filled in, plus the plain string's "null"
            assert received == [
                {"query": "GPUs", "limit": 10, "tags": None, "filters": None, "order": "asc",
                 "note": "null"}
            ]  # fmt: skip
    assert turn.tool_calls[0].arguments == {"query": "GPUs", "note": "null"}
    (note,) = turn.notes
    assert note.startswith(
        "Tool 'search_catalogue': left out limit='', tags='None', filters=None, order=''"
    )
    assert "the function's defaults apply" in note
    assert [r.getMessage() for r in caplog.records if r.name == "helpers.chat"] == [note]


def test_required_argument_written_empty_stays_and_warns(rec, client):
    rec.queue("required_argument_empty")  # {"query": "GPUs", "limit": ""} from vLLM 0.32.0
    with pytest.warns(
        types.ToolArgumentWarning, match=r"limit='' is required but was written empty"
    ):
        r = ask(client, "q", tools=SEARCH_TOOLS)
    assert r.tool_calls[0].arguments == {"query": "GPUs", "limit": ""} and r.notes == []
    assert len(r.warnings) == 1  # one line for the argument, not a second for its type


def test_drop_empty_optionals_keeps_plain_strings_and_listed_enum_values():
    from helpers.chat.toolargs import drop_empty_optionals

    schema = {
        "type": "object",
        "properties": {
            "note": {"type": "string"},
            "mode": {"type": "string", "enum": ["none", "fast"]},
            "level": {"type": ["integer", "null"]},
            "free": {},
        },
        "required": [],
    }
    args = {"note": "None", "mode": "none", "level": None, "free": " NULL ", "extra": ""}
    kept, dropped, problems = drop_empty_optionals(args, schema)
    assert kept == {"note": "None", "mode": "none", "extra": ""}  # "extra": not in the schema
    assert dropped == ["level=None", "free=' NULL '"] and problems == []
    assert drop_empty_optionals({"mode": ""}, schema)[0] == {}  # not a listed enum value
    assert drop_empty_optionals({"a": ""}, None) == ({"a": ""}, [], [])


def test_coerce_arguments_against_json_schema():
    from helpers.chat.toolargs import coerce_arguments

    schema = {
        "type": "object",
        "properties": {
            "limit": {"type": "integer"},
            "ratio": {"type": "number"},
            "exact": {"type": "boolean"},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "name": {"type": "string"},
        },
        "required": ["limit"],
    }
    args, problems = coerce_arguments(
        {"limit": "140.0", "ratio": "0.5", "exact": "true", "ids": '[1, "2.0"]', "name": "x"},
        schema,
    )
    assert args == {"limit": 140, "ratio": 0.5, "exact": True, "ids": [1, 2], "name": "x"}
    assert problems == []
    assert coerce_arguments({"limit": 140.0}, schema) == ({"limit": 140}, [])
    args, problems = coerce_arguments({"limit": "140.5", "name": 7}, schema)
    assert args == {"limit": "140.5", "name": 7} and len(problems) == 2
    args, problems = coerce_arguments({}, schema)
    assert args == {} and "'limit' is a required property" in problems[0]


# ─── a failing tool does not lose the conversation ───────────────────────────────────────


def test_failing_tool_goes_back_to_the_model(rec, client):
    def get_weather(city: str, days: int = 1) -> dict:
        raise ValueError(f"no station near {city}")

    rec.queue("tool_calls_parallel", "tool_final_answer")
    _, turns, outputs = tool_loop(client, "q", {"get_weather": get_weather, "get_time": get_time})
    sent = rec.bodies[1]["messages"]
    assert sent[2]["content"] == "Error: get_weather raised ValueError: no station near Santa Clara"
    assert sent[3]["content"] == "09:30 in Tokyo" == outputs[1]
    assert turns[-1].content.strip().startswith("Santa Clara will be sunny")


def test_a_schema_takes_the_name_it_is_given():
    assert tools_mod.tool_schema(lambda x: x, name="echo")["function"]["name"] == "echo"
    assert tools_mod.tool_schema(lambda x: x)["function"]["name"] == "<lambda>"


def test_wrong_argument_types_name_the_argument(rec, client):
    with pytest.raises(TypeError, match=r"make_client: `base_url` must be a URL string"):
        endpoint.make_client(8000)
    with pytest.raises(ValueError, match="is not a server URL"):
        endpoint.make_client("localhost:8000")
    with pytest.raises(ValueError, match="`max_tokens`=0 must be >= 1"):
        parse.check_reply(load("thinking_on"), max_tokens=0)
    with pytest.raises(ValueError, match="`timeout`=0 must be > 0"):
        tools_mod.call_tool(WEATHER_TOOLS, parse.check_reply(load("tool_calls_parallel"), tools=TOOLS).tool_calls[0], timeout=0)  # fmt: skip
    assert rec.requests == []  # nothing was sent
