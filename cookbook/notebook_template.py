# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # {{ title }}
#
# {{ intro }}
#
# **Target:** {{ t.label }} · **variant:** {{ t.variant }} · **speculative decoding:**
# {{ t.speculative }} · **vLLM:** {{ t.vllm_version }} (the seeds pin {{ t.seed_vllm_version }}:
# `vllm_version`) · **source:** {{ t.source }}
{%- if not stand_in %}
{%- for note in t.notes %}
#
# > {{ note }}
{%- endfor %}
{%- endif %}
{%- if t.colab_runtime %}
#
# **Colab {{ t.colab_runtime }} runtime** (the workshop notebook routes it here). The memory
# planner's verdict on this entry, at generation: {{ t.planner_verdict }}
{%- endif %}
#
# Run it top to bottom: requests are plain OpenAI SDK calls; the tested `helpers` check replies.
{%- if stand_in %}
#
# **On a CPU, no GPU needed.** `stand_in = True` serves a tiny Nemotron-H model, trained on
# this notebook's prompts, with vLLM's CPU build, and still validates the real {{ t.label }}
# command. After the launch the code is the same against a real vLLM server; only the numbers
# and the quality of the text differ.
{%- endif %}

# %% tags=["parameters"]
target: str = "{{ target }}"  # a key of cookbook/recipe.yaml `targets`
variant: "Optional[str]" = None  # None means the target's default ({{ t.variant }}); choices: {{ t.variants|join(" / ") }}
speculative: "Optional[str]" = None  # None means the target's default ({{ t.speculative }}); choices: {{ t.speculative_modes|join(" / ") }}
stand_in: bool = {{ stand_in }}  # True: serve the tiny CPU stand-in instead of the real checkpoint
weightless: bool = False  # True (GPU): the exact architecture with random weights, no download (sizing)
install: bool = True  # pip-install the cookbook's helpers first (%pip; skipped when `helpers` already imports)
vllm_version: "Optional[str]" = None  # None means {{ t.vllm_version }}; the seeds' pin {{ t.seed_vllm_version }} also works (each has its flag table)
install_vllm: bool = False  # True: step 1 installs the selected vLLM when it is missing (then restart the kernel)
moe_backend: "Optional[str]" = None  # None keeps the recipe's --moe-backend; e.g. "marlin" to compare MoE kernels
extra_args: "Optional[dict]" = None  # more serve flags, e.g. {"--max-model-len": 8192}; a None value removes a flag
startup_timeout: "PositiveFloat" = 1800  # seconds to wait for /health (cold on an H200: 190-260 s over the recipe runs of docs/results/h200.md; BF16 on FlashInfer's CUTLASS MoE first builds its kernels: ~510 s on vLLM 0.28.0, ~30 min on 0.32.0)
server_url: "Optional[str]" = None  # attach to an already running vLLM server instead of launching one
max_tokens: "Optional[PositiveInt]" = None  # per chat request (reasoning counts too); None means 16000 on a GPU (seeds 001/004), 256 weightless, 1024 on the stand-in
temperature: "Optional[NonNegativeFloat]" = None  # None means 1.0 on a GPU (seed 004) and 0 (greedy) on the stand-in
top_p: "Optional[float]" = None  # None means 0.95 on a GPU (seed 004) and 1.0 on the stand-in
bench_concurrencies: "Optional[list[PositiveInt]]" = None  # a list of concurrencies; None means 1 2 4 on the stand-in and 1 16 64 256 on a GPU; [] skips the benchmark
bench_input_len: "Optional[PositiveInt]" = None  # tokens per prompt; None means 64 on the stand-in and 1024 on a GPU
bench_output_len: "Optional[PositiveInt]" = None  # tokens per answer; None means 32 on the stand-in and 256 on a GPU
quality: "Optional[dict]" = None  # step 10: {"items": N}; None means 200 items on a GPU (weightless 50, the stand-in's 16); {"items": 0} skips it; the budget curve ("budgets") and a paired second configuration ("compare") run in quality.ipynb

