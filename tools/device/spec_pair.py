"""No drafting and MTP served side by side on one GPU, weightless: the lossless check, MTP's
acceptance on real prompts and the reasoning budget while drafting, in one short device run.

The speculative-decoding notebook serves the modes one after another (each alone on the GPU,
for speed). When device time is short, this script starts both servers at once on the same
GPU (``--gpu-memory-utilization`` split), so the two cold starts overlap; it measures nothing
about speed. Run on the device machine after ``. tools/device/env.sh``::

    python3 tools/device/spec_pair.py --target h200 --out "$OUT/spec-pair"

Writes ``result.json`` (match rate, first divergences, acceptance, the budget replies) and the
two server logs under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import warnings
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="h200")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--memory-share", type=float, default=0.44)
    ap.add_argument("--prompts", type=int, default=16, help="real prompts for the acceptance run")
    args = ap.parse_args()
    # a `timeout` kill still stops both servers and writes what was measured (finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    args.out.mkdir(parents=True, exist_ok=True)

    from helpers.chat.display import budget_report
    from helpers.chat.drafting import two_pass_budget
    from helpers.chat.parse import check_reply
    from helpers.config.resolve import resolve
    from helpers.server.endpoint import make_client
    from helpers.server.vllm_server import VLLMServer
    from helpers.weights.prepare import served_config
    from lab.bench.acceptance import measure_acceptance
    from lab.evals.lossless import LOSSLESS_PROMPTS, greedy_tokens, match

    share = {"--gpu-memory-utilization": str(args.memory_share)}
    servers = {}
    for mode in ("none", "mtp"):
        cfg = served_config(resolve(args.target, speculative=mode), "weightless").with_args(share)
        servers[mode] = VLLMServer(cfg, startup_timeout=900)
    result: dict = {"target": args.target, "memory_share": args.memory_share}
    try:
        for srv in servers.values():
            srv.start(wait=False)
        for mode, srv in servers.items():
            srv.wait_ready()
            result[f"{mode}_command"] = srv.config.cli_flags()
        greedy = {m: greedy_tokens(s, LOSSLESS_PROMPTS, max_tokens=64) for m, s in servers.items()}
        m = match(greedy["none"], greedy["mtp"])
        result["lossless"] = {
            "summary": m.summary("mtp"),
            "rate": m.rate,
            "identical": m.identical,
            "prompts": m.prompts,
            "per_prompt": m.per_prompt.to_dict(orient="records"),
        }
        print(m.summary("mtp"), flush=True)
        mtp = servers["mtp"]
        result["acceptance_real"] = measure_acceptance(
            mtp,
            num_prompts=args.prompts,
            output_len=256,
            label="mtp",
            out_dir=args.out / "acceptance",
        )
        llm = make_client(mtp.base_url)
        question = [{"role": "user", "content": "Briefly explain: what is vLLM?"}]
        name = mtp.config.served_model_name
        budget = {}
        for method in ("server", "two_pass"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if method == "server":
                    asked = {"thinking_token_budget": 8}
                    reply = llm.chat.completions.create(
                        model=name, messages=question, max_tokens=256, temperature=0.0,
                        extra_body=asked,
                    )  # fmt: skip
                    r = check_reply(reply, max_tokens=256, extra_body=asked)
                else:
                    r = two_pass_budget(llm, name, question, 8, max_tokens=256, temperature=0.0)
            budget[method] = {
                "report": budget_report(r, 8, drafting=True),
                "reasoning_tokens": None if r is None else r.usage.reasoning_tokens,
                "warnings": [str(w.message)[:200] for w in caught],
            }
        result["budget_while_drafting"] = budget
    finally:
        for srv in servers.values():
            srv.stop()
            if srv.log_path and Path(srv.log_path).exists():
                shutil.copy(srv.log_path, args.out / Path(srv.log_path).name)
        (args.out / "result.json").write_text(json.dumps(result, indent=2, default=str))
        print(
            json.dumps(
                {k: v for k, v in result.items() if not k.endswith("_command")},
                indent=1,
                default=str,
            )[:6000]
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
