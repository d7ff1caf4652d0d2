"""A request the server failed (HTTP 5xx), said in the cookbook's words: the server's own
words, what its log says, and the cause when it is a known one.

A 500 from vLLM carries little (``{"error": {"message": "Internal server error"}}``); the
reason is in the server's log. For a server this machine launched (its launch record under
``out/run/`` names the port and the log), :func:`describe_server_error` quotes the log's
last error lines and names the cause; for any other server it says where to look.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from helpers.server.processes import server_records
from helpers.server.vllm_log import Wording, read_tail

#: Lines of the log's tail read for the request's error lines.
TAIL_LINES = 400


@dataclass(frozen=True)
class RequestFailure:
    """One known cause of a 5xx, recognised in the server's log.

    Attributes:
        wording: what vLLM writes when it happens (with the file it comes from).
        cause: the sentence a user reads: what went wrong and the fix.
    """

    wording: Wording
    cause: str


#: Known causes, tried in order; each wording checked in vLLM 0.32.0's source.
KNOWN: tuple[RequestFailure, ...] = (
    RequestFailure(
        Wording(
            (r"grammar rejected tokens \[[^\]]*\] for request \S+\. Terminating request",),
            "vllm/v1/core/sched/scheduler.py (update_from_output)",
            ("vllm 0.32.0",),
        ),
        "guided decoding could not follow the schema's grammar: no token of the model's "
        "vocabulary continues it (a tokenizer that cannot spell JSON, e.g. a weightless "
        "architecture folder built before the cookbook's ARCH_VERSION 3: rebuild it with "
        "build_arch_model(force=True)), so vLLM ended the request. Send the request without "
        "response_format, or serve a tokenizer that can spell the schema.",
    ),
    RequestFailure(
        Wording(
            (r"EngineCore encountered an issue", r"EngineDeadError", r"Engine core .* died"),
            "vllm/v1/engine/exceptions.py (EngineDeadError)",
            ("vllm 0.32.0",),
        ),
        "the engine process died: the server cannot answer again. Read the log above the "
        "error for the root cause, then restart the server (launch_server).",
    ),
    RequestFailure(
        Wording(
            (r"(?:torch\.)?(?:cuda\.)?OutOfMemoryError", r"CUDA out of memory"),
            "torch (the error vLLM lets through)",
            ("vllm 0.32.0",),
        ),
        "the GPU ran out of memory while serving the request: lower --max-num-seqs or "
        "--max-model-len, or --gpu-memory-utilization for other processes' room.",
    ),
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours vLLM's logger writes on a terminal
#: A log line that reports an error: vLLM's ERROR / CRITICAL level (vllm/logger.py's format),
#: a traceback, or a ``SomeError: ...`` line of one (not a WARNING that names an error).
_ERROR = re.compile(r"\b(?:ERROR|CRITICAL)\b|^Traceback|^\s*(?:[\w.]+\.)?[A-Z]\w*Error: ")


def _server_message(error: Exception) -> tuple[str, str | None]:
    """``(message, error type)`` from vLLM's error body (``{"error": {"message", "type"}}``)
    in an SDK status error; the message is ``""`` when the body carries none."""
    body = getattr(error, "body", None)
    err = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(err, Mapping):  # not vLLM's shape (a text body, none)
        return " ".join(str(body or "").split())[:300], None
    kind = err.get("type")
    return " ".join(str(err.get("message") or "").split())[:300], kind if isinstance(
        kind, str
    ) else None


def error_words(e: Exception) -> str:
    """The server's own words from an SDK status error (``openai`` or ``anthropic``): the
    body's ``error.message`` or ``message`` (vLLM's error shape), else the error's text, on
    one line (at most 300 characters)."""
    said, _ = _server_message(e)
    return said or " ".join(str(e).split())[:300]


def log_of(base_url: str) -> Path | None:
    """The log file of the server this machine launched at ``base_url``'s port, or None
    (another host, or a server launched elsewhere).

    Args:
        base_url: ``http://host:port`` or ``http://host:port/v1``.
    """
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.port is None or parsed.hostname not in ("127.0.0.1", "localhost", "0.0.0.0", "::1"):
        return None
    for rec in server_records():
        if rec.port == parsed.port and rec.alive:
            return Path(rec.log)
    return None


def describe_server_error(base_url: str, what: str, status: int, error: Exception) -> str:
    """One message for a request the server failed: ``what`` got HTTP ``status`` with the
    server's words, then the cause (a known one from the log, :data:`KNOWN`), the log's last
    error lines, and where the log is.

    A 500 whose body has an empty message is an exception raised without one (a bare
    ``assert``, say): vLLM 0.32.0's handler (``entrypoints/serve/exception_handling/
    handlers/exception.py``) puts ``str(exc)`` in the body and logs the request only with
    ``--log-error-stack``, so the message says to restart with it to see the stack.

    Args:
        base_url: the server's URL (``http://host:port[/v1]``).
        what: the request, e.g. ``"POST /v1/chat/completions"``.
        status: the HTTP status (5xx).
        error: the SDK's status error (``openai`` or ``anthropic``), for the body.
    """
    said, kind = _server_message(error)
    if said:
        head = f"The server at {base_url} failed {what} (HTTP {status}): {said.rstrip('.')}."
    else:
        head = (
            f"The server at {base_url} failed {what} (HTTP {status}"
            + (f", {kind}" if kind else "")
            + ") with an empty message: an exception without words inside vLLM (a bare "
            "assert, say). vLLM writes its stack only with --log-error-stack: restart the "
            'server with it (extra_args={"--log-error-stack": True}) and send the request '
            "again to see where it fails."
        )
    log = log_of(base_url)
    if log is None:
        return (
            head + " The reason is in the server's log (vLLM writes it there, not in the "
            "reply): read its last ERROR lines."
        )
    tail = read_tail(log, TAIL_LINES)
    errors = [_ANSI.sub("", line) for line in tail.splitlines() if _ERROR.search(line)][-6:]
    known = next((k for k in KNOWN if k.wording.search(tail)), None)
    parts = [head]
    if known is not None:
        parts.append(f"Cause: {known.cause}")
    if errors:
        parts.append("The log's last error lines:\n  " + "\n  ".join(e[:300] for e in errors))
    else:
        parts.append("The log has no error line for it.")
    parts.append(f"Log: {log}")
    return "\n".join(parts)
