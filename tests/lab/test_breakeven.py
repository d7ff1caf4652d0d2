"""The break-even acceptance length: a line per (K, concurrency) through timed points, met with
the baseline's median, with the range the baseline's spread gives."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.errors import BenchError
from lab.breakeven import break_even, plot_break_even, summary


def _points(step_ms: dict[int, float], lengths=(1.2, 3.69, 5.5)) -> pd.DataFrame:
    """Runs of a drafting server whose target step takes ``step_ms`` at each concurrency:
    output tok/s = concurrency x L / step (the model drafting speed follows)."""
    return pd.DataFrame(
        [
            {"concurrency": c, "num_speculative_tokens": 7, "synthetic_acceptance_length": L,
             "spec_decode_acceptance_length": L - 0.02 * r, "output_throughput": c * L / ms * 1000 * (1 + 0.01 * r)}
            for c, ms in step_ms.items() for L in lengths for r in (-1, 0, 1)
        ]
    )  # fmt: skip


def _baseline(levels: dict[int, tuple[float, ...]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"concurrency": c, "output_throughput": v} for c, vs in levels.items() for v in vs]
    )


def test_break_even_is_where_the_line_meets_the_baseline():
    # the 2026-12-04 H200 run's step times: no drafting 4.09 ms at c=1; MTP K=7 about 6.1 ms
    pts = _points({1: 6.1, 16: 17.1})
    base = _baseline({1: (216.0, 220.0, 224.0), 16: (2400.0, 2425.0, 2450.0)})
    result = break_even(pts, base).set_index("concurrency")
    # speed = L / step -> L* = baseline x step / concurrency
    assert result.loc[1, "break_even_length"] == pytest.approx(220 * 6.1 / 1000, rel=0.03)
    assert result.loc[16, "break_even_length"] == pytest.approx(2425 * 17.1 / 16 / 1000, rel=0.03)
    lo, hi = result.loc[1, ["break_even_low", "break_even_high"]]
    assert lo < result.loc[1, "break_even_length"] < hi  # the baseline's spread widens it
    assert not result.loc[1, "extrapolated"] and result.loc[1, "runs"] == 9
    lines = summary(result.reset_index())
    assert lines[0].startswith("K=7 at concurrency 1: drafting pays above L = 1.3")
    assert "measured at L = 1.18-5.5" in lines[0]  # vLLM's measured lengths


def test_a_point_past_the_measured_lengths_is_called_extrapolated():
    pts = _points({1: 6.1}, lengths=(3.0, 5.0))
    result = break_even(pts, _baseline({1: (220.0, 221.0)}))
    assert bool(result.loc[0, "extrapolated"])
    assert "extrapolated" in summary(result)[0]


def test_one_length_or_no_baseline_is_refused_naming_the_fix():
    with pytest.raises(BenchError, match="two or more"):
        break_even(_points({1: 6.1}, lengths=(3.69,)), _baseline({1: (220.0,)}))
    with pytest.raises(BenchError, match="no baseline run at concurrency 16"):
        break_even(_points({16: 17.1}), _baseline({1: (220.0,)}))


def test_the_plot_is_written(tmp_path):
    pts, base = _points({1: 6.1, 16: 17.1}), _baseline({1: (220.0, 221.0), 16: (2425.0, 2430.0)})
    path = plot_break_even(
        pts, base, break_even(pts, base), tmp_path / "be.png", caption="synthetic acceptance ..."
    )
    assert path.stat().st_size > 10_000


def test_one_length_gives_an_estimate_through_the_origin_that_says_so():
    pts = _points({1: 6.1}, lengths=(3.69,))
    result = break_even(pts, _baseline({1: (220.0,)}), model="origin")
    assert result.loc[0, "model"] == "origin" and result.loc[0, "intercept"] == 0
    assert result.loc[0, "break_even_length"] == pytest.approx(220 * 6.1 / 1000, rel=0.03)
    assert "assuming speed proportional to L" in summary(result)[0]


def test_a_break_even_above_k_plus_one_says_drafting_cannot_pay():
    """A step accepts at most its K drafts and one token more: a break-even L above K + 1
    (the stand-in's n-gram at one request: 11.6 at K=3) is said as "cannot pay", not as a
    length to aim for."""
    pts = _points({1: 6.1}, lengths=(3.69,)).assign(num_speculative_tokens=3)
    result = break_even(pts, _baseline({1: (1900.0,)}), model="origin")
    assert result.loc[0, "break_even_length"] > 4
    line = summary(result)[0]
    assert line.startswith("K=3 at concurrency 1: drafting cannot pay: its break-even L = 11.")
    assert "is above K + 1 = 4, the most a step can accept" in line and "pays above" not in line
