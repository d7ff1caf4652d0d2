"""Replicas behind vllm-router and DP+EP: registry, renderings, validation, and a real fleet.

Unit tests (no server) resolve and render the deployments and check them with vLLM 0.32.0's
parser and the installed ``vllm-router --help``. The ``server`` tests share ONE fleet (two
CPU stand-in replicas, each on its own core, behind vllm-router) and run in file order:
chat and tools through the router, a sweep through the router, the scale-out notebook
attached to it, one replica stopped during a sweep through the router, the other's API
server SIGKILLed during a sweep straight at it, and the stop (last).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time

import pytest
import yaml

from helpers import errors as errors_mod
from helpers.bench import metrics, point
from helpers.bench import sweep as bench
from helpers.config import load
from helpers.config import resolve as recipes
from helpers.errors import CookbookError, FlagError, RecipeError
from helpers.paths import REPO_ROOT
from helpers.server import endpoint, processes
from helpers.server import vllm_server as server
from lab.fleet import deployment, fleet, render, router
from tests.support.chat_replay import ask, tool_loop
from tests.support.proctools import assert_nothing_left
from tools import notebook_run as notebooks

# --------------------------------------------------------------------------- registry


def test_replicas_resolve_one_gpu_group_each_behind_the_router():
    dep = deployment.resolve_deployment("replicas", "h200", count=2)
    assert dep.layout == "replicas" and dep.count == 2 and dep.gpu_count == 2
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in dep.servers] == ["0", "1"]
    for s in dep.servers:  # the target's flags, unchanged, plus NVLink multicast off
        assert s.args == recipes.resolve("h200").args
        assert {k: s.env[k] for k in deployment.NO_MULTICAST_ENV} == deployment.NO_MULTICAST_ENV
    reg = load.load_registry().deployments["replicas"].router
    assert dep.router.policy == reg.policy
    assert dep.router.worker_urls == ["http://127.0.0.1:8000", "http://127.0.0.1:8001"]
    assert "--health-check-interval-secs" in dep.router.cli_flags()


def test_replicas_of_a_tensor_parallel_target_take_tp_gpus_each():
    dep = deployment.resolve_deployment("replicas", "h100x8-bf16", count=2)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in dep.servers] == [
        "0,1,2,3,4,5,6,7",
        "8,9,10,11,12,13,14,15",
    ]
    assert dep.gpu_count == 16


def test_dp_ep_single_node_and_multi_node_commands():
    one = deployment.resolve_deployment("dp_ep", "h200", count=2)
    (srv,) = one.servers
    assert srv.args["--data-parallel-size"] == 2 and srv.args["--enable-expert-parallel"] is True
    assert srv.env["CUDA_VISIBLE_DEVICES"] == "0,1" and one.router is None
    multi = deployment.resolve_deployment(
        "dp_ep", "h200", count=8, nodes=2, head_address="10.0.0.1"
    )
    head, (worker,) = multi.nodes["head"], multi.nodes["headless"]
    for cfg in (head, worker):
        assert cfg.args["--data-parallel-size"] == 8 and cfg.args["--data-parallel-size-local"] == 4
        assert cfg.args["--data-parallel-address"] == "10.0.0.1"
        assert cfg.args["--data-parallel-rpc-port"] == 13345
    assert "--headless" not in head.args and worker.args["--headless"] is True
    assert worker.args["--data-parallel-start-rank"] == 4
    text = multi.shell_commands()
    assert text.count("--headless") == 1 and "--data-parallel-start-rank 4" in text


def test_the_shell_form_says_the_router_listens_locally_while_the_replicas_do_not():
    """The replicas' recipe lines bind 0.0.0.0; the router's default host is 127.0.0.1, so a
    user copying the shell form would get a router other machines cannot reach: it says so."""
    dep = deployment.resolve_deployment("replicas", "h200", count=2)
    text = dep.shell_commands()
    replicas, _, router_block = text.partition("# router")
    assert replicas.count("0.0.0.0") == 2 and "--host 127.0.0.1" in router_block
    assert "listens on 127.0.0.1 only: --host 0.0.0.0 serves other machines" in text
    dep.router.host = "0.0.0.0"
    assert "listens on" not in dep.shell_commands()
    # replicas whose ports are picked at launch (the stand-in's) render the ports the router's
    # worker URLs name, not 8000 twice
    cpu = deployment.resolve_deployment("replicas", "cpu", count=2, model="/m", cpu_cores=[0, 1])
    assert re.findall(r"--port (\d+)", cpu.shell_commands())[:2] == ["8000", "8001"]
    assert "--worker-urls http://127.0.0.1:8000 http://127.0.0.1:8001" in cpu.shell_commands()


def test_every_rendered_line_is_valid_for_vllm_and_the_router():
    for dep in (
        deployment.resolve_deployment("replicas", "h200", count=2),
        deployment.resolve_deployment("replicas", "h100", count=4, policy="cache_aware"),
        deployment.resolve_deployment("dp_ep", "h200", count=2),
        deployment.resolve_deployment("dp_ep", "h200", count=4, nodes=2),
    ):
        dep.validate()
        assert all(argv[:2] == ["vllm", "serve"] for argv in dep.serve_lines())


def test_router_help_is_read_from_the_installed_binary():
    opts = router.router_options()
    assert {"round_robin", "cache_aware", "power_of_two"} <= set(opts["--policy"]["choices"])
    assert opts["--worker-urls"]["takes"] == "many" and opts["--mini-lb"]["takes"] == "none"


def test_router_rejects_a_bad_policy_and_an_unknown_flag_by_name():
    with pytest.raises(FlagError) as e:
        deployment.resolve_deployment("replicas", "h200", policy="fastest").validate()
    assert e.value.flags == ["--policy"] and "round_robin" in str(e.value)
    with pytest.raises(FlagError) as e:
        deployment.resolve_deployment(
            "replicas", "h200", router_args={"--health-interval": 2}
        ).validate()
    assert "--health-interval" in e.value.flags


def test_a_bad_serve_flag_is_named_before_anything_runs():
    dep = deployment.resolve_deployment(
        "dp_ep", "h200", extra_args={"--data-paralel-size-local": 1}
    )
    with pytest.raises(FlagError) as e:
        dep.validate()
    assert "--data-paralel-size-local" in e.value.flags


def test_compose_file_has_one_service_per_replica_and_the_router():
    dep = deployment.resolve_deployment("replicas", "h200", count=2)
    doc = yaml.safe_load(render.compose(dep))
    svcs = doc["services"]
    assert set(svcs) == {"vllm-0", "vllm-1", "router"}
    assert svcs["vllm-1"]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == [
        "1"
    ]
    assert svcs["vllm-0"]["environment"]["NCCL_NVLS_ENABLE"] == "0"
    router_cmd = svcs["router"]["command"][-1]
    assert "vllm-router==0.1.17" in router_cmd and "http://vllm-1:8000" in router_cmd
    assert set(svcs["router"]["depends_on"]) == {"vllm-0", "vllm-1"}
    dp = yaml.safe_load(render.compose(deployment.resolve_deployment("dp_ep", "h200", count=2)))[
        "services"
    ]
    assert list(dp) == ["vllm"] and "--data-parallel-size" in dp["vllm"]["command"]


def test_bad_requests_name_the_fix():
    with pytest.raises(RecipeError, match="Valid deployments: replicas, dp_ep"):
        deployment.resolve_deployment("swarm", "h200")
    with pytest.raises(RecipeError, match="one replica per node"):
        deployment.resolve_deployment("replicas", "h200", nodes=2)
    with pytest.raises(RecipeError, match="divisible"):
        deployment.resolve_deployment("dp_ep", "h200", count=3, nodes=2)
    with pytest.raises(RecipeError, match="fewer replicas"):
        deployment.resolve_deployment("replicas", "cpu", count=3, cpu_cores=[0, 1])
    with pytest.raises(CookbookError, match="one command per node"):
        fleet.Fleet(deployment.resolve_deployment("dp_ep", "h200", count=4, nodes=2))


def test_cpu_replicas_get_their_own_cores():
    assert deployment.cpu_core_groups(2, [0, 1]) == ["0", "1"]
    assert deployment.cpu_core_groups(2, [0, 1, 2, 3, 4]) == ["0,1", "2,3"]
    dep = deployment.resolve_deployment("replicas", "cpu", count=2, model="/m", cpu_cores=[0, 1])
    assert [s.env["VLLM_CPU_OMP_THREADS_BIND"] for s in dep.servers] == ["0", "1"]
    assert all("CUDA_VISIBLE_DEVICES" not in s.env and s.port is None for s in dep.servers)


def test_router_not_found_names_the_install():
    with pytest.raises(CookbookError, match="vllm-router==0.1.17"):
        router.find_router("/nonexistent/vllm-router")


# --------------------------------------------------------------------------- a real fleet


@pytest.fixture(scope="module")
def cpu_fleet(standin_model):
    """Two CPU stand-in replicas (one core each) behind vllm-router, for this module."""
    dep = deployment.resolve_deployment("replicas", "cpu", count=2, model=standin_model)
    fl = fleet.Fleet(dep, startup_timeout=900)
    fl.start()
    print(f"\ncpu_fleet: ready in {fl.startup_seconds:.0f} s at {fl.base_url}")
    try:
        yield fl
    finally:
        fl.stop(check=False)


def _served(fl) -> list[float]:
    return [fleet.metric_total(s.url) for s in fl.servers]


def _served_after(fl, total: float, timeout: float = 10.0) -> list[float]:
    """Each replica's finished-request counter, once their sum reaches ``total`` (the
    counters move when the engine finishes a request, a moment after the reply)."""
    t0 = time.monotonic()
    while sum(now := _served(fl)) < total and time.monotonic() - t0 < timeout:
        time.sleep(0.2)
    return now


@pytest.mark.server
def test_router_reports_every_worker_healthy(cpu_fleet):
    ready = cpu_fleet.router.readiness()
    assert ready["healthy_workers"] == ready["total_workers"] == 2
    assert sorted(cpu_fleet.healthy_workers()) == sorted(s.url for s in cpu_fleet.servers)
    assert cpu_fleet.router.models() == [cpu_fleet.served_model_name]


@pytest.mark.server
def test_reasoning_and_tool_calls_round_trip_through_the_router(cpu_fleet):
    from helpers.config.demo import load_demo

    demo = load_demo()
    client, model = (
        endpoint.make_client(cpu_fleet.base_url, timeout=120),
        cpu_fleet.served_model_name,
    )
    before = _served(cpu_fleet)
    r = ask(client, demo["reasoning"]["prompt"], model=model, max_tokens=256, temperature=0)
    assert r.reasoning.strip() and r.content.strip() and r.finish_reason == "stop"

    def get_weather(city: str) -> dict:
        return demo["weather"]["results"].get(city, {"city": city, "temperature_c": 20})

    def get_time(city: str) -> dict:
        return demo["time"]["results"].get(city, {"city": city, "local_time": "12:00"})

    _, turns, outputs = tool_loop(
        client, demo["weather"]["prompt"].format(city="Santa Clara"),
        {"get_weather": get_weather, "get_time": get_time}, demo["tools"],
        model=model, max_tokens=256, temperature=0,
    )  # fmt: skip
    assert outputs and turns[0].finish_reason == "tool_calls"
    assert all(isinstance(c.arguments, dict) and c.id for t in turns for c in t.tool_calls)
    assert turns[-1].content.strip() and not turns[-1].tool_calls
    expected = 1 + len(turns)  # the chat, then one request per tool-loop turn
    after = _served_after(cpu_fleet, sum(before) + expected)
    assert sum(after) - sum(before) == expected  # every request reached a replica, once


@pytest.mark.server
def test_sweep_through_the_router_uses_both_replicas(cpu_fleet, standin_model, tmp_path):
    before = _served(cpu_fleet)
    df = bench.sweep(
        cpu_fleet.base_url, cpu_fleet.served_model_name, standin_model, [2],
        input_len=32, output_len=8, num_prompts=8, num_warmups=0, out_dir=tmp_path,
        label="2 replicas + router", gpu_count=2, progress=False,
    )  # fmt: skip
    after = _served_after(cpu_fleet, sum(before) + 8)
    row = df.iloc[0]
    print(
        f"\nsweep through the router: sent 8, completed {int(row['completed'])}, failed {int(row['failed'])}"
    )
    assert int(row["completed"]) == 8 and int(row["failed"]) == 0
    grew = [a - b for a, b in zip(after, before, strict=False)]
    # round_robin: both replicas (4 + 4 unless a health check timed out on the loaded 2-core
    # machine and the router skipped a worker for a moment: measured 3 + 5 once)
    assert min(grew) >= 2 and sum(grew) == 8, grew


@pytest.mark.notebook
@pytest.mark.server
def test_scale_out_notebook_runs_on_the_cpu_replicas(cpu_fleet, tmp_path, monkeypatch):
    """The scale-out story on this module's two CPU stand-in replicas behind the real
    vllm-router (``fleet_url``: attached, so the notebook's stop leaves them to the fixture,
    whose own launch and stop the tests here check): GPU layouts rendered and validated, a
    chat and two tiny sweeps through it, the plot written."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "models").symlink_to(REPO_ROOT / "out" / "models", target_is_directory=True)
    monkeypatch.setenv("COOKBOOK_OUT", str(out))
    before = _served(cpu_fleet)
    executed = notebooks.run_notebook(
        REPO_ROOT / "notebooks" / "scale_out.ipynb",
        {"install": False, "concurrencies": [2], "input_len": 16, "output_len": 8,
         "fleet_url": cpu_fleet.url},
        output=out / "notebooks" / "scale_out.ipynb", progress=False,
    )  # fmt: skip
    text = executed.read_text()
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "--data-parallel-size 4" in text and "--headless" in text and "vllm-router" in text
    assert f"attached: router {cpu_fleet.url}, 2 workers" in text
    split = re.search(r"requests served per replica during the router sweep: \[([\d., ]+)\]", text)
    assert split and all(float(x) > 0 for x in split.group(1).split(","))  # both replicas served
    png = out / "plots" / "scale-out-standin.png"
    assert png.exists() and png.stat().st_size > 1000
    # one run a point: the ratio's verdict is a tie unless it passes the stand-in's noise
    assert "one run per point: a ratio within 20% of 1 is a tie" in text and "verdict" in text
    # the notebook's stop cell left the fixture's fleet running, and it served the sweeps
    assert "attached fleet: left running" in text and "processes left: []" in text
    assert "[vllm] launched pid" not in text
    assert cpu_fleet.router.readiness()["healthy_workers"] == 2
    assert sum(_served(cpu_fleet)) > sum(before)


