"""The tuning step: the SLO filter, goodput and cost, the choice, the candidates; on the real
CPU server, a failed candidate (recorded, skipped, nothing left running), resume after an
interrupt, and the tuning notebook end to end on the stand-in."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import time

import pandas as pd
import pytest

from helpers.bench import sweep as bench_sweep
from helpers.config.load import load_registry
from helpers.config.resolve import resolve
from helpers.config.run import Run
from helpers.errors import BenchError, RecipeError
from helpers.paths import REPO_ROOT
from helpers.server.vllm_server import VLLMServer
from lab.tune import slo as slos
from lab.tune import tune as tuning
from tests.support.fake_vllm import make_fake_server
from tests.support.notebook_checks import assert_clean_outputs, real_out_notebooks
from tests.support.proctools import group_left
from tests.support.tune_results import copy_tune_results, seeds_only
from tools import notebook_run

LOGS = REPO_ROOT / "tests" / "data" / "logs"
NOTEBOOK = REPO_ROOT / "notebooks" / "tuning.ipynb"
#: A workload the stand-in serves in a second or two a point.
TINY = {"name": "tiny", "input_len": 16, "output_len": 8, "concurrencies": [1, 2]}

#: The release the stand-in's default grid offers beside the target's (skipped here: not installed).
OTHER_RELEASE = next(
    str(v)
    for v in load_registry().model.offered_vllm_versions
    if str(v) != resolve("h200").vllm_version
)


def _point(candidate, c, tput, ttft, tpot, *, goodput=None, rate=1.0, recipe=False, gpus=1):
    return {
        "candidate": candidate, "workload": "w", "concurrency": c, "recipe": recipe,
        "gpu_count": gpus, "output_throughput": tput * gpus, "output_throughput_per_gpu": tput,
        "tokens_per_s_per_user": 1000.0 / tpot, "p99_ttft_ms": ttft, "p50_tpot_ms": tpot,
        "request_throughput": rate, "request_goodput": goodput,
    }  # fmt: skip


# ------------------------------------------------------------------------------ the SLO


def test_the_slo_filter_reads_each_bound_at_its_percentile():
    slo = slos.SLO(tpot_ms=20, ttft_ms=2000)
    assert slo.describe() == "p99 TTFT <= 2,000 ms, p50 TPOT <= 20 ms"
    assert slo.goodput_args() == {"ttft": 2000.0, "tpot": 20.0}  # vLLM's --goodput, per request
    assert slo.meets({"p99_ttft_ms": 1999.0, "p50_tpot_ms": 20.0})
    assert slo.violations({"p99_ttft_ms": 2561.0, "p50_tpot_ms": 9.0}) == [
        "p99 TTFT 2,561 ms > 2,000 ms"
    ]
    # the percentile is the SLO's: a p90 bound reads p90, not p99; a missing figure is a miss
    p90 = slos.SLO(ttft_ms=500, ttft_percentile="p90")
    assert p90.meets({"p90_ttft_ms": 400.0, "p99_ttft_ms": 900.0})
    assert p90.violations({"p99_ttft_ms": 100.0}) == ["p90 TTFT not measured"]
    df = slos.with_slo(
        pd.DataFrame([_point("a", 1, 200, 150, 4), _point("a", 256, 5000, 3600, 36)]), slo
    )
    assert list(df["meets_slo"]) == [True, False]
    assert df["slo_violations"][1] == "p99 TTFT 3,600 ms > 2,000 ms; p50 TPOT 36 ms > 20 ms"


@pytest.mark.parametrize(
    "value, named",
    [({"tpot": 20}, "tpot: Extra inputs"), ({"tpot_ms": -1}, "greater than 0"), ({}, "at least one"),
     ({"ttft_ms": 1, "ttft_percentile": "p95"}, "ttft_percentile"), ("fast", "pass a mapping")],
)  # fmt: skip
def test_a_bad_slo_is_one_sentence_naming_the_fields(value, named):
    with pytest.raises(BenchError, match=named) as err:
        slos.SLO.coerce(value)
    assert "tpot_ms" in str(err.value) and "Traceback" not in str(err.value)
    assert slos.SLO.coerce(None) == slos.DEFAULT_SLO


def test_goodput_and_cost_per_million_tokens():
    # vLLM's goodput: 3 of 4 requests met every bound -> 3/4 of the output tokens are good
    df = slos.with_goodput(pd.DataFrame([_point("a", 4, 1000, 100, 5, goodput=0.75, gpus=2)]))
    assert df["good_fraction"][0] == pytest.approx(0.75)
    assert df["goodput_tok_s"][0] == pytest.approx(1500.0)  # of 2,000 tok/s on 2 GPUs
    assert df["goodput_tok_s_per_gpu"][0] == pytest.approx(750.0)
    # $3.60 per GPU hour, 1,000 output tok/s on one GPU: 3.6 M tokens an hour -> $1.00 per M
    assert slos.cost_per_million(1000.0, 3.6, 1) == pytest.approx(1.0)
    assert slos.cost_per_million(1000.0, 3.6, 2) == pytest.approx(2.0)
    assert slos.cost_per_million(None, 3.6) is None and slos.cost_per_million(0.0, 3.6) is None
    priced = slos.with_cost(df, 3.6)
    assert priced["cost_per_m_output_tokens_usd"][0] == pytest.approx(3.6 * 2 / (2000 * 3600) * 1e6)
    assert priced["cost_per_m_good_tokens_usd"][0] == pytest.approx(3.6 * 2 / (1500 * 3600) * 1e6)
    with pytest.raises(BenchError, match="cannot be negative"):
        slos.cost_per_million(1000.0, -1.0)


def test_the_choice_is_the_most_goodput_per_gpu_among_points_that_meet_the_slo():
    slo = slos.SLO(tpot_ms=20, ttft_ms=2000)
    pts = slos.with_goodput(pd.DataFrame([
        _point("recipe", 1, 212, 145, 4.2, goodput=0.8, rate=0.8, recipe=True),
        _point("recipe", 64, 4702, 1400, 12, goodput=17, rate=18.4, recipe=True),
        _point("bf16", 64, 5643, 1100, 10, goodput=20, rate=22, recipe=False),
        _point("bf16", 256, 5604, 3900, 40, goodput=1, rate=22, recipe=False),  # most tok/s: misses
        _point("marlin", 64, 5900, 1500, 11, goodput=10, rate=23, recipe=False),  # half its requests late
    ]))  # fmt: skip
    best = slos.choose(pts, slo)
    assert (best["candidate"], best["concurrency"]) == ("bf16", 64)
    assert best["score"] == pytest.approx(5643 * 20 / 22)
    # by throughput alone marlin wins; without an SLO the c256 point would
    assert slos.choose(pts, slo, "throughput")["candidate"] == "marlin"
    assert slos.choose(pts, None, "throughput")["concurrency"] == 64
    assert slos.choose(pts, slo, "per_user")["concurrency"] == 1
    # nothing meets a bound no point reaches
    assert slos.choose(pts, slos.SLO(ttft_ms=10)) is None
    with pytest.raises(BenchError, match="objective"):
        slos.choose(pts, slo, "cheapest")
    # without --goodput (committed results), a point's own throughput ranks it
    no_goodput = pts.drop(columns=["goodput_tok_s_per_gpu"])
    assert slos.choose(no_goodput, slo)["candidate"] == "marlin"


# ------------------------------------------------------------------------------ candidates


def test_candidates_are_drawn_from_the_registry_around_the_target():
    base = resolve("h200")
    cands = tuning.make_candidates(base, [
        {"name": "marlin", "moe_backend": "marlin"},
        {"name": "bf16", "variant": "bf16"},
        {"name": "seqs-64", "extra_args": {"--max-num-seqs": 64}},
        {"name": "v028", "vllm_version": "0.28.0"},
    ])  # fmt: skip
    by = {c.name: c for c in cands}
    assert list(by) == ["recipe", "marlin", "bf16", "seqs-64", "v028"] and by["recipe"].recipe
    assert by["marlin"].config.args["--moe-backend"] == "marlin"
    assert tuning.changes(by["marlin"].config, base) == "--moe-backend marlin"
    # BF16 on Hopper: the registry's Triton MoE and none of the NVFP4 flags
    assert by["bf16"].config.args["--moe-backend"] == "triton"
    assert "--quantization" not in by["bf16"].config.args
    assert tuning.changes(by["bf16"].config, base).startswith("variant bf16; ")
    assert tuning.changes(by["seqs-64"].config, base) == "--max-num-seqs 64"
    assert by["v028"].config.docker_image == "vllm/vllm-openai:v0.28.0"
    # a candidate resolved again keeps the flags the target got from extra_args
    long = resolve("h200", extra_args={"--max-model-len": 8192})
    assert tuning.candidate(long, "m", moe_backend="marlin").config.args["--max-model-len"] == 8192
    # the stand-in plays the scheduler flags, and standin_args instead when given
    seqs = tuning.candidate(base, "s2", extra_args={"--max-num-seqs": 2})
    own = tuning.candidate(base, "k", moe_backend="marlin", standin_args={})
    assert seqs.served("stand_in").args["--max-num-seqs"] == 2
    assert own.served("stand_in").args["--max-num-seqs"] == 4  # the cpu target's own


def test_a_drafting_candidate_sets_its_draft_tokens_and_drafts_at_a_sourced_acceptance_weightless(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path))
    base = resolve("h200")
    mtp7 = tuning.candidate(base, "mtp-k7", speculative="mtp", speculative_tokens=7)
    assert mtp7.config.speculative_config["num_speculative_tokens"] == 7
    assert mtp7.spec["speculative_tokens"] == 7
    # the target's command keeps real acceptance; the weightless server drafts at a stated one
    assert "rejection_sample_method" not in mtp7.config.speculative_config
    served = mtp7.served("weightless").speculative_config
    assert served["rejection_sample_method"] == "synthetic"
    assert served["synthetic_acceptance_length"] == 3.687  # the registry's, published at K=7
    assert tuning.candidate(base, "mtp-k3", speculative="mtp").served(
        "weightless"
    ).speculative_config["synthetic_acceptance_length"] == pytest.approx(
        2.77, abs=0.01
    )  # derived for K=3, said so in its caption
    with pytest.raises(BenchError, match="needs a drafting mode"):
        tuning.candidate(base, "k", speculative_tokens=3)


def test_a_drafting_candidate_drafts_with_ngram_on_the_stand_in_and_says_so():
    """The CPU build drafts with n-gram only: a stand-in tuning run plays an MTP or DSpark
    candidate with n-gram drafting (it served the recipe's command, unlabelled, and ranked it
    as MTP), and its row's changes say so."""
    base = resolve("h200")
    mtp = tuning.candidate(base, "mtp-k3", speculative="mtp", speculative_tokens=3)
    assert mtp.standin_drafting == "ngram (for mtp)"
    served = mtp.served("stand_in")
    assert served.speculative == "ngram" and served.speculative_config["method"] == "ngram"
    assert "--no-enable-prefix-caching" in served.args  # the CPU build's hybrid cannot cache
    plain = tuning.candidate(base, "b", extra_args={"--max-num-seqs": 2})
    assert plain.standin_drafting is None and plain.served("stand_in").speculative == "none"
    # a drafter given as a bare flag would launch it on the stand-in: refused, naming the way
    for spec in ({"method": "mtp", "num_speculative_tokens": 3}, '{"method": "dspark"}'):
        with pytest.raises(
            BenchError, match=r"speculative='(mtp|dspark)' \(and speculative_tokens"
        ):
            tuning.candidate(base, "mine", extra_args={"--speculative-config": spec})
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    own = tuning.candidate(base, "ng", extra_args={"--speculative-config": ngram})
    assert own.served("stand_in").args["--speculative-config"] == ngram  # the CPU build drafts it