# %% [markdown]
# ## 1. Set up: the helpers, the deployment, this machine, the right vLLM
#
# **The command this notebook serves** on {{ t.label }}: `{{ target }}` in `cookbook/recipe.yaml`
# with default parameters (the cell below prints it as yours resolve it){% if stand_in %};
# `stand_in = True` serves the CPU stand-in instead, and step 2 says what that changes{% endif %}:
#
# ```sh
# {{ t.shell_command | replace("\n", "\n# ") }}
# ```
#
# `%pip` installs the helpers into this kernel with their `notebook` extra, the libraries
# later steps import (lm-eval and scipy for answer quality); skipped when the helpers already
# import, so this works offline. `check_parameters` checks each parameter, named one by one,
# against the type its cell declares, and `check_libraries` imports each library a later step
# needs and names the one missing, before anything is downloaded or launched. Then `resolve` turns the registry entry into the exact `vllm serve`
# command, `check_config` checks every flag against the flag table of the vLLM release it
# will run on (a misspelled or removed flag fails here, by name, before any download),
# `check_machine` compares it with the GPUs here, `ensure_vllm` with the installed
# vLLM (`install_vllm = True` installs it; then restart the kernel), and the memory planner
# says whether it fits, before anything is downloaded.
#
# **Expected:** the serve command and "flags checked", the GPUs found (none on a CPU box:
# stand-in mode), the installed vLLM against the pin, and one line of memory plan. An
# installed vLLM other than the selected one is named with what the cookbook checked for it
# (its flag table, its client recordings, a CI server) and what it did not; a release newer
# than every offered one reads `NEWER THAN OFFERED`. The appendix explains each flag.

# %%
import importlib.util

if install and importlib.util.find_spec("helpers") is None:  # only when missing
    %pip install -q -e "..[notebook]"

# %%
from helpers.config.flagtable import check_config
from helpers.config.parameters import check_parameters
from helpers.config.resolve import resolve
from helpers.machine.hardware import check_machine
from helpers.machine.install import ensure_vllm
from helpers.machine.libraries import check_libraries
from helpers.memory.planner import plan
from helpers.weights.prepare import fetch, prepare

# each parameter, by name, against the type the parameters cell declares
check_parameters(__annotations__, target=target, variant=variant, speculative=speculative, stand_in=stand_in,
    weightless=weightless, install=install, vllm_version=vllm_version, install_vllm=install_vllm, moe_backend=moe_backend,
    extra_args=extra_args, startup_timeout=startup_timeout, server_url=server_url, max_tokens=max_tokens,
    temperature=temperature, top_p=top_p, bench_concurrencies=bench_concurrencies, bench_input_len=bench_input_len,
    bench_output_len=bench_output_len, quality=quality)
check_libraries(*([] if (quality or {}).get("items") == 0 else ["lm_eval", "scipy"]))  # the accuracy step (10)
cfg = resolve(target, variant, speculative, extra_args=extra_args, moe_backend=moe_backend, vllm_version=vllm_version)
print(cfg.shell_command())
check_config(cfg)  # every flag against the flag table of the release it will run on
run = prepare(cfg, stand_in=stand_in, weightless=weightless, server_url=server_url, max_tokens=max_tokens)
check_machine(run)
ensure_vllm(run, install=install_vllm)
print(plan(cfg).verdict)

# %% [markdown]
# ## 2. Launch the server
#
# `fetch` gets what the run serves: the checkpoint{% if t.speculative in ("dflash", "dspark") %} and the {{ t.speculative }} drafter{% endif %} at
# their pinned revisions (downloaded before the launch, never inside the readiness wait),
# the stand-in, or, with `weightless = True`, the exact architecture with random weights
# (`--load-format dummy`, uniform routing: real speed and memory, noise text). `launch_server` starts vLLM
# in its own process group, waits for `/health` while watching the process (a crash raises
# at once with the log tail and a diagnosis), and shows each start-up phase on one line.
# It prints the command as launched (the environment it sets, then the argv with its host and
# port: a shell here starts the same server with it) and each difference from step 1's, with
# its reason. Re-running the cell reuses the server; `server_url` attaches to one that runs
# elsewhere.
#
# **Expected:** the command as launched and its differences from step 1's, one line per
# start-up phase, then `ready: http://127.0.0.1:PORT/v1`
# ({% if stand_in %}about 15-25 s on 2 CPU cores; the stand-in ships trained with the cookbook and
# is hash-checked, then copied, in well under a second{% else %}a few minutes on a GPU: weights, compile, CUDA graphs;
# the first run downloads the checkpoint first{% endif %}).