@pytest.mark.server
def test_killing_a_replica_mid_sweep_loses_no_request_silently(cpu_fleet, standin_model, tmp_path):
    n = 24
    box: dict = {}

    def run() -> None:
        try:
            box["path"] = point.run_point(
                cpu_fleet.base_url, cpu_fleet.served_model_name, standin_model,
                concurrency=2, num_prompts=n, input_len=32, output_len=24, out_dir=tmp_path,
                seed=7, num_warmups=0, label="kill-one", gpu_count=2,
                extra_args=["--save-detailed"],
            )  # fmt: skip
        except BaseException as e:  # noqa: BLE001 - reported below
            box["error"] = e

    base = sum(_served(cpu_fleet))
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    deadline = time.monotonic() + 300
    while sum(_served(cpu_fleet)) - base < 4 and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker.is_alive(), "the sweep ended before a replica could be killed: raise n"
    dead = cpu_fleet.servers[1].url
    cpu_fleet.kill_replica(1)
    worker.join(timeout=600)
    assert not worker.is_alive() and "error" not in box, box.get("error")
    data = json.loads(box["path"].read_text())
    completed, failed = int(data["completed"]), int(data["failed"])
    errors = [e for e in data.get("errors", []) if e]
    print(
        f"\nkill one replica mid-sweep: sent {n}, completed {completed}, failed {failed}; errors: {errors[:3]}"
    )
    assert completed + failed == n  # every request accounted for
    assert len(errors) == failed and all(isinstance(e, str) and e.strip() for e in errors)
    # the router takes the dead worker out (health checks every 2 s, 2 failures) ...
    t0 = time.monotonic()
    while dead in cpu_fleet.healthy_workers() and time.monotonic() - t0 < 60:
        time.sleep(0.5)
    assert cpu_fleet.healthy_workers() == [cpu_fleet.servers[0].url]
    assert cpu_fleet.router.readiness()["healthy_workers"] == 1
    # ... and sends everything to the live one
    before = fleet.metric_total(cpu_fleet.servers[0].url)
    client = endpoint.make_client(cpu_fleet.base_url, timeout=120)
    for _ in range(4):
        r = ask(client, "Hi", model=cpu_fleet.served_model_name, max_tokens=4, temperature=0)
        assert r.finish_reason in ("stop", "length")
    t0 = time.monotonic()
    while fleet.metric_total(cpu_fleet.servers[0].url) - before < 4 and time.monotonic() - t0 < 10:
        time.sleep(0.2)
    assert fleet.metric_total(cpu_fleet.servers[0].url) - before == 4


