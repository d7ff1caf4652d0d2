"""Recommendations that survive their noise: repeats with their own seeds, the median and spread
of each point, the tie rule, the SLO limit's bisection, the cost against the API's price. The
pure parts on constructed and recorded point records; the run itself on the real CPU server."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from helpers.config.resolve import resolve
from helpers.config.run import Run
from helpers.errors import BenchError
from helpers.paths import REPO_ROOT
from lab.tune import noise
from lab.tune import slo as slos
from lab.tune import tune as tuning
from lab.tune.results import collect
from tests.support.tune_results import copy_tune_results, seeds_only

#: vLLM's own JSON of one stand-in point: the constructed folders below are copies of it.
POINT = json.loads((REPO_ROOT / "tests" / "data" / "bench" / "standin-c1.json").read_text())
TINY = {"name": "tiny", "input_len": 16, "output_len": 8, "concurrencies": [1, 2]}
#: Bounds every recorded point below meets unless its E2EL is raised past 1 s.
BOUNDS = slos.SLO.coerce({"ttft_ms": 60_000, "e2el_ms": 1_000})


# ------------------------------------------------------------------------------ the tie rule


def test_a_candidate_wins_only_when_its_worst_run_beats_the_recipes_best():
    won = noise.verdict([5300, 5250, 5400], [4800, 5100, 4900])
    assert won.beats and won.runs == (3, 3) and won.ratio == pytest.approx(5300 / 4900)
    assert won.text.startswith("1.08x the recipe's median (3 runs each; worst run above")
    # a higher median with overlapping ranges is a tie: the recipe stays
    tie = noise.verdict([5300, 5050, 5400], [4800, 5100, 4900])
    assert not tie.beats and tie.text.startswith("tie (within noise): 1.08x the recipe's median")
    assert "5,050-5,400 vs the recipe's 4,800-5,100" in tie.text
    # one run each: no spread; under the 5 % a single run cannot tell apart it is a tie
    assert not noise.verdict([103], [100]).beats
    one = noise.verdict([120], [100])
    assert one.beats and one.text == "1.20x the recipe's (one run each: no spread measured)"
    assert "2 run(s) vs 1" in noise.verdict([120, 125], [100]).text  # a run of each is not enough
    # one run against repeats never wins: the single run of a capped candidate inside the
    # recipe's three once replaced it
    lone = noise.verdict([5200], [4800, 5300, 4900])
    assert not lone.beats and lone.text.startswith("undecided: 1.06x the recipe's (1 run(s) vs 3)")
    assert "the candidate's point has no spread" in lone.text and "run it 3 times" in lone.text
    assert noise.verdict([120, float("nan")], [100]).runs == (1, 1)
    with pytest.raises(BenchError, match="at least one measured value"):
        noise.verdict([], [100])


def test_the_best_of_several_candidates_needs_a_lead_beyond_the_screen():
    """The 5 % a lucky lead may have is shared among the candidates the winner was picked
    from: a clean sweep at 3 runs each (1 in 20) wins for one candidate, not for the best of 12
    (H200, 2026-12-03: FULL_DECODE_ONLY CUDA graphs at c1 swept the recipe's runs by 0.01 tok/s,
    the best of 12 configurations); 5 runs each can show it, and the text says so."""
    fast, recipe = [285.0, 293.0, 257.1], [256.4, 257.0, 223.7]
    assert noise.sweep_chance(fast, recipe) == pytest.approx(1 / 20)
    assert noise.verdict(fast, recipe).beats  # one candidate: its worst run above the best
    screen = noise.verdict(fast, recipe, screened=12)
    assert not screen.beats and screen.tie == "tie (within noise)"
    assert "the best of 12 candidates: a lead this clean has a 5.0% chance" in screen.text
    assert "a win needs 0.42% (5% over 12): 5 runs of each can show it" in screen.text
    assert [noise.runs_to_show(k) for k in (1, 2, 6, 12, 13, 50)] == [3, 4, 5, 5, 6, 7]
    # 5 runs each sweeping: 1 in 252, under 5 % over 12
    five = noise.verdict([*fast, 290.0, 288.0], [*recipe, 240.0, 250.0], screened=12)
    assert five.beats and "one-sided Mann-Whitney p = 0.004, the best of 12 candidates" in five.text
    # with 5 runs a lead with one overlap is a win for one candidate (2 in 252), named by its p
    one_overlap = noise.verdict([*fast, 290.0, 256.5], [*recipe, 240.0, 251.0])
    assert one_overlap.beats and "p = 0.0079" in one_overlap.text
    # 2 runs each (the stand-in's rehearsal) cannot show a win: 1 in 6
    two = noise.verdict([300.0, 310.0], [100.0, 110.0])
    assert not two.beats and "16.7% chance" in two.text and "3 runs of each" in two.text
    # a sweep measured apart stays "measured apart", whatever the screen
    apart = noise.verdict(fast, recipe, ["measured 7.4 h apart"], screened=12)
    assert apart.tie == "tie (measured apart)"
    # what counts as screened: each configuration other than the recipe, once
    pts = pd.DataFrame({"candidate": ["recipe", "a", "a", "b", "a"], "file": ["x", "x", "x", "x", "y"],
                        "recipe": [True, False, False, False, False]})  # fmt: skip
    assert noise.screened_count(pts) == 2  # a and b (a at two concurrencies is one)
    assert noise.screened_count(pts, ("file", "candidate")) == 3  # a measured in two sessions
    assert noise.screened_count(pts[pts["recipe"]]) == 1  # none besides the recipe: at least 1


def test_each_point_is_the_median_of_its_repeats_with_its_spread():
    runs = pd.DataFrame(
        [
            {"candidate": "a", "workload": "w", "concurrency": 1, "repeat": r, "date": d,
             "output_throughput_per_gpu": t, "p50_tpot_ms": tp, "recipe": False}
            for r, (t, tp, d) in enumerate([(100, 5.0, "x"), (130, 4.0, "y"), (110, 4.5, "z")])
        ]
        + [{"candidate": "a", "workload": "w", "concurrency": 4, "repeat": 0, "date": "q",
            "output_throughput_per_gpu": 300, "p50_tpot_ms": 6.0, "recipe": False}]
    )  # fmt: skip
    pts = noise.aggregate(runs).set_index("concurrency")
    assert pts.loc[1, "output_throughput_per_gpu"] == 110 and pts.loc[1, "repeats"] == 3
    assert (
        pts.loc[1, "output_throughput_per_gpu_min"],
        pts.loc[1, "output_throughput_per_gpu_max"],
    ) == (100, 130)
    assert pts.loc[1, "p50_tpot_ms"] == 4.5 and pts.loc[1, "date"] == "x"  # repeat 0's text
    assert pts.loc[4, "repeats"] == 1 and pts.loc[4, "p50_tpot_ms_max"] == 6.0
    assert "repeat" not in pts.columns and pts["recipe"].dtype == bool
    # numbers beside None (a drafter's acceptance length, none for the recipe's point): the
    # median of the numbers, not the first run's (the break-even length is computed from it)
    runs["spec_decode_acceptance_length"] = pd.Series([3.70, 3.66, 3.69, None], dtype=object)
    pts = noise.aggregate(runs).set_index("concurrency")
    assert pts.loc[1, "spec_decode_acceptance_length"] == 3.69
    assert pd.isna(pts.loc[4, "spec_decode_acceptance_length"])
    runs["flag"] = pd.Series([True, None, False, None], dtype=object)  # text, not numbers
    assert noise.aggregate(runs).set_index("concurrency").loc[1, "flag"] is True


# ------------------------------------------------------------------------------ the SLO limit


def test_the_slo_limit_is_bisected_between_the_highest_pass_and_the_lowest_miss():
    grid = {1: True, 16: True, 64: False, 256: False}
    assert slos.slo_limit(grid) == (16, 64) and slos.next_probe(grid) == 40
    assert slos.next_probe({**grid, 40: True}) == 52
    assert slos.next_probe({**grid, 40: False}) == 28
    assert (
        slos.next_probe({**grid, 40: True, 52: True, 58: True, 61: True, 62: True, 63: True})
        is None
    )
    # a pass above a miss (a noisy run) does not move the limit up
    assert slos.slo_limit({1: True, 16: False, 64: True}) == (1, 16)
    # nothing to search: every point meets it, or none does
    assert (
        slos.slo_limit({1: True, 2: True}) == (2, None)
        and slos.next_probe({1: True, 2: True}) is None
    )
    assert slos.slo_limit({1: False, 2: False}) == (None, 1) and slos.next_probe({1: False}) is None


# ------------------------------------------------------------------------------ the API price


def test_the_break_even_utilization_against_the_apis_price():
    vercel, wandb = slos.API_PRICES
    assert (vercel.input_usd_per_m, vercel.output_usd_per_m) == (0.04, 0.12)
    assert (wandb.input_usd_per_m, wandb.output_usd_per_m) == (0.07, 0.20)
    assert vercel.date and vercel.source and "Vercel: $0.04 in / $0.12 out" in vercel.describe()
    # 1,024 in / 256 out per request: the API also bills the 4 input tokens of each output token
    assert vercel.per_m_output(1024, 256) == pytest.approx(0.12 + 0.04 * 4)
    # 10,000 tok/s at $3.60 an hour: $0.10 per M at full use; the API's $0.28 -> 36 % of the hours
    u = slos.break_even_utilization(10_000, 3.6, vercel.per_m_output(1024, 256))
    assert u == pytest.approx(0.1 / 0.28)
    # 1,000 tok/s: $1.00 per M at full use, 8.3x the API's $0.12: never cheaper (unclamped)
    assert slos.break_even_utilization(1000, 3.6, 0.12) == pytest.approx(1.0 / 0.12)
    assert slos.break_even_utilization(1000, None, 0.12) is None
    with pytest.raises(BenchError, match="must be positive"):
        slos.break_even_utilization(1000, 3.6, 0)
    with pytest.raises(BenchError, match="input_usd_per_m"):
        slos.APIPrice.coerce({"provider": "x", "output_usd_per_m": 0.1})
    own = slos.APIPrice.coerce([{"provider": "Mine", "input_usd_per_m": 0, "output_usd_per_m": 1,
                                 "source": "a quote", "date": "2026-12"}])  # fmt: skip
    assert own[0].provider == "Mine" and slos.APIPrice.coerce(None) == slos.API_PRICES


# ------------------------------------------------------------------------------ recorded points


def _write(folder, name, c, speed, *, repeat=0, e2el=50.0, search=False):
    """vLLM's JSON of one run of a point (the recorded stand-in point, its speed changed)."""
    label = name if not repeat else f"{name}-r{repeat}"
    where = folder / name / "tiny" / ("search" if search else "")
    where.mkdir(parents=True, exist_ok=True)
    point = {**POINT, "label": label, "max_concurrency": c, "output_throughput": speed,
             "p99_e2el_ms": e2el, "request_goodput": POINT["request_throughput"]}  # fmt: skip
    (where / f"{label}-c{c}.json").write_text(json.dumps(point))


