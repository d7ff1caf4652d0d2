# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tuning Nemotron 3.5 Lightning: the best configuration for your workload, by measurement
#
# On the cookbook's own GPU runs the recipe stays for many users and long prompts
# (`docs/results/h200/tune/`), and DSpark K=7 drafting replaces it for one user and agent
# sessions at acceptance length 3.69 (ai-dynamo/dynamo's published length; one H100, 6 runs
# each: `docs/results/h100/tune/drafting-0.32.0-2026-12-06-confirm/`). Your GPU, release,
# traffic and acceptance length differ. Which flags are best for *your* traffic, at what price
# per million tokens? This notebook measures: it serves each candidate configuration in turn,
# runs the same `vllm bench serve` sweep against each, keeps the points that meet your
# service-level objective (SLO), and recommends the one that serves the most within it, with
# its exact command and price. The committed runs per target notebook:
# [docs/results/measured.md](../docs/results/measured.md).
#
# - **Candidates** come from the registry around the target's command (MoE kernel, variant,
#   speculative mode, vLLM release) or add flags (`--max-num-seqs`, `--max-num-batched-tokens`,
#   `--compilation-config`, `--async-scheduling`, ...). The target's own command is always
#   measured too, as `recipe`: the reference.
# - **The SLO** is a statement about each point, e.g. p50 TPOT <= 20 ms and p99 TTFT <= 2 s.
#   vLLM's own `--goodput` counts the requests that met every bound; the choice is the point
#   with the most of that goodput per GPU among the points that meet the SLO.
# - **Repeats, and a win only beyond the noise:** one H200 measured the same command 34 % apart
#   on two days. Each candidate's decision points (its lowest concurrency and its best point
#   under the SLO) run `repeats` times, each with its own seed; the tables show the median and
#   the range. A candidate replaces the recipe only when its lead is beyond chance (step 6);
#   otherwise it is a **tie (within noise)** and the recipe stays. Runs of different sessions (more than an hour apart, or on another host) never decide: the
#   same command moved 9-13 % between two H200 machines, more than one session's spread
#   shows, so such a margin is a **tie (measured apart)** until both run side by side
#   (`tuning.tune(..., remeasure=[...])` measures named candidates again in this session).
# - **The SLO limit:** the highest concurrency that still meets the SLO, bisected between the
#   grid's highest passing and lowest failing concurrency (`slo_search` extra points at most).
# - **Nothing is left behind:** each server is stopped before the next starts; a candidate
#   that cannot start is recorded with the server's diagnosis and skipped. Every point is
#   saved as it finishes: run the cell again after an interrupt and it resumes.
#
# **Stand-in mode** (`stand_in = True`, what CI runs): a tiny model on vLLM's CPU build. It
# compares `--max-num-seqs 2` with the stand-in's 4, and shows a candidate this environment
# cannot run (another vLLM release) being skipped. The speeds say nothing about a GPU; the
# procedure and the code are the ones a GPU run uses. On 2 CPU cores tokens arrive in bursts,
# so TPOT is no measurement there: the stand-in's SLO bounds TTFT and end-to-end latency.

# %% tags=["parameters"]
target: str = "h200"  # a key of cookbook/recipe.yaml `targets`: its command is the `recipe` candidate
stand_in: bool = True  # True: the CPU stand-in plays each candidate; False: the target's GPU
install: bool = True  # pip-install the cookbook's helpers first (%pip)
weightless: bool = True  # on a GPU: the exact architecture with random weights (real speed and memory, no download)
workload: "Optional[Union[str, dict, list]]" = None  # a scenario of cookbook/scenarios.yaml or {"input_len": .., "output_len": .., "concurrencies": [..]}, or a list; None means "tune-1k" on a GPU, 16 in / 8 out at concurrency 2 and 4 on the stand-in
slo: "Optional[dict]" = None  # bounds in ms, e.g. {"tpot_ms": 20, "ttft_ms": 2000}: p50 TPOT at most 20 ms, p99 TTFT at most 2 s (None: that on a GPU; p99 TTFT 2 s and p99 E2EL 5 s on the stand-in)
candidates: "Optional[list[dict]]" = None  # specs {"name", "variant", "speculative", "moe_backend", "vllm_version", "extra_args" (a dict: {"--max-num-seqs": 64}), "standin_args", "note"}; None means lab.tune.tune.default_candidates
gpu_hour_usd: "Optional[NonNegativeFloat]" = 3.5  # US dollars per GPU hour (an example price: set yours) for the cost per million output tokens
api_prices: "Optional[list[dict]]" = None  # the hosted API's price to compare with, e.g. [{"provider": "Vercel", "input_usd_per_m": 0.04, "output_usd_per_m": 0.12, "source": "...", "date": "late 2026"}]; None means lab.tune.slo.API_PRICES (Vercel and W&B, as read in late 2026)
repeats: "Optional[PositiveInt]" = None  # runs of each candidate's decision points, each with its own seed; None means 3 on a GPU (vLLM's `vllm bench sweep` default; the best of several candidates needs more to win, the summary says how many), 2 on the stand-in (a spread, but no win: 1 in 6); 1 measures no spread
slo_search: int = 2  # extra points per candidate and workload that bisect its SLO limit (0: only the grid)
concurrencies: "Optional[list[PositiveInt]]" = None  # None means the workload's
num_prompts: "Optional[PositiveInt]" = None  # requests per point; None means the workload's (4 x concurrency, at least 16)
servers: "Optional[dict]" = None  # {candidate name: base URL} of servers you already run: measured there, never launched or stopped
out_dir: "Optional[str]" = None  # None means out/tune/<target>[-standin] (a relative folder is under out/); the same folder resumes an interrupted run
retry_failed: bool = False  # True: launch again a candidate whose start failed in an earlier run

