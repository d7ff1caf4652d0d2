"""Prefix caching below one block: the plan says what a workload's shared prefix can reuse,
and a benchmark point whose prompts share a prefix but hit nothing says why.

vLLM reuses whole KV blocks only, and for this hybrid model enlarges the attention block to
one Mamba page (vLLM 0.32.0 logs "Setting attention block size to 2128 tokens" for the NVFP4
checkpoint on the H200: ``docs/results/h200x2/vllm-0.32.0/logs/replica0-*.log``). The
``/metrics`` labels are a real CPU server's scrape (``tests/data/runtime/metrics_after.txt``,
``benchmarks/record_runtime.py``) with the two values a GPU server shows set; the live test
runs a point on the session's stand-in server, which serves without prefix caching.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from helpers.bench import metrics, results
from helpers.bench import sweep as bench
from helpers.bench.prefix_floor import NO_PREFIX_CACHING
from helpers.config import resolve as recipes
from helpers.memory import planner
from lab.bench.scenarios import scenario
from tests.support import DATA as TEST_DATA

DATA = TEST_DATA
RECORDED = (DATA / "runtime" / "metrics_after.txt").read_text()


def _gpu_like_cache_config(block_size: int) -> dict[str, str]:
    """The recorded ``vllm:cache_config_info`` labels with prefix caching on and the block
    size a hybrid GPU server reports."""
    text = re.sub(r'enable_prefix_caching="False"', 'enable_prefix_caching="True"', RECORDED)
    text = re.sub(r'(?<=[{,])block_size="\d+"', f'block_size="{block_size}"', text)
    return metrics.info_labels(text)


def test_recorded_cache_config_labels_are_read():
    labels = metrics.info_labels(RECORDED)
    assert labels["block_size"] == "128" and labels["enable_prefix_caching"] == "False"
    assert metrics.info_labels("vllm:other 1\n") == {}


def test_h200_plan_notes_a_shared_prefix_below_one_block():
    cfg = recipes.resolve("h200")
    p = planner.plan(cfg, shared_prefix=1024)
    assert p.block_size == 2128 and p.prefix_caching
    note = next(n for n in p.notes if "shared prefix" in n)
    assert "1,024-token shared prefix is shorter than one 2,128-token block" in note
    assert "never hits" in note
    # the agentic scenario's 32K prefix: whole blocks only
    agentic = scenario("agentic").prefix_len
    assert agentic == 32768
    note = planner.plan(cfg, shared_prefix=agentic).prefix_cache_note(agentic)
    assert note.startswith(
        "of the workload's 32,768-token shared prefix, prefix caching can reuse 31,920 tokens (15 whole blocks of 2,128)"
    )
    # max_model_len below one block: nothing ever hits, whatever the workload
    short = planner.plan(cfg, max_model_len=2048)
    assert any("--max-model-len 2,048 is below the 2,128-token block" in n for n in short.notes)
    # no workload prefix, or prefix caching off: nothing to say
    assert planner.plan(cfg).prefix_cache_note() is None
    off = planner.plan(cfg.with_args({"--no-enable-prefix-caching": True}), shared_prefix=1024)
    assert not off.prefix_caching and off.prefix_cache_note(1024) is None


def _point(tmp_path: Path, prefix_len: int) -> Path:
    raw = json.loads((DATA / "bench" / "standin-c1.json").read_text())
    raw["prefix_len"] = str(prefix_len)
    path = tmp_path / f"p{prefix_len}.json"
    path.write_text(json.dumps(raw))
    return path


def test_a_point_sharing_a_prefix_below_one_block_with_no_hit_says_why(tmp_path):
    before = {metrics.PREFIX_CACHE_QUERIES: 0.0, metrics.PREFIX_CACHE_HITS: 0.0}
    after = {metrics.PREFIX_CACHE_QUERIES: 4096.0, metrics.PREFIX_CACHE_HITS: 0.0}
    path = _point(tmp_path, 1024)
    notes = results.annotate_point(path, before, after, _gpu_like_cache_config(2128))
    warning = notes["cookbook_prefix_cache_warning"]
    assert warning.startswith(
        "the prompts share a 1,024-token prefix but no prefix-cache block hit"
    )
    assert "shorter than one KV block (2,128 tokens" in warning
    assert "reuses whole blocks only" in warning
    row = results.load_results(path).iloc[0]
    assert row["prefix_cache_hit_rate"] == 0.0 and row["prefix_cache_warning"] == warning
    # a prefix of whole blocks that did hit: no warning; no shared prefix: none either
    hit = {metrics.PREFIX_CACHE_QUERIES: 4096.0, metrics.PREFIX_CACHE_HITS: 2128.0}
    assert "cookbook_prefix_cache_warning" not in results.annotate_point(
        _point(tmp_path, 4256), before, hit, _gpu_like_cache_config(2128)
    )
    assert "cookbook_prefix_cache_warning" not in results.annotate_point(
        _point(tmp_path, 0), before, after, _gpu_like_cache_config(2128)
    )


@pytest.mark.server
def test_sweep_with_a_shared_prefix_on_a_server_without_prefix_caching_says_so_once(
    standin_server, tmp_path, capsys
):
    """The row keeps the warning; the sweep says it once, in the floor line read from the
    server's ``/metrics`` (with the fix), not again as a WARNING per point."""
    df = bench.sweep(
        standin_server, [1], input_len=16, output_len=4, prefix_len=16, num_prompts=4,
        num_warmups=0, out_dir=tmp_path, label="prefix", progress=True,
    )  # fmt: skip
    warning = df.loc[0, "prefix_cache_warning"]
    assert warning.startswith("the prompts share a 16-token prefix but no prefix-cache block hit")
    assert "without prefix caching" in warning
    printed = capsys.readouterr()
    said = [ln for ln in (printed.out + printed.err).splitlines() if NO_PREFIX_CACHING in ln]
    assert len(said) == 1 and said[0].startswith(f"prefix cache prefix: {NO_PREFIX_CACHING}"), said
    shutil.rmtree(tmp_path, ignore_errors=True)
