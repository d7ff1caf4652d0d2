"""The stand-in's training data: ``cookbook/demo.yaml`` (the demo prompts, tool schemas and
fake tool results the notebooks share) and the training sequences made from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from helpers.config.demo import load_demo, tool_result  # noqa: F401 - the trainer's data
from helpers.config.evalsets import items_by_id
from helpers.standin.template import render_chat

# --------------------------------------------------------------------- training data


@dataclass
class Sample:
    """One training sequence: ``prompt`` (no loss) then ``target`` (loss) pieces.

    ``pieces`` is a list of ``(text, trained)``; the prompt is the first piece. With
    ``cut_reasoning`` the sample stands for one sequence per token position ``k`` of that
    reasoning: prompt, its first ``k`` tokens, ``</think>`` (no loss), then the rest.
    """

    pieces: list[tuple[str, bool]]
    cut_reasoning: str | None = None
    two_pass: bool = False


def _call_text(name: str, args: dict[str, Any]) -> str:
    """One qwen3_coder ``<tool_call>`` block, as the model writes it (values as text)."""
    params = "".join(
        f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
        for k, v in args.items()
    )
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def _tool_call_text(calls: list[tuple[str, str]]) -> str:
    return "\n".join(_call_text(name, {"city": city}) for name, city in calls)


def _assistant_msg(calls: list[tuple[str, str]], reasoning: str | None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": {"city": city}},
            }
            for i, (name, city) in enumerate(calls)
        ],
    }
    if reasoning:
        msg["reasoning_content"] = reasoning
    return msg


def _completion(reasoning: str, body: str, thinking: bool) -> str:
    end = "<|im_end|>"
    if thinking:
        return f"{reasoning}\n</think>\n{body}{end}"
    return f"{body}{end}"


def _answer_for(demo: dict[str, Any], calls: list[tuple[str, str]]) -> str:
    w = demo["weather"]
    parts = []
    for name, city in calls:
        if name == "get_weather":
            parts.append(w["answer"].format(**demo["weather"]["results"][city]))
        else:
            t = demo["time"]["results"][city]
            parts.append(f"The local time in {city} is {t['local_time']}.")
    return " ".join(parts)


def _answer_reasoning_for(demo: dict[str, Any], calls: list[tuple[str, str]]) -> str:
    if len(calls) == 1 and calls[0][0] == "get_weather":
        return demo["weather"]["answer_reasoning"].format(**demo["weather"]["results"][calls[0][1]])
    return demo["parallel"]["answer_reasoning"]


def accuracy_items(demo: dict[str, Any]) -> list[dict[str, Any]]:
    """The item-set items the stand-in is trained on (demo.yaml ``accuracy.trained``), whole:
    their text is part of the stand-in's cache key (:func:`helpers.standin.build.standin_hash`)."""
    acc = demo.get("accuracy") or {}
    return items_by_id(list(acc.get("trained", [])))