def test_a_drafting_recommendation_states_its_acceptance_the_break_even_and_how_to_measure_yours():
    words = tuning.drafting_words(
        "synthetic acceptance 3.687 at K=7 (ai-dynamo/dynamo ...)", 3.69, 455.0, 220.0
    )
    assert words.startswith("drafting at synthetic acceptance 3.687 at K=7 (ai-dynamo/dynamo")
    assert "only above L = 1.78" in words  # 3.69 x 220 / 455
    assert (
        "vllm:spec_decode_num_accepted_tokens_total" in words
        and "speculative_decoding.ipynb" in words
    )


@pytest.mark.parametrize(
    "specs, named",
    [([{"name": "recipe"}], "two candidates are named"), ([{"moe_backend": "marlin"}], "with a 'name'"),
     ([{"name": "x", "moe": "marlin"}], "unknown key"), ([{"name": "a b"}], "plain name"),
     ([{"name": "mns8", "extra_args": ["--max-num-seqs", "8"]}], r"extra_args .* is a list; it takes a dict")],
)  # fmt: skip
def test_a_bad_candidate_is_named_before_anything_runs(specs, named):
    with pytest.raises(BenchError, match=named):
        tuning.make_candidates(resolve("h200"), specs)


def test_a_candidate_the_registry_refuses_names_the_rule():
    with pytest.raises(RecipeError, match="published for nvfp4 only"):
        tuning.candidate(resolve("h200"), "x", variant="bf16", speculative="dspark")


def test_a_candidates_env_is_exported_by_its_command_and_kept_in_its_spec():
    """``env`` (e.g. vLLM's uniform routing simulation): the candidate's server starts with it,
    after the registry resolves the candidate anew (a BF16 candidate drops the base's env), and
    its spec says so; the weightless launch keeps it."""
    from tools.weightless_routing import UNIFORM_ROUTING_ENV, uniform_routing

    base = resolve("h200")
    bf16 = tuning.candidate(base, "bf16-u", variant="bf16", env=UNIFORM_ROUTING_ENV)
    assert bf16.config.env["VLLM_MOE_ROUTING_SIMULATION_STRATEGY"] == "uniform_random"
    assert uniform_routing(bf16.config.shell_command()) and bf16.spec["env"] == UNIFORM_ROUTING_ENV
    plain = tuning.candidate(base, "bf16", variant="bf16")
    assert not uniform_routing(plain.config.shell_command()) and "env" not in plain.spec
    flags = tuning.candidate(base, "seqs", extra_args={"--max-num-seqs": 64}, env={"A": "1"})
    assert flags.config.env["A"] == "1" and flags.config.args["--max-num-seqs"] == 64
    # the command a results page renders for such a row is the user's: no measurement env
    from tools.tune_pages import command_for

    shown, said = command_for("h200", {"candidate": "bf16-u", "spec": bf16.spec})
    assert not uniform_routing(shown) and said.startswith("the BF16 variant's command")


def test_the_default_grids():
    h200 = tuning.default_candidates(resolve("h200"))
    assert [s["name"] for s in h200] == ["marlin", "bf16", "max-num-seqs-64"]
    stand = tuning.default_candidates(resolve("h200"), run=Run("stand_in"))
    other = OTHER_RELEASE  # the first offered release that is not the target's (registry order)
    assert [s["name"] for s in stand] == ["max-num-seqs-2", f"vllm-{other}"]
    l4 = [s["name"] for s in tuning.default_candidates(resolve("l4"))]
    assert "bf16" not in l4  # 60 GB of BF16 weights do not fit an L4 (resolve's rule)


def test_workloads_take_names_shapes_and_lists():
    w = tuning.workloads(["tune-1k", {"input_len": 64, "output_len": 8}])
    assert (w[0].input_len, w[0].output_len, w[0].concurrencies) == (1024, 256, (1, 16, 64, 256))
    assert w[1].name == "64in-8out" and w[1].concurrencies == (1,)
    assert tuning.workloads("tune-1k", run=Run("stand_in"))[
        0
    ].stand_in  # a name is scaled for the CPU
    with pytest.raises(BenchError, match="Unknown scenario"):
        tuning.workloads("chatty")
    with pytest.raises(BenchError, match="each with a name of its own"):
        tuning.workloads(["chat", "chat"])
    # a misspelled key is refused, naming the keys a workload takes (it was ignored)
    with pytest.raises(
        BenchError, match=r"unknown key\(s\) \['concurency'\]; a workload mapping takes name"
    ):
        tuning.workloads({"input_len": 64, "output_len": 8, "concurency": [16]})


@pytest.mark.parametrize("price", [-1.0, "3", float("nan"), True])
def test_a_bad_gpu_price_is_refused_before_any_candidate_runs(price, tmp_path):
    with pytest.raises(BenchError, match="gpu_hour_usd=.*checked before anything runs"):
        tuning.tune(resolve("h200"), TINY, mode="stand_in", gpu_hour_usd=price, out_dir=tmp_path,
                    progress=False)  # fmt: skip
    assert not any(tmp_path.iterdir())  # nothing launched, nothing written


def test_a_gpu_run_on_a_machine_without_a_gpu_stops_before_anything_is_fetched_or_launched(
    tmp_path,
):
    """tuning.ipynb with stand_in=False on a CPU machine launched four doomed servers and
    exited 0; now the first candidate to launch stops the run with check_machine's refusal."""
    from helpers.errors import HardwareError
    from helpers.machine.gpus import detect_gpus

    if detect_gpus().gpus:
        pytest.skip("this machine has a GPU: the refusal is for one without")
    launched: list = []
    with pytest.raises(HardwareError) as e:
        tuning.tune(resolve("h200"), TINY, mode="weightless", out_dir=tmp_path, progress=False,
                    server_factory=launched.append)  # fmt: skip
    assert re.search(
        r"No NVIDIA GPU found .*run the notebook with stand_in=True.* Tuning launched nothing\. "
        r"To measure GPU servers that run elsewhere, pass servers=\{candidate name: URL\}",
        str(e.value),
    )
    assert launched == [] and not list(tmp_path.glob("*/failures.json"))


