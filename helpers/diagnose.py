"""Read a vLLM server log and name the fix: a catalogue of known start-up failures.

``helpers.server`` calls :func:`diagnose` on the log whenever a server dies or times out
during start-up, and puts the result in :class:`helpers.errors.ServerStartError`. A
notebook can also call it on any log text::

    d = diagnose(open(log).read(), config=cfg)
    print(d)          # one sentence: what happened and what to change

Each catalogue entry matches wording that vLLM (or torch / transformers /
huggingface_hub, which vLLM lets through) writes into the log; the source file of each
wording is named next to its pattern, so an upgrade that rewords a message is easy to
find. Entries are tried in catalogue order; the first one that matches wins, so the
specific entries come before the broad ones (e.g. the Mamba cache-block check before
the generic out-of-memory one).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Diagnosis", "CatalogueEntry", "CATALOGUE", "diagnose", "last_error_line"]


@dataclass(frozen=True)
class Diagnosis:
    """A known failure found in a server log.

    Attributes:
        name: catalogue key, e.g. ``"mamba_cache_blocks"``.
        cause: what went wrong, in the log's own numbers.
        fix: what to change, naming the flag / command / variable.
        evidence: the log line that matched (for the reader who wants to check).
    """

    name: str
    cause: str
    fix: str
    evidence: str = ""

    @property
    def message(self) -> str:
        """One sentence: the cause, then the fix."""
        return f"{self.cause}: {self.fix}."

    def __str__(self) -> str:
        return self.message


Builder = Callable[["re.Match[str]", str, Any], Diagnosis]


@dataclass(frozen=True)
class CatalogueEntry:
    """One known failure: regexes on the log and a function that words the diagnosis.

    Attributes:
        name: the :attr:`Diagnosis.name` it produces.
        patterns: regexes (multiline, case-sensitive) tried in order against the log.
        build: ``build(match, log_text, config) -> Diagnosis``.
        source: where the wording comes from (file in vLLM / torch / transformers / hub).
    """

    name: str
    patterns: tuple[str, ...]
    build: Builder
    source: str


# ---------------------------------------------------------------------------------------
# helpers for the builders
# ---------------------------------------------------------------------------------------


def _line_of(match: re.Match[str], text: str) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end != -1 else len(text)].strip()[:400]


def _flag_value(config: Any, flag: str) -> str | None:
    """The value of ``flag`` in ``config.cli_flags()`` (None when absent or no config)."""
    if config is None or not hasattr(config, "cli_flags"):
        return None
    try:
        argv = list(config.cli_flags())
    except Exception:  # noqa: BLE001 - a diagnosis never fails on a strange config
        return None
    for i, item in enumerate(argv):
        if item == flag and i + 1 < len(argv):
            return argv[i + 1]
        if item.startswith(flag + "="):
            return item.split("=", 1)[1]
    return None


def _installed_vllm() -> str | None:
    from .install import detect_vllm

    return detect_vllm().version


def _target_bits(config: Any) -> tuple[str | None, str | None]:
    if config is None:
        return None, None
    return getattr(config, "target", None), getattr(config, "vllm_version", None)


def _api_port(text: str, config: Any) -> int | None:
    port = getattr(config, "port", None) if config is not None else None
    if port:
        return int(port)
    # vLLM's api_utils logs "non-default args: {... 'port': 8001, ...}" before binding.
    m = re.search(r"non-default args: \{.*?'port': (\d+)", text)
    return int(m.group(1)) if m else None


def _port_owner(port: int | None) -> str:
    """Words naming who holds ``port``: one of our recorded servers, or a process."""
    try:  # lazy: helpers.server imports this module
        from helpers.server import describe_port

        return describe_port(port)
    except Exception:  # noqa: BLE001 - the diagnosis still stands without the owner
        return ""


# ---------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------


def _mamba_blocks(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    seqs, blocks = int(m.group(1)), int(m.group(2))
    return Diagnosis(
        "mamba_cache_blocks",
        f"max_num_seqs ({seqs}) exceeds the {blocks} Mamba cache blocks that fit in memory "
        "(each running sequence needs one for the full CUDA graphs)",
        f"lower --max-num-seqs to {blocks} or less, or raise --gpu-memory-utilization",
        _line_of(m, text),
    )


def _kv_too_small(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    max_len = m.group(1)
    est = re.search(r"estimated maximum model length is (\d+)", text)
    to = f"lower --max-model-len to {est.group(1)}" if est else "lower --max-model-len"
    return Diagnosis(
        "kv_cache_too_small",
        f"one sequence of --max-model-len {max_len} tokens needs more KV cache than is left "
        "after loading the weights",
        f"{to}, raise --gpu-memory-utilization, or serve the smaller NVFP4 variant",
        _line_of(m, text),
    )


def _no_cache_memory(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    util = _flag_value(config, "--gpu-memory-utilization")
    now = f" (now {util})" if util else ""
    return Diagnosis(
        "no_cache_memory",
        "the weights and activations used all the memory vLLM may take, so none is left "
        "for the cache blocks",
        f"raise --gpu-memory-utilization{now}, lower --max-model-len / --max-num-seqs, or "
        "serve the smaller NVFP4 variant",
        _line_of(m, text),
    )


def _cuda_oom(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    phase = "while profiling or capturing CUDA graphs"
    if re.search(r"Starting to load model", text) and not re.search(
        r"Model loading took|Loading weights took", text
    ):
        phase = "while loading the weights"
    if phase == "while loading the weights":
        fix = (
            "serve the smaller NVFP4 variant or more GPUs (--tensor-parallel-size), "
            "and check nothing else holds GPU memory (nvidia-smi)"
        )
    else:
        fix = (
            "lower --gpu-memory-utilization (e.g. 0.85) and --max-model-len / --max-num-seqs, "
            "or serve the smaller NVFP4 variant"
        )
    return Diagnosis("out_of_memory", f"the GPU ran out of memory {phase}", fix, _line_of(m, text))


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


def _api_port_in_use(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    port = _api_port(text, config)
    which = f"API port {port}" if port else "the API port"
    return Diagnosis(
        "port_in_use",
        f"{which} is already in use{_port_owner(port)}",
        "stop that server (helpers.server.stop_server / end_leftovers()) or pass port=None "
        "so helpers.server picks a free port",
        _line_of(m, text),
    )


def _internal_port_in_use(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    port = m.group("port") if "port" in m.groupdict() else None
    which = f"internal port {port}" if port else "an internal port"
    return Diagnosis(
        "internal_port_in_use",
        f"vLLM's {which} (torch.distributed / ZMQ between the API server and engine) is "
        f"already in use{_port_owner(int(port)) if port and port.isdigit() else ''}",
        "end the earlier vLLM run (helpers.server.end_leftovers()) or unset / change "
        "VLLM_PORT (and MASTER_PORT) so vLLM picks free ones",
        _line_of(m, text),
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


def _fastokens(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    return Diagnosis(
        "missing_fastokens",
        "VLLM_USE_FASTOKENS=1 is set (the BF16 recipe's fast tokenizer) but the fastokens "
        "package (>= 0.2.0) is not installed",
        'install it with pip install "fastokens>=0.2.0" (or unset VLLM_USE_FASTOKENS)',
        _line_of(m, text),
    )


def _trust_remote_code(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    return Diagnosis(
        "trust_remote_code",
        "the checkpoint ships custom model code that vLLM will not run by default",
        "add --trust-remote-code to the serve flags (the recipe's trust_remote_code feature)",
        _line_of(m, text),
    )


def _gated(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    repo = None
    window = text[max(0, m.start() - 3000) : m.end() + 3000]
    for url in re.finditer(r"huggingface\.co/(?:api/models/)?([\w-]+/[\w.-]+)", window):
        if url.group(1).split("/")[0] not in ("docs", "api", "settings", "datasets", "spaces"):
            repo = url.group(1).rstrip(".")
            break
    if repo is None and config is not None and getattr(config, "model", None):
        repo = config.model
    where = f"https://huggingface.co/{repo}" if repo else "the model page on huggingface.co"
    return Diagnosis(
        "gated_repo",
        f"the hub refused the download of {repo or 'the model'} (gated repo: licence not accepted "
        "or no token)",
        f"accept the licence at {where} and set HF_TOKEN (or run `hf auth login`) before starting",
        _line_of(m, text),
    )


def _humming_non_gated(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    want, got = int(m.group("want")), int(m.group("got"))
    return Diagnosis(
        "humming_non_gated_moe",
        f"this vLLM's Humming MoE kernel sized each expert's up-projection for a gated MLP "
        f"({want} rows, gate + up) but Nemotron's experts are non-gated relu² ({got} rows); "
        "vLLM 0.27.0 fixed it (vllm-project/vllm#49096), 0.26.0 has the bug",
        "serve with --moe-backend marlin on this vLLM, or install vLLM 0.27.0 or newer "
        "(the h100/h200 targets pin 0.28.0: helpers.install)",
        _line_of(m, text),
    )


def _stochastic_rounding_sm90(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    sm = m.group(1)
    return Diagnosis(
        "stochastic_rounding_sm90",
        f"Triton's Mamba SSM-update kernel with stochastic rounding needs the cvt.rs "
        f"instruction, which sm_{sm} lacks (Blackwell, compute capability 10.0, has it)",
        "add --mamba-backend flashinfer (the recipe's Hopper choice, needs flashinfer-python) "
        "or drop --enable-mamba-cache-stochastic-rounding and --mamba-cache-philox-rounds",
        _line_of(m, text),
    )


def _damaged_checkpoint(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    model = getattr(config, "model", None) if config is not None else None
    folder = m.groupdict().get("path") or model or "the model folder"
    standin = bool(model) and _is_standin(model)
    fix = (
        "rebuild with `build_standin_model(force=True)` (helpers.standin)"
        if standin
        else "download the checkpoint again (helpers.weights.download(..., force_download=True)); "
        "helpers.standin.check_checkpoint(folder) finds the damaged file before launch"
    )
    what = "a weights file (.safetensors) is truncated or damaged" if "afetensor" in m.group(0) else (
        f"config.json of {folder} is not valid JSON"
    )
    return Diagnosis("damaged_checkpoint", f"the checkpoint is damaged: {what}", fix, _line_of(m, text))


def _is_standin(model: Any) -> bool:
    from pathlib import Path

    try:
        return (Path(str(model)) / "standin.json").is_file()
    except OSError:
        return False


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


# ---------------------------------------------------------------------------------------
# the catalogue
# ---------------------------------------------------------------------------------------

CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry(
        "damaged_checkpoint",
        (
            r"SafetensorError: Error while deserializing header: .*",
            r"It looks like the config file at '(?P<path>[^']+)' is not a valid JSON file",
        ),
        _damaged_checkpoint,
        "safetensors 0.8.0 (safe_open: 'Error while deserializing header') via vLLM 0.32.0 "
        "model_loader/weight_utils.py; transformers configuration_utils.py "
        "(_get_config_dict) via vllm/transformers_utils/config.py",
    ),
    CatalogueEntry(
        "max_model_len_too_long",
        (
            r"User-specified max_model_len \((?P<asked>\d+)\) is greater than the derived "
            r"max_model_len \((?P<key>[\w.]+)=(?P<derived>[\d.]+)",
        ),
        _max_len_too_long,
        "vllm/config/model.py (_get_and_verify_max_len), vLLM 0.32.0",
    ),
    CatalogueEntry(
        "humming_non_gated_moe",
        (
            r"weight shape mismatched: attr\['shape'\]=\(\d+, (?P<want>\d+), \d+\), "
            r"tensor\.shape=torch\.Size\(\[\d+, (?P<got>\d+), \d+\]\)",
        ),
        _humming_non_gated,
        "humming/schema/base.py (validate_tensors) via vLLM 0.26.0 "
        "quantization/utils/humming_utils.py; recorded on an H200 (docs/results/h200.md)",
    ),
    CatalogueEntry(
        "stochastic_rounding_sm90",
        (r"Feature '\.rs' not supported on \.target 'sm_(\d+)a?'",),
        _stochastic_rounding_sm90,
        "ptxas via Triton; vllm/config/mamba.py (stochastic rounding needs compute capability "
        "10.0 or the flashinfer Mamba backend); seen on an H200 (docs/results/h200.md)",
    ),
    CatalogueEntry(
        "mamba_cache_blocks",
        (r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)",),
        _mamba_blocks,
        "vllm/config/compilation.py (CompilationConfig, full decode CUDA graphs for Mamba)",
    ),
    CatalogueEntry(
        "missing_fastokens",
        (
            r"The 'fastokens' package \(>= [\d.]+\) is required when VLLM_USE_FASTOKENS=1",
            r"fastokens >= [\d.]+ is required when VLLM_USE_FASTOKENS=1",
        ),
        _fastokens,
        "vllm/tokenizers/fastokens.py (apply_fastokens_patch)",
    ),
    CatalogueEntry(
        "trust_remote_code",
        (
            r"contains custom code which must be executed to correctly load the model",
            r"references custom code contained in .* which must be executed",
            r"requires you to execute the configuration file",
            r"`--trust-remote-code` flag in the CLI",
        ),
        _trust_remote_code,
        "transformers/dynamic_module_utils.py (resolve_trust_remote_code); "
        "vllm/transformers_utils/config.py (HFConfigParser)",
    ),
    CatalogueEntry(
        "gated_repo",
        (
            r"GatedRepoError",
            r"Cannot access gated repo for url",
            r"You are trying to access a gated repo",
            r"is a gated repository\. Make sure to request access",
            r"If you are trying to access a private or gated repo",
        ),
        _gated,
        "huggingface_hub/utils/_http.py (hf_raise_for_status); transformers/utils/hub.py",
    ),
    CatalogueEntry(
        "unrecognized_arguments",
        (r"error: unrecognized arguments: (.+)$",),
        _unrecognized,
        "argparse via vllm/utils/argparse_utils.py (FlexibleArgumentParser.error)",
    ),
    CatalogueEntry(
        "invalid_choice",
        (
            r"error: argument (--[\w-]+)(?:/[-\w]+)*: invalid choice: '([^']*)' \(choose from (.+)\)",
        ),
        _invalid_choice,
        "argparse via vllm/utils/argparse_utils.py",
    ),
    CatalogueEntry(
        "kv_cache_too_small",
        (r"To serve at least one request with the model's max seq len \((\d+)\)",),
        _kv_too_small,
        "vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory)",
    ),
    CatalogueEntry(
        "no_cache_memory",
        (r"No available memory for the cache blocks",),
        _no_cache_memory,
        "vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory)",
    ),
    CatalogueEntry(
        "memory_in_use",
        (
            r"Free memory on device (?:\S+ )?\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup "
            r"is less than desired GPU memory utilization \((?P<util>[\d.]+)",
            r"Available memory on node \d+ \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup "
            r"is less than desired CPU memory utilization \((?P<util>[\d.]+)",
        ),
        _device_memory_taken,
        "vllm/v1/worker/utils.py (request_memory); vllm/v1/worker/cpu_worker.py (CPUWorker)",
    ),
    CatalogueEntry(
        "out_of_memory",
        (
            r"torch\.OutOfMemoryError",
            r"CUDA out of memory",
            r"torch\.cuda\.OutOfMemoryError",
        ),
        _cuda_oom,
        "torch c10/cuda/CUDACachingAllocator.cpp (OutOfMemoryError text)",
    ),
    CatalogueEntry(
        "internal_port_in_use",
        (
            r"failed to listen on any local network address\. port: (?P<port>\d+).*EADDRINUSE",
            r"DistNetworkError.*EADDRINUSE",
            r"ZMQError: Address already in use \(addr='[^']*:(?P<port>\d+)'\)",
        ),
        _internal_port_in_use,
        "torch c10d TCPStore (socket.cpp); vllm/config/parallel.py; pyzmq",
    ),
    CatalogueEntry(
        "port_in_use",
        (
            r"OSError: \[Errno 98\] (?:error while attempting to bind on address .*: )?[Aa]ddress already in use",
        ),
        _api_port_in_use,
        "vllm/entrypoints/launchers/launcher.py (create_server_socket: sock.bind)",
    ),
)


def diagnose(log_text: str, config: Any = None) -> Diagnosis | None:
    """Match a vLLM server log against :data:`CATALOGUE` and return the first hit.

    Args:
        log_text: the server log (all of it, or its tail; a few hundred lines suffice).
        config: the :class:`helpers.recipes.ServeConfig` the server was started with
            (optional): adds the target's pinned vLLM version, the port, and current flag
            values to the sentence.

    Returns:
        A :class:`Diagnosis` (``str(d)`` is one sentence naming the fix), or None when no
        entry matches; :func:`last_error_line` then gives the log's last exception line.
    """
    if not log_text:
        return None
    for entry in CATALOGUE:
        for pattern in entry.patterns:
            m = re.search(pattern, log_text, flags=re.MULTILINE)
            if m:
                return entry.build(m, log_text, config)
    return None


_ERROR_LINE = re.compile(
    r"^(?:\(\w[\w-]* pid=\d+\) (?:ERROR|CRITICAL) [^\]]*\] )?"
    r"((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b:? .*|\S+: error: .*)$",
    re.MULTILINE,
)


def last_error_line(log_text: str) -> str | None:
    """The last ``SomeError: message`` (or argparse ``error:``) line of a log, or None.

    Skips vLLM's generic wrappers ("Engine core initialization failed", "WorkerProc
    initialization failed") when a more specific line comes before them.
    """
    generic = ("Engine core initialization failed", "WorkerProc initialization failed")
    lines = [m.group(1).strip() for m in _ERROR_LINE.finditer(log_text or "")]
    specific = [line for line in lines if not any(g in line for g in generic)]
    pick = specific or lines
    return pick[-1][:400] if pick else None