def _result(folder, cands, **kw):
    load = tuning.workloads(TINY)
    return collect(folder, resolve("h200"), cands, load, BOUNDS, run=Run("stand_in"),
                   gpu_hour_usd=3.6, **kw)  # fmt: skip


@pytest.fixture
def cands():
    return tuning.make_candidates(
        resolve("h200"), [{"name": "fast", "extra_args": {"--max-num-seqs": 64}}]
    )


def test_a_margin_inside_the_spread_is_a_tie_and_the_recipe_stays(tmp_path, cands):
    """Three runs each at c2 (the decision point): a candidate 4 % ahead by the median but
    with overlapping ranges is a tie; 30 % ahead with its worst run above the recipe's best, it
    is recommended. The tables carry the median, the range and the runs."""
    for c in (1, 2):
        for r, (mine, ref) in enumerate(((195, 200), (208, 210), (215, 190))):
            _write(tmp_path, "recipe", c, ref * c / 2, repeat=r)
            _write(tmp_path, "fast", c, mine * c / 2, repeat=r)
    tied = _result(tmp_path, cands, repeats=3)
    rec = tied.recommended()
    assert (rec.candidate, rec.tied_with, rec.repeats, rec.concurrency) == ("recipe", "fast", 3, 2)
    summary = tied.summary()
    assert summary.startswith(
        "tiny: recipe at concurrency 2: 200 (median of 3, 190-210) output tok/s/GPU"
    )
    assert "fast: tie (within noise): 1.04x the recipe's median, ranges overlap" in summary
    assert "so the recipe stays" in summary
    table = tied.recommendation_table().set_index("role")
    assert table.loc["recommended", "candidate"] == "recipe"
    assert table.loc["tie (within noise)", "candidate"] == "fast"
    assert table.loc["recommended", "output_tok_s_range"] == "190-210"
    assert table.loc["recommended", "runs"] == 3 and "goodput_range" in table
    # the runs are kept one by one, with their repeat, in tune.json
    doc = tied.to_dict()
    recipe_pts = next(c for c in doc["candidates"] if c["name"] == "recipe")["points"]
    assert sorted((p["concurrency"], p["repeat"]) for p in recipe_pts) == [
        (c, r) for c in (1, 2) for r in range(3)
    ]
    for r, mine in enumerate((260, 273, 250)):  # now clearly faster: worst 250 > best 210
        _write(tmp_path, "fast", 2, mine, repeat=r)
    won = _result(tmp_path, cands, repeats=3)
    assert won.recommended().candidate == "fast" and won.recommended().tied_with is None
    assert (
        "1.30x the recipe's median (3 runs each; worst run above the recipe's best: 250-273"
        in won.summary()
    )


