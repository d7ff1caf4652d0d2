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
# **Target:** {{ t.label }} · **default variant:** {{ t.variant }} · **default speculative
# decoding:** {{ t.speculative }} · **pinned vLLM:** {{ t.vllm_version }}
# {%- if t.docker_image %} (`{{ t.docker_image }}`){% endif %}
# · **source:** {{ t.source }}
# {% for note in t.notes %}
# > {{ note }}
# {%- endfor %}
#
# Every cell below calls the tested `helpers` package; the flags, model ids and pinned
# revisions come from the registry in `cookbook/recipe.yaml`. Run it top to bottom.
#
# **Stand-in mode** (`stand_in = True`): no GPU needed. The notebook still resolves,
# renders and validates this target's real command with the installed vLLM's own argument
# parser, then launches the CPU build of vLLM with a tiny Nemotron-H model trained locally on
# this cookbook's demo prompts. Everything after launch (client, parsers, tool loop, reasoning
# budget, benchmark, plots) is the same code talking to a real vLLM server. Only the numbers
# and the quality of the text differ.

# %% tags=["parameters"]
target = "{{ target }}"  # a key of cookbook/recipe.yaml `targets`
variant = None  # None means the target's default ({{ t.variant }}); choices: {{ t.variants|join(" / ") }}
speculative = None  # None means the target's default ({{ t.speculative }}); choices: {{ t.speculative_modes|join(" / ") }}
stand_in = {{ stand_in }}  # True: serve the tiny CPU stand-in instead of the real checkpoint
weightless = False  # True (GPU): the exact architecture with random weights, no download (sizing)
install = True  # pip-install the cookbook's helpers first (%pip)
server_url = None  # attach to an already running vLLM server instead of launching one
max_tokens = 1024  # per chat request: reasoning + answer tokens (reasoning counts too)
bench_concurrencies = None  # a list of concurrencies; None means 1 2 4 on the stand-in and 1 16 64 256 on a GPU
bench_input_len = None  # tokens per prompt; None means 64 on the stand-in and 1024 on a GPU
bench_output_len = None  # tokens per answer; None means 32 on the stand-in and 256 on a GPU

# %% [markdown]
# ## 1. Install the cookbook's helpers
#
# `%pip` installs into this kernel's environment. The vLLM build is a separate step (3),
# because the right build depends on the machine.

# %%
import importlib.util

if install and importlib.util.find_spec("helpers") is None:  # only when missing
    %pip install -q -e ..

# %%
import pandas as pd
from IPython.display import display

from helpers import archmode, bench, client, hardware, install as vllm_install, planner, plots, recipes, server, standin, weights

cfg = recipes.resolve(target, variant, speculative)
print(f"{cfg.label}: variant={cfg.variant}, speculative={cfg.speculative}, features={list(cfg.features)}")

# %% [markdown]
# ## 2. Check the machine
#
# Which GPUs are here, which registry targets they match, whether this configuration fits,
# and whether another process still holds GPU memory. On a machine without a GPU it says so
# and points to stand-in mode.

# %%
machine = hardware.check_machine(cfg, stand_in=stand_in)

# %% [markdown]
# ## 3. The right vLLM
#
# The target pins vLLM {{ t.vllm_version }}. This compares it with what is installed and prints
# the install command (pass `run=True` to run it). In stand-in mode it checks the CPU build.

# %%
vllm_plan = vllm_install.ensure_vllm(cfg, stand_in=stand_in)

# %% [markdown]
# ## 4. The serve command, and why each flag is there
#
# The command below is what you would type on the target. It is parsed by the installed
# vLLM's own `vllm serve` argument parser before anything launches, so a misspelled or removed
# flag fails here, by name, not five minutes into a model load.

# %%
print(cfg.shell_command())
cfg.validate()
pd.set_option("display.max_colwidth", None)
display(pd.DataFrame(cfg.reference_table()))

# %% [markdown]
# The same configuration as a `docker run` command and as a Baseten truss `config.yaml`:

# %%
if cfg.docker_image:
    print(cfg.docker_command())
    print(cfg.truss_config())

