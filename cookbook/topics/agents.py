# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Agents on Nemotron 3.5 Lightning: schema answers, the Responses and Messages APIs, an SDK agent
#
# Nemotron 3.5 Lightning is trained for agent harnesses, and agents need three things from the
# server beside chat: answers that follow a JSON schema, the APIs the harnesses speak
# (OpenAI's `/v1/responses`, Anthropic's `/v1/messages`), and tool calls that an SDK can
# drive through a multi-step task. This notebook serves the model with the registry's flags
# and shows each against the running server: the request as the SDK call you would write,
# then a check of the reply, with what goes wrong named (step 1 launches the server, step 6
# stops it):
#
# 2. **A JSON-schema answer**, reasoning on and off, streamed and not, validated with pydantic
#    (the checks: `lab.agents.structured`).
# 3. **The same turn on the Responses and Messages APIs**: where reasoning, answer and tool
#    calls come back on each (the readers: `lab.agents.apis`).
# 4. **An agent from a maintained SDK**, [pydantic-ai](https://ai.pydantic.dev): two tool
#    lookups, a computation, an answer in a schema, with its trace (`lab.agents.agent`).
# 5. **What goes wrong, by name**: each failure kind raises an error that says what happened.
#
# **Stand-in mode** (`stand_in = True`, what CI runs): the tiny CPU stand-in learned exactly
# this notebook's schema answer and the agent's trajectory, so every cell completes and
# shows the real server's replies. **Weightless** (`weightless = True` on a GPU): the real
# architecture with random weights. Guided decoding still follows the schema on noise, but
# the weightless tokenizer joins its tokens with spaces, so the answer does not validate; a
# cell that cannot complete on noise text (that answer, the agent's tool calls) says so
# instead of failing. A request the server fails (HTTP 5xx) is no noise: the SDK's error in
# steps 2-3; the helpers of steps 4-5 raise `ServerRequestError` with the server's words and
# its log's error lines.

# %% tags=["parameters"]
target = "h200"  # a key of cookbook/recipe.yaml `targets`: its flags serve the model
stand_in = True  # True: the CPU stand-in; False: the target's GPU
weightless = False  # True (GPU): the exact architecture with random weights, no download: the APIs and the grammar are real, the text is noise
install = True  # pip-install the cookbook's helpers with the `notebook` extra first (%pip): pydantic-ai, anthropic, lm-eval
server_url = None  # attach to an already running vLLM server of this target instead of launching one
extra_args = None  # more serve flags, e.g. {"--log-error-stack": True} (vLLM then logs the stack of a request that fails with HTTP 500)
max_tokens = None  # per request (reasoning counts too); None means 1024 on the stand-in, 256 weightless, 16000 on a GPU
temperature = None  # None means 0 (greedy) on the stand-in and 1.0 on a GPU (seed 004)
agent_retries = 1  # how often the agent may send an invalid answer back to the model for another try

# %%
import importlib.util

if install and (importlib.util.find_spec("helpers") is None or importlib.util.find_spec("pydantic_ai") is None):
    %pip install -q -e "..[notebook]"

# %% [markdown]
# ## 1. The server, with the flags these features need
#
# Reasoning apart from the answer needs `--reasoning-parser`; tool calls need
# `--enable-auto-tool-choice` and `--tool-call-parser`; schema answers need a
# structured-outputs backend (vLLM's default, xgrammar, is in every release offered). The
# registry's target command carries the flags, and each is checked against the flag table of
# the vLLM release it runs on before the server starts.
#
# **Expected:** the three flags with their values, "flags checked", `ready: http://...`, then
# the sampling every request below sends (this mode's: greedy on the stand-in).

# %%
from helpers.config.flagtable import check_config
from helpers.config.resolve import resolve
from helpers.errors import check_number
from helpers.machine.libraries import check_libraries
from helpers.server.launch import launch_server
from helpers.weights.prepare import fetch, prepare

check_libraries("pydantic_ai", "anthropic")  # the agent and Messages sections, before the launch
check_number("agents notebook", "agent_retries", agent_retries, integer=True, minimum=0)
cfg = resolve(target, extra_args=extra_args)
for flag in ("--reasoning-parser", "--enable-auto-tool-choice", "--tool-call-parser"):
    print(f"{flag}: {cfg.args.get(flag, 'MISSING')}")
