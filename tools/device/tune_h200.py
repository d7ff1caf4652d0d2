"""The tuning step on one H200: the issue's grid, weightless, resumable across device sessions.

Grid (``lab.tune.tune``, target ``h200``, weightless architecture: real kernels and shapes,
random weights, ``--load-format dummy``): NVFP4 x {Humming (the recipe), Marlin} and BF16 x
Triton, each at ``--max-num-seqs`` 256 and 64, swept at concurrency 1 / 16 / 64 / 256 on the
``tune-1k`` (1024 in / 256 out) and ``tune-8k`` (8192 in / 256 out) workloads of
``cookbook/scenarios.yaml``, with vLLM's ``--goodput`` from the SLO (p50 TPOT <= 20 ms, p99 TTFT
<= 2 s). Each candidate's decision points (concurrency 1 and its best under the SLO) run
``--repeats`` times (default 3, vLLM's ``vllm bench sweep --num-runs`` default), each with its
own seed, and its SLO limit is bisected with at most ``--slo-search`` extra points per workload
(default 2): a candidate replaces the recipe only when its runs lead the recipe's beyond chance,
shared among the candidates screened (``lab.tune.noise.verdict``: one candidate at 3 runs
needs its worst run above the recipe's best; the best of 12 needs 5 runs each). ``--c1`` adds the decode-overhead candidates (:data:`C1_CANDIDATES`, concurrency 1 only,
``tune-1k``), with the recipe's concurrency-1 point measured again in the same session as their
anchor (list ``recipe`` in ``--only``: a candidate is compared only with runs of its own session); ``--releases 0.28.0`` adds the grid's 256-sequence candidates on that release
(they run only in an environment with it; the same ``--out`` merges both).

Output (``--out DIR``): ``DIR/grid/`` and ``DIR/c1/``, each a tuning folder (points, failures,
``tune.json`` with ``applies_to: [h100]``, plots). Commit the ``tune.json`` files under
``docs/results/h200/tune/`` (``grid-vllm-<release>.json``, ``c1-vllm-<release>.json``): the
h100 / h200 notebooks render from them at the next build.

Each candidate is one server start (about 3-4 minutes cold) plus its points; the script
starts a candidate only when its estimate fits ``--budget-s`` (device seconds left), and a run
resumes from ``DIR``: carry the folder back into the next session and call it again.

Usage, on the device after ``. tools/device/env.sh`` (or through ``h200_tune.sh``)::

    python3 tools/device/tune_h200.py --out /tmp/runs/tune/out --budget-s 1500 [--c1]
    python3 tools/device/tune_h200.py --dry-run [--c1]      # the plan, every command checked
    python3 tools/device/tune_h200.py --no-grid --drafting --co-tenant --out DIR --budget-s 1300
    python3 tools/device/tune_h200.py --stand-in --out /tmp/tune-rehearsal   # CPU rehearsal

``--drafting --co-tenant`` fits the drafting part into one session: its servers start together
on the GPU in waves of four (a BF16 one counts two) with a 4 GiB KV cache each, and they are
measured in rounds, one run of each in turn while the others sit idle (:func:`run_co_tenant`,
:func:`measure_in_rounds`: a budget cut leaves each the same number of runs), at the latency workload
(``tune-1k``, concurrency 1) and the agent workload (4 and 16 sessions): what a 4 GiB cache
holds. ``DIR/drafting/co-tenant.json`` has each server's command as started.

``--routing uniform`` (the default, as every weightless server since 2026-12-05) starts every
server (the recipe's too) with vLLM's uniform routing simulation
(``tools.weightless_routing.UNIFORM_ROUTING_ENV``): vLLM 0.32.0's dummy weights send every token
of a step to the same 6 of 128 experts, a trained router spreads them (measured:
docs/results/h200/routing-2026-12-05/); ``--routing as-loaded`` keeps the dummy weights' own.
Each saved command exports the variable, so the results pages know which points ran with it (a
GPU setting: the stand-in rehearsal plays none of it, as it plays no MoE kernel flag).

``--stand-in`` runs the same control flow on the CPU stand-in with tiny settings: 16 in / 8
out at concurrency 1 and 2, ``--max-num-seqs`` 64 / 256 played as 2 / 4, the GPU-only flags
(MoE kernel, compilation and Mamba settings) not played.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from helpers.config.flagtable import check_config
from helpers.config.resolve import resolve
from helpers.config.versions import installed_vllm_version
from lab.bench import scenarios
from lab.tune import tune as tuning
from tools.tune_pages import runs_needed
from tools.weightless_routing import AS_LOADED_ENV, UNIFORM_ROUTING_ENV, uniform_routing

#: The grid of the issue: (name, spec). The recipe (NVFP4, Humming, 256 sequences) is "recipe".
GRID = [
    ("nvfp4-humming-64", {"extra_args": {"--max-num-seqs": 64}}),
    ("nvfp4-marlin-256", {"moe_backend": "marlin"}),
    ("nvfp4-marlin-64", {"moe_backend": "marlin", "extra_args": {"--max-num-seqs": 64}}),
    ("bf16-triton-256", {"variant": "bf16", "extra_args": {"--max-num-seqs": 256}}),
    ("bf16-triton-64", {"variant": "bf16", "extra_args": {"--max-num-seqs": 64}}),
]
#: What vLLM 0.32.0 offers against per-step overhead at concurrency 1, each on top of NVFP4 with
#: Marlin MoE (the fastest c1 kernel measured, docs/results/h200/tune/). Flag spellings read in
#: 0.32.0's source (vllm/engine/arg_utils.py, vllm/config/compilation.py, vllm/config/vllm.py,
#: vllm/config/mamba.py, vllm/config/scheduler.py):
#: - ``--compilation-config '{"cudagraph_mode": ...}'``: NONE, PIECEWISE, FULL,
#:   FULL_DECODE_ONLY, FULL_AND_PIECEWISE (CUDAGraphMode; FULL_AND_PIECEWISE is -O2's default).
#: - ``--max-cudagraph-capture-size N`` / ``--cudagraph-capture-sizes N ...`` (sizes captured;
#:   default [1, 2, 4] + range(8, 256, 8) + ... up to 512).
#: - ``--performance-mode interactivity``: CUDA graphs for every batch size 1..32 and
#:   latency-oriented kernels (``balanced`` default, ``throughput``).
#: - ``--async-scheduling`` / ``--no-async-scheduling`` (default: on where compatible;
#:   SchedulerConfig.async_scheduling None -> enabled in VllmConfig).
#: - ``--mamba-ssu-algorithm auto|simple|vertical|horizontal`` (FlashInfer Mamba backend only;
#:   the recipe's Hopper override says horizontal).
#: - ``--stream-interval N``: tokens buffered per streamed chunk (host work per token).
#: - ``--optimization-level 3`` is "currently the same as -O2" in 0.32.0: not a candidate.
C1_CANDIDATES = [
    ("c1-marlin", {}),
    ("c1-cg-full", {"extra_args": {"--compilation-config": {"cudagraph_mode": "FULL"}}}),
    ("c1-cg-full-decode", {"extra_args": {"--compilation-config": {"cudagraph_mode": "FULL_DECODE_ONLY"}}}),
    ("c1-cg-piecewise", {"extra_args": {"--compilation-config": {"cudagraph_mode": "PIECEWISE"}}}),
    ("c1-interactivity", {"extra_args": {"--performance-mode": "interactivity"}}),
    ("c1-capture-8", {"extra_args": {"--max-cudagraph-capture-size": 8}}),
    ("c1-no-async", {"extra_args": {"--async-scheduling": None, "--no-async-scheduling": True}}),
    ("c1-ssu-simple", {"extra_args": {"--mamba-ssu-algorithm": "simple"}}),
    ("c1-ssu-vertical", {"extra_args": {"--mamba-ssu-algorithm": "vertical"}}),
    ("c1-stream-4", {"extra_args": {"--stream-interval": 4}}),
]  # fmt: skip
#: What this model exists for, as candidates (``--drafting``): drafting at the registry's
#: synthetic acceptance for each K (weightless: :mod:`lab.synthetic_acceptance`; MTP K=7,
#: DFlash K=5 and DSpark K=7 at ai-dynamo/dynamo's published H200 lengths, K=1 and K=3 derived
#: from K=7's), and BF16 with online FP8 (the 2026-12-04 H200 run's flags,
#: docs/results/h200/drafting-2026-12-04/fp8.yaml), on ``tune-1k`` and the ``agent`` workload.
DRAFTING_CANDIDATES = [
    ("mtp-k1", {"speculative": "mtp", "speculative_tokens": 1}),
    ("mtp-k3", {"speculative": "mtp", "speculative_tokens": 3}),
    ("mtp-k7", {"speculative": "mtp", "speculative_tokens": 7}),
    ("dflash-k5", {"speculative": "dflash", "speculative_tokens": 5}),
    ("dspark-k7", {"speculative": "dspark", "speculative_tokens": 7}),
    ("bf16-fp8", {"variant": "bf16", "extra_args": {
        "--quantization": "fp8", "--kv-cache-dtype": "fp8", "--async-scheduling": True,
        "--max-num-batched-tokens": 32768, "--max-num-seqs": 256}}),
]  # fmt: skip
DRAFTING_LOADS = ["tune-1k", "agent"]
#: ``--co-tenant`` (the drafting part in one session): the candidates' servers start together
#: on the one GPU, as ``drafting_h200.py``'s waves do (each at ``--gpu-memory-utilization 0.2``
#: and a fixed 4 GiB KV cache: ``drafting_h200.CO_TENANT``), and are measured one at a time
#: while the others sit idle. A 4 GiB cache holds about 16 requests of these shapes, so each
#: workload runs at the concurrencies below: the latency workload (one user) and the agent
#: workload at 4 and 16 sessions; the throughput points (64, 256) need a server alone.
CO_TENANT_CONCURRENCIES = {"tune-1k": [1], "agent": [4, 16]}


def co_tenant_points(given: list[str] | None) -> dict[str, list[int]]:
    """``--points`` (``["tune-1k:1", "agent:16"]``, workload:concurrency[,concurrency], or
    ``agent:none`` to leave a workload out) over :data:`CO_TENANT_CONCURRENCIES`: a session
    short of device time measures fewer points.

    Raises:
        SystemExit: a workload that is not one of the drafting part's, or a concurrency that is
            not a positive integer.
    """
    out = {k: list(v) for k, v in CO_TENANT_CONCURRENCIES.items()}
    for item in given or []:
        name, _, cs = item.partition(":")
        if name in out and cs == "none":
            out[name] = []
            continue
        if name not in out or not cs or not all(c.isdigit() and int(c) > 0 for c in cs.split(",")):
            raise SystemExit(f"--points {item!r}: give WORKLOAD:C[,C] with WORKLOAD one of "
                             f"{sorted(out)} and C positive integers, e.g. agent:16 (or agent:none)")  # fmt: skip
        out[name] = [int(c) for c in cs.split(",")]
    if not any(out.values()):
        raise SystemExit("--points leaves no workload to measure")
    return out


#: Servers per wave at most (NVFP4 ones: four fit 137.8 of 143.8 GiB with their caches on an
#: H200, 2026-12-05); a BF16 candidate (30.2 GiB of FP8 weights with online FP8, 2026-12-04)
#: takes two slots.
CO_TENANT_SLOTS = 4
#: GiB one slot takes: an NVFP4 co-tenant server with its 4 GiB KV cache (four took 137.8 GiB on
#: an H200; two took 58.0 GiB on an H100 80GB, 2026-12-05, docs/results/h100/routing-2026-12-05/),
#: with the drafters' room: 34.5 GiB, so an H100 holds two and an H200 four.
CO_TENANT_SLOT_GIB = 34.5


def co_tenant_slots(total_gib: float | None) -> int:
    """Slots of one wave on a GPU of ``total_gib`` GiB (None: unknown, :data:`CO_TENANT_SLOTS`):
    as many :data:`CO_TENANT_SLOT_GIB` shares as fit, 1 to :data:`CO_TENANT_SLOTS`. The lender
    may answer an ``nvidia-h200`` call with an H100 80GB, where four servers would not start."""
    if not total_gib:
        return CO_TENANT_SLOTS
    return max(1, min(CO_TENANT_SLOTS, int(total_gib // CO_TENANT_SLOT_GIB)))


def gpu_slots() -> int:
    """:func:`co_tenant_slots` of this machine's first GPU (``helpers.machine.gpus``; NVML,
    then ``nvidia-smi``), printed with the GPU's name."""
    from helpers.machine.gpus import detect_gpus

    gpus = detect_gpus().gpus
    total = gpus[0].memory_total_gib if gpus else None
    slots = co_tenant_slots(total)
    name = f"{gpus[0].name}, {total:.1f} GiB" if gpus and total else "no GPU read"
    print(f"[co-tenant] {slots} servers a wave ({name})", flush=True)
    return slots