def test_a_recommendation_rests_on_repeated_points_when_a_median_moves_the_best(tmp_path, cands):
    """The recipe's first runs picked c1 (c2 ran once, slower); its repeats at c1 came out
    slower, so by medians its single run at c2 would look best. The recipe's row stays on its
    repeated point: a choice by medians never lands on one run beside repeated ones."""
    for r, speed in enumerate((400, 300, 300)):
        _write(tmp_path, "recipe", 1, speed, repeat=r)
    _write(tmp_path, "recipe", 2, 350)  # one run: above the repeats' median, below the first
    for c in (1, 2):
        for r in range(3):
            _write(tmp_path, "fast", c, 100.0 * c, repeat=r)
    result = _result(tmp_path, cands, repeats=3)
    table = result.recommendation_table().set_index("role")
    assert table.loc["recipe", "concurrency"] == 1 and table.loc["recipe", "runs"] == 3
    assert set(result.recommendation_table()["runs"]) == {3}


def test_a_single_run_folder_reads_as_one_run_and_claims_nothing_within_five_percent(
    tmp_path, cands
):
    """A folder written before repeats (one <name>-c<N>.json per point) still reads; its
    figures say one run, and a 3 % margin is a tie, a 20 % one a win said to be one run."""
    for c in (1, 2):
        _write(tmp_path, "recipe", c, 100.0 * c)
        _write(tmp_path, "fast", c, 103.0 * c)
    one = _result(tmp_path, cands)
    assert set(one.points["repeats"]) == {1}
    rec = one.recommended()
    assert rec.candidate == "recipe" and rec.tied_with == "fast"
    assert "recipe at concurrency 2 (one run): 200 output tok/s/GPU" in one.summary()
    assert "one run each: no spread measured, under the 5%" in one.summary()
    assert (
        one.recommendation_table().set_index("role").loc["recommended", "output_tok_s_range"]
        == "one run"
    )
    _write(tmp_path, "fast", 2, 240.0)
    assert (
        "1.20x the recipe's (one run each: no spread measured)"
        in _result(tmp_path, cands).summary()
    )


def test_the_cost_is_set_beside_the_apis_price_with_the_break_even(tmp_path, cands):
    for c in (1, 2):
        _write(tmp_path, "recipe", c, 100.0 * c)
    lines = _result(tmp_path, cands[:1]).summary().splitlines()
    # 200 tok/s at $3.60 an hour: $5.00 per M; the API bills $0.12 + $0.04 x 2 = $0.20 per M here
    assert "$5.000 per million output tokens" in lines[0]
    vercel = next(ln for ln in lines if "Vercel's API" in ln)
    assert "$0.200 per million output tokens of this workload, its input tokens included" in vercel
    assert "the API is cheaper even at 100 % utilization (break-even would need 2500%)" in vercel
    _write(tmp_path, "recipe", 2, 20_000.0)  # $0.05 per M at full use
    lines = _result(tmp_path, cands[:1]).summary().splitlines()
    assert "self-hosting breaks even at 25% GPU utilization" in next(
        ln for ln in lines if "Vercel" in ln
    )


def test_the_next_step_repeats_the_decision_points_then_bisects_the_slo_limit(tmp_path):
    """What tune() measures next, read from the saved files (so it resumes anywhere): the
    grid once, then the decision points (the lowest concurrency and the best under the SLO)
    again per repeat, then bisection probes while fewer than slo_search ran. The limit is a
    field of the result and a line of the summary."""
    w = tuning.workloads({**TINY, "concurrencies": [1, 4, 16]})[0]

    def step(failures=()):
        return tuning._next_step(tmp_path, "recipe", w, BOUNDS, 3, 2, list(failures))

    assert step() == ("first", 0, [1, 4, 16])
    _write(tmp_path, "recipe", 1, 100.0)
    _write(tmp_path, "recipe", 4, 400.0)
    _write(tmp_path, "recipe", 16, 900.0, e2el=5000.0)  # misses the 1 s E2EL bound
    assert tuning.decision_concurrencies(tmp_path, "recipe", w, BOUNDS) == [1, 4]
    assert step() == ("repeat", 1, [1, 4])
    _write(tmp_path, "recipe", 1, 100.0, repeat=1)
    assert step() == ("repeat", 1, [4])
    failed = [{"workload": "tiny", "concurrency": 4, "repeat": 1}]
    assert step(failures=failed) == ("repeat", 2, [1, 4])  # a failed run is not proposed again
    for r in (1, 2):
        for c in (1, 4):
            _write(tmp_path, "recipe", c, 100.0 * c, repeat=r)
    assert step() == ("search", 0, [10])  # between 4 (meets) and 16 (misses)
    _write(tmp_path, "recipe", 10, 800.0, search=True)
    assert step() == ("search", 0, [13])
    assert step(failures=[{"workload": "tiny", "concurrency": 13, "search": True}]) is None  # 2 ran
    _write(tmp_path, "recipe", 13, 850.0, e2el=2000.0, search=True)
    assert step() is None  # slo_search=2 probes ran
    cands = tuning.make_candidates(resolve("h200"), [])
    result = collect(tmp_path, resolve("h200"), cands, [w], BOUNDS, run=Run("stand_in"), repeats=3)
    lim = result.limits.set_index("candidate").loc["recipe"]
    assert (lim["limit"], lim["misses_at"], lim["probes"]) == (10, 13, 2)
    assert lim["output_throughput_per_gpu"] == 800.0 and lim["runs"] == 1  # the probe's own run
    assert "SLO limit (recipe): concurrency 10 meets it, 13 misses (between 10 and 13; bisection, " \
           "2 extra point(s), one run each); goodput" in result.summary()  # fmt: skip
    assert re.search(r"goodput [\d,]+ tok/s/GPU there, one run", result.summary())
    # the probes never enter the grid's points, nor the choice
    assert sorted(set(result.points["concurrency"])) == [1, 4, 16]