@pytest.mark.parametrize("given", ["out/tune/mine", "tune/mine"])
def test_a_relative_out_dir_is_under_the_cookbooks_out_wherever_the_run_starts(
    given, tmp_path, monkeypatch
):
    """A notebook runs in notebooks/: out_dir="out/tune/mine" landed in notebooks/out/tune/mine
    while the output said out/tune/mine. Now it is <out>/tune/mine, and the result says so."""
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "out"))
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    result = tuning.tune(resolve("h200"), TINY, mode="stand_in", only=[], out_dir=given,
                         progress=False)  # fmt: skip
    assert result.folder == tmp_path / "out" / "tune" / "mine" and result.folder.is_absolute()
    assert (tmp_path / "out" / "tune" / "mine" / "tune.json").is_file()
    assert (
        not (tmp_path / "notebooks" / "out").exists()
        and not (tmp_path / "notebooks" / "tune").exists()
    )
    assert tuning.run_folder(tmp_path / "abs", "h200") == tmp_path / "abs"


# ------------------------------------------------------------------------------ real server


def _measured(result: tuning.TuneResult) -> list[tuple[str, int]]:
    return sorted(zip(result.points["candidate"], result.points["concurrency"], strict=True))


@pytest.mark.server
def test_an_attached_server_of_another_release_is_refused_for_its_candidate(
    standin_server, tmp_path
):
    """servers={"vllm-0.33.0": URL} on a 0.32.0 server: refused by its /version, nothing saved."""
    base = resolve("h200")
    result = tuning.tune(
        base, TINY, {"ttft_ms": 5000, "e2el_ms": 20000}, [{"name": "v033", "vllm_version": "0.33.0"}],
        mode="stand_in", servers={"v033": standin_server.url}, only=["v033"], out_dir=tmp_path,
        num_prompts=4, gpu_hour_usd=1.0, progress=False, repeats=1, include_recipe=False,
    )  # fmt: skip
    row = result.candidates.set_index("candidate").loc["v033"]
    assert row["status"] != "ok" and "runs vLLM 0.32.0 (its /version)" in str(row["reason"])
    assert result.points.empty or "v033" not in set(result.points["candidate"])


@pytest.mark.server
def test_a_weightless_drafting_candidate_measured_attached_names_its_synthetic_acceptance(
    prefix_server, tmp_path
):
    """A weightless run whose drafting candidate is measured on a server started for it (the
    co-tenant H200 session: servers={name: URL}): its record and table name the acceptance
    length and source its weightless command drafts at, as a launched one does. (Any real
    vLLM 0.32.0 server stands in for the attached one: the least busy shared server.)"""
    base = resolve("h200")
    result = tuning.tune(
        base, {**TINY, "concurrencies": [1]}, {"ttft_ms": 5000, "e2el_ms": 20000},
        [{"name": "mtp-k7", "speculative": "mtp", "speculative_tokens": 7}],
        mode="weightless", servers={"mtp-k7": prefix_server.url}, only=["mtp-k7"],
        out_dir=tmp_path, num_prompts=2, progress=False, repeats=1, include_recipe=False,
    )  # fmt: skip
    record = json.loads((tmp_path / "mtp-k7" / "candidate.json").read_text())
    assert record["served"] == f"attached: {prefix_server.url}"
    assert record["acceptance"].startswith("synthetic acceptance 3.687 at K=7 (ai-dynamo/dynamo")
    assert record["acceptance"].endswith("speed at that acceptance, text not the model's")
    assert not result.points.empty
    # the saved form keeps the acceptance it drafted at, and each point's counters
    saved = json.loads((tmp_path / "tune.json").read_text())["candidates"]
    assert [c["acceptance"] for c in saved] == [record["acceptance"]]
    point = saved[0]["points"][0]
    assert {"spec_decode_acceptance_length", "prefix_cache_hit_rate"} <= set(point)
    assert 0 <= point["prefix_cache_hit_rate"] <= 1  # vLLM's counters, read around the point
    rows = tuning.load_tune_rows(tmp_path / "tune.json")
    assert set(rows["acceptance"]) == {record["acceptance"]}