#: Seconds a wave's cold starts take (four at once: ready in 169-382 s on 2026-12-05) and one
#: candidate's points at 3 runs each (9 points of 15-35 s each with vllm bench serve's start;
#: 134-189 s on an H100, 2026-12-05, --slo-search 1 included, so the most of them; scaled by
#: ``--repeats`` / 3, a run of each a round of :func:`measure_in_rounds`): a wave starts only
#: when its cold start and one round fit the budget left, a round only when it fits.
CO_TENANT_START_S = 420.0
CO_TENANT_MEASURE_S = 190.0
#: Seconds kept after the last candidate for the final summary, plots and the device's collect.
CO_TENANT_COLLECT_S = 90.0
#: Seconds one SLO-search probe takes (one run at a concurrency between two grid points: the
#: H100 screen's agent points took 15-35 s with vllm bench serve's start, 2026-12-05).
SEARCH_PROBE_S = 35.0
SLO = {"tpot_ms": 20, "ttft_ms": 2000}
#: On the stand-in TPOT is no measurement (2 CPU cores stream in bursts): TTFT and E2EL instead.
STANDIN_SLO = {"ttft_ms": 2000, "e2el_ms": 5000}
APPLIES_TO = ["h100"]


def _standin_args(spec: dict) -> dict:
    """What the CPU stand-in plays of a candidate: its --max-num-seqs, 64 / 256 as 2 / 4."""
    seqs = (spec.get("extra_args") or {}).get("--max-num-seqs")
    return {"--max-num-seqs": 2 if seqs == 64 else 4} if seqs else {}


