"""Chat replies checked from recorded vLLM 0.32 responses (non-streamed and streamed): the
request is the ``openai`` SDK's own call, as a notebook cell sends it; :func:`check_reply`,
:func:`check_stream` and :func:`show` read what came back; the tool loop as the cells write it;
the two-pass budget; and the recordings checked against the installed vLLM's own parser (the
replay layer: tests/support/chat_replay.py).
"""

from __future__ import annotations

import json
import warnings

import pytest

from helpers.chat import display, drafting, parse, stream, types
from helpers.chat import tools as tools_mod
from helpers.errors import ResponseError
from helpers.server import endpoint
from tests.support.chat_replay import (
    DATA,
    MODEL,
    TOOLS,
    WEATHER_TOOLS,
    _shape,
    ask,
    build_all_fixtures,
    get_time,
    get_weather,
    load,
    tool_loop,
)

# ─── non-streaming ────────────────────────────────────────────────────────────────────


def test_make_client_adds_v1(rec):
    assert str(endpoint.make_client(rec.base_url).base_url).rstrip("/").endswith("/v1")
    assert (
        str(endpoint.make_client(rec.base_url + "/v1/").base_url)
        .rstrip("/")
        .endswith(f":{rec.httpd.server_address[1]}/v1")
    )


def test_reasoning_field_is_read(rec, client):
    rec.queue("thinking_on")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = ask(client, "What is the capital of France?")
    assert r.reasoning.startswith("The user asks for the capital of France")
    assert r.content.strip() == "The capital of France is Paris."
    assert r.finish_reason == "stop" and r.tool_calls == [] and r.warnings == []
    assert r.usage.reasoning_tokens and r.usage.completion_tokens > r.usage.reasoning_tokens
    assert not r.truncated_in_reasoning and not r.reasoning_parser_missing
    assert rec.bodies[0] == {
        "model": MODEL, "messages": [{"role": "user", "content": "What is the capital of France?"}]
    }  # fmt: skip


def test_reasoning_content_is_read_from_older_servers(rec, client):
    old = load("thinking_on")  # vLLM < 0.10 named the field reasoning_content
    msg = old["choices"][0]["message"]
    msg["reasoning_content"] = msg.pop("reasoning")
    rec.queue(old)
    r = ask(client, "What is the capital of France?")
    assert r.reasoning == load("thinking_on")["choices"][0]["message"]["reasoning"]
    assert r.content.strip() == "The capital of France is Paris."


def test_thinking_off_reply_without_tags_is_all_content(rec, client):
    rec.queue("thinking_off")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = ask(client, "Capital of Japan?", thinking=False)
    assert rec.bodies[0]["chat_template_kwargs"] == {"enable_thinking": False}  # the SDK sent it
    assert (r.reasoning, r.content) == ("", "The capital of Japan is Tokyo.")
    assert r.warnings == []


def test_length_exhausted_in_reasoning_warns_with_fixes(rec, client):
    rec.queue("length_in_reasoning")
    with pytest.warns(types.ReasoningTruncatedWarning) as caught:
        r = ask(client, "Prove there are infinitely many primes", max_tokens=22)
    text = str(caught[0].message)
    for fix in (
        "raise max_tokens",
        "thinking_token_budget",
        '"enable_thinking": False',
        "max_tokens=22",
    ):
        assert fix in text
    assert r.truncated_in_reasoning and r.content == "" and r.reasoning
    assert r.finish_reason == "length" and r.warnings == [text]
    assert caught[0].filename == __file__  # points at the caller, not into helpers


def test_length_exhausted_with_force_nonempty_content_is_flagged(rec, client):
    rec.queue("length_in_reasoning_force_nonempty")
    with pytest.warns(types.ReasoningTruncatedWarning, match="unfinished reasoning"):
        r = ask(client, "Prove it", max_tokens=22, force_nonempty_content=True)
    # vLLM moved the reasoning into content; the flag says it is not an answer.
    assert (
        r.truncated_in_reasoning
        and r.reasoning == ""
        and r.content.startswith("The user wants a proof")
    )


def test_length_with_thinking_off_does_not_warn(rec, client):
    rec.queue("length_in_reasoning_force_nonempty")  # content set, finish_reason=length
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = ask(client, "Prove it", thinking=False, max_tokens=22)
    assert not r.truncated_in_reasoning and r.finish_reason == "length"


