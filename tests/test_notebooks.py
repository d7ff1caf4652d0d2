"""Notebooks: generated from one template, committed clean, and executed with papermill."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import psutil
import pytest

from helpers import notebooks, recipes, server
from helpers.paths import REPO_ROOT, out_dir

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def test_committed_notebooks_match_the_template():
    stale = notebooks.build(check=True)
    assert stale == [], f"run `python -m helpers.notebooks build`: {stale}"


def test_one_notebook_per_gpu_target_plus_quickstart():
    names = {p.stem for p in NOTEBOOKS}
    for target in recipes.list_targets():
        if target != "cpu":
            assert target.replace("-", "_") in names
    assert notebooks.QUICKSTART in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_hygiene(path):
    cells = _cells(path)
    code = [c for c in cells if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    assert sum("parameters" in c.get("metadata", {}).get("tags", []) for c in cells) == 1
    source = "\n".join("".join(c["source"]) for c in code)
    assert "%pip install" in source
    assert not re.search(r"^\s*!.*&\s*$", source, re.M), "no background shell commands"
    # thin cells: the logic lives in helpers
    assert max(len("".join(c["source"]).splitlines()) for c in code) <= 25


def _vllm_pids(port: int) -> set[int]:
    """PIDs of vLLM API servers listening on ``port`` on this machine."""
    found = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "vllm" in cmd and f"--port {port}" in cmd:
            found.add(p.pid)
    return found


def _port_free(port: int) -> bool:
    # SO_REUSEADDR like vLLM itself, so TIME_WAIT sockets of closed connections do not count
    return server.port_is_free(port)


@pytest.mark.notebook
@pytest.mark.server
def test_quickstart_runs_end_to_end():
    """The main job: a real CPU vLLM server launched, used, benchmarked, plotted, stopped.

    Outputs go to the usual ignored folder (``out/``), like ``make quickstart``; only files
    written by this run are checked.
    """
    started = time.time()
    executed = notebooks.run_notebook(
        REPO_ROOT / "notebooks" / f"{notebooks.QUICKSTART}.ipynb", {"install": False}
    )
    out = out_dir()
    assert executed.exists() and executed.parent == out / "notebooks"
    fresh = [p for p in out.rglob("*") if p.is_file() and p.stat().st_mtime >= started]
    bench_jsons = [p for p in fresh if p.suffix == ".json" and "bench" in p.parts]
    assert len(bench_jsons) >= 3
    for p in bench_jsons:
        data = json.loads(p.read_text())
        if "completed" in data:
            assert data["completed"] > 0 and data.get("failed", 0) == 0
    pngs = [p for p in fresh if p.suffix == ".png"]
    assert pngs and all(p.stat().st_size > 1000 for p in pngs)
    text = executed.read_text()
    port = int(re.search(r"base_url: http://127\.0\.0\.1:(\d+)", text).group(1))
    assert _port_free(port)
    assert not _vllm_pids(port)
    # the server ran in its own session: no process of that process group may be left
    pgid = int(re.search(r"\[vllm\] launched pid (\d+)", text).group(1))
    left = _group_left(pgid)
    assert not left, f"the notebook's server left processes behind: {left}"
    _assert_session_outputs(text, reasoning_parser=True, tool_calling=True)


def _cell_sources(path: Path, marker: str) -> list[str]:
    return ["".join(c["source"]) for c in _cells(path) if marker in "".join(c["source"])]


TARGET_NOTEBOOKS = [
    p for p in NOTEBOOKS if json.loads(p.read_text())["metadata"].get("cookbook", {}).get("target")
    and p.stem != notebooks.QUICKSTART
]


def test_target_notebooks_share_the_quickstarts_launch_and_stop_cells():
    """The launch/stop code each target notebook runs is the quickstart's, which CI executes."""
    quick = REPO_ROOT / "notebooks" / f"{notebooks.QUICKSTART}.ipynb"
    for marker in ("server.launch_server(serve_cfg", "srv.stop()"):
        expected = _cell_sources(quick, marker)
        assert len(expected) == 1
        for path in TARGET_NOTEBOOKS:
            assert _cell_sources(path, marker) == expected, path.name