def specs(
    names_specs: list[tuple[str, dict]], *, base_moe: str | None = None, releases=(), stand_in=False
):
    out = []
    for name, spec in names_specs:
        s = {"name": name, **spec}
        if base_moe:
            s.setdefault("moe_backend", base_moe)
        if stand_in:
            s["standin_args"] = _standin_args(spec)
        out.append(s)
    for release in releases:
        out.append(
            {
                "name": f"recipe-v{release}",
                "vllm_version": release,
                **({"standin_args": {}} if stand_in else {}),
            }
        )
        out.append({"name": f"bf16-triton-256-v{release}", "variant": "bf16", "vllm_version": release,
                    "extra_args": {"--max-num-seqs": 256}, **({"standin_args": {}} if stand_in else {})})  # fmt: skip
    return out


def estimate_s(loads, concurrencies=None) -> float:
    """One candidate by lab.bench.scenarios' H200 model: a 300 s cold start plus its sweeps
    at 20K prefill tok/s. An upper bound: cold starts measured 155-250 s, prefill 34-39K tok/s
    at 8K-131K tokens (docs/results/README.md#cold-starts-on-an-h200, long_context.json)."""
    sweep = sum(w.expected_seconds("h200", concurrencies or w.concurrencies) for w in loads)
    return scenarios.STARTUP_S + sweep


