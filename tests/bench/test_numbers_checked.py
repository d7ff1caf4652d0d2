"""Numbers a caller gives are used as given or refused before anything starts, naming the
limit; never silently replaced (``input_len=0`` is not "the default 1024") and never left
to run for hours (a concurrency of 10,000 against ``--max-num-seqs 4``)."""

from __future__ import annotations

import warnings

import pytest

from helpers.bench import sizing
from helpers.bench import sweep as bench
from helpers.config import resolve as recipes
from helpers.errors import BenchError, RecipeError
from lab.fleet import deployment


@pytest.mark.parametrize(
    "kw, says",
    [
        ({"input_len": 0}, "input_len=0: must be a whole number of tokens, at least 1"),
        ({"output_len": 0}, "output_len=0: must be a whole number of tokens, at least 1"),
        ({"output_len": -5}, "output_len=-5"),
        ({"input_len": 2.5}, "input_len=2.5: must be a whole number"),
        ({"prefix_len": -1}, "prefix_len=-1: must be a whole number of tokens, at least 0"),
        ({"num_prompts": 0}, "num_prompts=0: must be a whole number of requests, at least 1"),
    ],
)
def test_zero_or_broken_lengths_are_refused_not_replaced(kw, says):
    with pytest.raises(BenchError) as err:
        bench.sweep_points([1], **kw)
    assert str(err.value).startswith(says), str(err.value)


def test_given_lengths_are_used_as_given():
    (p,) = bench.sweep_points([2], input_len=1, output_len=1, prefix_len=0, num_prompts=3)
    assert (p["input_len"], p["output_len"], p["prefix_len"], p["num_prompts"]) == (1, 1, 0, 3)


class _Server:
    """What sweep reads of a server object: its config (and a fleet's deployment)."""

    def __init__(self, cfg, dep=None):
        self.config, self.deployment = cfg, dep


def test_a_concurrency_far_above_max_num_seqs_is_capped_with_a_message(capsys):
    cfg = recipes.resolve("l4")
    assert cfg.args["--max-num-seqs"] == 4
    points = bench.sweep_points([1, 16, 64, 10000], input_len=64, output_len=16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bounded = sizing._bound_concurrency(points, _Server(cfg), cfg, "l4")
    assert [p["concurrency"] for p in bounded] == [1, 16]
    assert bounded[1]["num_prompts"] == sizing.default_num_prompts(16)
    msg = capsys.readouterr().out
    assert (
        "concurrency 64, 10000 is far above what the server runs at once (--max-num-seqs 4)" in msg
    )
    assert "capped at 16 (4 x that)" in msg and "Raise --max-num-seqs" in msg
    assert [w.category for w in caught] == [sizing.ConcurrencyCappedWarning]
    # a fleet runs max-num-seqs on each replica
    dep = deployment.resolve_deployment("replicas", "cpu", count=2, model="/m", cpu_cores=[0, 1])
    capped = sizing._bound_concurrency(
        bench.sweep_points([64], input_len=8, output_len=8), _Server(dep.base, dep), dep.base, "f"
    )
    assert [p["concurrency"] for p in capped] == [32]  # 4 x (--max-num-seqs 4 x 2 replicas)
    # within the bound, or a server whose limit is unknown (a URL): untouched
    assert sizing._bound_concurrency(points[:2], _Server(cfg), cfg, "l4") == points[:2]
    assert sizing._bound_concurrency(points, "http://h:1", None, "url") == points


@pytest.mark.parametrize(
    "kw, says",
    [
        (
            {"count": 2.5},
            "count=2.5: the number of replicas / data-parallel ranks must be a whole number",
        ),
        ({"count": "2"}, "count='2'"),
        ({"count": 0}, "count=0: a deployment needs at least one"),
        (
            {"count": 10000},
            "count=10000: 10000 replicas x 1 GPU(s) each is 10000 GPUs on one node, above the 16",
        ),
        (
            {"count": 2, "ports": [8000]},
            "ports=[8000]: the replicas deployment with count=2 needs exactly 2 ports",
        ),
        ({"count": 2, "ports": [8000, 8000]}, "ports=[8000, 8000]: port 8000 is given twice"),
        ({"count": 2, "ports": [8000, 70000]}, "ports=[8000, 70000]: 70000 is not a TCP port"),
    ],
)
def test_resolve_deployment_refuses_counts_and_ports_naming_the_limit(kw, says):
    with pytest.raises(RecipeError) as err:
        deployment.resolve_deployment("replicas", "h200", **kw)
    assert str(err.value).startswith(says), str(err.value)


def test_resolve_deployment_takes_good_ports_and_refuses_absurd_dp_ranks():
    dep = deployment.resolve_deployment("replicas", "h200", count=2, ports=[9000, 9001])
    assert [s.port for s in dep.servers] == [9000, 9001]
    with pytest.raises(RecipeError, match=r"count=10000: 10000 ranks .* use count <= 16 per node"):
        deployment.resolve_deployment("dp_ep", "h200", count=10000)
    with pytest.raises(RecipeError, match="needs exactly 1 port"):
        deployment.resolve_deployment("dp_ep", "h200", count=2, ports=[9000, 9001])
