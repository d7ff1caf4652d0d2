"""helpers.weights.prepare: the run a notebook's parameters ask for, and the config it serves
(download / weightless / stand-in / attach)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.config import resolve as recipes
from helpers.errors import CookbookError
from helpers.weights import prepare


def test_the_notebook_parameters_pick_the_mode(capsys):
    cfg = recipes.resolve("h100")
    assert prepare.prepare(cfg).mode == "download"
    assert prepare.prepare(cfg, weightless=True).mode == "weightless"
    assert capsys.readouterr().out == ""
    # the stand-in wins, and says that weightless is not played
    assert prepare.prepare(cfg, stand_in=True, weightless=True).mode == "stand_in"
    assert "weightless=True is not played" in capsys.readouterr().out
    assert prepare.prepare(cfg, stand_in=True, server_url="http://127.0.0.1:8000").mode == "attach"
    assert set(prepare.MODES) == {"download", "weightless", "stand_in", "attach"}


def test_an_unknown_mode_names_the_four():
    with pytest.raises(CookbookError, match="download, weightless, stand_in, attach"):
        prepare.served_config(recipes.resolve("h100"), "dummy")
    with pytest.raises(TypeError, match="fetch: pass the run prepare"):
        prepare.fetch(recipes.resolve("h100"))


def test_attach_mode_serves_the_config_as_it_is_and_downloads_nothing(capsys):
    cfg = recipes.resolve("h100")
    run = prepare.fetch(prepare.prepare(cfg, server_url="http://127.0.0.1:8000"))
    assert run.served is cfg and run.attached
    assert "nothing to download" in capsys.readouterr().out


def test_stand_in_serves_the_local_stand_in_with_the_targets_parsers(standin_model):
    cfg = recipes.resolve("h100")
    run = prepare.fetch(prepare.prepare(cfg, stand_in=True))
    served = run.served
    assert run.target is cfg and run.stand_in
    assert served == recipes.standin_config(cfg, standin_model)
    assert Path(served.model, "standin.json").is_file() and served.target == "cpu"


def test_weightless_serves_the_architecture_with_dummy_weights_and_downloads_nothing(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a download attempt would fail loudly
    cfg = recipes.resolve("h200")  # NVFP4, no separate drafter
    served = prepare.fetch(prepare.prepare(cfg, weightless=True)).served
    folder = Path(served.model)
    assert folder.is_dir() and folder.is_relative_to(tmp_path)
    assert json.loads((folder / "config.json").read_text())["num_hidden_layers"] == 52
    argv = served.cli_flags()
    assert argv[argv.index("--load-format") + 1] == "dummy"


def test_prepare_takes_each_parameter_by_name_and_names_the_ones_it_takes():
    cfg = recipes.resolve("h100")
    with pytest.raises(
        TypeError, match="standin is not a run parameter; pass stand_in, weightless, server_url"
    ):
        prepare.prepare(cfg, standin=True)
    with pytest.raises(TypeError, match="`stand_in` must be True or False; got 'yes'"):
        prepare.prepare(cfg, stand_in="yes")
    with pytest.raises(TypeError):  # no namespace: prepare(cfg, globals()) is gone
        prepare.prepare(cfg, {"stand_in": True})


@pytest.mark.parametrize(
    "cfg, kwargs, error, words",
    [
        ("h200", {"stand_in": True}, TypeError,
         "prepare: pass the resolved target, cfg = resolve('h200') (helpers.config.resolve); got str"),
        (None, {}, TypeError, "pass the resolved target, cfg = resolve(None)"),
        ("cfg", {"server_url": 8000}, TypeError,
         "`server_url` must be a URL like 'http://127.0.0.1:8000' (or None to launch one); got 8000"),
        ("cfg", {"server_url": "localhost:8000"}, ValueError,
         "(or None to launch one); got 'localhost:8000'"),
        ("cfg", {"stand_in": 1}, TypeError, "`stand_in` must be True or False; got 1"),
    ],
)  # fmt: skip
def test_wrong_types_are_refused_with_what_to_pass(cfg, kwargs, error, words):
    """prepare("h200", stand_in=True) returned a run that failed later in AttributeError."""
    cfg = recipes.resolve("h200") if cfg == "cfg" else cfg
    with pytest.raises(error, match=re.escape(words)):
        prepare.prepare(cfg, **kwargs)
    assert prepare.prepare(recipes.resolve("h200"), server_url="").server_url is None
