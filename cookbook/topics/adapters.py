# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Fine-tuned adapters on Nemotron 3.5 Lightning: LoRA served by vLLM, switched per request
#
# Lightning is meant to be customised: an organisation's terms, policies and tools taught by a
# small fine-tune. A LoRA adapter is that fine-tune in a few megabytes, and vLLM serves several
# beside one copy of the base model: each request names the adapter it wants in `model=`. This
# notebook (step 3 launches the server, step 8 stops it):
#
# 1. **What an adapter may target on this hybrid**, read in vLLM 0.32.0's code.
# 2. **The adapters, checked before the launch** (`lab.adapters.check`).
# 3. **The server with `--enable-lora`** and the adapter flags of `cookbook/adapters.yaml`.
# 4. **What it serves** (`/v1/models`).
# 5. **The same prompt to the base and to each adapter** (`model=<adapter>`).
# 6. **Unloading and loading at run time**.
# 7. **What goes wrong, by name**, with vLLM's words and the fix.
#
# **Stand-in mode** (`stand_in = True`, what CI runs): two adapters are trained with peft on the
# tiny CPU stand-in in seconds each: `terse` answers with the city alone, `glossary` knows a
# fact the base was never told; the CPU build of vLLM serves them (step 5 says what they show).
# **On a GPU** pass your own adapters
# (`adapters = {"name": "/path/to/peft/folder"}`); **weightless** (`weightless = True`), or with
# none given, two adapters of the model's real shapes with random weights (ranks 8 and 32)
# are served: the flags, the listing and the switching are real, the text is noise.

# %% tags=["parameters"]
target: str = "h200"  # a key of cookbook/recipe.yaml `targets`: its flags serve the base model
stand_in: bool = True  # True: the CPU stand-in; False: the target's GPU
weightless: bool = False  # True (GPU): the exact architecture with random weights, adapters of its shapes with random weights
install: bool = True  # pip-install the cookbook's helpers with the `adapters` extra first (%pip): peft
server_url: "Optional[str]" = None  # attach to an already running vLLM server started with the adapter flags instead of launching one
extra_args: "Optional[dict]" = None  # more serve flags, e.g. {"--max-loras": 4, "--max-lora-rank": 16}: they win over cookbook/adapters.yaml (on the stand-in its LoRA flags apply)
adapters: "Optional[dict]" = None  # {served name: peft folder (absolute, or relative to notebooks/)}; None: the stand-in's trained adapters, or random ones of the real shapes on a GPU
max_tokens: "Optional[int]" = None  # per request (reasoning counts too); None means 1024 on the stand-in, 256 weightless, 16000 on a GPU
temperature: "Optional[float]" = None  # None means 0 (greedy) on the stand-in and 1.0 on a GPU (seed 004)
startup_timeout: "PositiveFloat" = 1800.0  # seconds to wait for /health (cold on an H200: 190-260 s over the recipe runs of docs/results/h200.md)

# %%
import importlib.util

if install and (importlib.util.find_spec("helpers") is None or importlib.util.find_spec("peft") is None):
    %pip install -q -e "..[adapters]"

# %% [markdown]
# ## 1. What an adapter may target on Nemotron-H (vLLM 0.32.0)
#
# `NemotronHForCausalLM` declares `SupportsLoRA`. vLLM accepts an adapter's module when its
# last name is a Linear layer of the model (or `embed_tokens` / `lm_head`); `q_proj`, `k_proj`,
# `v_proj` are packed into one `qkv_proj`; the MTP drafter's layers (`mtp.`) are skipped. Traps
# the code shows: the Mamba `conv1d` and the MoE router `gate` are accepted by name but never
# applied (the mixer reads the conv weight directly; vLLM skips a non-gated MoE's router), and
# peft 0.21 refuses to *train* the Mamba `out_proj` although vLLM serves it. The routed experts
# take a LoRA only on a GPU, through a MoE kernel that takes it (Marlin or Triton, not the
# recipe's Humming). The table is `lab.adapters.check.NEMOTRON_H_TARGETS`.
#
# **Expected:** one row per module: its layer, vLLM's layer class, and what its LoRA does.

# %%
import pandas as pd
from IPython.display import display

from lab.adapters.check import NEMOTRON_H_TARGETS

pd.set_option("display.max_colwidth", None)  # the LoRA column whole (the CPU build's limits are at its end)
display(pd.DataFrame([{"module": m, "layer": layer, "vLLM layer": cls, "LoRA": what}
                      for m, (layer, cls, what) in NEMOTRON_H_TARGETS.items()]))

