"""An agent from a maintained SDK (pydantic-ai, ``lab.agents.agent``) against the real stand-in
server: the demo task's validated answer and trace, what pydantic-ai sends (the prompts the
stand-in learned), each failure kind from the real server, no thread left behind; and the
agents notebook end to end."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time

import pytest

from helpers.errors import AgentError, CookbookError
from helpers.paths import REPO_ROOT
from helpers.standin.data import agent_turns, load_demo
from helpers.standin.template import render_chat
from lab.agents import agent as agents
from tests.support.notebook_checks import assert_clean_outputs, real_out_notebooks
from tools import notebook_run

DEMO = load_demo()


def _demo_agent(url, model, *, thinking=True, requests=None, max_tokens=256, **kw):
    m = agents.agent_model(url, model, on_request=requests.append if requests is not None else None)
    settings = agents.model_settings(thinking=thinking, temperature=0, max_tokens=max_tokens)
    return agents.demo_agent(m, settings=settings, **kw)


@pytest.mark.server
@pytest.mark.parametrize("thinking", [True, False])
def test_the_agent_looks_up_both_cities_and_answers_in_the_schema(standin_server, thinking):
    requests, tools_run = [], []
    agent = _demo_agent(
        standin_server.base_url,
        standin_server.models()[0],
        thinking=thinking,
        requests=requests,
        on_tool=lambda name, args: tools_run.append((name, args["city"])),
    )
    run = agents.run_agent(agent)
    assert run.output == agents.WarmerCity(warmer_city="Tokyo", difference_c=4)
    assert run.requests == 2 and len(requests) == 2
    assert sorted(tools_run) == [("get_weather", "Paris"), ("get_weather", "Tokyo")]
    t = run.trace
    assert set(t["request"]) == {1, 2}  # the output tool's return belongs to the last request
    calls = t[t["part"] == "tool call"]
    assert list(calls["request"]) == [1, 1, 2]
    assert list(calls["tool"]) == ["get_weather", "get_weather", "final_result"]
    assert '"difference_c":4' in calls["content"].iloc[-1].replace(" ", "")
    results = t[(t["part"] == "tool result") & (t["tool"] == "get_weather")]
    assert len(results) == 2 and all("temperature_c" in c for c in results["content"])
    assert t.iloc[0]["part"] == "system" and t.iloc[0]["content"] == DEMO["agent"]["instructions"]
    reasoning = t[t["part"] == "reasoning"]
    assert (len(reasoning) == 2) == thinking  # each request's reasoning, apart from its calls
    assert run.input_tokens > 0 and run.output_tokens > 0 and run.seconds > 0
    # Every request uses tool_choice "auto" (the model writes its own calls, not a forced
    # JSON array), and both prompts are the ones the stand-in was trained on.
    assert {r["tool_choice"] for r in requests} == {"auto"}
    assert {r["chat_template_kwargs"]["enable_thinking"] for r in requests} == {thinking}
    trained = {
        render_chat(msgs, tools=tools, enable_thinking=th)
        for msgs, tools, th, _, _ in agent_turns(DEMO)
    }
    for r in requests:
        sent = render_chat(
            _as_vllm_renders(r["messages"]), tools=r["tools"], enable_thinking=thinking
        )
        assert sent in trained, "pydantic-ai's request is not the trajectory demo.yaml teaches"


def _as_vllm_renders(messages):
    """The messages as vLLM 0.32.0 hands them to the chat template: each tool call's JSON
    `arguments` decoded to a dict (vllm/renderers/chat_utils.py)."""
    out = json.loads(json.dumps(messages))
    for m in out:
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"] or "{}")
    return out


@pytest.mark.server
def test_the_output_tool_in_demo_yaml_is_what_pydantic_ai_sends(standin_server):
    requests = []
    agent = _demo_agent(standin_server.base_url, standin_server.models()[0], requests=requests)
    agents.run_agent(agent)
    sent = {t["function"]["name"]: t["function"] for t in requests[0]["tools"]}
    out = DEMO["agent"]["output_tool"]
    assert sent[out["name"]]["description"] == out["description"]
    params = dict(sent[out["name"]]["parameters"])
    assert params.pop("additionalProperties") is False  # not rendered by the chat template
    assert params == out["parameters"]
    weather = DEMO["tools"][0]["function"]
    assert sent["get_weather"]["description"] == weather["description"]
    assert sent["get_weather"]["parameters"]["properties"] == weather["parameters"]["properties"]
    # no "strict": vLLM then leaves the arguments to the model, and an answer out of the
    # schema's bounds reaches pydantic's validation (strict_tools=True puts it back)
    assert not [name for name, fn in sent.items() if fn.get("strict")]
    strict = []
    model = agents.agent_model(standin_server.base_url, standin_server.models()[0],
                               strict_tools=True, on_request=strict.append)  # fmt: skip
    settings = agents.model_settings(thinking=True, temperature=0, max_tokens=256)
    agents.run_agent(agents.demo_agent(model, settings=settings))
    assert all(t["function"].get("strict") is True for t in strict[0]["tools"])


@pytest.mark.server
def test_reasoning_that_spends_max_tokens_stops_the_run_with_the_reasoning_kept(standin_server):
    """max_tokens 8: the stand-in is still reasoning when the tokens run out (finish_reason
    length, no tool call); AgentError says so, names the fix and keeps the run."""
    agent = _demo_agent(standin_server.base_url, standin_server.models()[0], max_tokens=8)
    with pytest.raises(AgentError) as e:
        agents.run_agent(agent)
    msg = str(e.value)
    assert msg.startswith("the model ran out of max_tokens before it answered")
    assert "reasoning: 'Two lookups are needed." in msg  # the model's own last words
    assert "raise max_tokens in model_settings, or turn thinking off" in msg
    t = e.value.trace
    assert list(t["part"]) == ["system", "user", "reasoning"]
    assert type(e.value.cause).__name__ == "OutputTokenLimitExceeded"
    assert len(e.value.messages) == 2  # the request and the cut response


@pytest.mark.server
def test_a_refused_request_names_the_server_and_the_flags(standin_server):
    """A model name the server does not serve: vLLM answers 404; the error says so."""
    agent = _demo_agent(standin_server.base_url, "no-such-model")
    with pytest.raises(AgentError, match="the server refused the agent's request") as e:
        agents.run_agent(agent)
    assert "use the served model name (srv.model_name" in str(e.value)
    assert "404" in str(e.value) or "does not exist" in str(e.value)


@pytest.mark.server
@pytest.mark.parametrize(
    ("settings", "hint"),
    [
        ({"max_tokens": 10**9}, "lower max_tokens in model_settings"),
        ({"max_tokens": 64, "extra_body": {"top_k": "many"}}, "fix the request parameter"),
    ],
)
def test_a_refused_parameter_names_the_parameter_not_the_tool_flags(standin_server, settings, hint):
    m = agents.agent_model(standin_server.base_url, standin_server.models()[0])
    agent = agents.demo_agent(m, settings={**agents.model_settings(temperature=0), **settings})
    with pytest.raises(AgentError, match="the server refused the agent's request") as e:
        agents.run_agent(agent)
    assert hint in str(e.value) and "--enable-auto-tool-choice" not in str(e.value)


@pytest.mark.server
def test_a_tool_the_agent_does_not_have_is_named_as_missing(standin_server):
    """Your own agent on the stand-in (which learned only the demo trajectory): it calls
    get_weather, which this agent lacks, until the retries are spent; the error says the tool is
    not the agent's and names the ones it has (it said its calls 'kept failing validation')."""
    import pydantic
    from pydantic_ai import Agent
    from pydantic_ai.output import ToolOutput

    class Sum(pydantic.BaseModel):
        total: int

    m = agents.agent_model(standin_server.base_url, standin_server.models()[0])
    agent = Agent(
        m,
        output_type=ToolOutput(Sum),
        retries=1,
        model_settings=agents.model_settings(temperature=0, max_tokens=128),
    )

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    with pytest.raises(AgentError, match="no valid answer within the agent's retries") as e:
        agents.run_agent(agent, "What is 2 plus 3?")
    msg = str(e.value)
    assert (
        "it kept calling a tool this agent does not have (Unknown tool name: 'get_weather'. "
        "Available tools: 'add', 'final_result'): give the agent that tool, or instructions"
    ) in msg, msg
    assert "failing validation" not in msg
    assert "tool call get_weather" in msg  # the model's last words, with the tool it called