# %%
from helpers.server.launch import launch_server

srv = launch_server(fetch(run), startup_timeout=startup_timeout)  # srv.run: the mode and its defaults
llm, model = srv.client(), srv.model_name
print("base_url:", srv.base_url, "model:", model)

# %% [markdown]
# ## 3. The first reply
#
# The request is the SDK call your application would make; `show` prints and checks the reply.
# Reasoning comes apart from the answer (`message.reasoning`) and counts against `max_tokens`:
# a reply that spent every token reasoning gets a warning. Sampling is this mode's
# (`srv.run.defaults`): the seeds' 1.0 / 0.95 on a GPU, greedy on the stand-in.
#
# **Expected:** the sampling values, a reasoning block, then a short answer about vLLM.

# %%
from helpers.chat.display import show

sampling = srv.run.defaults  # this mode's values (helpers/config/run.py); the parameters cell's win
max_tokens = max_tokens or sampling.max_tokens  # reasoning + answer tokens together
temperature = sampling.temperature if temperature is None else temperature
top_p = sampling.top_p if top_p is None else top_p
print(f"max_tokens={max_tokens} temperature={temperature} top_p={top_p}")

reply = llm.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Briefly explain: what is vLLM?"}],
    max_tokens=max_tokens,
    temperature=temperature,
    top_p=top_p,
)
answer = show(reply)  # reasoning apart from the answer; warns when max_tokens cut it short

# %% [markdown]
# ## 4. Reasoning off
#
# `enable_thinking` is a chat-template argument, which the SDK passes through in `extra_body`;
# `show` gets the same `extra_body`, so its checks know no reasoning was asked for.
#
# **Expected:** the answer only, no reasoning block.

# %%
thinking_off = {"chat_template_kwargs": {"enable_thinking": False}}
reply = llm.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Briefly explain: what is vLLM?"}],
    max_tokens=max_tokens,
    temperature=temperature,
    top_p=top_p,
    extra_body=thinking_off,
)
answer = show(reply, extra_body=thinking_off)

# %% [markdown]
# ## 5. A reasoning budget
#
# vLLM's `thinking_token_budget` ends the reasoning once spent; the model then answers. A
# drafting server may ignore it (vllm-project/vllm #39573, #54906): there `two_pass_budget`
# keeps it in two plain requests, each printed.
#
# **Expected:** at most 8 reasoning tokens, then an answer; the report line says so.

# %%
from helpers.chat.display import budget_report
from helpers.chat.drafting import budget_method_for, two_pass_budget

if srv.serves("reasoning", needed_by="thinking_token_budget"):
    method = budget_method_for(llm)  # "two_pass" where the server drafts, else "server"
    question = [{"role": "user", "content": "Briefly explain: what is vLLM?"}]
    if method == "server":
        budget = {"thinking_token_budget": 8}
        reply = llm.chat.completions.create(
            model=model, messages=question, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
            extra_body=budget,
        )
    else:  # the two requests are printed as they go
        reply = two_pass_budget(llm, model, question, budget=8, max_tokens=max_tokens, echo=True,
                                temperature=temperature, top_p=top_p)
    capped = show(reply)
    print(f"budget applied by: {method};", budget_report(capped, 8, drafting=srv.run.config.speculative != "none"))

# %% [markdown]
# ## 6. Streaming
#
# `stream=True` returns chunks as they are generated (`stream_options`: token counts in the
# last). Reasoning and answer come in separate fields; `show` prints them as they arrive.
#
# **Expected:** the reasoning, then the answer, printed as they arrive.

