"""benchmarks/dummy_moe_routing.py: on vLLM 0.32.0's dummy weights every token picks the same
experts (the reason a 0.32.0 weightless step of many requests reads few expert weights), and
norms of 1.0 (0.33.0 / 0.34.0's dummy norms) spread the same tokens over many experts."""

from __future__ import annotations

import importlib.util

import torch

from tests.support import TESTS


def _bench():
    spec = importlib.util.spec_from_file_location(
        "dummy_moe_routing", TESTS.parent / "benchmarks" / "dummy_moe_routing.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_installed_vllms_dummy_fill_routes_every_token_to_the_same_experts():
    from vllm.model_executor.model_loader.weight_utils import initialize_single_dummy_weight

    bench = _bench()
    hidden, experts, k = 2688, 128, 6  # Lightning's router (weightless config.json)
    embed = torch.empty(512, hidden, dtype=torch.bfloat16)
    gate_w = torch.empty(experts, hidden, dtype=torch.bfloat16)
    bias = torch.empty(experts, dtype=torch.float32)
    for t in (embed, gate_w, bias):
        initialize_single_dummy_weight(t)
    norm = bench.installed_rmsnorm_weight(hidden, 1e-5, torch.bfloat16)  # vLLM's RMSNorm, filled
    assert float(norm.abs().max()) <= 1e-3  # 0.32.0 fills norms like any other weight
    tokens = embed[torch.arange(0, 512, 32)]  # 16 different tokens
    as_loaded = bench.route(tokens, norm, gate_w, bias, 1e-5, k)
    assert len(torch.unique(as_loaded)) == k  # all 16 on the same 6 experts
    spread = bench.route(tokens, torch.ones(hidden, dtype=torch.bfloat16), gate_w, bias, 1e-5, k)
    assert len(torch.unique(spread)) > 4 * k


def test_the_routing_sentence_says_what_the_committed_routing_session_measured():
    """Every results page repeats :data:`tools.weightless_routing.MEASURED`; its ratios and
    spread are the committed session's means (3 runs a point), so a re-measured session that
    moved them fails here until the sentence is rewritten."""
    from helpers.bench.results import load_results
    from tools.weightless_routing import MEASURED, ROUTING_SESSION

    def runs(folder: str, c: int) -> list[float]:
        df = load_results(TESTS.parent / ROUTING_SESSION / f"0.32.0-{folder}")
        return sorted(df.loc[df["concurrency"] == c, "output_throughput"])

    def ratio(a: str, b: str, c: int) -> str:
        x, y = runs(a, c), runs(b, c)
        return f"{(sum(x) / len(x)) / (sum(y) / len(y)):.2f}x"

    assert f"ties at one request ({ratio('none-uniform', 'none-as-loaded', 1)})" in MEASURED
    assert f"ran {ratio('none-uniform', 'none-as-loaded', 16)} at 16" in MEASURED
    loaded, uniform = runs("none-as-loaded", 16), runs("none-uniform", 16)
    assert max(uniform) < min(loaded)  # "each uniform run was below each run as loaded"
    assert f"by the {100 * (loaded[-1] - loaded[0]) / (sum(loaded) / 3):.0f} % spread" in MEASURED
    assert f"gives {ratio('mtp-uniform', 'none-uniform', 1)} the recipe at" in MEASURED
    assert f"ties at 16 ({ratio('mtp-uniform', 'none-uniform', 16)}, at 15" in MEASURED