#: Device seconds a candidate is budgeted at before it starts (``--candidate-s``): a grid
#: candidate (cold start, tune-1k and tune-8k) and a c1 candidate (cold start, one point). Set
#: from the measured figures above (a start near 200 s, the h200 notebook's 1K sweep near
#: 150 s, the 8K sweep's prefill near 150 s), not from the model's upper bound; with 3 repeats
#: of two decision points and 2 bisection probes, about 150 s more per workload (c1: two more
#: runs of its one point, about 60 s).
CANDIDATE_S = {"grid": 900.0, "c1": 320.0, "drafting": 700.0}


def candidate_budget_s(part: str, args) -> float:
    """Seconds a candidate of ``part`` ("grid" or "c1") must have left before it starts:
    ``--c1-candidate-s`` for a c1 one when given, else ``--candidate-s``, else
    :data:`CANDIDATE_S` (0 on the stand-in, whose budget is the rehearsal's own)."""
    for given in (args.c1_candidate_s if part == "c1" else None, args.candidate_s):
        if given is not None:
            return float(given)
    return 0.0 if args.stand_in else CANDIDATE_S[part]


def save_part(base, loads, slo, cand_specs, folder, common) -> tuning.TuneResult:
    """Every candidate's saved points in ``folder`` collected (nothing measured), saved with
    ``applies_to`` :data:`APPLIES_TO`, and one plot per workload that has points."""
    result = tuning.tune(base, loads, slo, cand_specs, only=[], include_recipe=True, **common)
    result.save(applies_to=APPLIES_TO)
    for w in loads:
        if not result.points.empty and w.name in set(result.points["workload"]):
            result.plot(folder / f"{w.name}.png", workload=w.name)
    return result


def run_part(name, base, cand_specs, loads, folder, args, concurrencies=None) -> tuning.TuneResult:
    """Tune one candidate at a time, each only when its estimate fits the budget left."""
    start = time.monotonic()
    mode = "stand_in" if args.stand_in else "weightless"
    slo = STANDIN_SLO if args.stand_in else SLO
    common = dict(mode=mode, concurrencies=concurrencies, gpu_hour_usd=args.gpu_hour_usd,
                  out_dir=folder, retry_failed=args.retry_failed, progress=True,
                  repeats=args.repeats, slo_search=args.slo_search)  # fmt: skip
    # the recipe is every part's anchor: a c1 candidate is compared with the recipe measured in
    # its own session (runs of different sessions never decide, lab.tune.noise.apart)
    names = [tuning.RECIPE] + [s["name"] for s in cand_specs]
    for cand in names:
        if args.only and cand not in args.only:
            continue
        left = args.budget_s - (time.monotonic() - T0)
        need = candidate_budget_s(name, args)
        if args.budget_s and need > left:
            print(f"[{name}] {cand}: about {need:.0f} s, {left:.0f} s of budget left: not started "
                  "(run again with the same --out to resume)", flush=True)  # fmt: skip
            continue
        tuning.tune(
            base, loads, slo, cand_specs, only=[cand], include_recipe=True,
            remeasure=[cand] if cand in args.remeasure else [], **common,
        )  # fmt: skip
    result = save_part(base, loads, slo, cand_specs, folder, common)
    print(f"[{name}] {time.monotonic() - start:.0f} s\n{result.summary()}", flush=True)
    print(
        result.candidates[["candidate", "status", "points", "of", "reason"]].to_string(), flush=True
    )
    return result


def co_tenant_order(names: list[str], only: list[str] | None) -> list[str]:
    """The candidates a co-tenant run starts, in order: the recipe first (every ratio's
    anchor), then ``only``'s order (its priority when the budget ends), else ``names``'."""
    rest = [n for n in (only if only is not None else names) if n in names and n != tuning.RECIPE]
    return ([tuning.RECIPE] if only is None or tuning.RECIPE in only else []) + rest