def test_lone_think_end_is_split_and_warns_about_parser(rec, client):
    rec.queue("no_reasoning_parser")
    with pytest.warns(types.ReasoningParserMissingWarning, match="--reasoning-parser nemotron_v3"):
        r = ask(client, "What is the capital of France?")
    assert (
        r.reasoning
        == "The user asks for the capital of France. It is Paris; answer in one sentence."
    )
    assert r.content == "The capital of France is Paris."
    assert r.reasoning_parser_missing
    # Same split as the server's nemotron_v3 parser (modulo its leading newline).
    on = load("thinking_on")["choices"][0]["message"]
    assert (r.reasoning, r.content) == (on["reasoning"], on["content"].lstrip("\n"))


@pytest.mark.parametrize(
    "content, reasoning, answer",
    [
        ("<think>\nstep one\n</think>\n\nAnswer.", "step one", "Answer."),
        ("</think>Answer.", "", "Answer."),
        ("<think>\nstill going", "still going", ""),
    ],
)
def test_think_tags_in_content_variants(content, reasoning, answer):
    resp = {
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
    }
    with pytest.warns(types.ReasoningParserMissingWarning):
        r = parse.check_reply(resp)
    assert (r.reasoning, r.content) == (reasoning, answer)


def test_cut_before_think_end_without_parser_is_reasoning():
    # As a server without --reasoning-parser answers with max_tokens=3 (measured on the
    # stand-in): no </think> yet, no completion_tokens_details in usage.
    resp = {
        "choices": [
            {"message": {"role": "assistant", "content": "The user "}, "finish_reason": "length"}
        ],
        "usage": {"prompt_tokens": 19, "completion_tokens": 3, "total_tokens": 22},
    }
    with (
        pytest.warns(types.ReasoningParserMissingWarning),
        pytest.warns(types.ReasoningTruncatedWarning),
    ):
        r = parse.check_reply(resp, max_tokens=3)
    assert (r.reasoning, r.content) == ("The user", "")
    assert r.reasoning_parser_missing and r.truncated_in_reasoning
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # thinking off: it is the answer
        off = parse.check_reply(
            resp, extra_body={"chat_template_kwargs": {"enable_thinking": False}}
        )
    assert off.content == "The user " and not off.truncated_in_reasoning


def test_the_checker_names_a_keyword_of_the_wrong_shape():
    reply = load("thinking_on")
    with pytest.raises(TypeError, match="check_reply: `tools` must be the list of function-tool"):
        parse.check_reply(reply, tools={"get_weather": get_weather})
    with pytest.raises(TypeError, match="check_reply: `extra_body` must be the dict"):
        parse.check_reply(reply, extra_body="enable_thinking=False")
    with pytest.raises(TypeError, match="check_reply: `max_tokens` must be an integer"):
        parse.check_reply(reply, max_tokens="256")
    with pytest.raises(TypeError):
        parse.check_reply(reply, thinking=False)  # create has no such keyword: nor the checker
    with pytest.raises(ResponseError, match="no choices"):
        parse.check_reply({"choices": []})


def test_tool_markup_with_the_wrong_tool_parser_raises(rec, client):
    rec.queue("wrong_tool_parser")
    with pytest.raises(
        ResponseError, match="--enable-auto-tool-choice --tool-call-parser qwen3_coder"
    ) as ei:
        ask(client, "Weather in Santa Clara and time in Tokyo?", tools=TOOLS)
    assert "<tool_call>" in ei.value.result.content
    assert rec.bodies[0]["tools"] == TOOLS


def test_show_and_the_budget_report_take_the_none_a_tolerated_cell_leaves(capsys):
    """A weightless cell whose turn failed on noise text
    (:func:`lab.agents.noise.noise_tolerant`) leaves None: printing it prints nothing, and the
    budget report says there is no reply to judge."""
    assert display.show(None) is None and capsys.readouterr().out == ""
    assert "no reply to judge" in display.budget_report(None, 8)


def test_tool_markup_without_tools_offered_is_left_in_content(rec, client):
    rec.queue("wrong_tool_parser", "wrong_tool_parser")
    r = ask(client, "q")  # no tools: vLLM parses no calls, by design
    assert "<tool_call>" in r.content and r.tool_calls == []
    r = ask(client, "q", tools=TOOLS, tool_choice="none")
    assert "<tool_call>" in r.content and rec.bodies[1]["tool_choice"] == "none"


