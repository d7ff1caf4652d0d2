"""Long-context point on one H200: TTFT and prefill throughput at 8K / 128K / 512K / 1M tokens.

Serves the weightless architecture (``helpers.weights.weightless``) with the h200 target's
flags plus the ``long_context`` feature (``--max-model-len 1048576``,
``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``), then sends, per length, ``--prompts`` requests one at a
time (``helpers.bench.point.run_point``: random prompts of exactly that many tokens, 16 output
tokens, no warm-up, so no prompt is a prefix-cache hit) and reports TTFT and prefill
throughput (input tokens / TTFT), and the planner's figures at 1M against the server's log
(``lab.plan_check.compare_with_server``). Run from the repository root with the vLLM
bundle on ``PYTHONPATH``: ``python3 tools/device/long_context.py --variant nvfp4 --out "$OUT"``
(also ``--moe-backend``, ``--lengths``). Writes ``long_context.json``, row by row, and the
server log into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from helpers.bench import point as bench
from helpers.config import resolve as recipes
from helpers.config import versions
from helpers.memory import planner
from helpers.server import vllm_server as server
from helpers.weights import weightless
from lab import plan_check

LENGTHS = (8192, 131072, 524288, 1048576)
OUTPUT_TOKENS = 16
#: tokens kept free below max_model_len for the chat template and the output
MARGIN = 128


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", default="nvfp4", choices=["nvfp4", "bf16"])
    ap.add_argument(
        "--lengths", default=",".join(map(str, LENGTHS)), help="prompt tokens, comma-separated"
    )
    ap.add_argument("--prompts", type=int, default=2, help="requests per length (one at a time)")
    ap.add_argument("--moe-backend", default=None, help="override --moe-backend (e.g. marlin)")
    ap.add_argument(
        "--extra",
        default="{}",
        help='more serve flags as JSON, e.g. {"--gpu-memory-utilization": 0.92}',
    )
    ap.add_argument("--startup-timeout", type=float, default=1500)
    ap.add_argument("--out", default="out/long_context")
    a = ap.parse_args()

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    extra = json.loads(a.extra)
    if a.moe_backend:
        extra["--moe-backend"] = a.moe_backend
    features = ["reasoning", "tool_calling", "fast_ssm_cache", "long_context"]
    cfg = recipes.resolve(
        "h200",
        a.variant,
        "none",
        features,
        extra_args=extra or None,
        vllm_version=versions.installed_vllm_version(),
    )
    arch = weightless.build_arch_model(a.variant)
    serve_cfg = weightless.arch_config(cfg, arch)
    max_len = int(serve_cfg.args["--max-model-len"])
    summary: dict = {
        "what": "TTFT and prefill throughput vs prompt length, weightless architecture, one H200",
        "versions": {
            "vllm": versions.installed_vllm_version(),
            "python": platform.python_version(),
        },
        "variant": a.variant,
        "command": serve_cfg.shell_command(),
        "env": serve_cfg.env,
        "rows": [],
    }
    path = out / "long_context.json"

    def save() -> None:
        path.write_text(json.dumps(summary, indent=1, default=str) + "\n")

    srv = server.VLLMServer(
        serve_cfg, startup_timeout=a.startup_timeout, log_path=out / "server.log"
    )
    try:
        srv.start()
        summary["startup_seconds"] = round(srv.startup_seconds or 0, 1)
        p = planner.plan(serve_cfg, vllm_version=versions.installed_vllm_version())
        summary["planner_vs_server"] = plan_check.compare_with_server(p, srv.log_path).to_dict(
            orient="records"
        )
        save()
        for n in (int(x) for x in a.lengths.split(",")):
            n_in = min(n, max_len - OUTPUT_TOKENS - MARGIN)
            t0 = time.monotonic()
            jp = bench.run_point(
                srv.base_url,
                serve_cfg.served_model_name,
                serve_cfg.model,
                concurrency=1,
                num_prompts=a.prompts,
                input_len=n_in,
                output_len=OUTPUT_TOKENS,
                out_dir=out,
                seed=n,
                num_warmups=0,
                label=f"long-{a.variant}-{n}",
            )
            d = json.loads(jp.read_text())
            ttfts = [t for t in d.get("ttfts", []) if t]  # seconds, one per request
            row = {
                "prompt_tokens": n_in,
                "completed": d.get("completed"),
                "mean_ttft_ms": round(d["mean_ttft_ms"], 1),
                "ttfts_s": [round(t, 3) for t in ttfts],
                "prefill_tok_s": round(n_in / (d["mean_ttft_ms"] / 1000.0), 0),
                "wall_s": round(time.monotonic() - t0, 1),
            }
            summary["rows"].append(row)
            save()
            print(
                f"{n_in:>9} tokens: TTFT {row['mean_ttft_ms']:,.0f} ms, prefill {row['prefill_tok_s']:,.0f} tok/s",
                flush=True,
            )
    finally:
        srv.stop()
        summary["stopped"] = not srv.is_running()
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
