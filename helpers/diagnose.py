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

Each entry records the releases whose source its wordings were read in
(``CatalogueEntry.checked_releases``; :func:`catalogue_frame` lists them) and every
:class:`Diagnosis` carries them (``d.report()`` prints them).

After launch, :func:`review` reads a *running* server's log for what works but is wrong
or wasted: speculative decoding that accepts nothing or does not pay off (the periodic
"SpecDecoding metrics" line, every wording since vLLM 0.8.5), an NVFP4 MoE backend known
to give wrong output, an engine that stalls with requests waiting. ``helpers.server``
warns about them (:class:`ServerFindingWarning`) once the server is ready.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CATALOGUE",
    "CatalogueEntry",
    "Diagnosis",
    "ServerFindingWarning",
    "SpecDecodeStats",
    "catalogue_frame",
    "diagnose",
    "last_error_line",
    "parse_spec_decode_line",
    "review",
    "warn_findings",
    "spec_decode_stats",
    "stalled_span",
]


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
        return "wording checked in " + ", ".join(self.checked_releases) if self.checked_releases else ""

    def report(self) -> str:
        """The sentence, the matched log line and the releases checked, one per line."""
        lines = [f"{self.level.upper()}: {self.message}"]
        if self.evidence:
            lines.append(f"  log: {self.evidence}")
        if self.checked_releases:
            lines.append(f"  {self.checked}")
        return "\n".join(lines)


Builder = Callable[["re.Match[str]", str, Any], Diagnosis]


@dataclass(frozen=True)
class CatalogueEntry:
    """One known failure: regexes on the log and a function that words the diagnosis.

    Attributes:
        name: the :attr:`Diagnosis.name` it produces.
        patterns: regexes (multiline, case-sensitive) tried in order against the log.
        build: ``build(match, log_text, config) -> Diagnosis`` (or None: the match does
            not count, e.g. a stall shorter than the threshold; the next pattern is tried).
        source: where the wording comes from (file in vLLM / torch / transformers / hub).
        checked_releases: releases whose source was read for this entry's wordings,
            ``"vllm X.Y.Z"`` or ``"<library> X.Y.Z"`` (issue 14.11; a test keeps every entry
            filled). Wordings from releases not listed may still match, unchecked.
    """

    name: str
    patterns: tuple[str, ...]
    build: Builder
    source: str
    checked_releases: tuple[str, ...] = ()


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


def _fastokens_unsupported(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    what = m.group(0).split("unsupported ", 1)[-1]
    return Diagnosis(
        "fastokens_unsupported_tokenizer",
        f"VLLM_USE_FASTOKENS=1 is set but fastokens cannot load this model's tokenizer "
        f"(unsupported {what}; fastokens 0.3.5 loads BPE tokenizers only)",
        "unset VLLM_USE_FASTOKENS (it only speeds up tokenization); in weightless mode "
        "helpers.archmode.arch_config drops it for the architecture folder's tokenizer",
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


def _non_default_args(text: str) -> dict[str, Any]:
    """The ``non-default args: {...}`` dict vLLM logs at start-up (``api_utils.py``), or {}."""
    import ast

    m = None
    for m in re.finditer(r"non-default args: (\{.*\})\s*$", text, flags=re.MULTILINE):
        pass
    if m is None:
        return {}
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return {}
    return value if isinstance(value, dict) else {}


def _spec_settings(text: str, config: Any) -> tuple[int | None, int | None, str | None, int | None, str | None]:
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
    v = re.search(r"Initializing a V1 LLM engine \(v?([\w.+-]+)\)", text) or re.search(
        r"version (\d+\.\d+\.\d+\S*)", text
    )
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
    from .planner import spec_token_budget

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
            f"token slots than --max-num-batched-tokens holds"
            + (f" (max_num_scheduled_tokens {got})" if got else "")
        )
        fix = (
            "raise --max-num-batched-tokens to at least max_num_seqs x (1 + num_speculative_tokens "
            "+ drafting slots), or lower --max-num-seqs or num_speculative_tokens "
            "(helpers.planner.spec_token_budget gives the numbers)"
        )
    return Diagnosis("spec_token_budget", f"{cause}; the three settings are {settings}", fix, _line_of(m, text))


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
        f" (cookbook/recipe.yaml, target {target!r}: {first})" if target and notes
        else " (the rtx-50xx and rtx-pro-6000 targets' notes in cookbook/recipe.yaml)"
    )
    fix = (
        "pin a backend that has one: --moe-backend marlin (W4A16 Marlin MoE, what the rtx-50xx and rtx-pro-6000 entries pin), "
        "or serve the BF16 checkpoint (variant bf16), or install a vLLM release whose NVFP4 MoE "
        f"kernels cover this GPU{see}"
    )
    return Diagnosis("nvfp4_no_moe_backend", cause, fix, _line_of(m, text))


