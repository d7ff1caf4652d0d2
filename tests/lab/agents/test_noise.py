"""lab.agents.noise: a cell on noise text (weightless mode) reports what failed instead of
raising; with real weights, and for a failed server, it raises."""

from __future__ import annotations

import pytest

from helpers.errors import ResponseError
from helpers.server.endpoint import make_client
from lab.agents import noise
from tests.support.chat_replay import TOOLS, ask


def test_noise_tolerant_reports_in_weightless_mode_and_raises_otherwise(capsys):
    with noise.noise_tolerant(True, "tool loop"):
        raise ResponseError("The model called tool 'x!y', which is not in tools")
    out = capsys.readouterr().out
    assert "weightless mode: the tool loop did not complete because the text is noise" in out
    assert "ResponseError" in out
    with noise.noise_tolerant(True, "schema answer"):
        raise ResponseError("No answer: raise max_tokens.")
    assert "raise max_tokens. The request, the server's parsers" in capsys.readouterr().out
    with pytest.raises(ResponseError), noise.noise_tolerant(False, "tool loop"):
        raise ResponseError("real weights: an error")
    with pytest.raises(KeyboardInterrupt), noise.noise_tolerant(True, "tool loop"):
        raise KeyboardInterrupt


def test_a_weightless_cell_reports_a_reply_that_fails_on_noise_instead_of_raising(rec, capsys):
    """``noise_tolerant(srv.run.noise, ...)`` around a checked turn: on noise text (weightless
    mode) the failure prints what failed; with real weights it raises."""
    client = make_client(rec.base_url, timeout=10)
    rec.queue("wrong_tool_parser", "wrong_tool_parser")
    with noise.noise_tolerant(True, "chat"):
        ask(client, "Weather in Santa Clara and time in Tokyo?", tools=TOOLS)
    said = capsys.readouterr().out
    assert "weightless mode: the chat did not complete" in said
    assert "ResponseError" in said and "--tool-call-parser" in said
    with pytest.raises(ResponseError), noise.noise_tolerant(False, "chat"):
        ask(client, "q", tools=TOOLS)