# %%
import importlib.util

if install and importlib.util.find_spec("helpers") is None:  # only when missing
    %pip install -q -e "..[notebook]"

# %% [markdown]
# ## 1. The target and the candidates
#
# `resolve` gives the target's command (the `recipe` candidate). Each candidate is the same
# command with other registry choices or other flags; `changes` says what differs from the
# recipe. Every candidate's flags are checked now against its release's flag table, so a typo
# stops step 1, not a sweep. The choice at the end needs scipy (`check_libraries` names it now).
#
# **Expected:** the recipe's command, then one row per candidate with what it changes.

# %%
import pandas as pd
from IPython.display import display

from lab.tune import tune as tuning
from helpers.config.parameters import check_parameters
from helpers.config.resolve import resolve
from helpers.machine.libraries import check_libraries
from helpers.weights.prepare import prepare

# each parameter, by name, against the type the parameters cell declares
check_parameters(__annotations__, target=target, stand_in=stand_in, install=install, weightless=weightless, workload=workload,
    slo=slo, candidates=candidates, gpu_hour_usd=gpu_hour_usd, api_prices=api_prices, repeats=repeats, slo_search=slo_search,
    concurrencies=concurrencies, num_prompts=num_prompts, servers=servers, out_dir=out_dir, retry_failed=retry_failed)  # fmt: skip
check_libraries("scipy")  # step 6's choice (lab.tune.noise.verdict)
pd.set_option("display.max_colwidth", 120)
cfg = resolve(target)
run = prepare(cfg, stand_in=stand_in, weightless=weightless and not stand_in)  # weightless: a GPU run's choice
print(run.describe())
print(cfg.shell_command())
specs = tuning.default_candidates(cfg, run=run) if candidates is None else candidates
cands = tuning.make_candidates(cfg, specs)
tuning.check_candidates(cands)  # each command against its release's flag table, before any launch
display(pd.DataFrame([{"candidate": c.name, "changes": tuning.changes(c.config, cfg) or "(the recipe's command)",
                       "vLLM": c.config.vllm_version, "why": c.note} for c in cands]))

# %% [markdown]
# ## 2. The workload and the SLO
#
# The workload is `vllm bench serve`'s random dataset at fixed lengths (`--ignore-eos`: every
# answer has `output_len` tokens), one point per concurrency, the same prompts for every
# candidate (one seed per point, shared). The SLO's bounds also go to vLLM as `--goodput`.
#
# **Expected:** the workload's lengths and concurrencies, and the SLO in words.

# %%
from lab.tune.slo import SLO

if workload is None:
    workload = {"name": "tiny", "input_len": 16, "output_len": 8, "concurrencies": [2, 4]} if run.stand_in else "tune-1k"
if slo is None and run.stand_in:  # TPOT is no measurement on 2 CPU cores: bound TTFT and E2EL
    slo = {"ttft_ms": 2000, "e2el_ms": 5000}
slo = SLO.coerce(slo)
loads = tuning.workloads(workload, run=run)
display(pd.DataFrame([{"workload": w.name, "prefix_len": w.prefix_len, "input_len": w.input_len,
                       "output_len": w.output_len, "turns": w.agent["turns"] if w.agent else 1,
                       "concurrencies": list(concurrencies or w.concurrencies)} for w in loads]))
if any(w.agent for w in loads):  # the table's counts are the shape's, before the chat template
    print("agent: tokens per turn before the chat template renders the tool schemas and markup; "
          "each point prints its rendered prompts' token counts")
print("SLO:", slo.describe(), "| vLLM --goodput", " ".join(f"{k}:{v:g}" for k, v in slo.goodput_args().items()))

# %% [markdown]
# ## 3. Serve each candidate in turn, and sweep it
#
# For each candidate: prepare what is served (the stand-in, the weightless architecture, or
# the downloaded checkpoint), launch it, sweep, stop it. One line per step, the server's
# start-up phases, a progress bar per sweep, and a line per repeat and per bisection probe
# (`run 2 of 3 at concurrency 1, 64`, `SLO limit search at concurrency 160`). A server of this
# kernel that holds the GPU is stopped first (one GPU, one server). Interrupted? Run the cell
# again: saved points are skipped.
#
# **Expected:** per candidate `launching`, its phases, a bar to 100 % and `stopped`; a
# candidate that cannot run says why and is skipped. Then one row per candidate: `ok`,
# `failed` (with the diagnosis) or `skipped`.