@pytest.mark.server
def test_sweep_of_a_fleet_counts_its_gpus_and_reports_a_dead_replica(cpu_fleet, tmp_path, capsys):
    """``bench.sweep(fleet)``: the GPU count comes from the deployment (2 replicas x 1, a CPU
    replica counting as one), and a replica that is down (killed in the test above) is
    reported on the row and printed, not hidden behind the fleet's label."""
    if cpu_fleet.servers[1].is_running():  # run alone: kill it here
        cpu_fleet.kill_replica(1)
    df = bench.sweep(
        cpu_fleet, [2], input_len=16, output_len=4, num_prompts=4, num_warmups=0,
        out_dir=tmp_path, label="fleet", progress=True,
    )  # fmt: skip
    row = df.iloc[0]
    assert row["gpu_count"] == cpu_fleet.gpu_count == 2
    assert row["output_throughput_per_gpu"] == pytest.approx(row["output_throughput"] / 2)
    assert (row["replicas"], row["replicas_serving"]) == (2, 1)
    assert row["replica_warning"].startswith(
        "1 of 2 replicas were not serving during this point (replica 1: stopped)"
    ), row["replica_warning"]
    assert "it measured 1 replica(s), not 2" in row["replica_warning"]
    printed = capsys.readouterr()
    assert f"WARNING fleet concurrency 2: {row['replica_warning']}" in printed.out + printed.err


