"""The core's line budget: each ``helpers`` sub-package keeps to its lines, and the whole core
to its ceiling (``[tool.cookbook.core_budget]`` in ``pyproject.toml``, the one source; the
table in docs/CONVENTIONS.md, "Core and lab", says the same, checked here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.paths import REPO_ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

CORE = REPO_ROOT / "helpers"
#: The budget's name for ``helpers/*.py`` (``errors``, ``paths``, ``loop_thread``, ``__init__``).
TOP_LEVEL = "top_level"


def _budget() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["cookbook"][
        "core_budget"
    ]


def _lines(files) -> int:
    """Lines as ``wc -l`` counts them (newline characters)."""
    return sum(Path(f).read_text(encoding="utf-8").count("\n") for f in files)


def core_lines(core: Path = CORE) -> dict[str, int]:
    """``{sub-package: lines of helpers/<sub-package>/**/*.py}``, plus :data:`TOP_LEVEL`."""
    counts = {
        d.name: _lines(d.rglob("*.py"))
        for d in sorted(core.iterdir())
        if d.is_dir() and (d / "__init__.py").is_file()
    }
    counts[TOP_LEVEL] = _lines(core.glob("*.py"))
    return counts


def over_budget(counts: dict[str, int], budgets: dict[str, int]) -> list[str]:
    """One sentence per sub-package over its budget, or without one."""
    said = []
    for name, lines in counts.items():
        if name not in budgets:
            said.append(
                f"helpers/{name}: {lines} lines and no budget: add it to "
                "[tool.cookbook.core_budget.sub_packages] in pyproject.toml and to the table in "
                "docs/CONVENTIONS.md (taken from another sub-package's budget), or move it to lab/"
            )
        elif lines > budgets[name]:
            said.append(
                f"helpers/{name}: {lines} lines, over its budget of {budgets[name]}: shrink it, "
                "move code to lab/, or take lines from another sub-package's budget "
                "(pyproject.toml [tool.cookbook.core_budget], docs/CONVENTIONS.md)"
            )
    return said


def test_each_core_sub_package_keeps_to_its_line_budget():
    budgets = _budget()["sub_packages"]
    counts = core_lines()
    assert set(counts) >= {"config", "server", "chat", "bench", TOP_LEVEL}  # the scan finds them
    problems = over_budget(counts, budgets)
    assert problems == [], "\n".join(problems)


def test_a_sub_package_over_its_budget_or_without_one_is_named(tmp_path):
    for name, lines in (("chat", 3), ("extra", 1)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("x = 1\n" * lines)
    (tmp_path / "errors.py").write_text("\n")
    counts = core_lines(tmp_path)
    assert counts == {"chat": 3, "extra": 1, TOP_LEVEL: 1}
    said = over_budget(counts, {"chat": 2, TOP_LEVEL: 1})
    assert len(said) == 2
    assert said[0].startswith("helpers/chat: 3 lines, over its budget of 2")
    assert said[1].startswith("helpers/extra: 1 lines and no budget")


def test_the_conventions_table_states_the_budgets_of_pyproject():
    text = (REPO_ROOT / "docs" / "CONVENTIONS.md").read_text()
    section = text[text.index("## Core and lab") :]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| `(\w+)` \| [\d,]+ \| ([\d,]+) \|$", section, re.M)
    stated = {name: int(budget.replace(",", "")) for name, budget in rows}
    budget = _budget()
    assert stated == budget["sub_packages"], "docs/CONVENTIONS.md's table differs from pyproject"
    total = re.search(r"^\| total \| [\d,]+ \| ([\d,]+) \|$", section, re.M)
    assert total and int(total.group(1).replace(",", "")) == sum(stated.values())
    assert f"{budget['ceiling']:,}-line ceiling" in section


def test_the_whole_core_is_under_its_ceiling():
    ceiling = _budget()["ceiling"]
    total = sum(core_lines().values())
    assert total <= ceiling, f"the core (helpers/) is {total} lines, over its ceiling {ceiling}"
