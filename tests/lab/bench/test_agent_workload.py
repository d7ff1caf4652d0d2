"""The agent workload (generated sessions, rendered by the served model's chat template) and the
flags that replay it with ``vllm bench serve``. No server: ``tests/bench/test_prefix_reuse.py``
replays it."""

from __future__ import annotations

import json
import re

import pytest

from helpers.bench import sweep as bench
from helpers.bench.prefix_floor import prefix_floor
from helpers.config.run import Run
from helpers.errors import BenchError
from helpers.paths import REPO_ROOT
from helpers.standin.build import SHIPPED
from lab.bench import agent_workload as aw
from lab.bench import scenarios
from tests.support.cache_labels import cache_config_labels

SHAPE = aw.AgentShape(
    sessions=3, turns=3, system_len=60, tool_len=300, tools=2, user_len=20,
    tool_result_len=40, followup_len=10, output_len=16,
)  # fmt: skip


@pytest.fixture(scope="module")
def tok():
    return aw.load_chat_tokenizer(SHIPPED)


def _lcp(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_sessions_share_the_system_prompt_and_tools_and_grow_turn_by_turn(tok, tmp_path):
    work = aw.write_agent_workload(SHAPE, tok, tmp_path / "a.jsonl", seed=7)
    lines = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert work.requests == len(lines) == SHAPE.sessions * SHAPE.turns
    assert {x["output_tokens"] for x in lines} == {SHAPE.output_len}
    ids = [tok(x["prompt"], add_special_tokens=False).input_ids for x in lines]
    assert list(work.prompt_tokens) == [len(i) for i in ids]
    # rendered by the model's own template: system prompt, then the tool schemas
    first = lines[0]["prompt"]
    assert first.startswith("<|im_start|>system\nYou are Atlas") and "<tools>" in first
    assert work.shared_prefix_tokens == min(_lcp(ids[0], i) for i in ids[1:])
    assert work.shared_prefix_tokens >= SHAPE.system_len + SHAPE.tool_len
    # turn by turn: line s + t x sessions is session s's turn t, and holds its turn t - 1
    n = SHAPE.sessions
    for t in range(1, SHAPE.turns):
        for s in range(n):
            prev, cur = ids[(t - 1) * n + s], ids[t * n + s]
            assert len(cur) > len(prev) and _lcp(prev, cur) >= len(prev) - 8
            assert "<tool_response>" in lines[t * n + s]["prompt"]
    growth = work.turn_prompt_tokens
    assert all(
        b - a >= SHAPE.output_len + SHAPE.tool_result_len
        for a, b in zip(growth, growth[1:], strict=False)
    )
    assert "3 sessions x 3 turns = 9 requests" in work.summary()


def test_predicted_hits_are_whole_blocks_of_the_longest_earlier_prefix(tok, tmp_path):
    work = aw.write_agent_workload(SHAPE, tok, tmp_path / "a.jsonl", seed=7)
    ids = work.token_ids
    for block in (16, 32, 128):
        want = sum(
            min(max((_lcp(ids[i], e) for e in ids[:i]), default=0), len(ids[i]) - 1)
            // block
            * block
            for i in range(len(ids))
        )
        assert work.predicted_hits(block) == want
    assert work.predicted_hit_rate(32) > work.predicted_hit_rate(512) >= 0


def test_on_the_weightless_word_level_vocabulary_sessions_stay_apart(tmp_path):
    """The weightless tokenizer maps every English word to one unknown token: unspelled, every
    session's task would be the same run of it, and the prefix cache would hit across sessions.
    The words become the vocabulary's own, one per word: sessions part where their text does."""
    from helpers.weights.weightless_tokenizer import write_tokenizer

    write_tokenizer(tmp_path, 131072, 4096)
    tok = aw.load_chat_tokenizer(tmp_path)
    work = aw.write_agent_workload(SHAPE, tok, tmp_path / "w.jsonl", seed=3)
    ids = work.token_ids
    unk = sum(t.count(tok.unk_token_id) for t in ids) / sum(len(t) for t in ids)
    assert unk < 0.2  # the template's fixed English only
    first_turn = ids[: SHAPE.sessions]
    shared = min(_lcp(first_turn[0], i) for i in first_turn[1:])
    assert shared == work.shared_prefix_tokens < len(first_turn[0]) - SHAPE.user_len // 2
    assert len(set(ids)) == len(ids)
    # the byte-level stand-in tokenizer spells English: nothing is rewritten there
    from lab.bench.agent_text import speller

    assert speller(tok) is not None and speller(aw.load_chat_tokenizer(SHIPPED)) is None


def test_another_seed_is_another_workload_the_same_seed_the_same(tok, tmp_path):
    a = aw.write_agent_workload(SHAPE, tok, tmp_path / "a.jsonl", seed=1)
    b = aw.write_agent_workload(SHAPE, tok, tmp_path / "b.jsonl", seed=1)
    c = aw.write_agent_workload(SHAPE, tok, tmp_path / "c.jsonl", seed=2)
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    assert a.prompt_tokens == b.prompt_tokens
    # two points never reuse each other's prefix: they part within the system prompt
    assert _lcp(a.token_ids[0], c.token_ids[0]) < SHAPE.system_len


def test_a_template_without_tools_or_a_tokenizer_without_one_is_refused(tmp_path):
    from transformers import AutoTokenizer

    plain = AutoTokenizer.from_pretrained(SHIPPED)
    plain.chat_template = None
    with pytest.raises(BenchError, match="no chat template"):
        aw.write_agent_workload(SHAPE, plain, tmp_path / "x.jsonl")
    plain.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    with pytest.raises(BenchError, match="ignores tools="):
        aw.write_agent_workload(SHAPE, plain, tmp_path / "x.jsonl")


def test_a_point_s_shape_comes_from_the_scenario_and_bad_ones_name_the_fix():
    agent = scenarios.scenario("agent")
    (point,) = bench.sweep_points([4], scenario=agent, label="a")
    assert point["num_warmups"] == 0  # warm-ups repeat line 1: hits the counters would count
    shape = aw.AgentShape.for_point(agent.agent, point)
    assert shape == agent.agent_shape(4)
    assert (shape.sessions, shape.turns, shape.tools) == (8, 4, 16)
    assert shape.system_len + shape.tool_len == agent.prefix_len == 5120
    with pytest.raises(BenchError, match="system_len at most prefix_len"):
        aw.AgentShape.for_point(agent.agent, {**point, "prefix_len": 100})


def test_the_agent_scenario_replays_a_custom_dataset_vllm_s_parser_accepts():
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    agent = scenarios.scenario("agent")
    command = agent.bench_command(concurrency=4)
    assert (
        command.startswith("vllm bench serve --backend openai --endpoint /v1/completions")
        and "--dataset-path agent-c4.jsonl" in command
    )
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    ns = parser.parse_args(["--model", "m", *agent.bench_args(4)])
    assert (ns.dataset_name, ns.disable_shuffle, ns.skip_chat_template) == ("custom", True, True)
    assert (ns.custom_output_len, ns.ready_check_timeout_sec, ns.num_warmups) == (-1, 0, 0)
    assert ns.ignore_eos and (ns.max_concurrency, ns.num_prompts) == (4, 32)  # 2 sessions x 4 turns
    # the floor goes where the command is shown
    floor = prefix_floor(cache_config_labels(True, 2128, "align"))
    shown = agent.bench_command(concurrency=4, floor=floor)
    assert shown.splitlines() == [f"# {floor.sentence}", command]


def test_the_scenario_on_the_standin_stays_an_agent_workload():
    small = scenarios.scenario("agent", Run("stand_in"))
    full = scenarios.scenario("agent")
    assert small.agent["turns"] == full.agent["turns"] and small.agent["tools"] >= 1
    assert small.total_len <= scenarios.standin_settings()["token_budget"]
    assert small.agent["system_len"] < small.prefix_len


def test_the_agent_scenario_writes_each_points_sessions_for_the_sweep(tmp_path):
    """What the sweep calls (Scenario.point_writer): the tokenizer loaded once, then one point's
    sessions written beside it, with the run_point arguments that replay them."""
    agent = scenarios.scenario("agent", Run("stand_in"))
    (point,) = bench.sweep_points([1], scenario=agent, label="a")
    summary, run_args = agent.point_writer(SHIPPED)(point, tmp_path, "a")
    assert run_args["dataset"] == tmp_path / "a-c1.jsonl" and run_args["dataset"].is_file()
    assert run_args["metadata"]["workload"] == "agent" and "sessions" in summary
    with pytest.raises(BenchError, match="no agent workload"):
        scenarios.scenario("chat").point_writer(SHIPPED)


def test_predicted_hits_with_a_drafter_drop_the_last_block_of_every_hit(tok, tmp_path):
    work = aw.write_agent_workload(SHAPE, tok, tmp_path / "a.jsonl", seed=7)
    for block in (16, 32):
        plain = [0] + [  # each prompt's hit in blocks, as predicted_hits counts it
            aw.AgentWorkload(**{**work.__dict__, "token_ids": work.token_ids[: i + 1]}).predicted_hits(block) // block
            for i in range(len(work.token_ids))
        ]  # fmt: skip
        per_prompt = [b - a for a, b in zip(plain, plain[1:], strict=False)]
        want = sum(max(n - 1, 0) for n in per_prompt) * block
        assert work.predicted_hits(block, drafter=True) == want < work.predicted_hits(block)


RECORD = REPO_ROOT / "docs" / "results" / "h100" / "tune" / "drafting-0.32.0-2026-12-05"


def _blocks_by_candidate() -> dict[str, int]:
    """Each server's scheduler block, from its vLLM log ("Setting attention block size")."""
    out = {}
    for log in (RECORD / "logs").glob("*.log"):
        text = log.read_text()
        spec = re.search(
            r"'speculative_config': \{'method': '(\w+)'.*?'num_speculative_tokens': (\d+)", text
        )
        name = f"{spec.group(1)}-k{spec.group(2)}" if spec else "recipe"
        out[name] = int(re.search(r"Setting attention block size to (\d+) tokens", text).group(1))
    return out


def test_predicted_hits_are_vllms_counters_on_the_h100_agent_points(tmp_path):
    """The H100's agent points (vLLM 0.32.0, align mode, 2026-12-05), regenerated here from
    their seeds with the weightless architecture's tokenizer: vLLM's hit counters equal the
    prediction to the token without drafting and, one block less a hit, with MTP and DSpark,
    wherever the 4 GiB KV cache had room; the two K=7 servers at 16 sessions, their cache full
    (83-99 % in their logs), hit less. Fails when the workload, the predictor or the drafter
    rule drifts from what vLLM counted."""
    from helpers.weights.weightless import build_arch_model

    tok = aw.load_chat_tokenizer(build_arch_model("nvfp4", tmp_path / "arch"))
    agent = scenarios.scenario("agent").agent
    shape = json.loads((RECORD / "recipe" / "agent" / "workload.json").read_text())
    blocks = _blocks_by_candidate()
    assert blocks == {"recipe": 2128, "mtp-k3": 2192, "mtp-k7": 2288, "dspark-k7": 2288}
    for c, n in shape["num_prompts"].items():
        seed = int(
            re.search(
                r"--seed (\d+)", (RECORD / "recipe" / "agent" / f"recipe-c{c}.log").read_text()
            ).group(1)
        )
        point = {**shape, "num_prompts": n, "seed": seed, "concurrency": int(c)}
        work = aw.write_agent_workload(
            aw.AgentShape.for_point(agent, point), tok, tmp_path / f"c{c}.jsonl", seed=seed
        )
        for name, block in blocks.items():
            folder = RECORD / name / "agent"
            assert (
                f"--seed {seed} " in (folder / f"{name}-c{c}.log").read_text()
            )  # the same prompts
            notes = json.loads((folder / f"{name}-c{c}.json.annotations").read_text())
            assert notes["cookbook_prefix_cache_queries"] == sum(work.prompt_tokens)
            want = work.predicted_hits(block, drafter=name != "recipe")
            if name.endswith("k7") and c == "16":
                assert notes["cookbook_prefix_cache_hits"] < 0.85 * want, (name, c)
            else:
                assert notes["cookbook_prefix_cache_hits"] == want, (name, c)