# %%
stream = llm.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Explain speculative decoding in two sentences."}],
    max_tokens=max_tokens,
    temperature=temperature,
    top_p=top_p,
    stream=True,
    stream_options={"include_usage": True},
)
streamed = show(stream)

# %% [markdown]
# ## 7. Tool calling
#
# The request offers the tools' schemas (`tool_schema`: from a signature and docstring); the
# server parses the calls. Each runs here (`call_tool`: its JSON, or an error the model can
# read) and goes back as a `tool` message with its `tool_call_id`. `show` warns about a call
# swallowed by the reasoning or cut short. The loop stops when the model asks again for a call
# whose result it already has: Lightning is thinking-first, and with thinking off it repeats the
# same call every turn (Avarok atlas PR #566); the tiny stand-in repeats it too.
#
# **Expected:** a call `get_weather(city='Santa Clara')`, its result, then an answer from it.

# %%
WEATHER = {  # a local stand-in for a weather API
    "Santa Clara": {"city": "Santa Clara", "temperature_c": 22, "condition": "sunny"},
    "Tokyo": {"city": "Tokyo", "temperature_c": 18, "condition": "cloudy"},
    "Paris": {"city": "Paris", "temperature_c": 14, "condition": "rainy"},
}

def get_weather(city: str) -> dict:
    """Get the current weather in a city.

    Args:
        city: City name, e.g. Santa Clara
    """
    return WEATHER.get(city, {"city": city, "temperature_c": 20, "condition": "unknown"})

def get_time(city: str) -> dict:
    """Get the current local time in a city.

    Args:
        city: City name, e.g. Tokyo
    """
    return {"city": city, "local_time": {"Tokyo": "14:05", "Paris": "07:05", "Santa Clara": "22:05"}.get(city, "12:00")}

tools = {"get_weather": get_weather, "get_time": get_time}

# %%
import json

from helpers.chat.tools import call_tool, tool_schema

