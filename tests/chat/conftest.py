"""The chat tests' recorded-reply layer (:mod:`tests.support.chat_replay`): a recording server
on 127.0.0.1 that answers with recorded vLLM replies, and an SDK client on it."""

from __future__ import annotations

import pytest


@pytest.fixture
def rec():
    """A recording server on 127.0.0.1 answering with recorded vLLM replies (``rec.queue``)."""
    from tests.support.chat_replay import RecordingServer

    server = RecordingServer()
    yield server
    server.close()


@pytest.fixture
def client(rec):
    """An ``openai.OpenAI`` client on :func:`rec`."""
    from helpers.server.endpoint import make_client

    return make_client(rec.base_url, timeout=10)
