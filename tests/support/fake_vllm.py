"""A :class:`helpers.server.vllm_server.VLLMServer` that launches the fake vLLM server
(:mod:`tests.support.fake_vllm_server`, about a second, no model) instead of vLLM: process
mechanics (timeouts, heartbeat, process-group ending, records, SIGKILL) as unit tests. The
``fake_vllm`` fixture (``tests/conftest.py``) makes them per test; :func:`make_fake_server`
makes one directly."""

from __future__ import annotations

import contextlib
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: The script each fake server runs (by path, as vLLM's ``vllm serve`` would be).
FAKE_SERVER = Path(__file__).parent / "fake_vllm_server.py"


@dataclass
class FakeConfig:
    """The duck-typed config :class:`helpers.server.vllm_server.VLLMServer` takes (no ``validate``:
    nothing imports vLLM). ``flags`` go to the fake server, e.g. ``["--never-ready"]``."""

    model: str = "fake-model"
    served_model_name: str = "fake-model"
    host: str = "127.0.0.1"
    port: int | None = None
    env: dict = field(default_factory=dict)
    flags: list = field(default_factory=list)

    def cli_flags(self) -> list[str]:
        return ["--served-model-name", self.served_model_name, *self.flags]


def fake_argv(srv) -> list[str]:
    """What a VLLMServer launches for the fake: the script, the model, the flags, host, port."""
    cfg = srv.config
    return [sys.executable, str(FAKE_SERVER), "--model", cfg.model, *cfg.cli_flags(),
            "--host", srv.host, "--port", str(srv.port)]  # fmt: skip


def make_fake_server(*flags: str, port: int | None = None, model: str = FakeConfig.model, **kwargs):
    """A VLLMServer (not started) that launches ``tests/support/fake_vllm_server.py``
    (``model``: the ``--model`` it names)."""
    from helpers.server.vllm_server import VLLMServer

    srv = VLLMServer(FakeConfig(model, port=port, flags=list(flags)), cache_dir=None, **kwargs)
    srv._launch_argv = lambda: fake_argv(srv)  # the one seam: the argv, everything else real
    return srv


def stranger_answering_health():
    """Another process's server on a free port of 127.0.0.1 whose ``/health`` answers 200, as
    a port taken between the launcher's pick and vLLM's bind looks; ``shutdown()`` and
    ``server_close()`` end it."""
    import http.server
    import threading

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    stranger = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=stranger.serve_forever, daemon=True).start()
    return stranger


@contextlib.contextmanager
def answering_health():
    """A port taken by a stranger that answers ``/health`` on it (another worker's router);
    yields the port."""
    stranger = stranger_answering_health()
    try:
        yield stranger.server_address[1]
    finally:
        stranger.shutdown()
        stranger.server_close()


@contextlib.contextmanager
def holding_the_port():
    """A port held by a socket that listens and answers nothing, so vLLM's own bind fails
    ("Address already in use"); yields the port."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        yield holder.getsockname()[1]
    finally:
        holder.close()