check_config(cfg)
run = prepare(cfg, stand_in=stand_in, weightless=weightless, server_url=server_url, max_tokens=max_tokens)
srv = launch_server(fetch(run))  # srv.run: the mode and its defaults
llm, model = srv.client(), srv.model_name
defaults = srv.run.defaults  # this mode's values (helpers/config/run.py); the parameters cell's win
sampling = dict(max_tokens=max_tokens or defaults.max_tokens, temperature=defaults.temperature if temperature is None else temperature,
                top_p=defaults.top_p)
print(sampling)

# %% [markdown]
# ## 2. A JSON-schema answer, validated
#
# The request is the SDK's chat completions call with the schema in `extra_body`: vLLM's
# `structured_outputs`, as a grammar `compact_grammar_for` compiles from `Capital` with no
# optional whitespace. Why not the OpenAI `response_format` (`{"type": "json_schema", ...}`,
# what SDKs send)? With it the small stand-in wrote `{` and then newlines until it ran out of
# tokens. Thinking is the template's `enable_thinking`; with the reasoning parser the grammar
# starts after `</think>`, so the reasoning stays free text. `check_reply` reads the reply
# (reasoning apart, a warning when `max_tokens` cut it), pydantic validates `content`, and
# when it does not, `validate_answer` raises the error that says why (reasoning that spent
# `max_tokens`, the answer left in the reasoning, JSON that does not fit).
#
# **Expected:** the reasoning, then `Capital(city='Tokyo', sure=True)` on the stand-in.
# Weightless: noise rarely closes its reasoning, so a line says `max_tokens` ran out first.

# %%
from typing import Literal

import pydantic

from helpers.chat.parse import check_reply
from helpers.config.demo import load_demo
from lab.agents.noise import noise_tolerant
from lab.agents.structured import compact_grammar_for, validate_answer, warn_if_drafting

class Capital(pydantic.BaseModel):
    city: Literal["Tokyo", "Paris", "Other"]
    sure: bool

demo = load_demo()
question = [{"role": "user", "content": demo["structured"]["prompt"]}]
schema_body = {"structured_outputs": {"grammar": compact_grammar_for(Capital)}, "chat_template_kwargs": {"enable_thinking": True}}
warn_if_drafting(llm, thinking=True)  # a server that drafts can break the grammar after </think>: says so
reply = llm.chat.completions.create(model=model, messages=question, extra_body=schema_body, **sampling)
with noise_tolerant(srv.run.noise, "schema answer"):
    turn = check_reply(reply, max_tokens=sampling["max_tokens"], extra_body=schema_body)
    print("reasoning:", turn.reasoning.strip())
    try:
        print("answer:", repr(Capital.model_validate_json(turn.content)))
    except pydantic.ValidationError:
        validate_answer(turn, Capital)  # raises the error that says why

# %% [markdown]
# The same request with thinking on and off, streamed and not (`stream=True` with
# `stream_options`, as in the chat notebooks). `check_structured` does what the cell above did,
# for a reply or a stream: read it, validate `content` with pydantic, name what failed.
#
# **Expected:** four rows, each `Capital(city='Tokyo', sure=True)` on the stand-in; the
# reasoning column empty with thinking off. Weightless: the grammar holds on noise text, but
# the weightless tokenizer spells the object with spaces (`{ " c i t y " ...`), so the
# thinking-off rows report invalid JSON, and the thinking-on rows that `max_tokens` ran out
# first (on the tests' CPU noise server, 64 tokens: 0 of 2 off, 0 of 2 on).

# %%
import pandas as pd
from IPython.display import display

from lab.agents.structured import check_structured

rows = []
for thinking in (True, False):
    for stream in (False, True):
        body = {**schema_body, "chat_template_kwargs": {"enable_thinking": thinking}}
        streaming = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
        reply = llm.chat.completions.create(model=model, messages=question, extra_body=body, **sampling, **streaming)
        with noise_tolerant(srv.run.noise, "schema answer"):
            r = check_structured(reply, Capital, max_tokens=sampling["max_tokens"], extra_body=body)
            rows.append({"thinking": thinking, "streamed": stream, "value": repr(r.value), "content": r.chat.content, "reasoning": r.chat.reasoning})