def co_tenant_waves(
    names: list[str], specs_by_name: dict[str, dict], slots: int
) -> list[list[str]]:
    """``names`` in order, packed into waves of at most ``slots`` servers started together (a
    slot: one NVFP4 server's share of the GPU; a BF16 candidate, ``variant: bf16`` in
    ``specs_by_name``, takes two), each into the first wave with room: on an 80 GB H100 (2
    slots) ``recipe, bf16-fp8, mtp-k1`` is two waves, ``[recipe, mtp-k1]`` then ``[bf16-fp8]``
    (in order, three: a cold start of about 350 s more)."""
    waves: list[list[str]] = []
    used: list[int] = []
    for name in names:
        need = 2 if specs_by_name.get(name, {}).get("variant") == "bf16" else 1
        i = next((k for k, u in enumerate(used) if u + need <= slots), len(waves))
        if i == len(waves):
            waves.append([])
            used.append(0)
        waves[i].append(name)
        used[i] += need
    return waves


def measure_in_rounds(names, rounds, measure, left, keep_s) -> dict[str, tuple[list, str]]:
    """Run ``measure(name, key)`` round by round, every name in turn within a round: with
    ``rounds`` ``[(1, s), (2, s), ..., ("search", s)]`` round k takes every name's k-th run, so
    co-tenants are measured through the same minutes (drift falls on both sides) and a budget
    cut leaves each with as many runs as the others (a pair to compare; run one after another,
    the 2026-12-06 H200 session measured the recipe 6 times and left DSpark none). A round
    ``(key, s)`` starts only when ``s`` (seconds, one name's step) times the names still
    measured, plus ``keep_s``, fits in ``left()`` (seconds).

    Returns:
        ``{name: (the keys of the rounds it completed, why it stopped)}``: why is ``""`` after
        every round, ``"k of N rounds: S s of budget left"`` at a cut, ``"tune: Error: ..."``
        when its ``measure`` raised (that name sits out the later rounds; the others go on)."""
    keys: dict[str, list] = {n: [] for n in names}
    why = dict.fromkeys(names, "")
    active = list(names)
    for i, (key, step_s) in enumerate(rounds):
        if not active:
            break
        if left() < step_s * len(active) + keep_s:
            why.update(dict.fromkeys(active, f"{i} of {len(rounds)} rounds: {left():.0f} s of budget left"))  # fmt: skip
            break
        for n in list(active):
            try:
                measure(n, key)
                keys[n].append(key)
            except Exception as e:  # noqa: BLE001 - recorded; the others go on
                why[n] = f"tune: {type(e).__name__}: {e}"[:2000]
                active.remove(n)
    return {n: (keys[n], why[n]) for n in names}


def co_tenant_rounds(
    loads, repeats: int, slo_search: int, run_s: float, search_s: float
) -> list[tuple]:
    """The rounds :func:`measure_in_rounds` takes: ``(k, run_s)`` for runs 1..``repeats``, then
    ``("search", search_s)`` when ``slo_search`` probes are asked for and some workload of
    ``loads`` has two or more concurrencies. A search bisects between a concurrency that meets
    the SLO and one that misses it (:func:`lab.tune.slo.next_probe`): with one concurrency a
    workload (``--points agent:16``) it has nothing to bisect, so its round would only hold
    budget back."""
    searchable = slo_search and any(len(w.concurrencies) > 1 for w in loads)
    return [(k, run_s) for k in range(1, repeats + 1)] + (
        [("search", search_s)] if searchable else []
    )