def _disk_space(m: re.Match[str], text: str, config: Any) -> Diagnosis:
    hub = re.search(
        r"Not enough free disk space to download the file\. The expected file size is: "
        r"(?P<need>[\d.]+) MB\. The target location (?P<dir>.+?) only has (?P<free>[\d.]+) MB free",
        text,
    )
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
#: stalled engine (issue 14.7: over a minute). vLLM logs the line every
#: ``VLLM_LOG_STATS_INTERVAL`` seconds (default 10).
STALL_SECONDS = 60.0


def stalled_span(log_text: str, min_seconds: float = STALL_SECONDS) -> tuple[float, int, str] | None:
    """The last run of stats lines saying "nothing runs, requests wait, no throughput".

    Args:
        log_text: server log text.
        min_seconds: how long the run must last (log time stamps, seconds).

    Returns:
        ``(seconds, waiting requests, last line)`` when the log ends with (or contains) such
        a run of at least ``min_seconds``, else None.
    """
    import datetime as _dt

    best = None
    start = last = None
    waiting = 0
    line = ""
    for m in STATS_LINE.finditer(log_text or ""):
        w = int(m.group("waiting") or m.group("pending") or 0)
        stalled = (
            int(m.group("running")) == 0 and w > 0 and float(m.group("prompt")) == 0.0
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
        if span >= min_seconds:
            best = (span, waiting, line.strip()[:400])
    return best


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
        "--max-num-batched-tokens (helpers.planner.plan), look for an engine error or a "
        "speculative-decoding budget warning above, then restart the server",
        line,
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

#: vLLM releases whose wheels were unpacked and read for the catalogue's wordings (issue
#: 14.11): every release the registry pins (0.27.0, 0.27.1, 0.28.0; the CPU stand-in's
#: 0.32.0), the H200 run's 0.26.0, and 0.8.5 (an older release with the pre-V1 engine that
#: users still run). ``nightly`` cannot be pinned, so it is not among them.
REGISTRY_RELEASES = ("vllm 0.26.0", "vllm 0.27.0", "vllm 0.27.1", "vllm 0.28.0", "vllm 0.32.0")
OLDER_RELEASES = ("vllm 0.8.5",)

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
        ("vllm 0.32.0", "safetensors 0.8.0", "transformers 5.19.0"),
    ),
    CatalogueEntry(
        "max_model_len_too_long",
        (
            r"User-specified max_model_len \((?P<asked>\d+)\) is greater than the derived "
            r"max_model_len \((?P<key>[\w.]+)=(?P<derived>[\d.]+)",
        ),
        _max_len_too_long,
        "vllm/config/model.py (_get_and_verify_max_len), vLLM 0.32.0",
        ("vllm 0.32.0",),
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
        ("vllm 0.26.0 (recorded log; the wording is the humming-kernels package's)",),
    ),
    CatalogueEntry(
        "stochastic_rounding_sm90",
        (r"Feature '\.rs' not supported on \.target 'sm_(\d+)a?'",),
        _stochastic_rounding_sm90,
        "ptxas via Triton; vllm/config/mamba.py (stochastic rounding needs compute capability "
        "10.0 or the flashinfer Mamba backend); seen on an H200 (docs/results/h200.md)",
        REGISTRY_RELEASES,
    ),
    CatalogueEntry(
        "spec_token_budget",
        (
            r"max_num_scheduled_tokens is set to (?P<scheduled>-?\d+) based on the speculative "
            r"decoding settings, which does not allow any tokens to be scheduled",
            r"VllmConfig does not have enough slots to schedule a token and support the "
            r"speculative decoding settings\. Got max_num_batched_tokens=(?P<mnbt>\d+)",
            r"VllmConfig received max_num_scheduled_tokens but it does not have enough slots",
        ),
        _spec_token_budget,
        "vllm/config/vllm.py (VllmConfig._set_max_num_scheduled_tokens); "
        "vllm/config/speculative.py (max_num_new_slots_for_drafting)",
        REGISTRY_RELEASES,
    ),
    CatalogueEntry(
        "nvfp4_no_moe_backend",
        (
            r"No NvFp4 MoE backend supports the deployment configuration",
            r"NvFp4 MoE backend '(?P<backend>\w+)' does not support the deployment "
            r"configuration(?: since (?P<why>[^\n]*?))?\.?$",
        ),
        _nvfp4_no_moe_backend,
        "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py (select_nvfp4_moe_backend)",
        REGISTRY_RELEASES,
    ),
    CatalogueEntry(
        "disk_space",
        (
            r"Not enough free disk space to download the file",
            r"No space left on device",
        ),
        _disk_space,
        "huggingface_hub/file_download.py (_check_disk_space, a UserWarning); OSError errno 28",
        ("huggingface_hub 2.4.0",),
    ),
    CatalogueEntry(
        "engine_stalled",
        (r"Running: 0 reqs,",),
        _engine_stalled,
        "vllm/v1/metrics/loggers.py (LoggingStatLogger.log, every VLLM_LOG_STATS_INTERVAL s)",
        REGISTRY_RELEASES + OLDER_RELEASES,
    ),
    CatalogueEntry(
        "mamba_cache_blocks",
        (r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)",),
        _mamba_blocks,
        "vllm/config/compilation.py (CompilationConfig, full decode CUDA graphs for Mamba)",
        REGISTRY_RELEASES,
    ),
    CatalogueEntry(
        "fastokens_unsupported_tokenizer",
        (
            r"pre-tokenizer error: unsupported pre-tokenizer type: \w+",
            r"model error: unsupported model type: \w+",
        ),
        _fastokens_unsupported,
        "fastokens 0.3.5 (Tokenizer.from_file's errors, checked here on CPU) raised inside "
        "vLLM 0.32.0's VllmConfig; recorded on an H200 (docs/results/h200.md)",
        ("vllm 0.32.0 (recorded log)", "fastokens 0.3.5"),
    ),
    CatalogueEntry(
        "missing_fastokens",
        (
            r"The 'fastokens' package \(>= [\d.]+\) is required when VLLM_USE_FASTOKENS=1",
            r"fastokens >= [\d.]+ is required when VLLM_USE_FASTOKENS=1",
        ),
        _fastokens,
        "vllm/tokenizers/fastokens.py (apply_fastokens_patch)",
        REGISTRY_RELEASES,
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
        REGISTRY_RELEASES + OLDER_RELEASES + ("transformers 5.19.0",),
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
        ("huggingface_hub 2.4.0", "transformers 5.19.0"),
    ),
    CatalogueEntry(
        "unrecognized_arguments",
        (r"error: unrecognized arguments: (.+)$",),
        _unrecognized,
        "argparse via vllm/utils/argparse_utils.py (FlexibleArgumentParser.error)",
        REGISTRY_RELEASES + OLDER_RELEASES + ("python 3.11 argparse",),
    ),
    CatalogueEntry(
        "invalid_choice",
        (
            r"error: argument (--[\w-]+)(?:/[-\w]+)*: invalid choice: '([^']*)' \(choose from (.+)\)",
        ),
        _invalid_choice,
        "argparse via vllm/utils/argparse_utils.py",
        REGISTRY_RELEASES + OLDER_RELEASES + ("python 3.11 argparse",),
    ),
    CatalogueEntry(
        "kv_cache_too_small",
        (
            # V1, 0.26.0-0.32.0; 0.8.5's V1 wrote "models's"
            r"To serve at least one request with the models?'s max seq len \((\d+)\)",
            # pre-V1 engine (vllm/worker/worker.py, 0.8.5 and older)
            r"The model's max seq len \((\d+)\) is larger than the maximum number of tokens that "
            r"can be stored in KV cache \((?P<fits>\d+)\)",
        ),
        _kv_too_small,
        "vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory); pre-V1 "
        "vllm/worker/worker.py (raise_if_cache_size_invalid)",
        REGISTRY_RELEASES + OLDER_RELEASES,
    ),
    CatalogueEntry(
        "no_cache_memory",
        (r"No available memory for the cache blocks",),
        _no_cache_memory,
        "vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory)",
        REGISTRY_RELEASES + OLDER_RELEASES,
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
        REGISTRY_RELEASES,
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
        ("torch 2.13.0 (torch.OutOfMemoryError; the CUDA message text is in libc10_cuda, not in the CPU wheel)",),
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
        ("pyzmq 27.3.0 (ZMQError)", "torch 2.13.0 (DistNetworkError)"),
    ),
    CatalogueEntry(
        "port_in_use",
        (
            r"OSError: \[Errno 98\] (?:error while attempting to bind on address .*: )?[Aa]ddress already in use",
        ),
        _api_port_in_use,
        "vllm/entrypoints/launchers/launcher.py (create_server_socket: sock.bind)",
        REGISTRY_RELEASES + OLDER_RELEASES,
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
                d = entry.build(m, log_text, config)
                if d is not None:
                    return dataclasses.replace(d, checked_releases=entry.checked_releases)
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


# ---------------------------------------------------------------------------------------
# after launch: what a running server's log says is wrong (warnings, not start failures)
# ---------------------------------------------------------------------------------------

#: Mean acceptance length below which speculative decoding is judged "not paying off":
#: fewer than half a token gained per target-model step. An assumption of this cookbook
#: (drafting costs a drafter pass and a wider verification step), not a vLLM number.
PAYING_OFF_LENGTH = 1.5

_SPEC_LINE = re.compile(r"^.*(?:SpecDecoding metrics|Speculative metrics): .*$", re.MULTILINE)


@dataclass(frozen=True)
class SpecDecodeStats:
    """One periodic speculative-decoding log line of a vLLM server, parsed.

    Wordings (all handled, fields found by name so their order does not matter):
    vLLM 0.26.0-0.32.0 ``vllm/v1/spec_decode/metrics.py``: "SpecDecoding metrics: Mean
    acceptance length: 1.31, Accepted throughput: 13.40 tokens/s, Drafted throughput: 302.37
    tokens/s, Accepted: N tokens, Drafted: N tokens, Per-position acceptance rate: 0.181, ...,
    Avg Draft acceptance rate: 4.4%" (releases between 0.8.5 and 0.26.0 wrote it without the
    Accepted / Drafted counts); 0.8.5's V1: "SpecDecoding metrics: Draft acceptance rate: 4.4%,
    Mean acceptance length: 1.31, Accepted: ..., Drafted: ..., Per-position acceptance rate:
    ..."; the pre-V1 engine (``vllm/engine/metrics.py``): "Speculative metrics: Draft
    acceptance rate: 0.044, System efficiency: ..., Number of accepted tokens: N, Number of
    draft tokens: N, ...".

    Attributes:
        mean_acceptance_length: tokens per target step (1 + accepted / drafts); None in
            the pre-V1 wording.
        per_position: acceptance rate of draft position 1, 2, ... (0-1).
        draft_acceptance_rate_pct: accepted / drafted draft tokens, percent.
        accepted_tokens, drafted_tokens: counts over the logging interval, when logged.
        accepted_throughput, drafted_throughput: tokens/s, when logged.
        line: the log line.
    """

    mean_acceptance_length: float | None
    per_position: tuple[float, ...]
    draft_acceptance_rate_pct: float | None
    accepted_tokens: int | None = None
    drafted_tokens: int | None = None
    accepted_throughput: float | None = None
    drafted_throughput: float | None = None
    line: str = ""

    @property
    def accepted_nothing(self) -> bool:
        if self.drafted_tokens:
            return self.accepted_tokens == 0
        return self.draft_acceptance_rate_pct == 0.0 and (self.mean_acceptance_length in (None, 1.0))

    @property
    def level(self) -> str:
        """``"error"`` (nothing accepted), ``"warning"`` (not paying off) or ``"ok"``."""
        if self.accepted_nothing:
            return "error"
        if self.mean_acceptance_length is not None and self.mean_acceptance_length < PAYING_OFF_LENGTH:
            return "warning"
        return "ok"

    @property
    def dead_positions(self) -> tuple[int, ...]:
        """1-based draft positions whose logged acceptance rate is 0.000."""
        return tuple(i + 1 for i, r in enumerate(self.per_position) if r == 0.0)

    @property
    def verdict(self) -> str:
        if self.level == "error":
            return (
                "speculative decoding accepted nothing: every draft token was rejected; check the "
                "drafter matches the served checkpoint and revision, and its method"
            )
        if self.level == "warning":
            dead = self.dead_positions
            tail = f"; draft positions {dead[0]}-{dead[-1]} accepted nothing" if dead else ""
            k = len(self.per_position)
            return (
                f"not paying off: check num_speculative_tokens against the drafter's block size "
                f"(mean acceptance length {self.mean_acceptance_length:.2f} with {k} draft "
                f"positions, {self.draft_acceptance_rate_pct:.1f}% of draft tokens accepted{tail})"
            )
        return f"paying off: {self.mean_acceptance_length:.2f} tokens per target-model step"


def _num(pattern: str, line: str, conv=float):
    m = re.search(pattern, line)
    return conv(m.group(1)) if m else None


def parse_spec_decode_line(line: str) -> SpecDecodeStats | None:
    """Parse one speculative-decoding metrics line (any wording in :class:`SpecDecodeStats`).

    Returns:
        The parsed line, or None when ``line`` is not one.
    """
    if not re.search(r"(?:SpecDecoding metrics|Speculative metrics): ", line or ""):
        return None
    pos = re.search(r"Per-position acceptance rate: ((?:\d+(?:\.\d+)?(?:, )?)+)", line)
    per_position = tuple(float(x) for x in pos.group(1).split(",") if x.strip()) if pos else ()
    rate = _num(r"Draft acceptance rate: ([\d.]+)%", line)
    if rate is None:
        frac = _num(r"Draft acceptance rate: ([\d.]+),", line)  # pre-V1: a fraction
        rate = None if frac is None else frac * 100.0
    accepted = _num(r"\bAccepted: (\d+) tokens", line, int)
    if accepted is None:
        accepted = _num(r"Number of accepted tokens: (\d+)", line, int)
    drafted = _num(r"\bDrafted: (\d+) tokens", line, int)
    if drafted is None:
        drafted = _num(r"Number of draft tokens: (\d+)", line, int)
    return SpecDecodeStats(
        mean_acceptance_length=_num(r"Mean acceptance length: ([\d.]+)", line),
        per_position=per_position,
        draft_acceptance_rate_pct=rate,
        accepted_tokens=accepted,
        drafted_tokens=drafted,
        accepted_throughput=_num(r"Accepted throughput: ([\d.]+) tokens/s", line),
        drafted_throughput=_num(r"Drafted throughput: ([\d.]+) tokens/s", line),
        line=line.strip()[:600],
    )


def spec_decode_stats(log_text: str) -> list[SpecDecodeStats]:
    """Every speculative-decoding metrics line of a server log, parsed, oldest first."""
    out = []
    for m in _SPEC_LINE.finditer(log_text or ""):
        s = parse_spec_decode_line(m.group(0))
        if s is not None:
            out.append(s)
    return out


def _is_nemotron_h(text: str, config: Any) -> bool:
    model = str(getattr(config, "model", "") or "") if config is not None else ""
    return bool(
        re.search(r"Resolved architecture: NemotronH", text) or re.search(r"nemotron", model, re.I)
    )


def _compute_capability(config: Any) -> str | None:
    gpu = (getattr(config, "gpu", None) or {}) if config is not None else {}
    cc = gpu.get("compute_capability")
    return str(cc) if cc else None


#: Backends known to give fluent but wrong output with Nemotron-H NVFP4 on compute
#: capability 10.x (public report, 2026; the fix is pinning flashinfer_cutlass). The
#: chosen backend is logged by select_nvfp4_moe_backend (vllm 0.26.0-0.32.0, read).
KNOWN_BAD_NVFP4_MOE = {"FLASHINFER_TRTLLM": "flashinfer_cutlass"}


def review(log_text: str, config: Any = None) -> list[Diagnosis]:
    """Findings on a *running* server's log: what works but is known to be wrong or wasted.

    Checks (each a :class:`Diagnosis` with ``level``):

    - ``nvfp4_moe_backend`` (warning): the start-up line "Using 'FLASHINFER_TRTLLM' NvFp4 MoE
      backend out of potential backends: [...]" with a Nemotron-H checkpoint on compute
      capability 10.x (or an unknown GPU): a public report of fluent but wrong output; the
      fix is ``--moe-backend flashinfer_cutlass`` (accepted by vLLM 0.28.0 and 0.32.0's
      parsers, ``MoEBackend`` in ``vllm/config/kernel.py``).
    - ``spec_decode`` (error when nothing was accepted, warning when not paying off): the
      last "SpecDecoding metrics" line (:func:`parse_spec_decode_line`).
    - ``engine_stalled`` (error): stats lines with requests waiting and none running for
      :data:`STALL_SECONDS` (:func:`stalled_span`).

    Args:
        log_text: the server log.
        config: the ServeConfig (GPU compute capability, model) when known.

    Returns:
        The findings, most severe first; empty when nothing is wrong.
    """
    found: list[Diagnosis] = []
    text = log_text or ""
    for m in re.finditer(r"Using '(?P<backend>\w+)' NvFp4 MoE backend out of potential backends", text):
        backend = m.group("backend")
        cc = _compute_capability(config)
        if backend in KNOWN_BAD_NVFP4_MOE and (cc is None or cc.startswith("10")) and _is_nemotron_h(text, config):
            fix = KNOWN_BAD_NVFP4_MOE[backend]
            found.append(
                Diagnosis(
                    "nvfp4_moe_backend",
                    f"vLLM chose the {backend} NvFp4 MoE backend"
                    + (f" on compute capability {cc}" if cc else "")
                    + ", which gives fluent but wrong output with Nemotron-H NVFP4 checkpoints "
                    "(public report)",
                    f"restart with --moe-backend {fix} (pinned for the b200 / b300 targets in "
                    "cookbook/recipe.yaml) and check answers before benchmarking",
                    _line_of(m, text),
                    level="warning",
                    checked_releases=REGISTRY_RELEASES,
                )
            )
            break
    stats = spec_decode_stats(text)
    if stats and stats[-1].level != "ok":
        last = stats[-1]
        if last.level == "error":
            cause = "speculative decoding accepted nothing"
            fix = (
                f"all {last.drafted_tokens if last.drafted_tokens is not None else 'the'} draft tokens of "
                "the last interval were rejected, so drafting only costs time: check the drafter "
                "matches the served checkpoint and revision, or serve without speculative decoding"
            )
        else:
            dead = last.dead_positions
            cause = (
                f"speculative decoding is not paying off (mean acceptance length "
                f"{last.mean_acceptance_length:.2f} over {len(last.per_position)} draft positions, "
                f"{last.draft_acceptance_rate_pct:.1f}% of draft tokens accepted"
                + (f"; positions {dead[0]}-{dead[-1]} accepted nothing" if dead else "")
                + ")"
            )
            fix = "check num_speculative_tokens against the drafter's block size"
        found.append(
            Diagnosis("spec_decode", cause, fix, last.line, level=last.level,
                      checked_releases=REGISTRY_RELEASES + OLDER_RELEASES)  # fmt: skip
        )
    stall = re.search(r"Running: 0 reqs,", text)
    if stall:
        d = _engine_stalled(stall, text, config)
        if d is not None:
            found.append(dataclasses.replace(d, checked_releases=REGISTRY_RELEASES + OLDER_RELEASES))
    return sorted(found, key=lambda d: d.level != "error")


def catalogue_frame():
    """The catalogue as a DataFrame: ``name``, ``source``, ``checked_releases`` (issue 14.11)."""
    import pandas as pd

    return pd.DataFrame(
        [{"name": e.name, "source": e.source, "checked_releases": ", ".join(e.checked_releases)} for e in CATALOGUE]
    )


class ServerFindingWarning(UserWarning):
    """A running server's log shows a known problem (:func:`review`); the message names the fix."""


def warn_findings(log_text: str, config: Any = None) -> list[Diagnosis]:
    """:func:`review` the log and issue one :class:`ServerFindingWarning` per finding.

    ``helpers.server.VLLMServer`` calls it once the server is ready. Never raises: a
    review that fails is no finding.

    Returns:
        The findings warned about.
    """
    import warnings

    try:
        found = review(log_text, config)
    except Exception:  # noqa: BLE001 - a finding must never break a started server
        return []
    for d in found:
        warnings.warn(d.report(), ServerFindingWarning, stacklevel=3)
    return found
