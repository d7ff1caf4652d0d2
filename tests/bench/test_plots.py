"""helpers.bench.plots on the recorded benchmark results in ``tests/data/bench/``."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from helpers import errors
from helpers.bench import plots
from helpers.bench import results as bench
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


def test_headless_backend_is_agg():
    assert matplotlib.get_backend().lower() == "agg"


def test_pareto_axes_lines_annotations_and_png(df, tmp_path):
    out = tmp_path / "sub" / "pareto.png"
    fig = plots.pareto(df, target="cpu", variant="standin", vllm_version="0.32.0", path=out)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "Tokens/s per user (1000 / mean TPOT) [tokens/s]"
    assert ax.get_ylabel() == "Output tokens/s per GPU [tokens/s/GPU]"
    assert len(ax.get_lines()) == df["label"].nunique() == 2
    assert sorted(t.get_text() for t in ax.texts) == ["c=1", "c=2", "c=2"]
    title = fig._suptitle.get_text()
    assert "Throughput" in title and "cpu · standin · vLLM 0.32.0" in title
    _png_ok(out)
    from PIL import Image

    with Image.open(out) as im:  # the PNG says what it measured, in its metadata too
        assert (
            "cpu · standin · vLLM 0.32.0" in im.text["Title"] and "Throughput" in im.text["Title"]
        )


def test_pareto_other_x_column_labels_its_unit(df):
    fig = plots.pareto(df, x="e2e_tokens_per_s_per_user")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "Tokens/s per user (output tokens / mean E2EL) [tokens/s]"
    assert len(ax.get_lines()) == 2


def test_pareto_without_subtitle_and_missing_column(df):
    fig = plots.pareto(df)
    assert "\n" not in fig._suptitle.get_text()
    with pytest.raises(errors.PlotError, match="load_results"):
        plots.pareto(df.drop(columns=["tokens_per_s_per_user"]))


def test_latency_vs_concurrency_panels_and_lines(df, tmp_path):
    out = tmp_path / "lat.png"
    fig = plots.latency_vs_concurrency(df, metrics=("ttft", "tpot", "e2el"), path=out)
    assert len(fig.axes) == 3
    for ax, metric in zip(fig.axes, ("TTFT", "TPOT", "E2EL"), strict=True):
        assert ax.get_xlabel() == "Concurrency [requests in flight]"
        assert ax.get_ylabel() == f"{metric} [ms]"
        assert len(ax.get_lines()) == 2 * 2  # 2 labels x (median, p99)
        assert {ln.get_label() for ln in ax.get_lines()} == {
            "ngram median", "ngram p99", "standin median", "standin p99"
        }  # fmt: skip
    _png_ok(out)


def test_latency_vs_concurrency_rejects_unknown_metric(df):
    with pytest.raises(errors.PlotError, match="Unknown latency metric"):
        plots.latency_vs_concurrency(df, metrics=("ttfb",))
    with pytest.raises(errors.PlotError, match="needs column"):
        plots.latency_vs_concurrency(df, percentiles=("p95",))
