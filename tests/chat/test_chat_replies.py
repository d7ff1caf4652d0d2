"""Chat replies parsed from recorded vLLM 0.32 responses (non-streamed and streamed), the tool
loop on them, printing, and the recordings checked against the installed vLLM's own parser
(the replay layer: tests/support/chat_replay.py).
"""

from __future__ import annotations

import json
import warnings

import pytest

from helpers.chat import completions as hc
from helpers.chat import display, parse, types
from helpers.chat import request as request_mod
from helpers.chat import stream as stream_mod
from helpers.chat import tools as tools_mod
from helpers.errors import ResponseError
from helpers.server import endpoint
from tests.support.chat_replay import (
    DATA,
    MODEL,
    TOOLS,
    _shape,
    build_all_fixtures,
    get_time,
    get_weather,
    load,
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
        r = hc.chat(client, MODEL, "What is the capital of France?")
    assert r.reasoning.startswith("The user asks for the capital of France")
    assert r.content.strip() == "The capital of France is Paris."
    assert r.finish_reason == "stop" and r.tool_calls == [] and r.warnings == []
    assert r.usage.reasoning_tokens and r.usage.completion_tokens > r.usage.reasoning_tokens
    assert not r.truncated_in_reasoning and not r.reasoning_parser_missing


def test_reasoning_content_is_read_from_older_servers(rec, client):
    old = load("thinking_on")  # vLLM < 0.10 named the field reasoning_content
    msg = old["choices"][0]["message"]
    msg["reasoning_content"] = msg.pop("reasoning")
    rec.queue(old)
    r = hc.chat(client, MODEL, "What is the capital of France?")
    assert r.reasoning == load("thinking_on")["choices"][0]["message"]["reasoning"]
    assert r.content.strip() == "The capital of France is Paris."


def test_request_body_carries_thinking_force_nonempty_and_budget(rec, client):
    rec.queue("thinking_on")
    hc.chat(
        client,
        MODEL,
        "hi",
        max_tokens=2048,
        reasoning_budget=256,
        force_nonempty_content=True,
        seed=7,
    )
    body = rec.bodies[0]
    assert rec.requests[0]["path"] == "/v1/chat/completions"
    assert body["chat_template_kwargs"] == {"enable_thinking": True, "force_nonempty_content": True}
    assert body["thinking_token_budget"] == 256
    assert body["max_tokens"] == 2048 and body["temperature"] == 1.0 and body["top_p"] == 0.95
    assert body["seed"] == 7 and body["model"] == MODEL
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "stream" not in body and "tools" not in body


def test_thinking_off_request_and_reply_without_tags_is_all_content(rec, client):
    rec.queue("thinking_off")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = hc.chat(
            client, MODEL, [{"role": "user", "content": "Capital of Japan?"}], thinking=False
        )
    assert rec.bodies[0]["chat_template_kwargs"] == {"enable_thinking": False}
    assert "force_nonempty_content" not in rec.bodies[0]["chat_template_kwargs"]
    assert (r.reasoning, r.content) == ("", "The capital of Japan is Tokyo.")
    assert r.warnings == []


def test_user_extra_body_is_merged(rec, client):
    rec.queue("thinking_on")
    hc.chat(
        client,
        MODEL,
        "hi",
        extra_body={"top_k": 20, "chat_template_kwargs": {"truncate_history_thinking": False}},
    )
    body = rec.bodies[0]
    assert body["top_k"] == 20
    assert body["chat_template_kwargs"] == {
        "truncate_history_thinking": False,
        "enable_thinking": True,
    }


def test_length_exhausted_in_reasoning_warns_with_fixes(rec, client):
    rec.queue("length_in_reasoning")
    with pytest.warns(types.ReasoningTruncatedWarning) as caught:
        r = hc.chat(client, MODEL, "Prove there are infinitely many primes", max_tokens=22)
    text = str(caught[0].message)
    for fix in ("raise max_tokens", "reasoning_budget", "thinking=False", "max_tokens=22"):
        assert fix in text
    assert r.truncated_in_reasoning and r.content == "" and r.reasoning
    assert r.finish_reason == "length" and r.warnings == [text]
    assert caught[0].filename == __file__  # points at the caller, not into helpers


def test_length_exhausted_with_force_nonempty_content_is_flagged(rec, client):
    rec.queue("length_in_reasoning_force_nonempty")
    with pytest.warns(types.ReasoningTruncatedWarning, match="unfinished reasoning"):
        r = hc.chat(client, MODEL, "Prove it", max_tokens=22, force_nonempty_content=True)
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
        r = hc.chat(client, MODEL, "Prove it", thinking=False, max_tokens=22)
    assert not r.truncated_in_reasoning and r.finish_reason == "length"


def test_lone_think_end_is_split_and_warns_about_parser(rec, client):
    rec.queue("no_reasoning_parser")
    with pytest.warns(types.ReasoningParserMissingWarning, match="--reasoning-parser nemotron_v3"):
        r = hc.chat(client, MODEL, "What is the capital of France?")
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
        r = parse.parse_response(resp)
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
        r = parse.parse_response(resp, max_tokens=3)
    assert (r.reasoning, r.content) == ("The user", "")
    assert r.reasoning_parser_missing and r.truncated_in_reasoning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = parse.parse_response(resp, thinking=False)  # thinking off: it is the answer
    assert off.content == "The user " and not off.truncated_in_reasoning


def test_tool_markup_with_the_wrong_tool_parser_raises(rec, client):
    rec.queue("wrong_tool_parser")
    with pytest.raises(
        ResponseError, match="--enable-auto-tool-choice --tool-call-parser qwen3_coder"
    ) as ei:
        hc.chat(client, MODEL, "Weather in Santa Clara and time in Tokyo?", tools=TOOLS)
    assert "<tool_call>" in ei.value.result.content
    assert rec.bodies[0]["tools"] == TOOLS


def test_weightless_options_report_a_reply_that_fails_on_noise_instead_of_raising(
    rec, client, capsys
):
    """ChatOptions.for_run of a weightless run: the same failure prints what failed and gives
    None (show and budget_report take it); the real model's options still raise."""
    from helpers.config.run import Run

    opts = request_mod.ChatOptions.for_run(Run("weightless"))
    assert (
        opts.noise_tolerant and not request_mod.ChatOptions.for_run(Run("download")).noise_tolerant
    )
    rec.queue("wrong_tool_parser")
    r = hc.chat(client, MODEL, "Weather in Santa Clara and time in Tokyo?", opts, tools=TOOLS)
    said = capsys.readouterr().out
    assert r is None and "weightless mode: the chat did not complete" in said
    assert "ResponseError" in said and "--tool-call-parser" in said
    display.show(r)
    assert capsys.readouterr().out == ""
    assert "no reply to judge" in display.budget_report(r, 8)
    rec.queue("wrong_tool_parser")
    with pytest.raises(ResponseError):
        hc.chat(client, MODEL, "q", opts.replace(noise_tolerant=False), tools=TOOLS)
    assert "noise_tolerant" not in rec.bodies[0] and "noise_tolerant" not in str(rec.bodies[0])


def test_tool_markup_without_tools_offered_is_left_in_content(rec, client):
    rec.queue("wrong_tool_parser", "wrong_tool_parser")
    r = hc.chat(client, MODEL, "q")  # no tools: vLLM parses no calls, by design
    assert "<tool_call>" in r.content and r.tool_calls == []
    r = hc.chat(client, MODEL, "q", tools=TOOLS, tool_choice="none")
    assert "<tool_call>" in r.content and rec.bodies[1]["tool_choice"] == "none"


def test_tools_refused_by_a_server_without_tool_calling_names_flags(rec, client):
    rec.queue("error_auto_tool_choice_without_parser", status=400)
    with pytest.raises(
        ResponseError, match="--enable-auto-tool-choice --tool-call-parser qwen3_coder"
    ):
        hc.chat(client, MODEL, "q", tools=TOOLS)


def test_parallel_tool_calls_are_parsed(rec, client):
    rec.queue("tool_calls_parallel")
    r = hc.chat(client, MODEL, "Weather in Santa Clara and time in Tokyo?", tools=TOOLS)
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


def test_budget_rejected_by_server_names_reasoning_parser(rec, client):
    rec.queue("error_budget_without_reasoning_parser", status=400)
    with pytest.raises(ResponseError, match="--reasoning-parser nemotron_v3"):
        hc.chat(client, MODEL, "hi", max_tokens=1024, reasoning_budget=128)


def test_budget_must_leave_room_for_the_answer(rec, client):
    with pytest.raises(
        ValueError, match="ChatOptions: reasoning_budget=100 is not below max_tokens"
    ):
        request_mod.ChatOptions(max_tokens=100, reasoning_budget=100)
    with pytest.raises(ValueError, match="chat: reasoning_budget=100 is not below max_tokens"):
        hc.chat(client, MODEL, "hi", max_tokens=100, reasoning_budget=100)
    # max_tokens=None is fitted to the server (16000 here), then checked against the budget.
    with pytest.raises(ValueError, match="stream_chat: reasoning_budget=16000 is not below"):
        stream_mod.stream_chat(client, MODEL, "hi", reasoning_budget=16000)
    assert rec.requests == []


def test_two_pass_budget_for_older_servers(rec, client):
    second = load("thinking_off")  # the continuation: the answer only
    rec.queue("length_in_reasoning", second)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = hc.chat(
            client,
            MODEL,
            "Prove it",
            max_tokens=1000,
            reasoning_budget=22,
            budget_method="two_pass",
        )
    first_body, second_body = rec.bodies
    assert first_body["max_tokens"] == 22 and "thinking_token_budget" not in first_body
    first_usage = load("length_in_reasoning")["usage"]
    assert second_body["max_tokens"] == 1000 - first_usage["completion_tokens"]
    assert (
        second_body["continue_final_message"] is True
        and second_body["add_generation_prompt"] is False
    )
    last = second_body["messages"][-1]
    reasoning = load("length_in_reasoning")["choices"][0]["message"]["reasoning"]
    assert last == {"role": "assistant", "content": f"<think>\n{reasoning}\n</think>\n\n"}
    assert second_body["messages"][:-1] == first_body["messages"]
    assert r.reasoning == reasoning and r.content == "The capital of Japan is Tokyo."
    assert (
        r.usage.completion_tokens
        == first_usage["completion_tokens"] + second["usage"]["completion_tokens"]
    )
    assert not r.truncated_in_reasoning and len(r.raw) == 2


def test_two_pass_budget_stops_after_one_pass_when_reasoning_fits(rec, client):
    rec.queue("thinking_on")
    r = hc.chat(
        client, MODEL, "hi", max_tokens=1000, reasoning_budget=500, budget_method="two_pass"
    )
    assert len(rec.requests) == 1 and r.content.strip() == "The capital of France is Paris."


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
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        plain = hc.chat(client, MODEL, "q", **kwargs)
        stream = stream_mod.stream_chat(client, MODEL, "q", **kwargs)
        events = list(stream)
        streamed = stream_mod.collect_stream(stream)
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


def test_collect_stream_accepts_raw_chunk_dicts():
    r = stream_mod.collect_stream(load("stream_thinking_on"))
    assert (
        r.reasoning.startswith("The user asks")
        and r.content.strip() == "The capital of France is Paris."
    )
    assert r.usage.prompt_tokens == 24 and r.finish_reason == "stop"


def test_print_stream_labels_parts(rec, client, capsys):
    rec.queue("stream_thinking_on")
    r = display.print_stream(stream_mod.stream_chat(client, MODEL, "q"))
    out = capsys.readouterr().out
    assert out.index("── reasoning ──") < out.index("── answer ──")
    assert "The capital of France is Paris." in out and r.finish_reason == "stop"
    assert out.rstrip().endswith("── finish_reason=stop ──")


def test_print_stream_tool_calls(rec, client, capsys):
    rec.queue("stream_tool_calls_parallel")
    display.print_stream(stream_mod.stream_chat(client, MODEL, "q", tools=TOOLS))
    out = capsys.readouterr().out
    assert (
        '── tool calls ──\n[0] get_weather {"city": "Santa Clara", "days": 2}\n[1] get_time {"city": "Tokyo"}'
        in out
    )


# ─── tool loop ────────────────────────────────────────────────────────────────────────


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


def test_tool_loop_runs_two_parallel_calls(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    calls = []

    def weather(**kw):
        calls.append(("get_weather", kw))
        return get_weather(**kw)

    def time_(**kw):
        calls.append(("get_time", kw))
        return get_time(**kw)

    loop = tools_mod.run_tool_loop(
        client,
        MODEL,
        "Weather in Santa Clara for 2 days, and the time in Tokyo?",
        {"get_weather": weather, "get_time": time_},
        TOOLS,
        max_tokens=4096,
    )
    assert calls == [
        ("get_weather", {"city": "Santa Clara", "days": 2}),
        ("get_time", {"city": "Tokyo"}),
    ]
    assert loop.final.content.strip().startswith("Santa Clara will be sunny")
    assert len(loop.turns) == 2 and len(loop.tool_runs) == 2
    # The second request carries the whole transcript.
    second = rec.bodies[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    ids = [tc["id"] for tc in second[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in second[2:]] == ids
    assert json.loads(second[2]["content"]) == get_weather("Santa Clara", 2)
    assert second[3]["content"] == "09:30 in Tokyo"
    assert second[1]["reasoning"].startswith("The user wants the weather")
    assert rec.bodies[1]["tools"] == TOOLS and rec.bodies[1]["max_tokens"] == 4096
    assert [m["role"] for m in loop.messages] == ["user", "assistant", "tool", "tool", "assistant"]


def test_tool_loop_builds_schemas_from_functions(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    loop = tools_mod.run_tool_loop(
        client, MODEL, "q", {"get_weather": get_weather, "get_time": get_time}
    )
    assert rec.bodies[0]["tools"] == TOOLS
    assert [run.output for run in loop.tool_runs] == [
        get_weather("Santa Clara", 2),
        "09:30 in Tokyo",
    ]


def test_tool_loop_unknown_tool_is_a_clear_error(rec, client):
    rec.queue("tool_calls_parallel")
    with pytest.raises(ResponseError, match="no tool named 'get_time'") as ei:
        tools_mod.run_tool_loop(
            client, MODEL, "q", {"get_weather": get_weather}, TOOLS, on_tool_error="raise"
        )
    assert "Pass a function under that name in `tools`" in str(ei.value)
    # The conversation so far travels with the error: the turn and the call that ran.
    assert [m["role"] for m in ei.value.messages] == ["user", "assistant", "tool"]
    assert len(ei.value.turns) == 1 and ei.value.tool_runs[0].output == get_weather(
        "Santa Clara", 2
    )


def test_tool_loop_invented_tool_goes_back_to_the_model(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    loop = tools_mod.run_tool_loop(client, MODEL, "q", {"get_weather": get_weather}, TOOLS)
    sent = rec.bodies[1]["messages"]
    assert sent[3]["role"] == "tool" and sent[3]["content"] == (
        "Error: no tool named 'get_time'; the tools are ['get_weather']"
    )
    assert loop.tool_runs[1].error and loop.tool_runs[1].output is None
    assert loop.final.content.strip().startswith("Santa Clara will be sunny")


def test_tool_loop_bad_json_arguments_is_a_clear_error(rec, client):
    bad = load("tool_calls_parallel")
    bad["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"city": "Santa'
    rec.queue(bad)
    with pytest.raises(ResponseError, match="not valid JSON"):
        tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": get_weather, "get_time": get_time},
            TOOLS,
            on_tool_error="raise",
        )
    rec.queue(bad, "tool_final_answer")
    loop = tools_mod.run_tool_loop(
        client, MODEL, "q", {"get_weather": get_weather, "get_time": get_time}, TOOLS
    )
    assert (
        loop.tool_runs[0]
        .message["content"]
        .startswith(
            "Error: the arguments for get_weather cannot be used: arguments are not valid JSON"
        )
    )
    assert loop.tool_runs[1].message["content"] == "09:30 in Tokyo"


def test_tool_loop_arguments_that_do_not_fit_the_function(rec, client):
    rec.queue("tool_calls_parallel")

    def weather_city_only(city: str) -> str:
        return "sunny"

    with pytest.raises(ResponseError, match="does not fit the function's signature"):
        tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": weather_city_only, "get_time": get_time},
            TOOLS,
            on_tool_error="raise",
        )


def test_tool_loop_gives_up_after_max_rounds(rec, client):
    rec.queue("tool_calls_parallel", "tool_calls_parallel")
    with pytest.raises(ResponseError, match="max_rounds=2"):
        tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": get_weather, "get_time": get_time},
            TOOLS,
            max_rounds=2,
        )


# ─── printing ─────────────────────────────────────────────────────────────────────────


def test_show_labels_reasoning_and_answer(capsys):
    r = parse.parse_response(load("thinking_on"))
    display.show(r)
    out = capsys.readouterr().out
    assert "── reasoning (" in out and "── answer ──\nThe capital of France is Paris." in out
    assert "finish_reason=stop" in out


def test_show_tool_loop(rec, client, capsys):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    display.show(
        tools_mod.run_tool_loop(
            client, MODEL, "q", {"get_weather": get_weather, "get_time": get_time}, TOOLS
        )
    )
    out = capsys.readouterr().out
    assert (
        "turn 1" in out
        and "turn 2" in out
        and "── tool get_time returned ──\n09:30 in Tokyo" in out
    )
    assert 'get_weather({"city": "Santa Clara", "days": 2})' in out


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