display(pd.DataFrame(rows))
print("schema answers validated with pydantic:", ", ".join(f"thinking {'on' if t else 'off'} {sum(r['thinking'] == t for r in rows)} of 2" for t in (False, True)))

# %% [markdown]
# ## 3. The same turn on the Responses and Messages APIs
#
# Coding agents and SDKs speak `POST /v1/responses` (OpenAI) or `POST /v1/messages`
# (Anthropic); vLLM serves both from the same parsers. Each question goes out as each SDK's
# own call: `llm.chat.completions.create`, `llm.responses.create` (the turn as `input`, the
# limit as `max_output_tokens`) and `claude_style.messages.create` (an `anthropic.Anthropic`
# client on the same server; `max_tokens` is required, and the typed call has no
# `temperature` / `top_p`, so they go in `extra_body`). Thinking is the same
# `chat_template_kwargs` on all three; `responses_tools` and `messages_tools` give the tool
# each API's shape. `check_reply`, `check_responses_reply` and `check_messages_reply` read the
# replies into one result: reasoning (a `reasoning` item / a `thinking` block), the answer
# (`output_text` / a `text` block) and tool calls (`function_call` items / `tool_use` blocks),
# with a warning when the token limit cut the reasoning.
#
# **Expected:** for each API, the capital question answered with its reasoning apart, and the
# weather question answered with a `get_weather({'city': 'Santa Clara'})` call.

# %%
from lab.agents.apis import check_messages_reply, check_responses_reply, make_anthropic_client, messages_tools, responses_tools

claude_style = make_anthropic_client(srv.base_url)  # anthropic.Anthropic at the server's root, no retries
thinking_on = {"chat_template_kwargs": {"enable_thinking": True}}
limit, temperature, top_p = sampling["max_tokens"], sampling["temperature"], sampling["top_p"]
turns = []  # (api, prompt, the checked reply)
for prompt, tools in (("What is the capital of Japan?", []), ("What's the weather in Santa Clara?", demo["tools"][:1])):
    question = [{"role": "user", "content": prompt}]
    with noise_tolerant(srv.run.noise, "chat completions turn"):
        reply = llm.chat.completions.create(model=model, messages=question, max_tokens=limit, temperature=temperature, top_p=top_p,
                                            extra_body=thinking_on, **({"tools": tools} if tools else {}))  # fmt: skip
        turns.append(("chat completions", prompt, check_reply(reply, tools=tools, max_tokens=limit, extra_body=thinking_on)))
    with noise_tolerant(srv.run.noise, "responses turn"):
        response = llm.responses.create(model=model, input=question, max_output_tokens=limit, temperature=temperature, top_p=top_p,
                                        extra_body=thinking_on, **({"tools": responses_tools(tools)} if tools else {}))  # fmt: skip
        turns.append(("responses", prompt, check_responses_reply(response, max_output_tokens=limit)))
    with noise_tolerant(srv.run.noise, "messages turn"):
        message = claude_style.messages.create(model=model, messages=question, max_tokens=limit, **({"tools": messages_tools(tools)} if tools else {}),
                                               extra_body={**thinking_on, "temperature": temperature, "top_p": top_p})  # fmt: skip
        turns.append(("messages", prompt, check_messages_reply(message, max_tokens=limit)))
display(pd.DataFrame([{"api": api, "prompt": prompt, "reasoning": r.reasoning, "content": r.content, "finish": r.finish_reason,
                       "tool calls": [f"{c.name}({c.arguments})" for c in r.tool_calls]} for api, prompt, r in turns]))

