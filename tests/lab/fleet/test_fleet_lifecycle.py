"""A fleet's life: started twice, re-launched, mixed with one server, a replica that dies,
Ctrl-C twice during start-up. Process mechanics, so the replicas are
``tests/support/fake_vllm_server.py`` processes (vLLM-like start-up lines, an engine-core child in
their process group, ``/health`` and ``/v1/models``) behind the real ``vllm-router``; the
one seam is the argv each server launches. Every flag is still checked by vLLM's parser.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import weakref

import psutil
import pytest

from helpers.errors import ServerStartError
from helpers.server import launch, processes, vllm_server
from helpers.server.vllm_server import VLLMServer
from lab.fleet import deployment, fleet
from lab.fleet import launch as fleet_launch
from tests.support.fake_vllm import FAKE_SERVER, answering_health, holding_the_port

#: fake-server flags per replica, by the CPU cores the deployment gave it (replica i: core i)
BEHAVIOUR: dict[str, list[str]] = {}


class FakeLaunch(VLLMServer):
    """A VLLMServer whose process is the fake server (the argv is the only difference; no
    checkpoint folder to check before the launch: the fake serves ``/fake/model``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "check_model": False})

    def _launch_argv(self) -> list[str]:
        cfg = self.config
        core = (getattr(cfg, "env", None) or {}).get("VLLM_CPU_OMP_THREADS_BIND", "")
        return [sys.executable, str(FAKE_SERVER), "--model", str(cfg.model),
                "--served-model-name", cfg.served_model_name, *BEHAVIOUR.get(core, []),
                "--host", self.host, "--port", str(self.port)]  # fmt: skip


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    """The fake fleets and servers of one test, in registries of their own: ``launch_server``
    and ``launch_fleet`` stop every other server or fleet this process started (one kernel
    serves one model), and a plain ``pytest`` run (no xdist) shares this process with the
    session's stand-in server and the fleet module's replicas."""
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "out"))
    monkeypatch.setattr(fleet, "VLLMServer", FakeLaunch)
    monkeypatch.setattr(launch, "VLLMServer", FakeLaunch)
    live = weakref.WeakSet()
    monkeypatch.setattr(vllm_server, "_LIVE", live)
    monkeypatch.setattr(launch, "_LIVE", live)
    monkeypatch.setattr(fleet, "_FLEETS", weakref.WeakSet())
    BEHAVIOUR.clear()
    made: list[fleet.Fleet] = []
    yield made
    BEHAVIOUR.clear()
    for fl in made + fleet.running_fleets():
        fl.stop(check=False)
    for srv in launch.running_servers():
        srv.stop(verbose=False)


def _dep(count: int = 2):
    return deployment.resolve_deployment(
        "replicas", "cpu", count=count, model="/fake/model", cpu_cores=list(range(count))
    )


def _our_processes() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.status() != "zombie"}


def _nothing_left(fl: fleet.Fleet) -> None:
    ports = [s.port for s in fl.servers] + ([fl.router.port] if fl.router else [])
    assert fl.processes() == []
    assert all(processes.port_is_free(p) for p in ports if p)
    assert not [r for r in processes.find_leftovers(include_owned=True) if r.port in ports]


def test_a_fleet_started_twice_is_one_fleet_and_a_stopped_one_starts_clean(fakes, capsys):
    fl = fleet.Fleet(_dep(), startup_timeout=120, grace_period=5)
    fakes.append(fl)
    fl.start()
    first = ([s.pid for s in fl.servers], fl.router.pid)
    procs = _our_processes()
    assert fl.start() is fl  # start() again: the same fleet
    with fl as again:  # entering it again too
        assert again is fl
        assert ([s.pid for s in fl.servers], fl.router.pid) == first
        assert _our_processes() == procs, "a second start launched more processes"
    said = capsys.readouterr().out
    assert said.count("[fleet] already running: 2 replicas + router") == 2, said
    # the with-block stopped it: every process, the router included
    _nothing_left(fl)
    assert "stopped: router and servers ended" in said
    # a stopped fleet starts clean: two new replicas, no false "exited with code 0"
    fl.start()
    assert len(fl.servers) == 2 and all(s.is_running() for s in fl.servers)
    assert [s.pid for s in fl.servers] != first[0]
    assert fl.router.readiness()["healthy_workers"] == 2
    fl.stop()
    _nothing_left(fl)


