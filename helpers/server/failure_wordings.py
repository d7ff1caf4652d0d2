"""What vLLM (or a library it lets through) writes for each known start-up failure: one
:class:`~helpers.server.vllm_log.Wording` per entry of :mod:`helpers.server.diagnose`'s
catalogue, with its source file and the releases read for it. ``python -m tools.drift``
checks each against a new release's source.
"""

from __future__ import annotations

from helpers.server.vllm_log import OLDER_RELEASES, REGISTRY_RELEASES, Wording

#: One :class:`Wording` per catalogue entry of :mod:`helpers.server.diagnose`, keyed by the
#: :attr:`~helpers.server.failures.Diagnosis.name` it produces, in the order they are tried.
FAILURES: dict[str, Wording] = {
    "damaged_checkpoint": Wording(
        (
            r"SafetensorError: Error while deserializing header: .*",
            r"It looks like the config file at '(?P<path>[^']+)' is not a valid JSON file",
        ),
        "safetensors 0.8.0 (safe_open: 'Error while deserializing header') via vLLM 0.32.0 "
        "model_loader/weight_utils.py; transformers configuration_utils.py "
        "(_get_config_dict) via vllm/transformers_utils/config.py",
        ("vllm 0.32.0", "safetensors 0.8.0", "transformers 5.19.0"),
    ),
    "max_model_len_too_long": Wording(
        (
            r"User-specified max_model_len \((?P<asked>\d+)\) is greater than the derived "
            r"max_model_len \((?P<key>[\w.]+)=(?P<derived>[\d.]+)",
        ),
        "vllm/config/model.py (_get_and_verify_max_len), vLLM 0.32.0",
        ("vllm 0.32.0",),
    ),
    "humming_non_gated_moe": Wording(
        (
            r"weight shape mismatched: attr\['shape'\]=\(\d+, (?P<want>\d+), \d+\), "
            r"tensor\.shape=torch\.Size\(\[\d+, (?P<got>\d+), \d+\]\)",
        ),
        "humming/schema/base.py (validate_tensors) via vLLM 0.26.0 "
        "quantization/utils/humming_utils.py; recorded on an H200 (docs/results/h200.md)",
        ("vllm 0.26.0 (recorded log; the wording is the humming-kernels package's)",),
    ),
    "stochastic_rounding_sm90": Wording(
        (r"Feature '\.rs' not supported on \.target 'sm_(\d+)a?'",),
        "ptxas via Triton; vllm/config/mamba.py (stochastic rounding needs compute capability "
        "10.0 or the flashinfer Mamba backend); seen on an H200 (docs/results/h200.md)",
        REGISTRY_RELEASES,
    ),
    "ssu_mtp_sm90": Wording(
        (r"vertical/horizontal MTP algorithm requires SM100\+ \(Blackwell\)",),
        "flashinfer-python 0.7.0.post1 include/flashinfer/mamba/invoke_selective_state_update_mtp.cuh "
        "(the multi-token SSU kernel behind speculative decoding: only 'simple' below SM100; 'auto' "
        "picks it); recorded on an H200, vLLM 0.32.0, MTP with --mamba-ssu-algorithm horizontal",
        ("vllm 0.32.0 (recorded log; the wording is flashinfer-python's)",),
    ),
    "spec_token_budget": Wording(
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
    "nvfp4_no_moe_backend": Wording(
        (
            r"No NvFp4 MoE backend supports the deployment configuration",
            r"NvFp4 MoE backend '(?P<backend>\w+)' does not support the deployment "
            r"configuration(?: since (?P<why>[^\n]*?))?\.?$",
        ),
        "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py (select_nvfp4_moe_backend)",
        REGISTRY_RELEASES,
    ),
    "disk_space": Wording(
        (
            r"Not enough free disk space to download the file",
            r"No space left on device",
        ),
        "huggingface_hub/file_download.py (_check_disk_space, a UserWarning); OSError errno 28",
        ("huggingface_hub 2.4.0",),
    ),
    "engine_stalled": Wording(
        (r"Running: 0 reqs,",),
        "vllm/v1/metrics/loggers.py (LoggingStatLogger.log, every VLLM_LOG_STATS_INTERVAL s)",
        REGISTRY_RELEASES + OLDER_RELEASES,
    ),
    "mamba_cache_blocks": Wording(
        (r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)",),
        "vllm/config/compilation.py (CompilationConfig, full decode CUDA graphs for Mamba)",
        REGISTRY_RELEASES,
    ),
    "fastokens_unsupported_tokenizer": Wording(
        (
            r"pre-tokenizer error: unsupported pre-tokenizer type: \w+",
            r"model error: unsupported model type: \w+",
        ),
        "fastokens 0.3.5 (Tokenizer.from_file's errors, checked here on CPU) raised inside "
        "vLLM 0.32.0's VllmConfig; recorded on an H200 (docs/results/h200.md)",
        ("vllm 0.32.0 (recorded log)", "fastokens 0.3.5"),
    ),
    "missing_fastokens": Wording(
        (
            r"The 'fastokens' package \(>= [\d.]+\) is required when VLLM_USE_FASTOKENS=1",
            r"fastokens >= [\d.]+ is required when VLLM_USE_FASTOKENS=1",
        ),
        "vllm/tokenizers/fastokens.py (apply_fastokens_patch)",
        REGISTRY_RELEASES,
    ),
    "trust_remote_code": Wording(
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
    "hub_token_invalid": Wording(
        (
            r"Invalid credentials in Authorization header",
            r"Invalid username or password\.",
        ),
        "the hub's X-Error-Message on a 401 for a bad token, which huggingface_hub 2.4.0's "
        "utils/_http.py (hf_raise_for_status) raises as HfHubHTTPError (not RepositoryNotFound); "
        "recorded from vLLM 0.32.0 against tests/fake_hub.py",
        ("huggingface_hub 2.4.0", "transformers 5.19.0", "vllm 0.32.0 (recorded log)"),
    ),
    # Gated wording only: RepositoryNotFoundError's text always carries "If you are trying to
    # access a private or gated repo", which is not evidence of a gated repo (hub_repo_not_found).
    "gated_repo": Wording(
        (
            r"GatedRepoError",
            r"Cannot access gated repo for url",
            r"You are trying to access a gated repo",
            r"is a gated repository\. Make sure to request access",
        ),
        "huggingface_hub/utils/_http.py (hf_raise_for_status); transformers/utils/hub.py",
        ("huggingface_hub 2.4.0", "transformers 5.19.0", "vllm 0.32.0 (recorded log)"),
    ),
    "hub_repo_not_found": Wording(
        (
            r"Repository Not Found for url: \S*?huggingface\.co/(?:api/models/)?(?P<repo>[\w.-]+/[\w.-]+?)(?:/resolve/|/revision/|/tree/|\.?$)",
            r"RepositoryNotFoundError",
            r"(?P<repo>[\w.-]+/[\w.-]+) is not a local folder and is not a valid model identifier",
            r"(?P<repo>[\w.-]+/[\w.-]+) is not a local folder or a valid repository name",
        ),
        "huggingface_hub 2.4.0 utils/_http.py (hf_raise_for_status: RepositoryNotFoundError, 401 "
        "without a token or 404 with one); transformers 5.19.0 utils/hub.py (cached_files' "
        "OSError); recorded from vLLM 0.32.0 against tests/fake_hub.py",
        ("huggingface_hub 2.4.0", "transformers 5.19.0", "vllm 0.32.0 (recorded log)"),
    ),
    "unrecognized_arguments": Wording(
        (r"error: unrecognized arguments: (.+)$",),
        "argparse via vllm/utils/argparse_utils.py (FlexibleArgumentParser.error)",
        REGISTRY_RELEASES + OLDER_RELEASES + ("python 3.11 argparse",),
    ),
    "invalid_choice": Wording(
        (
            r"error: argument (--[\w-]+)(?:/[-\w]+)*: invalid choice: '([^']*)' \(choose from (.+)\)",
        ),
        "argparse via vllm/utils/argparse_utils.py",
        REGISTRY_RELEASES + OLDER_RELEASES + ("python 3.11 argparse",),
    ),
    "kv_cache_too_small": Wording(
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
    "no_cache_memory": Wording(
        (r"No available memory for the cache blocks",),
        "vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory)",
        REGISTRY_RELEASES + OLDER_RELEASES,
    ),
    "memory_in_use": Wording(
        (
            r"Free memory on device (?:\S+ )?\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup "
            r"is less than desired GPU memory utilization \((?P<util>[\d.]+)",
            r"Available memory on node \d+ \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup "
            r"is less than desired CPU memory utilization \((?P<util>[\d.]+)",
        ),
        "vllm/v1/worker/utils.py (request_memory); vllm/v1/worker/cpu_worker.py (CPUWorker)",
        REGISTRY_RELEASES,
    ),
    "out_of_memory": Wording(
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
    "flashinfer_no_nvcc": Wording(
        (r"Could not find nvcc and default cuda_home='(?P<home>[^']*)' doesn't exist",),
        "flashinfer/jit/cpp_ext.py (get_cuda_path), flashinfer-python 0.7.0.post1 (vLLM 0.32.0's "
        "pin) and 0.6.16.post3 (0.27.0-0.28.0's), read in their wheels; the sampler path "
        "vllm/v1/sample/ops/topk_topp_sampler.py (flashinfer_sample), vLLM 0.32.0",
        ("flashinfer 0.7.0.post1", "flashinfer 0.6.16.post3", "vllm 0.32.0"),
    ),
    "cuda_version_mismatch": Wording(
        (
            r"libcudart\.so\.(?P<want>\d+): cannot open shared object file",
            r"The NVIDIA driver on your system is too old \(found version (?P<found>\d+)\)",
        ),
        "the dynamic loader on vllm/_C_stable_libtorch.abi3.so (vLLM 0.32.0's wheel NEEDs "
        "libcudart.so.13; imported by vllm/platforms/cuda.py), message produced here from that "
        "wheel; torch 2.13.0 c10/cuda/CUDAFunctions.cpp (read in libc10_cuda.so of its wheel)",
        ("vllm 0.32.0", "torch 2.13.0"),
    ),
    # After the specific failures: a start that loaded a compile-cache artifact and then died
    # with something above (out of memory, a bad flag) is that failure, not the cache.
    "compile_cache": Wording(
        (
            r"vLLM failed to compile the model\. The most likely reason for this is that a "
            r"previous compilation failed, leading to a corrupted compilation artifact",
            r"Inductor cache lookup failed\. Please remove the cache directory and try again",
            r"Compiling model again due to a load failure from (?P<path>\S+), reason: (?P<why>.*)$",
            r"Directly load AOT compilation from path (?P<path>\S+)",
            r"Directly load the compiled graph\(s\) for compile range",
        ),
        "vllm/compilation/compiler_interface.py (InductorAdaptor.compile / load), "
        "vllm/compilation/decorators.py (_try_load_aot_compiled_fn, the AOT load path), "
        "vllm/compilation/backends.py (load from the cache); vLLM 0.32.0, recorded on the "
        "stand-in with a damaged AOT artifact (tests/record_logs.py)",
        ("vllm 0.32.0",),
    ),
    "internal_port_in_use": Wording(
        (
            r"failed to listen on any local network address\. port: (?P<port>\d+).*EADDRINUSE",
            r"DistNetworkError.*EADDRINUSE",
            r"ZMQError: Address already in use \(addr='[^']*:(?P<port>\d+)'\)",
        ),
        "torch c10d TCPStore (socket.cpp); vllm/config/parallel.py; pyzmq",
        ("pyzmq 27.3.0 (ZMQError)", "torch 2.13.0 (DistNetworkError)"),
    ),
    "port_in_use": Wording(
        (
            r"OSError: \[Errno 98\] (?:error while attempting to bind on address .*: )?[Aa]ddress already in use",
        ),
        "vllm/entrypoints/launchers/launcher.py (create_server_socket: sock.bind)",
        REGISTRY_RELEASES + OLDER_RELEASES,
    ),
}
