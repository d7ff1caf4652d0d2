# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Answer quality on Nemotron 3.5 Lightning: accuracy with its interval, the reasoning budget, two configurations paired
#
# Speed is half the question; the other half is whether the answers are right with the flags a
# deployment picks: a 4-bit checkpoint, a MoE kernel, FP16 Mamba state, drafting, a reasoning
# budget. The target notebooks score accuracy alone (200 items on a GPU); this notebook measures:
#
# 2. **Accuracy with its interval, and the reasoning-budget curve.** lm-eval's
#    `local-chat-completions` sends GSM8K items shipped with the cookbook (`cookbook/evals/`,
#    200 of the test split, MIT licence) to the server and scores the last number of each
#    answer's `content` (the reasoning is apart): the accuracy with its 95 % Wilson interval
#    beside a published reference, then the same items at several `thinking_token_budget`
#    values: accuracy against the tokens each budget spends (`lab.evals`).
# 4. **Another configuration on the same items, paired**: the accuracy difference with a
#    paired bootstrap interval and McNemar's exact test on the items the two disagree on. A
#    200-item difference of a few points is within noise; the interval says so.
#
# **Stand-in mode** (`stand_in = True`, what CI runs): its items are 8 it was trained on and 8
# it never saw, so the score follows what it learned: it shows the scorer reads the model, not
# the real model's quality. **Weightless** (`weightless = True`): the answers are noise, and so
# is the figure: the pipeline runs, the accuracy means nothing.

# %% tags=["parameters"]
target = "h200"  # a key of cookbook/recipe.yaml `targets`: its flags serve the model
variant = None  # None means the target's default variant
stand_in = True  # True: the CPU stand-in; False: the target's GPU
weightless = False  # True (GPU): the exact architecture with random weights (noise answers)
install = True  # pip-install the cookbook's helpers with the `notebook` extra first (%pip): lm-eval, scipy
server_url = None  # attach to an already running vLLM server of this target instead of launching one
extra_args = None  # more serve flags, e.g. {"--moe-backend": "marlin"}
max_tokens = None  # per item (reasoning counts too); None means 16000 on a GPU, 256 weightless, 1024 on the stand-in
temperature = None  # None means 1.0 on a GPU (seed 004) and 0 (greedy) on the stand-in
quality = None  # {"items": N, "budgets": [...], "compare": {"variant": "bf16"} or {"extra_args": {...}}}; None means 200 items on a GPU (weightless 50, the stand-in's 16), budgets off / 1024 / no cap (the stand-in: off / 8 / no cap), no comparison
startup_timeout = 1800.0  # seconds to wait for /health (cold on an H200: 190-260 s over the recipe runs of docs/results/h200.md)

# %%
import importlib.util

if install and (importlib.util.find_spec("helpers") is None or importlib.util.find_spec("lm_eval") is None):
    %pip install -q -e "..[notebook]"

# %% [markdown]
# ## 1. The server, and what each item is sent with
#
# The registry's command for the target, checked against its release's flag table; `quality`
# is checked key by key before anything starts (a misspelled key would silently score the
# defaults). Each item's request is the run's: its `max_tokens` and sampling, reasoning on.
#
# **Expected:** the serve command, "flags checked", `ready: http://...`, then the settings, and
# the first item's reply with its reference answer.

# %%
from helpers.config.flagtable import check_config
from helpers.config.parameters import check_quality
from helpers.config.resolve import resolve
from helpers.machine.libraries import check_libraries
from helpers.server.launch import launch_server
from helpers.weights.prepare import fetch, prepare
from lab.evals.accuracy import check_items
from lab.evals.budget import check_budgets
from lab.evals.settings import RequestSettings

check_libraries("lm_eval", "scipy")  # lm-eval scores, scipy gives the intervals: before the launch
cfg = resolve(target, variant, extra_args=extra_args)
check_quality(quality, target, cfg.variant)
print(cfg.shell_command())
check_config(cfg)
run = prepare(cfg, stand_in=stand_in, weightless=weightless, server_url=server_url, max_tokens=max_tokens)
check_budgets((quality or {}).get("budgets"), run.defaults.max_tokens)  # before the launch
check_items((quality or {}).get("items"))  # at most the shipped item set
srv = launch_server(fetch(run), startup_timeout=startup_timeout)  # srv.run: the mode and its defaults
settings = RequestSettings.for_run(srv, max_tokens=max_tokens, temperature=temperature)
print(f"each item: max_tokens={settings.max_tokens} temperature={settings.temperature} top_p={settings.top_p}")