@pytest.mark.server
def test_a_second_run_continues_the_first_runs_conversation(standin_server):
    from pydantic_ai.usage import UsageLimits

    agent = _demo_agent(standin_server.base_url, standin_server.models()[0])
    first = agents.run_agent(agent)
    with pytest.raises(AgentError, match="raise it with run_agent"):
        agents.run_agent(agent, "And Berlin?", message_history=first.messages,
                         usage_limits=UsageLimits(request_limit=0))  # fmt: skip


@pytest.mark.server
def test_inside_a_running_event_loop_the_run_uses_its_own_thread_and_leaves_none(standin_server):
    """A notebook already runs an event loop: run_agent runs in a worker thread with its own
    loop and joins it."""
    agent = _demo_agent(standin_server.base_url, standin_server.models()[0])

    async def in_notebook():
        return agents.run_agent(agent)

    run = asyncio.run(in_notebook())
    assert run.output.warmer_city == "Tokyo"
    assert _no_agent_thread_left()


def test_an_interrupt_cancels_the_run_and_joins_its_thread(monkeypatch):
    """Ctrl-C in a notebook while the agent waits (here: raised from the caller's wait once
    the run has started): the worker's task is cancelled and its thread joined before the
    interrupt propagates."""
    started, cancelled = threading.Event(), threading.Event()
    real_join = threading.Thread.join
    interrupted = []

    def join(self, timeout=None):
        if self.name == "helpers-agent-run" and not interrupted and started.wait(5):
            interrupted.append(True)
            raise KeyboardInterrupt
        return real_join(self, timeout)

    monkeypatch.setattr(threading.Thread, "join", join)

    async def slow():
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def in_notebook():
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            agents._run_in_own_loop(slow)
        return time.monotonic() - t0

    seconds = asyncio.run(in_notebook())
    assert interrupted and started.is_set() and cancelled.is_set()
    assert seconds < 10  # cancelled, not waited out
    assert _no_agent_thread_left()