def run_co_tenant(base, cand_specs, loads, folder, args) -> tuning.TuneResult:
    """The part's candidates in co-tenant waves (:data:`CO_TENANT_SLOTS`), measured by
    ``lab.tune.tune`` on their attached servers in rounds of one run each
    (:func:`measure_in_rounds`; the SLO search in the last); the recipe heads the first wave.
    Writes ``folder/co-tenant.json``: each server's command as started (the co-tenant flags
    beside the candidate's), its ready time (s) or error, and what was skipped for the budget
    (``args.budget_s``, device seconds from the script's start).

    Returns:
        The :class:`lab.tune.tune.TuneResult` of every candidate measured into ``folder`` (this
        run's and an earlier one's), saved with its plots.

    A candidate whose config, start or measurement fails is recorded and skipped; every server
    of a wave is stopped before the next wave starts, also on an interrupt."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "drafting_h200", Path(__file__).with_name("drafting_h200.py")
    )
    co = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(co)
    co.STAND_IN = args.stand_in
    if args.stand_in:  # a 24 GiB CI-sized host: the stand-in servers are small
        co.HOST_FLOOR_GIB = 2
    mode = "stand_in" if args.stand_in else "weightless"
    slo = STANDIN_SLO if args.stand_in else SLO
    common = dict(mode=mode, gpu_hour_usd=args.gpu_hour_usd, out_dir=folder, progress=True,
                  repeats=args.repeats, slo_search=args.slo_search)  # fmt: skip
    cands = {c.name: c for c in tuning.make_candidates(base, cand_specs)}
    by_name = {s["name"]: s for s in cand_specs}
    names = co_tenant_order(list(cands), args.only)
    slots = 2 if args.stand_in else (args.slots or gpu_slots())
    points = sum(len(w.concurrencies) for w in loads)  # CO_TENANT_MEASURE_S is for 3 points
    start_s, measure_s = ((0.0, 0.0) if args.stand_in else
                          (CO_TENANT_START_S, CO_TENANT_MEASURE_S * max(args.repeats, 1) / 3 * points / 3))  # fmt: skip
    left = lambda: (args.budget_s - (time.monotonic() - T0)) if args.budget_s else float("inf")  # noqa: E731
    folder.mkdir(parents=True, exist_ok=True)
    record: dict = {"slots": slots, "co_tenant_flags": {} if args.stand_in else co.CO_TENANT, "env": co.CO_TENANT_ENV,
                    "concurrencies": {w.name: list(w.concurrencies) for w in loads}, "waves": []}  # fmt: skip
    save = lambda: (folder / "co-tenant.json").write_text(json.dumps(record, indent=1) + "\n")  # noqa: E731
    keep_s = 0 if args.stand_in else CO_TENANT_COLLECT_S
    run_s = measure_s / args.repeats  # one run of a candidate's points (the search's share in it)
    search_s = 0 if args.stand_in else SEARCH_PROBE_S * args.slo_search * len(loads)
    rounds = co_tenant_rounds(loads, args.repeats, args.slo_search, run_s, search_s)
    for wave in co_tenant_waves(names, by_name, slots):
        need = start_s + len(wave) * run_s + keep_s  # its cold start and one run of each
        if left() < need:
            record.setdefault("skipped", []).append(
                f"wave {wave}: {left():.0f} s left, a wave needs about {need:.0f}"
            )
            save()
            continue
        wave_record: dict = {}
        record["waves"].append(wave_record)
        configs = {}
        for n in wave:
            try:
                cfg = cands[n].served(mode)
            except Exception as e:  # noqa: BLE001 - recorded; the wave goes on without it
                wave_record[n] = {"error": f"config: {e}"[:2000]}
                continue
            configs[n] = (
                cfg if args.stand_in else cfg.with_args(dict(co.CO_TENANT), **co.CO_TENANT_ENV)
            )
        servers: dict = {}
        try:
            servers = co.start_co_tenants(configs, time.time() + left() - 60, wave_record)
            save()

            def measure(n: str, key, servers=servers, wave_record=wave_record) -> None:
                # run `key` of candidate n, or the SLO search (it reads the first runs only)
                t = time.monotonic()
                steps = {"repeats": args.repeats, "slo_search": args.slo_search} if key == "search" else {
                    "repeats": key, "slo_search": 0}  # fmt: skip
                try:
                    tuning.tune(base, loads, slo, cand_specs, only=[n], include_recipe=True,
                                servers={n: servers[n].base_url.removesuffix("/v1")}, **{**common, **steps})  # fmt: skip
                finally:
                    wave_record[n]["measured_s"] = wave_record[n].get("measured_s", 0) + round(time.monotonic() - t)  # fmt: skip
                    save()

            # "rounds": the runs tune() was asked for; the points say what saved
            for n, (keys, why) in measure_in_rounds(list(servers), rounds, measure, left, keep_s).items():  # fmt: skip
                wave_record[n]["rounds"] = keys
                if why:
                    wave_record[n]["error" if why.startswith("tune: ") else "measured"] = why
            save()
        finally:
            for srv in servers.values():
                srv.stop()
            save()
    result = save_part(base, loads, slo, cand_specs, folder, common)
    print(f"[co-tenant]\n{result.summary()}", flush=True)
    return result


def runs_needed_line(args, grid, c1, drafting, loads) -> str:
    """What ``--repeats`` can decide, in one line: per goal this call's candidates join, the
    configurations its choice is then made from (committed ones included,
    ``tools.tune_pages.runs_needed``) and the runs a win needs. Fewer repeats make the call a
    screen: its best is confirmed later beside the recipe with that many runs (a confirmation
    replaces the screen).

    Args:
        args: this script's parsed arguments (``--no-grid``, ``--c1``, ``--drafting``,
            ``--co-tenant``, ``--only``, ``--repeats``, and ``--points`` as
            :func:`co_tenant_points` made it).
        grid, c1, drafting: the parts' candidate specs (dicts with ``name``).
        loads: the grid's workloads (``lab.tune.tune.workloads``).
    """
    planned: dict[str, tuple[set[int], list[str]]] = {}
    draft_at = args.points if args.co_tenant else {
        w.name: list(w.concurrencies) for w in tuning.workloads(DRAFTING_LOADS)}  # fmt: skip
    parts = [(not args.no_grid, grid, {w.name: list(w.concurrencies) for w in loads}),
             (args.c1, c1, {"tune-1k": [1]}), (args.drafting, drafting, draft_at)]  # fmt: skip
    for on, specs_, at in parts:
        picked = [s["name"] for s in specs_ if on and s["name"] != tuning.RECIPE
                  and (args.only is None or s["name"] in args.only)]  # fmt: skip
        for w, cs in at.items() if picked else ():
            if not cs:  # left out (--points agent:none)
                continue
            planned.setdefault(w, (set(), []))[0].update(cs)
            planned[w][1].extend(picked)
    need = runs_needed({w: (sorted(cs), names) for w, (cs, names) in planned.items()})
    if not need:
        return "runs a win needs: nothing to compare (no candidate beside the recipe)"
    said = "; ".join(f"{g}: {n} configurations, {r} runs" for g, n, r in need)
    short = [g for g, _, r in need if r > args.repeats]
    verdict = (f"--repeats {args.repeats} is a screen for {', '.join(short)}: confirm its best "
               "beside the recipe with the runs named" if short else f"--repeats {args.repeats} can show a win")  # fmt: skip
    return f"runs a win needs (5 % over the configurations screened, committed ones included): {said}; {verdict}"


def dry_run(base, grid, c1, drafting=()) -> None:
    """Print each candidate's command and check it against its release's flag table (and the
    installed vLLM's parser where it is that release)."""
    installed = installed_vllm_version()
    for part, cand_specs in (("grid", grid), ("c1", c1), ("drafting", list(drafting))):
        for c in tuning.make_candidates(base, cand_specs, include_recipe=part == "grid"):
            check_config(c.config, quiet=True)
            parsed = tuning._same_release(c.config.vllm_version, installed)
            if parsed:
                c.config.validate()
            routing = "; uniform routing" if uniform_routing(c.config.shell_command()) else ""
            print(f"[{part}] {c.name}: {tuning.changes(c.config, base) or '(the recipe)'}; flags ok "
                  f"(table {c.config.vllm_version}{', parser ' + str(installed) if parsed else ''})"
                  f"{routing}")  # fmt: skip


def main(argv=None) -> int:
    global T0
    T0 = time.monotonic()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # resolved here: a shell's relative DIR is from its folder (tune() puts a relative one under out/)
    p.add_argument("--out", type=lambda s: Path(s).resolve(), default=REPO / "out" / "tune-h200")
    p.add_argument("--budget-s", type=float, default=0, help="device seconds left (0: no limit)")
    p.add_argument("--c1", action="store_true", help="also the concurrency-1 decode candidates")
    p.add_argument(
        "--drafting",
        action="store_true",
        help="also drafting (MTP K 1/3/7, DFlash, DSpark) and BF16 + online FP8 on tune-1k and agent",
    )
    p.add_argument(
        "--co-tenant",
        action="store_true",
        help="the drafting part's servers started together on the one GPU (4 GiB KV cache "
        "each), measured one at a time: tune-1k at c=1, agent at 4 and 16",
    )
    p.add_argument("--no-grid", action="store_true", help="skip the grid (e.g. --c1 only)")
    p.add_argument("--releases", nargs="*", default=[], help="more vLLM releases, e.g. 0.28.0")
    p.add_argument("--only", nargs="*", default=None, help="candidate names to run now")
    p.add_argument(
        "--slots",
        type=int,
        default=None,
        help="--co-tenant: servers a wave (default: as many as the GPU's memory holds, "
        f"{CO_TENANT_SLOT_GIB} GiB each, at most {CO_TENANT_SLOTS})",
    )
    p.add_argument(
        "--remeasure",
        nargs="*",
        default=[],
        help="candidates whose saved points are measured again now, beside the others of this "
        "session (one host, one day: e.g. the recipe, measured on another day)",
    )
    p.add_argument(
        "--candidate-s",
        type=float,
        default=None,
        help="seconds budgeted per candidate (default: CANDIDATE_S, 900 grid, 320 c1)",
    )
    p.add_argument(
        "--c1-candidate-s",
        type=float,
        default=None,
        help="seconds budgeted per c1 candidate when it differs from --candidate-s (a batch "
        "that re-measures grid candidates and then fills its last minutes with c1 ones)",
    )
    p.add_argument("--gpu-hour-usd", type=float, default=3.5, help="example price per GPU hour")
    p.add_argument("--repeats", type=int, default=3, help="runs of each decision point")
    p.add_argument(
        "--slo-search", type=int, default=2, help="bisection points of the SLO limit (0: none)"
    )
    p.add_argument(
        "--routing",
        choices=("as-loaded", "uniform"),
        default="uniform",
        help="uniform (the weightless default since 2026-12-05): every server (the recipe too) "
        "routes MoE tokens with vLLM's uniform routing simulation (many experts a step, as a "
        "trained router's; the dummy weights' own send a step to 6); as-loaded: the dummy "
        "weights' own routing; each saved command exports which",
    )
    p.add_argument(
        "--points",
        nargs="*",
        default=None,
        help="--co-tenant: WORKLOAD:C[,C] replacing a workload's concurrencies (default "
        f"{CO_TENANT_CONCURRENCIES}), e.g. agent:16 when the session is short of device time",
    )
    p.add_argument("--retry-failed", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="print and check the plan only")
    p.add_argument("--stand-in", action="store_true", help="rehearse on the CPU stand-in")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(
            f"--repeats {args.repeats}: 1 or more (runs of each decision point; 3 is vLLM's sweep default)"
        )
    if args.co_tenant and not args.drafting:
        p.error("--co-tenant serves the drafting part's candidates together: pass --drafting too")
    args.points = co_tenant_points(args.points)  # {workload: concurrencies}; a bad one stops here
    base = resolve("h200")
    grid = specs(GRID, releases=args.releases, stand_in=args.stand_in)
    c1 = specs(C1_CANDIDATES, base_moe="marlin", stand_in=args.stand_in)
    drafting = specs(DRAFTING_CANDIDATES, stand_in=args.stand_in)
    if args.stand_in:  # the CPU build drafts none of these: the stand-in plays the recipe
        drafting = [{**d, "standin_args": {}} for d in drafting[:2]]
    # the recipe is base itself; a candidate resolved anew: its spec
    routing = UNIFORM_ROUTING_ENV if args.routing == "uniform" else AS_LOADED_ENV
    base = base.with_args({}, **routing)
    grid, c1, drafting = ([{**s, "env": {**s.get("env", {}), **routing}} for s in part]
                          for part in (grid, c1, drafting))  # fmt: skip
    if args.stand_in:
        tiny = {"input_len": 16, "output_len": 8, "concurrencies": [1, 2], "num_prompts": 4}
        loads = [{"name": "tune-1k", **tiny}, {"name": "tune-8k", **tiny, "input_len": 64}]
        c1 = c1[:2]  # the stand-in plays none of the GPU flags: two prove the part's flow
    else:
        loads = ["tune-1k", "tune-8k"]
    loads = tuning.workloads(loads)
    known = {tuning.RECIPE, *(s["name"] for s in grid + c1 + drafting)}
    if set(args.remeasure) - known or set(args.remeasure) - set(args.only or known):
        p.error(f"--remeasure {' '.join(args.remeasure)}: name candidates of this run "
                f"({', '.join(sorted(known))}), each also in --only when --only is given")  # fmt: skip
    if args.dry_run:
        dry_run(base, grid, c1, drafting)
        if args.drafting and args.co_tenant:
            names = co_tenant_order([tuning.RECIPE, *(d["name"] for d in drafting)], args.only)
            slots = args.slots or CO_TENANT_SLOTS
            waves = co_tenant_waves(names, {d["name"]: d for d in drafting}, slots)
            print(f"co-tenant waves of {slots} slots (--slots; on a GPU, as many as its memory holds: "
                  f"{co_tenant_slots(79.6)} on an H100 80GB): {waves}; concurrencies {args.points}; about "
                  f"{CO_TENANT_START_S:.0f} s of cold starts a wave and {CO_TENANT_MEASURE_S:.0f} s "
                  "a candidate")  # fmt: skip
        # what this call would run: --no-grid, --c1 and --only as given (the recipe heads each part)
        picked = lambda names: [n for n in names if args.only is None or n in args.only]  # noqa: E731
        recipe = [tuning.RECIPE]
        n_grid = 0 if args.no_grid else len(picked(recipe + [s["name"] for s in grid]))
        n_c1 = len(picked(recipe + [s["name"] for s in c1])) if args.c1 else 0
        n_draft = len(picked(recipe + [s["name"] for s in drafting])) if args.drafting else 0
        bound = n_grid * estimate_s(loads) + n_c1 * estimate_s(loads[:1], [1])
        budgeted = n_grid * candidate_budget_s("grid", args) + n_c1 * candidate_budget_s("c1", args)
        budgeted += n_draft * candidate_budget_s("drafting", args)
        if n_draft:
            bound += n_draft * estimate_s(tuning.workloads(DRAFTING_LOADS))
        print(f"{n_grid} grid + {n_c1} c1 + {n_draft} drafting candidates: about {budgeted / 60:.0f} min of "
              f"device time as budgeted per candidate, at most {bound / 60:.0f} min by the scenario model")  # fmt: skip
        print(runs_needed_line(args, grid, c1, drafting, loads))
        return 0
    print(
        f"vLLM {installed_vllm_version()}; out: {args.out}; budget: {args.budget_s or 'none'} s",
        flush=True,
    )
    print(runs_needed_line(args, grid, c1, drafting, loads), flush=True)
    if not args.no_grid:
        run_part("grid", base, grid, loads, args.out / "grid", args)
    if args.c1:
        run_part("c1", base, c1, loads[:1], args.out / "c1", args, concurrencies=[1])
    if args.drafting and args.co_tenant:
        if args.stand_in:  # the agent workload scaled to the stand-in (attached, as on the GPU)
            from helpers.config.run import Run

            draft_loads = loads[:1] + tuning.workloads("agent", run=Run("stand_in", target=base))
            draft_loads = [dataclasses.replace(w, concurrencies=(1, 2)) for w in draft_loads
                           if args.points[w.name]]  # fmt: skip
        else:
            draft_loads = [dataclasses.replace(w, concurrencies=tuple(args.points[w.name]))
                           for w in tuning.workloads([n for n in DRAFTING_LOADS if args.points[n]])]  # fmt: skip
        run_co_tenant(base, drafting, draft_loads, args.out / "drafting", args)
    elif args.drafting:
        draft_loads = loads[:1] if args.stand_in else tuning.workloads(DRAFTING_LOADS)
        run_part("drafting", base, drafting, draft_loads, args.out / "drafting", args)
    (args.out / "done.json").write_text(
        json.dumps({"seconds": round(time.monotonic() - T0)}) + "\n"
    )
    return 0


T0 = 0.0

if __name__ == "__main__":
    sys.exit(main())