# %% [markdown]
# ## 5. Will it fit? The memory plan
#
# From the architecture (23 Mamba-2, 23 MoE and 6 attention layers; 2 KV heads of 128), the
# variant's weights, `--kv-cache-dtype`, `--mamba-ssm-cache-dtype`, the GPU's memory and
# `--gpu-memory-utilization`: KV bytes per token, Mamba state per sequence, and how many
# sequences of `max_model_len` tokens fit at once. A configuration that cannot fit says so
# here, with the numbers, before any download.

# %%
planner.plan(cfg)

# %% [markdown]
# ## 6. Weights (downloaded before launch, never inside the readiness wait)
#
# The checkpoint{% if t.speculative in ("dflash", "dspark") %} and the {{ t.speculative }} drafter{% endif %} are
# downloaded at their pinned revisions with `huggingface_hub`. The server then loads local
# files, so its readiness timeout never includes a download. In stand-in mode this builds (or
# reuses) the tiny model instead.

#
# **Weightless mode** (`weightless = True`, on the GPU): serve the checkpoint's exact
# architecture (52 layers, 128 experts, vocabulary 131072, the NVFP4 quantization layout) with
# `--load-format dummy` and random weights, to size and benchmark a box before downloading
# 18-60 GB. Speed and memory are real; the text is noise, and speculative-decoding acceptance
# and answer quality cannot be judged.

# %%
if stand_in:
    print(standin.standin_summary())
    serve_cfg = recipes.standin_config(cfg, standin.build_standin_model())
elif weightless:
    # the architecture folder is local; download() fetches only a separate drafter (DFlash, DSpark)
    serve_cfg = weights.download(archmode.arch_config(cfg, archmode.build_arch_model(cfg.variant), allow_hub_drafter=True))
else:
    serve_cfg = weights.download(cfg)
print("serving:", serve_cfg.model)

# %% [markdown]
# ## 7. Launch the server
#
# `launch_server` starts vLLM in its own process group with its log in a file, waits for
# `/health` while watching the process (a crash raises at once with the log tail and a
# diagnosis), and shows start-up progress from the log.

# %%
if server_url:
    srv = server.attach_server(server_url)
else:
    srv = server.launch_server(serve_cfg)
llm = client.make_client(srv.base_url)
model = serve_cfg.served_model_name
print("base_url:", srv.base_url)

# %% [markdown]
# What this server can do depends on the features its command carries: the reasoning budget
# needs `--reasoning-parser`, tool calling needs `--enable-auto-tool-choice --tool-call-parser`.
# Cells that need a missing feature say so instead of failing.

# %%
has_reasoning_parser = "reasoning" in serve_cfg.features
has_tool_calling = "tool_calling" in serve_cfg.features
print(f"reasoning parser: {has_reasoning_parser}, tool calling: {has_tool_calling}")

# %% [markdown]
# ## 8. Reasoning on and off
#
# Reasoning is on by default and comes back separately from the answer, in
# `message.reasoning`. Reasoning tokens count against `max_tokens`: if the answer comes back
# empty, the helper warns and names the fixes.

# %%
demo = standin.load_demo()
on = client.chat(llm, model, demo["reasoning"]["prompt"], thinking=True, max_tokens=max_tokens, temperature=0)
client.show(on)

# %%
off = client.chat(llm, model, demo["reasoning"]["prompt"], thinking=False, max_tokens=max_tokens, temperature=0)
client.show(off)

# %% [markdown]
# **Expected:** with thinking on, a non-empty reasoning block and then the answer; with
# thinking off, the answer only.
#
# ## 9. A reasoning budget
#
# `thinking_token_budget` caps reasoning on the server (needs `--reasoning-parser`): vLLM
# ends the think block once the budget is spent and the model goes on to answer.

# %%
budget = demo["budget"]["thinking_token_budget"]
if has_reasoning_parser:
    capped = client.chat(llm, model, demo["budget"]["prompt"], reasoning_budget=budget, max_tokens=max_tokens, temperature=0)
    client.show(capped)
    print(client.budget_report(capped, budget))
else:
    print(f"skipped: {cfg.label} serves without --reasoning-parser, which thinking_token_budget needs "
          "(add the 'reasoning' feature: recipes.resolve(target, features=[..., 'reasoning']))")

# %% [markdown]
# ## 10. Streaming
#
# Reasoning and answer arrive as separate event kinds, so a UI can show them apart.

# %%
streamed = client.print_stream(
    client.stream_chat(llm, model, demo["streaming"]["prompt"], max_tokens=max_tokens, temperature=0)
)