@pytest.mark.server
def test_killed_api_server_mid_sweep_handle_ends_survivors_and_sweep_quotes_real_error(
    cpu_fleet, standin_model, tmp_path
):
    """On a real vLLM: the API server SIGKILLed from outside while a sweep runs
    straight at it. The sweep quotes each request's real error, and the handle says
    "crashed" and ends the engine core the kill orphaned. The server is replica 0 of this
    module's fleet (replica 1 died in the test above; the router has no live worker after
    this), which saves a start of its own."""
    srv = cpu_fleet.servers[0]
    assert srv.is_running(), "replica 0 must still serve (the test above kills replica 1)"
    group: set[int] = set()
    try:
        outcome: dict = {}

        def run() -> None:
            try:
                bench.sweep(
                    srv.base_url, cpu_fleet.served_model_name, standin_model, [2],
                    input_len=32, output_len=1800, num_prompts=16, num_warmups=2,
                    out_dir=tmp_path, progress=False,
                )  # fmt: skip
            except Exception as e:  # noqa: BLE001 - inspected below
                outcome["error"] = e

        def generated() -> float:
            return metrics.parse_prometheus(metrics.scrape_metrics(srv.url)).get(
                "vllm:generation_tokens_total", 0
            )

        base = generated()
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        # Kill once the warm-up requests generate, so the measured requests meet a dead
        # server. A counter, not the running-requests gauge: on two loaded cores the gauge
        # can miss every moment two requests run, a count that has grown stays grown.
        # 1800 tokens each (the stand-in's max_model_len is 2048): the point lasts long
        # enough for the kill to land in it.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and worker.is_alive():
            if generated() > base:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the warm-up requests never ran (the sweep: {outcome or 'still running'})")
        assert worker.is_alive(), f"the sweep ended before the kill: {outcome or 'no error'}"
        group = {p.pid for p in srv.survivors()}
        assert len(group) >= 2, "expected the API server and its engine core"
        os.kill(srv.pid, signal.SIGKILL)
        worker.join(timeout=300)
        assert not worker.is_alive()

        err = outcome.get("error")
        assert isinstance(err, errors_mod.BenchError), outcome
        text = str(err)
        assert "Traceback (most recent call last)" not in text
        # the real error of each failed request: an aiohttp exception line, e.g.
        # "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host ..."
        assert (
            "Error 0: " in text and "aiohttp" in text and "Error:" in text.split("Error 0: ", 1)[1]
        )
        assert "no longer answers /health" in text

        # The handle tells the truth: the API server is dead, its engine core was ended. The
        # sweep can fail (connection refused) a moment before the kernel has torn down the
        # SIGKILLed process, so the handle gets a few seconds to see it exit.
        deadline = time.monotonic() + 10
        while srv.is_running() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert srv.is_running() is False
        shown = repr(srv)
        assert "crashed" in shown and f"pid {srv.pid}" in shown and "SIGKILL" in shown
        others = group - {srv.pid}
        assert all(str(pid) in shown for pid in others), shown
        assert srv.crash and "ended the" in srv.crash
    finally:
        srv.stop()
    assert_nothing_left(srv, group)


