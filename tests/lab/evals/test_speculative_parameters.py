"""The speculative-decoding notebook's parameters, checked before any server starts (a GPU
start takes minutes): each bad value named with what the parameter takes."""

from __future__ import annotations

import re

import pytest


def test_the_speculative_notebooks_parameters_are_checked_before_any_server_starts():
    from lab.evals.speculative import check_mode_parameters

    offered = ["none", "mtp", "dflash", "dspark"]
    assert check_mode_parameters(None, offered) == ["none", "dspark"]
    assert check_mode_parameters("all", offered) == offered
    assert check_mode_parameters(["none", "mtp"], offered, servers={"mtp": "http://h:1"}) == [
        "none",
        "mtp",
    ]
    for bad, said in (
        ("foo", "modes='foo': pass None, 'all', or a list"),  # was KeyError: 'f'
        (["none", "eagle"], "['eagle'] not offered for this target"),
    ):
        with pytest.raises(ValueError, match=re.escape(said)):
            check_mode_parameters(bad, offered)
    with pytest.raises(ValueError, match=re.escape("servers names ['mpt']")):
        check_mode_parameters(["none", "mtp"], offered, servers={"mpt": "http://h:1"})
    with pytest.raises(ValueError, match="acceptance_prompts=-1"):
        check_mode_parameters(None, offered, acceptance_prompts=-1)
    with pytest.raises(ValueError, match="temperature=-1"):
        check_mode_parameters(None, offered, temperature=-1)