def _no_agent_thread_left(wait_s: float = 2.0) -> bool:
    """No worker thread of run_agent alive (a joined thread may take a moment to leave
    threading.enumerate())."""
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        if not [t for t in threading.enumerate() if t.name == "helpers-agent-run" and t.is_alive()]:
            return True
        time.sleep(0.05)
    return False


def test_no_server_at_the_url_says_so_and_how_to_start_one():
    agent = agents.demo_agent(
        agents.agent_model("http://127.0.0.1:9", "m", timeout=5),
        settings=agents.model_settings(temperature=0, max_tokens=16),
    )
    with pytest.raises(AgentError, match="no server answered the agent") as e:
        agents.run_agent(agent)
    assert "launch_server" in str(e.value) and "agent_model" in str(e.value)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: agents.agent_model("", "m"), TypeError, "`base_url` must be a non-empty string"),
        (lambda: agents.agent_model("http://h:1", None), TypeError, "srv.model_name"),
        (lambda: agents.agent_model("http://h:1", "m", timeout=0), ValueError, "`timeout`=0"),
        (lambda: agents.model_settings(thinking="yes"), TypeError, "True or False"),
        (lambda: agents.model_settings(max_tokens=0), ValueError, "`max_tokens`=0 must be >= 1"),
        (lambda: agents.model_settings(temperature=-1), ValueError, "`temperature`=-1"),
        (lambda: agents.demo_agent(None, retries="2"), TypeError, "`retries` must be an integer"),
        (lambda: agents.run_agent("not an agent", "hi"), TypeError, "demo_agent's result"),
        (lambda: agents.agent_model("127.0.0.1:8000", "m"), ValueError, "http://host:port"),
        (
            lambda: agents.agent_model("http://h:1/v1/chat/completions", "m"),
            ValueError,
            "with no endpoint path",
        ),
        (lambda: agents.model_settings(top_p=2), ValueError, "`top_p`=2 must be in (0, 1]"),
        (lambda: agents.demo_agent("http://127.0.0.1:8000"), TypeError, "agents.agent_model("),
    ],
)
def test_bad_arguments_are_named_before_anything_is_sent(call, error, words):
    with pytest.raises(error, match=re.escape(words)):
        call()


def test_a_server_started_with_an_api_key_gets_that_key_from_both_sdk_clients():
    from lab.agents import apis

    model = agents.agent_model("http://127.0.0.1:9", "m", api_key="s3cret")
    assert model.client.api_key == "s3cret"
    assert agents.agent_model("http://127.0.0.1:9", "m").client.api_key == "EMPTY"
    assert apis.make_anthropic_client("http://127.0.0.1:9", api_key="s3cret").api_key == "s3cret"