def test_relaunching_reuses_the_fleet_and_launch_server_stops_it_whole(fakes, capsys):
    from tests.support.fake_vllm import FakeConfig

    fl = fleet_launch.launch_fleet(_dep(), startup_timeout=120, grace_period=5)
    fakes.append(fl)
    assert fleet_launch.launch_fleet(_dep(), startup_timeout=120) is fl  # the cell run again
    assert "[fleet] reusing the fleet this kernel already runs" in capsys.readouterr().out
    # one server while the fleet runs: the fleet is stopped as a whole, and said so
    srv = launch.launch_server(FakeConfig(), startup_timeout=60, progress=False)
    said = capsys.readouterr().out
    assert "[vllm] stopping the fleet this kernel started (2 replicas + router" in said, said
    assert "stopping the server this kernel started earlier" not in said  # not replica by replica
    _nothing_left(fl)
    assert srv.is_running() and fleet.running_fleets() == []
    # and a fleet after that server: the server is stopped, with a message
    fl2 = fleet_launch.launch_fleet(_dep(), startup_timeout=120, grace_period=5)
    fakes.append(fl2)
    assert "[fleet] stopping the server this kernel started" in capsys.readouterr().out
    assert not srv.is_running() and fl2.is_running()


@pytest.mark.parametrize(
    ("taker", "ready_after"),
    [(answering_health, "2"), (holding_the_port, "0.5")],
    ids=["a-stranger-answers-health", "vllm-finds-it-held-when-binding"],
)
def test_a_replicas_picked_port_taken_during_start_up_is_picked_again_once(
    taker, ready_after, fakes, monkeypatch, capsys
):
    """Another process takes the port the fleet picked for replica 0 before it binds (two test
    workers, a notebook's router answering /health on it, or another server's engine holding
    it so vLLM exits with "Address already in use"): that replica starts again on another
    port, said; the fleet comes up whole and the first launch leaves nothing."""
    with taker() as taken:
        picks = iter([taken])
        real = vllm_server.free_port
        monkeypatch.setattr(vllm_server, "free_port", lambda host: next(picks, None) or real(host))
        BEHAVIOUR["0"] = ["--ready-after", ready_after]  # it binds late: a stranger answers first
        fl = fleet.Fleet(_dep(2), startup_timeout=60, progress=True)
        fakes.append(fl)
        fl.start()
        out = capsys.readouterr().out
        assert (
            f"replica0: port {taken} was taken while vLLM started; starting again on another" in out
        )
        assert all(s.healthy() for s in fl.servers) and taken not in [s.port for s in fl.servers]
        fl.stop()
        _nothing_left(fl)


def test_a_replica_that_dies_is_reported_at_once_not_after_the_others(fakes):
    BEHAVIOUR["0"] = ["--ready-after", "60"]  # replica 0 is slow
    BEHAVIOUR["1"] = ["--exit-after", "1"]  # replica 1 dies a second in
    fl = fleet.Fleet(_dep(), startup_timeout=120, grace_period=5, progress=False)
    fakes.append(fl)
    t0 = time.monotonic()
    with pytest.raises(ServerStartError) as err:
        fl.start()
    took = time.monotonic() - t0
    assert str(err.value).startswith("Server 1 of the")
    assert "exited with code 3 during start-up" in str(err.value)
    assert took < 30, f"reported after {took:.0f} s: the wait sat on replica 0"
    _nothing_left(fl)


@pytest.fixture
def sigint_raises():
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_two_ctrl_c_during_start_up_end_every_replica_with_progress(fakes, sigint_raises, capsys):
    # replicas stuck loading that sit on SIGTERM: only SIGKILL ends them
    BEHAVIOUR["0"] = BEHAVIOUR["1"] = ["--never-ready", "--ignore-sigterm"]
    fl = fleet.Fleet(_dep(), startup_timeout=300, grace_period=60)
    fakes.append(fl)
    seen: dict[str, list[int]] = {}

    def interrupt() -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            recs = {r.pid for r in processes.find_leftovers(include_owned=True)}
            pids = [s.pid for s in fl.servers if s.pid]
            if len(pids) == 2 and set(pids) <= recs:  # each replica recorded as it exists
                seen["recorded"] = pids
                time.sleep(1.0)
                os.kill(os.getpid(), signal.SIGINT)  # first Ctrl-C: the fleet stops (SIGTERM)
                time.sleep(2.0)
                os.kill(os.getpid(), signal.SIGINT)  # second: kill at once
                return
            time.sleep(0.2)

    threading.Thread(target=interrupt, daemon=True).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        fl.start()
    took = time.monotonic() - t0
    assert len(seen.get("recorded", [])) == 2
    assert took < 30, f"{took:.0f} s: the second Ctrl-C did not kill at once (grace 60 s)"
    said = capsys.readouterr().out
    assert "[fleet] stopping replica1, replica0 (SIGTERM, SIGKILL after 60 s" in said, said
    assert "[fleet] Ctrl-C: killing every process of the fleet now" in said
    for pid in seen["recorded"]:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    _nothing_left(fl)
