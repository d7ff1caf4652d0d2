"""What serving LoRA adapters costs on one GPU, weightless, in one device session.

The measurement ``notebooks/adapters.ipynb`` cannot make on the CPU: output tok/s and TPOT of
the h200 target's command (NVFP4) with 0, 1 and 4 adapters active at concurrency 1, 16 and 64,
against the same command without ``--enable-lora``, at adapter ranks 8 and 32; and the GPU
memory the LoRA slots take (vLLM's own "Model loading took X GiB" of each server, beside
:func:`lab.adapters.check.lora_buffers`'s count of vLLM's slots).

No Lightning adapter is published, and the architecture is served with random weights
(``helpers.weights.weightless``), so each adapter is one of the real shapes with random
weights (:func:`lab.adapters.synthetic.random_adapter`: attention, Mamba ``in_proj`` /
``out_proj``, MLP and shared-expert projections; the routed experts are left out). The speed is
a real adapter's at that rank; the text is noise. Every server routes its MoE tokens uniformly
(:data:`tools.weightless_routing.UNIFORM_ROUTING_ENV`, as every weightless server since
2026-12-05): dummy weights' own routing sends every token to the same few experts.

**Co-tenant waves of two** (:data:`WAVES`), the co-tenancy of ``drafting_h200.py``: a cold
start takes 200-280 s and a session has 30 minutes, so each wave starts its two servers
together on the one GPU (an H100 80 GB holds two), staggered, each with
``--gpu-memory-utilization 0.2 --kv-cache-memory-bytes`` 4 GiB and
``TORCHINDUCTOR_COMPILE_THREADS=2`` (``drafting_h200.CO_TENANT`` / ``CO_TENANT_ENV``, started by
``drafting_h200.start_co_tenants``), then **measures them one server at a time while the other
idles**. Wave 1: ``base`` (the target's command) and ``base-marlin``; wave 2: ``lora-r8`` and
``lora-r32`` (the same plus ``--enable-lora --max-loras 4 --max-lora-rank R --lora-modules
a1=... a4=...``, the four adapters of rank R). What differs from a server alone on the GPU is
the KV cache (4 GiB: room for 64 requests of 1,280 tokens, not the recipe's c=256) and an idle
neighbour's memory.

Points on each LoRA server (:data:`ACTIVE`): ``model=`` the base (0 adapters active), every
request to ``a1`` (1), requests spread round-robin over ``a1``..``a4`` (4: vLLM 0.32.0
``vllm bench serve --lora-modules a1 a2 a3 a4 --lora-assignment round-robin``,
``vllm/benchmarks/serve.py``); each point is 3 runs with fresh seeds
(:func:`lab.bench.repeats.repeat_point`; the same prompts on every server), 1024 tokens in, 256
out, :func:`Shape.num_prompts` requests. The order of the points (:func:`point_order`) puts the
most informative first, so that a run cut by ``--deadline`` keeps them.

How to read the numbers (vLLM 0.32.0, read in its source): the adapters leave the routed
experts out, so vLLM marks them off for the MoE layers (``adapter_enabled`` 0,
``lora/layers/fused_moe.py``) and the MoE LoRA kernels return at once: the cost measured is the
attention, Mamba, MLP and shared-expert projections' LoRA, while the slots of the experts are
still allocated (6.4 of the 6.7 GiB at rank 32). A request without an adapter runs the CUDA
graphs captured without LoRA (``cudagraph_specialize_lora``, on by default), so the 0-active
points measure ``--enable-lora`` with its kernels skipped; 1 and 4 active both run the graphs
captured for all slots (``lora/utils.py``, ``specialize_active_lora`` off), so the graphs are
the same; measured on an H100 (2026-12-06, ``docs/results/h100/lora-2026-12-06/``) four active
ran 0.93x-0.99x of one, three of six points apart: mixing adapters in a batch costs a little
beyond the graphs. Wave 2 fitted an H100 80 GB (75.1 GiB of the card in use at the peak, both LoRA
servers up); a server that does not fit is recorded with vLLM's error and its log, and the
other is measured.

Read in vLLM 0.32.0 before the device minutes are spent: with ``--enable-lora`` every MoE
layer is built for LoRA and an NVFP4 MoE kernel that takes none is refused at start ("NvFp4 MoE
backend 'HUMMING' does not support the deployment configuration since kernel does not support
LoRA", ``oracle/nvfp4.py``); Marlin's experts take LoRA. So each LoRA server runs the Marlin MoE
kernel (:func:`lab.adapters.check.moe_lora_flags`, what the adapters notebook adds too), and
``base-marlin`` (the recipe with Marlin, no LoRA) sits beside ``base``: LoRA's cost is read
against ``base-marlin``, the kernel's against ``base``. A refused start is recorded with vLLM's
error; ``--variant bf16`` measures the BF16 command (Triton's experts take LoRA).

Usage, on the device after ``. tools/device/env.sh`` (the session's calls: ``h200_drafting.sh
start LAST BUDGET_S lora``, tools/device/README.md)::

    python3 tools/device/lora_overhead_h200.py --out /tmp/runs/draft/out --deadline EPOCH_S
    python3 tools/device/lora_overhead_h200.py --dry-run      # every command, checked, no GPU
    python3 tools/device/lora_overhead_h200.py --stand-in --out /tmp/lora-rehearsal \\
        --deadline $(( $(date +%s) + 600 ))                  # the control flow on the CPU

Writes under ``--out``: ``<server>/`` (its ``vllm.log``, ``command.sh``, one folder of runs per
point), ``summary.json`` (rewritten after every point: what was measured, skipped and why, ready
times, memory), ``host.log`` on the GPU. ``python -m tools.lora_pages OUT`` makes the table.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from helpers.config.flagtable import check_config
from helpers.config.resolve import resolve
from helpers.weights import weightless
from lab.adapters.check import lora_buffers, moe_lora_flags
from lab.adapters.spec import load_adapters
from lab.adapters.synthetic import random_adapter
from tools.weightless_routing import UNIFORM_ROUTING_ENV


def _drafting_h200():
    """``drafting_h200.py``'s module (its co-tenancy: ``start_co_tenants``, ``CO_TENANT``,
    ``CO_TENANT_ENV``, ``STAGGER_S``, ``HOST_FLOOR_GIB``), loaded from its file as
    ``tune_h200.py`` does (tools/device is no package); one instance per process."""
    spec = importlib.util.spec_from_file_location(
        "drafting_h200", Path(__file__).with_name("drafting_h200.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


co = _drafting_h200()

TARGET = "h200"
#: Adapter ranks measured (NVIDIA's Lightning LoRA notebook serves --max-lora-rank 32).
RANKS = (8, 32)
#: Adapters loaded on a LoRA server: the registry's GPU --max-loras (cookbook/adapters.yaml).
ADAPTERS = 4
#: Adapters active per point: 0 (the base's name), 1 (all to a1), 4 (round-robin a1..a4).
ACTIVE = (0, 1, 4)
#: The co-tenant waves, each started together and measured one server at a time.
WAVES = (("base", "base-marlin"), tuple(f"lora-r{r}" for r in RANKS))
SERVERS = tuple(name for wave in WAVES for name in wave)
#: ``repeat_point``'s base seed, and the name hashed into a point's seed instead of its label
#: (with ``-active<k>``): every server gets the same prompts at an adapter count, concurrency and
#: run (paired comparisons), and one server's points with other adapter counts get others, so no
#: request of a point is served from another point's prefix cache (the recipe caches prefixes;
#: vLLM keys a cached block by its adapter too, so a1's requests of the round-robin point would
#: otherwise seed the one-adapter point's cache).
SEED, SEED_LABEL = 1000, "lora-overhead"
#: Seconds kept free before the deadline for stopping the servers and the last summary.
STOP_S = 30


class Shape(NamedTuple):
    """The points' shape: ``concurrencies``, ``runs`` per point, tokens in and out, and the
    time estimate's figures (seconds): ``wave_start_s`` (a wave of two, from the first start to
    both ready), ``lora_start_s`` (the same for a wave of LoRA servers), ``run_s`` (one run on a server without LoRA, by concurrency, warm-up and
    overheads included), ``lora_factor`` (a LoRA server's runs over that)."""

    concurrencies: tuple[int, ...]
    runs: int
    input_len: int
    output_len: int
    wave_start_s: float
    run_s: dict[int, float]
    lora_factor: float
    lora_start_s: float

    def start_s(self, names) -> float:
        """The start estimate (s) of a wave of servers ``names``: :attr:`lora_start_s` when one
        of them serves adapters."""
        lora = any(str(n).startswith("lora-") for n in names)
        return self.lora_start_s if lora else self.wave_start_s

    def num_prompts(self, concurrency: int) -> int:
        """Requests of one run: two full rounds of ``concurrency`` requests, at least 8 (one
        request at a time needs several for its median TPOT)."""
        return max(8, 2 * int(concurrency))

    def point_s(self, server: str, concurrency: int) -> float:
        """Estimated seconds of one point (all its runs) on ``server``."""
        factor = self.lora_factor if server.startswith("lora-") else 1.0
        return self.runs * self.run_s[concurrency] * factor


# How the device estimate is made: from this run's own session on one H100, 2026-12-06
# (docs/results/h100/lora-2026-12-06/summary.json). Wave 1 was ready 266 s after its start (a
# cold wave of two and the 20 s stagger; 196-283 s in earlier H100 / H200 sessions), wave 2
# 163 s (each LoRA server compiles afresh, but wave 1 had built FlashInfer's kernels); a run of
# the plain servers took 11.8 s at c=1 (8 requests), 7.5 s at 16 (32), 11.7 s at 64 (128),
# warm-up and /metrics included, and the LoRA servers' 1.13x that. Rounded up: 270 s, 170 s,
# 1.15x. Wave 1: 270 + 2 x 3 x 31.0 = 456 s; wave 2: 170 + 3 x 2 x 3 x 35.6 = 811 s; about
# 1,270 s in all (the session's took 1,252), so B of about 1,300 measures every point; short
# of that, the last points (point_order) are skipped.
DEVICE = Shape(concurrencies=(1, 16, 64), runs=3, input_len=1024, output_len=256,
               wave_start_s=270, run_s={1: 11.8, 16: 7.5, 64: 11.7}, lora_factor=1.15,
               lora_start_s=170)  # fmt: skip
#: ``--stand-in``: small points on the CPU stand-in (its --max-num-seqs is 4), 2 runs each.
STAND_IN = Shape(concurrencies=(1, 2), runs=2, input_len=256, output_len=16,
                 wave_start_s=60, run_s={1: 4.0, 2: 4.0}, lora_factor=1.0, lora_start_s=60)  # fmt: skip


def adapter_names() -> list[str]:
    """The served names of one LoRA server's adapters: ``a1`` .. ``a4``."""
    return [f"a{i + 1}" for i in range(ADAPTERS)]


def server_config(name: str, base: Path, adapters_dir: Path, variant: str, *, stand_in=False):
    """The ServeConfig of server ``name`` (one of :data:`SERVERS`) as a co-tenant.

    The h200 target's command on the weightless architecture ``base`` (or, with ``stand_in``,
    the CPU stand-in config of the stand-in folder ``base``), plus the LoRA flags for
    ``lora-r<R>`` (``cookbook/adapters.yaml`` ``serve.gpu`` / ``serve.standin`` with
    ``--max-lora-rank R`` and ``--max-loras`` :data:`ADAPTERS`, the adapters under
    ``adapters_dir/r<R>/``), ``drafting_h200.CO_TENANT``'s flags (not on the stand-in: the CPU
    build sizes its cache by ``VLLM_CPU_KVCACHE_SPACE``), ``CO_TENANT_ENV`` and uniform routing.

    Raises:
        ValueError: ``name`` is not one of :data:`SERVERS`.
    """
    if name not in SERVERS:
        raise ValueError(f"no server {name!r}: one of {SERVERS}")
    if stand_in:
        from helpers.config.resolve import standin_config

        cfg = standin_config(resolve(TARGET, variant), base)
    else:
        cfg = weightless.arch_config(resolve(TARGET, variant), base)
    if name == "base-marlin":  # the LoRA servers' MoE kernel, without LoRA
        cfg = cfg.with_args(moe_lora_flags(cfg.args)[0])
    elif name.startswith("lora-r"):
        rank = int(name.removeprefix("lora-r"))
        flags = dict(load_adapters().serve["standin" if stand_in else "gpu"])
        flags.update({"--max-lora-rank": rank, "--max-loras": ADAPTERS})
        flags["--lora-modules"] = [f"{a}={adapters_dir / f'r{rank}' / a}" for a in adapter_names()]
        flags.update(moe_lora_flags({**cfg.args, **flags})[0])  # Humming takes no LoRA: Marlin
        cfg = cfg.with_args(flags)
    return cfg.with_args({} if stand_in else dict(co.CO_TENANT), **co.CO_TENANT_ENV,
                         **UNIFORM_ROUTING_ENV)  # fmt: skip


def bench_args(active: int) -> tuple[str | None, list[str]]:
    """``(model, extra vllm bench serve flags)`` of a point with ``active`` adapters:
    ``(None, [])`` for the base's name, ``("a1", [])`` for one, the round-robin flags for 4."""
    if active == 0:
        return None, []
    if active == 1:
        return "a1", []
    return "a1", ["--lora-modules", *adapter_names()[:active], "--lora-assignment", "round-robin"]


def point_order(wave: tuple[str, ...], shape: Shape) -> list[dict]:
    """The points of ``wave``'s servers in the order they are measured: ``[{"server",
    "active", "concurrency", "model", "extra", "num_prompts", "runs", "estimate_s"}]``.

    The two servers alternate point by point (both are up; one is measured while the other
    idles), so a cut run keeps pairs. Wave 1 goes by concurrency, ``base-marlin`` before
    ``base`` (it anchors every LoRA ratio; ``base`` only gives the kernel's cost). Wave 2 goes by
    adapters active, then concurrency: 4 active first (all :data:`ADAPTERS` slots in use, the
    deployment the registry serves and the largest cost), then 0 (``--enable-lora`` alone: tells
    whether the cost is in enabling LoRA or in the adapters), then 1 (expected between the two,
    so the least informative: the one a short session drops).
    """
    servers = sorted(wave, key=lambda s: s != "base-marlin")
    lora = all(s.startswith("lora-") for s in wave)
    keys = [(a, c) for a in (4, 0, 1) for c in shape.concurrencies] if lora else [
        (0, c) for c in shape.concurrencies]  # fmt: skip
    return [
        {"server": s, "active": a, "concurrency": c, "model": bench_args(a)[0],
         "extra": bench_args(a)[1], "num_prompts": shape.num_prompts(c), "runs": shape.runs,
         "estimate_s": round(shape.point_s(s, c), 1)}
        for a, c in keys for s in servers
    ]  # fmt: skip


def plan(base: Path, adapters_dir: Path, variant: str, shape: Shape = DEVICE, *, stand_in=False):
    """Every wave with its servers' commands and points, each command checked against vLLM
    0.32.0's flag table (:func:`helpers.config.flagtable.check_config`).

    Returns:
        ``[{"wave": i, "servers": [{"server", "command", "config", "lora_buffers_gib",
        "lora_buffers"}], "points": point_order(...), "estimate_s"}]``; ``lora_buffers*``
        (what the slots should take, :func:`lab.adapters.check.lora_buffers`) on LoRA servers.

    Raises:
        helpers.errors.RecipeError: a command vLLM 0.32.0 would refuse (check_config's).
    """
    config = json.loads((base / "config.json").read_text())
    waves = []
    for i, names in enumerate(WAVES, 1):
        servers = []
        for name in names:
            cfg = server_config(name, base, adapters_dir, variant, stand_in=stand_in)
            check_config(cfg, quiet=True)
            row = {"server": name, "command": cfg.shell_command(), "config": cfg}
            if name.startswith("lora-"):  # what the slots should cost
                buffers = lora_buffers(config, ADAPTERS, int(name.removeprefix("lora-r")),
                                       target_modules=cfg.args.get("--lora-target-modules"))  # fmt: skip
                row["lora_buffers_gib"] = round(buffers.gib, 4)
                row["lora_buffers"] = buffers.line()
            servers.append(row)
        points = point_order(names, shape)
        estimate = shape.start_s(names) + sum(p["estimate_s"] for p in points)
        waves.append({"wave": i, "servers": servers, "points": points, "estimate_s": estimate})
    return waves


def estimate_line(waves: list[dict], shape: Shape) -> str:
    """The session's time estimate in one line (seconds)."""
    starts = {w["wave"]: shape.start_s(s["server"] for s in w["servers"]) for w in waves}
    parts = [
        f"wave {w['wave']} ~{starts[w['wave']]:.0f} s to start + {sum(p['runs'] for p in w['points'])} "
        f"runs ~{w['estimate_s'] - starts[w['wave']]:,.0f} s"
        for w in waves
    ]
    total = sum(w["estimate_s"] for w in waves)
    return f"time: {'; '.join(parts)}; ~{total:,.0f} s in all"


def model_memory(log: Path | None) -> dict:
    """What a server's log says of its memory, all vLLM 0.32.0 lines (None when absent):
    ``model_loading_gib`` ("Model loading took X GiB memory and Y seconds"),
    ``available_kv_gib`` ("Available KV cache memory: X GiB", vllm/v1/worker/gpu_worker.py) and
    ``kv_cache_tokens`` ("GPU KV cache size: N tokens", vllm/v1/core/kv_cache_utils.py).

    "Model loading took" is the LoRA slots' measure here: read in vLLM 0.32.0, the GPU model
    runner's ``load_model`` (``vllm/v1/worker/gpu_model_runner.py``, V1, and
    ``vllm/v1/worker/gpu/model_runner.py``, V2, the H200's) creates the LoRA model manager
    (``load_lora_model``, ``vllm/v1/worker/lora_model_runner_mixin.py`` ->
    ``LoRAModelManager.__init__`` -> ``_create_lora_modules``, ``vllm/lora/model_manager.py``,
    whose layers' ``create_lora_weights`` allocate every slot with ``torch.zeros``, and
    ``_init_punica_wrapper``'s buffers) inside the same ``DeviceMemoryProfiler`` as the weights,
    and logs its ``consumed_memory``: this process's torch allocations, so a co-tenant's do not
    enter it. A LoRA server's figure minus ``base-marlin``'s is what the slots took; not in it:
    LoRA's activation workspace and its CUDA graphs (profiled later). The CPU runner
    (``vllm/v1/worker/cpu_model_runner.py``) logs no such line: None on the stand-in. With a
    fixed KV cache (``--kv-cache-memory-bytes``) the KV lines no longer show the slots.
    """
    text = log.read_text(errors="replace") if log and log.exists() else ""

    def number(pattern: str) -> float | None:
        found = re.search(pattern, text)
        return float(found.group(1).replace(",", "")) if found else None

    tokens = number(r"KV cache size: ([\d,]+) tokens")
    return {
        "model_loading_gib": number(r"Model loading took ([\d.]+) GiB"),
        "available_kv_gib": number(r"Available KV cache memory: ([\d.]+) GiB"),
        "kv_cache_tokens": int(tokens) if tokens is not None else None,
    }


def memory_summary(servers: dict) -> dict:
    """Per LoRA server: its ``model_loading_gib``, that minus ``base-marlin``'s
    (``over_base_marlin_gib``: the slots' measured size) and ``predicted_gib``
    (:func:`lab.adapters.check.lora_buffers`); None where a figure is missing."""
    anchor = servers.get("base-marlin", {}).get("model_loading_gib")
    out = {}
    for name, rec in servers.items():
        if not name.startswith("lora-"):
            continue
        mine = rec.get("model_loading_gib")
        over = round(mine - anchor, 2) if mine is not None and anchor is not None else None
        out[name] = {"model_loading_gib": mine, "over_base_marlin_gib": over,
                     "predicted_gib": rec.get("lora_buffers_gib")}  # fmt: skip
    return out


def _measure(srv, point: dict, folder: Path, shape: Shape) -> None:
    """One point: ``point["runs"]`` runs with fresh seeds (:func:`lab.bench.repeats.repeat_point`)
    into ``folder/rep<r>/``."""
    from lab.bench.repeats import repeat_point

    repeat_point(srv, point["model"], concurrency=point["concurrency"], repeats=point["runs"],
                 out_dir=folder, label=f"{point['server']}-active{point['active']}", seed=SEED,
                 seed_label=f"{SEED_LABEL}-active{point['active']}", input_len=shape.input_len, output_len=shape.output_len,
                 num_prompts=point["num_prompts"], extra_args=point["extra"], progress=False)  # fmt: skip


def _stopper(deadline: float, clock: Callable[[], float], servers: dict, lock: threading.Lock):
    """A timer that stops ``servers`` at ``deadline`` (``clock``'s seconds) whatever runs then:
    a point that outruns its estimate fails (recorded) instead of the session's end."""

    def stop() -> None:
        with lock:
            for srv in servers.values():
                with contextlib.suppress(Exception):
                    srv.stop()

    timer = threading.Timer(max(0.0, deadline - clock()), stop)
    timer.daemon = True
    timer.start()
    return timer


def run(waves: list[dict], out: Path, deadline: float, shape: Shape, *, clock=time.time,
        start=None, measure=None, summary: dict | None = None) -> dict:  # fmt: skip
    """Each wave in turn: start its servers together (``start``, default
    ``drafting_h200.start_co_tenants``), measure its points in order (``measure``, default
    :func:`_measure`), stop them; ``summary.json`` in ``out`` rewritten after every point.

    Args:
        waves: :func:`plan`'s waves.
        out: the folder of the records.
        deadline: epoch seconds (``clock``'s) by which every server is stopped.
        shape: the points' shape (its estimates decide what fits).
        clock: seconds since the epoch (``time.time``; a test passes a fake one).
        start: ``(configs, deadline, record) -> {name: server}``, as ``start_co_tenants``.
        measure: ``(server, point, folder, shape) -> None``, raising on a failed point.
        summary: the dict to fill (default a new one).

    Returns:
        The summary: ``servers`` (command, ready_s or error, memory), ``waves`` (started or
        skipped and why), ``points`` (each ``status``: ``measured``, ``skipped: ...`` or
        ``error: ...``, its ``folder`` and ``seconds``), ``memory`` (:func:`memory_summary`).
        A wave that cannot fit (its start and first point) is not started; a point that cannot
        fit is skipped, not started.

    Raises:
        Nothing for a server's or a point's failure (recorded in the summary); an interrupt
        stops the wave's servers, writes the summary and propagates.
    """
    start = start or co.start_co_tenants
    measure = measure or _measure
    summary = summary if summary is not None else {}
    summary.setdefault("servers", {})
    summary.setdefault("waves", [])
    summary.setdefault("points", [])
    out.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")

    for wave in waves:
        names = [s["server"] for s in wave["servers"]]
        record = {"wave": wave["wave"], "servers": names}
        summary["waves"].append(record)
        for s in wave["servers"]:
            (out / s["server"]).mkdir(parents=True, exist_ok=True)
            (out / s["server"] / "command.sh").write_text(s["command"] + "\n")
            summary["servers"][s["server"]] = {"wave": wave["wave"], "command": s["command"],
                                               **{k: s[k] for k in ("lora_buffers_gib", "lora_buffers") if k in s}}  # fmt: skip
        points = [dict(p) for p in wave["points"]]  # with its estimate, to set beside its seconds
        summary["points"].extend(points)
        left = deadline - clock()
        need = shape.start_s(names) + wave["points"][0]["estimate_s"] + STOP_S
        if left < need:
            record["status"] = f"skipped: {left:.0f} s left, a wave needs about {need:.0f}"
            for p in points:
                p["status"] = "skipped: its wave was not started"
            save()
            continue
        record["status"] = "started"
        t0 = clock()
        configs = {s["server"]: s["config"] for s in wave["servers"]}
        lock = threading.Lock()
        servers: dict = {}
        timer = None
        try:
            try:
                servers = start(configs, deadline, summary["servers"])
            except Exception as e:  # noqa: BLE001 - the next wave may still start
                record["status"] = f"error: start: {type(e).__name__}: {e}"[:2000]
                for p in points:
                    p["status"] = "skipped: its wave's start failed"
                traceback.print_exc()
                continue  # the finally below keeps the logs and saves
            record["start_s"] = round(clock() - t0)
            if not servers:
                record["status"] = "no server of the wave started"
            timer = _stopper(deadline, clock, servers, lock)
            save()
            for p in points:
                srv = servers.get(p["server"])
                left = deadline - clock()
                if srv is None:
                    p["status"] = "skipped: its server did not start"
                elif left < p["estimate_s"] + STOP_S:
                    p["status"] = (
                        f"skipped: {left:.0f} s left, the point needs about {p['estimate_s'] + STOP_S:.0f}"
                    )
                else:
                    folder = Path(p["server"]) / f"active{p['active']}-c{p['concurrency']}"
                    p["folder"] = str(folder)
                    t = clock()
                    try:
                        measure(srv, p, out / folder, shape)
                        p["status"] = "measured"
                    except Exception as e:  # noqa: BLE001 - one point's failure is a result
                        cut = " (the deadline stopped its server)" if clock() >= deadline else ""
                        p["status"] = f"error{cut}: {type(e).__name__}: {e}"[:2000]
                        traceback.print_exc()
                    p["seconds"] = round(clock() - t)
                print(f"[lora] {p['server']} {p['active']} active c={p['concurrency']}: {p['status']}", flush=True)  # fmt: skip
                save()  # a cut run keeps what it measured
        finally:
            if timer is not None:
                timer.cancel()
            with lock:
                for srv in servers.values():
                    with contextlib.suppress(Exception):
                        srv.stop()
            for name in configs:  # a server that failed to start left its log path too
                with contextlib.suppress(Exception):
                    rec = summary["servers"][name]
                    log = getattr(servers.get(name), "log_path", None) or rec.get("log_path")
                    _keep_log(log, out / name, rec)
            record["seconds"] = round(clock() - t0)
            summary["memory"] = memory_summary(summary["servers"])
            save()
    return summary


def _keep_log(log_path, folder: Path, rec: dict) -> None:
    """Copy the server's log (``log_path``, a path or None) into ``folder/vllm.log`` and read
    its memory lines into ``rec``."""
    log = Path(log_path or "")
    if log.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, folder / "vllm.log")
        rec["log"] = str(folder.name + "/vllm.log")
    rec.update(model_memory(log if log.is_file() else None))