def test_bad_repeats_and_search_are_refused_before_anything_runs(tmp_path):
    for kw, named in (({"repeats": 0}, "repeats=0"), ({"repeats": 2.5}, "repeats=2.5"),
                      ({"slo_search": -1}, "slo_search=-1"),
                      ({"api_prices": [{"provider": "x"}]}, "not an API price")):  # fmt: skip
        with pytest.raises(BenchError, match=re.escape(named)):
            tuning.tune(resolve("h200"), TINY, None, [], mode="stand_in", out_dir=tmp_path,
                        progress=False, **kw)  # fmt: skip
    assert not (tmp_path / "recipe").exists()


# ------------------------------------------------------------------------------ real server


@pytest.mark.server
def test_a_candidate_capped_below_a_concurrency_repeats_the_points_it_can_serve(
    standin_server, tmp_path, monkeypatch
):
    """--max-num-seqs 2 serves at most 8 in flight (4 x 2): concurrency 16 is not measured for
    it (said so), and its decision point runs as often as the recipe's, so the rule decides."""
    capped = [{"name": "seqs-2", "extra_args": {"--max-num-seqs": 2}}]
    load = {**TINY, "concurrencies": [1, 16]}
    said: list[str] = []
    common = dict(mode="stand_in", servers={"recipe": standin_server.url, "seqs-2": standin_server.url},
                  out_dir=tmp_path, num_prompts=4, slo={"ttft_ms": 60_000, "e2el_ms": 60_000},
                  gpu_hour_usd=1.0, progress=False, repeats=2)  # fmt: skip
    monkeypatch.setattr(tuning, "_say", lambda progress, text: said.append(text))
    result = tuning.tune(resolve("h200"), load, candidates=capped, **common)
    w = tuning.workloads(load)[0]
    assert any("concurrency 16 not measured: above 8 (4 x --max-num-seqs 2)" in t for t in said), (
        said
    )
    assert not any("not saved as asked" in t for t in said)
    assert len(tuning.point_runs(tmp_path, "seqs-2", w, 1)) == 2  # its repeats ran
    assert not tuning.point_runs(tmp_path, "seqs-2", w, 16)
    assert result.recommended() is not None


@pytest.mark.server
def test_repeats_on_the_standin_run_with_their_own_seeds_and_resume(standin_server, tmp_path):
    """The recipe and a copy of it, both on the session's stand-in server, two runs each of the
    decision points: the second run has other prompts (its own seed), the tables carry the
    median and range of two runs, the verdict agrees with the rule on the measured runs, and
    a second call measures nothing."""
    same = [{"name": "same", "standin_args": {}}]
    common = dict(mode="stand_in", servers={"recipe": standin_server.url, "same": standin_server.url},
                  out_dir=tmp_path, num_prompts=4, slo={"ttft_ms": 60_000, "e2el_ms": 60_000},
                  gpu_hour_usd=1.0, progress=False, repeats=2)  # fmt: skip
    result = tuning.tune(resolve("h200"), TINY, candidates=same, **common)
    w = tuning.workloads(TINY)[0]
    n_runs = 0
    for name in ("recipe", "same"):
        decision = tuning.decision_concurrencies(tmp_path, name, w, result.slo)
        assert 1 in decision  # the lowest concurrency, and the best under the SLO
        runs = [len(tuning.point_runs(tmp_path, name, w, c)) for c in (1, 2)]
        assert runs == [2 if c in decision else 1 for c in (1, 2)], runs  # only those repeat
        n_runs += sum(runs)
    seeds = {
        re.search(r"--seed (\d+)", p.with_suffix(".log").read_text()).group(1)
        for p in tuning.point_runs(tmp_path, "recipe", w, 1)
    }
    assert len(seeds) == 2, "the two runs sent the same prompts"
    assert len(result.runs) == n_runs and set(result.points["repeats"]) <= {1, 2}
    rec = result.recommended()
    # the rule's own basis: the repeated points (a point run once, e.g. a candidate's second
    # concurrency when its first runs chose its first, never decides beside repeated ones)
    decidable = result._decidable(w.name)
    best = slos.choose(decidable, result.slo)
    ref = slos.choose(decidable[decidable["recipe"]], result.slo)
    if best["candidate"] == "same":  # the rule decides, on the runs measured here
        v = noise.verdict(result._run_scores(best, "goodput"), result._run_scores(ref, "goodput"))
        assert (rec.candidate, rec.tied_with) == (("same", None) if v.beats else ("recipe", "same"))
        assert v.text in result.summary()
    else:
        assert rec.candidate == "recipe" and rec.verdict is None
    table = result.recommendation_table()
    # every row rests on a repeated point, even where the medians would have moved a
    # candidate's best to a concurrency its first run did not pick (run once)
    assert (
        set(table["runs"]) == {2}
        and table["output_tok_s_range"].str.fullmatch(r"[\d,]+-[\d,]+").all()
    ), table
    for row in table.to_dict("records"):
        assert len(tuning.point_runs(tmp_path, row["candidate"], w, row["concurrency"])) == 2
    assert "SLO limit (" in result.summary()  # every point met the SLO: the limit is "or more"
    saved = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*-c*.json")}
    again = tuning.tune(resolve("h200"), TINY, candidates=same, **common)
    assert len(again.runs) == n_runs
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*-c*.json")} == saved


def test_committed_repeats_render_as_their_median_never_the_luckiest_run(tmp_path):
    """A tuning result with repeats, committed beside the seeds, reaches the Hopper notebooks'
    table as one row per point: the median of its runs, with how many."""

    from tools.tune_pages import recommendation_markdown, tune_rows

    root = copy_tune_results(tmp_path)
    path = root / "h200" / "tune" / "seed-vllm-0.32.0.json"
    doc = json.loads(path.read_text())
    marlin = next(c for c in doc["candidates"] if c["name"] == "nvfp4-marlin")
    first = marlin["points"][0]
    speed = first["tokens_per_s_per_user"]
    marlin["points"] += [
        {**first, "repeat": 1, "tokens_per_s_per_user": 9999.0},  # one lucky run
        {**first, "repeat": 2, "tokens_per_s_per_user": speed},
    ]
    path.write_text(json.dumps(doc))
    rows = tune_rows("h200", root)
    mine = rows[(rows["candidate"] == "nvfp4-marlin") & (rows["file"] == path.name)
                & (rows["workload"] == first["workload"]) & (rows["concurrency"] == first["concurrency"])]  # fmt: skip
    assert len(mine) == 1 and mine.iloc[0]["repeats"] == 3
    assert mine.iloc[0]["tokens_per_s_per_user"] == pytest.approx(speed)
    text = recommendation_markdown("h200", root)
    assert "| 9,999" not in text  # never the figure; at most the top of its runs' range


