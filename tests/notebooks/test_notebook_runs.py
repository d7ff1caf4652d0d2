"""Two notebook runs started at the same moment each succeed, and write to one folder.

Real runs of ``python -m tools.notebooks run`` (papermill, a fresh kernel each), started
together from the same folder as two terminals would, with a relative ``COOKBOOK_OUT``: the
kernels' IPC sockets are private to each run (jupyter_client's default, ``kernel-ipc-N``
relative to the notebook's folder, lets both pick the same N), each run has its own running
copy, and the relative output folder names one absolute folder for the runner and the kernel.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import REPO_ROOT
from tests.support.notebook_checks import write_notebook


def _marking_notebook(path: Path) -> Path:
    return write_notebook(
        path,
        "tag = 'x'\nnap = 0.0",
        "## 1. Mark",
        "import time\nfrom helpers.paths import out_dir\ntime.sleep(nap)\n"
        "(out_dir('marks') / f'{tag}.txt').write_text(tag)\nprint('marked', tag)",
    )


@pytest.mark.notebook
def test_two_runs_at_once_both_succeed_in_one_output_folder(tmp_path):
    _marking_notebook(tmp_path / "nbs" / "mark.ipynb")
    env = {**os.environ, "COOKBOOK_OUT": "rel-out"}  # relative: to the folder the run starts in
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tools.notebooks",
                "run",
                "nbs/mark.ipynb",
                "-p",
                "tag",
                tag,
                "-p",
                "nap",
                "2",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for tag in ("a", "b")
    ]
    outputs = [p.communicate(timeout=300)[0] for p in runs]
    for p, out in zip(runs, outputs, strict=True):
        assert p.returncode == 0, out
    out = tmp_path / "rel-out"
    assert sorted(f.name for f in (out / "marks").iterdir()) == ["a.txt", "b.txt"]
    assert (out / "notebooks" / "mark.ipynb").is_file()
    assert not (tmp_path / "nbs" / "rel-out").exists(), "the kernel wrote to a second folder"
    # nothing of either run left behind: sockets, connection files, running copies
    left = [p.name for p in tmp_path.rglob("*") if "kernel-ipc" in p.name or "running" in p.name]
    assert left == [], left


def _sweeping_notebook(path: Path) -> Path:
    return write_notebook(
        path,
        "url = ''\nmodel = ''\ntokenizer = ''",
        "## 1. Sweep",
        "from helpers.bench.sweep import sweep\n"
        "sweep(url, model, tokenizer, [1, 2, 4], input_len=16, output_len=128, num_prompts=8,\n"
        "      num_warmups=0, label='intr', progress=False)",
    )


@pytest.mark.server
@pytest.mark.notebook
def test_ctrl_c_mid_benchmark_ends_in_one_line_with_one_runs_points(noise_server, tmp_path):
    """Ctrl-C while a notebook's sweep runs: the runner interrupts the cell (as Jupyter's stop
    button does), ends with one line and exit code 130, no traceback; the bench folder holds
    the points this run finished and none of an earlier run of the same label. (Against the
    session's weightless stand-in: a sweep's timing, not its text, is what counts here.)"""
    import json
    import signal
    import time

    _sweeping_notebook(tmp_path / "sweep.ipynb")
    folder = tmp_path / "out" / "bench" / "intr"
    folder.mkdir(parents=True)
    for c in (1, 2, 4):  # an earlier, complete run of the same label
        old = json.loads((REPO_ROOT / "tests" / "data" / "bench" / "standin-c1.json").read_text())
        old.update(label="old-run", max_concurrency=c)
        (folder / f"intr-c{c}.json").write_text(json.dumps(old))
    env = {**os.environ, "COOKBOOK_OUT": str(tmp_path / "out")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    cfg = noise_server.config
    run = subprocess.Popen(
        [sys.executable, "-m", "tools.notebooks", "run", "sweep.ipynb", "-p", "url",
         noise_server.base_url, "-p", "model", cfg.served_model_name, "-p", "tokenizer",
         str(cfg.model)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # Ctrl-C reaches the runner alone, as from its terminal
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not list(folder.glob(".partial-*/intr-c1.json")) and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        time.sleep(0.2)
    # at once: the second point (16 in / 128 out, 8 prompts) ran whole within a 1 s wait on a
    # quiet machine (2026-12-05), so the interrupt lands between the points or early in the second
    time.sleep(0.1)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, out + err
    assert "Traceback" not in out + err, out + err
    last = err.strip().splitlines()[-1]
    # (cell 3: papermill's injected parameters come before the sweep). The kernel process
    # shares the runner's stderr, and at its exit triton's nanobind module may write a leak
    # report that ends without a newline ("...refleaks.html"), so the runner's line is the
    # last line's tail, from "interrupted:" on.
    tail = last[last.find("interrupted: ") :]
    assert tail.startswith("interrupted: sweep.ipynb stopped in cell 3 (Ctrl-C)"), err
    assert "interrupting the running cell" in out
    # one run's points: the one this run finished; the earlier run's are gone, nothing staged
    points = sorted(p.name for p in folder.glob("*.json"))
    assert points == ["intr-c1.json"], sorted(p.name for p in folder.iterdir())
    assert json.loads((folder / "intr-c1.json").read_text())["label"] == "intr"
    assert not [p for p in folder.iterdir() if p.name.startswith(".partial")]
    assert noise_server.healthy()


def test_a_relative_cookbook_out_is_pinned_to_one_absolute_folder(tmp_path, monkeypatch):
    from helpers.paths import out_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COOKBOOK_OUT", "rel")
    first = out_dir("x")
    assert first == tmp_path / "rel" / "x"
    assert os.environ["COOKBOOK_OUT"] == str(tmp_path / "rel")  # children inherit the same
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # a kernel's chdir into the notebook's folder
    assert out_dir("x") == first


def _serving_notebook(path: Path) -> Path:
    """A notebook whose second cell starts a server (the fake vLLM: process mechanics) and then
    waits, as a notebook's benchmark would."""
    return write_notebook(
        path,
        "nap = 120.0",
        "## 1. Serve",
        "import time\nfrom tests.support.fake_vllm import make_fake_server\n"
        "srv = make_fake_server(startup_timeout=60).start()\ntime.sleep(nap)",
    )


