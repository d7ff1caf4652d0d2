"""Process checks the tests share: is anything of a launch's process group still alive?

Deliberately independent of ``helpers.server.vllm_server``'s own group lookup, so a test of the server's
clean-up does not trust the code under test to find what it left behind.
"""

from __future__ import annotations

import os
import time

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


def vllm_processes(port: int | None) -> list[psutil.Process]:
    """vLLM processes on this machine launched for ``port`` (API servers and their group)."""
    if not port:
        return []
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "vllm" in cmd and f"--port {port}" in cmd:
            found.append(p)
    return found


def assert_nothing_left(srv, pids: set[int] = frozenset()) -> None:
    """No process of ``pids`` or of the server ``srv`` (a ``VLLMServer`` or None) is alive,
    and its port binds again (within 10 s)."""
    from helpers.server import processes as server

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    alive = [pid for pid in pids if running(pid)]
    assert not alive, f"processes left running: {alive}"
    if srv is None:
        return
    assert srv.survivors() == []
    assert vllm_processes(srv.port) == []
    if srv.port:
        deadline = time.monotonic() + 10
        while not server.port_is_free(srv.port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.port_is_free(srv.port), f"port {srv.port} still taken"