@pytest.mark.server
def test_a_run_interrupted_mid_sweep_resumes_where_it_stopped(
    standin_server, tmp_path, monkeypatch
):
    """An interrupt after the first point leaves that point saved and the session server
    running; the second run measures only the missing point, the third nothing at all."""
    base = resolve("h200")
    real = bench_sweep.run_point
    calls: list[int] = []

    def interrupted(*args, concurrency, **kwargs):
        calls.append(concurrency)
        if concurrency == 2:
            raise KeyboardInterrupt  # Jupyter's stop button, mid-sweep
        return real(*args, concurrency=concurrency, **kwargs)

    common = dict(mode="stand_in", servers={"recipe": standin_server.url}, out_dir=tmp_path,
                  num_prompts=4, slo={"ttft_ms": 5000, "e2el_ms": 20000}, gpu_hour_usd=1.0,
                  progress=False, repeats=1)  # fmt: skip
    monkeypatch.setattr(bench_sweep, "run_point", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tuning.tune(base, TINY, **common)
    w = tuning.workloads(TINY)[0]
    first, second = (tuning.point_path(tmp_path, "recipe", w, c) for c in (1, 2))
    assert tuning.point_done(first) and not second.exists() and calls == [1, 2]
    assert standin_server.is_running()
    stamp = first.stat().st_mtime_ns

    calls.clear()
    monkeypatch.setattr(
        bench_sweep,
        "run_point",
        lambda *a, concurrency, **k: (
            calls.append(concurrency) or real(*a, concurrency=concurrency, **k)
        ),
    )
    result = tuning.tune(base, TINY, **common)
    assert calls == [2], "the saved point ran again"
    assert first.stat().st_mtime_ns == stamp
    assert _measured(result) == [("recipe", 1), ("recipe", 2)]
    assert set(result.candidates["status"]) == {"ok"}
    calls.clear()
    again = tuning.tune(base, TINY, **common)
    assert calls == [] and _measured(again) == _measured(result)
    # other prompts per point are another measurement: refused, never the saved points reused
    with pytest.raises(BenchError, match=r"other num_prompts \(saved: \{'num_prompts': \{'1': 4"):
        tuning.tune(base, TINY, **{**common, "num_prompts": 8})
    # a server named for a candidate whose points are all saved: said not to be contacted
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        tuning.tune(base, TINY, **{**common, "progress": True})
    assert (
        f"nothing to run (saved runs are kept: another out_dir, or remeasure=[...], measures anew); the server at {standin_server.url} was not contacted"
        in said.getvalue()
    )
    # vLLM's goodput came with each point (--goodput from the SLO), and a price
    pts = again.points
    assert (
        pts["good_fraction"].between(0, 1).all() and pts["cost_per_m_output_tokens_usd"].gt(0).all()
    )
    log = first.with_suffix(".log").read_text().splitlines()[0]
    assert "--goodput ttft:5000 e2el:20000" in log
    # the saved form reads back as the committed results do
    rows = tuning.load_tune_rows(tmp_path / "tune.json")
    assert sorted(rows["concurrency"]) == [1, 2] and set(rows["candidate"]) == {"recipe"}
    # a saved candidate measured with another command is not mixed into this one
    with pytest.raises(BenchError, match="other command"):
        tuning.tune(resolve("h200", extra_args={"--max-num-seqs": 128}), TINY, **common)


@pytest.mark.server
def test_a_candidate_that_fails_is_recorded_with_its_diagnosis_and_skipped(
    standin_server, standin_model, tmp_path
):
    """Two candidates fail: one in vLLM's own start-up (the server replays what vLLM 0.32.0
    printed for --max-model-len above the model's: tests/support/record_logs.py), one refused by vLLM's
    parser before any process exists (a misspelled flag). Both are recorded with what to fix and
    skipped, nothing of them is left running, the recipe is still measured, and the next run
    does not launch them again (unless retry_failed)."""
    launched: list[VLLMServer] = []

    def factory(cfg):
        if "--max-model-len" in cfg.extra_flags:  # vLLM itself refuses this one at start-up
            srv = make_fake_server("--replay", str(LOGS / "max_model_len_too_long.log"),
                                   model=str(cfg.model), progress=False)  # fmt: skip
        else:
            srv = VLLMServer(cfg, progress=False)
        launched.append(srv)
        return srv

    specs = [
        {"name": "too-long", "standin_args": {"--max-model-len": 4096}},
        {"name": "misspelled", "standin_args": {"--max-num-seq": 2}},
    ]
    common = dict(mode="stand_in", servers={"recipe": standin_server.url}, out_dir=tmp_path,
                  num_prompts=4, progress=False, server_factory=factory)  # fmt: skip
    result = tuning.tune(resolve("h200"), {**TINY, "concurrencies": [1]}, None, specs, **common)
    status = result.candidates.set_index("candidate")
    assert status.loc["recipe", "status"] == "ok" and _measured(result) == [("recipe", 1)]
    assert (
        status.loc["too-long", "status"] == "failed"
        and status.loc["misspelled", "status"] == "failed"
    )
    too_long = result.failures["too-long"][0]
    assert (
        too_long["stage"] == "start" and too_long["diagnosis"]["name"] == "max_model_len_too_long"
    )
    assert "--max-model-len" in status.loc["too-long", "reason"]
    assert result.failures["misspelled"][0]["stage"] == "validate"
    said = result.summary()  # the summary, not only the status table, says they were not compared
    assert "not compared: too-long failed (start): " in said
    assert "not compared: misspelled failed (validate): " in said and "--max-num-seqs" in said
    assert (
        "--max-num-seq" in status.loc["misspelled", "reason"]
        and "--max-num-seqs" in status.loc["misspelled", "reason"]
    )
    fake = launched[0]
    assert fake.pid and not group_left(fake.pid), "the failed start left processes behind"
    assert launched[1].pid is None  # refused before a process existed
    assert json.loads((tmp_path / "too-long" / "failures.json").read_text())[0]["stage"] == "start"
    assert standin_server.is_running()
    doc = json.loads((tmp_path / "tune.json").read_text())
    assert {c["name"]: c["status"] for c in doc["candidates"]} == {
        "recipe": "ok",
        "too-long": "failed",
        "misspelled": "failed",
    }

    launched.clear()
    again = tuning.tune(resolve("h200"), {**TINY, "concurrencies": [1]}, None, specs, **common)
    assert launched == [] and set(again.candidates["status"]) == {"ok", "failed"}
    tuning.tune(
        resolve("h200"), {**TINY, "concurrencies": [1]}, None, specs, retry_failed=True, **common
    )
    assert len(launched) == 2 and not group_left(launched[0].pid)

    # the misspelled flag corrected under the same name: nothing was measured for the refused
    # command, so its record is replaced and the candidate measured (here on the running
    # stand-in, attached), not refused as "measured for that, not this"
    fixed = [{"name": "misspelled", "standin_args": {"--max-num-seqs": 2}}]
    servers = {"recipe": standin_server.url, "misspelled": standin_server.url}
    result = tuning.tune(resolve("h200"), {**TINY, "concurrencies": [1]}, None, fixed,
                         **{**common, "servers": servers})  # fmt: skip
    assert result.candidates.set_index("candidate").loc["misspelled", "status"] == "ok", (
        result.failures
    )
    assert result.failures["misspelled"] == []


def test_points_measured_apart_are_named_beside_the_ratio(tmp_path):
    """A resumed run compares the recipe measured under load with a candidate measured later on
    idle cores: the summary says when and where each was measured and how to re-measure; points
    measured together on one host and release say nothing more. The points are vLLM's own JSON
    (a stand-in point, its date and throughput changed)."""
    from lab.tune.results import collect

    base = json.loads((REPO_ROOT / "tests" / "data" / "bench" / "standin-c1.json").read_text())
    cands = tuning.make_candidates(
        resolve("h200"), [{"name": "fast", "extra_args": {"--max-num-seqs": 64}}]
    )
    load = tuning.workloads({**TINY, "concurrencies": [1]})

    def write(name, date, speed, host):
        (tmp_path / name / "tiny").mkdir(parents=True, exist_ok=True)
        point = {**base, "date": date, "output_throughput": speed, "label": name}
        (tmp_path / name / "tiny" / f"{name}-c1.json").write_text(json.dumps(point))
        (tmp_path / name / "candidate.json").write_text(json.dumps(
            {"name": name, "vllm_version": "0.32.0", "host": host}))  # fmt: skip

    bounds = slos.SLO.coerce({"ttft_ms": 60_000, "e2el_ms": 60_000})
    write("recipe", "20261201-090000", 100.0, "box-a")
    write("fast", "20261201-093000", 150.0, "box-a")
    together = collect(tmp_path, resolve("h200"), cands, load, bounds, run=Run("stand_in"))
    assert "fast at concurrency 1" in together.summary() and "note:" not in together.summary()
    shown = together.candidates.set_index("candidate")
    assert (
        shown.loc["fast", "measured"] == "2026-12-01 09:30" and shown.loc["fast", "host"] == "box-a"
    )
    write("fast", "20261201-150000", 150.0, "box-b")
    apart = collect(tmp_path, resolve("h200"), cands, load, bounds, run=Run("stand_in")).summary()
    assert "note: fast and the recipe were measured 6.0 h apart (fast: 2026-12-01 15:00" in apart
    assert "on another host (fast: box-b; the recipe: box-a)" in apart
    assert (
        "Re-measure the older beside the other, on one host: tune(..., remeasure=['recipe'])"
        in apart
    )
    write("fast", "20261130-090000", 150.0, "box-a")  # now the candidate is the older one
    older = collect(tmp_path, resolve("h200"), cands, load, bounds, run=Run("stand_in")).summary()
    assert "measured 24.0 h apart" in older and "remeasure=['fast']" in older
    with pytest.raises(BenchError, match=r"remeasure name \['recpe'\]"):
        tuning.tune(resolve("h200"), TINY, None, [], mode="stand_in", out_dir=tmp_path,
                    remeasure=["recpe"], progress=False)  # fmt: skip


def test_two_tuning_runs_on_one_out_dir_at_once_are_refused(tmp_path):
    """The second run would serve its candidates beside the first's and write the same points:
    it stops before anything is launched, naming the folder and the fix."""
    from filelock import FileLock

    held = FileLock(str(tmp_path / ".tune.lock"))
    held.acquire()
    try:
        with pytest.raises(BenchError, match=r"Another tuning run is using .*pass another out_dir"):
            tuning.tune(resolve("h200"), TINY, None, [], mode="stand_in", out_dir=tmp_path,
                        include_recipe=True, progress=False)  # fmt: skip
    finally:
        held.release()
    assert not (tmp_path / "recipe").exists()


# ------------------------------------------------------------------------------ the notebook


@pytest.mark.notebook
@pytest.mark.server
def test_the_tuning_notebook_on_the_standin(standin_server, shared_kernel, tmp_path, monkeypatch):
    """recipe (the session server, attached) vs --max-num-seqs 2 (launched and stopped) vs
    another vLLM release (skipped): the frontier plot, the SLO table, the recommendation with
    the target's command and its price, tune.json, and nothing left running."""
    out = tmp_path / "out"
    (out / "models").parent.mkdir(parents=True, exist_ok=True)
    (out / "models").symlink_to(REPO_ROOT / "out" / "models", target_is_directory=True)
    monkeypatch.setenv("COOKBOOK_OUT", str(out))
    started = time.time()
    executed = notebook_run.run_notebook(
        NOTEBOOK, {"install": False, "num_prompts": 4, "servers": {"recipe": standin_server.url}},
        output=real_out_notebooks() / NOTEBOOK.name, progress=False, kernel=shared_kernel,
    )  # fmt: skip
    print(f"\ntuning notebook: {time.time() - started:.0f} s")
    text = executed.read_text()
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "'recipe': measuring 2 point(s) on the server at" in text
    assert "'max-num-seqs-2': launching, then 2 point(s)" in text
    assert f"'vllm-{OTHER_RELEASE}': skipped, needs vLLM {OTHER_RELEASE}" in text
    assert text.count("[vllm] launched pid") == 1 and text.count("[vllm] stopped pid") == 1
    pid = int(re.search(r"\[vllm\] launched pid (\d+)", text).group(1))
    assert not group_left(pid)
    assert standin_server.is_running()  # attached, left alone
    doc = json.loads((out / "tune" / "h200-standin" / "tune.json").read_text())
    status = {c["name"]: c["status"] for c in doc["candidates"]}
    assert status == {"recipe": "ok", "max-num-seqs-2": "ok", f"vllm-{OTHER_RELEASE}": "skipped"}
    # the recommendation line agrees with the saved points
    line = re.search(r"tiny: (recipe|max-num-seqs-2) at concurrency (\d)", text)
    assert line, "no recommendation printed"
    pts = tuning.load_tune_rows(out / "tune" / "h200-standin" / "tune.json")
    assert len(pts[pts["repeat"] == 0]) == 4 and pts["completed"].gt(0).all()
    assert "vllm serve nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4" in text
    assert "per million output tokens" in text
    # two runs of each decision point (the stand-in's default): a ratio is a win beyond the
    # spread or a tie, never a bare "faster"
    assert "; repeats: 2 runs of each decision point" in text
    for ratio in re.findall(r"(?:tie \(within noise\): )?\d\.\d\dx the recipe's[^\"<]*", text):
        assert "median (2 runs each; worst run above" in ratio or "tie (within noise)" in ratio, (
            ratio
        )
    assert "SLO limit (" in text and "s API ($" in text and "utilization" in text
    assert "(stand-in: a CPU's speed at the example GPU price" in text  # the cost lines' caveat
    nb = json.loads(text)
    table = next(c for c in nb["cells"] if "recommendation_table()" in "".join(c["source"]))
    shown = "".join("".join(o.get("data", {}).get("text/plain", "")) for o in table["outputs"])
    assert "recommended" in shown and not re.search(r"\d\.\d{4,}", shown), shown
    assert "runs" in shown and "output_tok_s_range" in shown
    assert_clean_outputs(executed, stand_in=True)


# ------------------------------------------------------------------------------ committed results


def test_the_seeded_results_are_the_committed_sweeps_converted():
    """docs/results/h200/tune/seed-*.json is what tools/seed_tune_results.py makes of the
    committed point JSONs, each point naming its source file, release and command."""
    from tools import seed_tune_results

    assert seed_tune_results.main(["--check"]) == 0, "run python -m tools.seed_tune_results"
    rows = tuning.load_tune_rows(REPO_ROOT / "docs" / "results" / "h200" / "tune")
    assert len({(c, v) for c, v in zip(rows["candidate"], rows["vllm_version"], strict=True)}) >= 6
    for row in rows.to_dict("records"):
        source = json.loads((REPO_ROOT / row["source"]).read_text())
        assert source["output_throughput"] == row["output_throughput"]
        assert source["max_concurrency"] == row["concurrency"]
        assert row["command"].startswith(("vllm serve", "export")) and row["vllm_version"]
    recipe = rows[rows["recipe"]]
    assert set(recipe["vllm_version"]) == {"0.32.0"} and set(recipe["candidate"]) == {
        "nvfp4-humming"
    }


def test_a_repeated_tuning_run_decides_its_workloads_over_single_run_seeds(tmp_path):
    """With the H200 grid committed (every candidate on one machine, repeated), a seed file's
    one-run point from another day, however fast, is no longer ranked against it."""
    from tools.tune_pages import recommendation_markdown

    root = copy_tune_results(tmp_path)
    grid = json.loads(next((root / "h200" / "tune").glob("*/tune.json")).read_text())
    assert any(c["points"] for c in grid["candidates"]), "the committed grid has points"
    path = root / "h200" / "tune" / "seed-vllm-0.32.0.json"
    doc = json.loads(path.read_text())
    marlin = next(c for c in doc["candidates"] if c["name"] == "nvfp4-marlin")
    marlin["points"][0]["tokens_per_s_per_user"] = 9999.0  # c=1, one run, another day
    path.write_text(json.dumps(doc))
    text = recommendation_markdown("h200", root)
    latency = next(ln for ln in text.splitlines() if ln.startswith("| latency"))
    assert "9,999" not in text and "/tune.json` |" in latency
    # the bisected SLO limits of the repeated run are said for the goals with an SLO
    assert "throughput: the SLO limit, bisected" in text and "long prompt: the SLO limit" in text
    seeds = recommendation_markdown("h200", seeds_only(tmp_path / "seeds"))
    assert "| latency" in seeds and "/tune.json" not in seeds


def test_the_measured_best_says_when_its_points_ran_on_dummy_routing(tmp_path):
    """Points of vLLM 0.32.0 and earlier ran on dummy weights that route every token of a step
    to the same experts (benchmarks/dummy_moe_routing.py): the table's paragraph says so; with
    only 0.33.0 points it does not."""
    from tools.tune_pages import DUMMY_ROUTING_NOTE, UNIFORM_ROUTING_NOTE, recommendation_markdown

    root = seeds_only(tmp_path)
    assert DUMMY_ROUTING_NOTE in recommendation_markdown("h200", root)
    assert UNIFORM_ROUTING_NOTE not in recommendation_markdown("h200", root)
    for path in (root / "h200" / "tune").glob("*.json"):
        path.write_text(
            path.read_text()
            .replace('"0.32.0"', '"0.33.0"')
            .replace('"0.28.0"', '"0.33.0"')
            .replace('"0.26.0"', '"0.33.0"')
        )
    text = recommendation_markdown("h200", root)
    assert text is not None and DUMMY_ROUTING_NOTE not in text
    # 0.32.0 points whose commands export the uniform routing simulation (tune_h200.py
    # --routing uniform) did not run the dummy routing: its note goes, the simulation's comes;
    # one point without it: the dummy note again
    root = seeds_only(tmp_path / "uniform")
    files = sorted((root / "h200" / "tune").glob("*.json"))
    for path in files:
        doc = json.loads(path.read_text())
        for cand in doc["candidates"]:
            cand["command"] = (
                f"export VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random\n{cand['command']}"
            )
        path.write_text(json.dumps(doc))
    assert DUMMY_ROUTING_NOTE not in recommendation_markdown("h200", root)
    assert UNIFORM_ROUTING_NOTE in recommendation_markdown("h200", root)
    doc = json.loads(files[0].read_text())
    doc["candidates"][0]["command"] = doc["candidates"][0]["command"].split("\n", 1)[1]
    files[0].write_text(json.dumps(doc))
    assert DUMMY_ROUTING_NOTE in recommendation_markdown("h200", root)


def test_the_agent_workload_gets_its_row_once_it_has_points(tmp_path):
    """The measured-best table names the agent workload (the tuning step's drafting part
    measures it): "not measured yet" until a committed file has its points, then its best
    configuration within the SLO, from those points alone."""
    from tools.tune_pages import recommendation_markdown

    root = seeds_only(tmp_path)
    row = lambda text: next(ln for ln in text.splitlines() if ln.startswith("| agent"))  # noqa: E731
    assert "not measured yet" in row(recommendation_markdown("h200", root))
    path = root / "h200" / "tune" / "seed-vllm-0.32.0.json"
    doc = json.loads(path.read_text())
    for cand in doc["candidates"]:  # the file's 1K points relabelled as the agent workload
        cand["points"] += [
            {**pt, "workload": "agent"} for pt in cand["points"] if pt["workload"] == "tune-1k"
        ]
    doc["workloads"] = [*doc["workloads"], {**doc["workloads"][0], "name": "agent"}]
    path.write_text(json.dumps(doc))
    agent = row(recommendation_markdown("h200", root))
    assert "not measured yet" not in agent and "seed-vllm-0.32.0.json" in agent


def test_a_drafting_session_s_rows_name_their_acceptance_and_gpu_and_do_not_decide_throughput(
    tmp_path,
):
    """The co-tenant drafting sessions (an H100, 2026-12-05: tune-1k at one user, the agent
    workload at 4 and 16; its confirmation of 2026-12-06 at 1 and 16): the drafting rows name the drafter, K, the synthetic acceptance and
    its source, with the break-even length under the table; its one-user points stay out of the
    many-users throughput goal (a lead at c=1 says nothing about it); a row measured on
    another GPU than the notebook's says which."""
    from tools.tune_pages import recommendation_markdown

    root = copy_tune_results(tmp_path)
    shutil.copytree(REPO_ROOT / "docs" / "results" / "h100" / "tune", root / "h100" / "tune")
    text = recommendation_markdown("h200", root)
    rows = {ln.split(" | ")[0].split(":")[0].lstrip("| "): ln for ln in text.splitlines()
            if ln.startswith("| ") and ln[2:3] != "-" and ":" in ln.split(" | ")[0]}  # fmt: skip
    throughput = rows["throughput"].split(" | ")
    assert int(throughput[4]) > 1 and "drafting" not in rows["throughput"], throughput
    drafting = [ln for ln in text.splitlines() if "DSpark K=7 drafting at synthetic" in ln]
    assert drafting and all("synthetic acceptance 3.69 (ai-dynamo/dynamo" in ln for ln in drafting)
    assert all(ln.endswith(", on H100 80GB HBM3 |") for ln in drafting if ln.startswith("| "))
    assert re.search(r"DSpark K=7 drafting: drafting at synthetic acceptance 3\.69 at K=7 "
                     r"\(ai-dynamo/dynamo recipes/.*only above L = \d\.\d\d", text)  # fmt: skip
    # the break-even by each goal's own measure: per-user speed at one user, goodput for the
    # agent sessions (the DSpark row's "vs recipe", recommended or tied)
    even = dict(
        re.findall(
            r"- (latency|agent): NVFP4, humming MoE, DSpark K=7 drafting: .*?only above L = (\d\.\d\d)",
            text,
        )
    )
    ratio, goal = {}, None
    for ln in text.splitlines():
        cells = ln.split(" | ")
        if ln.startswith("| ") and ":" in cells[0]:
            goal = cells[0].lstrip("| ").split(":")[0]
        if (
            ln.startswith("| ")
            and len(cells) > 10
            and cells[2].startswith("NVFP4, humming MoE, DSpark")
        ):
            ratio[goal] = re.match(r"(\d\.\d\d)x", cells[10]).group(1)
    assert set(even) == set(ratio) == {"latency", "agent"}
    for goal in even:  # L x recipe / candidate, the measured L about 3.69
        assert abs(float(even[goal]) * float(ratio[goal]) - 3.69) < 0.03, (goal, even, ratio)
    # its servers shared the GPU (co-tenant.json beside tune.json): said under the table
    assert (
        "rows from `drafting-0.32.0-2026-12-06-confirm/tune.json` ran as 2 servers at a time on the GPU, "
        "each with --gpu-memory-utilization 0.2 --kv-cache-memory-bytes 4294967296" in text
    )
    assert "ran as" not in recommendation_markdown("h200", copy_tune_results(tmp_path / "alone"))
    # on the H100's notebook the H200 rows say where they ran, the H100's do not
    h100 = recommendation_markdown("h100", root)
    assert ", on H200 |" in h100 and ", on H100" not in h100


def test_where_the_recipe_missed_the_slo_beside_a_candidate_its_point_there_is_the_reference(
    tmp_path,
):
    """The H100 confirmation (2026-12-06) at 16 agent sessions: the recipe's median p99 TTFT
    was 2,236 ms, over the 2,000 ms bound; DSpark K=7 met it with every run faster. The page
    sets DSpark against the recipe's point beside it (not another day's recipe, which is
    measured apart) and says the recipe missed. Scaled to within the noise of that point, the
    recipe over the SLO cannot stay recommended beside it: DSpark (ahead by the median, its
    runs overlapping the recipe's) is compared with the
    screen's recipe (2026-12-05), which met the SLO, and ties with it, so that recipe stays;
    without that session, the page says there is no recommendation and why."""
    from tools.tune_pages import recommendation_markdown

    root = copy_tune_results(tmp_path)
    shutil.copytree(REPO_ROOT / "docs" / "results" / "h100" / "tune", root / "h100" / "tune")

    def agent_row(text):
        lines = text.splitlines()
        i = next(k for k, ln in enumerate(lines) if ln.startswith("| agent:"))
        return lines[i], lines[i + 1]

    text = recommendation_markdown("h100", root)
    best, ref = agent_row(text)
    assert "**recommended** | NVFP4, humming MoE, DSpark K=7" in best, best
    assert "drafting-0.32.0-2026-12-06-confirm/tune.json" in best
    assert "recipe's command (reference)" in ref and "| 16 | 6 |" in ref and "| 2,236 |" in ref
    assert "drafting-0.32.0-2026-12-06-confirm/tune.json" in ref
    assert "the recipe misses the SLO there (p99 TTFT 2,236 ms > 2,000 ms)" in text
    assert "| 1.76x (1.54-2.01) |" in best  # its output tok/s there: a lower bound

    path = root / "h100" / "tune" / "drafting-0.32.0-2026-12-06-confirm" / "tune.json"
    doc = json.loads(path.read_text())
    for p in next(c for c in doc["candidates"] if c["name"] == "dspark-k7")["points"]:
        if p["workload"] == "agent" and p["repeat"] % 2 == 0:  # half its runs at half speed:
            for k in ("output_throughput", "output_throughput_per_gpu"):  # below the recipe's
                p[k] *= 0.5
    path.write_text(json.dumps(doc))
    screen = root / "h100" / "tune" / "drafting-0.32.0-2026-12-05" / "tune.json"
    doc = json.loads(screen.read_text())
    for c in doc["candidates"]:  # DSpark the only agent candidate: its comparison decides
        if not c["recipe"]:
            c["points"] = [p for p in c["points"] if p["workload"] != "agent"]
    screen.write_text(json.dumps(doc))
    text = recommendation_markdown("h100", root)
    best, tied = agent_row(text)
    assert "**recommended: the recipe's command**" in best, best
    assert "drafting-0.32.0-2026-12-05/tune.json" in best
    assert "| tie (within noise) | NVFP4, humming MoE, DSpark K=7" in tied, tied
    assert "misses the SLO there" not in text

    shutil.rmtree(screen.parent)  # no session's recipe met the SLO: no recommendation
    lines = recommendation_markdown("h100", root).splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("| agent:"))
    assert "| no recommendation |" in lines[i], lines[i]
    assert "| recipe's command (over the SLO) |" in lines[i + 1] and "| 2,236 |" in lines[i + 1]
    assert "| tie (within noise) | NVFP4, humming MoE, DSpark K=7" in lines[i + 2], lines[i + 2]
    assert any(
        ln.startswith("- agent: no recommendation: the recipe missed the SLO at every point of "
                      "its session this goal reads (at concurrency 16: p99 TTFT 2,236 ms > 2,000 "
                      "ms) and NVFP4, humming MoE, DSpark")
        for ln in lines
    )  # fmt: skip