# %%
result = tuning.tune(cfg, workload, slo, specs, mode=run,
                     concurrencies=concurrencies, num_prompts=num_prompts, gpu_hour_usd=gpu_hour_usd,
                     out_dir=out_dir, servers=servers, retry_failed=retry_failed,
                     repeats=repeats, slo_search=slo_search, api_prices=api_prices)
display(result.candidates[["candidate", "status", "points", "of", "measured", "host", "reason", "changes"]])
print("saved:", result.folder / "tune.json")

# %% [markdown]
# ## 4. Each configuration's frontier
#
# Throughput per GPU against the speed one user sees: each line is one candidate, each point
# one concurrency. Filled points meet the SLO, hollow ones miss it; the star is the
# recommendation. Per-user speed is 1000 / mean TPOT on a GPU; on the stand-in, output tokens
# over end-to-end latency (and the y axis is the whole CPU server's output tokens/s).
#
# **Expected:** one plot per workload, a line per measured candidate, bars spanning each
# repeated point's runs.

# %%
import matplotlib.pyplot as plt
from IPython.display import Image

from helpers.paths import out_dir as out_folder

pngs = []
for w in loads:
    if result.points.empty or w.name not in set(result.points["workload"]):
        continue
    pngs.append(out_folder("plots") / f"tune-{cfg.target}{run.tag}-{w.name}.png")
    plt.close(result.plot(pngs[-1], workload=w.name))  # shown once each, from its PNG
print("plots:", *pngs)
for png in pngs:
    display(Image(str(png)))

# %% [markdown]
# ## 5. Every point against the SLO: goodput and cost
#
# `meets_slo` checks the point's own percentiles; `good_fraction` is vLLM's share of requests
# within every bound; goodput is that share of the output tokens, per GPU. The cost per
# million output tokens is `gpu_hour_usd` x GPUs / (output tokens/s x 3600) x 10^6 at the
# point's throughput: the GPU time only.
#
# Each row is the median over the point's runs (`repeats`), with the range of the throughput
# beside it (one run: min = max).
#
# **Expected:** one row per candidate and concurrency; the misses say which bound and by how much.

# %%
from helpers.bench.results import results_table

cols = ["candidate", "workload", "concurrency", "repeats", "output_throughput_per_gpu",
        "output_throughput_per_gpu_min", "output_throughput_per_gpu_max", result.per_user_column, "p99_ttft_ms",
        "p50_tpot_ms", "p99_e2el_ms", "meets_slo", "slo_violations", "good_fraction", "goodput_tok_s_per_gpu",
        "cost_per_m_output_tokens_usd"]
if not result.points.empty:
    display(results_table(result.points, cols, run=run))

# %% [markdown]
# ## 6. The recommendation, its command and its price
#
# Per workload: the point with the most goodput per GPU (median over its runs) among those
# that meet the SLO, next to the recipe's best point under the same SLO. It replaces the recipe
# only beyond the noise: when a configuration no faster than the recipe would lead this far
# by chance at most 1 in 20 times (the exact one-sided Mann-Whitney test; at 3 runs each that
# is every run above every one of the recipe's), and that 5 % is shared among the candidates
# screened: the best of 2 needs 4 runs each, of 12 five (with one run each: more than 5 %
# ahead, said as one run), and only when both were
# measured in one session; otherwise the row says `tie (within noise)` or
# `tie (measured apart)` and the recipe stays. Then the SLO limit (the highest concurrency
# that meets it, bisected; its goodput and cost are one run, the first or the bisection's, so
# they differ from the median above), the cost per million output tokens beside the hosted API's price for this workload, and the GPU
# utilization at which self-hosting breaks even; then the recommended candidate's exact
# command for the target, as a shell command and as `docker run`. When nothing meets the SLO,
# the closest point is named instead.
#
# **Expected:** a table with a `recommended` and a `recipe` row per workload (and a
# `tie (within noise)` row on a tie), each with its runs and ranges; the SLO limits; one
# summary block per workload, and the command.

# %%
display(result.recommendation_table())
if not result.limits.empty:  # the SLO limit of each candidate: tok/s to 0.1, dollars to 0.001
    display(result.limits.round({"goodput_tok_s_per_gpu": 1, "output_throughput_per_gpu": 1,
                                 "cost_per_m_output_tokens_usd": 3}))
print(result.summary())
best = result.recommended()
if best is not None:
    print(f"\nrecommended for {best.workload} ({'played by the CPU stand-in' if run.stand_in else cfg.label}):\n")
    print(best.shell_command)
    if best.docker_command:
        print("\n" + best.docker_command)

# %% [markdown]
# **Reading it.** The recommendation holds for this workload, this SLO and this machine. A
# margin inside the spread of the runs is a tie, not a win; with `repeats = 1` no spread is
# measured and the text says one run. The break-even utilization compares GPU time only (no
# idle, staff or egress) with the API's list price on its date. The committed H200 results the Hopper notebooks quote are this step's output
# (`docs/results/h200/tune/`, produced by `tools/device/tune_h200.py`).