def _with_repeats(root, name, scale_runs):
    """Give the c=1 point of candidate ``name`` in the committed 0.32.0 seed file more runs:
    its per-user speed times each factor of ``scale_runs`` (the first run stays as recorded)."""
    path = root / "h200" / "tune" / "seed-vllm-0.32.0.json"
    doc = json.loads(path.read_text())
    cand = next(c for c in doc["candidates"] if c["name"] == name)
    first = next(p for p in cand["points"] if p["workload"] == "tune-1k" and p["concurrency"] == 1)
    speed = first["tokens_per_s_per_user"]
    cand["points"] += [
        {**first, "repeat": k + 1, "tokens_per_s_per_user": speed * f}
        for k, f in enumerate(scale_runs)
    ]
    path.write_text(json.dumps(doc))
    return speed


def _latency_rows(text):
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("| latency"))
    return [lines[i]] + [ln for ln in lines[i + 1 : i + 4] if ln.startswith("| |")]


def test_the_rendered_table_keeps_the_recipe_when_a_faster_median_is_within_the_runs_spread(
    tmp_path,
):
    """The Hopper notebooks' table applies the tuning step's rule: a configuration whose
    median is faster but whose runs overlap the recipe's is a tie, and the recipe's command
    stays the recommended row; once its worst run beats the recipe's best it is recommended,
    with the ratio's range over the runs and its exact command."""

    from tools.tune_pages import recommendation_markdown

    root = seeds_only(tmp_path)  # (the committed H200 grid would decide the workload)
    for other in (root / "h200" / "tune").glob("seed-vllm-0.2*.json"):
        other.unlink()  # the 0.32.0 seed alone: the recipe (Humming) against Marlin
    path = root / "h200" / "tune" / "seed-vllm-0.32.0.json"
    doc = json.loads(path.read_text())
    doc["candidates"] = [c for c in doc["candidates"] if c["name"] != "bf16-triton"]
    path.write_text(json.dumps(doc))
    recipe = _with_repeats(root, "nvfp4-humming", [0.97, 1.03])
    _with_repeats(root, "nvfp4-marlin", [1.0, 1.0])
    # Marlin's three runs at 1.06x the recipe's median, its worst run under the recipe's best
    doc = json.loads(path.read_text())
    runs = [p for c in doc["candidates"] if c["name"] == "nvfp4-marlin" for p in c["points"]
            if p["workload"] == "tune-1k" and p["concurrency"] == 1]  # fmt: skip
    for p, f in zip(runs, (1.02, 1.06, 1.10), strict=True):
        p["tokens_per_s_per_user"] = recipe * f
    path.write_text(json.dumps(doc))
    rows = _latency_rows(recommendation_markdown("h200", root))
    assert (
        "**recommended: the recipe's command** | NVFP4, humming MoE | 0.32.0 | 1 | 3 |" in rows[0]
    )
    tie = next(r for r in rows if "tie (within noise)" in r)
    # a tie's ratio carries the range its runs allow, as a recommendation's does
    assert "NVFP4, marlin MoE" in tie and "| 1.06x (0.99-1.13) |" in tie, tie
    text = recommendation_markdown("h200", root)
    assert "the recipe stays" in text and "The recommended command for latency" not in text

    for p, f in zip(runs, (1.04, 1.06, 1.10), strict=True):  # worst run above the recipe's best
        p["tokens_per_s_per_user"] = recipe * f
    path.write_text(json.dumps(doc))
    text = recommendation_markdown("h200", root)
    rows = _latency_rows(text)
    assert "**recommended** | NVFP4, marlin MoE | 0.32.0 | 1 | 3 |" in rows[0]
    assert "| 1.06x (1.01-1.13) |" in rows[0], rows[0]
    assert "recipe's command (reference) | NVFP4, humming MoE" in rows[1]
    assert "worst run above the recipe's best" in text
    block = text.split("The recommended command for latency")[1]
    assert "the recipe's with --moe-backend marlin" in block and "vllm serve" in block


def test_table_labels_tell_the_grid_sequence_limits_apart():
    """The grid measures each kernel at --max-num-seqs 256 and 64: the rows and SLO notes name
    the limit a candidate sets, so two rows never read the same."""
    from tools.tune_pages import _label, recommendation_markdown

    base = {"variant": "bf16", "moe_backend": "triton"}
    assert _label(base) == "BF16, triton MoE"
    assert _label({**base, "spec": {"extra_args": {"--max-num-seqs": 64}}}) == (
        "BF16, triton MoE, 64 sequences"
    )
    assert _label({**base, "spec": {"variant": "bf16"}}) == "BF16, triton MoE"
    text = recommendation_markdown("h200")  # the committed H200 grid, as the notebooks show it
    assert "BF16, triton MoE, 64 sequences" in text and "BF16, triton MoE, 256 sequences" in text


def test_runs_measured_apart_never_replace_the_recipe():
    """Two H200 machines measured the recipe's own command 9-13 % apart (docs/results/h200/
    tune/README.md): a margin between runs of different sessions is a tie until both are
    measured side by side, however clear it looks within each session's spread."""
    dates = lambda *d: pd.DataFrame({"date": list(d)})  # noqa: E731
    together = noise.apart(dates("20261203-111000", "20261203-111500"),
                           dates("20261203-104500"), "fast")  # fmt: skip
    assert together == []
    reasons = noise.apart(dates("20261203-034400", "20261203-034700"),
                          dates("20261203-111000", "20261203-111300"), "fast")  # fmt: skip
    assert reasons == [
        "measured 7.4 h apart (fast: 2026-12-03 03:44; the recipe: 2026-12-03 11:10)"
    ]
    hosts = noise.apart(pd.DataFrame({"host": ["box-b"]}), pd.DataFrame({"host": ["box-a"]}), "f")
    assert hosts == ["on another host (f: box-b; the recipe: box-a)"]
    assert noise.apart(pd.DataFrame({"x": [1]}), pd.DataFrame({"x": [2]}), "f") == []

    beside = noise.verdict([5300, 5250, 5400], [4800, 5100, 4900])
    assert beside.beats and beside.tie is None
    apart = noise.verdict([5300, 5250, 5400], [4800, 5100, 4900], reasons)
    assert not apart.beats and apart.tie == "tie (measured apart)"
    assert apart.text.startswith("tie (measured apart): 1.08x the recipe's median (3 runs each; ")
    assert "measured 7.4 h apart" in apart.text and "only runs side by side decide" in apart.text
    one = noise.verdict([120], [100], reasons)  # one run each: the same rule
    assert not one.beats and one.tie == "tie (measured apart)"
    # within the noise it stays the tie it was: being apart adds nothing to explain
    assert noise.verdict([5300, 5050, 5400], [4800, 5100, 4900], reasons).tie == (
        "tie (within noise)"
    )


