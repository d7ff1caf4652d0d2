"""lab.bench.stats: the run-to-run spread of repeated points, comparisons and rankings within
it."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers import errors
from lab.bench import stats


def test_spread_and_compare_call_small_differences_noise():
    runs = pd.DataFrame({"output_throughput": [100.0, 104.0, 98.0]})
    s = stats.spread(runs)
    assert (s.n, s.min, s.max) == (3, 98.0, 104.0)
    assert s.noise_pct == pytest.approx(600 / (302 / 3))  # (104 - 98) / mean x 100 = 5.96 %
    small = stats.compare(100.0, 103.0, noise=s, names=("none", "ngram"))
    assert small.winner is None and "noise, not a win" in small.verdict
    big = stats.compare(100.0, 120.0, noise=s, names=("none", "ngram"))
    assert big.winner == "ngram" and "ngram beats none on output_throughput: 1.20x (" in big.verdict
    # latency: lower is better
    tpot = stats.compare(10.0, 8.0, metric="median_tpot_ms", noise=5.0, names=("none", "dspark"))
    assert tpot.winner == "dspark" and "1.25x lower" in tpot.verdict
    unknown = stats.compare(1.0, 2.0)
    assert unknown.winner == "B" and "noise unknown" in unknown.verdict
    with pytest.raises(errors.BenchError):
        stats.spread(pd.DataFrame({"output_throughput": [1.0]}))


def test_rank_and_winner():
    df = pd.DataFrame(
        {
            "label": ["none", "none", "ngram", "ngram", "mtp", "mtp"],
            "concurrency": [1, 8, 1, 8, 1, 8],
            "tokens_per_s_per_user": [50.0, 30.0, 80.0, 20.0, 78.0, 25.0],
            "output_throughput_per_gpu": [50.0, 240.0, 80.0, 160.0, 78.0, 200.0],
        }
    )
    lat = stats.rank(df, "tokens_per_s_per_user", concurrency=1, noise=5.0)
    assert list(lat["label"]) == ["ngram", "mtp", "none"]
    assert lat.iloc[1]["verdict"] == "within noise of best"
    assert stats.winner(lat).startswith("no clear winner: ngram, mtp")
    thr = stats.rank(df, "output_throughput_per_gpu", noise=5.0)  # highest common concurrency: 8
    assert thr.iloc[0]["label"] == "none" and thr.iloc[0]["concurrency"] == 8
    assert stats.winner(thr).startswith("none — none beats mtp on output_throughput_per_gpu: 1.20x")


def test_rank_judges_each_pair_by_its_own_spreads_when_given_per_configuration():
    """With one spread per configuration, a mode is judged against the best with the larger
    of their two spreads (the results pages' rule), not with the widest of every mode: a noisy
    third mode no longer turns a clear lead into a tie."""
    df = pd.DataFrame({"label": ["dspark", "none", "dflash"], "concurrency": [16] * 3,
                       "output_throughput_per_gpu": [3290.0, 2414.0, 1665.0]})  # fmt: skip

    def runs(lo: float, hi: float) -> stats.Spread:
        mid = (lo + hi) / 2
        return stats.spread(pd.DataFrame({"output_throughput_per_gpu": [lo, mid, hi]}),
                            "output_throughput_per_gpu")  # fmt: skip

    spreads = {"dspark": runs(2746, 3513), "none": runs(2293, 2532), "dflash": runs(1137, 2045)}
    widest = stats.rank(df, "output_throughput_per_gpu", noise=list(spreads.values()))
    assert widest.set_index("label").loc["none", "verdict"] == "within noise of best"
    paired = stats.rank(df, "output_throughput_per_gpu", noise=spreads)
    assert (
        paired.set_index("label")
        .loc["none", "verdict"]
        .startswith("dspark beats none on output_throughput_per_gpu: 1.36x (every run apart")
    )
    # DFlash's own runs spread 55 %, yet its best run is below DSpark's worst: apart, the
    # tuning step's rule (the spread rule called it a tie)
    assert paired.set_index("label").loc["dflash", "verdict"].startswith("dspark beats dflash")
    # runs that overlap are a tie however far apart the means
    lead = {"dspark": runs(2300, 3513), "none": runs(2293, 2532)}
    tied = stats.rank(df[df["label"] != "dflash"], "output_throughput_per_gpu", noise=lead)
    assert tied.set_index("label").loc["none", "verdict"] == "within noise of best"
