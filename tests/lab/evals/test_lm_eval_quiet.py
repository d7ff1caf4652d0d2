"""The lm-eval child prints nothing of lm-eval's own bookkeeping (its git probe said "fatal:
not a git repository" on a GPU box running a copy of the cookbook without .git), and reads the
server's counters around a run."""

from __future__ import annotations

import importlib

import pytest


def test_the_git_probe_is_silent_outside_a_repository(tmp_path, monkeypatch, capfd):
    pytest.importorskip("lm_eval")
    import lm_eval.evaluator as evaluator

    from lab.evals.lm_eval_child import quiet

    monkeypatch.chdir(tmp_path)  # a folder without .git, as a copied cookbook
    original = importlib.import_module("lm_eval.loggers.utils").get_git_commit_hash
    original()
    assert "not a git repository" in capfd.readouterr().err  # what users saw
    monkeypatch.setattr(evaluator, "get_git_commit_hash", original)
    monkeypatch.setattr(evaluator, "add_env_info", evaluator.add_env_info)
    quiet(evaluator)
    assert evaluator.get_git_commit_hash() is None and evaluator.add_env_info({}) is None
    assert capfd.readouterr().err == ""


def test_requests_ended_by_length_are_read_from_a_recorded_scrape():
    """The child's before/after counter: vLLM's finished requests of one ``finished_reason``
    (a real CPU server's /metrics, tests/data/runtime/metrics_after.txt)."""
    from helpers.bench.metrics import REQUEST_SUCCESS
    from lab.evals.lm_eval_child import labeled_total
    from tests.support import DATA

    text = (DATA / "runtime" / "metrics_after.txt").read_text()
    assert labeled_total(text, REQUEST_SUCCESS, finished_reason="length") == 24.0
    assert labeled_total(text, REQUEST_SUCCESS, finished_reason="nope") is None
    assert labeled_total("not prometheus {", REQUEST_SUCCESS) is None
