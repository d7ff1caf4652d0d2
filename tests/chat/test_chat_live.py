"""``helpers.chat`` against the session's real vLLM CPU stand-in (``standin_server``): the
SDK's own requests, checked by the helpers' checker; structure, not text.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from helpers.chat import display, drafting, stream, types
from helpers.server import endpoint
from tests.support.chat_replay import DATA, MODEL, ask, load, tool_loop

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
        on = ask(client, prompt, model=model, max_tokens=LIVE_MAX_TOKENS, temperature=0)
        off = ask(
            client, prompt, model=model, thinking=False, max_tokens=LIVE_MAX_TOKENS, temperature=0
        )
    assert on.reasoning.strip() and on.content.strip() and on.finish_reason == "stop"
    assert on.usage.reasoning_tokens and 0 < on.usage.reasoning_tokens < on.usage.completion_tokens
    assert not on.reasoning_parser_missing and not on.truncated_in_reasoning
    assert off.reasoning == "" and off.content.strip() and off.finish_reason == "stop"
    assert off.usage.completion_tokens < on.usage.completion_tokens


@pytest.mark.server
def test_live_force_nonempty_content_is_accepted(live):
    client, model, demo = live
    r = ask(
        client,
        demo["reasoning"]["prompt"],
        model=model,
        max_tokens=LIVE_MAX_TOKENS,
        temperature=0,
        force_nonempty_content=True,
    )
    assert r.content.strip() and r.finish_reason == "stop"


@pytest.mark.server
def test_live_reasoning_budget_caps_reasoning(live):
    client, model, demo = live
    prompt = demo["budget"]["prompt"]
    free = ask(client, prompt, model=model, max_tokens=LIVE_MAX_TOKENS, temperature=0)
    # A budget below what the model thinks unbudgeted (the stand-in's BPE packs its
    # reasoning into few tokens, so demo.yaml's budget may not bite).
    budget = min(demo["budget"]["thinking_token_budget"], max(2, free.usage.reasoning_tokens // 2))
    capped = ask(client, prompt, model=model, max_tokens=LIVE_MAX_TOKENS, temperature=0,
                 extra_body={"thinking_token_budget": budget})  # fmt: skip
    assert capped.content.strip() and capped.finish_reason == "stop"
    assert capped.usage.reasoning_tokens is not None
    assert capped.usage.reasoning_tokens <= budget < free.usage.reasoning_tokens
    assert len(capped.reasoning) < len(free.reasoning)


def test_a_drafting_server_is_told_apart_for_the_two_pass_budget(rec, client):
    """A server that exports vLLM's speculative-decoding counters drafts (the recorded
    /metrics of the n-gram stand-in server): budget_method_for picks the two-pass budget;
    without them (or without /metrics) the server's own. An overrun reported on a drafting
    server names the cause."""
    rec.metrics = (DATA.parent / "bench" / "metrics_after.prom").read_text()
    rec.version = json.dumps({"version": "0.32.0"})
    assert drafting.server_facts(client) == {
        "url": rec.base_url,
        "version": "0.32.0",
        "drafting": True,
    }
    assert drafting.budget_method_for(client) == "two_pass"
    over = types.ChatResult(reasoning="long", content="x", usage=types.Usage(reasoning_tokens=40))
    line = display.budget_report(over, 8, drafting=True)
    assert line.startswith("UNEXPECTED") and "#39573, #54906" in line and "two_pass_budget" in line
    assert "#39573" not in display.budget_report(over, 8)


def test_a_server_without_metrics_is_not_taken_for_a_drafting_one(rec, client):
    assert drafting.server_facts(client)["drafting"] is None  # /metrics answers 404
    assert drafting.budget_method_for(client) == "server"


@pytest.mark.server
def test_live_server_without_drafting_keeps_the_server_budget(live):
    client, model, _ = live
    facts = drafting.server_facts(client)
    assert facts["drafting"] is False and facts["version"] == "0.32.0"
    assert drafting.budget_method_for(client) == "server"


@pytest.mark.server
def test_live_two_pass_budget(live):
    client, model, demo = live
    budget = demo["budget"]["thinking_token_budget"]
    question = [{"role": "user", "content": demo["budget"]["prompt"]}]
    r = drafting.two_pass_budget(
        client, model, question, budget, max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    assert r.reasoning.strip() and r.content.strip()
    assert isinstance(r.raw, list) and len(r.raw) == 2  # the reasoning was cut: two passes
    assert "</think>" not in r.content and not r.truncated_in_reasoning
    # the second pass writes after the closed think block: none of it is reasoning, though
    # vLLM 0.32.0's parser, blind to the prompt's </think>, reports all of it as such
    assert r.usage.reasoning_tokens == r.raw[0].usage.completion_tokens_details.reasoning_tokens
    assert r.usage.reasoning_tokens <= budget
    assert not display.budget_report(r, budget, drafting=True).startswith("UNEXPECTED")


@pytest.mark.server
@pytest.mark.parametrize(
    ("reasoning", "sent"),
    [(" w76704 w11498\n", "<think>\nw76704 w11498\n</think>\n\n"), ("\n ", "<think></think>")],
)
def test_live_server_takes_the_second_pass_whatever_spaces_the_reasoning_has(
    rec, client, live, reasoning, sent
):
    """The second request as two_pass_budget builds it, after a first pass whose reasoning
    starts with a space and ends with a newline (as the weightless tokenizer's did on the
    H100, 2026-12-06) or is only whitespace, is accepted by the real vLLM server: its template
    renders the reasoning stripped, and the same request with the reasoning as given answers
    HTTP 400 (transformers' continue_final_message check)."""
    import openai

    first = load("length_in_reasoning")
    first["choices"][0]["message"]["reasoning"] = reasoning
    rec.queue(first, "thinking_off")
    question = [{"role": "user", "content": "Briefly explain: what is vLLM?"}]
    drafting.two_pass_budget(client, MODEL, question, 8, max_tokens=64)
    messages = rec.bodies[1]["messages"]
    assert messages[-1]["content"] == sent
    live_client, model, _ = live
    continuation = {"continue_final_message": True, "add_generation_prompt": False}
    reply = live_client.chat.completions.create(
        model=model, messages=messages, max_tokens=1, temperature=0, extra_body=continuation
    )
    assert reply.usage.prompt_tokens > 0 and reply.choices[0].finish_reason in ("length", "stop")
    as_given = [
        *messages[:-1],
        {"role": "assistant", "content": f"<think>\n{reasoning}\n</think>\n\n"},
    ]
    with pytest.raises(openai.BadRequestError, match="does not appear in the chat"):
        live_client.chat.completions.create(
            model=model, messages=as_given, max_tokens=1, temperature=0, extra_body=continuation
        )


@pytest.mark.server
def test_live_length_exhausted_in_reasoning_warns(live):
    client, model, demo = live
    with pytest.warns(types.ReasoningTruncatedWarning, match="raise max_tokens"):
        r = ask(client, demo["reasoning"]["prompt"], model=model, max_tokens=4, temperature=0)
    assert r.truncated_in_reasoning and r.finish_reason == "length" and r.content == ""
    assert r.reasoning.strip()


@pytest.mark.server
def test_live_stream_matches_chat(live):
    client, model, demo = live
    prompt = demo["streaming"]["prompt"]
    plain = ask(client, prompt, model=model, max_tokens=LIVE_MAX_TOKENS, temperature=0)
    chunks = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=LIVE_MAX_TOKENS,
        temperature=0, stream=True, stream_options={"include_usage": True},
    )  # fmt: skip
    pieces = []
    streamed = stream.check_stream(chunks, on_piece=pieces.append, max_tokens=LIVE_MAX_TOKENS)
    kinds = [kind for kind, _ in pieces]
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
    messages, turns, outputs = tool_loop(
        client, demo["weather"]["prompt"].format(city="Santa Clara"), _live_tools(demo),
        demo["tools"], model=model, max_tokens=LIVE_MAX_TOKENS, temperature=0,
    )  # fmt: skip
    calls = [c for t in turns for c in t.tool_calls]
    assert calls, "the model made no tool call"
    for call in calls:
        assert call.name in ("get_weather", "get_time") and isinstance(call.arguments, dict)
        assert isinstance(call.arguments.get("city"), str) and call.id
    assert turns[0].finish_reason == "tool_calls" and not any(
        o.startswith("Error") for o in outputs
    )
    assert turns[-1].content.strip() and not turns[-1].tool_calls
    assert [m["role"] for m in messages][:3] == ["user", "assistant", "tool"]


