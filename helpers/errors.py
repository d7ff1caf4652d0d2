"""Exception types raised by the helpers, all of them, in one place. Each message names the fix.

Callers (notebooks, tests) catch these by type; nothing in ``helpers`` lets a deep
traceback from vLLM, argparse or the hub reach the user without a sentence on what to do.
"""

from __future__ import annotations

from typing import Any


class CookbookError(Exception):
    """Base class: every error the helpers raise on purpose."""


class RecipeError(CookbookError, ValueError):
    """The registry cannot resolve the request (unknown target, variant, mode, or a rule broke)."""


class RegistryError(RecipeError):
    """A registry file (``cookbook/recipe.yaml``, ``cookbook/flags.yaml``) does not match its schema.

    Attributes:
        source: the file.
        problems: one line per problem, each with its key path (``targets.h100.gpu.arch``).
    """

    def __init__(self, message: str, source: str = "", problems: list[str] | None = None):
        super().__init__(message)
        self.source = source
        self.problems = list(problems or [])


class FlagError(RecipeError):
    """The installed vLLM's argument parser rejected one or more flags of a ServeConfig.

    Attributes:
        flags: the rejected flag names, e.g. ``["--mamba-ssu-algorithm"]``.
    """

    def __init__(self, message: str, flags: list[str] | None = None):
        super().__init__(message)
        self.flags = list(flags or [])


class ServerStartError(CookbookError, RuntimeError):
    """``vllm serve`` exited or timed out before ``/health`` answered.

    Attributes:
        log_tail: the last lines of the server log.
        diagnosis: a :class:`helpers.server.failures.Diagnosis` when the log matched a known failure.
    """

    def __init__(self, message: str, log_tail: str = "", diagnosis=None):
        super().__init__(message)
        self.log_tail = log_tail
        self.diagnosis = diagnosis


class ResponseError(CookbookError, RuntimeError):
    """A model response cannot be used as asked (e.g. tool-call markup the server did not parse)."""


class StructuredOutputError(ResponseError):
    """A JSON-schema answer (:func:`lab.agents.structured.structured_chat`) is not usable.

    Attributes (empty when there is none): ``text`` (the reply's ``content`` as sent),
    ``reasoning``, ``finish_reason``, ``errors`` (pydantic's, when the JSON did not validate),
    ``server_message`` (the server's error text when it refused the request).
    """

    def __init__(
        self,
        message: str,
        text: str = "",
        reasoning: str = "",
        finish_reason: str | None = None,
        errors: list | None = None,
        server_message: str = "",
    ):
        super().__init__(message)
        self.text = text
        self.reasoning = reasoning
        self.finish_reason = finish_reason
        self.errors = list(errors or [])
        self.server_message = server_message


class SchemaNotEnforcedError(StructuredOutputError):
    """The server refused to constrain decoding to the schema (HTTP 400: a schema no
    structured-output backend compiles, or a feature combination vLLM rejects)."""


class StructuredOutputInvalidError(StructuredOutputError):
    """The reply's ``content`` is not JSON, or JSON that does not validate (``.text``)."""


class StructuredAnswerMissingError(StructuredOutputError):
    """``max_tokens`` ran out while the model was still reasoning: no constrained answer."""


class StructuredAnswerInReasoningError(StructuredOutputError):
    """The JSON answer came back in ``reasoning`` with ``content`` empty: the reasoning parser
    put it there (vllm-project/vllm #19222, PR #18879; sglang #14821). ``.reasoning`` holds it;
    ``structured_chat(..., from_reasoning=True)`` validates it from there instead."""


class AdapterError(CookbookError, ValueError):
    """A LoRA adapter cannot be served as asked: rank, modules, shapes or LoRA flags (lab.adapters)."""


class ServerConnectionError(CookbookError, ConnectionError):
    """No vLLM OpenAI-compatible server answers at the client's URL (closed port, wrong
    URL, another HTTP server, timeout). The message names the URL and what to do."""


class ServerRequestError(CookbookError, RuntimeError):
    """The server failed a request (HTTP 5xx). The message has the server's words, the cause
    when its log names a known one, and the log's last error lines
    (:func:`lab.agents.request_failure.describe_server_error`)."""


class AgentError(ResponseError):
    """The agent's run stopped: the model never gave a valid answer within its retries, the
    server refused a request, or a usage limit was hit. ``messages`` holds pydantic-ai's
    messages so far (nothing is lost), ``trace`` their table, ``cause`` the SDK's error."""

    def __init__(self, message: str, messages=None, trace=None, cause=None):
        super().__init__(message)
        self.messages = list(messages or [])
        self.trace = trace
        self.cause = cause


class BenchError(CookbookError, RuntimeError):
    """A benchmark point could not run or produced no successful request.

    Attributes:
        log_path: the point's captured ``vllm bench serve`` console output, when there is one.
    """

    def __init__(self, message: str, log_path=None):
        super().__init__(message)
        self.log_path = log_path


class PlotError(CookbookError, ValueError):
    """The DataFrame lacks what a plot needs (a column, or any speculative-decoding row)."""


class HardwareError(CookbookError, RuntimeError):
    """The GPUs here cannot run the requested configuration (or there are none).

    Attributes:
        report: the :class:`helpers.machine.hardware.MachineReport` that led to the refusal.
    """

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report


class InstallError(CookbookError, RuntimeError):
    """An install command failed, or the requested install method is unavailable here."""


class WeightlessError(CookbookError, ValueError):
    """An architecture folder is missing, of another variant, or a variant is unknown."""


class WeightsError(CookbookError, RuntimeError):
    """A checkpoint or drafter could not be made available locally."""


class HubAccessError(WeightsError, PermissionError):
    """The hub refused access (gated licence not accepted, missing or invalid token, private)."""


class DiskSpaceError(WeightsError, OSError):
    """The download does not fit in the free space of the cache folder.

    Attributes:
        need_bytes, free_bytes, cache_dir.
    """

    def __init__(self, message: str, need_bytes: int = 0, free_bytes: int = 0, cache_dir: str = ""):
        super().__init__(message)
        self.need_bytes, self.free_bytes, self.cache_dir = need_bytes, free_bytes, cache_dir


class RestartNeeded(CookbookError, RuntimeError):
    """The install replaced a package this kernel already imported: restart, then run again."""


class GpuRuntime(CookbookError, RuntimeError):
    """The workshop (a CPU rehearsal) was opened on a GPU runtime that serves the real model."""


def check_number(
    fn: str,
    name: str,
    value: Any,
    *,
    integer: bool = False,
    minimum: float | None = None,
    exclusive: bool = False,
    optional: bool = False,
) -> None:
    if value is None and optional:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an integer" if integer else "a number"
        raise TypeError(
            f"{fn}: `{name}` must be {what}{' or None' if optional else ''}; got "
            f"{type(value).__name__} {value!r:.60}."
        )
    if minimum is not None and (value <= minimum if exclusive else value < minimum):
        bound = f"> {minimum}" if exclusive else f">= {minimum}"
        raise ValueError(f"{fn}: `{name}`={value!r} must be {bound}.")
