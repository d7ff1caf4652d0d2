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


def test_a_parameter_of_the_wrong_type_is_shown_how_to_pass_the_right_one():
    """The wrong-type error ends with an example of the declared type: a JSON mapping for a
    dict (``-p adapters '["terse"]'`` used to be told ``-p adapters VALUE``), a number, True."""
    import pytest

    from helpers.config.parameters import check_parameters
    from helpers.errors import CookbookError

    declared = {
        "adapters": "Optional[dict]",
        "repeats": "Optional[PositiveInt]",
        "stand_in": "bool",
        "startup_timeout": "PositiveFloat",  # -1 launched vLLM, then "no /health within -1 s"
    }
    with pytest.raises(CookbookError) as err:
        check_parameters(
            declared, adapters=["terse"], repeats=0, stand_in="yes", startup_timeout=-1
        )
    text = str(err.value)
    assert """pass e.g. -p adapters '{"key": "value"}'""" in text
    assert "pass e.g. -p repeats 64" in text and "pass e.g. -p stand_in True" in text
    assert "startup_timeout = -1 (int), but the parameters cell declares PositiveFloat" in text
    assert "pass e.g. -p startup_timeout 0.5" in text
    check_parameters(declared, adapters=None, repeats=None, stand_in=True, startup_timeout=1800)


def test_the_workshop_checks_its_parameters_before_the_cpu_build_and_the_launch(tmp_path):
    """workshop_colab.ipynb checks every parameter in step 2, right after its own install (the
    helpers are not importable before it): a concurrency of 0 used to fail at step 9, after
    the launch, under the library's own name; max_tokens=0 as the SDK's 400."""
    out = tmp_path / "workshop.ipynb"
    with pytest.raises(CookbookError) as err:
        run_notebook(
            NOTEBOOKS / "workshop_colab.ipynb",
            {"install": False, "bench_concurrencies": [0], "max_tokens": 0},
            output=out,
            progress=False,
            timeout=180,
        )
    said = str(err.value)
    assert (
        "bench_concurrencies = [0] (list), but the parameters cell declares list[PositiveInt]"
        in said
    )
    assert "max_tokens = 0 (int), but the parameters cell declares PositiveInt" in said
    assert "launched pid" not in said and "in cell" in said  # stopped in step 2, before a launch
