"""Process checks the tests share: is anything of a launch's process group still alive?

Deliberately independent of ``helpers.server``'s own group lookup, so a test of the server's
clean-up does not trust the code under test to find what it left behind.
"""

from __future__ import annotations

import os

import psutil


def group_left(pgid: int) -> list[int]:
    """PIDs of the live (non-zombie) members of process group ``pgid``."""
    left = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return left
