"""What serving LoRA adapters costs on one H200: a plan, weightless, not yet run.

The measurement ``notebooks/adapters.ipynb`` cannot make on the CPU: output tok/s and TPOT of
the h200 target's command (NVFP4) with 0, 1 and 4 adapters active at concurrency 1, 16 and 64,
against the same command without ``--enable-lora``, at adapter ranks 8 and 32; and the GPU
memory ``--max-loras`` takes (the KV cache the server reports, with and without LoRA, beside
:func:`lab.adapters.check.lora_buffers`'s count of vLLM's slots).

No Lightning adapter is published, and the architecture is served with random weights
(``helpers.weights.weightless``), so each adapter is one of the real shapes with random
weights (:func:`lab.adapters.synthetic.random_adapter`: attention, Mamba ``in_proj`` /
``out_proj``, MLP and shared-expert projections; the routed experts are left out). The speed is
a real adapter's at that rank; the text is noise.

Servers, one at a time (:data:`SERVERS`): ``base`` (the target's command), ``base-marlin``, ``lora-r8`` and
``lora-r32`` (the same plus ``--enable-lora --max-loras 4 --max-lora-rank R --lora-modules
a1=... a4=...``, the four adapters of rank R). Points on each LoRA server (:data:`ACTIVE`):
``model=`` the base (0 adapters active), every request to ``a1`` (1), requests spread
round-robin over ``a1``..``a4`` (4: vLLM 0.32.0 ``vllm bench serve --lora-modules a1 a2 a3 a4
--lora-assignment round-robin``, ``vllm/benchmarks/serve.py``). Shape: 1024 tokens in, 256 out
(the ``tune-1k`` scenario), :data:`CONCURRENCIES`.

Read in vLLM 0.32.0 before the device minutes are spent: with ``--enable-lora`` every MoE
layer is built for LoRA and an NVFP4 MoE kernel that takes none is refused at start ("NvFp4 MoE
backend 'HUMMING' does not support the deployment configuration since kernel does not support
LoRA", ``oracle/nvfp4.py``); Marlin's experts take LoRA. So each LoRA server runs the Marlin MoE
kernel (:func:`lab.adapters.check.moe_lora_flags`, what the adapters notebook adds too), and
``base-marlin`` (the recipe with Marlin, no LoRA) sits beside ``base``: LoRA's cost is read
against ``base-marlin``, the kernel's against ``base``. A refused start is recorded with vLLM's
error; ``--variant bf16`` measures the BF16 command (Triton's experts take LoRA).

Usage, on the device after ``. tools/device/env.sh``::

    python3 tools/device/lora_overhead_h200.py --out /tmp/runs/lora/out
    python3 tools/device/lora_overhead_h200.py --dry-run      # every command, checked, no GPU

Writes under ``--out``: ``<server>/`` (log, command, one JSON per point), ``summary.json``.
The table goes to ``docs/results/h200/`` with these commands once measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from helpers.config.flagtable import check_config
from helpers.config.resolve import resolve
from helpers.weights import weightless
from lab.adapters.check import lora_buffers, moe_lora_flags
from lab.adapters.spec import load_adapters
from lab.adapters.synthetic import random_adapter

TARGET = "h200"
#: Adapter ranks measured (NVIDIA's Lightning LoRA notebook serves --max-lora-rank 32).
RANKS = (8, 32)
#: Adapters loaded on a LoRA server: the registry's GPU --max-loras (cookbook/adapters.yaml).
ADAPTERS = 4
CONCURRENCIES = (1, 16, 64)
INPUT_LEN, OUTPUT_LEN = 1024, 256
#: Adapters active per point: 0 (the base's name), 1 (all to a1), 4 (round-robin a1..a4).
ACTIVE = (0, 1, 4)


def adapter_names() -> list[str]:
    """The served names of one LoRA server's adapters: ``a1`` .. ``a4``."""
    return [f"a{i + 1}" for i in range(ADAPTERS)]


def server_config(name: str, arch: Path, adapters_dir: Path, variant: str):
    """The ServeConfig of server ``name`` (a key of :data:`SERVERS`): the h200 target's
    command on the weightless architecture ``arch``, plus the LoRA flags for ``lora-r<R>``
    (``cookbook/adapters.yaml`` ``serve.gpu`` with ``--max-lora-rank R`` and ``--max-loras``
    :data:`ADAPTERS`, the adapters under ``adapters_dir/r<R>/``)."""
    cfg = weightless.arch_config(resolve(TARGET, variant), arch)
    if name == "base":
        return cfg
    if name == "base-marlin":  # the LoRA servers' MoE kernel, without LoRA
        return cfg.with_args(moe_lora_flags(cfg.args)[0])
    rank = int(name.removeprefix("lora-r"))
    flags = dict(load_adapters().serve["gpu"])
    flags.update({"--max-lora-rank": rank, "--max-loras": ADAPTERS})
    flags["--lora-modules"] = [f"{a}={adapters_dir / f'r{rank}' / a}" for a in adapter_names()]
    flags.update(moe_lora_flags({**cfg.args, **flags})[0])  # Humming takes no LoRA: Marlin
    return cfg.with_args(flags)


SERVERS = ("base", "base-marlin", *(f"lora-r{r}" for r in RANKS))