DYNAMO = "ai-dynamo/dynamo recipes/nemotron-3.5-lightning/perf/README.md @ 182ecdfc (2026), its H200 aggregated benchmark"


@pytest.mark.parametrize(
    "source, named",
    [
        (DYNAMO, "(ai-dynamo/dynamo; below)"),
        (f"derived from 3.687 at K=7, {DYNAMO}, at a constant per-position acceptance of 0.76",
         "(derived from ai-dynamo/dynamo; below)"),
        ("derived from 3.18 at K=5, a vendor's blog (2026)", "(derived from a vendor's blog (2026); below)"),
        ("a chosen length, not a published or measured one", "(a chosen length, not a published or measured one; below)"),
        ("the notebook's parameter", "(the notebook's parameter; below)"),
    ],
)  # fmt: skip
def test_a_drafting_row_names_its_acceptance_and_source_whatever_the_source(source, named):
    """The table's label of a drafting candidate, for each kind of source a synthetic
    acceptance has (lab.synthetic_acceptance): the length, and the source in brackets."""
    from lab.synthetic_acceptance import SyntheticAcceptance
    from tools.tune_pages import _label

    caption = SyntheticAcceptance("mtp", 7, 3.5, source).caption()
    row = {"variant": "nvfp4", "moe_backend": "humming", "acceptance": caption,
           "spec": {"speculative": "mtp", "speculative_tokens": 7}}  # fmt: skip
    assert (
        _label(row) == f"NVFP4, humming MoE, MTP K=7 drafting at synthetic acceptance 3.5 {named}"
    )
    assert _label({**row, "acceptance": None}) == "NVFP4, humming MoE, MTP K=7 drafting"


