"""A tool loop in which every call failed returns a result that says so.

The model's turns are recorded replies of the real stand-in server (``tests/data/responses``,
replayed by ``tests/support/chat_replay.py``'s local recording server): two parallel tool calls, then
an answer. The tools raise, so the answer rests on nothing but error messages.
"""

from __future__ import annotations

import io
import warnings

import pytest

from helpers.chat import tools as tools_mod
from helpers.chat.display import show
from tests.support.chat_replay import MODEL, TOOLS, get_time, get_weather


def _broken(**kw):
    raise ConnectionError("weather service unreachable")


def test_every_call_failed_is_said_on_the_result(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop = tools_mod.run_tool_loop(
            client, MODEL, "q", {"get_weather": _broken, "get_time": _broken}, TOOLS
        )
    assert loop.final.content.strip()  # the model answered anyway
    assert loop.all_calls_failed and len(loop.failed_runs) == len(loop.tool_runs) == 2
    assert loop.warning.startswith(
        "every tool call failed (2 of 2): get_weather: get_weather raised ConnectionError: weather service unreachable"
    )
    assert "not on any tool's output" in loop.warning
    assert [
        w.category for w in caught if issubclass(w.category, tools_mod.ToolCallsFailedWarning)
    ] == [tools_mod.ToolCallsFailedWarning]
    out = io.StringIO()
    show(loop, file=out)
    assert f"!! {loop.warning}" in out.getvalue()


def test_one_call_that_ran_is_no_such_warning(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    with warnings.catch_warnings():
        warnings.simplefilter("error", tools_mod.ToolCallsFailedWarning)
        loop = tools_mod.run_tool_loop(
            client, MODEL, "q", {"get_weather": get_weather, "get_time": _broken}, TOOLS
        )
    assert len(loop.failed_runs) == 1 and not loop.all_calls_failed and loop.warning is None
    rec.queue("tool_final_answer")  # no tool call at all: nothing failed
    assert (
        tools_mod.run_tool_loop(client, MODEL, "q", {"get_time": get_time}, TOOLS).warning is None
    )


def test_a_forced_tool_choice_answered_with_text_is_never_the_loops_answer(rec, client):
    """vllm #54808: with qwen3_coder a forced ``tool_choice`` can come back as prose with
    ``finish_reason="stop"`` (replayed: the stand-in's recorded prose answer, as the reply to
    a request that forced a call). ``chat`` marks and warns; the loop refuses it as an answer."""
    import pytest

    from helpers.chat.completions import chat
    from helpers.chat.types import ForcedToolCallIgnoredWarning

    rec.queue("tool_final_answer")
    with pytest.warns(ForcedToolCallIgnoredWarning, match=r"tool_choice='required'.*#54808"):
        r = chat(client, MODEL, "q", tools=TOOLS, tool_choice="required")
    assert r.forced_call_ignored and not r.tool_calls and r.finish_reason == "stop"
    rec.queue("tool_final_answer")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ForcedToolCallIgnoredWarning)
        with pytest.raises(tools_mod.ToolLoopError, match="neither a call nor the loop's answer"):
            tools_mod.run_tool_loop(
                client, MODEL, "q", {"get_weather": get_weather}, TOOLS, tool_choice="required"
            )
    rec.queue("tool_final_answer")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ForcedToolCallIgnoredWarning)
        assert not chat(client, MODEL, "q", tools=TOOLS, tool_choice="auto").forced_call_ignored


def test_a_tool_that_hangs_is_stopped_at_tool_timeout_and_the_model_is_told(rec, client):
    """A hanging tool never ended the loop before; with ``tool_timeout`` it is stopped (its
    thread ends) and its call fails like one that raised, the error going back to the model."""
    import threading
    import time

    def hangs(city: str, days: int = 1) -> dict:
        while True:  # a tool stuck waiting, in Python code
            time.sleep(0.01)

    rec.queue("tool_calls_parallel", "tool_final_answer")
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tools_mod.ToolCallsFailedWarning)
        loop = tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": hangs, "get_time": get_time},
            TOOLS,
            tool_timeout=0.3,
        )
    assert time.monotonic() - started < 10
    failed = loop.failed_runs
    assert len(failed) == 1 and failed[0].call.name == "get_weather"
    assert (
        "get_weather it did not return within tool_timeout=0.3 s; it was stopped" in failed[0].error
    )
    sent = [m for m in rec.bodies[1]["messages"] if m["role"] == "tool"]
    assert any("did not return within tool_timeout=0.3 s" in m["content"] for m in sent)
    assert loop.final.content.strip()
    assert not [t for t in threading.enumerate() if t.name.startswith("tool-")]
    with pytest.raises(ValueError, match="tool_timeout"):
        tools_mod.run_tool_loop(client, MODEL, "q", {"get_time": get_time}, TOOLS, tool_timeout=0)
