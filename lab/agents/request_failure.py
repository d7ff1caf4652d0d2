"""A request the server failed (HTTP 5xx), said in the cookbook's words: the server's own
words, what its log says (for a server this machine launched), and the cause when known.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from helpers.server.processes import server_records
from helpers.server.vllm_log import Wording, read_tail

#: Lines of the log's tail read for the request's error lines.
TAIL_LINES = 400
#: Seconds to wait for the log to stop growing before it is read: the launcher's reader
#: thread copies the server's output into the log, so the lines vLLM writes while it answers
#: the failed request can land a moment after the reply (seen on an H200, 2026-12-02).
LOG_SETTLE_S = 2.0


@dataclass(frozen=True)
class RequestFailure:
    """One known cause of a 5xx, recognised in the server's log.

    Attributes:
        wording: what vLLM writes when it happens (with the file it comes from).
        cause: the sentence a user reads: what went wrong and the fix.
    """

    wording: Wording
    cause: str

    def said(self, match: re.Match[str]) -> str:
        """The cause, with the wording's named groups (e.g. ``{module}``) filled in."""
        return self.cause.format(**{k: v or "?" for k, v in match.groupdict().items()})


#: Known causes, tried in order; each wording checked in vLLM 0.32.0's source.
KNOWN: tuple[RequestFailure, ...] = (
    RequestFailure(
        Wording(
            (
                r"failed due to ModuleNotFoundError: No module named '(?P<module>[\w.]+)'",
                r"^\S*\s*(?:\S+\s+){0,4}ModuleNotFoundError: No module named '(?P<module>[\w.]+)'",
            ),
            "vllm/v1/engine/async_llm.py (generate: 'Request ... failed due to ...' with "
            "--enable-log-requests) and the stack --log-error-stack writes "
            "(entrypoints/serve/exception_handling/handlers/vllm_error.py)",
            ("vllm 0.32.0",),
        ),
        "vLLM's Python environment lacks the module '{module}', which vLLM imports to serve this "
        "request (vLLM 0.32.0 imports every structured-output backend when it checks a schema "
        "request: lmformatenforcer, outlines_core, llguidance, xgrammar). The module is in "
        "vLLM's own requirements, so `pip install vllm==<release>` brings it; an environment "
        "assembled by hand (an offline bundle, a trimmed image) can miss it. Install the "
        "package that provides it, then restart the server.",
    ),
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


#: The lines of an error that say what it is: an exception line of a traceback, or vLLM's
#: one-line account of a failed request (``--enable-log-requests``).
_SUMMARY = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Exit): |failed due to |Unexpected: ")


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
    server's words, then the cause (:data:`KNOWN`), the log's last error lines, and the log.

    A 500 with an empty message is in vLLM 0.32.0 most often ``EngineGenerateError()``
    (``AsyncLLM.generate``, ``vllm/v1/engine/async_llm.py``), whose cause is logged only with
    :data:`DIAGNOSTIC_FLAGS`; without a known cause and those flags, the message says to
    restart with them.

    Args:
        base_url: the server's URL (``http://host:port[/v1]``).
        what: the request, e.g. ``"POST /v1/chat/completions"``.
        status: the HTTP status (5xx).
        error: the SDK's status error (``openai`` or ``anthropic``), for the body.
    """
    said, kind = _server_message(error)
    return describe_with_log(base_url, what, status, said, kind, log_of(base_url))


#: The serve flags that make vLLM 0.32.0 log why a request failed: the stack
#: (``--log-error-stack``) and one line naming the exception (``--enable-log-requests``).
DIAGNOSTIC_FLAGS = ("--log-error-stack", "--enable-log-requests")


def _settled_tail(log: Path) -> str:
    """The log's last :data:`TAIL_LINES` lines once it has stopped growing for 0.2 s (at most
    :data:`LOG_SETTLE_S` seconds of waiting)."""
    deadline = time.monotonic() + LOG_SETTLE_S
    size = -1
    while time.monotonic() < deadline:
        now = log.stat().st_size if log.exists() else 0
        if now == size:
            break
        size = now
        time.sleep(0.2)
    return read_tail(log, TAIL_LINES)


def describe_with_log(
    base_url: str, what: str, status: int, said: str, kind: str | None, log: Path | None
) -> str:
    """:func:`describe_server_error` once the body is read (``said`` its message, ``kind`` its
    error type); ``log`` None when this machine did not launch the server."""
    head = f"The server at {base_url} failed {what} (HTTP {status}"
    if said:
        head += f"): {said.rstrip('.')}."
    else:
        head += (f", {kind}" if kind else "") + (
            ") with an empty message: an exception without words inside vLLM (a bare "
            "assert, say, or vLLM's own EngineGenerateError, which keeps the cause in the log)."
        )
    if log is None:
        return head + (
            " The reason is in the server's log (vLLM writes it there, not in the reply): read "
            "its last ERROR lines; a server started with --log-error-stack --enable-log-requests "
            "writes the exception there."
        )
    tail = _ANSI.sub("", _settled_tail(log))
    errors = [line for line in tail.splitlines() if _ERROR.search(line)]
    # a traceback's frames say less than its exception lines ("ModuleNotFoundError: ...")
    errors = ([line for line in errors if _SUMMARY.search(line)] or errors)[-6:]
    found = next(((k, m) for k in KNOWN if (m := k.wording.search(tail))), None)
    parts = [head]
    if found is not None:
        parts.append(f"Cause: {found[0].said(found[1])}")
    if errors:
        parts.append("The log's last error lines:\n  " + "\n  ".join(e[:300] for e in errors))
    else:
        parts.append("The log has no error line for it.")
    missing = [f for f in DIAGNOSTIC_FLAGS if f not in _launch_line(log)]
    if found is None and missing:
        flags = ", ".join(f'"{f}": True' for f in missing)
        parts.append(
            f"vLLM writes why a request failed only with {' and '.join(missing)}: restart the "
            f"server with extra_args={{{flags}}} and send the request again."
        )
    parts.append(f"Log: {log}")
    return "\n".join(parts)


def _launch_line(log: Path) -> str:
    """The log's first line: the command the launcher ran (``# helpers.server.vllm_server
    launch: ...``), or ``""``."""
    try:
        with log.open(errors="replace") as f:
            return f.readline()
    except OSError:
        return ""