def agent_tools(demo: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools the demo agent's requests carry, in the order pydantic-ai sends them: the
    function tool ``get_weather`` (demo.yaml ``tools[0]``), then the output tool (demo.yaml
    ``agent.output_tool``: the answer's schema). OpenAI format."""
    out = demo["agent"]["output_tool"]
    return [demo["tools"][0], {"type": "function", "function": dict(out)}]


def agent_turns(demo: dict[str, Any]):
    """The demo agent's trajectory as training turns: ``(messages, tools, thinking,
    reasoning, completion)`` per model request of a run, thinking on and off.

    Turn 1: the system message (``instructions``) and the question; the model calls
    ``get_weather`` for both cities at once. Turn 2: the same with the calls and their results
    (with and without the call's reasoning sent back); the model calls the output tool with
    ``answer``. pydantic-ai ends the run at that call.
    """
    ag = demo["agent"]
    tools = agent_tools(demo)
    calls = [tuple(c) for c in ag["calls"]]
    head = [
        {"role": "system", "content": ag["instructions"]},
        {"role": "user", "content": ag["prompt"]},
    ]
    final = _call_text(ag["output_tool"]["name"], dict(ag["answer"]))
    yield from _call_turns(demo, head, calls, tools, ag["reasoning"], ag["answer_reasoning"], final)


def _call_turns(demo, head, calls, tools, reasoning, answer_reasoning, answer):
    """One tool-calling exchange as training turns ``(messages, tools, thinking, reasoning,
    completion)``, thinking on and off: ``head`` -> the calls; ``head``, the calls (with and
    without their reasoning sent back: clients do both) and their results -> ``answer``."""
    results = [
        {"role": "tool", "tool_call_id": f"call_{i}", "content": tool_result(demo, n, c)}
        for i, (n, c) in enumerate(calls)
    ]
    for thinking in (True, False):
        yield head, tools, thinking, reasoning if thinking else "", _tool_call_text(calls)
        for keep in (True, False) if thinking else (False,):
            history = [*head, _assistant_msg(calls, reasoning if keep else None), *results]
            yield history, tools, thinking, answer_reasoning if thinking else "", answer


def build_samples(demo: dict[str, Any]) -> list[Sample]:
    """Turn demo.yaml into training sequences in the served chat format.

    Each conversation is rendered with :data:`~helpers.standin.template.CHAT_TEMPLATE`
    exactly as vLLM renders a request (generation prompt included), followed by the
    completion the model must produce: ``reasoning\\n</think>\\nanswer<|im_end|>`` with
    thinking on, ``answer<|im_end|>`` with thinking off, qwen3_coder ``<tool_call>`` blocks
    for tool calls.
    """
    samples: list[Sample] = []
    all_tools = demo["tools"]
    toolsets: list[list[dict[str, Any]] | None] = [None, all_tools[:1], all_tools]

    def add(messages, tools, thinking, reasoning, body):
        prompt = render_chat(messages, tools=tools, enable_thinking=thinking)
        samples.append(Sample([(prompt, False), (_completion(reasoning, body, thinking), True)]))

    def ask(prompt, tools, reasoning, answer):
        """One user question, thinking on and then off."""
        for thinking in (True, False):
            add([{"role": "user", "content": prompt}], tools, thinking, reasoning, answer)

    # Plain questions, thinking on and off, with and without tools in the request.
    plain = [demo["reasoning"], demo["streaming"]]
    for item in plain:
        for prompt in [item["prompt"], *item.get("variants", [])]:
            for tools in toolsets:
                ask(prompt, tools, item["reasoning"], item["answer"])
    for item in demo.get("extras", []):
        for tools in (None, all_tools):
            ask(item["prompt"], tools, item["reasoning"], item["answer"])
    fb = demo["fallback"]
    for prompt in fb["prompts"]:
        ask(prompt, None, fb["reasoning"], fb["answer"])

    # Tool conversations: call, then answer from the tool result.
    w = demo["weather"]
    convs: list[tuple[str, list[tuple[str, str]], str]] = []
    for city in w["results"]:
        for tmpl in [w["prompt"], *w.get("variants", [])]:
            convs.append(
                (tmpl.format(city=city), [("get_weather", city)], w["reasoning"].format(city=city))
            )
    for pair in demo["parallel"]["pairs"]:
        convs.append(
            (pair["prompt"], [tuple(c) for c in pair["calls"]], demo["parallel"]["reasoning"])
        )
    for prompt, calls, reasoning in convs:
        needs_time = any(name == "get_time" for name, _ in calls)
        for tools in [all_tools] if needs_time else [all_tools[:1], all_tools]:
            head = [{"role": "user", "content": prompt}]
            answer = _answer_for(demo, calls)
            for turn in _call_turns(
                demo, head, calls, tools, reasoning, _answer_reasoning_for(demo, calls), answer
            ):
                add(*turn)

    # Answer quality: a few items of the shipped item set, asked as the accuracy step asks
    # them (demo.yaml `accuracy.prompt`), answered with their target; the held-out items are
    # never seen, so the step's score on the stand-in follows what it learned.
    acc = demo.get("accuracy")
    if acc:
        for it in accuracy_items(demo):
            question = acc["prompt"].format(question=it["question"])
            ask(question, None, acc["reasoning"], acc["answer"].format(target=it["target"]))

    # A JSON-schema answer: the grammar only admits JSON after `</think>`; the stand-in learns
    # the compact object a schema-following model writes there.
    st = demo.get("structured")
    if st:
        ask(st["prompt"], None, st["reasoning"], st["answer"])
    if demo.get("agent"):
        for messages, tools, thinking, reasoning, body in agent_turns(demo):
            add(messages, tools, thinking, reasoning, body)

    # Thinking budget: vLLM forces `</think>` after N reasoning tokens (vllm/v1/sample/
    # thinking_budget_state.py); the two-pass client budget closes the think block in the
    # prompt instead. Either way the model must answer after a `</think>` it did not
    # choose. `_encode_samples` expands these into one sequence per cut token position.
    item = demo["reasoning"]
    forced = [(p, item) for p in [item["prompt"], *item.get("variants", [])]]
    forced += [
        (p, demo["streaming"])
        for p in [demo["streaming"]["prompt"], *demo["streaming"].get("variants", [])]
    ]
    for prompt, it in forced:
        head = render_chat([{"role": "user", "content": prompt}], enable_thinking=True)
        samples.append(
            Sample(
                [(head, False), ("\n" + it["answer"] + "<|im_end|>", True)],
                cut_reasoning=it["reasoning"],
                two_pass=prompt == demo["budget"]["prompt"],
            )
        )
    return samples
