"""``helpers.chat`` against the session's real vLLM CPU stand-in (``standin_server``):
structure, not text.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from helpers import errors as errors_mod
from helpers.chat import completions as hc
from helpers.chat import display, types
from helpers.chat import stream as stream_mod
from helpers.chat import tools as tools_mod
from helpers.errors import ResponseError
from helpers.server import endpoint
from tests.support.chat_replay import (
    DATA,
    load,
)

# ─── against the real vLLM CPU server (stand-in model) ────────────────────────────────
#
# Structure, not text: the stand-in is a tiny model trained on cookbook/demo.yaml, so
# these use its demo prompts with greedy decoding, and check fields, flags and types.

LIVE_MAX_TOKENS = 256


@pytest.fixture(scope="module")
def live(standin_server):
    """(client, model name, demo data) for the session's stand-in server."""
    from helpers.config.demo import load_demo

    return (
        endpoint.make_client(standin_server.base_url, timeout=120),
        standin_server.models()[0],
        load_demo(),
    )


def _live_tools(demo: dict[str, Any]) -> dict[str, Any]:
    def get_weather(city: str) -> dict:
        return demo["weather"]["results"].get(
            city, {"city": city, "temperature_c": 20, "condition": "unknown"}
        )

    def get_time(city: str) -> dict:
        return demo["time"]["results"].get(city, {"city": city, "local_time": "12:00"})

    return {"get_weather": get_weather, "get_time": get_time}