@pytest.mark.notebook
def test_sigterm_to_the_runner_stops_the_notebooks_server_as_ctrl_c_does(tmp_path):
    """A CI timeout, `timeout`, `kill` send SIGTERM to the runner alone; its kernel, whose parent
    dies, exits without clean-up (ipykernel's parent poller), which left the notebook's vLLM
    server running with nothing to say so. The runner takes SIGTERM as Ctrl-C: the running cell
    is interrupted, the kernel shut down, the server ended; one line, exit 130."""
    import json
    import signal
    import time

    import psutil

    _serving_notebook(tmp_path / "serve.ipynb")
    out = tmp_path / "out"
    # a runner killed outright (SIGKILL) left its running copy: the next run removes it
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (out / "notebooks").mkdir(parents=True)
    (out / "notebooks" / f".serve.running-{gone}-0123abcd.ipynb").write_text("{}")
    env = {**os.environ, "COOKBOOK_OUT": str(out)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    run = subprocess.Popen(
        [sys.executable, "-m", "tools.notebooks", "run", "serve.ipynb"], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not list((out / "run").glob("*.json")) and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        time.sleep(0.2)
    (record,) = list((out / "run").glob("*.json"))
    pid = json.loads(record.read_text())["pid"]
    assert psutil.pid_exists(pid)
    time.sleep(1.0)  # the cell is in its wait
    run.send_signal(signal.SIGTERM)
    stdout, err = run.communicate(timeout=120)
    assert run.returncode == 130, stdout + err
    assert "SIGTERM: interrupting the running cell" in stdout
    last = err.strip().splitlines()[-1]
    assert last[last.find("interrupted: ") :].startswith(
        "interrupted: serve.ipynb stopped in cell"
    ), err
    assert "(SIGTERM)" in last
    gone = time.monotonic() + 15
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie":
        assert time.monotonic() < gone, f"the notebook's server (pid {pid}) outlived the run"
        time.sleep(0.2)
    assert not list((out / "run").glob("*.json"))  # no record of a server left behind
    assert not list((out / "notebooks").glob(".serve.running-*"))
