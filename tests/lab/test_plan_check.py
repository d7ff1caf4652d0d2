"""lab.plan_check: the CUDA-graph memory estimate in the plan-vs-server comparison.

Since vLLM 0.21 the KV cache is sized after an estimate of CUDA-graph memory is reserved.
The logs are real H200 start-ups (excerpts in ``tests/data/runtime/h200_memory_*.log`` of the
committed ``docs/results`` logs): vLLM 0.28.0's V1 model runner logs "Estimated CUDA graph
memory: N GiB total", 0.32.0's V2 runner only the pool line after capture; both log the
equivalent ``--gpu-memory-utilization``. The wordings are checked in the installed vLLM
0.32.0's source.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from helpers.config import resolve as recipes
from helpers.memory import planner
from helpers.server.vllm_log import CUDAGRAPH_ESTIMATE_ENV, SERVER_FIGURES
from lab import plan_check
from tests.support import DATA as TEST_DATA

RUNTIME = TEST_DATA / "runtime"
V028 = RUNTIME / "h200_memory_vllm-0.28.0_nvfp4.log"
V032 = RUNTIME / "h200_memory_vllm-0.32.0_bf16.log"


def test_log_figures_read_the_estimate_and_the_equivalent_utilization():
    f = plan_check.server_log_figures(V028)
    assert f["cudagraph_estimate_gib"] == 0.41 and f["cudagraph_actual_gib"] == 0.6
    assert (f["gpu_memory_utilization"], f["utilization_without_estimate"]) == (0.92, 0.9171)
    assert f["suggested_utilization"] == 0.9229 and f["cudagraph_estimate"] is True
    assert (f["kv_budget_gib"], f["weights_gib"], f["block_size"]) == (99.01, 20.4, 2128)
    # vLLM 0.32.0's V2 runner: no "Estimated" line; the pool line's estimate stands in
    g = plan_check.server_log_figures(V032)
    assert "Estimated CUDA graph memory" not in V032.read_text()
    assert (g["cudagraph_estimate_gib"], g["cudagraph_actual_gib"]) == (1.05, 0.54)
    assert (g["utilization_without_estimate"], g["suggested_utilization"]) == (0.9125, 0.9275)
    # the estimate turned off: said so
    off = (
        "WARNING [gpu_worker.py:790] CUDA graph memory profiling is disabled "
        "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). Without it, ..."
    )
    assert plan_check.server_log_figures(off)["cudagraph_estimate"] is False


def test_comparison_attributes_the_kv_shortfall_to_the_cudagraph_estimate():
    cfg = recipes.resolve("h200", "nvfp4").with_args({"--gpu-memory-utilization": 0.92})
    p = planner.plan(cfg)
    table = plan_check.compare_with_server(p, V028)
    budget = table[table["figure"] == "KV cache budget [GiB]"].iloc[0]
    assert budget["server log"] == 99.01 and budget["planner"] > budget["server log"]
    why = table.attrs["shortfall"]
    assert budget["note"] == why
    assert why.startswith("the server's KV cache budget is 99.01 GiB")
    assert "0.41 GiB of it is vLLM's CUDA-graph memory estimate" in why
    assert f"{CUDAGRAPH_ESTIMATE_ENV}=0" in why
    assert "raise --gpu-memory-utilization from 0.92 to 0.9229 (vLLM's own suggestion)" in why
    assert "the weights took 20.40 GiB against the plan's 18 GiB" in why
    # the BF16 server on 0.32.0 met the plan: nothing to explain
    bf16 = planner.plan(
        recipes.resolve("h200", "bf16").with_args({"--gpu-memory-utilization": 0.92})
    )
    assert plan_check.compare_with_server(bf16, V032).attrs["shortfall"] is None


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs the installed vLLM")
def test_the_wordings_are_vllm_0_32_0s():
    import vllm

    root = Path(vllm.__file__).parent
    runner = (root / "v1" / "worker" / "gpu_model_runner.py").read_text()
    worker = (root / "v1" / "worker" / "gpu_worker.py").read_text()
    envs = (root / "envs.py").read_text()
    assert '"Estimated CUDA graph memory: %.2f GiB total"' in runner
    assert '"CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), "' in worker
    assert f'"{CUDAGRAPH_ESTIMATE_ENV}": lambda: bool(' in envs
    # the utilisation sentence, with vLLM's own %-formats filled in, matches the pattern
    m = re.search(
        r'"CUDA graph memory profiling is enabled \(default since "\s*"v0\.21\.0\)', worker
    )
    assert m, "vLLM's wording of the utilisation line changed"
    line = (
        "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
        "--gpu-memory-utilization=0.9000 is equivalent to --gpu-memory-utilization=0.8900 "
        "without CUDA graph memory profiling. To maintain the same effective KV cache size as "
        "before, increase --gpu-memory-utilization to 0.9100. To disable, set "
        f"{CUDAGRAPH_ESTIMATE_ENV}=0."
    )
    assert re.search(SERVER_FIGURES["cudagraph_utilization"], line)