@pytest.mark.server
def test_live_chat_thinking_on_and_off(live):
    client, model, demo = live
    prompt = demo["reasoning"]["prompt"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", types.ReasoningParserMissingWarning)
        on = hc.chat(client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0)
        off = hc.chat(
            client, model, prompt, thinking=False, max_tokens=LIVE_MAX_TOKENS, temperature=0
        )
    assert on.reasoning.strip() and on.content.strip() and on.finish_reason == "stop"
    assert on.usage.reasoning_tokens and 0 < on.usage.reasoning_tokens < on.usage.completion_tokens
    assert not on.reasoning_parser_missing and not on.truncated_in_reasoning
    assert off.reasoning == "" and off.content.strip() and off.finish_reason == "stop"
    assert off.usage.completion_tokens < on.usage.completion_tokens


@pytest.mark.server
def test_live_force_nonempty_content_is_accepted(live):
    client, model, demo = live
    r = hc.chat(
        client,
        model,
        demo["reasoning"]["prompt"],
        max_tokens=LIVE_MAX_TOKENS,
        temperature=0,
        force_nonempty_content=True,
    )
    assert r.content.strip() and r.finish_reason == "stop"


@pytest.mark.server
def test_live_reasoning_budget_caps_reasoning(live):
    client, model, demo = live
    prompt = demo["budget"]["prompt"]
    free = hc.chat(client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0)
    # A budget below what the model thinks unbudgeted (the stand-in's BPE packs its
    # reasoning into few tokens, so demo.yaml's budget may not bite).
    budget = min(demo["budget"]["thinking_token_budget"], max(2, free.usage.reasoning_tokens // 2))
    capped = hc.chat(
        client, model, prompt, reasoning_budget=budget, max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    assert capped.content.strip() and capped.finish_reason == "stop"
    assert capped.usage.reasoning_tokens is not None
    assert capped.usage.reasoning_tokens <= budget < free.usage.reasoning_tokens
    assert len(capped.reasoning) < len(free.reasoning)


def test_a_server_budget_asked_of_a_drafting_server_warns_and_names_two_pass(rec, client):
    """A server that exports vLLM's speculative-decoding counters drafts (the recorded
    /metrics of the n-gram stand-in server): a server budget warns, and budget_method_for
    picks the two-pass budget; without them (or without /metrics) it stays quiet."""
    from helpers.chat import drafting

    rec.metrics = (DATA.parent / "bench" / "metrics_after.prom").read_text()
    rec.version = json.dumps({"version": "0.32.0"})
    assert drafting.server_facts(client) == {
        "url": rec.base_url,
        "version": "0.32.0",
        "drafting": True,
    }
    assert drafting.budget_method_for(client) == "two_pass"
    rec.replies.append((200, load("thinking_on")))
    with pytest.warns(drafting.ReasoningBudgetUnenforcedWarning, match=r"#39573, #54906.*two_pass"):
        hc.chat(client, "m", "hi", reasoning_budget=8)
    assert rec.requests[-1]["body"]["thinking_token_budget"] == 8  # still sent, as asked
    # the two-pass budget does not warn (it does not rely on the server)
    rec.replies.append((200, load("thinking_on")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", drafting.ReasoningBudgetUnenforcedWarning)
        hc.chat(client, "m", "hi", reasoning_budget=8, budget_method="two_pass", max_tokens=64)
    # a report of an overrun on a drafting server names the cause
    over = types.ChatResult(reasoning="long", content="x", usage=types.Usage(reasoning_tokens=40))
    line = display.budget_report(over, 8, drafting=True)
    assert line.startswith("UNEXPECTED") and "#39573, #54906" in line and "two_pass" in line
    assert "#39573" not in display.budget_report(over, 8)


def test_a_server_without_metrics_is_not_taken_for_a_drafting_one(rec, client):
    from helpers.chat import drafting

    assert drafting.server_facts(client)["drafting"] is None  # /metrics answers 404
    assert drafting.budget_method_for(client) == "server"
    rec.replies.append((200, load("thinking_on")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", drafting.ReasoningBudgetUnenforcedWarning)
        hc.chat(client, "m", "hi", reasoning_budget=8)


@pytest.mark.server
def test_live_server_without_drafting_keeps_the_server_budget(live):
    from helpers.chat import drafting

    client, model, _ = live
    facts = drafting.server_facts(client)
    assert facts["drafting"] is False and facts["version"] == "0.32.0"
    assert drafting.budget_method_for(client) == "server"


@pytest.mark.server
def test_live_two_pass_budget(live):
    client, model, demo = live
    budget = demo["budget"]["thinking_token_budget"]
    r = hc.chat(
        client,
        model,
        demo["budget"]["prompt"],
        reasoning_budget=budget,
        budget_method="two_pass",
        max_tokens=LIVE_MAX_TOKENS,
        temperature=0,
    )
    assert r.reasoning.strip() and r.content.strip()
    assert isinstance(r.raw, list) and len(r.raw) == 2  # the reasoning was cut: two passes
    assert "</think>" not in r.content and not r.truncated_in_reasoning


@pytest.mark.server
def test_live_length_exhausted_in_reasoning_warns(live):
    client, model, demo = live
    with pytest.warns(types.ReasoningTruncatedWarning, match="raise max_tokens"):
        r = hc.chat(client, model, demo["reasoning"]["prompt"], max_tokens=4, temperature=0)
    assert r.truncated_in_reasoning and r.finish_reason == "length" and r.content == ""
    assert r.reasoning.strip()


@pytest.mark.server
def test_live_stream_matches_chat(live):
    client, model, demo = live
    prompt = demo["streaming"]["prompt"]
    plain = hc.chat(client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0)
    stream = stream_mod.stream_chat(
        client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    kinds = [kind for kind, _ in stream]
    streamed = stream.result
    assert kinds[0] == "reasoning" and "content" in kinds
    assert kinds.index("content") > max(i for i, k in enumerate(kinds) if k == "reasoning")
    assert streamed.reasoning.strip() and streamed.content.strip()
    # Greedy decoding: the streamed turn is the same turn.
    assert (streamed.reasoning, streamed.content, streamed.finish_reason) == (
        plain.reasoning,
        plain.content,
        plain.finish_reason,
    )
    assert streamed.usage.completion_tokens == plain.usage.completion_tokens


@pytest.mark.server
def test_live_tool_loop(live):
    client, model, demo = live
    loop = tools_mod.run_tool_loop(
        client,
        model,
        demo["weather"]["prompt"].format(city="Santa Clara"),
        _live_tools(demo),
        demo["tools"],
        max_tokens=LIVE_MAX_TOKENS,
        temperature=0,
    )
    assert loop.tool_runs, "the model made no tool call"
    for run in loop.tool_runs:
        assert run.call.name in ("get_weather", "get_time") and isinstance(run.call.arguments, dict)
        assert isinstance(run.call.arguments.get("city"), str) and run.call.id
    assert loop.turns[0].finish_reason == "tool_calls"
    assert loop.final.content.strip() and not loop.final.tool_calls
    assert [m["role"] for m in loop.messages][:2] == ["user", "assistant"] and loop.messages[-1][
        "role"
    ] == "assistant"


@pytest.mark.server
def test_live_parallel_tool_calls_streamed_and_not(live):
    client, model, demo = live
    prompt = demo["parallel"]["pairs"][0]["prompt"]
    plain = hc.chat(
        client, model, prompt, tools=demo["tools"], max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    stream = stream_mod.stream_chat(
        client, model, prompt, tools=demo["tools"], max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    deltas = [d for kind, d in stream if kind == "tool_call"]
    streamed = stream.result
    assert len(plain.tool_calls) == 2 and plain.finish_reason == "tool_calls"
    assert all(isinstance(tc.arguments, dict) and tc.arguments for tc in plain.tool_calls)
    assert {d.index for d in deltas} == {0, 1}
    assert [(tc.name, tc.arguments) for tc in streamed.tool_calls] == [
        (tc.name, tc.arguments) for tc in plain.tool_calls
    ]
    loop = tools_mod.run_tool_loop(
        client,
        model,
        prompt,
        _live_tools(demo),
        demo["tools"],
        max_tokens=LIVE_MAX_TOKENS,
        temperature=0,
    )
    assert len(loop.tool_runs) >= 2 and loop.final.content.strip()


def test_budget_report_says_what_happened():
    """The notebook's budget line comes from the reply, not from a fixed sentence."""
    from helpers.chat.display import budget_report
    from helpers.chat.types import ChatResult, Usage

    ok = ChatResult(reasoning="short", content="vLLM serves it.", finish_reason="stop",
                    usage=Usage(prompt_tokens=20, completion_tokens=30, reasoning_tokens=17))  # fmt: skip
    assert budget_report(ok, 16) == (
        "thinking_token_budget=16: 17 reasoning tokens (budget 16), then an answer of 15 characters"
    )
    over = ChatResult(reasoning="long", content="x", usage=Usage(reasoning_tokens=40))
    assert budget_report(over, 16).startswith(
        "UNEXPECTED"
    ) and "40 reasoning tokens exceed" in budget_report(over, 16)
    empty = ChatResult(
        reasoning="cut", content="", finish_reason="length", usage=Usage(reasoning_tokens=16)
    )
    assert budget_report(empty, 16) == (
        "UNEXPECTED thinking_token_budget=16: 16 reasoning tokens (budget 16), but no answer "
        "followed the reasoning (finish_reason='length')"
    )
    unparsed = ChatResult(reasoning="", content="<think>a</think>b", usage=Usage())
    assert "no reasoning_tokens" in budget_report(unparsed, 16)


# ─── tool calls, defaults and failures against the real vLLM CPU stand-in ──────────────


@pytest.mark.server
def test_live_default_max_tokens_fits_the_standin(standin_server):
    """`chat(llm, model, "hi")` with no max_tokens fits the 2048-token stand-in."""
    client = endpoint.make_client(standin_server.base_url, timeout=120)
    model = standin_server.models()[0]
    assert hc.server_max_model_len(client, model) == 2048  # cookbook/recipe.yaml, cpu target
    r = hc.chat(client, model, "hi", temperature=0)
    assert r.finish_reason in ("stop", "length") and r.usage.completion_tokens > 0
    s = stream_mod.stream_chat(client, model, "hi", temperature=0).result
    assert s.usage.completion_tokens > 0
    with pytest.raises(ResponseError, match="max_model_len is 2048 tokens"):
        hc.chat(client, model, "hi", max_tokens=16000)


@pytest.mark.server
def test_live_failing_tool_goes_back_to_the_model(live):
    """A failing tool on the real server: the tool's error is the tool result; nothing is lost."""
    client, model, demo = live

    def get_weather(city: str) -> dict:
        raise RuntimeError(f"weather service down for {city}")

    tools = {**_live_tools(demo), "get_weather": get_weather}
    prompt = demo["weather"]["prompt"].format(city="Santa Clara")
    try:
        loop = tools_mod.run_tool_loop(
            client,
            model,
            prompt,
            tools,
            demo["tools"],
            max_tokens=LIVE_MAX_TOKENS,
            temperature=0,
            max_rounds=3,
        )
        messages = loop.messages
    except errors_mod.ToolLoopError as e:  # the model may keep retrying: the transcript is kept
        messages = e.messages
    errors = [m for m in messages if m["role"] == "tool" and m["content"].startswith("Error: ")]
    assert (
        errors and "get_weather raised RuntimeError: weather service down" in errors[0]["content"]
    )
    with pytest.raises(errors_mod.ToolLoopError, match="get_weather raised RuntimeError") as ei:
        tools_mod.run_tool_loop(
            client,
            model,
            prompt,
            tools,
            demo["tools"],
            max_tokens=LIVE_MAX_TOKENS,
            temperature=0,
            on_tool_error="raise",
        )
    assert [m["role"] for m in ei.value.messages] == ["user", "assistant"]
    assert isinstance(ei.value.__cause__, RuntimeError)


@pytest.mark.server
def test_live_cut_inside_a_tool_call(live):
    """A reply cut inside a tool call on the real server: max_tokens ends inside the first call."""
    client, model, demo = live
    prompt = demo["weather"]["prompt"].format(city="Santa Clara")
    full = hc.chat(
        client, model, prompt, tools=demo["tools"], max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    assert full.tool_calls, "the stand-in made no tool call"
    reasoning = full.usage.reasoning_tokens or 0
    cut_at = reasoning + max(3, (full.usage.completion_tokens - reasoning) // 2)
    for r in (
        hc.chat(client, model, prompt, tools=demo["tools"], max_tokens=cut_at, temperature=0),
        stream_mod.stream_chat(
            client, model, prompt, tools=demo["tools"], max_tokens=cut_at, temperature=0
        ).result,
    ):
        assert r.truncated_in_tool_call, (r.finish_reason, r.content, r.tool_calls, r.usage)
        assert r.tool_calls == [] and not r.content.strip().startswith("<tool_call>")
        assert any(
            "truncated inside a tool call: raise max_tokens" in w.lower() for w in r.warnings
        )
    calls = []
    with pytest.raises(errors_mod.ToolLoopError, match="(?i)truncated inside a tool call"):
        tools_mod.run_tool_loop(
            client,
            model,
            prompt,
            {"get_weather": lambda **kw: calls.append(kw)},
            demo["tools"],
            max_tokens=cut_at,
            temperature=0,
        )
    assert calls == []