def test_parallel_tool_calls_are_parsed(rec, client):
    rec.queue("tool_calls_parallel")
    r = ask(client, "Weather in Santa Clara and time in Tokyo?", tools=TOOLS)
    assert r.finish_reason == "tool_calls" and r.content == ""
    assert [(tc.name, tc.arguments) for tc in r.tool_calls] == [
        ("get_weather", {"city": "Santa Clara", "days": 2}),  # qwen3_coder: int by schema
        ("get_time", {"city": "Tokyo"}),
    ]
    assert all(tc.id.startswith("chatcmpl-tool-") and tc.error is None for tc in r.tool_calls)
    msg = r.to_message()
    assert msg["role"] == "assistant" and msg["content"] is None and msg["reasoning"] == r.reasoning
    assert [t["function"]["arguments"] for t in msg["tool_calls"]] == [
        tc.raw_arguments for tc in r.tool_calls
    ]


# ─── the two-pass budget (a server that drafts) ───────────────────────────────────────


def test_two_pass_budget_sends_the_two_requests_its_docstring_shows(rec, client, capsys):
    second = load("thinking_off")  # the continuation: the answer only
    # as vLLM 0.32.0's parser counts it: the answer after the closed think block as reasoning
    second["usage"]["completion_tokens_details"] = {"reasoning_tokens": 6}
    rec.queue("length_in_reasoning", second)
    question = [{"role": "user", "content": "Prove it"}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = drafting.two_pass_budget(
            client, MODEL, question, 22, max_tokens=1000, echo=True, temperature=0.0, seed=7
        )
    first_body, second_body = rec.bodies
    assert first_body == {"model": MODEL, "messages": question, "max_tokens": 22,
                          "temperature": 0.0, "seed": 7}  # fmt: skip
    first_usage = load("length_in_reasoning")["usage"]
    assert second_body["max_tokens"] == 1000 - first_usage["completion_tokens"]
    assert second_body["continue_final_message"] is True
    assert second_body["add_generation_prompt"] is False
    assert second_body["temperature"] == 0.0 and second_body["seed"] == 7
    last = second_body["messages"][-1]
    reasoning = load("length_in_reasoning")["choices"][0]["message"]["reasoning"]
    assert last == {"role": "assistant", "content": f"<think>\n{reasoning.strip()}\n</think>\n\n"}
    assert second_body["messages"][:-1] == first_body["messages"]
    assert r.reasoning == reasoning and r.content == "The capital of Japan is Tokyo."
    assert (
        r.usage.completion_tokens
        == first_usage["completion_tokens"] + second["usage"]["completion_tokens"]
    )
    assert not r.truncated_in_reasoning and len(r.raw) == 2
    assert r.usage.reasoning_tokens == 22  # the first pass's alone
    assert not any("while still reasoning" in w for w in r.warnings)  # the answer followed
    printed = capsys.readouterr().out.splitlines()  # echo: each request before it is sent
    assert printed[0].startswith("1. reason up to the budget: client.chat.completions.create(")
    assert "max_tokens=22" in printed[0] and "2. answer after the closed think block" in printed[1]
    assert "'continue_final_message': True" in printed[1]


def test_two_pass_budget_stops_after_one_pass_when_reasoning_fits(rec, client):
    rec.queue("thinking_on")
    r = drafting.two_pass_budget(
        client, MODEL, [{"role": "user", "content": "hi"}], 500, max_tokens=1000
    )
    assert len(rec.requests) == 1 and r.content.strip() == "The capital of France is Paris."


def test_two_pass_budget_must_leave_room_for_the_answer(rec, client):
    question = [{"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match="budget=100 is not below max_tokens=100"):
        drafting.two_pass_budget(client, MODEL, question, 100, max_tokens=100)
    with pytest.raises(ValueError, match="`budget`=0 must be >= 1"):
        drafting.two_pass_budget(client, MODEL, question, 0, max_tokens=100)
    assert rec.requests == []


# ─── streaming ────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "stream_name, plain_name, kwargs",
    [
        ("stream_thinking_on", "thinking_on", {}),
        ("stream_tool_calls_parallel", "tool_calls_parallel", {"tools": TOOLS}),
        (
            "stream_length_force_nonempty",
            "length_in_reasoning_force_nonempty",
            {"force_nonempty_content": True, "max_tokens": 22},
        ),
    ],
)
def test_stream_reassembles_to_the_non_stream_shape(rec, client, stream_name, plain_name, kwargs):
    rec.queue(plain_name, stream_name)
    events = []
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        plain = ask(client, "q", **kwargs)
        extra = (
            {"chat_template_kwargs": {"force_nonempty_content": True}}
            if "force_nonempty_content" in kwargs
            else None
        )
        chunks = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "q"}], stream=True,
            stream_options={"include_usage": True}, **({"extra_body": extra} if extra else {}),
        )  # fmt: skip
        asked = {k: v for k, v in kwargs.items() if k in ("tools", "max_tokens")}
        streamed = stream.check_stream(chunks, on_piece=events.append, extra_body=extra, **asked)
    assert _shape(streamed) == _shape(plain)
    assert streamed.warnings == plain.warnings
    body = rec.bodies[1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    kinds = [k for k, _ in events]
    assert kinds[0] == "reasoning"
    assert all(k in ("reasoning", "content", "tool_call") for k in kinds)
    if plain.tool_calls:
        deltas = [d for k, d in events if k == "tool_call"]
        assert {d.index for d in deltas} == {0, 1}
        assert [d.name for d in deltas if d.name] == ["get_weather", "get_time"]
    else:
        assert "".join(t for k, t in events if k == "reasoning").strip() in (
            plain.reasoning,
            plain.content,
        )


def test_check_stream_accepts_raw_chunk_dicts():
    r = stream.check_stream(load("stream_thinking_on"))
    assert (
        r.reasoning.startswith("The user asks")
        and r.content.strip() == "The capital of France is Paris."
    )
    assert r.usage.prompt_tokens == 24 and r.finish_reason == "stop" and isinstance(r.raw, list)


def test_show_prints_a_stream_as_it_arrives_with_its_parts_labelled(rec, client, capsys):
    rec.queue("stream_thinking_on")
    chunks = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "q"}], stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    r = display.show(chunks)
    out = capsys.readouterr().out
    assert out.index("── reasoning ──") < out.index("── answer ──")
    assert "The capital of France is Paris." in out and r.finish_reason == "stop"
    usage = load("stream_thinking_on")[-1]["usage"]  # the last chunk's counts
    assert out.rstrip().endswith(
        f"── finish_reason=stop · prompt {usage['prompt_tokens']} · "
        f"completion {usage['completion_tokens']} tokens ──"
    )


