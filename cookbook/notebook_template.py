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
# Run it top to bottom. Every cell calls the tested `helpers` package; every flag, model id
# and pinned revision comes from the registry (`cookbook/recipe.yaml`).
{%- if stand_in %}
#
# **On a CPU, no GPU needed.** `stand_in = True` serves a tiny Nemotron-H model, trained on
# this notebook's prompts, with the CPU build of vLLM. The notebook still resolves and
# validates the real {{ t.label }} command. Everything after the launch (client, parsers,
# tool calls, reasoning budget, benchmark, plots) is the same code against a real vLLM
# server; only the numbers and the quality of the text differ.
{%- else %}
#
# No GPU at hand? `stand_in = True` rehearses everything on a CPU with a tiny stand-in model.
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
startup_timeout: float = 1800  # seconds to wait for /health (cold on an H200: 190-260 s; BF16 on FlashInfer's CUTLASS MoE first builds its kernels: ~510 s on vLLM 0.28.0, ~30 min on 0.32.0)
server_url: "Optional[str]" = None  # attach to an already running vLLM server instead of launching one
max_tokens: "Optional[int]" = None  # per chat request (reasoning counts too); None means 16000 on a GPU (seeds 001/004), 256 weightless, 1024 on the stand-in
temperature: "Optional[float]" = None  # None means 1.0 on a GPU (seed 004) and 0 (greedy) on the stand-in
top_p: "Optional[float]" = None  # None means 0.95 on a GPU (seed 004) and 1.0 on the stand-in
bench_concurrencies: "Optional[list[int]]" = None  # a list of concurrencies; None means 1 2 4 on the stand-in and 1 16 64 256 on a GPU; [] skips the benchmark
bench_input_len: "Optional[int]" = None  # tokens per prompt; None means 64 on the stand-in and 1024 on a GPU
bench_output_len: "Optional[int]" = None  # tokens per answer; None means 32 on the stand-in and 256 on a GPU
quality: "Optional[dict]" = None  # steps 10 and 12: {"items": N, "budgets": [...], "compare": {"variant": "bf16"} or {"extra_args": {...}}}; None means 200 items on a GPU (weightless 50, the stand-in's 16), budgets off / 1024 / no cap (weightless: off / 64 / no cap; stand-in: off / 8 / no cap; a cap stays below max_tokens), no comparison; {"items": 0} skips them

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
check_libraries(*([] if (quality or {}).get("items") == 0 else ["lm_eval", "scipy"]))  # steps 10 and 12
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
# (`--load-format dummy`: real speed and memory, noise text). `launch_server` starts vLLM
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
# Reasoning is on by default and comes back apart from the answer, in `message.reasoning`
# (`--reasoning-parser nemotron_v3`). Reasoning tokens count against `max_tokens`: if the
# answer comes back empty, the helper warns and names the fixes. `ChatOptions.for_run`
# picks the seeds' sampling on a GPU (temperature 1.0, top_p 0.95) and greedy decoding on
# the stand-in, which was trained on exactly the prompts of this notebook
# (`cookbook/demo.yaml`) and answers little else.
#
# **Expected:** a reasoning block, then a short answer about vLLM.

# %%
from helpers.chat.completions import chat
from helpers.chat.display import show
from helpers.chat.request import ChatOptions

opts = ChatOptions.for_run(srv, temperature=temperature, top_p=top_p)
reply = chat(llm, model, "Briefly explain: what is vLLM?", opts)
show(reply)

# %% [markdown]
# ## 4. Reasoning off
#
# `thinking=False` sends `chat_template_kwargs={"enable_thinking": False}`: the model
# answers directly.
#
# **Expected:** the answer only, no reasoning block.

# %%
show(chat(llm, model, "Briefly explain: what is vLLM?", opts, thinking=False))

