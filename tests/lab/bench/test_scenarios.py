"""Benchmark scenarios: the seeds' shapes, their stand-in scaling, and how bench.sweep reads them."""

from __future__ import annotations

import dataclasses

import pytest

from helpers.bench import sizing
from helpers.bench import sweep as bench
from helpers.config import resolve as recipes
from helpers.config.run import Run
from helpers.errors import RecipeError
from lab.bench import scenarios


def test_the_seeds_shapes_are_there():
    s = scenarios.load_scenarios()
    # vendor note 003: --random-input-len 32000 --random-output-len 2000 --max-concurrency 256 --num-prompts 1024
    v = s["vendor-32k-in"]
    assert (v.input_len, v.output_len, v.concurrencies, v.num_prompts) == (
        32000,
        2000,
        (256,),
        1024,
    )
    assert "003" in v.source
    # recipe 001: SPEED-Bench 8K in / 256 out, concurrency 1 (DGX Spark measurement)
    sb = s["speed-bench-8k"]
    assert (sb.input_len, sb.output_len, sb.concurrencies) == (8192, 256, (1,))
    assert sb.reference["decode_tokens_per_s"] == 93.3 and sb.reference["target"] == "dgx-spark"
    # launch post 002: 32K prefix, then 10 rounds of 2K in / 10K out
    a = s["agentic"]
    assert (a.prefix_len, a.input_len, a.output_len, a.prompts_per_concurrency) == (
        32768,
        2048,
        10240,
        10,
    )
    assert "002" in a.source
    assert "chat" in s


def test_bench_args_are_vllm_bench_serve_flags():
    a = scenarios.scenario("agentic")
    args = a.bench_args(4)
    assert args[args.index("--random-prefix-len") + 1] == "32768"
    assert args[args.index("--num-prompts") + 1] == "40"  # 10 rounds x 4 in flight
    # vLLM's own bench parser accepts them
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    ns = parser.parse_args(["--model", "m", *args])
    assert (
        ns.random_prefix_len,
        ns.random_input_len,
        ns.random_output_len,
        ns.max_concurrency,
    ) == (32768, 2048, 10240, 4)
    assert a.bench_command().startswith("vllm bench serve --backend openai-chat")


@pytest.mark.parametrize("name", list(scenarios.load_scenarios()))
def test_standin_keeps_the_shape_and_fits(name):
    full = scenarios.scenario(name)
    small = scenarios.scenario(name, Run("stand_in"))
    st = scenarios.standin_settings()
    cpu = recipes.resolve("cpu")
    # within the stand-in server's context (and the budget that keeps a point to seconds)
    assert small.total_len <= st["token_budget"] + 3
    assert (
        small.total_len + st["chat_template_tokens"]
        <= int(cpu.args["--max-model-len"])
        == st["max_model_len"]
    )
    # ratios kept (rounding and the 8-token floor aside)
    for part in ("input_len", "output_len", "prefix_len"):
        want = getattr(full, part) * small.scale
        got = getattr(small, part)
        assert (
            got == 0
            if want == 0
            else abs(got - want) <= max(1, 0.05 * want) or got == st["min_tokens"]
        )
    # concurrency capped at the stand-in's --max-num-seqs, prompts per concurrency kept (>= 4x)
    assert max(small.concurrencies) <= int(cpu.args["--max-num-seqs"])
    for c in small.concurrencies:
        assert small.num_prompts_for(c) >= 2 * c
    if full.num_prompts:
        ratio = full.num_prompts / max(full.concurrencies)
        assert small.num_prompts >= ratio * max(small.concurrencies)
    assert small.stand_in and 0 < small.scale <= 1


def test_a_scenarios_title_states_the_shapes_it_runs():
    """The speculative notebook's Pareto plot was titled "32K shared prefix, 2K in / 10K out"
    over the stand-in's 279 / 17 / 87-token run: a scaled scenario's title gives its own."""
    full = scenarios.scenario("agentic")
    assert full.title == full.label == "Agentic (32K shared prefix, 2K in / 10K out per round)"
    small = scenarios.scenario("agentic", Run("stand_in"))
    assert small.title == (
        f"agentic scaled for the stand-in: {small.prefix_len:,}-token shared prefix, "
        f"{small.input_len:,} in / {small.output_len:,} out tokens"
    )
    assert "32K" not in small.title and str(small.output_len) in small.title
    chat = scenarios.scenario("chat", Run("stand_in"))  # no shared prefix: none named
    assert (
        chat.title
        == f"chat scaled for the stand-in: {chat.input_len} in / {chat.output_len} out tokens"
    )
    agent = scenarios.scenario("agent", Run("stand_in"))
    assert agent.title.endswith("out tokens per turn")


