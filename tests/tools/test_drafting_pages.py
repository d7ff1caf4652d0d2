"""The drafting session pages under docs/results: each is what its records give, names the
source of every synthetic acceptance it shows, and puts each configuration beside the baseline
of its own session."""

from __future__ import annotations

import json
import shutil

from tests.support import TESTS
from tools.drafting_pages import drafting_markdown

SESSIONS = sorted((TESTS.parent / "docs" / "results").glob("*/drafting-*/"))


def test_each_committed_drafting_page_is_the_one_its_records_give():
    assert SESSIONS, "no drafting session is committed"
    for session in SESSIONS:
        assert (session / "README.md").read_text() == drafting_markdown(session), (
            f"{session} is stale: python -m tools.drafting_pages {session.relative_to(TESTS.parent)} --write"
        )


def test_ratios_are_to_the_same_session_baseline_and_a_small_one_is_a_tie(tmp_path):
    session = tmp_path / "drafting-x"
    shutil.copytree(SESSIONS[0], session)
    page = drafting_markdown(session)
    assert "455 (2.06x)" in page and "2,541 (1.05x, tie)" in page
    # the baseline row carries no ratio; each drafting row's source is named once
    row = next(line for line in page.splitlines() if line.startswith("| NVFP4 recipe"))
    assert "x" not in row.split("|")[2]
    assert page.count("(ai-dynamo/dynamo") == 1 and "an assumption" in page
    # a run without drafting has no break-even line
    manifest = json.loads((session / "runs.json").read_text())
    manifest["runs"] = [r for r in manifest["runs"] if not r.get("num_speculative_tokens")]
    (session / "runs.json").write_text(json.dumps(manifest))
    assert "Break-even" not in drafting_markdown(session)