# %% [markdown]
# ## 5. A reasoning budget
#
# `reasoning_budget` sends vLLM's `thinking_token_budget` request field (it needs
# `--reasoning-parser`): vLLM ends the think block once the budget is spent and the model
# goes on to answer. A server that drafts (speculative decoding) may not apply it
# (vllm-project/vllm #39573, #54906), so there `budget_method_for` picks the client-side
# two-pass budget: a first request reasons up to the budget, a second continues from the
# closed think block.
#
# **Expected:** at most 8 reasoning tokens, then an answer; the report line says so.

# %%
from helpers.chat.display import budget_report
from helpers.chat.drafting import budget_method_for

if srv.serves("reasoning", needed_by="thinking_token_budget"):
    method = budget_method_for(llm)  # "two_pass" where the server drafts, else "server"
    capped = chat(llm, model, "Briefly explain: what is vLLM?", opts, reasoning_budget=8, budget_method=method)
    show(capped)
    print(f"budget applied by: {method};", budget_report(capped, 8, drafting=srv.run.config.speculative != "none"))

# %% [markdown]
# ## 6. Streaming
#
# Reasoning and answer arrive as separate event kinds, so a UI can show them apart.
#
# **Expected:** the reasoning, then the answer, printed as they arrive.

# %%
from helpers.chat.display import print_stream
from helpers.chat.stream import stream_chat

streamed = print_stream(stream_chat(llm, model, "Explain speculative decoding in two sentences.", opts))

# %% [markdown]
# ## 7. Tool calling
#
# The model calls `get_weather`, the Python function below runs, its result goes back as a
# `tool` message, and the model answers from it. The server parses the calls
# (`--enable-auto-tool-choice --tool-call-parser qwen3_coder`); each function's schema comes
# from its signature and docstring (`tool_schema`).
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
from helpers.chat.tools import run_tool_loop

if srv.serves("tool_calling", needed_by="tool calling"):
    show(run_tool_loop(llm, model, "What's the weather in Santa Clara?", tools, options=opts))

# %% [markdown]
# ## 8. Parallel tool calls
#
# Two lookups in one turn come back as two tool calls in one reply; both run, and both
# results go back before the model answers.
#
# **Expected:** `get_weather` for Tokyo and for Paris in one reply, then one answer.

# %%
if srv.serves("tool_calling", needed_by="parallel tool calls"):
    show(run_tool_loop(llm, model, "What's the weather in Tokyo and Paris?", tools, options=opts))

# %% [markdown]
# ## 9. Benchmark: throughput against per-user speed
#
# `vllm bench serve` (vLLM's own load generator) runs one point per concurrency, each with
# warm-up requests and its own random seed, and saves one JSON per point. The table has
# output tokens/s, per-user tokens/s, TTFT and TPOT (median and p99, ms) and failures; the
# plots show the trade-off (every percentile is in the saved JSON).
#
# **Expected:** a progress bar that ends at 100 %, a table with one row per concurrency and
# no failures, and two plots.{% if stand_in %} On 2 CPU cores per-token timings are no
# measurement: the table says so.{% endif %}

{%- if measured %}
#
{%- for line in measured.splitlines() %}
# {{ line }}
{%- endfor %}
{%- endif %}
{%- if recommended %}
#
{%- for line in recommended.splitlines() %}
#{{ " " + line if line else "" }}
{%- endfor %}
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
                    label=f"{target}-{cfg.variant}-{cfg.speculative}" + (f"-{moe_backend}" if moe_backend else "")
                    + srv.run.tag)
    display(results_table(results, run=srv))
    plot_sweep(results, cfg, run=srv)

# %% [markdown]
# ## 10. Answer quality: accuracy with an interval, and the reasoning-budget curve
#
# Speed is half the question; the other half is whether the answers are right with these
# flags (a 4-bit checkpoint, a MoE kernel, FP16 Mamba state, drafting, a reasoning budget).
# lm-eval's `local-chat-completions` sends GSM8K items shipped with the cookbook
# (`cookbook/evals/`, 200 of the test split, MIT licence) to this server, scores the last
# number of each answer's `content` (the reasoning is apart), and reports the accuracy with
# its 95 % Wilson interval beside a published reference. The same items are then scored at
# several `thinking_token_budget` values: accuracy against the tokens each budget spends.
{%- if stand_in %}
# On the stand-in the items are 8 it was trained on and 8 it never saw: the score follows what
# it learned, which shows the scorer reads the model, not the real model's quality.
{%- else %}
# With `weightless = True` the answers are noise: the step shows the pipeline, not accuracy.
{%- endif %}
#
# **Expected:** an accuracy line with its interval (the per-item table saved under `out/evals/`),
# the reference with its source, a table with one row per budget, and the budget plot.