def test_unknown_scenario_names_the_valid_ones():
    with pytest.raises(RecipeError, match="chat"):
        scenarios.scenario("nope")


def test_sweep_reads_every_field_of_a_scenario():
    """bench.sweep takes a Scenario as is: each point gets the scenario's lengths, prefix
    and prompt count (sweep_points is what sweep runs), and explicit arguments win."""
    s = scenarios.scenario("agentic", Run("stand_in"))
    points = bench.sweep_points(s.concurrencies, scenario=s, label="x")
    assert [p["concurrency"] for p in points] == list(s.concurrencies)
    for p in points:
        assert (p["input_len"], p["output_len"], p["prefix_len"]) == (
            s.input_len,
            s.output_len,
            s.prefix_len,
        )
        c = p["concurrency"]
        expected = s.num_prompts or (
            s.prompts_per_concurrency * c
            if s.prompts_per_concurrency
            else sizing.default_num_prompts(c)
        )
        assert p["num_prompts"] == expected
    # the same points from the scenario's dict form
    assert bench.sweep_points(s.concurrencies, scenario=dataclasses.asdict(s), label="x") == points
    # explicit arguments win over the scenario
    mine = bench.sweep_points(
        [2], scenario=s, input_len=7, output_len=5, prefix_len=0, num_prompts=9, label="x"
    )
    assert {k: mine[0][k] for k in ("input_len", "output_len", "prefix_len", "num_prompts")} == {
        "input_len": 7,
        "output_len": 5,
        "prefix_len": 0,
        "num_prompts": 9,
    }
    per_c = bench.sweep_points(
        [1, 3], scenario={"input_len": 8, "output_len": 4, "prompts_per_concurrency": 5}
    )
    assert [p["num_prompts"] for p in per_c] == [5, 15]
    assert [p["prefix_len"] for p in per_c] == [0, 0]


def test_scaling_refuses_what_the_standin_cannot_serve():
    s = scenarios.scenario("agentic")
    with pytest.raises(RecipeError, match="token_budget"):
        scenarios.scale_for_standin(
            s, {"token_budget": 4000, "max_model_len": 2048, "chat_template_tokens": 16}
        )


def test_scenarios_fit_the_h100_plan():
    """Every GPU-size scenario at its largest concurrency fits 1x H100 NVFP4 (planner)."""
    from helpers.memory import planner

    cfg = recipes.resolve("h100")
    for s in scenarios.load_scenarios().values():
        p = planner.plan(cfg, context_len=s.total_len + 64)
        assert p.seqs_at_context >= min(max(s.concurrencies), 256), (s.name, p.summary())


def test_every_scenario_states_its_expected_duration_and_it_follows_the_model():
    raw = scenarios._load(str(scenarios.SCENARIOS_PATH))["scenarios"]
    for name, s in scenarios.load_scenarios().items():
        stated = raw[name]["expected_minutes_h100"]
        assert abs(stated - s.expected_seconds("h100") / 60) <= 0.1 * stated + 0.1, name


def test_the_speculative_notebooks_default_gpu_run_fits_in_30_minutes_on_one_h100():
    """Two modes (none and the drafter), the default scenario, 3 repeats of 2 points, cold starts."""
    s = scenarios.scenario("spec-default")
    minutes = 2 * (scenarios.STARTUP_S + s.expected_seconds("h100", repeats=3)) / 60
    assert 10 < minutes < 30
    # the launch post's agentic shape is hours: not a default
    assert scenarios.scenario("agentic").expected_seconds("h100") / 60 > 60


def test_duration_model_slows_with_concurrency_and_scales_with_the_gpu():
    assert (
        scenarios.per_user_tps(1)
        > scenarios.per_user_tps(8)
        > scenarios.per_user_tps(64)
        > scenarios.per_user_tps(256)
    )
    assert round(scenarios.per_user_tps(16), 1) == round(2981.7 / 16, 1)
    s = scenarios.scenario("chat")
    assert s.expected_seconds("h100") > s.expected_seconds("h200")


def test_num_prompts_overrides_every_point_and_bad_values_name_the_fix():
    agentic = scenarios.scenario("agentic", Run("stand_in"))
    assert agentic.with_num_prompts(None) is agentic
    four = agentic.with_num_prompts(4)
    assert [four.num_prompts_for(c) for c in (1, 2, 4)] == [4, 4, 4]
    assert "--num-prompts 4" in four.bench_command(concurrency=2)
    assert (four.input_len, four.output_len, four.prefix_len) == (
        agentic.input_len,
        agentic.output_len,
        agentic.prefix_len,
    )
    assert agentic.num_prompts_for(1) != 4  # the original is unchanged
    for bad in (0, -3, 2.5, "4", True):
        with pytest.raises(RecipeError, match="whole number of requests per point"):
            agentic.with_num_prompts(bad)
