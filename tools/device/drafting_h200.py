"""Drafting and prefix reuse on one H200, weightless, in one device session.

What a GPU user of this agent model needs and the cookbook had not measured: drafting (MTP,
DFlash, DSpark) at stated acceptance lengths, the break-even acceptance length, and an agent
workload whose prefix reuse shows in vLLM's own counters. Drafting on random weights runs at a
synthetic acceptance length (:mod:`lab.synthetic_acceptance`: vLLM 0.32.0's
``rejection_sample_method: synthetic``): the speed is drafting's at that acceptance, the text is
not the model's.

**Co-tenant waves.** A cold start of this model takes 3-6 minutes, and one device session has
30. So each wave starts its servers *together* on the one GPU, each with
``--gpu-memory-utilization 0.2 --kv-cache-memory-bytes`` (:data:`KV_BYTES`: a fixed KV cache,
so no server's size depends on what the others held while it profiled), then benchmarks them
*one at a time* while the others sit idle. The weights, kernels and shapes are the recipe's;
what differs from a server alone on the GPU is the KV cache (4 GiB here: room for the
concurrencies below, not for the recipe's c=256) and idle neighbours' memory. The wave's own
no-drafting server is the baseline of every ratio.

Waves (:data:`WAVE1`, :func:`wave2`):

1. ``none`` (the recipe), ``mtp`` K=7, ``dflash`` K=5, ``dspark`` K=7, each at the registry's
   acceptance length: the speculative-decoding notebook attached to all four (papermill,
   ``servers=``; ``tune-1k`` shape, concurrency 1 and 16, 3 runs of each: the ``none`` and
   ``mtp`` points of the break-even fit); the agent workload on ``none`` (prefix caching on,
   the recipe's).
2. ``mtp`` K=7 at acceptance 1.5 and 5.5 (break-even points), the recipe without prefix caching
   and the recipe with ``--prefix-match-unit 16`` (the agent workload on each); a wave-1
   drafter that failed to start takes the first slots, retried with ``TRITON_ATTN``.
3. (``--waves 3``, a session of its own) the cost of ``--no-async-scheduling``, the correctness
   switch the registry's drafting notes name (vllm #53912: vLLM 0.32.0 and 0.33.0's V1 model
   runner can hand one request another's accepted-token count with async scheduling;
   ``lab/evals/lossless.py`` says where it was read): ``mtp`` K=7 at the registry's acceptance
   with async scheduling (vLLM's default) and without, each on the V2 runner (the registry's
   command as rendered) and on the V1 runner (``VLLM_USE_V2_MODEL_RUNNER=0``, where the switch
   matters), the break-even points on each (:data:`WAVE3`).
4. (``--waves 4``) DFlash with vLLM's own choice of attention backend instead of the
   registry's FLASHINFER, which dropped spec decode to piecewise CUDA graphs on the H200
   (2026-12-05): the notebook on none, DFlash K=5 and DSpark K=7, and DFlash at K=3's
   break-even points (:data:`WAVE4`).

5. (``--waves 5``) the recipe as loaded, the recipe and MTP K=7 with vLLM's uniform routing
   simulation (:data:`WAVE5`: how much weightless speed comes from dummy weights' MoE routing).
6. (``--waves 6 --release R``, in release R's environment) the recipe as loaded and with
   uniform routing on R (:data:`WAVE6`): releases compared with routing held equal.
7. and 8. (``--waves 7,8``) the break-even line at 1, 16 and 64 requests with uniform routing
   (:data:`WAVE7`, :data:`WAVE8`): the recipe and MTP K=7 at three acceptance lengths.
9. (``--waves 9``) the same line at 16 and 64 requests with room for them (:data:`WAVE9`): each
   server alone on the GPU, one after another, with a KV cache of :data:`SOLO_KV_BYTES`.

Usage, on the device after ``. tools/device/env.sh``::

    python3 tools/device/drafting_h200.py --out /tmp/runs/draft/out --deadline EPOCH_S
    python3 tools/device/drafting_h200.py --dry-run      # every command, checked, no GPU

Writes under ``--out``: ``wave<i>/<server>/`` (its log, command, points), the executed
notebook, ``summary.json`` (what ran, what was skipped and why, ready times).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from helpers.config.flagtable import check_config
from helpers.config.resolve import resolve
from lab.synthetic_acceptance import describe, with_synthetic_acceptance
from tools.weightless_routing import AS_LOADED_ENV, UNIFORM_ROUTING_ENV

TARGET = "h200"
#: Each co-tenant server's KV cache (bytes): 4 GiB holds 1.3 M tokens of this model's FP8 KV,
#: about 570 blocks of 2,288 tokens: the agent workload at concurrency 16 and the 1K / 256
#: points at 16 need a few dozen.
KV_BYTES = 4 * 1024**3
#: Co-tenancy: vLLM refuses a start when less than utilization x total memory is free
#: (``request_memory``, vllm/v1/worker/utils.py, 0.32.0): 0.2 of 139.8 GiB = 28 GiB.
CO_TENANT = {"--gpu-memory-utilization": "0.2", "--kv-cache-memory-bytes": str(KV_BYTES)}
#: Host memory is shared too (128 GiB on the H200 machine): each server's torch.compile would
#: spawn a compile worker per core (16), four servers 64. Two each, and the starts staggered
#: while the host keeps :data:`HOST_FLOOR_GIB` free (the 2026-12-04 21:39 session's machine
#: stopped answering while a first, unstaggered wave of four was starting: cause not known).
CO_TENANT_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "2"}
STAGGER_S = 20
HOST_FLOOR_GIB = 24
#: Concurrencies and runs of the break-even points (``tune-1k``: 1024 in / 256 out).
BREAK_EVEN_CONCURRENCIES = (1, 16)
BREAK_EVEN_RUNS = 3
BREAK_EVEN_SCENARIO = "tune-1k"
#: The notebook's seed for repeated points (cookbook/topics/speculative_decoding.py): the
#: break-even points of wave 2 repeat its sends, so every point of the fit has the same prompts.
REPEAT_SEED = 1000
#: The agent workload's concurrencies.
AGENT_CONCURRENCIES = (4, 16)

#: name -> (speculative mode, draft tokens K or None, acceptance length or None for the
#: registry's, extra flags)
WAVE1: dict[str, tuple] = {
    "none": ("none", None, None, {}),
    "mtp": ("mtp", 7, None, {}),
    "dflash": ("dflash", 5, None, {}),
    "dspark": ("dspark", 7, None, {}),
}
#: Wave 2 fills its slots in this order: a wave-1 drafter that failed to start comes back with
#: the attention backend ai-dynamo/dynamo's Lightning recipes give DSpark / DFlash
#: (``TRITON_ATTN``) beside the baseline, then the break-even and prefix-reuse servers.
WAVE2: dict[str, tuple] = {
    "mtp-L1.5": ("mtp", 7, 1.5, {}),
    "mtp-L5.5": ("mtp", 7, 5.5, {}),
    "none-nocache": (
        "none",
        None,
        None,
        {
            "--enable-prefix-caching": None,
            "--no-enable-prefix-caching": True,
            "--mamba-cache-mode": None,
        },
    ),
    "none-unit16": ("none", None, None, {"--prefix-match-unit": 16}),
}
#: Wave 3: the cost of the correctness switch ``--no-async-scheduling`` (async scheduling is
#: vLLM's default while drafting, ``VllmConfig``, vllm/config/vllm.py, 0.32.0); ``env`` is popped
#: into the server's environment.
NO_ASYNC = {
    "--async-scheduling": None,
    "--no-async-scheduling": True,
}  # the Hopper command's flag out
WAVE3: dict[str, tuple] = {
    "mtp-async": ("mtp", 7, None, {}),
    "mtp-no-async": ("mtp", 7, None, NO_ASYNC),
    "mtp-v1-async": ("mtp", 7, None, {"env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}}),
    "mtp-v1-no-async": (
        "mtp",
        7,
        None,
        {**NO_ASYNC, "env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}},
    ),
}
#: Wave 4 (``--waves 4``): DFlash with vLLM's own choice of attention backend. With the
#: registry's ``attention_backend: FLASHINFER`` on the H200 (2026-12-05) vLLM 0.32.0 logged
#: "FULL_AND_PIECEWISE is not supported with spec-decode for attention backend FlashInferBackend
#: ... setting cudagraph_mode=PIECEWISE" and DFlash K=5 ran at 0.67x no drafting at c=1.
#: ``attention_backend: None`` drops the key: vLLM 0.32.0 then selects the backend itself
#: (``SpeculativeConfig.attention_backend`` None, vllm/config/speculative.py). Beside it the
#: baseline and DSpark (the notebook's modes), and DFlash at the recipe's K=3 (break-even points).
WAVE4: dict[str, tuple] = {
    "none": WAVE1["none"],
    "dflash": ("dflash", 5, None, {"attention_backend": None}),
    "dspark": WAVE1["dspark"],
    "dflash-k3": ("dflash", 3, None, {"attention_backend": None}),
}
#: Wave 5 (``--waves 5``): how much of the weightless speed comes from where the MoE router
#: sends tokens. vLLM 0.32.0 fills every float weight of a ``--load-format dummy`` model,
#: norms included, with uniform(-1e-3, 1e-3) (``initialize_single_dummy_weight``,
#: model_executor/model_loader/weight_utils.py): activations shrink, router logits are near
#: zero beside the random ``e_score_correction_bias``, and tokens can all pick the same experts,
#: so a decode step reads fewer experts' weights than a real model's would. 0.33.0 and 0.34.0
#: set dummy norm weights to 1.0 ("random ones would shrink every activation and skew
#: data-dependent kernels (e.g. sparse top-k)", model_executor/layers/layernorm.py:70), the
#: cause of 0.33.0's slowdown at 16-64 requests (confirmed: docs/results/h100/routing-2026-12-05/).
#: ``VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random`` (vllm/envs.py, 0.28.0-0.34.0;
#: ``RoutingSimulatorRouter``, fused_moe/router/router_factory.py) routes every token to
#: uniformly random experts instead: the same routing on every release, and closer to a trained
#: router's load-balanced spread. The recipe as loaded beside it with uniform routing, and MTP
#: K=7 with uniform routing (does drafting's gain survive realistic routing?). Since
#: 2026-12-05 every weightless server routes uniformly (helpers.weights.weightless.arch_config),
#: so "as loaded" sets the variable empty (vLLM's "off"); measured: docs/results/h200/routing-*.
UNIFORM_ROUTING = {"env": UNIFORM_ROUTING_ENV}
WAVE5: dict[str, tuple] = {
    "none-as-loaded": ("none", None, None, {"env": AS_LOADED_ENV}),
    "none-uniform": ("none", None, None, UNIFORM_ROUTING),
    "mtp-uniform": ("mtp", 7, None, UNIFORM_ROUTING),
}
#: Wave 6 (``--waves 6 --release 0.34.0``, run in that release's environment): the same
#: baseline pair on another release, so releases compare with routing held equal.
WAVE6: dict[str, tuple] = {
    "none-as-loaded": WAVE5["none-as-loaded"],
    "none-uniform": WAVE5["none-uniform"],
}
#: Waves 7 and 8 (``--waves 7,8``, two co-tenants each: an H100 holds two): the break-even
#: line at 1, 16 and 64 requests with uniform routing, the routing every weightless number uses
#: since 2026-12-05 (the H200 drafting session's line was as loaded, at 1 and 16): the recipe
#: and MTP K=7 at the registry's acceptance, then MTP K=7 at 1.5 and 5.5, the fit's ends.
WAVE7: dict[str, tuple] = {
    "none-uniform": WAVE5["none-uniform"],
    "mtp-uniform": WAVE5["mtp-uniform"],
}
WAVE8: dict[str, tuple] = {
    "mtp-L1.5-uniform": ("mtp", 7, 1.5, UNIFORM_ROUTING),
    "mtp-L5.5-uniform": ("mtp", 7, 5.5, UNIFORM_ROUTING),
}
#: The concurrencies of waves 7 and 8's break-even points (``tune-1k``: 256 prompts at 64).
WIDE_CONCURRENCIES = (1, 16, 64)
#: Wave 9 (``--waves 9``): waves 7 and 8's servers, each alone on the GPU (:data:`SOLO_WAVES`)
#: with a KV cache for 64 requests. With 4 GiB the MTP K=7 servers ran 15 requests at once and
#: queued the rest (docs/results/h100/drafting-2026-12-06/: one 1,280-token request took 6.3 %
#: of the cache: 1 + K blocks in each of its four Mamba groups in align mode, 33 of 523), so 64
#: need about 16 GiB; 24 GiB holds about 95 (so it ran: docs/results/h100/drafting-2026-12-06-alone/,
#: all 64 at once, 67.2 % of the cache). Two such servers do not fit an 80 GB H100 at once.
SOLO_KV_BYTES = 24 * 1024**3
SOLO = {**UNIFORM_ROUTING, "--kv-cache-memory-bytes": str(SOLO_KV_BYTES)}
WAVE9: dict[str, tuple] = {  # in this order: a cut keeps the recipe and the registry's length
    "none-solo": ("none", None, None, SOLO),
    "mtp-solo": ("mtp", 7, None, SOLO),
    "mtp-L5.5-solo": ("mtp", 7, 5.5, SOLO),
    "mtp-L1.5-solo": ("mtp", 7, 1.5, SOLO),
}
#: Waves whose servers run one at a time (started, measured, stopped), and their concurrencies
#: (wave 7 and 8 measured 1 with 4 GiB: a single request fits).
SOLO_WAVES = {9}
SOLO_CONCURRENCIES = (16, 64)
SLOTS = 4
#: What runs on which server of a wave besides the notebook: the agent workload, the
#: break-even points.
AGENT_ON = {"none", "none-nocache", "none-unit16"}
#: (wave 1's ``none`` and ``mtp`` points of the fit are the notebook's repeated points)
BREAK_EVEN_ON = {
    "mtp-L1.5",
    "mtp-L5.5",
    "dflash-k3",
    *WAVE3,
    *WAVE5,
    *WAVE6,
    *WAVE7,
    *WAVE8,
    *WAVE9,
}
#: ``--release``: the vLLM release every server of this run is resolved for (None: the
#: registry's default); the run itself must be in that release's environment.
RELEASE: str | None = None


def wave2(failed: set[str]) -> dict[str, tuple]:
    """Wave 2's servers: wave-1 drafters in ``failed`` again with ``TRITON_ATTN`` (and the
    baseline beside them, for the notebook), then :data:`WAVE2`, :data:`SLOTS` at most."""
    plan: dict[str, tuple] = {}
    retry = [m for m in ("dflash", "dspark") if m in failed]
    if retry:
        plan["none"] = WAVE1["none"]
        for m in retry:
            mode, k, length, extra = WAVE1[m]
            plan[m] = (mode, k, length, {**extra, "attention_backend": "TRITON_ATTN"})
    for name, spec in WAVE2.items():
        if len(plan) < SLOTS:
            plan[name] = spec
    return plan


#: ``--stand-in``: the control flow on the CPU stand-in (wave 1's baseline only: the CPU build
#: serves neither synthetic acceptance nor this model's drafters), to rehearse a session.
STAND_IN = False


def server_config(
    mode: str, k: int | None, length: float | None, extra: dict, *, weightless: bool = True
):
    """The served config of one co-tenant server: the recipe's h200 command with ``mode``,
    ``K`` draft tokens, synthetic acceptance (registry's or ``length``), ``extra`` flags."""
    if STAND_IN:
        from helpers.config.resolve import standin_config
        from helpers.standin.build import build_standin_model

        return standin_config(resolve(TARGET), build_standin_model())
    cfg = resolve(TARGET, speculative=mode, vllm_version=RELEASE)
    extra = dict(extra)
    env = extra.pop("env", {})  # the server's environment, not a flag
    if k is not None or "attention_backend" in extra:  # --speculative-config keys, not flags
        spec = {**cfg.speculative_config, **({"num_speculative_tokens": k} if k else {})}
        if "attention_backend" in extra:  # None: vLLM's own choice (the key dropped)
            spec["attention_backend"] = extra.pop("attention_backend")
            if spec["attention_backend"] is None:
                del spec["attention_backend"]
        cfg = cfg.with_args({"--speculative-config": spec})
    if weightless:
        from helpers.weights.prepare import served_config

        cfg = served_config(cfg, "weightless")
    cfg = with_synthetic_acceptance(cfg, length) if mode != "none" else cfg
    return cfg.with_args({**CO_TENANT, **extra}, **CO_TENANT_ENV, **env)


def _host_free_gib() -> float:
    import psutil

    return psutil.virtual_memory().available / 1024**3


def _watch_host(path: Path, stop) -> None:
    """Every 10 s: host memory available (GiB) and GPU memory used, to ``path``."""
    with open(path, "a") as fh:
        while not stop.wait(10):
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip()  # fmt: skip
            fh.write(
                f"{time.strftime('%H:%M:%S')} host_free_gib={_host_free_gib():.1f} gpu_used={gpu}\n"
            )
            fh.flush()


def only(wave: dict[str, tuple], names: str | None) -> dict[str, tuple]:
    """The servers of ``wave`` named in ``names`` (comma-separated; None: all of them).

    Raises:
        SystemExit: a name that is in no wave (a typo would otherwise skip every wave)."""
    if names is None:
        return wave
    wanted = set(names.split(","))
    known = {n for w in (WAVE1, WAVE2, WAVE3, WAVE4, WAVE5, WAVE6, WAVE7, WAVE8, WAVE9) for n in w}
    if wanted - known:
        raise SystemExit(
            f"--only: no server named {sorted(wanted - known)}; known: {sorted(known)}"
        )
    return {n: spec for n, spec in wave.items() if n in wanted}


def dry_run(waves: set[int] | None = None) -> int:
    """Print each wave's commands (``waves``: their numbers; None: every wave), each checked
    against the release's flag table; 0."""
    for i, wave in enumerate(
        (WAVE1, wave2({"dspark"}), WAVE3, WAVE4, WAVE5, WAVE6, WAVE7, WAVE8, WAVE9), 1
    ):
        if waves is not None and i not in waves:
            continue
        for name, (mode, k, length, extra) in wave.items():
            cfg = server_config(mode, k, length, extra, weightless=False)
            check_config(cfg, quiet=True)
            point = describe(cfg)
            print(f"wave {i} {name}: {point.caption() if point else 'no drafting'}")
            print("  " + cfg.shell_command().replace("\n", "\n  "))
    return 0


def _notebook(servers: dict[str, str], wave: dict[str, tuple], out: Path, budget_s: float) -> dict:
    """The speculative-decoding notebook attached to the wave's servers (papermill), told the
    draft tokens and attention backend each was started with."""
    modes = [m for m in ("none", "mtp", "dflash", "dspark") if m in servers]
    overrides = {}
    for m in modes:
        _, k, _, extra = wave[m]
        layer = {"num_speculative_tokens": k} if k else {}
        if "attention_backend" in extra:  # None: vLLM's own choice, shown as null
            layer["attention_backend"] = extra["attention_backend"]
        if layer:
            overrides[m] = layer
    nb = out / "speculative_decoding.ipynb"
    cmd = [
        sys.executable, "-m", "papermill", "notebooks/speculative_decoding.ipynb", str(nb), "-k", "python3",
        "--cwd", "notebooks", "--log-output", "--execution-timeout", str(int(budget_s)),
        "-p", "target", TARGET, "-p", "stand_in", str(STAND_IN), "-p", "weightless", str(not STAND_IN), "-p", "install", "False",
        "-y", json.dumps({"modes": modes, "servers": servers, "speculative_overrides": overrides,
                          "scenario_name": BREAK_EVEN_SCENARIO, "concurrencies": list(BREAK_EVEN_CONCURRENCIES),
                          "repeats": BREAK_EVEN_RUNS, "acceptance_prompts": 0}),
    ]  # fmt: skip
    print("$", shlex.join(cmd), flush=True)
    t = time.time()
    with open(out / "papermill.log", "w") as log:
        rc = subprocess.run(
            cmd, stdout=log, stderr=subprocess.STDOUT, timeout=budget_s + 60, cwd=REPO
        ).returncode
    return {"rc": rc, "seconds": round(time.time() - t), "modes": modes}


def _points(srv, name: str, out: Path, what: str, concurrencies=BREAK_EVEN_CONCURRENCIES) -> dict:
    from helpers.bench.sweep import sweep
    from lab.bench.repeats import repeat_point
    from lab.bench.scenarios import scenario

    t = time.time()
    if what == "agent":
        df = sweep(
            srv,
            list(AGENT_CONCURRENCIES),
            scenario=scenario("agent", srv),
            label=name,
            out_dir=out / "agent",
            progress=False,
        )
        cols = [c for c in ("concurrency", "prefix_cache_hit_rate", "median_ttft_ms", "p99_ttft_ms",
                            "tokens_per_s_per_user", "output_throughput") if c in df]  # fmt: skip
        print(df[cols].to_string(index=False), flush=True)
    else:
        for c in concurrencies:
            repeat_point(srv, concurrency=c, repeats=BREAK_EVEN_RUNS, scenario=scenario(BREAK_EVEN_SCENARIO, srv),
                         label=name, out_dir=out / "break-even" / f"repeats-c{c}", seed=REPEAT_SEED,
                         seed_label=BREAK_EVEN_SCENARIO, extra_args=["--temperature", "0.0"],
                         progress=False)  # fmt: skip
    return {"seconds": round(time.time() - t)}


def start_co_tenants(configs: dict, deadline: float, record: dict) -> dict:
    """Start ``configs`` (``{name: served config}``) together on the one GPU and wait for each,
    at most until ``deadline`` (epoch seconds, ``time.time()``'s clock).

    Staggered by :data:`STAGGER_S`, and a server is not started while the host has less than
    :data:`HOST_FLOOR_GIB` free. Writes each server's ``command``, ``ready_s`` (seconds from
    the last start to ``/health``) or ``error`` and ``log_path`` (its vLLM log, kept by the
    caller) into ``record[name]`` (a dict each).

    Returns:
        ``{name: VLLMServer}`` of the servers that are ready; a server that failed is stopped
        and its error recorded, never raised.
    """
    from helpers.server.vllm_server import VLLMServer

    servers: dict = {}
    try:
        for name, cfg in configs.items():
            entry = record.setdefault(name, {})
            entry["command"] = cfg.shell_command()
            if servers:  # staggered, and only while the host has memory to spare
                time.sleep(STAGGER_S)
                free = _host_free_gib()
                if free < HOST_FLOOR_GIB:
                    entry["error"] = f"not started: {free:.0f} GiB of host memory free"
                    continue
            servers[name] = VLLMServer(cfg, startup_timeout=max(60, deadline - time.time() - 60))
            servers[name].start(wait=False)
        t0 = time.time()
        for name, srv in list(servers.items()):
            try:
                srv.wait_ready()
                record[name]["ready_s"] = round(time.time() - t0)
            except Exception as e:  # noqa: BLE001 - recorded, the others go on without it
                record[name]["error"] = f"start: {e}"[:4000]
                record[name]["log_path"] = str(getattr(srv, "log_path", "") or "")
                servers.pop(name).stop()
    except BaseException:  # interrupted while starting: nothing is left running
        for srv in servers.values():
            srv.stop()
        raise
    return servers


def measure_order(names: list[str], wave: int, concurrencies) -> list[tuple[str, str, int | None]]:
    """What wave ``wave`` measures on its ready servers ``names``, in order: ``(server,
    "agent" or "break-even", concurrency)``; the agent workload's sweep once per server (its
    concurrencies, None), then the break-even points by ``concurrencies``, the servers in turn
    at each, so a deadline that cuts the wave leaves pairs (a server's points one after another
    left the recipe measured and the drafter not, in the tuning step's 2026-12-06 session).
    Wave 2 and later measure no baseline of wave 1 (its notebook only)."""

    def on(n: str, group: set) -> bool:
        return n in group and not (wave > 1 and n in WAVE1)

    agent = [(n, "agent", None) for n in names if on(n, AGENT_ON)]
    return agent + [(n, "break-even", c) for c in concurrencies for n in names if on(n, BREAK_EVEN_ON)]  # fmt: skip


def run_wave(i: int, wave: dict, out: Path, deadline: float, summary: dict) -> None:
    folder = out / f"wave{i}"
    folder.mkdir(parents=True, exist_ok=True)
    servers: dict = {}
    record = summary.setdefault("waves", {}).setdefault(str(i), {})
    try:
        configs = {}
        for name, (mode, k, length, extra) in wave.items():
            try:
                configs[name] = cfg = server_config(mode, k, length, extra)
            except Exception as e:  # noqa: BLE001 - recorded, the wave goes on without it
                record[name] = {"error": f"config: {e}"}
                continue
            point = describe(cfg)
            record[name] = {"acceptance": point.caption() if point else None}
        servers = start_co_tenants(configs, deadline, record)
        print(json.dumps(record, indent=1)[:3000], flush=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        modes = {n: s for n, s in servers.items() if n in WAVE1}
        if modes and (len(modes) > 1 or STAND_IN) and deadline - time.time() > 420:
            urls = {n: s.base_url.removesuffix("/v1") for n, s in modes.items()}
            record["notebook"] = _notebook(
                urls, wave, folder, min(900, deadline - time.time() - 300)
            )
        wide = WIDE_CONCURRENCIES if i in (7, 8) else BREAK_EVEN_CONCURRENCIES
        wide = SOLO_CONCURRENCIES if i in SOLO_WAVES else wide
        for name, what, c in measure_order(list(servers), i, wide):
            rec = record[name].setdefault(what, {"seconds": 0, "concurrencies": []})
            cs = [c] if c else list(AGENT_CONCURRENCIES)  # the agent sweep: all of its own
            if deadline - time.time() < 90:
                rec.setdefault("skipped", []).extend(cs)  # the deadline
                continue
            try:
                t = _points(servers[name], name, folder / name, what, cs)
                rec["seconds"] += t["seconds"]
                rec["concurrencies"].extend(cs)
            except Exception as e:  # noqa: BLE001
                rec.setdefault("errors", []).append(f"{cs}: {e}"[:2000])
                traceback.print_exc()
            (out / "summary.json").write_text(json.dumps(summary, indent=1))  # a cut run keeps it
    finally:
        for name, srv in servers.items():
            try:
                (folder / f"{name}.log.path").write_text(str(getattr(srv, "log_path", "")))
            finally:
                srv.stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--deadline", type=float, help="epoch seconds by which every server is stopped")
    p.add_argument(
        "--waves", default=None,
        help="which waves, e.g. 1 or 1,2 (default 1,2; with --dry-run, every wave); 3 and 4 a session of their own",
    )  # fmt: skip
    p.add_argument(
        "--release",
        default=None,
        help="resolve every server for this vLLM release (run in its environment), e.g. 0.34.0",
    )
    p.add_argument(
        "--only",
        default=None,
        help="start only these servers of each wave, comma-separated (e.g. none-as-loaded,"
        "none-uniform: two co-tenants where a GPU of 80 GB holds no more)",
    )
    p.add_argument("--dry-run", action="store_true")
    p.add_argument(
        "--stand-in",
        action="store_true",
        help="rehearse wave 1's baseline (or --waves 7 / 8 / 9) on the CPU stand-in",
    )
    args = p.parse_args(argv)
    global STAND_IN, WAVE1, RELEASE
    RELEASE = args.release
    if args.stand_in:  # wave 1's baseline, or waves 7 to 9 (their points) when asked for
        STAND_IN, WAVE1 = True, {"none": WAVE1["none"]}
        BREAK_EVEN_ON.add("none")
        args.waves = args.waves if set((args.waves or "").split(",")) <= {"7", "8", "9"} else "1"
    only({}, args.only)  # a misspelled name stops here, before any server starts
    if args.dry_run:  # the waves asked for, or every wave
        return dry_run({int(w) for w in args.waves.split(",")} if args.waves else None)
    args.waves = args.waves or "1,2"
    if args.out is None or args.deadline is None:
        p.error("--out and --deadline are needed (or --dry-run)")
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kv_bytes": {
            w: SOLO_KV_BYTES if int(w) in SOLO_WAVES else KV_BYTES for w in args.waves.split(",")
        },
    }
    import threading

    stop = threading.Event()
    watcher = threading.Thread(target=_watch_host, args=(args.out / "host.log", stop), daemon=True)
    if not STAND_IN:
        watcher.start()
    try:
        for i in (int(w) for w in args.waves.split(",")):
            if args.deadline - time.time() < 300:
                summary.setdefault("skipped", []).append(f"wave {i}: under 300 s left")
                continue
            first = summary.get("waves", {}).get("1", {})
            failed = {n for n, r in first.items() if isinstance(r, dict) and "error" in r}
            waves = {1: WAVE1, 3: WAVE3, 4: WAVE4, 5: WAVE5, 6: WAVE6, 7: WAVE7, 8: WAVE8, 9: WAVE9}
            wave = waves.get(i) or wave2(failed)
            wave = only(wave, args.only)
            if not wave:
                summary.setdefault("skipped", []).append(f"wave {i}: none of --only {args.only}")
                continue
            for part in [{n: w} for n, w in wave.items()] if i in SOLO_WAVES else [wave]:
                run_wave(i, part, args.out, args.deadline, summary)  # a solo wave: one at a time
            (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    finally:
        stop.set()
        summary["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
