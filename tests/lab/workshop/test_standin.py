"""lab.workshop.standin: the workshop's paragraph on the stand-in, its parameters counted from
the recipe, as the checkpoint has them."""

from __future__ import annotations

from helpers.standin.build import build_standin_model, standin_metadata
from lab.workshop import standin


def test_the_summary_says_stand_in_and_its_size():
    text = standin.standin_summary()
    assert "stand-in" in text and f"{standin.STANDIN.parameters / 1e6:.2f}M" in text


def test_the_parameters_counted_from_the_recipe_are_the_checkpoints():
    meta = standin_metadata(build_standin_model())
    assert meta["parameters"] == standin.STANDIN.parameters
