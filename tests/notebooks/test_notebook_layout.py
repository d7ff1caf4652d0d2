"""How the generated notebooks read: the first reply early, one "Expected:" per step, the
prompts written in their cells and in step with what the stand-in was trained on.

Static checks of the committed notebooks (no kernel): the quickstart's executed run
(tests/notebooks/test_notebooks.py) checks the same first-reply cell by its output.
"""

from __future__ import annotations

import ast
import json
import re

import pytest

from helpers.chat.tools import tool_schema
from helpers.config.demo import load_demo, tool_result
from helpers.paths import REPO_ROOT
from tests.support.notebook_checks import (
    MAX_FIRST_REPLY_INDEX,
    calls,
    cell_python,
    cell_source,
    first_reply_cell,
    notebook_cells,
)

NOTEBOOKS = REPO_ROOT / "notebooks"
#: The notebooks a GPU reader opens first, and how soon they reach the model's reply.
FIRST_REPLY_NOTEBOOKS = ["quickstart_cpu_standin", "h100"]
MAX_CODE_LINES_BEFORE = (
    # the parameters cell counts, one line each (22 since the accuracy step's `quality`); 43
    # since step 1 checks the later steps' libraries before the launch (import + call); 47
    # since step 1 names each parameter it checks (check_parameters by keyword, no globals())
    47
)
TEMPLATE_NOTEBOOKS = sorted(
    p
    for p in NOTEBOOKS.glob("*.ipynb")
    if json.loads(p.read_text())["metadata"]["cookbook"]["generated_from"]
    == "cookbook/notebook_template.py"
)


def code_lines(source: str) -> int:
    """Lines of code in a cell: not blank, not only a comment."""
    return sum(
        1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#")
    )


def test_the_layout_check_counts_lines_and_finds_the_reply_cell():
    cells = [
        {"cell_type": "code", "source": ["x = 1\n", "\n", "# a comment\n", "y = 2"]},
        {"cell_type": "markdown", "source": ["## 1. Step"]},
        {"cell_type": "code", "source": ["r = llm.chat.completions.create(model=m, messages=[])"]},
        {
            "cell_type": "code",
            "source": ["show(llm.chat.completions.create(model=m, messages=[]))"],
        },
    ]
    assert code_lines(cell_source(cells[0])) == 2
    assert first_reply_cell(cells) == 3


@pytest.mark.parametrize("stem", FIRST_REPLY_NOTEBOOKS)
def test_the_first_model_reply_comes_early(stem):
    cells = notebook_cells(NOTEBOOKS / f"{stem}.ipynb")
    i = first_reply_cell(cells)
    before = sum(code_lines(cell_source(c)) for c in cells[:i] if c["cell_type"] == "code")
    assert i <= MAX_FIRST_REPLY_INDEX, f"{stem}: the first reply is in cell {i}"
    assert before <= MAX_CODE_LINES_BEFORE, f"{stem}: {before} lines of code before the first reply"


@pytest.mark.parametrize("path", TEMPLATE_NOTEBOOKS, ids=lambda p: p.stem)
def test_every_step_says_what_to_expect_once(path):
    steps, current = {}, None
    for cell in notebook_cells(path):
        if cell["cell_type"] != "markdown":
            continue
        text = cell_source(cell)
        heading = re.search(r"^## (\d+)\. .*$", text, re.M)
        if heading:
            current = heading.group(0)
            steps[current] = 0
        if current:
            steps[current] += text.count("**Expected:**")
    assert len(steps) >= 8, steps
    assert all(n == 1 for n in steps.values()), steps


def _template_code() -> list[ast.Module]:
    cells = notebook_cells(NOTEBOOKS / "quickstart_cpu_standin.ipynb")
    return [cell_python(cell_source(c)) for c in cells if c["cell_type"] == "code"]


def _trained_prompts(demo: dict) -> set[str]:
    prompts = set()
    for item in (demo["reasoning"], demo["streaming"], *demo.get("extras", [])):
        prompts |= {item["prompt"], *item.get("variants", [])}
    w = demo["weather"]
    for city in w["results"]:
        prompts |= {t.format(city=city) for t in [w["prompt"], *w.get("variants", [])]}
    prompts |= {p["prompt"] for p in demo["parallel"]["pairs"]}
    return prompts


def test_the_prompts_written_in_the_cells_are_the_ones_the_stand_in_learned():
    """The stand-in answers only what it was trained on (cookbook/demo.yaml): every prompt a
    notebook cell sends, the tool backends' results and the reasoning budget must match it."""
    demo = load_demo()
    trained = _trained_prompts(demo)
    sent, budgets = [], []
    for tree in _template_code():
        for node in ast.walk(tree):  # each {"role": "user", "content": "..."} message written
            if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
                d = dict(zip([k.value for k in node.keys], node.values, strict=True))
                if getattr(d.get("role"), "value", None) == "user":
                    assert isinstance(d.get("content"), ast.Constant), ast.unparse(node)
                    sent.append(d["content"].value)
                if "thinking_token_budget" in d:
                    budgets.append(d["thinking_token_budget"].value)
        for call in calls(tree, "two_pass_budget"):
            budgets += [kw.value.value for kw in call.keywords if kw.arg == "budget"]
    assert budgets and set(budgets) == {demo["budget"]["thinking_token_budget"]}
    assert len(sent) >= 6
    assert not set(sent) - trained, set(sent) - trained
    # the tool functions of the tool-calling cell, run as the notebook defines them
    namespace: dict = {}
    for tree in _template_code():
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        if defs:
            data = [n for n in tree.body if isinstance(n, ast.Assign)]
            exec(
                compile(ast.Module(body=data[:1] + defs, type_ignores=[]), "cell", "exec"),
                namespace,
            )
    schemas = [tool_schema(namespace[name]) for name in ("get_weather", "get_time")]
    assert schemas == demo["tools"]
    for city in ("Santa Clara", "Tokyo", "Paris"):
        assert json.dumps(namespace["get_weather"](city)) == tool_result(demo, "get_weather", city)
    for city in demo["time"]["results"]:
        assert json.dumps(namespace["get_time"](city)) == tool_result(demo, "get_time", city)


@pytest.mark.parametrize("path", TEMPLATE_NOTEBOOKS, ids=lambda p: p.stem)
def test_each_target_notebook_shows_its_gpu_command_in_step_1(path):
    """The committed notebooks carry no outputs: the target's `vllm serve` command is in the
    markdown of step 1, rendered from the registry by `python -m tools.notebooks build`."""
    import nbformat

    from helpers.config.resolve import resolve

    nb = nbformat.read(path, as_version=4)
    target = nb.metadata["cookbook"]["target"]
    step1 = next(c.source for c in nb.cells if c.source.startswith("## 1. "))
    assert f"```sh\n{resolve(target).shell_command()}\n```" in step1