def test_the_tuning_summary_ties_a_winner_measured_in_another_session(tmp_path):
    """The tuning step's own choice follows the same rule as the rendered table: a candidate
    three runs above the recipe's best, measured 6 h later, is the tie row; measured beside
    the recipe it is recommended. The runs are vLLM's own JSON (a stand-in point's rate and
    date changed)."""
    cands = tuning.make_candidates(
        resolve("h200"), [{"name": "fast", "extra_args": {"--max-num-seqs": 64}}]
    )
    load = tuning.workloads({**TINY, "concurrencies": [1]})

    def write(name, hour, speeds):
        (tmp_path / name / "tiny").mkdir(parents=True, exist_ok=True)
        for r, speed in enumerate(speeds):
            tag = f"{name}-r{r}" if r else name
            point = {**POINT, "date": f"20261203-{hour:02d}{r:02d}00", "output_throughput": speed}
            (tmp_path / name / "tiny" / f"{tag}-c1.json").write_text(json.dumps(point))
        (tmp_path / name / "candidate.json").write_text(json.dumps({"name": name}))

    write("recipe", 9, [100.0, 104.0, 102.0])
    write("fast", 15, [120.0, 125.0, 122.0])
    apart = collect(tmp_path, resolve("h200"), cands, load, BOUNDS, run=Run("stand_in"))
    rec = apart.recommended("tiny")
    assert rec.candidate == "recipe" and rec.tied_with == "fast"
    assert rec.tie == "tie (measured apart)"
    roles = list(apart.recommendation_table()["role"])
    assert roles == ["recommended", "recipe", "tie (measured apart)"], roles
    assert "note: fast and the recipe were measured 6.0 h apart" in apart.summary()
    write("fast", 9, [120.0, 125.0, 122.0])
    beside = collect(tmp_path, resolve("h200"), cands, load, BOUNDS, run=Run("stand_in"))
    assert beside.recommended("tiny").candidate == "fast" and beside.recommended("tiny").tie is None


def test_the_rendered_goodput_is_each_runs_then_the_median(tmp_path):
    """A point's goodput in the Hopper notebooks' table is the median of its runs' goodput:
    vLLM's request_goodput can come back as text in a tune.json (an object column that a
    median skips), and a share of medians taken from different runs is no run's goodput."""
    from tools.tune_pages import tune_rows

    root = seeds_only(tmp_path)
    path = root / "h200" / "tune" / "seed-vllm-0.32.0.json"
    doc = json.loads(path.read_text())
    cand = next(c for c in doc["candidates"] if c["name"] == "nvfp4-marlin")
    first = next(p for p in cand["points"] if p["workload"] == "tune-1k" and p["concurrency"] == 1)
    rate = first["request_throughput"]
    runs = [(0.5, 1.0), (1.0, 1.2), (0.9, 1.1)]  # (good share, output speed factor) per run
    cand["points"] += [{**first, "repeat": 1}, {**first, "repeat": 2}]
    mine = [p for p in cand["points"] if p["workload"] == "tune-1k" and p["concurrency"] == 1]
    speed = first["output_throughput"]
    for p, (good, f) in zip(mine, runs, strict=True):
        p.update(request_goodput=str(good * rate), request_throughput=rate,
                 output_throughput=speed * f, output_throughput_per_gpu=speed * f)  # fmt: skip
    path.write_text(json.dumps(doc))
    rows = tune_rows("h200", root)
    row = rows[(rows["candidate"] == "nvfp4-marlin") & (rows["workload"] == "tune-1k")
               & (rows["concurrency"] == 1)].iloc[0]  # fmt: skip
    per_run = sorted(good * f * speed for good, f in runs)  # 0.5, 1.2, 0.99 of the speed
    assert row["goodput_tok_s_per_gpu"] == pytest.approx(per_run[1])
    assert (row["goodput_tok_s_per_gpu_min"], row["goodput_tok_s_per_gpu_max"]) == (
        pytest.approx(per_run[0]), pytest.approx(per_run[2]))  # fmt: skip


def test_concurrency_1_candidates_name_their_flags_and_claim_no_slo_limit():
    """The c1 candidates (tools/device/tune_h200.py) differ from the grid's Marlin row by one
    flag each: their table label says it; measured at concurrency 1 alone, no SLO limit was
    searched, so the notes list none of theirs."""
    from tools.tune_pages import _label, slo_limits

    base = {"variant": "nvfp4", "moe_backend": "marlin"}
    full = {"extra_args": {"--compilation-config": {"cudagraph_mode": "FULL"}}}
    assert _label({**base, "spec": full}) == (
        'NVFP4, marlin MoE, --compilation-config {"cudagraph_mode": "FULL"}'
    )
    no_async = {"extra_args": {"--async-scheduling": None, "--no-async-scheduling": True}}
    assert _label({**base, "spec": no_async}) == "NVFP4, marlin MoE, --no-async-scheduling"
    seqs = {"extra_args": {"--max-num-seqs": 64, "--stream-interval": 4}}
    assert _label({**base, "spec": seqs}) == "NVFP4, marlin MoE, 64 sequences, --stream-interval 4"
    files = {"grid-0.32.0/tune.json", "c1-0.32.0-2026-12-03/tune.json"}
    limits = slo_limits(None, files, "tune-1k")
    names = {lim["candidate"] for lim in limits}
    assert "recipe" in names and not any(n.startswith("c1-") for n in names), names


def test_a_concurrency_1_candidate_is_judged_against_its_own_sessions_recipe(tmp_path):
    """The c1 candidates run in later sessions than the grid, each session measuring the
    recipe's concurrency-1 point again as their anchor: the table compares a candidate with
    that anchor (same file, same session), not with the grid's recipe measured on another
    machine. The candidate's runs are the committed c1-marlin's, scaled. Its session and the
    grid's recipe are all the data holds (the other candidates left out), so a clean sweep at 3
    runs each is a win (the screen is this one candidate)."""
    from tools.tune_pages import recommendation_markdown

    root = copy_tune_results(tmp_path, {"c1-0.32.0-2026-12-03", "grid-0.32.0"})
    tune = root / "h200" / "tune"
    path = tune / "c1-0.32.0-2026-12-03" / "tune.json"
    doc = json.loads(path.read_text())
    marlin = next(c for c in doc["candidates"] if c["name"] == "c1-marlin")
    grid = json.loads((tune / "grid-0.32.0" / "tune.json").read_text())
    grid_recipe = next(c for c in grid["candidates"] if c["recipe"])
    grid["candidates"] = [grid_recipe]  # the grid's recipe alone: the anchor not to be used
    (tune / "grid-0.32.0" / "tune.json").write_text(json.dumps(grid))
    anchor = json.loads(json.dumps({**grid_recipe, "points": marlin["points"]}))
    for p in anchor["points"]:  # this session's recipe: slower than the grid's (another day)
        p["tokens_per_s_per_user"] *= 0.8
    for p in marlin["points"]:  # the candidate: the fastest of all, 1.5x its session's recipe
        p["tokens_per_s_per_user"] *= 1.2
    doc["candidates"].insert(0, anchor)
    path.write_text(json.dumps(doc))
    text = recommendation_markdown("h200", root)
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("| latency"))
    assert "**recommended** | NVFP4, marlin MoE | 0.32.0 | 1 | 3 |" in lines[i], lines[i]
    assert "`c1-0.32.0-2026-12-03/tune.json`" in lines[i] and "| 1.50x (1." in lines[i], lines[i]
    assert (
        "recipe's command (reference)" in lines[i + 1]
        and "c1-0.32.0-2026-12-03/tune.json" in lines[i + 1]
    )


