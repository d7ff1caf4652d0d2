"""A notebook run refuses a parameter the notebook does not declare (papermill itself only
warns, then runs with the default: a misspelled ``-p gpu_hours_usd 1.2`` priced at the default),
before any cell runs, naming the closest declared name."""

from __future__ import annotations

import pytest

from helpers.errors import CookbookError
from tests.support import TESTS
from tools.notebook_run import run_notebook

NOTEBOOKS = TESTS.parent / "notebooks"


def test_a_misspelled_parameter_stops_the_run_with_the_name_it_meant(tmp_path):
    out = tmp_path / "tuning.ipynb"
    with pytest.raises(CookbookError) as err:
        run_notebook(
            NOTEBOOKS / "tuning.ipynb",
            {"gpu_hours_usd": 1.2, "repeats": 3},
            output=out,
            progress=False,
        )
    said = str(err.value)
    assert "'gpu_hours_usd' (did you mean 'gpu_hour_usd'?)" in said and "nothing was run" in said
    assert "'repeats'" not in said.split(":")[0]  # a declared one is not named
    assert not out.exists() and not list(tmp_path.iterdir())


def test_every_parameter_the_cli_documents_is_declared_by_the_target_notebooks():
    """The README's `-p stand_in True` and the template's own names pass the check."""
    from tools.notebook_run import check_parameters_declared

    for name in ("h100.ipynb", "quickstart_cpu_standin.ipynb", "speculative_decoding.ipynb"):
        check_parameters_declared(NOTEBOOKS / name, {"stand_in": True})
