"""The agents tests' recorded-reply layer (:mod:`tests.support.chat_replay`), as in
``tests/chat/conftest.py``: a recording server on 127.0.0.1 that answers with recorded vLLM
replies (the schema tests' own ``client`` is on it)."""

from __future__ import annotations

import pytest


@pytest.fixture
def rec():
    """A recording server on 127.0.0.1 answering with recorded vLLM replies (``rec.queue``)."""
    from tests.support.chat_replay import RecordingServer

    server = RecordingServer()
    yield server
    server.close()