# %% [markdown]
# ## 11. Tool calling
#
# The model calls `get_weather`, the Python function below runs, its result goes back as a
# `tool` message, and the model answers from it. Launched with `--enable-auto-tool-choice
# --tool-call-parser qwen3_coder`, the server returns parsed `tool_calls`.

# %%
def get_weather(city: str) -> dict:
    """Get the current weather in a city (a local stand-in for a real weather API)."""
    return demo["weather"]["results"].get(city, {"city": city, "temperature_c": 20, "condition": "unknown"})


def get_time(city: str) -> dict:
    """Get the current local time in a city."""
    return demo["time"]["results"].get(city, {"city": city, "local_time": "12:00"})


tools = {"get_weather": get_weather, "get_time": get_time}
if has_tool_calling:
    loop = client.run_tool_loop(
        llm, model, demo["weather"]["prompt"].format(city="Santa Clara"), tools, demo["tools"],
        max_tokens=max_tokens, temperature=0,
    )
    client.show(loop)
else:
    print(f"skipped: {cfg.label} serves without --enable-auto-tool-choice --tool-call-parser "
          "(add the 'tool_calling' feature: recipes.resolve(target, features=[..., 'tool_calling']))")

# %% [markdown]
# Two lookups in one turn come back as two parallel tool calls:

# %%
pair = demo["parallel"]["pairs"][0]
if has_tool_calling:
    parallel = client.run_tool_loop(llm, model, pair["prompt"], tools, demo["tools"], max_tokens=max_tokens, temperature=0)
    client.show(parallel)

# %% [markdown]
# ## 12. Benchmark: throughput against per-user speed
#
# `vllm bench serve` (vLLM's own load generator) runs one point per concurrency, each with
# warm-up requests and its own random seed, and saves one JSON per point. The table has
# throughput, TTFT / TPOT / ITL / end-to-end latency percentiles and failures.

{%- if t.gpu.arch == "hopper" %}
#
# **Measured reference** ([docs/results/h200.md](../docs/results/h200.md)): the same
# architecture on one H200 with vLLM 0.26.0 through these helpers, 1024 in / 256 out on the
# chat endpoint: BF16 268 / 3,098 / 5,907 / 6,550 output tok/s at concurrency 1 / 16 / 64 /
# 256 (mean TPOT 3.4 to 29 ms); NVFP4 with the Marlin MoE backend 272 / 2,982 / 4,680 / 5,071.
{%- endif %}

# %%
concurrencies = bench_concurrencies or ([1, 2, 4] if stand_in else [1, 16, 64, 256])
results = bench.sweep(
    srv.base_url, model, serve_cfg.model, concurrencies,
    input_len=bench_input_len or (64 if stand_in else 1024),
    output_len=bench_output_len or (32 if stand_in else 256),
    label=f"{target}-{cfg.variant}-{cfg.speculative}" + ("-standin" if stand_in else ""),
    gpu_count=max(serve_cfg.gpu_count, 1),
)
# On 2 shared CPU cores tokens arrive in bursts, so per-user speed there is output tokens / end-to-end time.
per_user = "e2e_tokens_per_s_per_user" if stand_in else "tokens_per_s_per_user"
# Per-token timings (TPOT) are not measurable there: the table says so instead of showing ~0 ms.
display(bench.results_table(results, [
    "concurrency", "completed", "failed", "output_throughput", per_user,
    "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
], stand_in=stand_in))

# %%
from helpers.paths import out_dir

figs = out_dir("plots")
tag = f"{target}{'-standin' if stand_in else ''}"
version = recipes.installed_vllm_version()
shown_as = cfg.label + (" (CPU stand-in)" if stand_in else "")
plots.pareto(results, x=per_user, target=shown_as, variant=cfg.variant,
             vllm_version=version, path=figs / f"{tag}-pareto.png")
plots.latency_vs_concurrency(results, target=shown_as, variant=cfg.variant, vllm_version=version,
                             path=figs / f"{tag}-latency.png")
print("plots:", figs / f"{tag}-pareto.png", figs / f"{tag}-latency.png")

# %% [markdown]
# ## 13. Stop the server
#
# `stop()` ends the whole process group (API server and engine core), then checks that no
# process is left and the port is free. A GPU is never left held by a dead server.

# %%
srv.stop()
print("stopped; running:", srv.is_running())
