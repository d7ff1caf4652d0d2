"""The README's first-run figures are the ones `make first-run` recorded (tools/first_run.py)."""

from __future__ import annotations

import json

from helpers.paths import REPO_ROOT
from tools import first_run


def test_readme_quotes_the_recorded_first_run():
    record = json.loads(first_run.RECORD.read_text())
    readme = (REPO_ROOT / "README.md").read_text()
    m = first_run._MARK.search(readme)
    assert m, "README.md lost its <!-- first-run --> block"
    assert m.group(2) == first_run.readme_sentence(record), (
        "README's first-run sentence differs from docs/results/first_run.json: run `make first-run`"
    )
    page = first_run.PAGE.read_text()
    assert first_run.table(record) in page
    # the record holds every phase make setup reports, and the phases add up
    phases = record["cold"]["setup_phases"]
    assert set(phases) == {
        "venv",
        "installer",
        "torch source",
        "requirements",
        "torch companions",
        "cookbook",
    }
    assert abs(sum(phases.values()) - record["cold"]["setup"]) < 2
    assert record["cold"]["first_reply"] <= record["cold"]["notebook"]
    assert record["from_nothing"] >= record["cold"]["make_quickstart"]


def test_readme_sentence_is_rewritten_in_place(tmp_path):
    record = json.loads(first_run.RECORD.read_text())
    page = tmp_path / "README.md"
    page.write_text("intro\n<!-- first-run: x -->\nold figures\n<!-- /first-run -->\nrest\n")
    first_run.write_readme(record, page)
    text = page.read_text()
    assert "old figures" not in text and first_run.readme_sentence(record) in text
    assert text.startswith("intro\n") and text.endswith("rest\n")
