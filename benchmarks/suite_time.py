"""The test suite's wall time per group: unit, server, notebook (what the README quotes).

Runs pytest once, in this process, with a plugin (:class:`SuiteTimer`) that adds up each
test's setup, call and teardown time into its group (:func:`group_of`; a session fixture such
as ``standin_server`` counts where it is first set up). Usage, from the repository root (extra
arguments go to pytest)::

    .venv/bin/python benchmarks/suite_time.py [-m "not notebook"] [--durations=10]

Prints one line per group (tests, passed, failed/skipped, seconds), the sum, and the wall
time of the whole run (which includes collection). Exit status: pytest's.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

GROUPS = ("unit", "server", "notebook")


def group_of(markers) -> str:
    """``notebook`` > ``server`` > ``unit``, from a test's marker names: ``notebook`` is
    ``@pytest.mark.notebook`` (papermill runs), ``server`` other ``@pytest.mark.server`` tests
    (a real vLLM CPU server), ``unit`` the rest (the fake server process included)."""
    if "notebook" in markers:
        return "notebook"
    if "server" in markers:
        return "server"
    return "unit"


def markers_of(report) -> list[str]:
    """A report's marker names: the ``markers`` user property ``tests/conftest.py`` gives every
    test (it travels with the report, also from a ``pytest-xdist`` worker). Not its keywords:
    they hold the names of its folders too, and every test under ``tests/server/`` would count
    as a server test. Without the property (another conftest): the keywords."""
    return dict(getattr(report, "user_properties", ())).get("markers", report.keywords)


class SuiteTimer:
    """pytest plugin: seconds and outcomes per group."""

    def __init__(self) -> None:
        self.group: dict[str, str] = {}
        self.seconds: dict[str, float] = defaultdict(float)
        self.outcomes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.t0 = time.monotonic()
        #: per pytest-xdist worker (``gw0``...; ``main`` without xdist): seconds of tests, and
        #: when (seconds from the start) its last report came: the workers' balance
        self.worker_seconds: dict[str, float] = defaultdict(float)
        self.worker_last: dict[str, float] = {}
        #: per shared-server group (tests/conftest.py SHARED_SERVERS: one worker runs all of a
        #: group's tests): seconds and tests, so the longest group, the suite's floor, shows
        self.server_group_seconds: dict[str, float] = defaultdict(float)
        self.server_group_tests: dict[str, set[str]] = defaultdict(set)

    def pytest_runtest_logreport(self, report):
        g = self.group.setdefault(report.nodeid, group_of(markers_of(report)))
        self.seconds[g] += report.duration
        node = getattr(report, "node", None)  # set by pytest-xdist on a worker's report
        worker = getattr(getattr(node, "gateway", None), "id", None) or "main"
        self.worker_seconds[worker] += report.duration
        self.worker_last[worker] = time.monotonic() - self.t0
        shared = dict(getattr(report, "user_properties", ())).get("server_group")
        if shared:
            self.server_group_seconds[shared] += report.duration
            self.server_group_tests[shared].add(report.nodeid)
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.outcomes[g][report.outcome] += 1

    def table(self, wall: float) -> str:
        lines = [
            f"{'group':<10}{'tests':>7}{'passed':>8}{'failed':>8}{'skipped':>9}{'seconds':>10}"
        ]
        total = 0.0
        for g in GROUPS:
            o = self.outcomes[g]
            n = sum(o.values())
            total += self.seconds[g]
            lines.append(
                f"{g:<10}{n:>7}{o['passed']:>8}{o['failed']:>8}{o['skipped']:>9}{self.seconds[g]:>10.0f}"
            )
        lines.append(f"{'sum':<42}{total:>10.0f}")
        lines.append(f"{'wall':<42}{wall:>10.0f}  ({wall / 60:.1f} min, collection included)")
        for w in sorted(self.worker_seconds):
            lines.append(
                f"{'worker ' + w:<42}{self.worker_seconds[w]:>10.0f}  (s of tests; its last "
                f"ended {self.worker_last[w]:.0f} s in)"
            )
        for g, sec in sorted(self.server_group_seconds.items(), key=lambda kv: -kv[1]):
            n = len(self.server_group_tests[g])
            lines.append(f"{'server group ' + g:<42}{sec:>10.0f}  (s of its {n} tests, one worker)")
        return "\n".join(lines)


def reference_loop_s(repeats: int = 3, n: int = 10**8) -> float:
    """Seconds one core takes for ``sum(range(n))`` (the best of ``repeats``): the
    machine's speed beside the suite's time, since the suite is CPU-bound and its wall time
    moves with the machine (2026-12-03 on the 2-core CI-like box: 3.2 s, suite 1,018 s)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        sum(range(n))
        best = min(best, time.perf_counter() - t)
    return best


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(__file__).resolve().parent.parent
    speed = reference_loop_s()
    timer = SuiteTimer()  # its clock (each worker's last test) starts with the suite's, below
    t0 = time.monotonic()
    os.chdir(root)  # pyproject.toml's testpaths and markers
    rc = pytest.main(["-q", *args], plugins=[timer])
    wall = time.monotonic() - t0
    print("\nsuite time per group (benchmarks/suite_time.py)")
    print(timer.table(wall))
    print(
        f"{'machine: sum(range(10**8)) on one core':<42}{speed:>10.1f}  (s, best of 3, before the suite)"
    )
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