@pytest.mark.server
def test_live_parallel_tool_calls_streamed_and_not(live):
    client, model, demo = live
    prompt = demo["parallel"]["pairs"][0]["prompt"]
    asked = dict(model=model, tools=demo["tools"], max_tokens=LIVE_MAX_TOKENS, temperature=0)
    plain = ask(client, prompt, **asked)
    streamed = ask(client, prompt, stream=True, **asked)
    assert len(plain.tool_calls) == 2 and plain.finish_reason == "tool_calls"
    assert all(isinstance(tc.arguments, dict) and tc.arguments for tc in plain.tool_calls)
    assert [(tc.name, tc.arguments) for tc in streamed.tool_calls] == [
        (tc.name, tc.arguments) for tc in plain.tool_calls
    ]
    _, turns, outputs = tool_loop(client, prompt, _live_tools(demo), demo["tools"], model=model,
                                  max_tokens=LIVE_MAX_TOKENS, temperature=0)  # fmt: skip
    assert len(outputs) >= 2 and turns[-1].content.strip()


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
def test_live_failing_tool_goes_back_to_the_model(live):
    """A failing tool on the real server: the tool's error is the tool result; nothing is lost."""
    client, model, demo = live

    def get_weather(city: str) -> dict:
        raise RuntimeError(f"weather service down for {city}")

    tools = {**_live_tools(demo), "get_weather": get_weather}
    prompt = demo["weather"]["prompt"].format(city="Santa Clara")
    messages, _, _ = tool_loop(client, prompt, tools, demo["tools"], model=model,
                               max_tokens=LIVE_MAX_TOKENS, temperature=0)  # fmt: skip
    errors = [m for m in messages if m["role"] == "tool" and m["content"].startswith("Error: ")]
    assert (
        errors and "get_weather raised RuntimeError: weather service down" in errors[0]["content"]
    )