# %% [markdown]
# ## 4. An agent from a maintained SDK: pydantic-ai
#
# The task: which city is warmer, Tokyo or Paris, and by how much? The cell builds the agent
# as you would with pydantic-ai: one tool, `get_weather` (its docstring is the tool's
# description the model reads; the backend is the chat notebooks' fake one), and the answer as
# `WarmerCity`, which pydantic-ai passes as an *output tool*, `final_result`, so the answer
# rides on tool calling, which the model does natively. `agent_model` points pydantic-ai's
# `OpenAIChatModel` at this server through its `VLLMProvider`, with `tool_choice="auto"` (the
# module docstring says why a forced tool choice and `openai-agents`' `response_format` answer
# do not fit vLLM); `run_agent` runs it on an event loop of its own, since Jupyter's is busy.
#
# **Expected:** on the stand-in, `WarmerCity(warmer_city='Tokyo', difference_c=4)` after 2 model
# requests: the first calls `get_weather` twice at once, the second calls `final_result`.
# Weightless: a line saying the agent did not complete on noise text.

# %%
from pydantic_ai import Agent
from pydantic_ai.output import ToolOutput
from lab.agents import agent as agents

ag_model = agents.agent_model(srv.base_url, model)
settings = agents.model_settings(thinking=True, **sampling)  # + extra_body.chat_template_kwargs.enable_thinking
weather_agent = Agent(ag_model, output_type=ToolOutput(agents.WarmerCity, name="final_result"),
                      instructions=demo["agent"]["instructions"], retries=agent_retries, model_settings=settings)  # fmt: skip


@weather_agent.tool_plain
def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: City name, e.g. Santa Clara
    """
    print(f"tool get_weather({city!r})")
    return agents.weather(city)


with noise_tolerant(srv.run.noise, "agent"):
    agent_run = agents.run_agent(weather_agent)
    print(agent_run.summary())
    display(agent_run.trace)

# %% [markdown]
# ## 5. What goes wrong, by name
#
# Each failure kind is an error that says what happened and keeps what came back. The trials
# go through the helpers, which send step 2's and step 4's requests and name the failure:
#
# - a schema and tools on the same turn (step 2's request with `tools=[get_weather]`): vLLM
#   0.32.0 refuses a schema with a named tool choice (HTTP 400, "You can only either use
#   constraints for structured outputs or tools, not both"), and with `tool_choice="auto"`
#   the grammar leaves no room for a tool call, so `structured_chat` refuses the pair and
#   sends nothing (`TypeError`: run the tools first);
# - reasoning that spends `max_tokens` before the answer: step 2's request, thinking on, with
#   `max_tokens=8` (`StructuredAnswerMissingError`, with the reasoning kept);
# - an agent whose model spends `max_tokens` on reasoning before any tool call or answer: the
#   agent's chat completions request (`get_weather` and `final_result` as tools) with
#   `max_tokens=8` (`AgentError`, with the run's trace; a text answer instead of the
#   `final_result` call, after the agent's retries, gives the same error).
#
# Invalid JSON in `content` (`StructuredOutputInvalidError`, with the text) and a drafting
# server (`StructuredOutputDraftingWarning`, vllm-project/vllm #34650, #44012, #47027, #48863)
# are tested from recorded server replies (`tests/lab/agents/test_structured.py`).
#
# **Expected:** three lines, each naming its error and what it says.

# %%
import warnings

from helpers.errors import CookbookError
from lab.agents.structured import structured_chat

trials = {
    "schema + tools": lambda: structured_chat(llm, model, demo["structured"]["prompt"], Capital, tools=demo["tools"][:1], **sampling),
    "reasoning swallows the answer": lambda: structured_chat(llm, model, demo["structured"]["prompt"], Capital,
                                                             noise_tolerant=srv.run.noise, **{**sampling, "max_tokens": 8}),
    "max_tokens spent on reasoning": lambda: agents.run_agent(agents.demo_agent(ag_model, settings={**settings, "max_tokens": 8})),
}
for name, trial in trials.items():
    try:
        with warnings.catch_warnings():  # the error below says it all; no warning beside it
            warnings.simplefilter("ignore")
            answered = trial()  # None: weightless mode reported a failure on noise text above
        print(f"{name}: " + ("no error (this model answered)" if answered is not None else "reported above"))
    except (CookbookError, TypeError) as e:
        print(f"{name}: {type(e).__name__}: {e}")

# %% [markdown]
# ## 6. Stop the server
#
# `stop()` ends the whole process group, then checks that no process is left and the port is
# free. A server this notebook attached to (`server_url`) is left running.
#
# **Expected:** `stopped pid ...; port ... is free` (or nothing when attached).

# %%
srv.stop()
