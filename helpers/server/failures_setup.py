"""The sentences for start-up failures that come from what the machine and the downloads set
up (hub access, disk, checkpoint, compile cache, CUDA and FlashInfer installs), declared as
:mod:`helpers.server.failures` says.
"""

from __future__ import annotations

import re
from typing import Any

from helpers.config.versions import _dist_version
from helpers.server import vllm_log
from helpers.server.failures import (
    Diagnosis,
    _flag_value,
    _installed_vllm,
    _is_standin,
    _line_of,
    _non_default_args,
    _spec_settings,
    failure,
    fixed_failure,
)
from helpers.server.vllm_log import REGISTRY_RELEASES, Wording


@failure(
    "gated_repo",
    170,
    Wording(
        (
            r"GatedRepoError",
            r"Cannot access gated repo for url",
            r"You are trying to access a gated repo",
            r"is a gated repository\. Make sure to request access",
        ),
        "huggingface_hub/utils/_http.py (hf_raise_for_status); transformers/utils/hub.py",
        ("huggingface_hub 2.4.0", "transformers 5.19.0", "vllm 0.32.0 (recorded log)"),
    ),
)
def _gated(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    repo = _hub_repo(m, text, config)
    where = f"https://huggingface.co/{repo}" if repo else "the model page on huggingface.co"
    return Diagnosis(
        "gated_repo",
        f"the hub refused the download of {repo or 'the model'} (gated repo: licence not accepted "
        "or no token)",
        f"accept the licence at {where} and set HF_TOKEN (or run `hf auth login`) before starting",
        _line_of(m, text),
    )


@failure(
    "hub_token_invalid",
    160,
    Wording(
        (
            r"Invalid credentials in Authorization header",
            r"Invalid username or password\.",
        ),
        "the hub's X-Error-Message on a 401 for a bad token, which huggingface_hub 2.4.0's "
        "utils/_http.py (hf_raise_for_status) raises as HfHubHTTPError (not RepositoryNotFound); "
        "recorded from vLLM 0.32.0 against tests/support/fake_hub.py",
        ("huggingface_hub 2.4.0", "transformers 5.19.0", "vllm 0.32.0 (recorded log)"),
    ),
)
def _hub_token_invalid(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    from helpers.weights.hub import TOKENS_PAGE

    repo = _hub_repo(m, text, config)
    return Diagnosis(
        "hub_token_invalid",
        f"the hub refused the token sent for {repo or 'the model'} (HTTP 401: an invalid or "
        "expired token; not a missing or gated repo)",
        f"create a read token at {TOKENS_PAGE} and set HF_TOKEN to it (or `hf auth login`) "
        "before starting, or unset HF_TOKEN if the repo is public",
        _line_of(m, text),
    )


def _hub_repo(m: re.Match[str], text: str, config: Any) -> str | None:
    """The repo id of a hub error: the match's own, a hub URL near it, else the config's model."""
    repo = m.groupdict().get("repo")
    if repo:
        return repo.rstrip(".")
    window = text[max(0, m.start() - 3000) : m.end() + 3000]
    for url in re.finditer(vllm_log.HUB_REPO_URL, window):
        if url.group(1).split("/")[0] not in ("docs", "api", "settings", "datasets", "spaces"):
            return url.group(1).rstrip(".")
    return getattr(config, "model", None) if config is not None else None


@failure(
    "hub_repo_not_found",
    180,
    Wording(
        (
            r"Repository Not Found for url: \S*?huggingface\.co/(?:api/models/)?(?P<repo>[\w.-]+/[\w.-]+?)(?:/resolve/|/revision/|/tree/|\.?$)",
            r"RepositoryNotFoundError",
            r"(?P<repo>[\w.-]+/[\w.-]+) is not a local folder and is not a valid model identifier",
            r"(?P<repo>[\w.-]+/[\w.-]+) is not a local folder or a valid repository name",
        ),
        "huggingface_hub 2.4.0 utils/_http.py (hf_raise_for_status: RepositoryNotFoundError, 401 "
        "without a token or 404 with one); transformers 5.19.0 utils/hub.py (cached_files' "
        "OSError); recorded from vLLM 0.32.0 against tests/support/fake_hub.py",
        ("huggingface_hub 2.4.0", "transformers 5.19.0", "vllm 0.32.0 (recorded log)"),
    ),
)
def _hub_repo_not_found(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    from helpers.weights.hub import missing_repo_words

    repo = _hub_repo(m, text, config)
    status = re.search(vllm_log.HUB_STATUS, text[max(0, m.start() - 3000) : m.end() + 3000])
    cause, fix = missing_repo_words(repo, int(status.group(1)) if status else None)
    return Diagnosis("hub_repo_not_found", cause, fix, _line_of(m, text))


fixed_failure(
    "humming_non_gated_moe",
    30,
    Wording(
        (
            r"weight shape mismatched: attr\['shape'\]=\(\d+, (?P<want>\d+), \d+\), "
            r"tensor\.shape=torch\.Size\(\[\d+, (?P<got>\d+), \d+\]\)",
        ),
        "humming/schema/base.py (validate_tensors) via vLLM 0.26.0 "
        "quantization/utils/humming_utils.py; recorded on an H200 (docs/results/h200.md)",
        ("vllm 0.26.0 (recorded log; the wording is the humming-kernels package's)",),
    ),
    "this vLLM's Humming MoE kernel sized each expert's up-projection for a gated MLP "
    "({want} rows, gate + up) but Nemotron's experts are non-gated relu² ({got} rows); "
    "vLLM 0.27.0 fixed it (vllm-project/vllm#49096), 0.26.0 has the bug",
    "serve with --moe-backend marlin on this vLLM, or install vLLM 0.27.0 or newer "
    "(the h100/h200 targets pin 0.28.0: helpers.machine.install)",
)


fixed_failure(
    "stochastic_rounding_sm90",
    40,
    Wording(
        (r"Feature '\.rs' not supported on \.target 'sm_(\d+)a?'",),
        "ptxas via Triton; vllm/config/mamba.py (stochastic rounding needs compute capability "
        "10.0 or the flashinfer Mamba backend); seen on an H200 (docs/results/h200.md)",
        REGISTRY_RELEASES,
    ),
    "Triton's Mamba SSM-update kernel with stochastic rounding needs the cvt.rs "
    "instruction, which sm_{0} lacks (Blackwell, compute capability 10.0, has it)",
    "add --mamba-backend flashinfer (the recipe's Hopper choice, needs flashinfer-python) "
    "or drop --enable-mamba-cache-stochastic-rounding and --mamba-cache-philox-rounds",
)


fixed_failure(
    "ssu_mtp_sm90",
    50,
    Wording(
        (r"vertical/horizontal MTP algorithm requires SM100\+ \(Blackwell\)",),
        "flashinfer-python 0.7.0.post1 include/flashinfer/mamba/invoke_selective_state_update_mtp.cuh "
        "(the multi-token SSU kernel behind speculative decoding: only 'simple' below SM100; 'auto' "
        "picks it); recorded on an H200, vLLM 0.32.0, MTP with --mamba-ssu-algorithm horizontal",
        ("vllm 0.32.0 (recorded log; the wording is flashinfer-python's)",),
    ),
    "speculative decoding runs FlashInfer's multi-token Mamba state update, whose horizontal "
    "and vertical algorithms exist only for SM100+ (Blackwell); on this GPU only 'simple' "
    "does (--mamba-ssu-algorithm horizontal is the Hopper choice without drafting)",
    "drop --mamba-ssu-algorithm (FlashInfer's auto picks simple here) or pass "
    "--mamba-ssu-algorithm simple while drafting; the registry does both for Hopper targets "
    "(speculative.<mode>.hardware_overrides.hopper in cookbook/recipe.yaml)",
)


@failure(
    "lora_adapter_refused",
    45,
    Wording(
        (r"Call to add_lora method failed: (.+?)\.?$",),
        "vllm/v1/engine/core.py (a failed utility call's failure_message), raised from vllm/lora/",
        tuple(f"vllm {v}" for v in ("0.27.0", "0.27.1", "0.28.0", "0.32.0", "0.33.0", "0.34.0")),
    ),
)
def _lora_refused(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    fix = "fix the adapter or drop it from --lora-modules; lab.adapters.check.check_adapter(folder, base) names what vLLM refuses before a launch (rank, modules, DoRA, shapes)"
    if m.group(1).startswith("LoRA is not enabled"):  # v1/worker/lora_model_runner_mixin.py
        fix = "add --enable-lora (lab.adapters.spec.lora_config adds it) or drop --lora-modules"
    cause = f"vLLM could not load a LoRA adapter named in --lora-modules, so the start ended: {m.group(1)}"
    return Diagnosis("lora_adapter_refused", cause, fix, _line_of(m, text))


@failure(
    "disk_space",
    80,
    Wording(
        (
            r"Not enough free disk space to download the file",
            r"No space left on device",
        ),
        "huggingface_hub/file_download.py (_check_disk_space, a UserWarning); OSError errno 28",
        ("huggingface_hub 2.4.0",),
    ),
)
def _disk_space(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    hub = re.search(vllm_log.HUB_DISK_SPACE, text)
    if hub:
        need, free, where = float(hub.group("need")), float(hub.group("free")), hub.group("dir")
        cause = (
            f"the disk ran out of space during the download: a {need:,.2f} MB file "
            f"({need / 1000:.2f} GB) into {where}, which has {free:,.2f} MB ({free / 1000:.2f} GB) free"
        )
        evidence = _line_of(hub, text)
    else:
        where = ""
        cause = "the disk ran out of space (No space left on device) while writing the weights or caches"
        evidence = _line_of(m, text)
    fix = (
        "free disk space there (hf cache ls, then hf cache rm / hf cache prune: huggingface_hub 2.4.0's CLI), or point "
        "HF_HOME / HF_HUB_CACHE at a disk with room for the checkpoint (NVFP4 ~18 GB, BF16 ~60 GB), "
        "then start again"
    )
    return Diagnosis("disk_space", cause, fix, evidence)


@failure(
    "damaged_checkpoint",
    10,
    Wording(
        (
            r"SafetensorError: Error while deserializing header: .*",
            r"It looks like the config file at '(?P<path>[^']+)' is not a valid JSON file",
        ),
        "safetensors 0.8.0 (safe_open: 'Error while deserializing header') via vLLM 0.32.0 "
        "model_loader/weight_utils.py; transformers configuration_utils.py "
        "(_get_config_dict) via vllm/transformers_utils/config.py",
        ("vllm 0.32.0", "safetensors 0.8.0", "transformers 5.19.0"),
    ),
)
def _damaged_checkpoint(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    model = getattr(config, "model", None) if config is not None else None
    folder = m.groupdict().get("path") or model or "the model folder"
    standin = bool(model) and _is_standin(model)
    fix = (
        "rebuild with `build_standin_model(force=True)` (helpers.standin.build)"
        if standin
        else "download the checkpoint again (helpers.weights.download.download(..., force_download=True)); "
        "helpers.standin.build.check_checkpoint(folder) finds the damaged file before launch"
    )
    what = (
        "a weights file (.safetensors) is truncated or damaged"
        if "afetensor" in m.group(0)
        else (f"config.json of {folder} is not valid JSON")
    )
    return Diagnosis(
        "damaged_checkpoint", f"the checkpoint is damaged: {what}", fix, _line_of(m, text)
    )


def cache_root_of(text: str, config: Any = None) -> str:
    """The ``VLLM_CACHE_ROOT`` a launch really used: the helpers' log header, else the root of
    an artifact path vLLM logged (``.../torch_compile_cache/...``), else the config's
    ``VLLM_CACHE_ROOT``, else vLLM's default ``~/.cache/vllm`` (a log of another process says
    nothing of this one's environment)."""
    m = re.search(vllm_log.CACHE_HEADER, text or "", flags=re.MULTILINE)
    if m:
        return m.group(1)
    for pattern in vllm_log.CACHE_PATHS:
        m = re.search(pattern, text or "")
        if m and "/torch_compile_cache" in m.group(1):
            return m.group(1).split("/torch_compile_cache", 1)[0]
    env = (getattr(config, "env", None) or {}) if config is not None else {}
    return str(env.get("VLLM_CACHE_ROOT") or vllm_log.VLLM_DEFAULT_CACHE_ROOT)


@failure(
    "compile_cache",
    250,
    Wording(
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
        "stand-in with a damaged AOT artifact (tests/support/record_logs.py)",
        ("vllm 0.32.0",),
    ),
)
def _compile_cache(m: re.Match[str], text: str, config: Any) -> Diagnosis | None:
    loaded = "Directly load" in m.group(0) or "load failure" in m.group(0)
    after = text[m.end() :]
    if loaded:
        # a cache load alone is the normal warm start: it counts only when the start then
        # died in a traceback through the loaded artifact (or a GPU error of a foreign kernel)
        tb = after.find("Traceback (most recent call last)")
        if tb < 0 or not re.search(vllm_log.CACHE_CRASH, after[tb:]):
            return None
    root = cache_root_of(text, config)
    folder = f"{root.rstrip('/')}/torch_compile_cache"
    path = m.groupdict().get("path")
    if "load failure" in m.group(0):
        why = (m.groupdict().get("why") or "").strip().rstrip(".")
        cause = (
            f"the saved compile artifact {path} could not be loaded"
            + (f" ({why})" if why else "")
            + " and the start failed on it: the compile cache is damaged"
        )
    elif loaded:
        cause = (
            f"the start loaded a saved compile artifact ({path or 'from the cache'}) and crashed "
            "running it: an artifact from another GPU, kernel build or vLLM release, or a damaged one"
        )
    else:
        cause = (
            "vLLM failed to load or compile the model from its compile cache: an earlier "
            "compile failed or was cut short and left a damaged artifact"
        )
    advice = (
        f" (vLLM's own message names {vllm_log.VLLM_DEFAULT_CACHE_ROOT}/torch_compile_cache; "
        f"this launch's VLLM_CACHE_ROOT is {root})"
        if root != vllm_log.VLLM_DEFAULT_CACHE_ROOT
        else ""
    )
    fix = (
        f"move {folder} aside (mv {folder} {folder}.bad) and start again, or start once with "
        "VLLM_DISABLE_COMPILE_CACHE=1 (extra_env) to compile without the cache and see any real "
        f"error{advice}"
    )
    return Diagnosis("compile_cache", cause, fix, _line_of(m, text))


@failure(
    "flashinfer_no_nvcc",
    90,
    Wording(
        (r"Could not find nvcc and default cuda_home='(?P<home>[^']*)' doesn't exist",),
        "flashinfer/jit/cpp_ext.py (get_cuda_path), flashinfer-python 0.7.0.post1 (vLLM 0.32.0's "
        "pin) and 0.6.16.post3 (0.27.0-0.28.0's), read in their wheels; the sampler path "
        "vllm/v1/sample/ops/topk_topp_sampler.py (flashinfer_sample), vLLM 0.32.0",
        ("flashinfer 0.7.0.post1", "flashinfer 0.6.16.post3", "vllm 0.32.0"),
    ),
)
def _flashinfer_no_nvcc(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    from helpers.machine import gpu_wheels

    before = text[max(0, m.start() - 8000) : m.start()]
    tb = before.rfind("Traceback (most recent call last)")
    trace = before[tb:] if tb >= 0 else ""  # the frames of this error only
    caller = next(
        (what for what, pattern in vllm_log.FLASHINFER_CALLERS if re.search(pattern, trace)),
        None,
    )
    version = _spec_settings(text, config)[4] or _installed_vllm()
    pin = _dist_version("flashinfer-python") or gpu_wheels.FLASHINFER_PINS.get(str(version))
    cuda = (
        gpu_wheels.CUDA12_VARIANT
        if "+cu12" in str(_installed_vllm())
        else gpu_wheels.DEFAULT_CUDA_VARIANT
    )
    where = f"{caller} " if caller else ""
    cause = (
        f"FlashInfer tried to compile a kernel for {where}at its first use and found no CUDA "
        f"compiler (no nvcc on PATH, no {m.group('home')}): a pip/uv install has no CUDA toolkit"
    )
    if pin:
        kernels = (
            f"install FlashInfer's prebuilt kernels pinned to flashinfer-python {pin}: pip install "
            f"--no-deps --index-url {gpu_wheels.FLASHINFER_INDEX} flashinfer-cubin=={pin} and pip install "
            f"--index-url {gpu_wheels.FLASHINFER_INDEX}/{cuda} flashinfer-jit-cache=={pin}+{cuda} "
            "(helpers.machine.install plans them)"
        )
    else:
        kernels = (
            "install FlashInfer's prebuilt kernels for the installed flashinfer-python "
            "(`vllm download-kernels`, or flashinfer-cubin / flashinfer-jit-cache of the same version)"
        )
    fix = f"{kernels}; or install a CUDA toolkit with nvcc and set CUDA_HOME to it"
    if caller is None or "sampler" in caller:
        fix += "; or, for the sampler alone, set VLLM_USE_FLASHINFER_SAMPLER=0 (vLLM's own sampler)"
    return Diagnosis("flashinfer_no_nvcc", cause, fix, _line_of(m, text))


@failure(
    "cuda_version_mismatch",
    100,
    Wording(
        (
            r"libcudart\.so\.(?P<want>\d+): cannot open shared object file",
            r"The NVIDIA driver on your system is too old \(found version (?P<found>\d+)\)",
        ),
        "the dynamic loader on vllm/_C_stable_libtorch.abi3.so (vLLM 0.32.0's wheel NEEDs "
        "libcudart.so.13; imported by vllm/platforms/cuda.py), message produced here from that "
        "wheel; torch 2.13.0 c10/cuda/CUDAFunctions.cpp (read in libc10_cuda.so of its wheel)",
        ("vllm 0.32.0", "torch 2.13.0"),
    ),
)
def _cuda_version_mismatch(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    from helpers.machine import gpu_wheels, install
    from helpers.machine.gpus import cuda_from_nvml

    version = (
        getattr(config, "vllm_version", None) if config is not None else None
    ) or _installed_vllm()
    gd = m.groupdict()
    if gd.get("found"):
        major, minor = cuda_from_nvml(int(gd["found"]))
        cause = (
            f"the NVIDIA driver supports CUDA {major}.{minor} (torch: found version {gd['found']}) "
            "but this torch is a CUDA 13 build (PyPI's vLLM wheel and its torch 2.13.0 are built "
            "for CUDA 13)"
        )
    else:
        want = gd.get("want")
        cause = (
            f"vLLM's compiled kernels need the CUDA {want} runtime (libcudart.so.{want}) and this "
            f"environment has none: PyPI's vLLM wheel is built for CUDA {want}, the torch or "
            "system here for another CUDA (e.g. uv --torch-backend auto on a CUDA 12 driver)"
        )
    if version and version != "nightly":
        build = f"reinstall vLLM's +cu129 build with its torch ({install.cu129_install_command(version)})"
    else:
        build = (
            "reinstall vLLM's +cu129 build (the nightly's cu129 index) with PyTorch's cu129 torch"
        )
    fix = (
        f"{build}, which runs on any CUDA 12 driver (helpers.machine.install.ensure_vllm picks it "
        f"from the driver's CUDA version), or update the NVIDIA driver to {gpu_wheels.CUDA13_DRIVER} "
        "or newer (CUDA 13) and keep the default wheel"
    )
    return Diagnosis("cuda_version_mismatch", cause, fix, _line_of(m, text))


@failure(
    "loader_package",
    87,
    Wording(
        (
            r"ModuleNotFoundError: No module named '(?P<module>[\w.]+)'",
            r"Please install (?P<module>\w+) via `pip install vllm\[\w+\]`",
            r"TypeError: (?P<call>[\w.]+)\(\) got an unexpected keyword argument '(?P<kw>\w+)'",
        ),
        "vllm/model_executor/model_loader/weight_utils.py (fastsafetensors_weights_iterator, "
        "instanttensor_weights_iterator: the import, and instanttensor.safe_open(copy=True, "
        "tensor_filter=...) which instanttensor 0.1.9 refuses with this TypeError); recorded "
        "from vLLM 0.32.0 with the package missing and with fastsafetensors 0.1.15",
        ("vllm 0.32.0 (recorded log)", "instanttensor 0.1.9"),
    ),
)
def _loader_package(m: re.Match[str], text: str, config: Any) -> Diagnosis | None:
    from helpers.machine.extras import package_requirement

    module = m.groupdict().get("module")
    if module is None:  # a TypeError counts only inside a weight loader of a package
        frame = re.findall(r"in (\w+)_weights_iterator", text[max(0, m.start() - 4000) : m.start()])
        module = frame[-1] if frame else ""
    version = _spec_settings(text, config)[4] or _installed_vllm()
    found = package_requirement(module, version) if module else None
    if found is None:
        return None
    req, extra, release = found
    dist = re.match(r"[\w.-]+", req).group(0)
    fmt = _flag_value(config, "--load-format") or _non_default_args(text).get("load_format")
    need = f"--load-format {fmt} needs" if fmt else f"vLLM {release} needs"
    floor = f"{req}, vLLM {release}'s floor" + (f" in its [{extra}] extra" if extra else "")
    if m.groupdict().get("kw") or "." in module:
        cause = f"{need} {dist} ({floor}) and the installed one is older: {m.group(0)}"
    else:
        cause = f"{need} the {dist} package ({floor}), which is not installed here"
    fix = (
        f"install it with pip install -U '{req}' (a --no-deps install or another image can "
        "lack it; helpers.machine.install adds it where the release leaves it to an extra)"
    )
    if fmt:
        fix += ", or drop the flag (extra_args={'--load-format': None}: vLLM's own loader)"
    return Diagnosis("loader_package", cause, fix, _line_of(m, text))


@failure(
    "humming_unified_memory_nvml",
    33,
    Wording(
        (r"NVMLError_NotSupported: Not Supported",),
        "humming-kernels 0.1.10 / 0.1.11 humming/utils/device.py (calculate_gpu_bandwidth: "
        "pynvml.nvmlDeviceGetMaxClockInfo(handle, NVML_CLOCK_MEM), which a GB10 without a "
        "memory clock refuses), reached from vllm/model_executor/layers/fused_moe/experts/"
        "fused_humming_moe.py (init_humming_moe); the exception's text is nvidia-ml-py's",
        ("humming-kernels 0.1.11", "humming-kernels 0.1.12", "nvidia-ml-py 13.615.71"),
    ),
)
def _humming_unified_memory(m: re.Match[str], text: str, config: Any) -> Diagnosis | None:
    trace = text[max(0, m.start() - 6000) : m.start()]
    if "humming" not in trace[trace.rfind("Traceback (most recent call last)") :]:
        return None
    return Diagnosis(
        "humming_unified_memory_nvml",
        "the humming MoE kernel (--moe-backend humming) asked NVML for the GPU's memory clock "
        "to size its tiles, and a unified-memory GPU (GB10, DGX Spark) has none: NVML answers "
        "Not Supported (humming-kernels 0.1.11 and older; vLLM 0.26.0-0.27.1 pin 0.1.10)",
        "serve with --moe-backend marlin (the registry's GB10 and SM12x choice), or install "
        "vLLM 0.28.0 or newer, which pins humming-kernels 0.1.12 or newer: it uses GB10's 273 GB/s "
        "without asking NVML (inclusionAI/humming#49)",
        _line_of(m, text),
    )
