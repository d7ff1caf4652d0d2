"""Read a vLLM server log and name the fix: a catalogue of known start-up failures.

:class:`helpers.server.vllm_server.VLLMServer` calls :func:`diagnose` on the log whenever a
server dies or times out during start-up and puts the result in
:class:`helpers.errors.ServerStartError`; a notebook can call it on any log text
(``print(diagnose(text, config=cfg))``: one sentence, what happened and what to change).
:data:`CATALOGUE` is tried in order, specific entries before broad ones; each entry's wording
is in :data:`helpers.server.failure_wordings.FAILURES` with its source file and the releases read
(:func:`catalogue_frame` lists them), its sentence in :mod:`helpers.server.failures`. What a
*running* server's log shows wrong is :func:`helpers.server.review.review`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.errors import ServerStartError
from helpers.server import failure_wordings
from helpers.server.failures import (
    Builder,
    Diagnosis,
    _api_port_in_use,
    _cuda_oom,
    _device_memory_taken,
    _engine_stalled,
    _fastokens,
    _fastokens_unsupported,
    _internal_port_in_use,
    _invalid_choice,
    _kv_too_small,
    _mamba_blocks,
    _max_len_too_long,
    _no_cache_memory,
    _nvfp4_no_moe_backend,
    _spec_token_budget,
    _trust_remote_code,
    _unrecognized,
)
from helpers.server.failures_setup import (
    _compile_cache,
    _cuda_version_mismatch,
    _damaged_checkpoint,
    _disk_space,
    _flashinfer_no_nvcc,
    _gated,
    _hub_repo_not_found,
    _hub_token_invalid,
    _humming_non_gated,
    _ssu_mtp_sm90,
    _stochastic_rounding_sm90,
)
from helpers.server.vllm_log import condense, last_error_line, read_tail


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
            ``"vllm X.Y.Z"`` or ``"<library> X.Y.Z"`` (a test keeps every entry filled).
            Wordings from releases not listed may still match, unchecked.
    """

    name: str
    patterns: tuple[str, ...]
    build: Builder
    source: str
    checked_releases: tuple[str, ...] = ()

    @classmethod
    def of(cls, name: str, build: Builder) -> CatalogueEntry:
        """The entry for ``name``: its wording from :data:`helpers.server.failure_wordings.FAILURES`."""
        w = failure_wordings.FAILURES[name]
        return cls(name, w.patterns, build, w.source, w.checked)


#: The known failures, tried in this order (specific before broad: the Mamba cache-block
#: check before the generic out-of-memory one); wordings in helpers.server.failure_wordings.FAILURES.
CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry.of("damaged_checkpoint", _damaged_checkpoint),
    CatalogueEntry.of("max_model_len_too_long", _max_len_too_long),
    CatalogueEntry.of("humming_non_gated_moe", _humming_non_gated),
    CatalogueEntry.of("stochastic_rounding_sm90", _stochastic_rounding_sm90),
    CatalogueEntry.of("ssu_mtp_sm90", _ssu_mtp_sm90),
    CatalogueEntry.of("spec_token_budget", _spec_token_budget),
    CatalogueEntry.of("nvfp4_no_moe_backend", _nvfp4_no_moe_backend),
    CatalogueEntry.of("disk_space", _disk_space),
    CatalogueEntry.of("flashinfer_no_nvcc", _flashinfer_no_nvcc),
    CatalogueEntry.of("cuda_version_mismatch", _cuda_version_mismatch),
    CatalogueEntry.of("engine_stalled", _engine_stalled),
    CatalogueEntry.of("mamba_cache_blocks", _mamba_blocks),
    CatalogueEntry.of("fastokens_unsupported_tokenizer", _fastokens_unsupported),
    CatalogueEntry.of("missing_fastokens", _fastokens),
    CatalogueEntry.of("trust_remote_code", _trust_remote_code),
    CatalogueEntry.of("hub_token_invalid", _hub_token_invalid),
    CatalogueEntry.of("gated_repo", _gated),
    CatalogueEntry.of("hub_repo_not_found", _hub_repo_not_found),
    CatalogueEntry.of("unrecognized_arguments", _unrecognized),
    CatalogueEntry.of("invalid_choice", _invalid_choice),
    CatalogueEntry.of("kv_cache_too_small", _kv_too_small),
    CatalogueEntry.of("no_cache_memory", _no_cache_memory),
    CatalogueEntry.of("memory_in_use", _device_memory_taken),
    CatalogueEntry.of("out_of_memory", _cuda_oom),
    CatalogueEntry.of("compile_cache", _compile_cache),
    CatalogueEntry.of("internal_port_in_use", _internal_port_in_use),
    CatalogueEntry.of("port_in_use", _api_port_in_use),
)


def diagnose(log_text: str, config: Any = None) -> Diagnosis | None:
    """Match a vLLM server log against :data:`CATALOGUE` and return the first hit.

    Args:
        log_text: the server log (all of it, or its tail; a few hundred lines suffice).
        config: the :class:`helpers.config.serveconfig.ServeConfig` the server was started with
            (optional): adds the target's pinned vLLM version, the port, and current flag
            values to the sentence.

    Returns:
        A :class:`Diagnosis` (``str(d)`` is one sentence naming the fix), or None when no
        entry matches; :func:`helpers.server.vllm_log.last_error_line` then gives the log's
        last exception line.
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


def start_failure(
    what: str, phase: str | None, elapsed: float, log_path: Path | None, config: Any = None
) -> ServerStartError:
    """The error of a start-up that failed: ``what`` happened in ``phase`` after ``elapsed``
    seconds, the :func:`diagnose` sentence of the log (else its last error line), the log's
    path and its last 40 lines (condensed). Returned for the caller to raise."""
    full = read_tail(log_path, 2000)
    tail = "\n".join(condense(full).splitlines()[-40:])
    diag = diagnose(full, config)
    err = None if diag else last_error_line(full)
    parts = [f"{what} (phase: {phase}, {elapsed:.0f} s after launch)."]
    if diag:
        parts.append(f"Diagnosis: {diag.message}")
    elif err:
        parts.append(f"Last error: {err}")
        parts.append(
            "No known failure matched (helpers.server.diagnose); the log tail below has the details."
        )
    parts.append(f"Log: {log_path}")
    parts.append("--- last log lines ---\n" + tail)
    return ServerStartError("\n".join(parts), log_tail=tail, diagnosis=diag)


def catalogue_frame():
    """The catalogue as a DataFrame: ``name``, ``source``, ``checked_releases``."""
    import pandas as pd

    return pd.DataFrame(
        [
            {"name": e.name, "source": e.source, "checked_releases": ", ".join(e.checked_releases)}
            for e in CATALOGUE
        ]
    )
