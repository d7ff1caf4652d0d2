"""The measured H200 reference run: weightless architecture, served and benchmarked through the helpers.

Run on the offline H200 machine (the offline vLLM 0.26.0 bundle, see tools/device/README.md) from the
repository root, after ``eval "$(sh .gpu/unpack.sh)"``::

    python3 tools/device/run_h200.py --variant bf16 --flag-check --warm-restart --out "$OUT"
    python3 tools/device/run_h200.py --variant nvfp4 --concurrency 1,64 --out "$OUT"

Steps: :func:`flag_check` (``--flag-check``), then the weightless architecture adapted to the
machine (:func:`adapt`), served, asked once and swept, then ``--warm-restart`` (:func:`main`).
Each step writes into ``--out`` as it finishes, so a run cut short still returns what it did.
``tools/device/run_h200x2.py`` reuses :func:`adapt`, :class:`Summary` and :func:`log_figures`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from helpers.bench import results
from helpers.bench import sweep as bench
from helpers.config import flagcheck, load
from helpers.config import resolve as recipes
from helpers.config import versions as versions_mod
from helpers.errors import FlagError
from helpers.weights import weightless

#: The reference hand run's settings (a hand run on the offline vLLM 0.26.0 bundle, docs/results/h200.md).
REFERENCE_ARGS = {
    "--max-model-len": 8192,
    "--max-num-seqs": 256,
    "--max-num-batched-tokens": 16384,
    "--enable-prefix-caching": True,
}
#: The reference hand run's numbers (BF16, 1024 in / 256 out): output tok/s, mean TPOT ms.
REFERENCE = {1: (246, 3.28), 16: (1865, 3.85), 64: (6191, 7.07), 256: (8247, 20.6)}

#: Python modules a flag value's kernels come from (import name; the bundle leaves them out).
FLASHINFER = "flashinfer"
HUMMING = "humming"


def needed_module(flag: str, value) -> str | None:
    """The importable module a (flag, value) needs at run time, if any."""
    v = str(value).lower()
    if flag == "--mamba-backend" and v == "flashinfer":
        return FLASHINFER
    if flag in ("--moe-backend", "--linear-backend", "--attention-backend") and v.startswith(
        "flashinfer"
    ):
        return FLASHINFER
    if flag in ("--moe-backend", "--linear-backend") and v == "humming":
        return HUMMING
    if flag == "--enable-flashinfer-autotune":
        return FLASHINFER
    if flag == "--speculative-config" and isinstance(value, dict):
        if str(value.get("attention_backend", "")).lower().startswith("flashinfer"):
            return FLASHINFER
        if str(value.get("moe_backend", "")).lower().startswith("flashinfer"):
            return FLASHINFER
    if flag == "--quantization" and v.startswith("modelopt"):
        return "compressed_tensors"  # README: the ModelOpt NVFP4 path imports it on 0.26.0
    if flag == "--load-format" and v in ("fastsafetensors", "instanttensor"):
        return v
    return None


ENV_MODULES = {"VLLM_USE_FASTOKENS": "fastokens"}

#: What the run uses instead when a flag's kernels are missing (None: vLLM's default).
REPLACEMENTS = {
    ("--moe-backend", "humming"): "marlin",  # the NVFP4 variant's own (non-Hopper) choice
    ("--moe-backend", "flashinfer_cutlass"): None,
    ("--linear-backend", "humming"): None,
    ("--mamba-backend", "flashinfer"): None,
}

SR_FLAGS = ["--enable-mamba-cache-stochastic-rounding", "--mamba-cache-philox-rounds"]
#: Engine-config / start-up errors -> flags to drop (vllm/config/mamba.py, and the Triton
#: ptxas error the SR kernel hits on sm_90: `cvt.rs` is Blackwell-only).
PROBE_RULES = [
    (re.compile(r"Stochastic rounding for Mamba cache"), SR_FLAGS),
    (re.compile(r"Feature '\.rs' not supported on \.target 'sm_9"), SR_FLAGS),
]
#: Seen on this machine (2026-11-29, first BF16 start with the SR flags): vLLM 0.26.0 does
#: not refuse them on Hopper (MambaConfig's check runs before arg_utils sets the flag), the
#: start dies 167 s in, at memory profiling, when Triton compiles the SSM-update kernel.
SR_HOPPER_ERROR = (
    "ptxas /tmp/....ptx: error: Feature '.rs' not supported on .target 'sm_90a' ... ptxas fatal: "
    "Ptx assembly aborted due to errors (Triton selective-state-update kernel with stochastic "
    "rounding; EngineCore failed at determine_available_memory, 167 s after launch). vLLM's own "
    "rule (vllm/config/mamba.py): stochastic rounding with the triton Mamba backend needs "
    "compute capability 10.0; otherwise --mamba-backend flashinfer (not in the bundle)."
)

#: Rough seconds one point takes at 1024/256 on the H200 (reference rates, warm-ups, 4 x c prompts).
POINT_SECONDS = {1: 25, 16: 20, 64: 25, 256: 80}

T0 = time.monotonic()


def elapsed() -> float:
    return time.monotonic() - T0


def say(msg: str) -> None:
    print(f"[run {elapsed():6.1f}s] {msg}", flush=True)


class Summary(dict):
    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def save(self) -> None:
        self.path.write_text(json.dumps(self, indent=2, default=str) + "\n")


# ------------------------------------------------------------------------ environment


def versions() -> dict:
    out = {
        "python": platform.python_version(),
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(),
    }
    for name in (
        "vllm",
        "torch",
        "transformers",
        "triton",
        "tokenizers",
        "openai",
        "compressed-tensors",
    ):
        try:
            from importlib.metadata import version

            out[name] = version(name)
        except Exception:  # noqa: BLE001
            out[name] = None
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        out["gpu"] = smi.stdout.strip()
    except Exception as e:  # noqa: BLE001
        out["gpu"] = f"nvidia-smi failed: {e}"
    return out


def have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def module_error(module: str) -> str:
    try:
        __import__(module)
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return ""


# ------------------------------------------------------------------------- flag check


def _parse_one(parser, flag: str, value) -> tuple[bool, str, object]:
    import argparse as ap

    argv = (
        ["model", flag]
        if value is True
        else [
            "model",
            flag,
            value
            if isinstance(value, str)
            else json.dumps(value)
            if isinstance(value, dict)
            else str(value),
        ]
    )
    known = {s for a in parser._actions for s in a.option_strings}
    if flag not in known:
        return (
            False,
            f"unrecognized argument {flag} (not in this vLLM's `vllm serve --help=all`)",
            None,
        )
    try:
        ns, unknown = parser.parse_known_args(argv, namespace=ap.Namespace())
    except Exception as e:  # noqa: BLE001  (flagcheck._ParseFailure carries argparse's message)
        return False, str(e), None
    if unknown:
        return False, f"unrecognized arguments: {' '.join(unknown)}", None
    dest = flag.lstrip("-").replace("-", "_")
    return True, "", getattr(ns, dest, None)


def _spec_check(spec: dict) -> str:
    import typing

    from vllm.config import SpeculativeConfig

    problems = []
    bad = flagcheck._unknown_spec_keys(spec)
    if bad:
        problems.append(f"unknown keys {bad}")
    try:
        from vllm.config.speculative import SpeculativeMethod

        def flat(t):
            for a in typing.get_args(t):
                if isinstance(a, str):
                    yield a
                else:
                    yield from flat(a)

        methods = set(flat(SpeculativeMethod))
        if spec.get("method") and spec["method"] not in methods:
            problems.append(f"method {spec['method']!r} not in {sorted(methods)}")
    except Exception as e:  # noqa: BLE001
        problems.append(f"could not read SpeculativeMethod: {e}")
    del SpeculativeConfig
    return "; ".join(problems)


def flag_check(out: Path) -> dict:
    """Every flag of the Hopper targets in ``cookbook/recipe.yaml`` (all their variants and
    speculative modes) parsed one by one with this vLLM's own ``vllm serve`` parser;
    speculative-config keys and methods checked against ``SpeculativeConfig``; the Python
    modules the flags' kernels need looked up. Written to ``out/flag_check.json``."""
    say("flag check: parsing every Hopper target's flags with this vLLM's parser")
    reg = load.load_registry()
    parser = flagcheck._serve_parser()
    known = sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})
    modules = {
        m: have(m)
        for m in (FLASHINFER, HUMMING, "fastokens", "compressed_tensors", "fastsafetensors")
    }
    result = {
        "vllm_version": versions_mod.installed_vllm_version(),
        "how": "each (flag, value) parsed alone with vllm.entrypoints.openai.cli_args.make_arg_parser "
        "(the `vllm serve` parser); --speculative-config keys/method checked against "
        "vllm.config.SpeculativeConfig; kernel modules looked up with importlib",
        "serve_options": len(known),
        "modules_installed": modules,
        "targets": {},
    }
    for name, t in reg["targets"].items():
        if (t.get("gpu") or {}).get("arch") != "hopper":
            continue
        variants = t.get("variants") or [v for v in reg["variants"] if v != "standin"]
        entry = {"vllm_version_pinned": str(t.get("vllm_version")), "configs": {}, "flags": {}}
        for variant in variants:
            for spec in t.get("speculative_modes") or ["none"]:
                key = f"{variant}/{spec}"
                try:
                    cfg = recipes.resolve(name, variant, spec)
                except Exception as e:  # noqa: BLE001
                    entry["configs"][key] = f"not resolvable: {e}"
                    continue
                entry["configs"][key] = "resolved"
                for flag, value in cfg.args.items():
                    ok, err, parsed = _parse_one(parser, flag, value)
                    rec = entry["flags"].setdefault(flag, {"values": {}})
                    vkey = (
                        json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)
                    )
                    vrec = rec["values"].setdefault(vkey, {"accepted": ok, "configs": []})
                    vrec["configs"].append(key)
                    if err:
                        vrec["error"] = err
                    if ok and flag == "--speculative-config":
                        problem = _spec_check(parsed if isinstance(parsed, dict) else value)
                        if problem:
                            vrec["accepted"] = False
                            vrec["error"] = problem
                    mod = needed_module(flag, value)
                    if mod:
                        vrec["needs_module"] = mod
                        vrec["module_installed"] = modules.get(mod, have(mod))
                for var, val in cfg.env.items():
                    mod = ENV_MODULES.get(var)
                    if mod:
                        erec = entry.setdefault("env", {}).setdefault(
                            var, {"value": val, "configs": []}
                        )
                        erec["configs"].append(key)
                        erec["needs_module"] = mod
                        erec["module_installed"] = modules.get(mod, have(mod))
        result["targets"][name] = entry
    (out / "flag_check.json").write_text(json.dumps(result, indent=2) + "\n")
    rejected = sorted(
        {
            f
            for t in result["targets"].values()
            for f, r in t["flags"].items()
            for v in r["values"].values()
            if not v["accepted"]
        }
    )
    say(f"flag check done: rejected by vLLM {result['vllm_version']}: {rejected or 'none'}")
    return result