def test_a_confirmation_with_more_runs_replaces_the_screen_that_picked_it(tmp_path):
    """FULL_DECODE_ONLY CUDA graphs led the recipe 1.11x in the first c1 screen (3 runs, every
    run above the recipe's) and were measured again beside the recipe with 6 runs each
    (2026-12-03 17:01: 1.09x, ranges overlap, p = 0.066). The table rests on the confirmation,
    not on the luckier screen, and counts the configuration once."""
    from tools.tune_pages import _one_measurement_each, recommendation_markdown

    keep = {"c1-0.32.0-2026-12-03-1420", "c1-0.32.0-2026-12-03-1701", "grid-0.32.0"}
    root = copy_tune_results(tmp_path, keep)
    tune = root / "h200" / "tune"
    for name in keep:  # each session's recipe and FULL_DECODE_ONLY alone
        path = tune / name / "tune.json"
        doc = json.loads(path.read_text())
        doc["candidates"] = [
            c for c in doc["candidates"] if c["recipe"] or c["name"] == "c1-cg-full-decode"
        ]
        path.write_text(json.dumps(doc))
    lines = recommendation_markdown("h200", root).splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("| latency"))
    row = next(ln for ln in lines[i : i + 3] if "FULL_DECODE_ONLY" in ln)
    assert "tie (within noise)" in row and "| 1 | 6 |" in row, row
    assert "`c1-0.32.0-2026-12-03-1701/tune.json`" in row, row
    note = next(ln for ln in lines if ln.startswith("- latency:"))
    assert "ranges overlap (6 runs each" in note and "best of" not in note, note

    pts = pd.DataFrame(
        [
            {"candidate": "a", "vllm_version": "0.32.0", "recipe": False, "repeats": 6,
             "date": "20261203-1701", "file": "s2"},
            {"candidate": "a", "vllm_version": "0.32.0", "recipe": False, "repeats": 3,
             "date": "20261204-0900", "file": "s3"},  # later, but fewer runs
            {"candidate": "a", "vllm_version": "0.33.0", "recipe": False, "repeats": 3,
             "date": "20261203-1420", "file": "s1"},  # another release: its own configuration
            {"candidate": "recipe", "vllm_version": "0.32.0", "recipe": True, "repeats": 3,
             "date": "20261203-1420", "file": "s1"},
            {"candidate": "recipe", "vllm_version": "0.32.0", "recipe": True, "repeats": 6,
             "date": "20261203-1701", "file": "s2"},
            {"candidate": "b", "vllm_version": "0.32.0", "recipe": False, "repeats": 3,
             "date": "20261203-0900", "file": "s0"},
            {"candidate": "b", "vllm_version": "0.32.0", "recipe": False, "repeats": 3,
             "date": None, "file": "s4"},  # undated: the oldest, not the latest
        ]
    )  # fmt: skip
    kept = _one_measurement_each(pts)
    assert list(kept.index) == [0, 2, 3, 4, 5]  # the recipe keeps every session's anchor
    assert noise.screened_count(kept, ("candidate", "vllm_version")) == 3


def test_a_candidate_is_ranked_by_its_lead_over_its_own_sessions_recipe(tmp_path):
    """The recipe's own c1 command measured 256 tok/s per user at 17:01 and 287 at 18:35 on
    2026-12-03: a raw score ranks sessions. A candidate that beats its session's recipe beyond
    the noise is recommended even when another session's recipe measured faster than it; the
    reference row is its own session's recipe. The runs are the committed ones, scaled."""
    from tools.tune_pages import recommendation_markdown

    keep = {"c1-0.32.0-2026-12-03-1701", "c1-0.32.0-2026-12-03-1835", "grid-0.32.0"}
    root = copy_tune_results(tmp_path, keep)
    tune = root / "h200" / "tune"

    def scale(session, name, factor):
        path = tune / session / "tune.json"
        doc = json.loads(path.read_text())
        cand = next(c for c in doc["candidates"] if c["name"] == name)
        for p in cand["points"]:
            p["tokens_per_s_per_user"] *= factor
        path.write_text(json.dumps(doc))

    scale("c1-0.32.0-2026-12-03-1701", "c1-cg-full-decode", 1.12)  # every run above its recipe's
    scale("c1-0.32.0-2026-12-03-1835", "recipe", 1.5)  # a fast session: the highest raw score
    lines = recommendation_markdown("h200", root).splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("| latency"))
    assert "**recommended** |" in lines[i] and "FULL_DECODE_ONLY" in lines[i], lines[i]
    assert "`c1-0.32.0-2026-12-03-1701/tune.json`" in lines[i] and "| 1.22x (1.01-" in lines[i]
    assert "recipe's command (reference)" in lines[i + 1], lines[i + 1]
    assert "`c1-0.32.0-2026-12-03-1701/tune.json`" in lines[i + 1], lines[i + 1]

    scale("c1-0.32.0-2026-12-03-1701", "c1-cg-full-decode", 1 / 1.12)  # as measured: a tie
    lines = recommendation_markdown("h200", root).splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("| latency"))
    assert "**recommended: the recipe's command**" in lines[i], lines[i]


def test_without_a_recipe_point_no_candidate_is_recommended_and_the_summary_says_why(
    tmp_path, cands
):
    """The recipe's server died before its first point: 'fast' has nothing to be set against,
    so it is not recommended (it was, with no reference)."""
    for c in (1, 2):
        for r in range(3):
            _write(tmp_path, "fast", c, 300.0 * c, repeat=r)
    result = _result(tmp_path, cands, repeats=3)
    assert result.recommended() is None
    assert result.summary().startswith(
        "tiny: no recommendation: the recipe's command (status: not run)"
    )
    assert "remeasure=['recipe']" in result.summary()


