"""Start-up memory advice in the log's own figures (helpers.server.failures_engine: out of
memory at CUDA-graph capture after the KV cache was sized, vllm #57475; a CUDA-graph reserve
that leaves the cache nothing) and vLLM 0.34.0's wordings of the lines they read
(helpers.server.vllm_log).

The start-up lines are a real recorded vLLM 0.32.0 H200 log (docs/results/h200/tune/...), cut
where the KV cache was sized. The out-of-memory line cannot be recorded without a GPU: it is
torch's text (c10/cuda/CUDACachingAllocator.cpp, as in tests/data/logs/out_of_memory_profiling.log)
with chosen sizes; 0.34.0's lines are built from its format strings, each test naming the file.
"""

from __future__ import annotations

import re

from helpers.paths import REPO_ROOT
from helpers.server import vllm_log
from helpers.server.diagnose import diagnose
from helpers.server.vllm_log import memory_figures, startup_phase
from tests.support import DATA as TEST_DATA

H200_LOG = (
    REPO_ROOT / "docs/results/h200/tune/c1-0.32.0-2026-12-03-1701/logs"
    "/vllm-nemotron-3.5-lightning-59419-20261203-170625.log"
)


def _sized() -> str:
    """The recorded start-up up to the KV cache's size, then a capture begins."""
    text = H200_LOG.read_text()
    cut = text.index("\n", text.index("GPU KV cache size:"))
    return text[: cut + 1] + "Capturing CUDA graphs (FULL):   3%|▎         | 1/35\n"


def _oom(want: str, total: str, free: str) -> str:
    return (
        "(EngineCore pid=1941) ERROR 12-03 17:07:55 [core.py:1104] torch.OutOfMemoryError: CUDA "
        f"out of memory. Tried to allocate {want}. GPU 0 has a total capacity of {total} of "
        f"which {free} is free. Including non-PyTorch memory, this process has 139.10 GiB "
        "memory in use.\n"
    )


def test_capture_oom_after_the_kv_cache_reads_the_logs_figures_and_sizes_the_step():
    d = diagnose(_sized() + _oom("1.50 GiB", "139.80 GiB", "120.00 MiB"))
    assert d.name == "out_of_memory"
    assert d.cause.startswith(
        "the GPU ran out of memory capturing CUDA graphs after the KV cache took 103.97 GiB at "
        "--gpu-memory-utilization 0.92; vLLM had reserved 0.43 GiB for the graphs"
    )  # 0.92 - 0.9169 (the log's utilization shift) of 139.8 GiB
    # short by 1.50 GiB - 120 MiB = 1.38 GiB = 0.99 % of the GPU: one point, plus one
    assert "lower --gpu-memory-utilization to 0.90 (the allocation was 1.38 GiB short" in d.fix
    assert "--max-cudagraph-capture-size 256 (now 512)" in d.fix and "--enforce-eager" in d.fix
    assert "0.85" not in d.message
    # a bigger shortfall, a bigger step
    big = diagnose(_sized() + _oom("9.00 GiB", "139.80 GiB", "1.00 GiB"))
    assert "lower --gpu-memory-utilization to 0.85 (the allocation was 8.00 GiB short" in big.fix


def test_capture_oom_with_the_estimate_turned_off_names_the_variable():
    # vllm/v1/worker/gpu_worker.py (0.32.0-0.34.0) warns so when the estimate is off
    off = (
        "(EngineCore pid=1941) WARNING 12-03 17:07:52 [gpu_worker.py:791] CUDA graph memory "
        "profiling is disabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). Without it, CUDA "
        "graph memory is not accounted for during KV cache allocation, which may require "
        "lowering --gpu-memory-utilization to avoid OOM.\n"
    )
    text = re.sub(r".*CUDA graph memory profiling is enabled.*\n", "", _sized()) + off
    d = diagnose(text + _oom("512.00 MiB", "139.80 GiB", "100.00 MiB"))
    assert "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 is set, so none was reserved" in d.cause
    assert d.fix.startswith("unset VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS")


def test_a_graph_reserve_that_leaves_no_cache_is_named_with_its_knobs():
    # the V1 runner's estimate line (vllm/v1/worker/gpu_model_runner.py, 0.32.0 / 0.33.0:
    # "Estimated CUDA graph memory: %.2f GiB total") before the recorded refusal
    text = (TEST_DATA / "logs" / "no_cache_memory.log").read_text()
    line = "(Worker pid=61230) INFO 11-29 17:03:01 [gpu_model_runner.py:6475] Estimated CUDA graph memory: 3.20 GiB total\n"
    cut = text.index("(Worker pid=61230) INFO 11-29 17:03:02")
    d = diagnose(text[:cut] + line + text[cut:])
    assert d.name == "no_cache_memory"
    assert "vLLM reserved 3.20 GiB of it for CUDA graphs, leaving -1.47 GiB" in d.cause
    assert "--max-cudagraph-capture-size" in d.fix and "--enforce-eager" in d.fix
    assert "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0, at the risk" in d.fix
    assert "CUDA graphs" not in diagnose(text).cause  # without an estimate, nothing invented


def test_vllm_034_wordings_are_read():
    # fused_moe/oracle/base.py make_log_backend (0.34.0): f"Using {backend.value} {self.name}
    # MoE {lora}backend{available}." with name "NvFp4" (oracle/nvfp4.py); 0.32.0 quoted it
    new = (
        "Using MARLIN NvFp4 MoE backend out of potential backends: ['FLASHINFER_TRTLLM', 'MARLIN']."
    )
    old = "Using 'FLASHINFER_TRTLLM' NvFp4 MoE backend out of potential backends: ['FLASHINFER_TRTLLM']"
    assert re.search(vllm_log.NVFP4_MOE_CHOSEN, new)["backend"] == "MARLIN"
    assert re.search(vllm_log.NVFP4_MOE_CHOSEN, old)["backend"] == "FLASHINFER_TRTLLM"
    # v1/worker/gpu/model_runner.py load_model (0.32.0-0.34.0) and 0.34.0's CPU runner
    load = (
        "(EngineCore pid=1) INFO 01-02 03:04:05 [model_runner.py:412] Loading model from scratch..."
    )
    assert startup_phase(load) == "loading weights" and re.search(vllm_log.LOAD_STARTED, load)
    # the estimate: the pool line after capture (gpu_worker.py, 0.32.0-0.34.0), and before
    # capture 0.34.0's utilization shift only (gpu_worker.py determine_available_memory)
    pool = "CUDA graph pool memory: 0.39 GiB (actual), 0.44 GiB (estimated), difference: 0.05 GiB (13.1%)."
    assert memory_figures(pool)["estimate"] == 0.44
    shift = (
        "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
        "--gpu-memory-utilization=0.9500 is equivalent to --gpu-memory-utilization=0.9300 "
        "without CUDA graph memory profiling. To maintain the same effective KV cache size as "
        "before, increase --gpu-memory-utilization to 0.9700. To disable, set "
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.\n"
    )
    fig = memory_figures(shift + _oom("136.00 MiB", "22.36 GiB", "120.88 MiB"))
    assert round(fig["estimate"], 3) == round(0.02 * 22.36, 3) and fig["util"] == 0.95
