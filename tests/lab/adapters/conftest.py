"""The adapters tests' shared server: the stand-in with ``--enable-lora``, the registry's
stand-in flags, both trained adapters loaded at start-up and runtime updates on
(``lora_server``, its xdist group in ``tests/conftest.py`` ``SHARED_SERVERS``): the notebook
and every failure test against vLLM share its one start."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def lora_adapters(standin_model):
    """``{name: folder}`` of the stand-in's trained adapters (cached under ``out/adapters``)."""
    from lab.adapters.train import build_adapters

    return build_adapters(base=standin_model)


@pytest.fixture(scope="session")
def lora_server(standin_config, lora_adapters):
    """One vLLM CPU server of the stand-in serving both adapters, for the session; never stop
    it. A test that unloads an adapter loads it back before it ends."""
    from helpers.server.vllm_server import VLLMServer
    from lab.adapters.spec import lora_config

    srv = VLLMServer(lora_config(standin_config, lora_adapters))
    srv.start()
    print(f"\nlora_server: ready in {srv.startup_seconds:.0f} s at {srv.base_url}")
    try:
        yield srv
    finally:
        srv.stop()
