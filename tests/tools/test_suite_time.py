"""benchmarks/suite_time.py: the per-group table ``make test`` ends with (also from xdist workers)."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

from helpers.paths import REPO_ROOT

_spec = importlib.util.spec_from_file_location(
    "suite_time", REPO_ROOT / "benchmarks" / "suite_time.py"
)
suite_time = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite_time)


def _report(nodeid, when, outcome, duration, *markers, worker="gw0", group=None):
    # a TestReport's keywords: the test's name, its folders and module, and its markers' names;
    # its user properties: tests/conftest.py's marker names; pytest-xdist sets ``node`` (the
    # worker it came from) on the controller's copy
    path, name = nodeid.split("::")
    keywords = {name: 1, **{part: 1 for part in path.split("/")}, **{m: 1 for m in markers}}
    return SimpleNamespace(
        nodeid=nodeid, when=when, outcome=outcome, duration=duration, keywords=keywords,
        user_properties=[("markers", sorted(markers))] + ([("server_group", group)] if group else []),
        node=SimpleNamespace(gateway=SimpleNamespace(id=worker)),
    )  # fmt: skip


def test_groups_come_from_the_reports_markers():
    assert suite_time.group_of({"notebook": 1, "server": 1}) == "notebook"
    assert suite_time.group_of({"server": 1}) == "server"
    assert suite_time.group_of({"test_x": 1}) == "unit"
    # a unit test under tests/server/ has "server" among its keywords (its folder), not its markers
    report = _report("tests/server/test_x.py::t", "call", "passed", 0.1)
    assert "server" in report.keywords
    assert suite_time.group_of(suite_time.markers_of(report)) == "unit"


def test_the_table_adds_setup_call_and_teardown_per_group():
    timer = suite_time.SuiteTimer()
    for r in [
        _report("tests/server/t.py::a", "setup", "passed", 60.0, "server", group="standin_server"),
        _report("tests/server/t.py::a", "call", "passed", 2.0, "server", group="standin_server"),
        _report(
            "tests/server/t.py::a", "teardown", "passed", 1.0, "server", group="standin_server"
        ),
        _report("tests/notebooks/t.py::b", "call", "failed", 30.0, "notebook", "server"),
        _report("tests/server/t.py::c", "setup", "skipped", 0.0),
        _report("tests/server/t.py::d", "call", "passed", 0.5, worker="gw1"),
    ]:
        timer.pytest_runtest_logreport(r)
    assert timer.seconds == {"server": 63.0, "notebook": 30.0, "unit": 0.5}
    table = timer.table(wall=100.0).splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in table[1:4]}
    assert rows["unit"] == ["2", "1", "0", "1", "0"]
    assert rows["server"] == ["1", "1", "0", "0", "63"]
    assert rows["notebook"] == ["1", "0", "1", "0", "30"]
    wall = next(line for line in table if line.startswith("wall"))
    assert wall.split()[:2] == ["wall", "100"] and "1.7 min" in wall
    # the balance of the two workers: each one's seconds of tests
    workers = {line.split()[1]: line.split()[2] for line in table if line.startswith("worker")}
    assert workers == {"gw0": "93", "gw1": "0"}
    # each shared server's group: its tests' seconds (the floor of the suite's wall time)
    group = next(line for line in table if line.startswith("server group"))
    assert group.split()[2:4] == ["standin_server", "63"] and "its 1 tests" in group


def test_each_shared_server_group_runs_in_one_worker(tmp_path):
    """``make test``'s distribution (``-n 3 --dist loadgroup``) with tests/conftest.py's hook:
    the tests of one shared server land in one worker, so it starts once. (pytest 9.2 with
    pytest-xdist 3.8 silently drops the groups: pytest-dev/pytest-xdist#1386.)"""
    import os
    import re
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(
        "import importlib.util, os, sys, pytest\n"
        f"_spec = importlib.util.spec_from_file_location('cookbook_conftest', {str(REPO_ROOT / 'tests' / 'conftest.py')!r})\n"
        "_real = sys.modules['cookbook_conftest'] = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_real)\n"
        "pytest_collection_modifyitems = _real.pytest_collection_modifyitems\n"
        "@pytest.fixture(scope='session')\ndef standin_server():\n    return os.environ['PYTEST_XDIST_WORKER']\n"
        "@pytest.fixture(scope='session')\ndef cpu_fleet():\n    return os.environ['PYTEST_XDIST_WORKER']\n"
    )
    (tmp_path / "test_groups.py").write_text(
        "import pytest, time\n"
        "@pytest.mark.parametrize('i', range(6))\ndef test_on_the_server(standin_server, i):\n    time.sleep(0.05)\n"
        "@pytest.mark.parametrize('i', range(4))\ndef test_on_the_fleet(i, cpu_fleet):\n    time.sleep(0.05)\n"
        "@pytest.mark.parametrize('i', range(6))\ndef test_alone(i):\n    time.sleep(0.05)\n"
    )
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # only xdist: a faster start
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup", "-v", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    ran = re.findall(r"\[(gw\d)\].*PASSED \S+::(test_\w+)\[\d+\](@\w+)?", proc.stdout)
    assert len(ran) == 16, proc.stdout[-2000:]
    workers = {
        name: {w for w, n, _ in ran if n == name}
        for name in ("test_on_the_server", "test_on_the_fleet")
    }
    assert all(len(w) == 1 for w in workers.values()), workers
    assert {g for _, n, g in ran if n == "test_on_the_server"} == {"@standin_server"}


def test_the_reference_loop_gives_one_cores_seconds_for_its_loop():
    """The machine-speed figure printed beside the suite's time: finite, positive seconds."""
    s = suite_time.reference_loop_s(repeats=2, n=10**5)
    assert isinstance(s, float) and 0 < s < 60