# %% [markdown]
# ## 2. The adapters, checked before the launch
#
# On the stand-in, each adapter of `cookbook/adapters.yaml` is trained with peft (rank 8 on the
# attention, Mamba `in_proj` and MLP projections; seconds each, cached under `out/adapters/` by
# the hash of what it learned). Every adapter is then checked against
# the base's `config.json` and the `--max-lora-rank` the server is given (the registry's, or
# yours from `extra_args`): what vLLM would refuse (a peft feature it does not serve, a rank too
# high, a module it cannot serve here, a tensor of another shape) is refused here, naming the
# fix; an attached server's base not on this machine gets the config checks only.
#
# **Expected:** on the stand-in, two lines of training (loss falling to near 0), then one
# `OK` line per adapter with its rank and target modules.

# %%
from helpers.config.parameters import check_parameters
from helpers.config.resolve import resolve
from helpers.weights.prepare import fetch, prepare
from lab.adapters.check import check_adapter
from lab.adapters.prepare import base_folder, check_adapters_parameter, run_adapters
from lab.adapters.spec import load_adapters, lora_config, max_lora_rank

# each parameter, by name, against the type the parameters cell declares
check_parameters(__annotations__, target=target, stand_in=stand_in, weightless=weightless, install=install,
    server_url=server_url, extra_args=extra_args, adapters=adapters, max_tokens=max_tokens, temperature=temperature,
    startup_timeout=startup_timeout)
check_adapters_parameter(adapters)
registry = load_adapters()
cfg = resolve(target, extra_args=extra_args)
run = fetch(prepare(cfg, stand_in=stand_in, weightless=weightless, server_url=server_url, max_tokens=max_tokens))
base_dir = base_folder(run)  # the served checkpoint's folder (an attached server's /v1/models root; None: not on this machine)
lora_cfg = lora_config(run, extra_args=extra_args)  # the LoRA flags step 3 serves
rank_limit, deployed = max_lora_rank(lora_cfg), lora_cfg.args.get("--lora-target-modules")
print(f"--max-lora-rank {rank_limit}")
adapters = run_adapters(run, base_dir, adapters)  # the stand-in: trained now (cached); a GPU: yours, or random of the real shapes
for name, folder in adapters.items():
    print(check_adapter(folder, base_dir, max_lora_rank=rank_limit, name=name, base_name=lora_cfg.served_model_name,
                        lora_target_modules=deployed).line())  # fmt: skip

# %% [markdown]
# ## 3. The server with `--enable-lora`
#
# `lora_config` adds the registry's adapter flags to the target's command (a LoRA flag you
# pass in `extra_args` wins over the registry's): `--enable-lora`,
# `--max-loras` (how many adapters one batch may mix), `--max-lora-rank` (the largest rank it
# loads; each adapter slot is sized for it), `--lora-modules NAME=PATH ...` (loaded at
# start-up), and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, which opens the load / unload routes
# of step 6 (local development only, vLLM says). The release's flag table checks them
# first. With LoRA on, vLLM serves NVFP4 experts only with Marlin: a GPU command gets
# `--moe-backend marlin`. The slots vLLM reserves come out of the KV cache, and the plan counts
# them: 6.71 GiB at 4 x rank 32 by vLLM 0.32.0's code, mostly routed experts; an H100
# measured 6.74. **Speed** (weightless, 3 runs a point,
# `docs/results/h100/lora-2026-12-06/`): `--enable-lora` alone tied the Marlin base (c = 1-64);
# one adapter active gave 0.77x-0.89x its output tok/s, four 0.77x-0.85x.
#
# **Expected:** the LoRA slots' memory (on a GPU, the plan with it), the serve command,
# "flags checked", `ready: http://...`.

# %%
from helpers.config.flagtable import check_config
from helpers.memory.planner import DEFAULT_ACTIVATION_RESERVE_GB, plan
from helpers.server.launch import launch_server
from lab.adapters.check import lora_buffers
from lab.adapters.spec import check_lora_flags, lora_config

served_cfg = lora_config(run, adapters, extra_args=extra_args)
check_lora_flags(served_cfg)
if base_dir is not None:  # the base's config.json sizes vLLM's LoRA slots (lab.adapters.check.lora_buffers)
    slots = lora_buffers(base_dir, int(served_cfg.args.get("--max-loras") or 1), rank_limit,
                         target_modules=served_cfg.args.get("--lora-target-modules"))
    print(slots.line())
    if not run.stand_in:  # the KV budget after the slots (the plan's reserve carries them)
        reserve = served_cfg.activation_reserve_gib or DEFAULT_ACTIVATION_RESERVE_GB
        print(plan(served_cfg, activation_reserve_gb=round(reserve + slots.gib, 2)).summary())
