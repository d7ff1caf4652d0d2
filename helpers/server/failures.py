"""The sentence for each known start-up failure: what happened, in the log's own numbers,
and what to change.

Each builder gets the regex match of its catalogue entry (the wordings are in
:mod:`helpers.server.vllm_log`), the whole log and the config the server ran with, and returns a
:class:`Diagnosis` (or None: the match does not count). :mod:`helpers.server.diagnose` holds the
catalogue that pairs each wording with its builder, and tries them in order. The builders,
one per known failure, stay together so a reader sees every sentence the helpers can say.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.server import vllm_log
from helpers.server.vllm_log import stalled_span


@dataclass(frozen=True)
class Diagnosis:
    """A known failure found in a server log.

    Attributes:
        name: catalogue key, e.g. ``"mamba_cache_blocks"``.
        cause: what went wrong, in the log's own numbers.
        fix: what to change, naming the flag / command / variable.
        evidence: the log line that matched (for the reader who wants to check).
        level: ``"error"`` (the server failed or cannot do its job) or ``"warning"``
            (it runs, but something is known to be wrong or wasted).
        checked_releases: the releases whose source this entry's wording was read in
            (e.g. ``("vllm 0.32.0", "vllm 0.28.0")``), copied from the catalogue entry.
    """

    name: str
    cause: str
    fix: str
    evidence: str = ""
    level: str = "error"
    checked_releases: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """One sentence: the cause, then the fix."""
        return f"{self.cause}: {self.fix}."

    def __str__(self) -> str:
        return self.message

    @property
    def checked(self) -> str:
        """Where the wording was checked, e.g. ``"wording checked in vllm 0.26.0, 0.28.0"``."""
        return (
            "wording checked in " + ", ".join(self.checked_releases)
            if self.checked_releases
            else ""
        )

    def report(self) -> str:
        """The sentence, the matched log line and the releases checked, one per line."""
        lines = [f"{self.level.upper()}: {self.message}"]
        if self.evidence:
            lines.append(f"  log: {self.evidence}")
        if self.checked_releases:
            lines.append(f"  {self.checked}")
        return "\n".join(lines)


#: ``build(match, log_text, config) -> Diagnosis | None``: the sentence of one known failure.
Builder = Callable[["re.Match[str]", str, Any], "Diagnosis | None"]


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
    from helpers.config.versions import detect_vllm

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
    m = re.search(vllm_log.NON_DEFAULT_PORT, text)
    return int(m.group(1)) if m else None


def _port_owner(port: int | None) -> str:
    """Words naming who holds ``port``: one of our recorded servers, or a process."""
    try:
        from helpers.server.processes import describe_port

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
    est = re.search(vllm_log.ESTIMATED_MAX_LEN, text)
    fits = m.groupdict().get("fits")
    if fits:  # pre-V1: "... can be stored in KV cache (N)" is the longest that fits
        to = f"lower --max-model-len to {fits}"
    else:
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
    if re.search(vllm_log.LOAD_STARTED, text) and not re.search(vllm_log.LOAD_FINISHED, text):
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
        "stop that server (helpers.server.launch.stop_server / end_leftovers()) or pass port=None "
        "so helpers.server.vllm_server picks a free port",
        _line_of(m, text),
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


def _fastokens_unsupported(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    what = m.group(0).split("unsupported ", 1)[-1]
    return Diagnosis(
        "fastokens_unsupported_tokenizer",
        f"VLLM_USE_FASTOKENS=1 is set but fastokens cannot load this model's tokenizer "
        f"(unsupported {what}; fastokens 0.3.5 loads BPE tokenizers only)",
        "unset VLLM_USE_FASTOKENS (it only speeds up tokenization); in weightless mode "
        "helpers.weights.weightless.arch_config drops it for the architecture folder's tokenizer",
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
    for url in re.finditer(vllm_log.HUB_REPO_URL, window):
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


def _hub_repo_not_found(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    from helpers.weights.hub import missing_repo_words

    repo = _hub_repo(m, text, config)
    status = re.search(vllm_log.HUB_STATUS, text[max(0, m.start() - 3000) : m.end() + 3000])
    cause, fix = missing_repo_words(repo, int(status.group(1)) if status else None)
    return Diagnosis("hub_repo_not_found", cause, fix, _line_of(m, text))


def _humming_non_gated(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    want, got = int(m.group("want")), int(m.group("got"))
    return Diagnosis(
        "humming_non_gated_moe",
        f"this vLLM's Humming MoE kernel sized each expert's up-projection for a gated MLP "
        f"({want} rows, gate + up) but Nemotron's experts are non-gated relu² ({got} rows); "
        "vLLM 0.27.0 fixed it (vllm-project/vllm#49096), 0.26.0 has the bug",
        "serve with --moe-backend marlin on this vLLM, or install vLLM 0.27.0 or newer "
        "(the h100/h200 targets pin 0.28.0: helpers.machine.install)",
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


def _ssu_mtp_sm90(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    return Diagnosis(
        "ssu_mtp_sm90",
        "speculative decoding runs FlashInfer's multi-token Mamba state update, whose horizontal "
        "and vertical algorithms exist only for SM100+ (Blackwell); on this GPU only 'simple' "
        "does (--mamba-ssu-algorithm horizontal is the Hopper choice without drafting)",
        "drop --mamba-ssu-algorithm (FlashInfer's auto picks simple here) or pass "
        "--mamba-ssu-algorithm simple while drafting; the registry does both for Hopper targets "
        "(speculative.<mode>.hardware_overrides.hopper in cookbook/recipe.yaml)",
        _line_of(m, text),
    )


def _non_default_args(text: str) -> dict[str, Any]:
    """The ``non-default args: {...}`` dict vLLM logs at start-up (``api_utils.py``), or {}."""
    found = list(re.finditer(vllm_log.NON_DEFAULT_ARGS, text, flags=re.MULTILINE))
    m = found[-1] if found else None  # the last start-up in the log
    if m is None:
        return {}
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return {}
    return value if isinstance(value, dict) else {}


def _spec_settings(
    text: str, config: Any
) -> tuple[int | None, int | None, str | None, int | None, str | None]:
    """(max_num_batched_tokens, max_num_seqs, method, K, vllm version) from the config or the log."""
    mnbt = _flag_value(config, "--max-num-batched-tokens")
    seqs = _flag_value(config, "--max-num-seqs")
    spec = dict(getattr(config, "speculative_config", None) or {}) if config is not None else {}
    args = _non_default_args(text)
    mnbt = mnbt or args.get("max_num_batched_tokens")
    seqs = seqs or args.get("max_num_seqs")
    if not spec and isinstance(args.get("speculative_config"), dict):
        spec = args["speculative_config"]
    version = getattr(config, "vllm_version", None) if config is not None else None
    v = re.search(vllm_log.ENGINE_VERSION[0], text) or re.search(vllm_log.ENGINE_VERSION[1], text)
    if v:
        version = v.group(1)
    k = spec.get("num_speculative_tokens")
    return (
        int(mnbt) if mnbt else None,
        int(seqs) if seqs else None,
        spec.get("method"),
        int(k) if k else None,
        version,
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


def _nvfp4_no_moe_backend(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    backend = (m.groupdict().get("backend") or "").strip()
    why = (m.groupdict().get("why") or "").strip()
    gpu = (getattr(config, "gpu", None) or {}) if config is not None else {}
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
    notes = []
    target = getattr(config, "target", None) if config is not None else None
    for note in (getattr(config, "notes", None) or []) if config is not None else []:
        if "MoE" in str(note) or "NVFP4" in str(note):
            notes.append(str(note))
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
    return Diagnosis("nvfp4_no_moe_backend", cause, fix, _line_of(m, text))


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


def _engine_stalled(m: re.Match[str], text: str, config: Any) -> Diagnosis | None:
    found = stalled_span(text)
    if found is None:
        return None
    seconds, waiting, line = found
    return Diagnosis(
        "engine_stalled",
        f"engine stalled: requests waiting, none running ({waiting} waiting, 0 running, no "
        f"prompt or generation throughput for {seconds:.0f} s) while the API still answers",
        "the scheduler cannot admit them: check that one request fits the KV cache and "
        "--max-num-batched-tokens (helpers.memory.planner.plan), look for an engine error or a "
        "speculative-decoding budget warning above, then restart the server",
        line,
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


def _is_standin(model: Any) -> bool:
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
    pin = _dist("flashinfer-python") or gpu_wheels.FLASHINFER_PINS.get(str(version))
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


def _dist(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


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