# %%
from IPython.display import Image

from lab.evals.budget import plot_budget_curve
from lab.evals.step import quality_step

run_label = f"{target}-{cfg.variant}-{cfg.speculative}" + srv.run.tag
quality = quality or {}
accuracy, curve = quality_step(srv, items=quality.get("items"), budgets=quality.get("budgets"), options=opts, label=run_label)
if curve is not None:
    display(curve)
    budget_png = plot_budget_curve(curve, f"{cfg.label}: accuracy against reasoning budget" + srv.run.shown_as)
    print("plots:", budget_png)
    display(Image(str(budget_png)))

# %% [markdown]
# ## 11. Stop the server
#
# `stop()` ends the whole process group (API server and engine core), then checks that no
# process is left and the port is free. A server this notebook attached to is left running.
#
# **Expected:** `stopped pid ...; port ... is free`.

# %%
srv.stop()

# %% [markdown]
# ## 12. Another configuration on the same items, paired (optional)
#
# What does the 4-bit checkpoint cost on your workload, or a MoE kernel, or FP16 Mamba state?
# Set `quality = {"compare": {"variant": "bf16"}}` or `{"compare": {"extra_args":
# {"--moe-backend": "marlin"}}}`: the other configuration is served on this machine once the
# first has stopped, scored on the same items, and the pair is tested: the accuracy
# difference with a paired bootstrap interval and McNemar's exact test on the items the two
# disagree on. A 200-item difference of a few points is within noise; the interval says so.
#
# **Expected:** with neither set, one line saying the step is skipped; otherwise both
# accuracies, the difference with its interval and McNemar's p-value.

# %%
from lab.evals.accuracy import evaluate
from lab.evals.compare import compare

other = quality.get("compare") or {}
if accuracy is None or not other:
    print('Step 12 skipped: set quality = {"compare": {"variant": ...}} or {"compare": {"extra_args": {...}}}.')
else:
    other_cfg = resolve(target, other.get("variant", cfg.variant), speculative, moe_backend=moe_backend, vllm_version=vllm_version,
                        extra_args={**(extra_args or {}), **other.get("extra_args", {})})
    with launch_server(fetch(run.for_target(other_cfg)), startup_timeout=startup_timeout) as second:  # stopped when the block ends
        b = evaluate(second, accuracy.scored_items(), options=opts, label=f"{run_label}-vs-{other.get('variant', 'flags')}")
    print(compare(accuracy, b).summary())

# %% [markdown]
# ## Appendix: the same deployment in other forms
#
# **The flags, and why each is there.** Step 1 checked the command against the flag table of
# the vLLM release it will run on ({{ t.vllm_version }}, or your `vllm_version`), generated
# from that release's own `vllm serve` parser (`docs/results/flags/`).

# %%
import pandas as pd

pd.set_option("display.max_colwidth", None)
display(pd.DataFrame(cfg.reference_table()))

# %% [markdown]
# **As a `docker run` command and as a Baseten truss `config.yaml`:**

# %%
if cfg.docker_image:
    print(cfg.docker_command())
    print(cfg.truss_config())

# %% [markdown]
# **The whole memory plan.** From the architecture (23 Mamba-2, 23 MoE and 6 attention
# layers; 2 KV heads of 128), the variant's weights, `--kv-cache-dtype`,
# `--mamba-ssm-cache-dtype`, the GPU's memory and `--gpu-memory-utilization`: KV bytes per
# token, Mamba state per sequence, and how many sequences of `max_model_len` tokens fit.

# %%
plan(cfg)