# ------------------------------------------------------------------------- adaptation


def _drop_env(cfg, var):
    env = dict(cfg.env)
    env.pop(var, None)
    return dataclasses.replace(cfg, env=env)


def engine_probe(cfg) -> str:
    """Build vLLM's engine config from the flags (no GPU work); "" when it is accepted."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    parser = flagcheck._serve_parser()
    argv = [cfg.model, *cfg.cli_flags()]
    saved = {k: os.environ.get(k) for k in cfg.env}
    os.environ.update(cfg.env)
    try:
        ns = parser.parse_args(argv)
        ns.model = ns.model_tag or cfg.model
        AsyncEngineArgs.from_cli_args(ns).create_engine_config()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return ""


def adapt(cfg):
    """Drop what this vLLM + bundle cannot run; returns (config, [changes]).

    In order: flags the parser rejects, flags whose kernels are not installed, and flags
    vLLM's engine config refuses on this GPU (:func:`engine_probe`), each with the error.
    """
    changes = []
    for _ in range(6):  # 1. the parser
        try:
            cfg.validate()
            break
        except FlagError as e:
            for f in e.flags:
                changes.append(
                    {
                        "flag": f,
                        "value": cfg.args.get(f),
                        "now": None,
                        "stage": "parser",
                        "error": str(e),
                    }
                )
                cfg = cfg.with_args({f: None})
    for flag, value in list(cfg.args.items()):  # 2. kernels not installed
        mod = needed_module(flag, value)
        if mod and not have(mod):
            new = REPLACEMENTS.get((flag, str(value)))
            changes.append(
                {
                    "flag": flag,
                    "value": value,
                    "now": new,
                    "stage": "kernels",
                    "error": module_error(mod),
                }
            )
            cfg = cfg.with_args({flag: new})
    for var, mod in ENV_MODULES.items():
        if cfg.env.get(var) not in (None, "0") and not have(mod):
            changes.append(
                {
                    "flag": f"env {var}",
                    "value": cfg.env[var],
                    "now": None,
                    "stage": "kernels",
                    "error": module_error(mod),
                }
            )
            cfg = _drop_env(cfg, var)
    if (
        cfg.args.get("--enable-mamba-cache-stochastic-rounding")
        and str(cfg.args.get("--mamba-backend", "triton")).lower() != "flashinfer"
        and (cfg.gpu or {}).get("arch") != "blackwell"
    ):  # 3. a platform rule 0.26.0 states but does not enforce (seen failing here)
        for f in SR_FLAGS:
            if f in cfg.args:
                changes.append(
                    {
                        "flag": f,
                        "value": cfg.args[f],
                        "now": None,
                        "stage": "kernels (sm_90)",
                        "error": SR_HOPPER_ERROR,
                    }
                )
                cfg = cfg.with_args({f: None})
    for _ in range(4):  # 4. vLLM's engine config on this GPU
        err = engine_probe(cfg)
        if not err:
            break
        for pattern, flags in PROBE_RULES:
            if pattern.search(err):
                for f in flags:
                    if f in cfg.args:
                        changes.append(
                            {
                                "flag": f,
                                "value": cfg.args[f],
                                "now": None,
                                "stage": "engine config",
                                "error": err,
                            }
                        )
                        cfg = cfg.with_args({f: None})
                break
        else:
            changes.append(
                {"flag": None, "stage": "engine config", "error": err, "note": "launching anyway"}
            )
            break
    return cfg, changes


# ------------------------------------------------------------------------------- run


def chat_once(srv, model: str) -> dict:
    from helpers.chat.parse import check_reply

    t = time.monotonic()
    try:
        reply = srv.client().chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Reply with exactly: deployment healthy"}],
            max_tokens=32,
            temperature=0.0,
        )
        r = check_reply(reply, max_tokens=32)
        return {
            "ok": True,
            "seconds": round(time.monotonic() - t, 3),
            "finish_reason": r.finish_reason,
            "usage": dataclasses.asdict(r.usage)
            if dataclasses.is_dataclass(r.usage)
            else str(r.usage),
            "reasoning_head": (r.reasoning or "")[:120],
            "content_head": (r.content or "")[:120],
            "note": "random weights: the text is noise",
        }
    except Exception as e:  # noqa: BLE001
        return {
            "ok": False,
            "error": f"{type(e).__name__}: {e}",
            "trace": traceback.format_exc()[-1500:],
        }


def table(df) -> list[dict]:
    rows = []
    for _, r in df.iterrows():
        c = int(r["concurrency"])
        row = {
            "label": r["label"],
            "concurrency": c,
            "completed": int(r["completed"]),
            "failed": int(r["failed"]),
            "output_tok_s": round(float(r["output_throughput"]), 1),
            "total_tok_s": round(float(r["total_token_throughput"]), 1),
            "mean_ttft_ms": round(float(r["mean_ttft_ms"]), 2),
            "p99_ttft_ms": round(float(r["p99_ttft_ms"]), 2),
            "mean_tpot_ms": round(float(r["mean_tpot_ms"]), 3),
            "p99_tpot_ms": round(float(r["p99_tpot_ms"]), 3),
            "duration_s": round(float(r["duration_s"]), 2),
        }
        if c in REFERENCE:
            ref_tok, ref_tpot = REFERENCE[c]
            row["reference_output_tok_s"] = ref_tok
            row["vs_reference_pct"] = round(100.0 * (row["output_tok_s"] - ref_tok) / ref_tok, 1)
            row["reference_tpot_ms"] = ref_tpot
        rows.append(row)
    return rows


def log_figures(log_path) -> dict:
    figs = {}
    try:
        from lab import plan_check

        figs.update(plan_check.server_log_figures(Path(log_path)))
    except Exception as e:  # noqa: BLE001
        figs["planner_error"] = str(e)
    text = Path(log_path).read_text(errors="replace")
    for key, pat in (
        ("model_loading", r"Model loading took ([\d.]+ GiB)[^\n]*"),
        ("torch_compile_s", r"torch\.compile took ([\d.]+) s"),
        ("graph_capture", r"Graph capturing finished in ([^\n]+)"),
        ("init_engine_s", r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+)"),
        ("kv_cache_size", r"KV cache size: ([^\n]+)"),
        ("available_kv_memory", r"Available KV cache memory: ([^\n]+)"),
        ("moe_backend", r"([^\n]*(?:MoE|moe)[^\n]*backend[^\n]*)"),
        ("mamba_backend", r"([^\n]*[Mm]amba[^\n]*backend[^\n]*)"),
        ("attention_backend", r"(Using [A-Z_0-9]+ attention backend[^\n]*)"),
    ):
        m = re.findall(pat, text)
        if m:
            figs[key] = m[-1].strip()[:300]
    return figs


def plan_vs_server(cfg, log_path) -> list | str:
    try:
        from helpers.config.versions import installed_vllm_version
        from helpers.memory import planner
        from lab import plan_check

        # the serving vLLM (0.26.0 here), not the target's pin: it sets the Mamba blocks per request
        p = planner.plan(cfg, vllm_version=installed_vllm_version())
        return plan_check.compare_with_server(p, Path(log_path)).to_dict(orient="records")
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def start(cfg, summary, key, timeout):
    from helpers.server.vllm_server import VLLMServer

    srv = VLLMServer(cfg, startup_timeout=timeout, progress=True, grace_period=30)
    try:
        srv.start()
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {e}"
        if len(msg) > 4000:  # keep the diagnosis at the head and the log's last lines
            msg = msg[:1200] + "\n[...]\n" + msg[-2800:]
        summary[key] = {"ok": False, "error": msg, "log": str(srv.log_path)}
        summary.save()
        return srv, False
    summary[key] = {
        "ok": True,
        "startup_seconds": round(srv.startup_seconds, 1),
        "log": str(srv.log_path),
        "command": srv.command(),
    }
    summary.save()
    say(f"{key}: ready in {srv.startup_seconds:.0f} s")
    return srv, True


def main() -> int:
    """``--flag-check``; ``helpers.weights.weightless.build_arch_model(variant)`` (config.json
    + tokenizer, no weights); ``recipes.resolve("h200", variant, extra_args=REFERENCE_ARGS)``
    through :func:`adapt` and ``weightless.arch_config`` (``--load-format dummy``); a
    ``VLLMServer`` (caches under ``out/cache``), one chat request, ``bench.sweep`` (random
    dataset, chat endpoint, 1024 in / 256 out, warm-ups), plots, stop; ``--warm-restart``: the
    same config again (caches warm), two points repeated. Output: ``summary.json`` (command,
    versions, adaptations, start-up times, table, log figures), ``flag_check.json``,
    ``pareto.png``, ``latency.png``, ``bench.tar.gz`` (point JSONs and logs, server logs) and
    ``server_tail.txt``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", choices=weightless.VARIANTS, default="bf16")
    ap.add_argument("--concurrency", default="1,16,64,256")
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--flag-check", action="store_true")
    ap.add_argument("--warm-restart", action="store_true")
    ap.add_argument("--deadline", type=float, default=570.0, help="seconds this script may take")
    ap.add_argument("--out", default=os.environ.get("OUT") or "out/h200-run")
    ap.add_argument(
        "--reserve", type=float, default=150.0,
        help="seconds kept for the benchmark points when setting the start-up timeout",
    )  # fmt: skip
    ap.add_argument("--dry-run", action="store_true", help="flag check + adaptation only (CPU)")
    ap.add_argument(
        "--profile", choices=("recipe", "reference"), default="recipe",
        help="recipe: the h200 target's features (parsers, FP16 SSM cache); reference: no "
        "features, as the hand run (isolates the recipe flags' cost at high concurrency)",
    )  # fmt: skip
    ap.add_argument(
        "--endpoint", choices=("chat", "completions"), default="chat",
        help="chat: helpers.bench.sweep's /v1/chat/completions; completions: /v1/completions "
        "(vllm bench serve's default backend, as the hand run)",
    )  # fmt: skip
    a = ap.parse_args()

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = REPO / "out" / "h200-run" / a.variant
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    summary = Summary(out / "summary.json")
    summary.update(variant=a.variant, versions=versions(), reference_args=REFERENCE_ARGS)
    summary.save()
    say(f"versions: {summary['versions']}")

    if a.flag_check:
        try:
            fc = flag_check(out)
            summary["flag_check_modules"] = fc["modules_installed"]
        except Exception as e:  # noqa: BLE001
            summary["flag_check_error"] = traceback.format_exc()[-3000:]
            say(f"flag check failed: {e}")
        summary.save()

    path = weightless.build_arch_model(a.variant)
    summary["arch"] = {"path": str(path), **(weightless.arch_metadata(path) or {})}
    features = () if a.profile == "reference" else None
    base = recipes.resolve("h200", a.variant, features=features, extra_args=REFERENCE_ARGS)
    summary.update(profile=a.profile, endpoint=a.endpoint)
    bench_extra = (
        ["--backend", "openai", "--endpoint", "/v1/completions"]
        if a.endpoint == "completions"
        else []
    )
    summary["recipe_command"] = base.shell_command()
    cfg, changes = adapt(weightless.arch_config(base, path))
    summary["adaptations"] = changes
    summary["serve_command"] = cfg.shell_command()
    summary["env"] = cfg.env
    summary.save()
    for c in changes:
        say(
            f"adapted: {c.get('flag')} {c.get('value')!r} -> {c.get('now')!r} ({c['stage']}: {c['error'][:160]})"
        )
    if a.dry_run:
        return 0

    srv, ok = start(
        cfg, summary, "cold_start", timeout=max(60.0, a.deadline - elapsed() - a.reserve)
    )
    if not ok:
        # one retry with the flags the log names (engine config / kernels) dropped
        text = Path(srv.log_path).read_text(errors="replace") if srv.log_path else ""
        retry = {}
        for pattern, flags in PROBE_RULES:
            if pattern.search(text):
                retry.update({f: None for f in flags if f in cfg.args})
        if not retry:
            _package(out, [srv.log_path], work)
            return 1
        summary["adaptations"].append(
            {
                "flag": list(retry),
                "stage": "start-up failure",
                "error": summary["cold_start"]["error"][-1500:],
            }
        )
        cfg = cfg.with_args(retry)
        summary["serve_command"] = cfg.shell_command()
        srv, ok = start(
            cfg,
            summary,
            "cold_start",
            timeout=max(60.0, a.deadline - elapsed() - min(120.0, a.reserve)),
        )
        if not ok:
            _package(out, [srv.log_path], work)
            return 1
    logs = [srv.log_path]
    summary["log_figures"] = log_figures(srv.log_path)
    summary["planner_vs_server"] = plan_vs_server(cfg, srv.log_path)
    summary["chat"] = chat_once(srv, cfg.served_model_name)
    summary.save()
    say(f"chat: {summary['chat'].get('ok')} {summary['chat'].get('usage')}")

    concs = [int(c) for c in a.concurrency.split(",") if c]
    label = (
        f"h200-{a.variant}-arch"
        + ("" if a.profile == "recipe" else "-refflags")
        + ("" if a.endpoint == "chat" else "-completions")
    )
    bench_dir = work / "bench"
    done = []
    try:
        for c in concs:
            left = a.deadline - elapsed()
            need = POINT_SECONDS.get(c, 60)
            if left < need + 40:
                summary.setdefault("skipped_points", []).append(
                    {"concurrency": c, "seconds_left": round(left)}
                )
                say(f"skipping c={c}: {left:.0f} s left")
                continue
            t = time.monotonic()
            bench.sweep(
                srv.base_url, cfg.served_model_name, str(path), [c],
                input_len=a.input_len, output_len=a.output_len, out_dir=bench_dir,
                label=label, gpu_count=1, progress=False, extra_args=bench_extra,
            )  # fmt: skip
            done.append(c)
            say(f"point c={c} took {time.monotonic() - t:.0f} s")
    except Exception as e:  # noqa: BLE001
        summary["bench_error"] = traceback.format_exc()[-3000:]
        say(f"bench failed: {e}")
    if done:
        try:
            df = results.load_results(bench_dir)
            df.to_csv(work / "results.csv", index=False)
            summary["table"] = table(df)
            summary.save()
            from helpers.bench import plots

            vv = summary["versions"].get("vllm")
            plots.pareto(
                df,
                target="h200 (weightless arch)",
                variant=a.variant,
                vllm_version=vv,
                path=out / "pareto.png",
            )
            plots.latency_vs_concurrency(
                df, ("ttft", "tpot"), ("median", "p99"), target="h200 (weightless arch)",
                variant=a.variant, vllm_version=vv, path=out / "latency.png",
            )  # fmt: skip
        except Exception:  # noqa: BLE001
            summary["plot_error"] = traceback.format_exc()[-2000:]
    t = time.monotonic()
    srv.stop()
    summary["stop_seconds"] = round(time.monotonic() - t, 1)
    summary.save()
    (out / "server_tail.txt").write_text(srv.log_tail(250) + "\n")

    if a.warm_restart:
        left = a.deadline - elapsed()
        if left < 150:
            summary["warm_start"] = {"skipped": f"{left:.0f} s left"}
        else:
            srv2, ok = start(cfg, summary, "warm_start", timeout=left - 80)
            logs.append(srv2.log_path)
            if ok:
                summary["warm_log_figures"] = log_figures(srv2.log_path)
                try:
                    for c in (1, 64):
                        if a.deadline - elapsed() < 45:
                            break
                        bench.sweep(
                            srv2.base_url, cfg.served_model_name, str(path), [c],
                            input_len=a.input_len, output_len=a.output_len, out_dir=work / "bench-warm",
                            label=f"{label}-restart", gpu_count=1, progress=False, seed=1, extra_args=bench_extra,
                        )  # fmt: skip
                    summary["warm_table"] = table(results.load_results(work / "bench-warm"))
                except Exception:  # noqa: BLE001
                    summary["warm_bench_error"] = traceback.format_exc()[-2000:]
                srv2.stop()
            summary.save()
    _package(out, logs, work)
    summary["total_seconds"] = round(elapsed(), 1)
    summary.save()
    say("done")
    return 0


def _package(out: Path, logs, work: Path) -> None:
    with tarfile.open(out / "bench.tar.gz", "w:gz") as tar:
        if work.exists():
            tar.add(work, arcname=work.name)
        for i, log in enumerate(p for p in logs if p):
            if Path(log).exists():
                tar.add(log, arcname=f"server-{i}-{Path(log).name}")


if __name__ == "__main__":
    sys.exit(main())