def test_your_own_agents_deps_and_pydantic_ais_forced_tool_choice_stay_available():
    """docs/agents.md: ``run_agent(..., deps=)`` passes the dependencies on;
    ``agent_model(forced_tool_choice=True)`` gives pydantic-ai's own "required"."""
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.models.test import TestModel

    own = Agent(TestModel(), deps_type=str)

    def city(ctx) -> str:
        return ctx.deps

    city.__annotations__["ctx"] = RunContext[str]  # a local name: no string annotation
    own.tool(city)
    assert agents.run_agent(own, "q", deps="Tokyo").output == '{"city":"Tokyo"}'
    forced = agents.agent_model("http://127.0.0.1:9", "m", forced_tool_choice=True).profile
    assert forced["supports_forced_tool_choice"]
    assert not agents.agent_model("http://127.0.0.1:9", "m").profile["supports_forced_tool_choice"]


def test_an_empty_prompt_is_refused_with_what_to_pass():
    agent = agents.demo_agent(agents.agent_model("http://127.0.0.1:9", "m"))
    with pytest.raises(TypeError, match="`prompt` must be a non-empty string"):
        agents.run_agent(agent, "  ")


def test_without_pydantic_ai_the_error_gives_the_pip_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    with pytest.raises(CookbookError, match=r"pip install 'pydantic-ai-slim\[openai\]==2.68.0'"):
        agents.agent_model("http://127.0.0.1:9", "m")


# ------------------------------------------------------------------------------ the notebook


@pytest.mark.notebook
@pytest.mark.server
def test_the_agents_notebook_on_the_standin(standin_server, shared_kernel):
    """Every section against the session's stand-in server (attached, left running): the
    validated schema answers, the three APIs, the SDK agent's answer and trace, and each
    failure kind named."""
    book = REPO_ROOT / "notebooks" / "agents.ipynb"
    started = time.time()
    executed = notebook_run.run_notebook(
        book, {"install": False, "server_url": standin_server.url},
        output=real_out_notebooks() / book.name, progress=False, kernel=shared_kernel,
    )  # fmt: skip
    print(f"\nagents notebook: {time.time() - started:.0f} s")
    text = executed.read_text()
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "--tool-call-parser: qwen3_coder" in text and ": MISSING" not in text
    assert text.count("Capital(city='Tokyo', sure=True)") >= 4  # thinking on/off x streamed or not
    assert "schema answers validated with pydantic: thinking off 2 of 2, thinking on 2 of 2" in text
    for api in ("chat completions", "responses", "messages"):
        assert api in text
    assert text.count("get_weather(") >= 3  # one weather call per API
    assert "answer WarmerCity(warmer_city='Tokyo', difference_c=4) after 2 model request(s)" in text
    assert "tool get_weather('Tokyo')" in text and "tool get_weather('Paris')" in text
    assert "schema + tools: TypeError: structured_chat: `tools` are not sent" in text
    assert "reasoning swallows the answer: StructuredAnswerMissingError" in text
    assert "max_tokens spent on reasoning: AgentError: the model ran out of max_tokens" in text
    assert standin_server.is_running()  # attached, left alone
    assert_clean_outputs(executed, stand_in=True, benchmarks=False)


def test_a_bad_agent_retries_is_refused_in_step_one_by_its_parameter_name():
    """``agent_retries`` is checked with the other parameters, before the launch, and the error
    names the parameter (not the helper's ``retries`` a step later)."""
    from helpers.errors import check_number

    source = (REPO_ROOT / "cookbook" / "topics" / "agents.py").read_text()
    assert source.index('"agent_retries", agent_retries') < source.index("launch_server(")
    with pytest.raises(ValueError, match="`agent_retries`=-1 must be >= 0"):
        check_number("agents notebook", "agent_retries", -1, integer=True, minimum=0)


def test_the_notebooks_get_weather_tool_describes_itself_as_the_demo_tool_does():
    """agents.ipynb step 4 builds its pydantic-ai Agent in the cell; its tool's docstring is the
    description the model reads, so it must say what cookbook/demo.yaml's ``get_weather`` says
    (the stand-in was trained on that request). The backend answers known cities from demo.yaml
    and an unknown one with an error the model can read, without raising."""
    source = (REPO_ROOT / "cookbook" / "topics" / "agents.py").read_text()
    doc = re.search(r'def get_weather\(city: str\) -> str:\n    """(.*?)"""', source, re.S).group(1)
    weather = load_demo()["tools"][0]["function"]
    summary, _, args = doc.partition("\n\n")
    assert summary == weather["description"]
    assert (
        args.split("city: ")[1].strip()
        == weather["parameters"]["properties"]["city"]["description"]
    )
    assert json.loads(agents.weather("Tokyo"))["temperature_c"] == 18
    assert json.loads(agents.weather("Atlantis")) == {"error": "no weather known for Atlantis"}