def bench_args(active: int) -> tuple[str | None, list[str]]:
    """``(model, extra vllm bench serve flags)`` of a point with ``active`` adapters:
    ``(None, [])`` for the base's name, ``("a1", [])`` for one, the round-robin flags for 4."""
    if active == 0:
        return None, []
    if active == 1:
        return "a1", []
    return "a1", ["--lora-modules", *adapter_names()[:active], "--lora-assignment", "round-robin"]


def plan(arch: Path, adapters_dir: Path, variant: str) -> list[dict]:
    """Every server with its command and points: ``[{"server", "command", "points": [{"active",
    "concurrency", "model", "extra"}]}]``; each command checked against vLLM 0.32.0's flag table
    (:func:`helpers.config.flagtable.check_config`)."""
    rows = []
    for name in SERVERS:
        cfg = server_config(name, arch, adapters_dir, variant)
        check_config(cfg, quiet=True)
        points = [
            {"active": n, "concurrency": c, "model": bench_args(n)[0], "extra": bench_args(n)[1]}
            for n in ((0,) if name.startswith("base") else ACTIVE)
            for c in CONCURRENCIES
        ]
        row = {"server": name, "command": cfg.shell_command(), "points": points}
        if not name.startswith(
            "base"
        ):  # what the slots should cost (lab.adapters.check.lora_buffers)
            buffers = lora_buffers(json.loads((arch / "config.json").read_text()), ADAPTERS,
                                   int(name.removeprefix("lora-r")),
                                   target_modules=cfg.args.get("--lora-target-modules"))  # fmt: skip
            row["lora_buffers_gib"] = round(buffers.gib, 3)
            row["lora_buffers"] = buffers.line()
        rows.append(row)
    return rows


def run(rows: list[dict], arch: Path, adapters_dir: Path, variant: str, out: Path) -> dict:
    """Start each server in turn, run its points (``helpers.bench.point.run_point``), stop it;
    a server that fails to start is recorded with its error and the next one runs."""
    from helpers.bench.point import run_point
    from helpers.server.vllm_server import VLLMServer

    summary: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "servers": {}}
    for row in rows:
        folder = out / row["server"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "command.sh").write_text(row["command"] + "\n")
        srv = VLLMServer(server_config(row["server"], arch, adapters_dir, variant))
        try:
            srv.start()
            done = {"ready_s": srv.startup_seconds, "points": []}
            for p in row["points"]:
                path = run_point(
                    srv.base_url, p["model"] or srv.model_name, arch, concurrency=p["concurrency"],
                    num_prompts=max(8, 4 * p["concurrency"]), input_len=INPUT_LEN, output_len=OUTPUT_LEN,
                    out_dir=folder, seed=0, num_warmups=2, extra_args=p["extra"],
                    label=f"{row['server']}-active{p['active']}",
                )  # fmt: skip
                done["points"].append(str(path))
        except Exception as e:  # noqa: BLE001 - one server's failure is a result of the plan
            done = {"error": f"{type(e).__name__}: {e}"[:2000]}
        finally:
            srv.stop()
            done["log"] = str(getattr(srv, "log_path", ""))
            done.update(kv_cache_from_log(Path(done["log"])) if done["log"] else {})
            done["lora_buffers_gib"] = row.get("lora_buffers_gib")
        summary["servers"][row["server"]] = done
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def kv_cache_from_log(log: Path) -> dict:
    """What the server's log says of its KV cache: ``available_kv_gib`` ("Available KV cache
    memory: X GiB", vllm/v1/worker/gpu_worker.py) and ``kv_cache_tokens`` ("GPU KV cache size: N
    tokens", vllm/v1/core/kv_cache_utils.py), both vLLM 0.32.0; the base's minus a LoRA server's
    is what ``--max-loras`` took, to set beside :func:`lab.adapters.check.lora_buffers`."""
    import re

    text = log.read_text(errors="replace") if log.exists() else ""
    gib = re.search(r"Available KV cache memory: ([\d.]+) GiB", text)
    tokens = re.search(r"KV cache size: ([\d,]+) tokens", text)
    return {
        "available_kv_gib": float(gib.group(1)) if gib else None,
        "kv_cache_tokens": int(tokens.group(1).replace(",", "")) if tokens else None,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--variant", default="nvfp4", choices=["nvfp4", "bf16"])
    p.add_argument("--dry-run", action="store_true", help="print every command, checked; no GPU")
    args = p.parse_args(argv)
    if not args.dry_run and args.out is None:
        p.error("--out is needed (or --dry-run)")
    arch = weightless.build_arch_model(args.variant)
    adapters_dir = (args.out or arch.parent) / "lora-adapters"
    rows = plan(arch, adapters_dir, args.variant)
    for row in rows:
        print(f"server {row['server']}:\n  " + row["command"].replace("\n", "\n  "))
        if row.get("lora_buffers"):
            print(f"  {row['lora_buffers']}")
        for pt in row["points"]:
            print(f"  point: {pt['active']} adapters active, c={pt['concurrency']}, "
                  f"model={pt['model'] or 'the base'} {' '.join(pt['extra'])}".rstrip())  # fmt: skip
    if args.dry_run:
        return 0
    for rank in RANKS:
        for i, name in enumerate(adapter_names()):
            random_adapter(arch, adapters_dir / f"r{rank}" / name, rank=rank, seed=i)
    run(rows, arch, adapters_dir, args.variant, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