@pytest.mark.server
def test_the_fleet_stops_with_nothing_left(cpu_fleet):
    ports = [s.port for s in cpu_fleet.servers] + [cpu_fleet.router.port]
    pids = [s.pid for s in cpu_fleet.servers] + [cpu_fleet.router.pid]
    cpu_fleet.stop()
    assert cpu_fleet.processes() == []
    assert all(processes.port_is_free(p) for p in ports)
    import psutil

    assert not [
        p
        for p in pids
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert not [r for r in processes.find_leftovers(include_owned=True) if r.port in ports]
    cpu_fleet.stop()  # idempotent


def test_h200x2_script_dry_run_renders_and_validates_every_command(tmp_path, monkeypatch, capsys):
    """The 2x H200 device script's --dry-run on this CPU machine: every command rendered and
    checked (vLLM's parser, the router's --help), nothing launched. Run in this process
    (its ``main()``, argv as on the command line): vLLM's parser is imported once per worker."""
    import importlib.util
    import sys

    script = REPO_ROOT / "tools" / "device" / "run_h200x2.py"
    spec = importlib.util.spec_from_file_location("run_h200x2_under_test", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", [str(script), "--dry-run", "--out", str(tmp_path)])
    monkeypatch.chdir(REPO_ROOT)
    rc = module.main()
    out = capsys.readouterr()
    assert rc == 0, out.out[-3000:] + out.err[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["validation"]) == {"replicas", "dp_ep", "dp_ep_2_nodes"}
    assert all(v.startswith("ok") for v in summary["validation"].values()), summary["validation"]
    commands = (tmp_path / "commands.sh").read_text()
    assert "vllm-router" in commands and "--policy round_robin" in commands
    assert "--data-parallel-size 2" in commands and "--enable-expert-parallel" in commands
    assert "--headless" in commands and "--load-format dummy" in commands
    for var in deployment.NO_MULTICAST_ENV:
        assert commands.count(f"{var}=") >= 4  # one server, two replicas, DP+EP, ...
    compose = yaml.safe_load((tmp_path / "compose-replicas.yaml").read_text())
    assert set(compose["services"]) == {"vllm-0", "vllm-1", "router"}
    assert "[h200x2" in out.out and "nothing launched" in out.out


def test_router_process_mechanics_with_fake_workers():
    """vllm-router under the server manager, in front of two model-free HTTP workers: it waits
    for /readiness, takes a dead worker out within seconds (the registry's health-check
    flags), and stops with nothing left."""
    import subprocess
    import sys

    import psutil

    from helpers.paths import REPO_ROOT

    ports = [processes.free_port(), processes.free_port()]
    fakes = [
        subprocess.Popen([sys.executable, str(REPO_ROOT / "tests/data/fake_worker.py"), str(p)])
        for p in ports
    ]
    fl = None
    try:
        for p in ports:
            t0 = time.monotonic()
            while not server.VLLMServer.attach(f"http://127.0.0.1:{p}", check=False).healthy():
                assert time.monotonic() - t0 < 30
                time.sleep(0.1)
        dep = deployment.resolve_deployment(
            "replicas", "cpu", count=2, model="/m", cpu_cores=[0, 1]
        )
        fl = fleet.Fleet(dep, progress=False)
        fl.servers = [server.VLLMServer.attach(f"http://127.0.0.1:{p}") for p in ports]
        fl.start_router(timeout=60)
        assert fl.router.readiness()["healthy_workers"] == 2
        assert fl.router.models() == ["fake"]  # the OpenAI surface is proxied
        fakes[1].kill()
        fakes[1].wait()
        t0 = time.monotonic()
        while len(fl.healthy_workers()) > 1 and time.monotonic() - t0 < 30:
            time.sleep(0.2)
        assert fl.healthy_workers() == [f"http://127.0.0.1:{ports[0]}"]
        took = time.monotonic() - t0
        assert took < 15, f"the router took {took:.0f} s to drop a dead worker"
        router_pid, router_port = fl.router.pid, fl.router.port
        fl.stop()
        assert fl.processes() == [] and processes.port_is_free(router_port)
        assert (
            not psutil.pid_exists(router_pid)
            or psutil.Process(router_pid).status() == psutil.STATUS_ZOMBIE
        )
    finally:
        if fl is not None:
            fl.stop(check=False)
        for f in fakes:
            f.kill()
            f.wait()


@pytest.mark.server
def test_chat_through_a_router_whose_first_worker_is_down_is_answered(
    standin_server,
):
    """vllm-router 0.1.17 answers GET /v1/models from the first worker it lists, without a
    health check: with that worker down it answers HTTP 500 ("Request failed: error sending
    request for url (http://127.0.0.1:P/v1/models)", recorded here) while chats still route to
    the live one (vllm-project/router#135). The SDK's request, with its own max_tokens, asks
    nothing of /v1/models: it is answered, streamed and not, through the Fleet's client too."""
    import dataclasses
    import subprocess
    import sys

    port = processes.free_port()
    fake = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "tests/data/fake_worker.py"), str(port)]
    )
    dead, live = f"http://127.0.0.1:{port}", standin_server.url
    fl = None
    try:
        t0 = time.monotonic()
        while not server.VLLMServer.attach(dead, check=False).healthy():
            assert time.monotonic() - t0 < 30
            time.sleep(0.1)
        dep = deployment.resolve_deployment(
            "replicas", "cpu", count=2, model=standin_server.config.model
        )
        slow_checks = dataclasses.replace(  # vllm-router's defaults: the 500 lasts minutes
            dep.router,
            args={**dep.router.args, "--health-check-interval-secs": 60, "--health-failure-threshold": 3},
        )  # fmt: skip
        # each router process lists its workers in its own (hash) order: the dead one first in
        # about half the starts (12 of 20 here), so 10 tries missed once in a CI run (2026-12-06)
        for _ in range(30):
            fl = fleet.Fleet(dep, progress=False)
            fl.servers = [server.VLLMServer.attach(u) for u in (dead, live)]
            fl.start_router(slow_checks, timeout=60)
            if fl.router.workers()[0]["url"] == dead:
                break
            fl.router.stop(verbose=False)
        assert fl.router.is_running() and fl.router.workers()[0]["url"] == dead
        fake.kill()
        fake.wait()
        plain = endpoint.make_client(fl.router.base_url, timeout=120)
        with pytest.raises(Exception, match="500") as probe:
            plain.models.list()
        assert "error sending request for url" in probe.value.response.text
        from helpers.config.demo import load_demo

        model, prompt = standin_server.models()[0], load_demo()["reasoning"]["prompt"]
        asked = dict(model=model, max_tokens=256, temperature=0)
        first = ask(plain, prompt, **asked)
        streamed = ask(plain, prompt, stream=True, **asked)
        assert first.finish_reason == "stop" and first.content.strip()
        assert streamed.content == first.content  # greedy: the same answer, streamed
        assert fl.max_model_len == 2048  # the cpu target's --max-model-len
        assert ask(fl.client(), prompt, **asked).content == first.content
    finally:
        if fl is not None:
            fl.stop(check=False)
        fake.kill()
        fake.wait()
    assert processes.port_is_free(fl.router.port)