@pytest.mark.notebook
@pytest.mark.server
@pytest.mark.parametrize("path", TARGET_NOTEBOOKS, ids=lambda p: p.stem)
def test_target_notebook_runs_in_stand_in_mode(path, standin_server):
    """Each target notebook: real command rendered + validated, then the story on the stand-in.

    To keep the suite inside CI's budget the notebooks attach to the session's stand-in
    server (``server_url``); launch and stop run in the quickstart, from identical cells.
    A target whose stand-in serves other features than the session's server (Baseten's
    preset has no parsers, Jetson's no tool parser) launches and stops its own, and its
    notebook must say which steps it skips instead of failing.
    """
    cfg = recipes.resolve(json.loads(path.read_text())["metadata"]["cookbook"]["target"])
    own = recipes.standin_config(cfg, standin_server.config.model)
    # a target whose stand-in serves other features (e.g. no tool parser) launches its own
    # server with its own flags, as it would when a user runs it alone
    attach = set(own.features) == set(standin_server.config.features)
    params = {
        "stand_in": True,
        "install": False,
        "bench_concurrencies": [1, 2],
        "bench_input_len": 32,
        "bench_output_len": 16,
    }
    if attach:
        params["server_url"] = standin_server.url
    executed = notebooks.run_notebook(path, params)
    text = executed.read_text()
    assert f"vllm serve {cfg.model}" in text  # the real target's command was shown
    assert standin_server.is_running()
    _assert_session_outputs(text, reasoning_parser="reasoning" in own.features, tool_calling="tool_calling" in own.features)
    if not attach:
        pgid = int(re.search(r"\[vllm\] launched pid (\d+)", text).group(1))
        assert not _group_left(pgid), f"{path.name}: its own server left processes behind"


def _group_left(pgid: int) -> list[int]:
    left = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return left


def _assert_session_outputs(text: str, *, reasoning_parser: bool, tool_calling: bool) -> None:
    """What an executed notebook printed reads like a real session: reasoning and answer
    sections, the budget behaving (or a stated skip), the tool's result used, no traceback."""
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "── answer ──" in text
    if reasoning_parser:
        assert "── reasoning" in text
        assert re.search(r"thinking_token_budget=\d+: \d+ reasoning tokens \(budget \d+\), then an answer", text), "budget line"
        assert "UNEXPECTED thinking_token_budget" not in text
    else:
        assert "skipped: " in text and "--reasoning-parser" in text
    if tool_calling:
        assert "get_weather(" in text and "── tool get_weather returned ──" in text
    else:
        assert "skipped: " in text and "--tool-call-parser" in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_parameter_is_visible_to_papermill(path):
    """`papermill --help-notebook` lists every parameter (a comment it cannot parse hides one)."""
    import papermill

    cell = next(c for c in _cells(path) if "parameters" in c.get("metadata", {}).get("tags", []))
    names = re.findall(r"^(\w+)\s*(?::[^=]*)?=", "".join(cell["source"]), re.M)
    assert list(papermill.inspect_notebook(str(path))) == names


@pytest.mark.notebook
@pytest.mark.server
def test_scale_out_notebook_runs_on_cpu_replicas():
    """The scale-out story on two CPU stand-in replicas behind the real vllm-router: GPU
    layouts rendered and validated, one fleet launched, a chat and two tiny sweeps through
    it, the plot written, everything stopped."""
    started = time.time()
    executed = notebooks.run_notebook(
        REPO_ROOT / "notebooks" / "scale_out.ipynb",
        {"install": False, "concurrencies": [1, 2], "input_len": 16, "output_len": 8},
    )
    text = executed.read_text()
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "--data-parallel-size 4" in text and "--headless" in text and "vllm-router" in text
    assert "processes left: []" in text
    split = re.search(r"requests served per replica during the router sweep: \[([\d., ]+)\]", text)
    assert split and all(float(x) > 0 for x in split.group(1).split(","))  # both replicas served
    png = out_dir("plots") / "scale-out-standin.png"
    assert png.exists() and png.stat().st_mtime >= started
    ports = [int(p) for p in re.findall(r"\[vllm\] launched pid \d+ on port (\d+)", text)]
    assert len(ports) == 2 and all(_port_free(p) and not _vllm_pids(p) for p in ports)
