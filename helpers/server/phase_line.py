"""The start-up progress of one server on the console: one line per kind of phase, rewritten
in place (``\\r``) within a kind in a terminal or a notebook, so "capturing CUDA graphs (n/51)"
is one updating line; a pipe or a file, which shows ``\\r`` as is, gets a line per phase.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from helpers.server.vllm_log import phase_kind


class PhaseLine:
    """The open console line of a start-up and the kind of phase it shows."""

    def __init__(self) -> None:
        self.open_kind: str | None = None

    def say(
        self,
        progress: bool | Callable[[str, float], None],
        phase: str,
        elapsed: float,
        kind: str | None = None,
    ) -> None:
        """Show ``phase`` at ``elapsed`` seconds: to ``progress`` when it is a callable, printed
        when True, nowhere when False; ``kind`` defaults to :func:`~.vllm_log.phase_kind`'s."""
        if callable(progress):
            progress(phase, elapsed)
            return
        if not progress:
            return
        kind = kind or phase_kind(phase)
        text = f"[vllm {elapsed:5.0f}s] {phase}"
        inplace = sys.stdout.isatty() or "ipykernel" in sys.modules
        if self.open_kind is not None and kind == self.open_kind and inplace:
            print("\r" + text, end="", flush=True)
        else:
            self.end()
            print(text, end="", flush=True)
        self.open_kind = kind

    def end(self) -> None:
        """End the line :meth:`say` left open (before any other output)."""
        if self.open_kind is not None:
            print(flush=True)
            self.open_kind = None
