"""Read a vLLM server log and name the fix: a catalogue of known start-up failures."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from helpers.errors import ServerStartError
from helpers.server import failures_engine, failures_setup  # noqa: F401 - declare the kinds
from helpers.server.failures import KINDS, Diagnosis, FailureKind
from helpers.server.vllm_log import Wording, condense, last_error_line, read_tail

#: Every known failure kind, in the order they are tried (specific before broad).
CATALOGUE: tuple[FailureKind, ...] = tuple(sorted(KINDS.values(), key=lambda k: k.order))

#: Each kind's wording by name, in the try-order (what ``python -m tools.drift`` checks
#: against a new release's source).
FAILURES: dict[str, Wording] = {k.name: k.wording for k in CATALOGUE}


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
        for pattern in entry.wording.patterns:
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
