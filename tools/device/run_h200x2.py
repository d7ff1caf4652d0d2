"""Two H200s: one server vs two replicas behind vllm-router vs DP=2 + EP, same sweep.

Run on the offline 2x H200 machine from the repository root, with vLLM 0.32.0's CUDA bundle
unpacked onto ``PYTHONPATH`` (``HF_HUB_OFFLINE=1``) and the vllm-router 0.1.17 wheel installed
with ``pip install --no-deps --target DIR`` (``DIR`` on ``PYTHONPATH``, ``DIR/bin`` on ``PATH``,
or ``--router DIR/bin/vllm-router``)::

    python3 tools/device/run_h200x2.py --out "$OUT"
    python3 tools/device/run_h200x2.py --dry-run --out out/h200x2-dry   # CPU: render + validate

The weightless NVFP4 architecture with the ``h200`` target's flags (adapted by
``tools/device/run_h200.py``'s ``adapt``) is rendered and validated (:func:`render`), then run
in each layout (:func:`run_layouts`, :func:`sweep`); outputs: :func:`finish`.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import re
import shutil
import sys
import tarfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from helpers.bench import results
from helpers.bench import sweep as bench
from helpers.config import resolve as recipes
from helpers.config import versions
from helpers.paths import out_dir
from helpers.weights import weightless
from lab.fleet import deployment, fleet, router
from lab.fleet import render as renderings

_spec = importlib.util.spec_from_file_location("run_h200", REPO / "tools/device/run_h200.py")
run_h200 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_h200)
# vLLM 0.32.0 (config): --mamba-ssu-algorithm needs --mamba-backend flashinfer; when the
# flashinfer Mamba backend has to go (kernels missing), the SSU choice goes with it.
run_h200.PROBE_RULES.append(
    (re.compile(r"Mamba SSU algorithm selection is only supported"), ["--mamba-ssu-algorithm"])
)

#: Flags layered on the h200 target for this run: a modest context (1024 + 256 tokens are
#: sent) and CUDA graphs captured for the batch sizes the sweep reaches, instead of vLLM's
#: ~67 default sizes up to 512 (faster starts; a batch between two sizes pads to the next).
RUN_ARGS = {
    "--max-model-len": 8192,
    "--compilation-config": {
        "cudagraph_capture_sizes": [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256]
    },
}
CONCURRENCY = (16, 64, 256)
PROMPTS_PER_CONCURRENCY = 2
LABELS = {
    "single": "1x H200 (one server)",
    "replicas": "2x H200 replicas + vllm-router",
    "dp_ep": "2x H200 DP=2 + EP",
}
GPUS = {"single": 1, "replicas": 2, "dp_ep": 2}

T0 = time.monotonic()


def elapsed() -> float:
    return time.monotonic() - T0


def say(msg: str) -> None:
    print(f"[h200x2 {elapsed():6.1f}s] {msg}", flush=True)


def sweep(base_url: str, cfg, path: Path, layout: str, bench_dir: Path, a, summary) -> list[int]:
    """The same sweep for every layout; points skipped (and recorded) when time runs short.

    Random dataset, 1024 in / 256 out, concurrency 16, 64, 256, 2 x concurrency prompts per
    point (+ min(c, 8) warm-ups), the completions endpoint (``vllm bench serve``'s default
    backend, as the recorded 0.32.0 H200 numbers). Each layout gets prompts of its own (same
    shape): replica 0 serves (a) and then (b), and the same prompts would hit its prefix cache.
    """
    extra = (
        ["--backend", "openai", "--endpoint", "/v1/completions"]
        if a.endpoint == "completions"
        else []
    )
    done = []
    for c in a.concurrency:
        left = a.deadline - elapsed()
        need = {16: 15, 64: 20, 256: 45}.get(c, 45) + (a.reserve_after.get(layout, 0))
        if left < need:
            summary.setdefault("skipped_points", []).append(
                {"layout": layout, "concurrency": c, "seconds_left": round(left)}
            )
            say(f"{layout}: skipping c={c} ({left:.0f} s left)")
            continue
        t = time.monotonic()
        try:
            bench.sweep(
                base_url, cfg.served_model_name, str(path), [c],
                scenario={"input_len": a.input_len, "output_len": a.output_len,
                          "prompts_per_concurrency": PROMPTS_PER_CONCURRENCY},
                out_dir=bench_dir, label=LABELS[layout], gpu_count=GPUS[layout], progress=False,
                extra_args=extra,
            )  # fmt: skip
        except Exception as e:  # noqa: BLE001 - keep the other points and layouts
            summary.setdefault("bench_errors", []).append(
                {"layout": layout, "concurrency": c, "error": f"{type(e).__name__}: {e}"[:3000]}
            )
            say(f"{layout}: c={c} failed: {e}")
            continue
        done.append(c)
        say(f"{layout}: c={c} took {time.monotonic() - t:.0f} s")
    return done


def ratios(df) -> list[dict]:
    """Output throughput of each layout relative to one server, per concurrency."""
    rows = []
    one = {
        int(r["concurrency"]): float(r["output_throughput"])
        for _, r in df[df["label"] == LABELS["single"]].iterrows()
    }
    for _, r in df.iterrows():
        c = int(r["concurrency"])
        rows.append({
            "layout": r["label"],
            "concurrency": c,
            "completed": int(r["completed"]),
            "failed": int(r["failed"]),
            "output_tok_s": round(float(r["output_throughput"]), 1),
            "vs_one_gpu": round(float(r["output_throughput"]) / one[c], 3) if one.get(c) else None,
            "mean_ttft_ms": round(float(r["mean_ttft_ms"]), 1),
            "p99_ttft_ms": round(float(r["p99_ttft_ms"]), 1),
            "mean_tpot_ms": round(float(r["mean_tpot_ms"]), 2),
            "p99_tpot_ms": round(float(r["p99_tpot_ms"]), 2),
            "duration_s": round(float(r["duration_s"]), 1),
        })  # fmt: skip
    return rows


def render(cfg, out: Path, a, summary):
    """Resolve both deployments on ``cfg``, validate every line, write the renderings.

    ``cfg`` is the weightless NVFP4 architecture (``--load-format dummy``) with the ``h200``
    target's flags, plus ``--max-model-len 8192`` and a short CUDA-graph capture list (faster
    starts, stated in the summary). Every ``vllm serve`` line is parsed by this vLLM's parser,
    the router line by the router's ``--help``; commands, compose files and checks go to
    ``out``. ``--dry-run`` stops after this.
    """
    reps = deployment.resolve_deployment("replicas", "h200", count=2, base=cfg, router=a.router)
    dpep = deployment.resolve_deployment("dp_ep", "h200", count=2, base=cfg)
    multi = deployment.resolve_deployment("dp_ep", "h200", count=4, nodes=2, base=cfg)
    checks = {}
    for name, dep in (("replicas", reps), ("dp_ep", dpep), ("dp_ep_2_nodes", multi)):
        try:
            dep.validate()
            checks[name] = (
                "ok: every vllm serve line parsed by vLLM "
                + str(versions.installed_vllm_version())
                + (
                    f"; router line checked against `vllm-router --help` ({' '.join(router.find_router(a.router))})"
                    if dep.router
                    else ""
                )
            )
        except Exception as e:  # noqa: BLE001
            checks[name] = f"REJECTED: {type(e).__name__}: {e}"
    (out / "commands.sh").write_text(
        "# one server on GPU 0\n" + single_config(cfg).shell_command() + "\n\n"
        + reps.shell_commands() + "\n\n" + dpep.shell_commands() + "\n\n" + multi.shell_commands() + "\n"
    )  # fmt: skip
    (out / "compose-replicas.yaml").write_text(renderings.compose(reps))
    (out / "compose-dp_ep.yaml").write_text(renderings.compose(dpep))
    summary["validation"] = checks
    summary["commands"] = {
        "single": single_config(cfg).shell_command(),
        "replicas": reps.shell_commands(),
        "dp_ep": dpep.shell_commands(),
        "dp_ep_2_nodes": multi.shell_commands(),
    }
    summary.save()
    for k, v in checks.items():
        say(f"validate {k}: {v[:300]}")
    return reps, dpep, checks


def single_config(cfg):
    return cfg.with_args(None, CUDA_VISIBLE_DEVICES="0", **deployment.NO_MULTICAST_ENV)


def counters(dep_fleet) -> list[float | None]:
    out = []
    for s in dep_fleet.servers:
        try:
            out.append(fleet.metric_total(s.url))
        except Exception:  # noqa: BLE001
            out.append(None)
    return out


def run_layouts(reps, dpep, path: Path, work: Path, a, summary, logs: list) -> None:
    """(a), (b), (c), each recorded in ``summary`` as it ends.

    Two replicas (GPU 0, GPU 1; ``CUDA_VISIBLE_DEVICES`` each) start in parallel. (a) one
    server on one GPU: the sweep straight to replica 0 (the same process a lone ``vllm serve``
    on GPU 0 is; replica 1 idles), saving a cold start. Then the router starts in front of both
    (``Fleet.start_router``; a router that fails costs (b) only); (b) the same sweep through it,
    both replicas' ``vllm:request_success_total`` read before and after. (c) one server with
    ``--data-parallel-size 2 --enable-expert-parallel`` on both GPUs, the same sweep. NVLink
    multicast stays off in every process (``deployment.NO_MULTICAST_ENV``).
    """
    bench_dir = work / "bench"
    # ---- (a) + (b): two replicas, one sweep straight to replica 0, one through the router
    caches = [
        out_dir("cache"),
        out_dir("cache", "replica1"),
    ]  # DP+EP reuses replica 0's Triton kernels
    check = summary.get("validation", {}).get("replicas", "ok")
    router_ok = check.startswith("ok")
    if not router_ok:  # keep (a) and (c): the two servers still run, without the router
        summary["router_unusable"] = check
        say(f"router unusable, replicas run without it ({check[:200]})")
    timeout = max(120.0, a.deadline - elapsed() - a.reserve_replicas)
    say(f"replicas: starting 2 servers (start-up timeout {timeout:.0f} s); the router after (a)")
    # the servers first, without the router: (a) measures replica 0 alone; a router that
    # fails to start then costs (b) only
    fl = fleet.Fleet(
        dataclasses.replace(reps, router=None),
        startup_timeout=timeout,
        grace_period=20,
        router=a.router,
        cache_dirs=caches,
        log_dir=work / "logs",
    )
    router_log = None
    try:
        fl.start()
        summary["replicas_start"] = {
            "ok": True,
            "startup_seconds": round(fl.startup_seconds, 1),
            "servers": [round(s.startup_seconds or 0, 1) for s in fl.servers],
        }
        summary["log_figures_replica0"] = run_h200.log_figures(fl.servers[0].log_path)
        summary.save()
        say(f"replicas ready in {fl.startup_seconds:.0f} s")
        summary["single_points"] = sweep(
            fl.servers[0].base_url, reps.base, path, "single", bench_dir, a, summary
        )
        if router_ok:
            t = time.monotonic()
            try:
                fl.start_router(reps.router, timeout=60)
                router_log = fl.router.log_path
                summary["router_start"] = {
                    "ok": True,
                    "seconds": round(time.monotonic() - t, 1),
                    "readiness": fl.router.readiness(),
                    "command": fl.router.command(),
                }
                say(f"router ready in {time.monotonic() - t:.0f} s: {fl.base_url}")
            except Exception as e:  # noqa: BLE001 - keep (c)
                summary["router_error"] = f"{type(e).__name__}: {e}"[-3000:]
                say(f"router failed: {str(e)[:400]}")
        if fl.router is not None:
            before = counters(fl)
            summary["replicas_points"] = sweep(
                fl.base_url, reps.base, path, "replicas", bench_dir, a, summary
            )
            after = counters(fl)
            summary["replica_request_split"] = {
                "metric": "vllm:request_success_total (each replica's /metrics) during the router sweep",
                "per_replica": [
                    None if x is None or y is None else y - x
                    for x, y in zip(before, after, strict=False)
                ],
            }
            summary["router_workers_end"] = fl.router.workers()
            summary.save()
    except Exception as e:  # noqa: BLE001
        summary["replicas_error"] = f"{type(e).__name__}: {e}"[-4000:]
        say(f"replicas failed: {str(e)[:400]}")
    finally:
        t = time.monotonic()
        with_logs = [s.log_path for s in fl.servers] + [router_log]
        try:
            fl.stop()
        except Exception as e:  # noqa: BLE001
            summary["replicas_stop_error"] = str(e)
        logs += with_logs
        summary["replicas_stop_seconds"] = round(time.monotonic() - t, 1)
        summary.save()
    # ---- (c): DP=2 + EP on both GPUs
    if dpep is None:
        return
    left = a.deadline - elapsed()
    if left < 150:
        summary["dp_ep_skipped"] = f"{left:.0f} s left"
        say(f"dp_ep: skipped ({left:.0f} s left)")
        return
    say(
        f"dp_ep: starting one server with --data-parallel-size 2 --enable-expert-parallel (timeout {left - 60:.0f} s)"
    )

    def dp_ep_fleet(spec: deployment.Deployment, seconds_left: float) -> fleet.Fleet:
        return fleet.Fleet(
            spec,
            startup_timeout=seconds_left - 60,
            grace_period=20,
            cache_dirs=[out_dir("cache")],
            log_dir=work / "logs",
        )

    fd = dp_ep_fleet(dpep, left)
    try:
        try:
            fd.start()
        except Exception as e:  # noqa: BLE001 - one retry on vLLM's default-path Marlin MoE kernels
            logs.extend(s.log_path for s in fd.servers)
            left = a.deadline - elapsed()
            moe = dpep.base.args.get("--moe-backend")
            if moe in (None, "marlin") or left < 170:
                raise
            summary["dp_ep_first_error"] = f"{type(e).__name__}: {e}"[-3000:]
            summary.setdefault("adaptations", []).append(
                {
                    "flag": "--moe-backend",
                    "value": moe,
                    "now": "marlin",
                    "stage": "dp_ep start-up failure",
                    "error": str(e)[-1500:],
                }
            )
            say(f"dp_ep failed with --moe-backend {moe}; retrying with marlin ({left:.0f} s left)")
            dpep = dataclasses.replace(
                dpep, servers=[dpep.servers[0].with_args({"--moe-backend": "marlin"})]
            )
            summary["commands"]["dp_ep_retry"] = dpep.shell_commands()
            fd = dp_ep_fleet(dpep, left)
            fd.start()
        summary["dp_ep_start"] = {"ok": True, "startup_seconds": round(fd.startup_seconds, 1)}
        summary["log_figures_dp_ep"] = run_h200.log_figures(fd.servers[0].log_path)
        summary.save()
        say(f"dp_ep ready in {fd.startup_seconds:.0f} s")
        a.reserve_after = {}
        summary["dp_ep_points"] = sweep(
            fd.base_url, dpep.base, path, "dp_ep", bench_dir, a, summary
        )
    except Exception as e:  # noqa: BLE001
        summary["dp_ep_error"] = f"{type(e).__name__}: {e}"[-4000:]
        say(f"dp_ep failed: {str(e)[:400]}")
    finally:
        logs += [s.log_path for s in fd.servers]
        try:
            fd.stop()
        except Exception as e:  # noqa: BLE001
            summary["dp_ep_stop_error"] = str(e)
        summary.save()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "out/h200x2-run")
    ap.add_argument(
        "--router",
        default=None,
        help="vllm-router executable (default: PATH, then python -m vllm_router.launch_router)",
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="render and validate every command, launch nothing (CPU)",
    )
    ap.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)))
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    ap.add_argument("--deadline", type=float, default=525.0, help="seconds the whole run may take")
    ap.add_argument(
        "--reserve-replicas", type=float, default=230.0,
        help="seconds kept after the replicas' start for the two sweeps and DP+EP",
    )  # fmt: skip
    ap.add_argument(
        "--rehearse-cpu", action="store_true",
        help="run steps 3 on this machine with two CPU stand-in replicas (no DP+EP, tiny sweep): "
        "exercises the fleet, sweep, ratio and plot code before the device run",
    )  # fmt: skip
    a = ap.parse_args()
    if a.rehearse_cpu:
        a.concurrency, a.input_len, a.output_len, a.deadline = "1,2", 32, 8, 1800.0
    a.concurrency = [int(c) for c in a.concurrency.split(",") if c]
    a.reserve_after = {} if a.rehearse_cpu else {"single": 150, "replicas": 120}  # room for DP+EP

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = REPO / "out" / "h200x2-run"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    summary = run_h200.Summary(out / "summary.json")
    summary.update(
        versions=run_h200.versions(),
        run_args=RUN_ARGS,
        sweep={"concurrency": a.concurrency, "input_len": a.input_len, "output_len": a.output_len,
               "prompts": f"{PROMPTS_PER_CONCURRENCY} x concurrency", "warmups": "min(c, 8)",
               "endpoint": a.endpoint, "dataset": "random",
               "prompt_seeds": "random tokens of the same shape; a seed of their own per layout and point "
               "(bench.point_seed), so replica 0's prefix cache from (a) gives (b) nothing"},
        single_note="(a) is replica 0 of the replica pair, benchmarked directly (replica 1 idle on GPU 1): "
        "the same server process a lone `vllm serve` on GPU 0 is, without a third cold start.",
        env_every_process=deployment.NO_MULTICAST_ENV,
    )  # fmt: skip
    summary.save()
    say(f"versions: {summary['versions']}")
    try:
        summary["router_argv"] = router.find_router(a.router)
    except Exception as e:  # noqa: BLE001
        summary["router_argv"] = f"not found: {e}"
        say(str(e))

    if a.rehearse_cpu:
        from helpers.standin.build import build_standin_model

        path = build_standin_model()
        cfg = recipes.resolve("cpu").with_model(path)
        summary["rehearsal"] = "CPU stand-in replicas; not a measurement"
        reps = deployment.resolve_deployment("replicas", "cpu", count=2, base=cfg, router=a.router)
        reps.validate()
        logs: list = []
        try:
            run_layouts(reps, None, path, work, a, summary, logs)
        finally:
            finish(out, work, logs, summary)
        return 0
    path = weightless.build_arch_model("nvfp4")
    summary["arch"] = {"path": str(path), **(weightless.arch_metadata(path) or {})}
    base = recipes.resolve("h200", "nvfp4", extra_args=RUN_ARGS)
    summary["recipe_command"] = base.shell_command()
    cfg, changes = run_h200.adapt(weightless.arch_config(base, path))
    summary["adaptations"] = changes
    summary["serve_command"] = cfg.shell_command()
    summary.save()
    for c in changes:
        say(
            f"adapted: {c.get('flag')} {c.get('value')!r} -> {c.get('now')!r} ({c['stage']}: {str(c['error'])[:160]})"
        )
    reps, dpep, checks = render(cfg, out, a, summary)
    if a.dry_run:
        say("dry run: rendered and validated, nothing launched")
        return 0 if all(v.startswith("ok") for v in checks.values()) else 1

    logs: list = []
    try:
        run_layouts(reps, dpep, path, work, a, summary, logs)
    finally:
        finish(out, work, logs, summary)
    return 0


def finish(out: Path, work: Path, logs: list, summary) -> None:
    """Table, ratios, plots, and the tarball of point JSONs and logs (whatever finished).

    ``out`` gets ``summary.json`` (versions, commands, adaptations, start-up times, per-layout
    tables, ratios vs one GPU, replica request split; written as each step ends),
    ``commands.sh``, ``compose-replicas.yaml``, ``compose-dp_ep.yaml``, ``results.csv``,
    ``throughput.png``, ``latency.png`` and ``bench.tar.gz`` (point JSONs, server and router logs).
    """
    try:
        df = results.load_results(work / "bench")
        df.to_csv(out / "results.csv", index=False)
        summary["table"] = ratios(df)
        summary.save()
        for r in summary["table"]:
            say(
                f"{r['layout']:<34} c={r['concurrency']:<4} {r['output_tok_s']:>9.1f} tok/s  x{r['vs_one_gpu']}  failed={r['failed']}"
            )
        plot(df, out, summary)
    except Exception:  # noqa: BLE001
        summary["results_error"] = traceback.format_exc()[-2000:]
    with tarfile.open(out / "bench.tar.gz", "w:gz") as tar:
        if (work / "bench").exists():
            tar.add(work / "bench", arcname="bench")
        for log in logs:
            if log and Path(log).exists():
                tar.add(log, arcname=f"logs/{Path(log).name}")
    summary["total_seconds"] = round(elapsed(), 1)
    summary.save()
    try:
        (out / "results.md").write_text(results_page(summary))
    except Exception:  # noqa: BLE001
        summary["results_page_error"] = traceback.format_exc()[-1500:]
        summary.save()
    say("done")


def results_page(summary) -> str:
    """A markdown table of the measured layouts (throughput, ratio to one GPU, latency) and
    the layout with the highest throughput at each concurrency."""
    rows = summary.get("table") or []
    lines = [
        "| concurrency | layout | output tok/s | vs 1 GPU | mean TTFT ms | mean TPOT ms | failed |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r["concurrency"], r["layout"])):
        ratio = "" if r["vs_one_gpu"] is None else f"{r['vs_one_gpu']:.2f}x"
        lines.append(
            f"| {r['concurrency']} | {r['layout']} | {r['output_tok_s']:,.0f} | {ratio} | "
            f"{r['mean_ttft_ms']:,.0f} | {r['mean_tpot_ms']:.2f} | {r['failed']} |"
        )
    best: dict = {}
    for r in rows:
        if (
            r["concurrency"] not in best
            or r["output_tok_s"] > best[r["concurrency"]]["output_tok_s"]
        ):
            best[r["concurrency"]] = r
    lines.append("")
    for c, r in sorted(best.items()):
        lines.append(f"- c={c}: highest throughput {r['layout']} ({r['output_tok_s']:,.0f} tok/s)")
    split = (summary.get("replica_request_split") or {}).get("per_replica")
    if split:
        lines.append(f"- requests per replica during the router sweep: {split}")
    starts = {
        k: (summary.get(k) or {}).get("startup_seconds") for k in ("replicas_start", "dp_ep_start")
    }
    lines.append(f"- start-up seconds: {starts}; total run {summary.get('total_seconds')} s")
    return "\n".join(lines) + "\n"


def plot(df, out: Path, summary) -> None:
    from helpers.bench import plots

    vv = summary["versions"].get("vllm")
    plots.pareto(
        df, y="output_throughput", title="Output tokens/s (all GPUs of the layout) vs per-user speed",
        target="2x H200 (weightless NVFP4 arch)", variant="nvfp4", vllm_version=vv, path=out / "throughput.png",
    )  # fmt: skip
    plots.latency_vs_concurrency(
        df, ("ttft", "tpot"), ("median", "p99"), target="2x H200 (weightless NVFP4 arch)",
        variant="nvfp4", vllm_version=vv, path=out / "latency.png",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
