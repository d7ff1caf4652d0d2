"""lab.bench.plots on the recorded benchmark results in ``tests/data/bench/``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from helpers import errors
from helpers.bench import results as bench
from lab.bench import plots as lab_plots
from tests.support import DATA as TEST_DATA

DATA = TEST_DATA / "bench"


@pytest.fixture
def df():
    return bench.load_results(DATA)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _png_ok(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_importing_the_lab_plots_first_still_selects_agg_headless():
    """``lab.bench.plots`` imports pyplot before :mod:`helpers.bench.plots` picks the backend:
    a fresh headless interpreter still draws with Agg."""
    code = "import lab.bench.plots, matplotlib; print(matplotlib.get_backend())"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[3])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120, check=True)  # fmt: skip
    assert out.stdout.strip().lower() == "agg"


def test_acceptance_length_bars_and_png(df, tmp_path):
    out = tmp_path / "acc.png"
    fig = lab_plots.acceptance_length(df, vllm_version="0.32.0", path=out)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "Acceptance length [tokens per target step]"
    assert ax.get_xlabel() == "Speculative mode"
    # only the speculative rows: one mode (ngram) at one concurrency -> one bar
    assert len(ax.patches) == 1
    assert [t.get_text() for t in ax.get_xticklabels()] == ["ngram"]
    assert ax.patches[0].get_height() == pytest.approx(df["spec_decode_acceptance_length"].max())
    _png_ok(out)


def test_acceptance_length_groups_concurrencies(df):
    extra = df[df["label"] == "ngram"].assign(
        concurrency=4, spec_decode_acceptance_length=2.5
    )  # a second concurrency of the same mode
    other = extra.assign(label="mtp", concurrency=2, spec_decode_acceptance_length=3.4)
    fig = lab_plots.acceptance_length(pd.concat([df, extra, other], ignore_index=True))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["mtp", "ngram"]
    assert len(ax.patches) == 3  # mtp@2, ngram@2, ngram@4 (mtp was not run at 4)
    assert sorted(round(p.get_height(), 2) for p in ax.patches) == [1.21, 2.5, 3.4]


def test_acceptance_length_without_spec_decode_names_the_fix(df):
    with pytest.raises(errors.PlotError, match="speculative"):
        lab_plots.acceptance_length(df[df["label"] == "standin"].drop(
            columns=["spec_decode_acceptance_length"]))  # fmt: skip


def _frontier_points(with_range: bool) -> pd.DataFrame:
    rows = pd.DataFrame({
        "candidate": ["recipe", "recipe", "mns-2", "mns-2"],
        "concurrency": [1, 2, 1, 2],
        "tokens_per_s_per_user": [100.0, 90.0, 98.0, 95.0],
        "output_throughput": [100.0, 180.0, 98.0, 190.0],
        "meets_slo": [True, True, True, True],
    })  # fmt: skip
    if with_range:  # the repeated points' runs: min-max around the median
        rows["output_throughput_min"] = rows["output_throughput"] - [5, 20, 5, 40]
        rows["output_throughput_max"] = rows["output_throughput"] + [5, 30, 5, 10]
    return rows


def test_a_tuning_frontier_draws_the_runs_range_where_it_has_one():
    """The frontier plot showed medians alone, so a candidate tied with the recipe (its runs
    overlapping) looked ahead of it; the runs' range is drawn as bars and named in the legend."""
    from matplotlib.container import ErrorbarContainer

    fig = lab_plots.tune_frontier(_frontier_points(True), y="output_throughput")
    ax = fig.axes[0]
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) >= 2  # one per candidate
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "range of the runs (no bar: one run)" in labels
    segments = bars[0].lines[2][0].get_segments()  # the y bars of the first candidate drawn
    assert sorted(round(seg[1][1] - seg[0][1]) for seg in segments) == [10, 50]
    plain = lab_plots.tune_frontier(_frontier_points(False), y="output_throughput")
    assert not [c for c in plain.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert not any(
        "range of the runs" in t.get_text() for t in plain.axes[0].get_legend().get_texts()
    )