def print_plan(waves: list[dict], shape: Shape) -> None:
    """Print every wave's commands, the LoRA slots' prediction, the points in order, and the
    time estimate (:func:`estimate_line`)."""
    for w in waves:
        names = ", ".join(s["server"] for s in w["servers"])
        print(f"wave {w['wave']}: {names} (started together, {co.STAGGER_S} s apart; measured "
              "one at a time while the other idles)")  # fmt: skip
        for s in w["servers"]:
            print(f"server {s['server']}:\n  " + s["command"].replace("\n", "\n  "))
            if s.get("lora_buffers"):
                print(f"  {s['lora_buffers']}")
        print(
            f"wave {w['wave']}'s points, in order ({shape.input_len} in / {shape.output_len} out):"
        )
        for i, pt in enumerate(w["points"], 1):
            print(f"  point {i}: {pt['server']}, {pt['active']} adapters active, c={pt['concurrency']}, "
                  f"{pt['runs']} runs x {pt['num_prompts']} requests, ~{pt['estimate_s']:.0f} s, "
                  f"model={pt['model'] or 'the base'} {' '.join(pt['extra'])}".rstrip())  # fmt: skip
    print(estimate_line(waves, shape))


def main(argv=None) -> int:
    """The command line (this module's docstring): print the plan; unless ``--dry-run``,
    write the adapters and run it. Returns 0; argparse exits 2 on missing ``--out`` /
    ``--deadline``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--deadline", type=float, help="epoch seconds by which every server is stopped")
    p.add_argument("--variant", default="nvfp4", choices=["nvfp4", "bf16"])
    p.add_argument("--dry-run", action="store_true", help="print every command, checked; no GPU")
    p.add_argument("--stand-in", action="store_true",
                   help="rehearse on the CPU stand-in: small points, adapters of its shapes")  # fmt: skip
    args = p.parse_args(argv)
    if not args.dry_run and (args.out is None or args.deadline is None):
        p.error("--out and --deadline are needed (or --dry-run)")
    shape = STAND_IN if args.stand_in else DEVICE
    if args.stand_in:
        from helpers.standin.build import build_standin_model

        base = build_standin_model()
        # a CI-sized host (23 GiB): the stand-in servers are small (tune_h200.py's floor), and
        # a shorter stagger, so the rehearsal takes a couple of minutes
        co.HOST_FLOOR_GIB, co.STAGGER_S = 2, 5
    else:
        base = weightless.build_arch_model(args.variant)
    # beside the model folder, outside --out: the collect leaves out /arch/ and /models/
    adapters_dir = base.parent / "lora-adapters"
    waves = plan(base, adapters_dir, args.variant, shape, stand_in=args.stand_in)
    print_plan(waves, shape)
    if args.dry_run:
        return 0
    for rank in RANKS:
        for i, name in enumerate(adapter_names()):
            random_adapter(base, adapters_dir / f"r{rank}" / name, rank=rank, seed=i)
    summary: dict = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "deadline": args.deadline, "stand_in": args.stand_in, "variant": args.variant,
        "routing": "uniform", "routing_env": UNIFORM_ROUTING_ENV,
        "co_tenant": {"flags": {} if args.stand_in else co.CO_TENANT, "env": co.CO_TENANT_ENV,
                      "stagger_s": co.STAGGER_S},
        "shape": {"input_len": shape.input_len, "output_len": shape.output_len, "runs": shape.runs,
                  "concurrencies": list(shape.concurrencies), "seed": SEED, "seed_label": SEED_LABEL,
                  "num_prompts": {str(c): shape.num_prompts(c) for c in shape.concurrencies}},
        "estimate_s": round(sum(w["estimate_s"] for w in waves)),
    }  # fmt: skip
    stop = threading.Event()
    if not args.stand_in:  # host memory and GPU memory used, every 10 s
        args.out.mkdir(parents=True, exist_ok=True)
        threading.Thread(target=co._watch_host, args=(args.out / "host.log", stop),
                         daemon=True).start()  # fmt: skip
    try:
        run(waves, args.out, args.deadline, shape, summary=summary)
    finally:
        stop.set()
        summary["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
