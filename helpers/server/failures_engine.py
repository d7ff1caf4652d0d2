"""The sentences for the start-up failures of the engine itself (memory, ports, flags,
tokenizer, speculative decoding, kernels, a stall), declared as :mod:`helpers.server.failures` says.
"""

from __future__ import annotations

import math
import re
from typing import Any

from helpers.server import vllm_log
from helpers.server.failures import (
    Diagnosis,
    _api_port,
    _flag_value,
    _installed_vllm,
    _line_of,
    _port_owner,
    _spec_settings,
    _target_bits,
    failure,
    fixed_failure,
)
from helpers.server.stall import ENGINE_STALLED, engine_hung
from helpers.server.vllm_log import OLDER_RELEASES, REGISTRY_RELEASES, Wording, stalled_span

fixed_failure(
    "mamba_cache_blocks",
    120,
    Wording(
        (r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)",),
        "vllm/config/compilation.py (CompilationConfig, full decode CUDA graphs for Mamba)",
        REGISTRY_RELEASES,
    ),
    "max_num_seqs ({0}) exceeds the {1} Mamba cache blocks that fit in memory (each running "
    "sequence needs one for the full CUDA graphs)",
    "lower --max-num-seqs to {1} or less, or raise --gpu-memory-utilization",
)


@failure(
    "kv_cache_too_small",
    210,
    Wording(
        (
            # V1, 0.26.0-0.32.0; 0.8.5's V1 wrote "models's"
            r"To serve at least one request with the models?'s max seq len \((\d+)\)",
            # pre-V1 engine (vllm/worker/worker.py, 0.8.5 and older)
            r"The model's max seq len \((\d+)\) is larger than the maximum number of tokens that "
            r"can be stored in KV cache \((?P<fits>\d+)\)",
        ),
        "vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory); pre-V1 "
        "vllm/worker/worker.py (raise_if_cache_size_invalid)",
        REGISTRY_RELEASES + OLDER_RELEASES,
    ),
)
def _kv_too_small(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    max_len = m.group(1)
    est = re.search(vllm_log.ESTIMATED_MAX_LEN, text)
    fits = m.groupdict().get("fits")
    if fits:  # pre-V1: "... can be stored in KV cache (N)" is the longest that fits
        to = f"lower --max-model-len to {fits}"
    else:
        to = f"lower --max-model-len to {est.group(1)}" if est else "lower --max-model-len"
    graphs, knobs = _graph_reserve(text)
    return Diagnosis(
        "kv_cache_too_small",
        f"one sequence of --max-model-len {max_len} tokens needs more KV cache than is left "
        f"after loading the weights{graphs}",
        f"{to}, raise --gpu-memory-utilization, {knobs}or serve the smaller NVFP4 variant",
        _line_of(m, text),
    )


@failure(
    "no_cache_memory",
    220,
    Wording(
        (r"No available memory for the cache blocks",),
        "vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory)",
        REGISTRY_RELEASES + OLDER_RELEASES,
    ),
)
def _no_cache_memory(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    util = _flag_value(config, "--gpu-memory-utilization")
    now = f" (now {util})" if util else ""
    graphs, knobs = _graph_reserve(text)
    return Diagnosis(
        "no_cache_memory",
        "the weights and activations used all the memory vLLM may take, so none is left "
        f"for the cache blocks{graphs}",
        f"raise --gpu-memory-utilization{now}, lower --max-model-len / --max-num-seqs, {knobs}or "
        "serve the smaller NVFP4 variant",
        _line_of(m, text),
    )


def _graph_reserve(text: str) -> tuple[str, str]:
    """``(cause, knobs)`` words for the CUDA-graph memory vLLM reserved before sizing the KV
    cache (vllm/v1/worker/gpu_worker.py determine_available_memory, vLLM 0.32.0-0.34.0), or
    ``("", "")`` when the log shows no estimate."""
    fig = vllm_log.memory_figures(text)
    if not fig.get("estimate"):
        return "", ""
    left = f", leaving {fig['available']:g} GiB" if "available" in fig else ""
    return (
        f" (vLLM reserved {fig['estimate']:.2f} GiB of it for CUDA graphs{left})",
        f"shrink that reserve with --max-cudagraph-capture-size {_fewer_graphs(fig)} or "
        f"--enforce-eager, or stop reserving it ({vllm_log.CUDAGRAPH_ESTIMATE_ENV}=0, at the "
        "risk of running out of memory at capture), ",
    )


def _fewer_graphs(fig: dict[str, float]) -> str:
    """A smaller ``--max-cudagraph-capture-size``: half the logged one (vLLM 0.32.0's default
    is min(2 x max_num_seqs x decode tokens, 512): vllm/config/vllm.py _set_cudagraph_sizes)."""
    size = int(fig.get("capture_size") or 0)
    return f"{max(size // 2, 1)} (now {size})" if size > 1 else "N (fewer decode batch sizes)"


@failure(
    "out_of_memory",
    240,
    Wording(
        (
            r"torch\.OutOfMemoryError",
            r"CUDA out of memory",
            r"torch\.cuda\.OutOfMemoryError",
        ),
        "torch c10/cuda/CUDACachingAllocator.cpp (OutOfMemoryError text)",
        (
            "torch 2.13.0 (torch.OutOfMemoryError; the CUDA message text is in libc10_cuda, not in the CPU wheel)",
        ),
    ),
)
def _cuda_oom(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    """Loading the weights; capturing CUDA graphs after the KV cache was sized (the log's
    "Available KV cache memory" / "KV cache size" before the error: vllm #57475); or profiling.
    The utilization step is the allocation's shortfall (torch's "Tried to allocate ... of
    which ... is free") as a share of the GPU, plus one point."""
    if re.search(vllm_log.LOAD_STARTED, text) and not re.search(vllm_log.LOAD_FINISHED, text):
        return Diagnosis(
            "out_of_memory",
            "the GPU ran out of memory while loading the weights",
            "serve the smaller NVFP4 variant or more GPUs (--tensor-parallel-size), "
            "and check nothing else holds GPU memory (nvidia-smi)",
            _line_of(m, text),
        )
    fig = vllm_log.memory_figures(text)
    flag = _flag_value(config, "--gpu-memory-utilization")
    util = float(flag) if flag else fig.get("util")
    graphs = (
        f"capture fewer CUDA graphs (--max-cudagraph-capture-size {_fewer_graphs(fig)}, or a "
        "short --cudagraph-capture-sizes list) or none (--enforce-eager: slower decoding)"
    )
    before = text[: m.start()]
    f = vllm_log.SERVER_FIGURES
    if not (re.search(f["available_gib"], before) or re.search(f["kv_tokens"], before)):
        return Diagnosis(
            "out_of_memory",
            "the GPU ran out of memory while profiling (the dummy batch or the CUDA-graph "
            "estimate, before the KV cache is sized)",
            f"lower --max-num-batched-tokens (the profiled batch) and --max-model-len / "
            f"--max-num-seqs, {graphs}, or serve the smaller NVFP4 variant",
            _line_of(m, text),
        )
    short = fig["want"] - fig["free"] if "want" in fig else None
    lower = "lower --gpu-memory-utilization" + (f" below {util:g}" if util else "")
    if util and short is not None and fig.get("total"):
        step = (math.ceil(short / fig["total"] * 100) + 1) / 100
        lower = (
            f"lower --gpu-memory-utilization to {util - step:.2f} (the allocation was "
            f"{short:.2f} GiB short of {fig['total']:.1f} GiB: {step:.2f} of the GPU)"
        )
    at = f" at --gpu-memory-utilization {util:g}" if util else ""
    took = f" took {fig['available']:g} GiB" if "available" in fig else " was sized"
    reserved = (
        f"; vLLM had reserved {fig['estimate']:.2f} GiB for the graphs"
        if fig.get("estimate")
        else ""
    )
    unset = ""
    if re.search(f["cudagraph_profiling_off"], text):
        reserved = (
            f"; {vllm_log.CUDAGRAPH_ESTIMATE_ENV}=0 is set, so none was reserved for the graphs"
        )
        unset = f"unset {vllm_log.CUDAGRAPH_ESTIMATE_ENV} (vLLM then reserves the graphs' memory before sizing the cache), "
    return Diagnosis(
        "out_of_memory",
        f"the GPU ran out of memory capturing CUDA graphs after the KV cache{took}{at}{reserved}",
        f"{unset}{lower}, or {graphs}",
        _line_of(m, text),
    )


@failure(
    "memory_in_use",
    230,
    Wording(
        (
            r"Free memory on device (?:\S+ )?\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup "
            r"is less than desired GPU memory utilization \((?P<util>[\d.]+)",
            r"Available memory on node \d+ \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup "
            r"is less than desired CPU memory utilization \((?P<util>[\d.]+)",
        ),
        "vllm/v1/worker/utils.py (request_memory); vllm/v1/worker/cpu_worker.py (CPUWorker)",
        REGISTRY_RELEASES,
    ),
)
def _device_memory_taken(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    free, total, util = m.group("free"), m.group("total"), m.group("util")
    cpu = "CPU memory utilization" in m.group(0)
    try:
        suggest = max(0.05, round(float(free) / float(total) - 0.05, 2))
        to = f" to {suggest:.2f} or less"
    except (TypeError, ValueError, ZeroDivisionError):
        to = ""
    if cpu:
        fix = (
            f"lower --gpu-memory-utilization{to} (on the CPU backend it reserves CPU memory), "
            "or size the KV cache explicitly with --kv-cache-memory-bytes / VLLM_CPU_KVCACHE_SPACE, "
            "or stop the other process"
        )
    else:
        fix = (
            f"lower --gpu-memory-utilization{to}, or stop the other process on the GPU "
            "(nvidia-smi names it)"
        )
    return Diagnosis(
        "memory_in_use",
        f"only {free} of {total} GiB {'CPU memory' if cpu else 'GPU memory'} is free at start-up, "
        f"less than --gpu-memory-utilization {util} asks for (another process holds the rest)",
        fix,
        _line_of(m, text),
    )


@failure(
    "port_in_use",
    270,
    Wording(
        (
            r"OSError: \[Errno 98\] (?:error while attempting to bind on address .*: )?[Aa]ddress already in use",
        ),
        "vllm/entrypoints/launchers/launcher.py (create_server_socket: sock.bind)",
        REGISTRY_RELEASES + OLDER_RELEASES,
    ),
)
def _api_port_in_use(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    port = _api_port(text, config)
    which = f"API port {port}" if port else "the API port"
    return Diagnosis(
        "port_in_use",
        f"{which} is already in use{_port_owner(port)}",
        "stop that server (helpers.server.launch.stop_server / end_leftovers()) or pass port=None "
        "so helpers.server.vllm_server picks a free port",
        _line_of(m, text),
    )


@failure(
    "internal_port_in_use",
    260,
    Wording(
        (
            r"failed to listen on any local network address\. port: (?P<port>\d+).*EADDRINUSE",
            r"DistNetworkError.*EADDRINUSE",
            r"ZMQError: Address already in use \(addr='[^']*:(?P<port>\d+)'\)",
        ),
        "torch c10d TCPStore (socket.cpp); vllm/config/parallel.py; pyzmq",
        ("pyzmq 27.3.0 (ZMQError)", "torch 2.13.0 (DistNetworkError)"),
    ),
)
def _internal_port_in_use(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    port = m.group("port") if "port" in m.groupdict() else None
    which = f"internal port {port}" if port else "an internal port"
    return Diagnosis(
        "internal_port_in_use",
        f"vLLM's {which} (torch.distributed / ZMQ between the API server and engine) is "
        f"already in use{_port_owner(int(port)) if port and port.isdigit() else ''}",
        "end the earlier vLLM run (helpers.server.processes.end_leftovers()) or unset / change "
        "VLLM_PORT (and MASTER_PORT) so vLLM picks free ones",
        _line_of(m, text),
    )


@failure(
    "unrecognized_arguments",
    190,
    Wording(
        (r"error: unrecognized arguments: (.+)$",),
        "argparse via vllm/utils/argparse_utils.py (FlexibleArgumentParser.error)",
        REGISTRY_RELEASES + OLDER_RELEASES + ("python 3.11 argparse",),
    ),
)
def _unrecognized(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    flags = m.group(1).split()
    names = [f for f in flags if f.startswith("-")] or flags
    installed = _installed_vllm() or "unknown"
    target, pinned = _target_bits(config)
    if pinned and pinned != installed:
        fix = (
            f"the target{f' {target!r}' if target else ''} pins vLLM {pinned}: install that "
            f"version (pip install vllm=={pinned}) or drop the flag"
        )
    elif pinned:
        fix = (
            f"the target{f' {target!r}' if target else ''} pins this same version, so the "
            "flag is misspelled or from another release: fix it in cookbook/recipe.yaml"
        )
    else:
        fix = "check its spelling against `vllm serve --help`, or install the vLLM version that has it"
    return Diagnosis(
        "unrecognized_arguments",
        f"the installed vLLM {installed} does not know {' '.join(names)}",
        fix,
        _line_of(m, text),
    )


@failure(
    "invalid_choice",
    200,
    Wording(
        (
            r"error: argument (--[\w-]+)(?:/[-\w]+)*: invalid choice: '([^']*)' \(choose from (.+)\)",
        ),
        "argparse via vllm/utils/argparse_utils.py",
        REGISTRY_RELEASES + OLDER_RELEASES + ("python 3.11 argparse",),
    ),
)
def _invalid_choice(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    flag, value, choices = m.group(1), m.group(2), m.group(3)
    installed = _installed_vllm() or "unknown"
    _, pinned = _target_bits(config)
    extra = (
        f"; the target pins vLLM {pinned}, which may accept it"
        if pinned and pinned != installed
        else ""
    )
    return Diagnosis(
        "invalid_choice",
        f"vLLM {installed} rejects {flag} {value}",
        f"use one of {choices}{extra}",
        _line_of(m, text),
    )


fixed_failure(
    "fastokens_unsupported_tokenizer",
    130,
    Wording(
        (
            r"pre-tokenizer error: unsupported (?P<what>pre-tokenizer type: \w+)",
            r"model error: unsupported (?P<what>model type: \w+)",
        ),
        "fastokens 0.3.5 (Tokenizer.from_file's errors, checked here on CPU) raised inside "
        "vLLM 0.32.0's VllmConfig; recorded on an H200 (docs/results/h200.md)",
        ("vllm 0.32.0 (recorded log)", "fastokens 0.3.5"),
    ),
    "VLLM_USE_FASTOKENS=1 is set but fastokens cannot load this model's tokenizer "
    "(unsupported {what}; fastokens 0.3.5 loads BPE tokenizers only)",
    "unset VLLM_USE_FASTOKENS (it only speeds up tokenization); in weightless mode "
    "helpers.weights.weightless.arch_config drops it for the architecture folder's tokenizer",
)


fixed_failure(
    "missing_fastokens",
    140,
    Wording(
        (
            r"The 'fastokens' package \(>= [\d.]+\) is required when VLLM_USE_FASTOKENS=1",
            r"fastokens >= [\d.]+ is required when VLLM_USE_FASTOKENS=1",
        ),
        "vllm/tokenizers/fastokens.py (apply_fastokens_patch)",
        REGISTRY_RELEASES,
    ),
    "VLLM_USE_FASTOKENS=1 is set (the BF16 recipe's fast tokenizer) but the fastokens "
    "package (>= 0.2.0) is not installed",
    'install it with pip install "fastokens>=0.2.0" (or unset VLLM_USE_FASTOKENS)',
)


fixed_failure(
    "trust_remote_code",
    150,
    Wording(
        (
            r"contains custom code which must be executed to correctly load the model",
            r"references custom code contained in .* which must be executed",
            r"requires you to execute the configuration file",
            r"`--trust-remote-code` flag in the CLI",
        ),
        "transformers/dynamic_module_utils.py (resolve_trust_remote_code); "
        "vllm/transformers_utils/config.py (HFConfigParser)",
        REGISTRY_RELEASES + OLDER_RELEASES + ("transformers 5.19.0",),
    ),
    "the checkpoint ships custom model code that vLLM will not run by default",
    "add --trust-remote-code to the serve flags (the recipe's trust_remote_code feature)",
)


@failure(
    "spec_token_budget",
    60,
    Wording(
        (
            r"max_num_scheduled_tokens is set to (?P<scheduled>-?\d+) based on the speculative "
            r"decoding settings, which does not allow any tokens to be scheduled",
            r"VllmConfig does not have enough slots to schedule a token and support the "
            r"speculative decoding settings\. Got max_num_batched_tokens=(?P<mnbt>\d+)",
            r"VllmConfig received max_num_scheduled_tokens but it does not have enough slots",
        ),
        "vllm/config/vllm.py (VllmConfig._set_max_num_scheduled_tokens); "
        "vllm/config/speculative.py (max_num_new_slots_for_drafting)",
        REGISTRY_RELEASES,
    ),
)
def _spec_token_budget(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    from helpers.memory.tokenbudget import spec_token_budget

    mnbt, seqs, method, k, version = _spec_settings(text, config)
    gd = m.groupdict()
    mnbt = mnbt or (int(gd["mnbt"]) if gd.get("mnbt") else None)
    settings = "--max-num-batched-tokens, --max-num-seqs and num_speculative_tokens"
    if mnbt and seqs and k:
        tb = spec_token_budget(mnbt, seqs, method or "", k, version)
        cause = (
            f"vLLM left no room to schedule tokens: --max-num-batched-tokens {mnbt} cannot hold "
            f"--max-num-seqs {seqs} sequences of 1 + {k} speculative tokens plus {tb.slots} "
            f"{method or 'drafting'} slots each ({tb.needed} tokens)"
        )
        fix = tb.fix()
    else:
        got = gd.get("scheduled")
        cause = (
            "vLLM left no room to schedule tokens: the speculative decoding settings reserve more "
            "token slots than --max-num-batched-tokens holds"
            + (f" (max_num_scheduled_tokens {got})" if got else "")
        )
        fix = (
            "raise --max-num-batched-tokens to at least max_num_seqs x (1 + num_speculative_tokens "
            "+ drafting slots), or lower --max-num-seqs or num_speculative_tokens "
            "(helpers.memory.tokenbudget.spec_token_budget gives the numbers)"
        )
    return Diagnosis(
        "spec_token_budget", f"{cause}; the three settings are {settings}", fix, _line_of(m, text)
    )


@failure(
    "nvfp4_no_moe_backend",
    70,
    Wording(
        (
            r"No NvFp4 MoE backend supports the deployment configuration",
            r"NvFp4 MoE backend '(?P<backend>\w+)' does not support the deployment "
            r"configuration(?: since (?P<why>[^\n]*?))?\.?$",
        ),
        "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py (select_nvfp4_moe_backend)",
        REGISTRY_RELEASES,
    ),
)
def _nvfp4_no_moe_backend(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    backend = (m.groupdict().get("backend") or "").strip()
    why = (m.groupdict().get("why") or "").strip()
    gpu = getattr(config, "gpu", None) or {}
    where = ""
    if gpu.get("name"):
        cc = gpu.get("compute_capability")
        where = f" on {gpu['name']}" + (f" (compute capability {cc})" if cc else "")
    version = _spec_settings(text, config)[4]
    rel = f"vLLM {version}" if version else "this vLLM release"
    because = f" ({why})" if why else ""
    if backend:
        cause = f"the requested NVFP4 MoE backend {backend.lower()} cannot run{where} with {rel}{because}"
    else:
        cause = f"{rel} has no NVFP4 MoE kernel for this GPU{where}{because}"
    target, notes = getattr(config, "target", None), getattr(config, "notes", None) or []
    notes = [str(n) for n in notes if "MoE" in str(n) or "NVFP4" in str(n)]
    first = re.split(r"(?<=\.)\s", notes[0])[0].rstrip(".") if notes else ""
    see = (
        f" (cookbook/recipe.yaml, target {target!r}: {first})"
        if target and notes
        else " (the rtx-50xx and rtx-pro-6000 targets' notes in cookbook/recipe.yaml)"
    )
    fix = (
        "pin a backend that has one: --moe-backend marlin (W4A16 Marlin MoE, what the rtx-50xx and rtx-pro-6000 entries pin), "
        "or serve the BF16 checkpoint (variant bf16), or install a vLLM release whose NVFP4 MoE "
        f"kernels cover this GPU{see}"
    )
    if why.endswith("support LoRA"):  # modular_kernel.py is_supported_config, 0.32.0-0.34.0
        fix = (
            "--enable-lora builds every MoE layer for LoRA and only Marlin's NVFP4 experts take "
            "it: add --moe-backend marlin (lab.adapters.check.moe_lora_flags), or drop --enable-lora"
        )
    return Diagnosis("nvfp4_no_moe_backend", cause, fix, _line_of(m, text))


@failure(
    "engine_stalled",
    110,
    Wording(
        (r"Running: \d+ reqs,",),
        "vllm/v1/metrics/loggers.py (LoggingStatLogger.log, every VLLM_LOG_STATS_INTERVAL s)",
        REGISTRY_RELEASES + OLDER_RELEASES,
    ),
)
def _engine_stalled(m: re.Match[str], text: str, config: Any) -> Diagnosis | None:
    found = stalled_span(text)
    if found is None:
        hung = stalled_span(text, running=True)
        return engine_hung(hung[0], hung[1], config, evidence=hung[2]) if hung else None
    seconds, waiting, line = found
    return Diagnosis(
        "engine_stalled",
        f"{ENGINE_STALLED} ({waiting} waiting, 0 running, no "
        f"prompt or generation throughput for {seconds:.0f} s) while the API still answers",
        "the scheduler cannot admit them: check that one request fits the KV cache and "
        "--max-num-batched-tokens (helpers.memory.planner.plan), look for an engine error or a "
        "speculative-decoding budget warning above, then restart the server",
        line,
    )


@failure(
    "max_model_len_too_long",
    20,
    Wording(
        (
            r"User-specified max_model_len \((?P<asked>\d+)\) is greater than the derived "
            r"max_model_len \((?P<key>[\w.]+)=(?P<derived>[\d.]+)",
        ),
        "vllm/config/model.py (_get_and_verify_max_len), vLLM 0.32.0",
        ("vllm 0.32.0",),
    ),
)
def _max_len_too_long(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    asked, key, derived = m.group("asked"), m.group("key"), m.group("derived")
    try:
        to = str(int(float(derived)))
    except ValueError:
        to = derived
    return Diagnosis(
        "max_model_len_too_long",
        f"--max-model-len {asked} is greater than the model's derived maximum ({key}={derived} "
        "in its config.json)",
        f"set --max-model-len {to} or less; only if the model really handles longer positions, "
        "set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (extra_env; past the trained length RoPE models "
        "produce NaNs)",
        _line_of(m, text),
    )