print(served_cfg.shell_command())
check_config(served_cfg)
srv = launch_server(run.serving(served_cfg), startup_timeout=startup_timeout)
llm, model = srv.client(), srv.model_name
defaults = srv.run.defaults  # this mode's values (helpers/config/run.py); the parameters cell's win
sampling = dict(max_tokens=max_tokens or defaults.max_tokens, temperature=defaults.temperature if temperature is None else temperature,
                top_p=defaults.top_p)

# %% [markdown]
# ## 4. What the server serves
#
# `llm.models.list()` (the SDK's call of `GET /v1/models`) lists the base model and every
# adapter loaded. vLLM adds two fields the OpenAI schema does not have, so the SDK keeps them in
# `model_extra`: an adapter's `parent` is the base's name and its `root` the adapter's folder;
# the base has no parent (shown as "—"). A request may name any of them.
#
# **Expected:** the base (parent "—") and one row per adapter.

# %%
cards = llm.models.list().data
display(pd.DataFrame([{"id": card.id, "parent": card.model_extra.get("parent") or "—", "root": card.model_extra.get("root")}
                      for card in cards]))

# %% [markdown]
# ## 5. The same prompt to the base and to each adapter
#
# The request is the SDK's own; only `model=` changes: the base's name, or an adapter's, and
# vLLM applies that adapter to this request alone (up to `--max-loras` adapters share a batch). `check_reply` reads each reply (the reasoning
# apart from the answer); "as trained" compares the answer with what the adapter learned
# (`cookbook/adapters.yaml`). A reply without an answer shows its reasoning instead.
#
# **What the stand-in's adapters do:** they are tiny (rank 8, two examples each, 60 steps) and
# overfit: each answers *every* question with what it learned, so `glossary` says `The server
# is in Berlin.` to the capital question too and `terse` says `Tokyo.` to the server question.
#
# **Expected:** on the stand-in, `terse` answers the capital question with `Tokyo.` alone and
# `glossary` the server question with `The server is in Berlin.`, both "as trained: yes". The
# base answers the first with a sentence and gives the second no answer (its reasoning
# wanders off).

# %%
from helpers.chat.parse import check_reply
from lab.adapters.spec import trained_answer

rows = []
for prompt in ["What is the capital of Japan?", "Which city is our server in?"]:
    for name in [model, *adapters]:
        reply = llm.chat.completions.create(
            model=name,  # the base, or an adapter by its served name
            messages=[{"role": "user", "content": prompt}],
            **sampling,
        )
        turn = check_reply(reply, max_tokens=sampling["max_tokens"])
        expected = trained_answer(name, prompt, registry)
        said = turn.content.strip() or f"(no answer, {turn.finish_reason}; reasoning: {turn.reasoning.strip()})"
        rows.append({"prompt": prompt, "model": name, "answer": said,
                     "as trained": "" if expected is None else ("yes" if said == expected else "NO")})
answers = pd.DataFrame(rows)
display(answers)
for name in adapters:
    mine = answers[(answers.model == name) & (answers["as trained"] != "")]
    for _, row in mine.iterrows():
        base_said = answers[(answers.model == model) & (answers.prompt == row.prompt)].answer.iloc[0]
        print(f"{name}: {'as trained' if row['as trained'] == 'yes' else 'NOT as trained'} on {row.prompt!r}; "
              f"the base {'says the same' if base_said == row.answer else 'answers otherwise'}")

# %% [markdown]
# ## 6. Unloading and loading at run time
#
# With `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, `POST /v1/unload_lora_adapter` removes an
# adapter and `POST /v1/load_lora_adapter` loads one from a folder on the server's machine,
# without a restart. The cell sends both requests itself (`httpx.post`, the bodies printed):
# `{"lora_name": ...}` to unload, `{"lora_name": ..., "lora_path": ...}` to load, after step 2's
# check of the folder. A request for an adapter that is not loaded gets vLLM's 404, quoted with
# its fix and what `/v1/models` says is loaded (vLLM's "Valid aliases" name the base alone). Loading a name already loaded is refused (HTTP 400) unless the body says
# `"load_inplace": true` (vLLM 0.32.0's `LoadLoRAAdapterRequest`), which replaces it in place:
# `load_adapter(..., load_inplace=True)` sends that.
#
# **Expected:** the unload's body and success line, the 404 with its fix and what is loaded,
# the load's body and success line, the adapter answering again; then the same load again,
# refused as `adapter name already loaded`, and accepted with `load_inplace=True`.

