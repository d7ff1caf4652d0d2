"""Weightless drafting at a stated acceptance: the registry's published lengths, the derivation
for another number of draft tokens, and the served ``--speculative-config``.

The vLLM side (``rejection_sample_method: synthetic``) is checked against vLLM 0.32.0's own
``SpeculativeConfig`` resolution: its rates for the lengths served here.
"""

from __future__ import annotations

import pytest

from helpers.config.load import load_registry
from helpers.config.resolve import derived_length, resolve, synthetic_drafting
from helpers.errors import RecipeError
from lab import synthetic_acceptance as acceptance


def test_each_drafting_method_states_a_published_length_and_its_source():
    reg = load_registry()
    for mode, k, length in (("mtp", 7, 3.687), ("dflash", 5, 3.18), ("dspark", 7, 3.69)):
        spec = reg.speculative[mode].synthetic_acceptance
        assert (spec.num_speculative_tokens, spec.length) == (k, length)
        assert "ai-dynamo/dynamo" in spec.source and "@" in spec.source  # where, at which commit
    assert reg.speculative["ngram"].synthetic_acceptance is None  # n-gram's acceptance is real


def test_another_number_of_draft_tokens_gets_a_derived_length_that_says_so():
    reg = load_registry()
    same = acceptance.synthetic_acceptance(reg, "mtp", 7)
    assert same.length == 3.687 and "derived" not in same.source
    fewer = acceptance.synthetic_acceptance(reg, "mtp", 3)
    # 1 + a + a^2 + a^3 with 1 + a + ... + a^7 = 3.687: a = 0.759
    assert fewer.length == pytest.approx(2.77, abs=0.01)
    assert "derived from 3.687 at K=7" in fewer.source and "0.76" in fewer.source
    assert derived_length(3.18, 5, 5) == 3.18
    assert derived_length(3.69, 7, 1) < 2  # one draft: at most 2 tokens a step


def test_an_impossible_length_is_refused_with_its_range():
    reg = load_registry()
    with pytest.raises(RecipeError, match=r"\[1, 4\]"):
        acceptance.synthetic_acceptance(reg, "mtp", 3, length=4.5)
    with pytest.raises(RecipeError, match="synthetic_acceptance_length=L"):
        acceptance.synthetic_acceptance(reg, "ngram", 3)


def test_a_weightless_drafting_config_runs_synthetic_and_its_caption_names_length_and_source():
    cfg = resolve("h200", speculative="dspark")
    served = acceptance.with_synthetic_acceptance(cfg)
    spec = served.speculative_config
    assert spec["rejection_sample_method"] == "synthetic"
    # the registry's K=3 for DSpark: a length derived from the published K=7 one
    assert spec["num_speculative_tokens"] == 3 and spec["synthetic_acceptance_length"] < 3.69
    caption = acceptance.describe(served).caption()
    assert caption.startswith(
        f"synthetic acceptance {spec['synthetic_acceptance_length']:g} at K=3 (derived"
    )
    assert "ai-dynamo/dynamo" in caption and caption.endswith("text not the model's")
    # an explicit length: chosen, not published
    chosen = acceptance.describe(acceptance.with_synthetic_acceptance(cfg, 2.0))
    assert chosen.length == 2.0 and "chosen" in chosen.source
    # no drafting: unchanged, nothing to caption
    none = resolve("h200")
    assert acceptance.with_synthetic_acceptance(none) is none and acceptance.describe(none) is None


def test_vllm_resolves_the_served_lengths_to_its_acceptance_schedule():
    """vLLM 0.32.0 turns the length into per-position rates whose sum is L - 1."""
    from vllm.config.speculative import SpeculativeConfig

    for k, length in ((7, 3.687), (5, 3.18), (3, 2.77)):
        rates = SpeculativeConfig._resolve_synthetic_acceptance_rates(k, None, length)
        assert len(rates) == k and sum(rates) == pytest.approx(length - 1)


def test_a_weightless_server_drafts_at_the_registrys_acceptance_by_default(tmp_path, monkeypatch):
    """What the core serves weightless (a target notebook with weightless = True): a drafting
    mode at the registry's stated acceptance (random drafters keep nothing), n-gram and no
    drafting unchanged."""
    from helpers.weights.prepare import served_config

    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path))
    b200 = served_config(resolve("b200"), "weightless").speculative_config  # MTP K=3 by default
    assert (b200["rejection_sample_method"], b200["synthetic_acceptance_length"]) == (
        "synthetic",
        2.77,
    )
    assert served_config(resolve("h200"), "weightless").speculative_config is None
    assert synthetic_drafting(resolve("h200", speculative="mtp")).speculative_config[
        "synthetic_acceptance_length"
    ] == pytest.approx(2.77)
    assert "rejection_sample_method" not in resolve("b200").speculative_config  # the target's own


def test_a_saved_caption_reads_back_as_the_point_it_describes():
    """tune.json keeps each candidate's caption; the pages read length, K and source back from
    it (the inverse of the caption, beside it), derived sources and chosen lengths included."""
    reg = load_registry()
    for point in (
        acceptance.synthetic_acceptance(reg, "dspark", 7),
        acceptance.synthetic_acceptance(reg, "mtp", 3),  # derived: its source holds ", " and "("
        acceptance.synthetic_acceptance(reg, "mtp", 7, length=2.5),
    ):
        back = acceptance.SyntheticAcceptance.from_caption(point.caption(), point.mode)
        assert back == point
    assert acceptance.SyntheticAcceptance.from_caption(None) is None
    assert acceptance.SyntheticAcceptance.from_caption("MTP K=7 on real weights") is None