def test_show_prints_streamed_tool_calls(rec, client, capsys):
    rec.queue("stream_tool_calls_parallel")
    chunks = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "q"}], tools=TOOLS, stream=True
    )
    r = display.show(chunks, tools=TOOLS)
    out = capsys.readouterr().out
    assert (
        '── tool calls ──\n[0] get_weather {"city": "Santa Clara", "days": 2}\n[1] get_time {"city": "Tokyo"}'
        in out
    )
    assert [c.name for c in r.tool_calls] == ["get_weather", "get_time"]


# ─── the tool loop, as the notebook cells write it ────────────────────────────────────


def test_tool_schema_from_signature():
    s = tools_mod.tool_schema(get_weather)
    assert s == TOOLS[0]


def test_tool_schema_reads_parameter_descriptions_from_the_docstring():
    def lookup(city: str, days: int = 1, units=None) -> dict:
        """Look up a forecast.

        Args:
            city: City name, e.g. Santa Clara
            days (int): how many days ahead
        Returns:
            the forecast
        """

    params = tools_mod.tool_schema(lookup)["function"]["parameters"]
    assert params["properties"] == {
        "city": {"type": "string", "description": "City name, e.g. Santa Clara"},
        "days": {"type": "integer", "description": "how many days ahead"},
        "units": {},
    }
    assert params["required"] == ["city"]
    assert tools_mod.tool_schema(get_time)["function"]["parameters"]["properties"] == {
        "city": {"type": "string"}
    }


