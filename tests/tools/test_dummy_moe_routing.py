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


def test_the_routing_sentence_says_what_the_committed_routing_sessions_measured():
    """Every results page repeats :data:`tools.weightless_routing.MEASURED`; its ratios are the
    committed sessions' means (3 runs a point), so a re-measured session that moved them fails
    here until the sentence is rewritten."""
    from helpers.bench.results import load_results
    from tools.weightless_routing import MEASURED, RELEASES_SESSION, ROUTING_SESSION, SWEEP_SESSION

    def runs(session: str, folder: str, c: int) -> list[float]:
        df = load_results(TESTS.parent / session / folder)
        return sorted(df.loc[df["concurrency"] == c, "output_throughput"])

    def ratio(session: str, a: str, b: str, c: int) -> str:
        x, y = runs(session, a, c), runs(session, b, c)
        return f"{(sum(x) / len(x)) / (sum(y) / len(y)):.2f}x"

    h100 = lambda a, b, c: ratio(RELEASES_SESSION, a, b, c)  # noqa: E731
    assert f"to {h100('0.32.0-none-uniform', '0.32.0-none-as-loaded', 16)} at 16" in MEASURED
    assert f"({h100('0.32.0-none-uniform', '0.32.0-none-as-loaded', 1)}, a tie, at one)" in MEASURED
    assert (
        f"0.34.0 ran {h100('0.34.0-none-as-loaded', '0.32.0-none-as-loaded', 16)} of 0.32.0"
        in MEASURED
    )
    assert (f"({h100('0.34.0-none-uniform', '0.32.0-none-uniform', 1)} at one request, "
            f"{h100('0.34.0-none-uniform', '0.32.0-none-uniform', 16)} at 16;") in MEASURED  # fmt: skip
    # "tied": at each concurrency the two uniform points' runs overlap (lab.bench.stats.compare)
    for c in (1, 16):
        new, old = (
            runs(RELEASES_SESSION, "0.34.0-none-uniform", c),
            runs(RELEASES_SESSION, "0.32.0-none-uniform", c),
        )
        assert max(min(new), min(old)) <= min(max(new), max(old))
    # the notebook's sweep of both releases, one run a point: a tie is within 5 % (SINGLE_RUN_TIE)
    sweep = lambda c: ratio(SWEEP_SESSION, "nvfp4-humming", "anchor-vllm-0.32.0/nvfp4-humming", c)  # noqa: E731
    assert f"ties at 64 and 256 too ({sweep(64)}, {sweep(256)}: within the 5 %" in MEASURED
    assert all(abs(float(sweep(c)[:-1]) - 1) <= 0.05 for c in (64, 256))
    h200 = lambda a, b, c: ratio(ROUTING_SESSION, f"0.32.0-{a}", f"0.32.0-{b}", c)  # noqa: E731
    assert f"gives {h200('mtp-uniform', 'none-uniform', 1)} the recipe at" in MEASURED
    assert f"ties at 16 ({h200('mtp-uniform', 'none-uniform', 16)}, at 15" in MEASURED