if srv.serves("tool_calling", needed_by="tool calling"):
    schemas = [tool_schema(fn) for fn in tools.values()]
    messages = [{"role": "user", "content": "What's the weather in Santa Clara?"}]
    done = set()  # (name, arguments) of the calls already run
    for _ in range(3):  # a call, its result, the answer
        reply = llm.chat.completions.create(
            model=model, messages=messages, tools=schemas, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
        )
        turn = show(reply, tools=schemas, max_tokens=max_tokens)
        calls = {(c.name, json.dumps(c.arguments, sort_keys=True)) for c in turn.tool_calls}
        if calls and calls <= done:
            print("── the same call again, its result already sent: stopped (a repeat loop, not an answer) ──")
        if not calls or calls <= done:
            break
        done |= calls
        messages.append(turn.to_message())  # the assistant turn, with its tool_calls
        for call in turn.tool_calls:
            result = call_tool(tools, call)
            print(f"── tool {call.name} returned ──\n{result}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

# %% [markdown]
# ## 8. Parallel tool calls
#
# Two lookups come back as two calls in one reply; both results go back, one `tool` message
# each, before the model answers.
#
# **Expected:** `get_weather` for Tokyo and for Paris in one reply, then one answer.

# %%
if srv.serves("tool_calling", needed_by="parallel tool calls"):
    messages = [{"role": "user", "content": "What's the weather in Tokyo and Paris?"}]
    done = set()
    for _ in range(3):
        reply = llm.chat.completions.create(
            model=model, messages=messages, tools=schemas, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
        )
        turn = show(reply, tools=schemas, max_tokens=max_tokens)
        calls = {(c.name, json.dumps(c.arguments, sort_keys=True)) for c in turn.tool_calls}
        if calls and calls <= done:
            print("── the same calls again, their results already sent: stopped ──")
        if not calls or calls <= done:
            break
        done |= calls
        messages.append(turn.to_message())
        for call in turn.tool_calls:  # one tool message per call, in the order of the calls
            result = call_tool(tools, call)
            print(f"── tool {call.name} returned ──\n{result}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

# %% [markdown]
# ## 9. Benchmark: throughput against per-user speed
#
# `vllm bench serve`, vLLM's load generator, runs one point per concurrency (warm-up, its own
# seed, one JSON each): output and per-user tokens/s, TTFT and TPOT (median, p99), failures.
#
# **Expected:** a progress bar that ends at 100 %, a table with one run per concurrency and
# no failures, and two plots.{% if stand_in %} On 2 CPU cores per-token timings are no
# measurement: the table says so.{% endif %}
{%- if measured %}
#
# Measured on GPUs for this target: [docs/results/measured.md](../docs/results/measured.md#{{ target }}).
{%- endif %}

# %%
from IPython.display import display

from helpers.bench.plots import plot_sweep
from helpers.bench.results import results_table
from helpers.bench.sweep import sweep

sizes = srv.run.defaults  # this mode's sizes (helpers/config/run.py)
if bench_concurrencies == []:
    print('Step 9 skipped (bench_concurrencies = []).')
else:
    results = sweep(srv, bench_concurrencies or list(sizes.bench_concurrencies),
                    input_len=bench_input_len or sizes.bench_input_len,
                    output_len=bench_output_len or sizes.bench_output_len,
                    label=f"{cfg.target}-{cfg.variant}-{cfg.speculative}" + (f"-{moe_backend}" if moe_backend else "")
                    + srv.run.tag)
    display(results_table(results, run=srv))
    print("One run per point: " + ("on shared CPU cores one point's runs differ by tens of percent"
          if srv.run.stand_in else "read a gap under about 5 % as noise (docs/results/README.md)")
          + "; tuning.ipynb repeats the points that decide.")
    plot_sweep(results, cfg, run=srv)

# %% [markdown]
# ## 10. Answer quality, in short
#
# Are the answers right with these flags? lm-eval scores {% if stand_in %}16 GSM8K items (8 the
# stand-in learned, 8 it never saw){% else %}20 GSM8K items{% endif %}: accuracy with its 95 %
# interval, beside a published floor; wide, but it catches a broken deployment.
# `quality = {"items": 0}` skips it.
#
# **Expected:** an accuracy line with its interval, and the reference with its source.
#
# Budget curve, two configurations paired: [`quality.ipynb`](quality.ipynb).
#
# The best flags for your workload, measured: [`tuning.ipynb`](tuning.ipynb).

# %%
from lab.evals.settings import RequestSettings
from lab.evals.step import quality_step

quality = quality or {}
if quality.keys() - {"items"}:
    print("budgets and compare run in notebooks/quality.ipynb; this step scores accuracy only.")
settings = RequestSettings(max_tokens=max_tokens, temperature=temperature, top_p=top_p)  # step 3's values
accuracy, _ = quality_step(srv, items=quality.get("items", min(20, sizes.eval_items)), budgets=[], options=settings,
                           label=f"{cfg.target}-{cfg.variant}-{cfg.speculative}" + srv.run.tag)

# %% [markdown]
# ## 11. Stop the server
#
# `stop()` ends the process group (API server, engine core) and checks the port is free; an
# attached server is left running.
#
# **Expected:** `stopped pid ...; port ... is free`.

# %%
srv.stop()

# %% [markdown]
# ## Appendix: the flags, other forms, the memory plan
#
# **Each flag and why it is there** (step 1 checked it against vLLM {{ t.vllm_version }}'s flag table).

# %%
import pandas as pd

pd.set_option("display.max_colwidth", None)
display(pd.DataFrame(cfg.reference_table()))

# %% [markdown]
# **As `docker run` and a Baseten truss `config.yaml`:**

# %%
if cfg.docker_image:
    print(cfg.docker_command())
    print(cfg.truss_config())

# %% [markdown]
# **The whole memory plan**: KV bytes per token, Mamba state per sequence, sequences that fit.

# %%
plan(cfg)
