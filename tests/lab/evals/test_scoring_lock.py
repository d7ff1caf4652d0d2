"""Two runs scoring into one ``out/evals/<label>/`` (two quickstarts on one ``out/``) take
turns: the second waits for the first, says so, and both score their own items. They rewrote
each other's items, task and ``done.json`` and one failed in lm-eval's KeyError. Real stand-in
server, real lm-eval children."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from helpers.paths import REPO_ROOT
from lab.evals.accuracy import evaluate
from lab.evals.settings import RequestSettings

QUICK = RequestSettings(thinking=False, temperature=0.0, top_p=1.0, max_tokens=64)

CHILD = """
import sys
from helpers.server.launch import attach_server
from lab.evals.accuracy import evaluate
from lab.evals.settings import RequestSettings
r = evaluate(attach_server(sys.argv[1]), 4, label="shared", progress=False,
             options=RequestSettings(thinking=False, temperature=0.0, top_p=1.0, max_tokens=64))
print("child scored", len(r.items), "items")
"""


@pytest.mark.server
def test_two_runs_on_one_label_take_turns(standin_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, standin_server.url],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        items = tmp_path / "evals" / "shared" / "items.jsonl"
        deadline = time.monotonic() + 120
        while not items.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # the child holds the folder once it wrote its items
        assert items.exists(), child.communicate()[1][-2000:]
        mine = evaluate(standin_server, 2, label="shared", options=QUICK, progress=False)
        out, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0 and "child scored 4 items" in out, err[-2000:]
    assert len(mine.items) == 2 and mine.path == tmp_path / "evals" / "shared"
    said = capsys.readouterr().out
    assert (
        f"[evals] another run is scoring into {tmp_path / 'evals' / 'shared'}: waiting for it "
        "to end (runs on one out/ share out/evals/<label>; COOKBOOK_OUT gives a run a folder of "
        "its own)"
    ) in said