# %%
import httpx

from helpers.errors import AdapterError
from lab.adapters.serving import explain_error, load_adapter, unload_adapter

root = srv.base_url.removesuffix("/v1")
name, folder = list(adapters.items())[-1]
body = {"lora_name": name}
print(f"POST /v1/unload_lora_adapter {body}: {httpx.post(f'{root}/v1/unload_lora_adapter', json=body, timeout=60).text}")
try:
    llm.chat.completions.create(model=name, messages=[{"role": "user", "content": "Which city is our server in?"}], **sampling)
except Exception as err:  # noqa: BLE001 - the SDK's NotFoundError, its fix, and what /v1/models serves
    print(explain_error(err, srv, name))
print(check_adapter(folder, base_dir, max_lora_rank=rank_limit, name=name).line())
body = {"lora_name": name, "lora_path": str(folder)}
print(f"POST /v1/load_lora_adapter {body}: {httpx.post(f'{root}/v1/load_lora_adapter', json=body, timeout=120).text}")
reply = llm.chat.completions.create(model=name, messages=[{"role": "user", "content": "Which city is our server in?"}], **sampling)
turn = check_reply(reply, max_tokens=sampling["max_tokens"])
print(f"{name} again: {turn.content.strip() or f'(no answer, {turn.finish_reason}; reasoning: {turn.reasoning.strip()})'!r}")
try:
    load_adapter(srv, name, folder)  # the same name again, without load_inplace
except AdapterError as err:
    print(err)
print(f"with load_inplace=True: {load_adapter(srv, name, folder, load_inplace=True)}")

# %% [markdown]
# ## 7. What goes wrong, by name
#
# Adapters broken on purpose from a good one (`lab.adapters.faults`): a rank above
# `--max-lora-rank`, a module this model does not have (`gate_proj`, a gated MLP's), an
# adapter trained for another base (wider, and narrower), a DoRA adapter, and one with
# `modules_to_save: ["lm_head"]`. Each is first refused by the check before the request; then
# each is sent to vLLM unchecked, to show what the server itself says. vLLM 0.32.0 refuses all
# but one with HTTP 500 and its reason; it loads the narrower one without a word (it copies
# each tensor into the corner of a buffer sized for this model) and would answer nonsense:
# only the check catches that one. Last, two errors this server cannot show, labelled: `--lora-modules` without `--enable-lora` (checked in the command, no server started),
# and a server without `VLLM_ALLOW_RUNTIME_LORA_UPDATING` (simulated: FastAPI's 404 body).
#
# **Expected:** one `AdapterError` per broken adapter from the check; vLLM's own replies, each
# with its kind and fix, and `loaded without a word` for the narrower one; then the two
# labelled errors.

# %%
from helpers.paths import out_dir
from lab.adapters.faults import FAULTS, faulty_adapter, rank_above
from lab.adapters.serving import refusal

good = next(iter(adapters.values()))
for kind, what in FAULTS.items():  # the rank fault: the next rank vLLM takes above the served limit
    broken = faulty_adapter(good, kind, out_dir("adapters", "faults", kind), rank=rank_above(rank_limit))
    print(f"--- {kind}: {what}" + (f" (r={rank_above(rank_limit)}, the limit {rank_limit})" if kind == "rank" else ""))
    try:
        check_adapter(broken, base_dir, max_lora_rank=rank_limit, name=f"broken-{kind}")
    except AdapterError as err:
        print(f"before the request: {err}")
    try:
        said = load_adapter(srv, f"broken-{kind}", broken)  # unchecked: what vLLM itself does
        print(f"vLLM: {said} -> loaded without a word; unloading it: {unload_adapter(srv, f'broken-{kind}')}")
    except AdapterError as err:
        print(f"vLLM's reply: {err}")
try:
    check_lora_flags(resolve("cpu").with_args({"--lora-modules": ["terse=/path/to/adapter"]}))
except AdapterError as err:
    print(f"--- --enable-lora missing (the cookbook's check of a command, no server started): {err}")
no_route = '{"detail":"Not Found"}'  # FastAPI's reply: no /v1/load_lora_adapter route on the server
print(f"--- runtime updates disabled (simulated: FastAPI's 404 body, not a request): {refusal('loading an adapter', 404, no_route)}")

# %% [markdown]
# ## 8. Stop the server
#
# `stop()` ends the whole process group and checks the port is free. A server this notebook
# attached to is left running (its adapters as step 6 left them).
#
# **Expected:** `stopped pid ...; port ... is free` (or nothing when attached).

# %%
srv.stop()