def test_the_tool_loop_runs_two_parallel_calls_and_sends_each_result_with_its_id(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    calls = []

    def weather(**kw):
        calls.append(("get_weather", kw))
        return get_weather(**kw)

    def time_(**kw):
        calls.append(("get_time", kw))
        return get_time(**kw)

    messages, turns, outputs = tool_loop(
        client, "Weather in Santa Clara for 2 days, and the time in Tokyo?",
        {"get_weather": weather, "get_time": time_}, max_tokens=4096,
    )  # fmt: skip
    assert calls == [
        ("get_weather", {"city": "Santa Clara", "days": 2}),
        ("get_time", {"city": "Tokyo"}),
    ]
    assert turns[-1].content.strip().startswith("Santa Clara will be sunny") and len(turns) == 2
    # The second request carries the whole transcript.
    second = rec.bodies[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    ids = [tc["id"] for tc in second[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in second[2:]] == ids
    assert (
        json.loads(second[2]["content"]) == get_weather("Santa Clara", 2) == json.loads(outputs[0])
    )
    assert second[3]["content"] == "09:30 in Tokyo"
    assert second[1]["reasoning"].startswith("The user wants the weather")
    assert rec.bodies[1]["tools"] == TOOLS and rec.bodies[1]["max_tokens"] == 4096
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]


def test_an_invented_tool_goes_back_to_the_model_as_an_error(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    _, turns, outputs = tool_loop(client, "q", {"get_weather": get_weather})
    sent = rec.bodies[1]["messages"]
    assert sent[3]["role"] == "tool" and sent[3]["content"] == outputs[1] == (
        "Error: no tool named 'get_time'; the tools are ['get_weather']"
    )
    assert turns[-1].content.strip().startswith("Santa Clara will be sunny")


def test_arguments_that_are_not_json_or_do_not_fit_go_back_as_errors(rec, client):
    bad = load("tool_calls_parallel")
    bad["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"city": "Santa'
    rec.queue(bad, "tool_final_answer")
    _, _, outputs = tool_loop(client, "q", WEATHER_TOOLS)
    assert outputs[0].startswith(
        "Error: the arguments for get_weather cannot be used: arguments are not valid JSON"
    )
    assert outputs[1] == "09:30 in Tokyo"

    def weather_city_only(city: str) -> str:
        return "sunny"

    rec.queue("tool_calls_parallel")
    _, _, outputs = tool_loop(
        client, "q", {**WEATHER_TOOLS, "get_weather": weather_city_only}, rounds=1
    )
    assert "does not fit the function's signature" in outputs[0]


def test_call_tool_takes_the_sdks_own_tool_call_and_words_a_raised_error():
    from openai.types.chat import ChatCompletionMessageToolCall

    sdk_call = ChatCompletionMessageToolCall.model_validate(
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    )
    assert json.loads(tools_mod.call_tool(WEATHER_TOOLS, sdk_call)) == get_weather("Paris")

    def broken(city: str) -> str:
        raise RuntimeError("station offline")

    said = tools_mod.call_tool({"get_weather": broken}, sdk_call)
    assert said == "Error: get_weather raised RuntimeError: station offline"
    with pytest.raises(TypeError, match="`tools` must be a dict"):
        tools_mod.call_tool([get_weather], sdk_call)
    with pytest.raises(TypeError, match="`call` must be a tool call"):
        tools_mod.call_tool(WEATHER_TOOLS, {"name": "get_weather"})


# ─── printing ─────────────────────────────────────────────────────────────────────────


def test_show_checks_a_reply_prints_it_labelled_and_returns_it(rec, client, capsys):
    rec.queue("thinking_on")
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "q"}])
    r = display.show(reply)
    out = capsys.readouterr().out
    assert "── reasoning (" in out and "── answer ──\nThe capital of France is Paris." in out
    assert "finish_reason=stop" in out and isinstance(r, types.ChatResult)
    display.show(r)  # a checked turn prints as it is
    assert capsys.readouterr().out == out


def test_show_prints_each_warning_the_checks_gave(rec, client, capsys):
    rec.queue("length_in_reasoning")
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "q"}], max_tokens=22
    )
    with pytest.warns(types.ReasoningTruncatedWarning):
        r = display.show(reply, max_tokens=22)
    out = capsys.readouterr().out
    assert r.truncated_in_reasoning and "── answer ──\n(empty)" in out
    assert "!! The model used all max_tokens=22 while still reasoning" in out


# ─── the recordings are what vLLM produces ────────────────────────────────────────────


def test_recorded_fixtures_match_vllm():
    """Rebuild every recording with the installed vLLM's parser and protocol classes."""
    pytest.importorskip("vllm")
    built = build_all_fixtures()
    index = json.loads((DATA / "index.json").read_text())
    assert set(built) == set(index)
    for name, obj in built.items():
        assert obj == load(name), (
            f"{name}.json differs from vLLM's output: rerun `python tests/support/chat_replay.py --write-fixtures`"
        )