def test_a_repeated_row_shows_the_range_of_both_speeds_its_verdict_may_rest_on():
    """The latency goal decides on per-user speed, the throughput goals on output tokens/s:
    a row of repeated points shows the min-max of both, so a "tie" is read from the column it
    rests on (the committed H200 results)."""
    from tools.tune_pages import recommendation_markdown

    text = recommendation_markdown("h200")
    rows = [ln.split(" | ") for ln in text.splitlines() if ln.startswith("| ") and " | 0.3" in ln]
    repeated = [r for r in rows if r[5].strip().isdigit() and int(r[5]) > 1]
    assert repeated, "no repeated row in the committed results"
    for r in repeated:
        assert re.fullmatch(r"[\d,]+ \([\d,]+-[\d,]+\)", r[6]) and re.fullmatch(
            r"[\d,]+ \([\d,]+-[\d,]+\)", r[7]
        ), r


def test_the_hopper_notebooks_recommendation_follows_the_data(tmp_path):
    """The table the h100 / h200 notebooks show comes from the committed rows: change a row and
    the measured best changes; a workload gets a row once it has points. A faster point
    measured hours from the recipe's (another session) is a tie, never a recommendation; one
    measured beside it beats it."""
    from tools.tune_pages import recommendation_markdown

    root = seeds_only(tmp_path)
    before = recommendation_markdown("h200", root)
    rows = before.splitlines()
    i = next(k for k, ln in enumerate(rows) if ln.startswith("| latency"))
    assert (
        "**recommended: the recipe's command** | NVFP4, humming MoE | 0.32.0 | 1 | 1 |" in rows[i]
    )
    # BF16 on 0.28.0 is faster by its one run, but ran 6.5 h after the recipe's point
    assert "| | tie (measured apart) | BF16, triton MoE | 0.28.0 | 1 | 1 |" in rows[i + 1]
    assert "measured 6.5 h apart" in before and "only runs side by side decide" in before
    assert "| long prompt: 8K in / 256 out" in before and "not measured yet" in before

    path = root / "h200" / "tune" / "seed-vllm-0.32.0.json"
    doc = json.loads(path.read_text())
    marlin = next(c for c in doc["candidates"] if c["name"] == "nvfp4-marlin")
    marlin["points"][0]["tokens_per_s_per_user"] = 400.0  # c=1: now clearly the fastest
    long = dict(marlin["points"][2], workload="tune-8k", input_len=8192.0, concurrency=64)
    marlin["points"].append(long)  # one 8K point meeting the SLO
    path.write_text(json.dumps(doc))
    after = recommendation_markdown("h200", root)
    latency = next(ln for ln in after.splitlines() if ln.startswith("| latency"))
    assert (
        "**recommended** | NVFP4, marlin MoE | 0.32.0 | 1 | 1 |" in latency and "| 400 |" in latency
    )
    assert 'latency: the recommended row is this notebook with `moe_backend = "marlin"`' in after
    assert "--moe-backend marlin" in after.split("The recommended command for latency")[1]
    long_row = next(ln for ln in after.splitlines() if ln.startswith("| long prompt"))
    assert "**recommended** | NVFP4, marlin MoE | 0.32.0 | 64 | 1 |" in long_row
    # a CPU rehearsal's tune.json in the folder never becomes a GPU figure
    fake = json.loads(path.read_text())
    fake["measured_on"] = {"target": "h200", "gpu": "CPU stand-in", "stand_in": True}
    fake["candidates"][0]["points"][0]["tokens_per_s_per_user"] = 9999.0
    (root / "h200" / "tune" / "rehearsal.json").write_text(json.dumps(fake))
    assert "9,999" not in recommendation_markdown("h200", root)
    # an H100 notebook quotes the H200 data with its caveat; a target with no data gets none
    assert "not on this H100" in recommendation_markdown("h100", root)
    assert recommendation_markdown("a100", root) is None
    assert recommendation_markdown("h200", tmp_path / "nothing") is None


