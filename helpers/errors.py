"""Exception types raised by the helpers. Each message names the fix.

Callers (notebooks, tests) catch these by type; nothing in ``helpers`` lets a deep
traceback from vLLM, argparse or the hub reach the user without a sentence on what to do.
"""

from __future__ import annotations


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
        diagnosis: a :class:`helpers.diagnose.Diagnosis` when the log matched a known failure.
    """

    def __init__(self, message: str, log_tail: str = "", diagnosis=None):
        super().__init__(message)
        self.log_tail = log_tail
        self.diagnosis = diagnosis


class ResponseError(CookbookError, RuntimeError):
    """A model response cannot be used as asked (e.g. tool-call markup the server did not parse)."""
