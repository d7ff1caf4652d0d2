"""A tool call that fails goes back to the model as an error it can read, and a forced tool
choice answered with text is no call.

The model's turns are recorded replies of the real stand-in server (``tests/data/responses``,
replayed by ``tests/support/chat_replay.py``'s local recording server): two parallel tool calls,
then an answer; the loop is the notebooks' (``tool_loop``: the SDK's request, ``call_tool``, one
``tool`` message per call).
"""

from __future__ import annotations

import threading
import time
import warnings

import pytest

from helpers.chat import tools as tools_mod
from helpers.chat.types import ForcedToolCallIgnoredWarning
from tests.support.chat_replay import ask, get_time, get_weather, tool_loop


def _broken(**kw):
    raise ConnectionError("weather service unreachable")


def test_every_failed_call_goes_back_as_its_error(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    _, turns, outputs = tool_loop(client, "q", {"get_weather": _broken, "get_time": _broken})
    assert turns[-1].content.strip()  # the model answered anyway, from the two errors
    assert outputs == [
        "Error: get_weather raised ConnectionError: weather service unreachable",
        "Error: get_time raised ConnectionError: weather service unreachable",
    ]
    sent = [m["content"] for m in rec.bodies[1]["messages"] if m["role"] == "tool"]
    assert sent == outputs


def test_a_forced_tool_choice_answered_with_text_is_flagged(rec, client):
    """vllm #54808: with qwen3_coder a forced ``tool_choice`` can come back as prose with
    ``finish_reason="stop"`` (replayed: the stand-in's recorded prose answer, as the reply to
    a request that forced a call). The checker marks and warns; the loop runs nothing."""
    rec.queue("tool_final_answer")
    with pytest.warns(ForcedToolCallIgnoredWarning, match=r"tool_choice='required'.*#54808"):
        r = ask(client, "q", tools=[tools_mod.tool_schema(get_weather)], tool_choice="required")
    assert r.forced_call_ignored and not r.tool_calls and r.finish_reason == "stop"
    rec.queue("tool_final_answer")
    with pytest.warns(ForcedToolCallIgnoredWarning):
        _, turns, outputs = tool_loop(
            client, "q", {"get_weather": get_weather}, tool_choice="required"
        )
    assert turns[0].forced_call_ignored and outputs == []
    named = {"type": "function", "function": {"name": "get_weather"}}
    rec.queue("tool_final_answer")
    with pytest.warns(ForcedToolCallIgnoredWarning):
        assert ask(
            client, "q", tools=[tools_mod.tool_schema(get_weather)], tool_choice=named
        ).forced_call_ignored
    rec.queue("tool_final_answer")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ForcedToolCallIgnoredWarning)
        assert not ask(
            client, "q", tools=[tools_mod.tool_schema(get_weather)], tool_choice="auto"
        ).forced_call_ignored


def test_a_tool_that_hangs_is_stopped_at_its_timeout_and_the_model_is_told(rec, client):
    """A hanging tool is stopped at ``timeout`` (its thread ends) and its call fails like one
    that raised, the error going back to the model."""

    def hangs(city: str, days: int = 1) -> dict:
        while True:  # a tool stuck waiting, in Python code
            time.sleep(0.01)

    rec.queue("tool_calls_parallel")
    (turn,) = [ask(client, "q", tools=[tools_mod.tool_schema(hangs, name="get_weather")])]
    started = time.monotonic()
    said = tools_mod.call_tool(
        {"get_weather": hangs, "get_time": get_time}, turn.tool_calls[0], timeout=0.3
    )
    assert time.monotonic() - started < 10
    assert said == "Error: get_weather did not return within timeout=0.3 s; it was stopped"
    assert not [t for t in threading.enumerate() if t.name.startswith("tool-")]
    assert (
        tools_mod.call_tool({"get_time": get_time}, turn.tool_calls[1], timeout=5)
        == "09:30 in Tokyo"
    )