def test_the_rendered_table_is_on_the_results_page_the_hopper_notebooks_link():
    """The measured best per workload is in docs/results/measured.md, one section per target
    it applies to; the target notebook links its section in one line, the table stays out."""
    from tools.tune_pages import recommendation_markdown

    page = (REPO_ROOT / "docs" / "results" / "measured.md").read_text()
    for stem, target in (("h200", "h200"), ("h100", "h100")):
        text = "".join(
            "".join(c["source"])
            for c in json.loads((REPO_ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
        )
        first = recommendation_markdown(target).splitlines()[0]
        section = page[page.index(f"\n## {target}\n") :]
        assert first in section.split("\n## ")[1], target
        assert first not in text and f"../docs/results/measured.md#{target}" in text, stem
    a100 = (REPO_ROOT / "notebooks" / "a100.ipynb").read_text()
    assert "Measured best per workload" not in a100 and "\n## a100\n" not in page


def _tune_h200():
    """``tools/device/tune_h200.py`` imported as a module (it is a script beside its shell
    wrappers, not a package member)."""
    import importlib
    import sys

    sys.path.insert(0, str(REPO_ROOT / "tools" / "device"))
    try:
        return importlib.import_module("tune_h200")
    finally:
        sys.path.remove(str(REPO_ROOT / "tools" / "device"))


def test_the_device_grid_is_the_issues_and_every_command_parses(capsys):
    """tools/device/tune_h200.py: NVFP4 x {Humming, Marlin} and BF16 x Triton at 256 and 64
    sequences; its dry run checks each command (and the c1 decode candidates) against the flag
    table of its release and the installed vLLM's parser."""
    tune_h200 = _tune_h200()
    base = resolve("h200")
    cands = tuning.make_candidates(base, tune_h200.specs(tune_h200.GRID))
    grid = {
        (
            c.config.variant,
            c.config.args.get("--moe-backend"),
            int(c.config.args.get("--max-num-seqs") or 0),
        )
        for c in cands
    }
    assert grid == {
        (v, k, n)
        for v, k in (("nvfp4", "humming"), ("nvfp4", "marlin"), ("bf16", "triton"))
        for n in (256, 64)
    }
    assert tune_h200.main(["--dry-run", "--c1", "--releases", "0.28.0"]) == 0
    said = capsys.readouterr().out
    drafting = len(tune_h200.DRAFTING_CANDIDATES)
    assert said.count("flags ok") == len(cands) + 2 + len(tune_h200.C1_CANDIDATES) + drafting
    # drafting candidates: their K in the command, each drafting mode's hardware override kept
    assert '{"method":"mtp","num_speculative_tokens":7}' in said
    assert "[drafting] bf16-fp8: variant bf16; --moe-backend triton; --quantization fp8" in said
    assert (
        '--compilation-config {"cudagraph_mode":"FULL_DECODE_ONLY"}' in said
        and "--no-async-scheduling" in said
    )


def test_the_device_grid_refuses_a_remeasure_name_it_would_not_run(capsys):
    """tools/device/tune_h200.py --remeasure: a name that is no candidate, or one left out by
    --only, is refused before any server starts (it would otherwise be silently ignored)."""
    tune_h200 = _tune_h200()
    for argv in (["--remeasure", "no-such"], ["--only", "bf16-triton-64", "--remeasure", "recipe"]):
        with pytest.raises(SystemExit) as e:
            tune_h200.main(["--dry-run", *argv])
        assert e.value.code == 2
        assert "--remeasure" in capsys.readouterr().err
    assert tune_h200.main(["--dry-run", "--only", "recipe", "--remeasure", "recipe"]) == 0


def test_the_co_tenant_drafting_part_starts_the_recipe_first_and_packs_bf16_as_two(capsys):
    """tools/device/tune_h200.py --drafting --co-tenant: the recipe heads the first wave (every
    ratio's anchor), --only's order is the priority, a BF16 candidate takes two of a wave's
    four slots (each candidate in the first wave with room), and the dry run prints the waves with the concurrencies a 4 GiB cache holds."""
    tune_h200 = _tune_h200()
    names = ["recipe", "mtp-k1", "mtp-k3", "mtp-k7", "dflash-k5", "dspark-k7", "bf16-fp8"]
    only = ["mtp-k7", "dspark-k7", "recipe", "mtp-k3", "bf16-fp8", "mtp-k1"]
    order = tune_h200.co_tenant_order(names, only)
    assert order == ["recipe", "mtp-k7", "dspark-k7", "mtp-k3", "bf16-fp8", "mtp-k1"]
    assert tune_h200.co_tenant_order(names, ["mtp-k7"]) == ["mtp-k7"]  # no recipe asked, none
    specs = {s["name"]: s for s in tune_h200.specs(tune_h200.DRAFTING_CANDIDATES)}
    assert tune_h200.co_tenant_waves(order, specs, 4) == [
        ["recipe", "mtp-k7", "dspark-k7", "mtp-k3"],
        ["bf16-fp8", "mtp-k1"],
    ]
    assert tune_h200.co_tenant_waves(["bf16-fp8", "recipe", "mtp-k1", "mtp-k3"], specs, 4) == [
        ["bf16-fp8", "recipe", "mtp-k1"],
        ["mtp-k3"],
    ]
    # an 80 GB H100's two slots: a later candidate joins the first wave with room (two cold
    # starts, not three)
    assert tune_h200.co_tenant_waves(["recipe", "bf16-fp8", "mtp-k1"], specs, 2) == [
        ["recipe", "mtp-k1"],
        ["bf16-fp8"],
    ]
    argv = ["--dry-run", "--no-grid", "--drafting", "--co-tenant", "--only", *only]
    assert tune_h200.main(argv) == 0
    said = capsys.readouterr().out
    assert (
        "co-tenant waves of 4 slots (--slots; on a GPU, as many as its memory holds: 2 on an H100 "
        "80GB): [['recipe', 'mtp-k7', 'dspark-k7', 'mtp-k3'], ['bf16-fp8', 'mtp-k1']]; "
        "concurrencies {'tune-1k': [1], 'agent': [4, 16]}" in said
    )
    # a wave holds what the GPU's memory does: four on an H200 (143.8 GiB), two on an H100
    # 80GB (79.6 GiB), four when the memory is unknown; --slots overrides
    assert [tune_h200.co_tenant_slots(g) for g in (143.8, 79.6, 30.0, None)] == [4, 2, 1, 4]
    assert tune_h200.main([*argv, "--slots", "2"]) == 0
    assert "[['recipe', 'mtp-k7'], ['dspark-k7', 'mtp-k3'], ['bf16-fp8'], ['mtp-k1']]" in (
        capsys.readouterr().out
    )
    # --routing uniform (the default): every candidate's command exports vLLM's uniform
    # routing simulation; --routing as-loaded: none does (the variable set empty, vLLM's off)
    lines = [ln for ln in said.splitlines() if ln.startswith("[")]
    assert len(lines) > 6 and all(ln.endswith("; uniform routing") for ln in lines)
    assert tune_h200.main([*argv, "--routing", "as-loaded"]) == 0
    assert "uniform routing" not in capsys.readouterr().out


def test_co_tenants_are_measured_in_rounds_so_a_budget_cut_leaves_pairs(capsys):
    """tools/device/tune_h200.py: co-tenant candidates take one run each in turn (round k is
    every candidate's k-th run), then the SLO search as a round of its own, so a budget that
    ends early leaves the recipe and a drafter with the same number of runs; run one after
    another, the 2026-12-06 H200 session measured the recipe 6 times and DSpark none. A
    candidate whose measurement fails sits out the later rounds; the others go on."""
    tune_h200 = _tune_h200()
    order: list[tuple[str, object]] = []
    clock = {"left": 1000.0}

    def measure(name, key):
        order.append((name, key))
        clock["left"] -= 20  # one step: 20 s
        if name == "broken":
            raise RuntimeError("server died")

    def run(names, left_s, repeats=6, search=False):
        order.clear()
        clock["left"] = left_s
        rounds = [(k, 20) for k in range(1, repeats + 1)] + ([("search", 35)] if search else [])
        return tune_h200.measure_in_rounds(names, rounds, measure, lambda: clock["left"], 90)

    done = run(["recipe", "dspark-k7"], 1000, search=True)
    assert order == [(n, k) for k in [*range(1, 7), "search"] for n in ("recipe", "dspark-k7")]
    assert done == {n: ([1, 2, 3, 4, 5, 6, "search"], "") for n in ("recipe", "dspark-k7")}
    # 230 s: a round of two (40 s) plus the 90 s kept fits three times, then the cut
    done = run(["recipe", "dspark-k7"], 230)
    assert order == [(n, k) for k in (1, 2, 3) for n in ("recipe", "dspark-k7")]
    assert done["recipe"] == done["dspark-k7"] == ([1, 2, 3], "3 of 6 rounds: 110 s of budget left")
    # the search is budgeted at its own cost: 6 runs fit, the two probes (70 s + 90 s) do not
    done = run(["recipe", "dspark-k7"], 90 + 6 * 40 + 69, search=True)
    assert order[-1] == ("dspark-k7", 6) and done["recipe"][1].startswith("6 of 7 rounds")
    done = run(["recipe", "broken", "mtp-k7"], 1000, repeats=3)
    assert ("broken", 2) not in order and ("mtp-k7", 3) in order
    assert done["broken"] == ([], "tune: RuntimeError: server died")
    assert done["recipe"] == done["mtp-k7"] == ([1, 2, 3], "")
    assert run(["recipe"], 100) == {"recipe": ([], "0 of 6 rounds: 100 s of budget left")}
    with pytest.raises(SystemExit):
        tune_h200.main(["--dry-run", "--no-grid", "--drafting", "--co-tenant", "--repeats", "0"])
    assert "--repeats 0: 1 or more" in capsys.readouterr().err


def test_a_search_round_only_where_a_workload_has_concurrencies_to_bisect():
    """tools/device/tune_h200.py: --slo-search adds a round after the runs only when some
    workload has two or more concurrencies; with --points agent:16 (one each) the search
    could bisect nothing, and its round would only hold budget back."""
    from types import SimpleNamespace as W

    tune_h200 = _tune_h200()
    one_each = [W(concurrencies=(1,)), W(concurrencies=(16,))]
    assert tune_h200.co_tenant_rounds(one_each, 3, 2, 40.0, 70.0) == [
        (1, 40.0),
        (2, 40.0),
        (3, 40.0),
    ]
    two = [W(concurrencies=(1,)), W(concurrencies=(4, 16))]
    assert tune_h200.co_tenant_rounds(two, 2, 2, 40.0, 70.0) == [
        (1, 40.0),
        (2, 40.0),
        ("search", 70.0),
    ]
    assert tune_h200.co_tenant_rounds(two, 2, 0, 40.0, 70.0) == [(1, 40.0), (2, 40.0)]


def test_the_device_grid_budgets_grid_and_c1_candidates_apart():
    """tools/device/tune_h200.py: --candidate-s budgets every candidate, --c1-candidate-s a c1
    one on its own (a batch that re-measures grid candidates, then fills its last minutes with
    c1 ones); without either, CANDIDATE_S, and nothing on the stand-in."""
    from argparse import Namespace

    tune_h200 = _tune_h200()

    def budget(part, **given):
        args = {"candidate_s": None, "c1_candidate_s": None, "stand_in": False, **given}
        return tune_h200.candidate_budget_s(part, Namespace(**args))

    assert budget("grid") == tune_h200.CANDIDATE_S["grid"] and budget("c1") == 320
    assert budget("grid", stand_in=True) == 0 == budget("c1", stand_in=True)
    assert budget("grid", candidate_s=600) == 600 == budget("c1", candidate_s=600)
    assert budget("grid", candidate_s=600, c1_candidate_s=250) == 600
    assert budget("c1", candidate_s=600, c1_candidate_s=250) == 250
    assert budget("c1", c1_candidate_s=250) == 250 and budget("grid", c1_candidate_s=250) == 900


def test_the_device_dry_run_plans_what_the_call_would_run(capsys):
    """tools/device/tune_h200.py --dry-run: its device-time plan counts the candidates this
    call runs (--no-grid, --c1, --only; the recipe heads the c1 part as its anchor) at the
    budget each is given, so a session can size its batch from it."""
    tune_h200 = _tune_h200()
    argv = ["--dry-run", "--no-grid", "--c1", "--c1-candidate-s", "200",
            "--only", "recipe", "c1-cg-full", "c1-no-async"]  # fmt: skip
    assert tune_h200.main(argv) == 0
    plan = capsys.readouterr().out.splitlines()[-2]
    assert plan.startswith("0 grid + 3 c1 + 0 drafting candidates: about 10 min of device time"), (
        plan
    )
    assert tune_h200.main(["--dry-run", "--only", "recipe", "bf16-triton-64"]) == 0
    plan = capsys.readouterr().out.splitlines()[-2]
    assert plan.startswith("2 grid + 0 c1 + 0 drafting candidates: about 30 min"), plan
    assert tune_h200.main(["--dry-run", "--no-grid", "--drafting"]) == 0
    plan = capsys.readouterr().out.splitlines()[-2]
    assert plan.startswith("0 grid + 0 c1 + 7 drafting candidates: about 82 min"), plan


def test_the_device_plan_says_how_many_runs_a_win_needs_over_everything_screened(capsys):
    """A session's candidates join the configurations already screened for a goal (the
    committed results): the plan says how many runs of each a win then needs, so a session
    whose repeats cannot show one is known to be a screen before it spends device time (the
    H100 drafting screen of 2026-12-05, 3 runs, could not make DSpark's 1.64x a win)."""
    from lab.tune.noise import runs_to_show
    from tools.tune_pages import runs_needed

    plan = lambda names: {"tune-1k": ([1], names), "agent": ([16], names)}  # noqa: E731
    committed = dict((g, n) for g, n, _ in runs_needed(plan(["x"])))
    # a candidate already screened counts once; a new one adds one; one-user points
    # do not reach the many-users goal
    again = runs_needed(plan(["x", "dspark-k7", "mtp-k7"]))
    assert [(g, n) for g, n, _ in again] == [(g, n) for g, n in committed.items()]
    assert [g for g, _, _ in again] == ["latency", "agent"]
    assert all(r == runs_to_show(n) for _, n, r in again)
    wider = dict((g, n) for g, n, _ in runs_needed({"agent": ([16], ["x", "y"])}))
    assert wider == {"agent": committed["agent"] + 1}
    # a candidate counts for the workloads it is measured on only
    assert (
        dict((g, n) for g, n, _ in runs_needed({"tune-1k": ([1], ["x"]), "agent": ([16], ["y"])}))
        == committed
    )
    tune_h200 = _tune_h200()
    base = ["--dry-run", "--no-grid", "--drafting", "--co-tenant", "--only", "recipe", "dspark-k7"]
    assert tune_h200.main([*base, "--repeats", "3"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    n = committed["latency"] - 1  # without "x": DSpark K=7 is among the committed
    assert f"latency: {n} configurations, {runs_to_show(n)} runs" in line
    assert "--repeats 3 is a screen for latency" in line, line
    assert tune_h200.main([*base, "--repeats", "6"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("--repeats 6 can show a win")


def test_the_co_tenant_points_can_be_narrowed_and_a_bad_one_stops_before_any_server(capsys):
    """tools/device/tune_h200.py --points: a session short of device time measures a workload
    at fewer concurrencies (the agent workload at 16 only); a misspelled workload or a bad
    concurrency is refused before any server starts, naming the form."""
    tune_h200 = _tune_h200()
    assert tune_h200.co_tenant_points(["agent:16"]) == {"tune-1k": [1], "agent": [16]}
    assert tune_h200.co_tenant_points(None) == tune_h200.CO_TENANT_CONCURRENCIES
    base = ["--dry-run", "--no-grid", "--drafting", "--co-tenant", "--only", "recipe", "dspark-k7"]
    assert tune_h200.main([*base, "--points", "agent:16"]) == 0
    assert "concurrencies {'tune-1k': [1], 'agent': [16]}" in capsys.readouterr().out
    assert tune_h200.co_tenant_points(["agent:none"]) == {"tune-1k": [1], "agent": []}
    with pytest.raises(SystemExit, match="no workload"):
        tune_h200.co_tenant_points(["agent:none", "tune-1k:none"])
    for bad in ("agnt:16", "agent:0", "agent:", "agent:x"):
        with pytest.raises(SystemExit, match="WORKLOAD:C"):
            tune_h200.main([*base, "--points", bad])


def test_a_misspelled_flag_in_any_candidate_is_refused_in_step_1_before_any_launch():
    """tuning.ipynb step 1 reads every candidate's command back against its release's flag
    table: a typo in the last candidate is named with the candidate, not found after the
    earlier candidates' sweeps."""
    base = resolve("h200")
    cands = tuning.make_candidates(base, [{"name": "seqs64", "extra_args": {"--max-num-seqs": 64}},
                                          {"name": "seqs8", "extra_args": {"--max-num-seq": 8}}])  # fmt: skip
    with pytest.raises(BenchError, match=r"candidate 'seqs8': .*--max-num-seq\b.*--max-num-seqs"):
        tuning.check_candidates(cands)
    tuning.check_candidates(cands[:2])  # the recipe and a good one pass
    source = (REPO_ROOT / "cookbook" / "topics" / "tuning.py").read_text()
    assert source.index("check_candidates(") < source.index("result = tuning.tune(")
