"""The workshop notebook as shipped: a placeholder or failing ``cookbook_source`` stops it at
the install cell, saying what to set, and the README says what the placeholder needs.

Real papermill runs of ``notebooks/workshop_colab.ipynb`` in a fresh kernel of this
environment (the cookbook is installed here, so a notebook that went on would not fail on
its own: it must stop itself).
"""

from __future__ import annotations

import json

import pytest

from helpers.errors import CookbookError
from lab.workshop.runtime import repository
from helpers.paths import REPO_ROOT
from tools import notebook_run

NOTEBOOK = REPO_ROOT / "notebooks" / "workshop_colab.ipynb"


def _ran(path) -> list[str]:
    """The first lines of the code cells that ran."""
    cells = json.loads(path.read_text())["cells"]
    return [
        "".join(c["source"]).splitlines()[0]
        for c in cells
        if c["cell_type"] == "code" and c.get("execution_count")
    ]


@pytest.mark.notebook
@pytest.mark.parametrize(
    "source, says",
    [
        (None, "cookbook_source is the placeholder 'git+https://github.com/OWNER/"),
        (
            "/nonexistent/cookbook-copy",
            "pip could not install the cookbook from '/nonexistent/cookbook-copy' (exit status 1",
        ),
    ],
)
def test_a_failed_cookbook_install_stops_the_workshop_at_once(source, says, tmp_path):
    params = {"out_folder": str(tmp_path / "out")}
    if source is not None:
        params["cookbook_source"] = source
    with pytest.raises(CookbookError) as err:
        notebook_run.run_notebook(NOTEBOOK, params, output=tmp_path / "w.ipynb", progress=False)
    assert "RuntimeError: " + says in str(err.value), str(err.value)
    assert "Set cookbook_source in the parameters cell" in str(err.value)
    ran = _ran(tmp_path / "w.failed.ipynb")
    assert ran[-1] == "if install:", ran  # nothing after the install cell ran
    assert not any(line.startswith("import os") for line in ran)  # step 2


def test_readme_says_what_the_placeholder_badges_need():
    readme = (REPO_ROOT / "README.md").read_text()
    if not repository().startswith("OWNER/"):
        pytest.skip("the registry names a real repository: no placeholder to explain")
    assert "The Colab badges are placeholders until the cookbook has a public home" in readme
    assert "set `repository:` in `cookbook/recipe.yaml`" in readme
    assert "set `cookbook_source`" in readme
