"""The lm-eval child prints nothing of lm-eval's own bookkeeping: its git probe said "fatal:
not a git repository" on a GPU box running a copy of the cookbook without .git."""

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
