"""The target notebooks' tool-calling cell (step 7), run as written against the real stand-in
server: its loop stops when the model asks again for a call whose result it already sent
(Lightning is thinking-first and, with thinking off, repeats the same call every turn: Avarok
atlas PR #566), instead of running the tool again until the rounds run out. The stand-in falls
into that loop for real when the tool's result is not in the shape it was trained on (the
recorded replies' ``get_weather``, ``tests.support.chat_replay.WEATHER_TOOLS``): it calls
``get_weather(city='Santa Clara')`` again, turn after turn."""

from __future__ import annotations

import contextlib
import io

import pytest

from helpers.chat.display import show
from helpers.paths import REPO_ROOT
from tests.support.chat_replay import WEATHER_TOOLS
from tests.support.notebook_checks import cell_source, notebook_cells

NOTEBOOK = REPO_ROOT / "notebooks" / "h200.ipynb"


def _tool_cells() -> tuple[str, str]:
    """(the cell defining the tools, the tool loop of step 7), as committed."""
    code = [cell_source(c) for c in notebook_cells(NOTEBOOK) if c["cell_type"] == "code"]
    tools = next(s for s in code if "def get_weather" in s)
    loop = next(s for s in code if "Santa Clara?" in s and "done = set()" in s)
    return tools, loop


class _ThinkingOff:
    """The real SDK client, every chat request sent with thinking off (what a user's
    ``extra_body={"chat_template_kwargs": {"enable_thinking": False}}`` does)."""

    def __init__(self, client):
        self.chat = self
        self.completions = self
        self._client = client

    def create(self, **kwargs):
        body = {"chat_template_kwargs": {"enable_thinking": False}}
        return self._client.chat.completions.create(extra_body=body, **kwargs)


@pytest.mark.server
def test_the_tool_cell_stops_when_the_same_call_comes_back(standin_server):
    tools_src, loop_src = _tool_cells()
    namespace = {
        "srv": standin_server, "llm": _ThinkingOff(standin_server.client()),
        "model": standin_server.model_name, "max_tokens": 256, "temperature": 0.0,
        "top_p": 1.0, "show": show,
    }  # fmt: skip
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(tools_src, namespace)
        namespace["tools"] = WEATHER_TOOLS  # results the stand-in cannot read: it calls again
        exec(loop_src, namespace)
    text = out.getvalue()
    calls = [m for m in namespace["messages"] if m.get("role") == "tool"]
    # the stand-in asks for get_weather(Santa Clara) again: run once, then stopped (without the
    # check the cell runs it on each of its 3 rounds)
    assert text.count("── tool get_weather returned ──") == len(calls) == 1, text
    assert "── the same call again, its result already sent: stopped" in text, text
