"""Each mode's defaults in one table (helpers.config.run): consistent with each other, and
what the notebooks and ChatOptions read."""

from __future__ import annotations

import pytest

from helpers.chat.request import ChatOptions
from helpers.config.run import MODES, mode_from, run_defaults
from helpers.evals.budget import budget_plan


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("max_tokens", [None, 1, 2, 31, 256, 512, 16000])
def test_every_budget_of_every_mode_fits_its_max_tokens(mode, max_tokens):
    """The step-10 failure of 2026-12-01 (a budget of 1024 against the weightless 256) cannot
    come back: each mode's curve builds under its own ``max_tokens`` or the user's."""
    d = run_defaults(mode, max_tokens)
    tokens = max_tokens or d.max_tokens
    plan = budget_plan(d.budgets, ChatOptions(max_tokens=tokens))  # raises on a bad budget
    if tokens < 4:  # no room for a cap: off and no cap only
        assert [name for name, _ in plan] == ["off", "no cap"]
    else:
        assert [name for name, _ in plan] == ["off", str(d.budgets[1]), "no cap"]
        assert 1 <= d.budgets[1] <= tokens // 4
    assert d.budget_items <= d.eval_items


def test_the_modes_defaults_are_the_seeds_and_the_notebooks():
    gpu, weightless, standin = (run_defaults(m) for m in ("download", "weightless", "stand_in"))
    assert (gpu.max_tokens, gpu.temperature, gpu.top_p, gpu.budgets) == (
        16000,
        1.0,
        0.95,
        ("off", 1024, None),
    )
    assert (weightless.max_tokens, weightless.budgets, weightless.eval_items) == (
        256,
        ("off", 64, None),
        50,
    )
    assert weightless.bench_concurrencies == gpu.bench_concurrencies == (1, 16, 64, 256)
    assert (standin.temperature, standin.budgets, standin.bench_concurrencies) == (
        0.0,
        ("off", 8, None),
        (1, 2, 4),
    )
    assert weightless.noise and not gpu.noise and not standin.noise
    opts = ChatOptions.for_run(stand_in=False, weightless=True)
    assert (opts.max_tokens, opts.temperature, opts.noise_tolerant) == (256, 1.0, True)
    assert mode_from(True, True) == "stand_in" and mode_from(False, True) == "weightless"


def test_a_budget_at_max_tokens_is_refused_by_name_with_the_fix():
    with pytest.raises(
        ValueError, match=r"budget 256 is not below max_tokens=256.*'budgets': \['off', 64, None\]"
    ):
        budget_plan(["off", 256, None], ChatOptions(max_tokens=256))
    with pytest.raises(ValueError, match="is not one of download, weightless, stand_in"):
        run_defaults("gpu")


def test_a_sweep_on_dummy_weights_knows_it_from_the_served_command(tmp_path):
    """The sweep says "expected on dummy weights" instead of ERROR for a drafter that accepts
    nothing when the server serves ``--load-format dummy`` (seen as ERROR lines on an H200,
    2026-12-02); a real checkpoint or an attached URL keeps the ERROR."""
    from types import SimpleNamespace

    from helpers.bench.sweep import serves_dummy_weights
    from helpers.config.resolve import resolve
    from helpers.weights.weightless import arch_config, build_arch_model

    weightless = arch_config(resolve("h200"), build_arch_model("nvfp4", tmp_path / "arch"))
    assert serves_dummy_weights(SimpleNamespace(config=weightless))
    assert not serves_dummy_weights(SimpleNamespace(config=resolve("h200")))
    assert not serves_dummy_weights(SimpleNamespace(base_url="http://10.0.0.9:8000"))