@pytest.mark.server
def test_live_cut_inside_a_tool_call(live):
    """A reply cut inside a tool call on the real server: max_tokens ends inside the first call."""
    client, model, demo = live
    prompt = demo["weather"]["prompt"].format(city="Santa Clara")
    asked = dict(model=model, tools=demo["tools"], temperature=0)
    full = ask(client, prompt, max_tokens=LIVE_MAX_TOKENS, **asked)
    assert full.tool_calls, "the stand-in made no tool call"
    reasoning = full.usage.reasoning_tokens or 0
    cut_at = reasoning + max(3, (full.usage.completion_tokens - reasoning) // 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", types.ToolCallTruncatedWarning)
        cut = [ask(client, prompt, max_tokens=cut_at, stream=s, **asked) for s in (False, True)]
    for r in cut:
        assert r.truncated_in_tool_call, (r.finish_reason, r.content, r.tool_calls, r.usage)
        assert r.tool_calls == [] and not r.content.strip().startswith("<tool_call>")
        assert any(
            "truncated inside a tool call: raise max_tokens" in w.lower() for w in r.warnings
        )
    calls = []
    with pytest.warns(types.ToolCallTruncatedWarning):
        _, turns, outputs = tool_loop(client, prompt, {"get_weather": lambda **kw: calls.append(kw)},
                                      demo["tools"], max_tokens=cut_at, **{k: v for k, v in asked.items() if k != "tools"})  # fmt: skip
    assert calls == [] and outputs == [] and len(turns) == 1
