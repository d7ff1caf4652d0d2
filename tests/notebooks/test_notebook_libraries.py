"""What a notebook's steps import is there before its launch: each notebook's step 1 checks
every optional library the helpers it imports reach (``check_libraries``), its install cell
installs the ``notebook`` extra that carries them, and the device kit carries them too."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from helpers.errors import InstallError
from helpers.machine.libraries import LIBRARIES, check_libraries, missing_modules
from helpers.paths import REPO_ROOT as REPO

#: The import roots whose modules a notebook imports and this scan follows: the core and the lab.
PACKAGES = ("helpers", "lab")


def _imports(tree: ast.AST) -> set[str]:
    """Every module an AST imports (also inside functions), as dotted names."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _module_file(name: str) -> Path | None:
    parts = name.split(".")
    for candidate in (
        REPO.joinpath(*parts).with_suffix(".py"),
        REPO.joinpath(*parts, "__init__.py"),
    ):
        if candidate.is_file():
            return candidate
    return None


def _reached_libraries(roots: set[str]) -> set[str]:
    """The optional libraries (keys of LIBRARIES) the helpers and lab modules ``roots``
    import, directly or through other such modules (imports inside functions included)."""
    seen: set[str] = set()
    todo = [r for r in roots if r.split(".")[0] in PACKAGES]
    libs: set[str] = set()
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if path is None or path in seen:
            continue
        seen.add(path)
        for imported in _imports(ast.parse(path.read_text())):
            top = imported.split(".")[0]
            if top in LIBRARIES:
                libs.add(top)
            elif top in PACKAGES:
                todo.append(imported)
    return libs


def _code(nb_path: Path) -> list[str]:
    nb = json.loads(nb_path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _checked(cells: list[str]) -> set[str]:
    names = set()
    for cell in cells:
        for call in re.findall(r"check_libraries\((.*)\)", cell):
            names.update(re.findall(r"\"(\w+)\"", call))
    return names


NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_step_one_checks_every_library_the_notebooks_helpers_reach(nb_path):
    cells = _code(nb_path)
    roots = set()
    for cell in cells:
        lines = [ln for ln in cell.splitlines() if not ln.lstrip().startswith(("%", "!"))]
        try:
            roots |= _imports(ast.parse("\n".join(lines)))
        except SyntaxError:
            continue
    needed = _reached_libraries(roots)
    checked = _checked(cells)
    assert needed <= checked, (
        f"{nb_path.name} reaches {sorted(needed)} through the helpers it imports but its step 1 "
        f"checks only {sorted(checked)}: add them to its check_libraries(...) call"
    )
    if checked:  # the check comes before any launch (cell, then place in the cell)
        text = "\n".join(cells)
        launches = [text.find(v) for v in ("launch_server(", "launch_fleet(") if v in text]
        assert not launches or text.find("check_libraries(") < min(launches)


def test_the_template_notebooks_reach_lm_eval_and_agents_reach_pydantic_ai():
    """The scan above finds something: the two notebooks whose steps need optional
    libraries (so a test that can never fail is not what guards them)."""
    assert _checked(_code(REPO / "notebooks" / "h200.ipynb")) >= {"lm_eval", "scipy"}
    assert _checked(_code(REPO / "notebooks" / "agents.ipynb")) >= {"pydantic_ai", "anthropic"}


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_install_cell_installs_the_notebook_extra_where_a_step_needs_it(nb_path):
    cells = _code(nb_path)
    installs = [ln for c in cells for ln in c.splitlines() if "%pip install -q -e" in ln]
    if not _checked(cells):
        return  # nothing optional to install
    assert installs, f"{nb_path.name} checks libraries but has no install cell"
    for line in installs:
        assert "[notebook]" in line, f"{nb_path.name}: {line.strip()} lacks the notebook extra"


def test_the_notebook_extra_and_requirements_carry_every_library():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    notebook = [r.split(";")[0].strip() for r in extra["notebook"]]
    requirements = (REPO / "requirements.txt").read_text()
    for name, lib in LIBRARIES.items():
        assert lib.requirement in notebook, f"{name}: {lib.requirement} not in the notebook extra"
        assert lib.requirement in requirements, f"{name}: {lib.requirement} not in requirements.txt"


def test_check_libraries_names_the_missing_one_and_the_fix(monkeypatch):
    from helpers.machine import libraries

    monkeypatch.setitem(
        libraries.LIBRARIES,
        "lm_eval",
        libraries.Library(
            "lm-eval[api]==0.4.13", ("lm_eval", "no_such_module_here"), "the answer-quality steps",
            'set quality = {"items": 0} to skip them',
        ),
    )  # fmt: skip
    with pytest.raises(InstallError) as e:
        check_libraries("scipy", "lm_eval")
    said = str(e.value)
    assert "A library for the answer-quality steps is missing: lm-eval does not import" in said
    assert "no_such_module_here: ModuleNotFoundError" in said
    assert "%pip install 'lm-eval[api]==0.4.13'" in said and "[notebook]" in said
    assert 'set quality = {"items": 0} to skip them' in said
    with pytest.raises(KeyError, match="known: lm_eval"):
        check_libraries("lm-eval")
    assert missing_modules(["json", "no_such_module_here"]) == {
        "no_such_module_here": "ModuleNotFoundError: No module named 'no_such_module_here'"
    }


def test_a_module_that_imported_is_not_probed_again_and_a_missing_one_is(monkeypatch):
    """A kernel checks step 1's libraries once per notebook: what imported in a child before
    is not imported again (a child Python per probe); what failed is tried again, since it
    may have been installed since."""
    import subprocess

    from helpers.machine import libraries

    monkeypatch.setattr(libraries, "_IMPORTED", set())
    probed: list[list[str]] = []
    real_run = subprocess.run

    def run(argv, **kwargs):
        probed.append(list(argv[3:]))  # [python, "-c", probe, *modules]
        return real_run(argv, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    missing = {"no_such_module_here": "ModuleNotFoundError: No module named 'no_such_module_here'"}
    assert missing_modules(["json", "no_such_module_here"]) == missing
    assert missing_modules(["json", "no_such_module_here"]) == missing
    assert missing_modules(["json"]) == {}
    assert probed == [["json", "no_such_module_here"], ["no_such_module_here"]]


def test_the_notebook_extra_is_the_evals_and_agents_extras_together():
    """Each optional part has its extra (``evals``, ``agents``, ``fleet``); the notebooks'
    install cell takes ``notebook``, which must stay their union (markers aside)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def names(reqs):
        return {r.split(";")[0].strip() for r in reqs}

    assert names(extra["notebook"]) == names(extra["evals"]) | names(extra["agents"])
    assert {"fleet", "evals", "agents", "standin"} <= set(extra)


def test_the_tuning_verdict_without_scipy_names_the_install(monkeypatch):
    import sys

    from helpers.errors import BenchError
    from lab.tune import noise

    monkeypatch.setitem(sys.modules, "scipy.stats", None)  # import scipy.stats now fails
    with pytest.raises(BenchError, match=r"needs scipy .*pip install 'scipy>=1.11'.*\[notebook\]"):
        noise.verdict([3.0, 4.0, 5.0], [1.0, 2.0, 2.5])
