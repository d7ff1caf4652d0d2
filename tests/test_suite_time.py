"""benchmarks/suite_time.py: the per-group table ``make test`` ends with (also from xdist workers)."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

from helpers.paths import REPO_ROOT

_spec = importlib.util.spec_from_file_location("suite_time", REPO_ROOT / "benchmarks" / "suite_time.py")
suite_time = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite_time)


def _report(nodeid, when, outcome, duration, *markers):
    # a TestReport's keywords: the test's name, its module, and its markers' names
    keywords = {nodeid.split("::")[-1]: 1, "tests": 1, **{m: 1 for m in markers}}
    return SimpleNamespace(nodeid=nodeid, when=when, outcome=outcome, duration=duration, keywords=keywords)


def test_groups_come_from_the_reports_markers():
    assert suite_time.group_of({"notebook": 1, "server": 1}) == "notebook"
    assert suite_time.group_of({"server": 1}) == "server"
    assert suite_time.group_of({"test_x": 1}) == "unit"


def test_the_table_adds_setup_call_and_teardown_per_group():
    timer = suite_time.SuiteTimer()
    for r in [
        _report("t.py::a", "setup", "passed", 60.0, "server"),  # a session server's start
        _report("t.py::a", "call", "passed", 2.0, "server"),
        _report("t.py::a", "teardown", "passed", 1.0, "server"),
        _report("t.py::b", "call", "failed", 30.0, "notebook", "server"),
        _report("t.py::c", "setup", "skipped", 0.0),
        _report("t.py::d", "call", "passed", 0.5),
    ]:
        timer.pytest_runtest_logreport(r)
    assert timer.seconds == {"server": 63.0, "notebook": 30.0, "unit": 0.5}
    table = timer.table(wall=100.0).splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in table[1:4]}
    assert rows["unit"] == ["2", "1", "0", "1", "0"]
    assert rows["server"] == ["1", "1", "0", "0", "63"]
    assert rows["notebook"] == ["1", "0", "1", "0", "30"]
    assert table[-1].split()[:2] == ["wall", "100"] and "1.7 min" in table[-1]