def test_a_candidate_that_meets_the_slo_where_the_recipe_misses_it_is_set_against_that_point(
    tmp_path, cands
):
    """The H100 confirmation of 2026-12-06 at 16 agent sessions: the recipe served the load
    but missed the SLO in its median, the candidate met it with every run faster. The recipe's
    point at that concurrency is the reference (within the SLO it delivers at most that), so
    the candidate is recommended, and the words say the recipe missed; within the noise of
    that point, nothing is recommended (a recipe over the SLO cannot stay)."""
    for c in (1, 2):
        for r in range(3):
            _write(tmp_path, "recipe", c, 100.0 * c + r, repeat=r, e2el=1_500.0)
            _write(tmp_path, "fast", c, 170.0 * c + r, repeat=r)
    result = _result(tmp_path, cands, repeats=3)
    rec = result.recommended()
    assert (rec.candidate, rec.concurrency, rec.tied_with) == ("fast", 2, None)
    assert rec.reference_over_slo == "p99 E2EL 1,500 ms > 1,000 ms"
    assert "1.70x the recipe's median" in rec.verdict  # against its output tok/s there
    assert rec.verdict.endswith(
        "; the recipe misses the SLO there (p99 E2EL 1,500 ms > 1,000 ms): set against its "
        "output tok/s there, more than it delivers within the SLO if its throughput rises with "
        "load, so the ratio is a lower bound"
    )
    table = result.recommendation_table().set_index("role")
    assert table.loc["recipe", "candidate"] == "recipe"
    assert table.loc["recipe", "concurrency"] == 2
    assert "no recommendation" not in result.summary()

    for c in (1, 2):  # the same speed as the recipe's: no verdict, and the summary says why
        for r in range(3):
            _write(tmp_path, "fast", c, 100.0 * c + 1 - r, repeat=r)
    result = _result(tmp_path, cands, repeats=3)
    assert result.recommended() is None
    table = result.recommendation_table()
    assert list(table["role"]) == ["no recommendation"]  # not "none meets the SLO": fast does
    assert table["misses"].iloc[0].startswith("the recipe's command (status: ok) misses")
    assert (
        "tiny: no recommendation: the recipe's command (status: ok) misses p99 TTFT <= 60,000 "
        "ms, p99 E2EL <= 1,000 ms at every concurrency measured here (c=1: p99 E2EL 1,500 ms > "
        "1,000 ms; c=2: p99 E2EL 1,500 ms > 1,000 ms), and no candidate that meets it leads"
    ) in result.summary()


def test_when_nothing_meets_the_slo_the_closest_point_is_named_not_a_comparison(tmp_path, cands):
    """The recipe and the candidate both miss the SLO at every concurrency: no comparison was
    made, so the table and the summary name the point that came nearest."""
    for c in (1, 2):
        for r in range(3):
            _write(tmp_path, "recipe", c, 100.0 * c + r, repeat=r, e2el=1_500.0)
            _write(tmp_path, "fast", c, 170.0 * c + r, repeat=r, e2el=1_200.0)
    result = _result(tmp_path, cands, repeats=3)
    assert result.recommended() is None
    table = result.recommendation_table()
    assert list(table["role"]) == ["none meets the SLO"] and table["candidate"].iloc[0] == "fast"
    assert "tiny: no point meets" in result.summary() and "closest: fast" in result.summary()
    assert "no recommendation" not in result.summary()


def test_a_drafting_candidate_s_recommendation_names_its_acceptance_and_break_even(tmp_path):
    """A weightless drafting candidate's record carries its synthetic acceptance; the
    recommendation states it, the break-even acceptance length at its point (its measured L x
    the recipe's speed / its own) and how to measure one's own L."""
    mtp = tuning.make_candidates(
        resolve("h200"), [{"name": "mtp-k7", "speculative": "mtp", "speculative_tokens": 7}]
    )
    caption = "synthetic acceptance 3.687 at K=7 (ai-dynamo/dynamo ...): speed at that acceptance, text not the model's"
    (tmp_path / "mtp-k7").mkdir()
    (tmp_path / "mtp-k7" / "candidate.json").write_text(
        json.dumps({"name": "mtp-k7", "acceptance": caption})
    )
    for c in (1, 2):
        for r in range(3):
            _write(tmp_path, "recipe", c, 200.0 * c + r, repeat=r)
            _write(tmp_path, "mtp-k7", c, 400.0 * c + r, repeat=r)
    for p in (tmp_path / "mtp-k7" / "tiny").glob("*.json"):  # vLLM's measured acceptance length
        p.write_text(
            json.dumps({**json.loads(p.read_text()), "spec_decode_acceptance_length": 3.6})
        )
    rec = _result(tmp_path, mtp, repeats=3).recommended()
    assert rec.candidate == "mtp-k7"
    assert rec.drafting.startswith(
        f"drafting at {caption}; it beats the recipe here only above L = 1.80"
    )
    assert "vllm:spec_decode_num_drafts_total" in "\n".join(rec.lines())


def test_a_probe_beyond_the_pick_is_named_with_how_to_measure_it(tmp_path, cands):
    """'fast' met the SLO at concurrency 10, its limit's bisection probe, with more goodput than
    the recommended grid point: the summary ignored it; now a note names it, its one run, and
    the grid that repeats it. A probe below the pick says nothing."""
    w = {**TINY, "concurrencies": [1, 4, 16]}
    for name in ("recipe", "fast"):
        for r in range(3):
            _write(tmp_path, name, 1, 100.0 + r, repeat=r)
            _write(tmp_path, name, 4, 400.0 + r, repeat=r)
        _write(tmp_path, name, 16, 900.0, e2el=5000.0)  # misses the 1 s E2EL bound
    _write(tmp_path, "recipe", 10, 300.0, search=True)  # met, below the pick: no note
    _write(tmp_path, "fast", 10, 1600.0, search=True)
    load = tuning.workloads(w)
    result = collect(tmp_path, resolve("h200"), cands, load, BOUNDS, run=Run("stand_in"),
                     gpu_hour_usd=3.6, repeats=3)  # fmt: skip
    rec = result.recommended()
    assert rec.concurrency == 4
    notes = [ln for ln in result.summary().splitlines() if "bisection probe" in ln]
    assert len(notes) == 1, result.summary()
    assert notes[0].startswith(
        "  note: fast met the SLO at concurrency 10 (its SLO limit, a bisection probe of one run) with "
    )
    assert notes[0].endswith(
        "one run decides nothing: measure it with repeats, tune(..., concurrencies=[1, 4, 10, 16])."
    )