# %% [markdown]
# Each item goes out as this request (lm-eval's `local-chat-completions` sends it; the prompt is
# the item set's template with the question filled in); `show` splits the reasoning from the
# answer and warns when `max_tokens` cut the reasoning short, which scores as a wrong answer.

# %%
from helpers.chat.display import show
from helpers.config.demo import load_demo
from helpers.config.evalsets import load_items

item = load_items("gsm8k")[0]
llm, model = srv.client(), srv.model_name
prompt = load_demo()["accuracy"]["prompt"].replace("{question}", item["question"])
reasoning_on = {"chat_template_kwargs": {"enable_thinking": settings.thinking}}
reply = llm.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": prompt}],
    max_tokens=settings.max_tokens,
    temperature=settings.temperature,
    top_p=settings.top_p,
    extra_body=reasoning_on,
)
answer = show(reply, max_tokens=settings.max_tokens, extra_body=reasoning_on)
print("reference answer:", item["target"])

# %% [markdown]
# ## 2. Accuracy with its interval, and the reasoning-budget curve
#
# lm-eval scores reasoning on at the run's `max_tokens` on every item, then each budget
# (`"off"`: reasoning off; a number: `thinking_token_budget` reasoning tokens; None: no cap)
# on the first 50 of them (on the stand-in all 16, in the same lm-eval process). Each point is one run: its interval is the spread of those
# items, not of a rerun. A real checkpoint whose whole interval lies below the published floor
# is named: a broken kernel or cache dtype, not noise.
#
# **Expected:** an accuracy line with its interval (the per-item table saved under
# `out/evals/`), the reference with its source, a table with one row per budget, and the plot.

# %%
from IPython.display import Image, display

from lab.evals.budget import plot_budget_curve
from lab.evals.step import quality_step

quality = quality or {}
run_label = f"{cfg.target}-{cfg.variant}-{cfg.speculative}" + srv.run.tag
accuracy, curve = quality_step(srv, items=quality.get("items"), budgets=quality.get("budgets"), options=settings, label=run_label)
if curve is not None:
    display(curve)
    budget_png = plot_budget_curve(curve, f"{cfg.label}{srv.run.shown_as}: accuracy against reasoning budget")
    print("plots:", budget_png)
    display(Image(str(budget_png)))

# %% [markdown]
# ## 3. Stop the server
#
# `stop()` ends the whole process group and checks the port is free, so the comparison's
# server has the machine to itself. A server this notebook attached to is left running.
#
# **Expected:** `stopped pid ...; port ... is free` (or nothing when attached).

# %%
srv.stop()

# %% [markdown]
# ## 4. Another configuration on the same items, paired (optional)
#
# What does the 4-bit checkpoint cost on your workload, or a MoE kernel, or FP16 Mamba state?
# Set `quality = {"compare": {"variant": "bf16"}}` or `{"compare": {"extra_args":
# {"--moe-backend": "marlin"}}}`: the other configuration is served on this machine, scored on
# the same items with the same settings, and the pair is tested.
#
# **Expected:** with no `compare`, one line saying the step is skipped; otherwise both
# accuracies, the difference with its interval and McNemar's p-value.

# %%
from lab.evals.accuracy import evaluate
from lab.evals.compare import compare

other = quality.get("compare") or {}
if accuracy is None or not other:
    print('Step 4 skipped: set quality = {"compare": {"variant": ...}} or {"compare": {"extra_args": {...}}}.')
else:
    other_cfg = resolve(target, other.get("variant", cfg.variant), extra_args={**(extra_args or {}), **other.get("extra_args", {})})
    with launch_server(fetch(run.for_target(other_cfg)), startup_timeout=startup_timeout) as second:  # stopped when the block ends
        b = evaluate(second, accuracy.scored_items(), options=settings, label=f"{run_label}-vs-{other.get('variant', 'flags')}")
    print(compare(accuracy, b).summary())
    if second.run.served.cli_flags() == srv.run.served.cli_flags():  # the stand-in plays no variant
        print("Both sides served the same command (the stand-in plays neither a variant nor a GPU "
              "flag), so this shows the method, not a difference; on a GPU the two differ.")