def test_replicas_started_together_get_their_own_compile_cache(monkeypatch, tmp_path):
    """Two replicas starting at once never share one VLLM_CACHE_ROOT: each gets
    out/cache/<release>-<GPUs>/replica<i> (GPUs as NVML answers on an H200, recorded in
    tests/data/hardware/h200_nvml.json); a single DP+EP server keeps the keyed folder itself."""
    from helpers.config.versions import installed_vllm_version
    from helpers.machine import gpus as gpus_mod

    records = json.loads((REPO_ROOT / "tests/data/hardware/h200_nvml.json").read_text())
    monkeypatch.setattr(gpus_mod, "_read_nvml", lambda: (records, []))
    for var in ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "out"))
    keyed = tmp_path / "out" / "cache" / f"vllm-{installed_vllm_version()}-sm90"
    dep = deployment.resolve_deployment("replicas", "h200", count=2)
    fl = fleet.Fleet(dep, progress=False)
    roots = [
        server.VLLMServer(cfg, **fl.server_options(i)).environment()["VLLM_CACHE_ROOT"]
        for i, cfg in enumerate(dep.servers)
    ]
    assert roots == [str(keyed / "replica0" / "vllm"), str(keyed / "replica1" / "vllm")]
    one = fleet.Fleet(deployment.resolve_deployment("dp_ep", "h200", count=2), progress=False)
    assert "cache_dir" not in one.server_options(0)  # VLLMServer's own keyed default
    assert server.VLLMServer(one.deployment.servers[0]).environment()["VLLM_CACHE_ROOT"] == str(
        keyed / "vllm"
    )


def test_attaching_to_no_router_names_fleet_url_not_a_vllm_server():
    """scale_out.ipynb's fleet_url pointing at nothing: the error is about the router and the
    notebook's own parameter, not vLLM's server_url (which this notebook has no use for)."""
    import socket

    from helpers.errors import CookbookError
    from lab.fleet.launch import attach_fleet

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    dep = deployment.resolve_deployment("replicas", "h200", count=2)
    with pytest.raises(
        CookbookError,
        match=rf"No router answers http://127.0.0.1:{port}/health: check fleet_url.*fleet_url = None",
    ) as err:
        attach_fleet(f"http://127.0.0.1:{port}", dep, progress=False)
    assert "server_url" not in str(err.value)
