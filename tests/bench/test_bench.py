"""helpers.bench: loading recorded ``vllm bench serve`` JSON, /metrics arithmetic, a live sweep.

Recorded fixtures in ``tests/data/bench/`` (:data:`DATA`, real runs of
``helpers.bench.sweep`` against the stand-in on vLLM 0.32.0 CPU); the live tests sweep the
session's stand-in server.
"""

from __future__ import annotations

import json
import math
import shutil
import time

import pandas as pd
import pytest

from helpers import errors
from helpers.bench import metrics as metrics_mod
from helpers.bench import point, results, sizing
from helpers.bench import sweep as bench
from helpers.errors import CookbookError
from helpers.server import stall
from tests.support import DATA as TEST_DATA

#: Served through ``helpers.server.vllm_server.VLLMServer`` with the ``cpu`` target plus
#: ``--no-enable-prefix-caching`` (per-request lists trimmed): ``standin-c1.json`` /
#: ``standin-c2.json`` (``sweep([1, 2])``, random dataset, 32 in / 16 out tokens, 8 prompts,
#: goodput SLOs ttft:200 tpot:50); ``ngram-c2.json`` (the ``ngram`` speculative mode, greedy,
#: no warm-up, so vLLM's spec-decode numbers cover exactly the requests between the two
#: scrapes; an earlier point ran first, so the "before" counters are not zero);
#: ``metrics_before.prom`` / ``metrics_after.prom`` (``GET /metrics`` right before and after
#: the ``ngram-c2`` point, cut to the spec-decode, prefix-cache, token and one histogram family).
DATA = TEST_DATA / "bench"
RUNTIME = TEST_DATA / "runtime"


# ---------------------------------------------------------------- load_results


def test_load_results_reads_recorded_folder():
    df = results.load_results(DATA)
    assert list(df["label"]) == ["ngram", "standin", "standin"]
    assert list(df["concurrency"]) == [2, 1, 2]
    assert (df["failed"] == 0).all() and (df["completed"] == 8).all()
    for col in ("request_throughput", "output_throughput", "total_token_throughput"):
        assert (df[col] > 0).all(), col
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "p99"):
            assert f"{stat}_{metric}_ms" in df.columns


def test_load_results_derived_columns_match_the_json():
    path = DATA / "standin-c2.json"
    raw = json.loads(path.read_text())
    row = results.load_results(path).iloc[0]
    assert row["label"] == "standin" and row["concurrency"] == raw["max_concurrency"] == 2
    assert row["input_len"] == 32 and row["output_len"] == 16 and row["gpu_count"] == 1
    assert row["output_throughput"] == pytest.approx(raw["output_throughput"])
    assert row["output_throughput_per_gpu"] == pytest.approx(raw["output_throughput"] / 1)
    # tokens/s per user is defined as 1000 / mean TPOT (ms)
    assert row["tokens_per_s_per_user"] == pytest.approx(1000.0 / raw["mean_tpot_ms"])
    # ... and the whole-response variant as mean output tokens / mean E2EL (s)
    assert row["e2e_tokens_per_s_per_user"] == pytest.approx(
        raw["total_output_tokens"] / raw["completed"] / (raw["mean_e2el_ms"] / 1000)
    )
    assert row["request_goodput"] == pytest.approx(raw["request_goodput"])
    assert row["p99_ttft_ms"] == pytest.approx(raw["p99_ttft_ms"])
    assert row["path"] == str(path)


def test_load_results_per_gpu_divides_by_gpu_count(tmp_path):
    raw = json.loads((DATA / "standin-c1.json").read_text())
    raw["gpu_count"] = "4"  # --metadata values arrive as strings
    (tmp_path / "p.json").write_text(json.dumps(raw))
    row = results.load_results(tmp_path).iloc[0]
    assert row["gpu_count"] == 4
    assert row["output_throughput_per_gpu"] == pytest.approx(raw["output_throughput"] / 4)


def test_load_results_spec_decode_and_optional_columns():
    spec = results.load_results(DATA / "ngram-c2.json")
    assert spec.loc[0, "spec_decode_acceptance_length"] > 1.0
    assert 0 < spec.loc[0, "spec_decode_acceptance_rate"] <= 100
    assert "request_goodput" not in spec.columns  # no SLOs on that run
    plain = results.load_results([DATA / "standin-c1.json", DATA / "standin-c2.json"])
    assert "spec_decode_acceptance_length" not in plain.columns
    assert "request_goodput" in plain.columns


def test_load_results_errors_name_the_fix(tmp_path):
    with pytest.raises(errors.BenchError, match="Run helpers.bench.sweep.sweep"):
        results.load_results(tmp_path)
    with pytest.raises(errors.BenchError, match="No benchmark result"):
        results.load_results(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    with pytest.raises(errors.BenchError, match="not a vllm bench serve result"):
        results.load_results(tmp_path)
    assert issubclass(errors.BenchError, CookbookError)


# ---------------------------------------------------------------- /metrics


def test_parse_prometheus_sums_label_sets_and_skips_created():
    text = (DATA / "metrics_after.prom").read_text()
    values = metrics_mod.parse_prometheus(text)
    assert values["vllm:spec_decode_num_drafts_total"] == 16.0
    assert values["vllm:spec_decode_num_draft_tokens_total"] == 47.0
    assert values["vllm:spec_decode_num_accepted_tokens_per_pos_total"] == 3 + 0 + 0
    assert "vllm:spec_decode_num_drafts_created" in values  # own name, never mixed in
    assert values["python_gc_objects_collected_total"] == 14889 + 3624 + 527


def test_parse_prometheus_label_values_with_spaces_and_braces():
    # parsed by prometheus_client's own text parser: escapes, timestamps
    text = 'm{a="x y}",b="q\\"z"} 2.5\nm{a="k"} 1.5 1700000000000\nn 3\n'
    assert metrics_mod.parse_prometheus(text) == {"m": 4.0, "n": 3.0}


def test_parse_prometheus_rejects_text_that_is_not_exposition():
    with pytest.raises(errors.BenchError, match="not Prometheus exposition.*server root"):
        metrics_mod.parse_prometheus("<html>bad line</html>\n")


def test_acceptance_from_recorded_metrics_matches_vllm_bench():
    """Counter deltas around a point give the acceptance that vLLM's benchmark reported."""
    before = metrics_mod.spec_decode_counters((DATA / "metrics_before.prom").read_text())
    after = metrics_mod.spec_decode_counters((DATA / "metrics_after.prom").read_text())
    acc = metrics_mod.acceptance_from_counters(before, after)
    reported = json.loads((DATA / "ngram-c2.json").read_text())
    assert before.num_drafts > 0  # deltas, not totals
    assert acc["spec_decode_num_drafts"] == reported["spec_decode_num_drafts"] == 14
    assert acc["spec_decode_accepted_tokens"] == reported["spec_decode_accepted_tokens"]
    assert acc["spec_decode_acceptance_length"] == pytest.approx(
        reported["spec_decode_acceptance_length"]
    )
    assert acc["spec_decode_acceptance_rate"] == pytest.approx(
        reported["spec_decode_acceptance_rate"]
    )
    # acceptance length = 1 + accepted / drafts
    assert acc["spec_decode_acceptance_length"] == pytest.approx(1 + 3 / 14)
    assert acc["spec_decode_acceptance_rate"] == pytest.approx(3 / 41 * 100)


def test_acceptance_none_without_spec_decode_or_drafts():
    assert metrics_mod.spec_decode_counters("vllm:num_requests_running 0.0\n") is None
    same = metrics_mod.SpecDecodeCounters(10, 30, 20)
    assert metrics_mod.acceptance_from_counters(same, same) is None
    assert metrics_mod.acceptance_from_counters(None, same) is None


def test_annotate_fills_missing_spec_decode_from_scrapes(tmp_path):
    """The fallback for a benchmark JSON without spec-decode keys (e.g. an older client)."""
    raw = json.loads((DATA / "ngram-c2.json").read_text())
    expected = raw["spec_decode_acceptance_length"]
    for key in [k for k in raw if k.startswith("spec_decode")]:
        del raw[key]
    path = tmp_path / "old-client.json"
    path.write_text(json.dumps(raw))
    before = metrics_mod.parse_prometheus((DATA / "metrics_before.prom").read_text())
    after = metrics_mod.parse_prometheus((DATA / "metrics_after.prom").read_text())
    written = path.read_text()
    results.annotate_point(path, before, after)
    assert path.read_text() == written  # vLLM's JSON is not rewritten: a sidecar holds the rest
    data = results.read_point(path)
    assert data["spec_decode_source"] == "metrics_scrape"
    assert data["spec_decode_acceptance_length"] == pytest.approx(expected)
    assert "cookbook_prefix_cache_hit_rate" not in data  # prefix caching was off: no queries
    side = json.loads(results.sidecar_path(path).read_text())
    assert side["spec_decode_source"] == "metrics_scrape"
    assert results.sidecar_path(path).name == "old-client.json.annotations"
    row = results.load_results(path).iloc[0]
    assert row["spec_decode_acceptance_length"] == pytest.approx(expected)


def test_annotate_prefix_cache_hit_rate(tmp_path):
    path = tmp_path / "p.json"
    shutil.copy(DATA / "standin-c1.json", path)
    before = {metrics_mod.PREFIX_CACHE_QUERIES: 100.0, metrics_mod.PREFIX_CACHE_HITS: 10.0}
    after = {metrics_mod.PREFIX_CACHE_QUERIES: 300.0, metrics_mod.PREFIX_CACHE_HITS: 60.0}
    results.annotate_point(path, before, after)
    assert json.loads(path.read_text()) == json.loads((DATA / "standin-c1.json").read_text())
    assert results.load_results(path).loc[0, "prefix_cache_hit_rate"] == pytest.approx(50 / 200)
    # a folder load finds the point, reads its sidecar, and does not take the sidecar for a point
    assert list(results.load_results(tmp_path)["prefix_cache_hit_rate"]) == [
        pytest.approx(50 / 200)
    ]


def test_a_point_whose_requests_mostly_waited_in_vllms_queue_is_named_a_queue(tmp_path):
    """vLLM's histograms of queue time and end-to-end latency around a point give the share of
    request time spent waiting; above one half the point measured a queue (the H100 MTP K=7
    server of 2026-12-06 ran 15 of 64: 49 / 64 of the time waiting), and the sidecar says how
    many ran at once; a server that kept up gets the share and no warning."""
    data = json.loads((DATA / "standin-c1.json").read_text())
    queued, e2e = metrics_mod.QUEUE_TIME_SUM, metrics_mod.E2E_TIME_SUM
    for c, waited, said in (
        (64, 49 / 64, "at most about 15 ran at once, not 64"),
        (16, 0.05, None),
    ):
        path = tmp_path / f"p{c}.json"
        path.write_text(json.dumps({**data, "max_concurrency": c}))
        notes = results.annotate_point(
            path, {queued: 5.0, e2e: 40.0}, {queued: 5.0 + 100 * waited, e2e: 140.0}
        )
        assert notes["cookbook_queue_share"] == pytest.approx(waited, abs=0.001)
        assert (
            (said in notes["cookbook_queue_warning"])
            if said
            else "cookbook_queue_warning" not in notes
        )
        row = results.load_results(path).iloc[0]
        assert row["queue_share"] == pytest.approx(waited, abs=0.001)
    # no request finished between the scrapes: nothing to say
    assert metrics_mod.queue_share({e2e: 3.0}, {e2e: 3.0}) is None


def test_annotate_keeps_vllm_numbers(tmp_path):
    path = tmp_path / "p.json"
    shutil.copy(DATA / "ngram-c2.json", path)
    fake_after = {metrics_mod.SPEC_DECODE_DRAFTS: 1e9, metrics_mod.SPEC_DECODE_DRAFT_TOKENS: 3e9,
                  metrics_mod.SPEC_DECODE_ACCEPTED_TOKENS: 1e9}  # fmt: skip
    notes = results.annotate_point(path, {}, fake_after)
    assert json.loads(path.read_text()) == json.loads((DATA / "ngram-c2.json").read_text())
    # vLLM's own figures win on the row: the sidecar holds only what vLLM's JSON lacks
    assert not {k for k in notes if k in json.loads(path.read_text())} - {
        "spec_decode_level",
        "spec_decode_verdict",
    }
    raw = json.loads(path.read_text())
    row = results.load_results(path).iloc[0]
    assert row["spec_decode_acceptance_length"] == pytest.approx(
        raw["spec_decode_acceptance_length"]
    )


# ---------------------------------------------------------------- small pure helpers


def test_server_root_and_seeds():
    assert metrics_mod.server_root("http://h:1/v1/") == "http://h:1"
    assert metrics_mod.server_root("http://h:1") == "http://h:1"
    seeds = {sizing.point_seed(0, "a", c, 128, 64) for c in (1, 2, 4, 8)}
    seeds.add(sizing.point_seed(0, "b", 1, 128, 64))
    seeds.add(sizing.point_seed(0, "a", 1, 256, 64))
    assert len(seeds) == 6  # every point its own dataset seed
    assert sizing.point_seed(3, "a", 1, 1, 1) == sizing.point_seed(3, "a", 1, 1, 1)
    assert sizing.default_num_prompts(1) == 16
    assert sizing.default_num_prompts(64) == 256 > 2 * 64


def test_unreachable_server_raises_bench_error():
    from helpers.server.processes import free_port

    port = free_port()
    with pytest.raises(errors.BenchError, match="Start it"):
        metrics_mod.scrape_metrics(f"http://127.0.0.1:{port}/v1", timeout=2)


# ---------------------------------------------------------------- live


@pytest.mark.server
def test_sweep_against_standin_server(standin_server, standin_model, tmp_path):
    model = standin_server.models()[0]
    df = bench.sweep(
        standin_server.base_url,
        model,
        standin_model,
        [1, 2],
        input_len=24,
        output_len=8,
        num_prompts=4,
        out_dir=tmp_path,
        label="live",
        slo={"ttft": 60000, "tpot": 60000},
        progress=False,
    )
    jsons = sorted(p.name for p in tmp_path.glob("*.json"))
    assert jsons == ["live-c1.json", "live-c2.json"]  # one JSON per point
    assert list(df["concurrency"]) == [1, 2]
    assert (df["completed"] > 0).all() and (df["failed"] == 0).all()
    for col in ("request_throughput", "output_throughput", "total_token_throughput",
                "output_throughput_per_gpu", "request_goodput"):  # fmt: skip
        assert (df[col] > 0).all(), col
    assert df["mean_ttft_ms"].notna().all() and df["p99_e2el_ms"].notna().all()
    # The CPU target serves without prefix caching (its Mamba "align" cache mode fails on the
    # CPU build, cookbook/recipe.yaml): the server counts no prefix-cache queries, so no hit
    # rate is recorded (a reading from a server that does cache: test_annotate_prefix_cache_hit_rate).
    # (load_results leaves out a column no point measured.)
    assert "--no-enable-prefix-caching" in standin_server.config.cli_flags()
    assert "prefix_cache_hit_rate" not in df.columns
    assert not any(
        "cookbook_prefix_cache_hit_rate" in json.loads(p.read_text())
        for p in tmp_path.glob("*.json")
    )
    again = results.load_results(tmp_path)
    pd.testing.assert_frame_equal(again, df)
    # at most 2 in flight on a server of 4 slots: requests hardly waited, no queue warning
    assert (df["queue_share"] < 0.5).all() and "queue_warning" not in df.columns


def _wait_until_idle(base_url: str, timeout: float = 120.0) -> None:
    """Until the shared stand-in server runs and queues no request: a request an earlier test
    left running would finish inside the point and add its long latency, with no queue time,
    to the share's denominator (a CI run read 0.463 against 0.67-0.70 here)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = stall.parse_prometheus(metrics_mod.scrape_metrics(base_url))
        if m.get(stall.NUM_RUNNING, 1) == 0 and m.get(stall.NUM_WAITING, 1) == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"the stand-in server at {base_url} stayed busy for {timeout:.0f} s")


def test_a_sweep_beyond_the_servers_slots_warns_that_it_measured_a_queue(
    standin_server, standin_model, tmp_path, capsys
):
    """The stand-in runs 4 requests at once (--max-num-seqs 4): at 16 in flight vLLM's own
    queue-time histogram shows most of the requests' time spent waiting, and the sweep says the
    point measured a queue: on average at most about N running (4 in steady state; more is
    counted while the point ramps up and drains), not 16."""
    _wait_until_idle(standin_server.base_url)
    df = bench.sweep(standin_server, [16], input_len=24, output_len=64, num_prompts=64,
                     out_dir=tmp_path, label="queued", progress=False)  # fmt: skip
    row = df.iloc[0]
    assert row["queue_share"] > 0.5, row["queue_share"]
    ran = round(16 * (1 - row["queue_share"]))
    assert 4 <= ran <= 8 and f"at most about {ran} ran at once, not 16" in row["queue_warning"]
    said = capsys.readouterr()
    assert "WARNING queued concurrency 16: requests spent" in said.out + said.err
    assert not math.isnan(df.loc[0, "duration_s"])


def test_sweep_takes_the_server_it_measures(fake_vllm, tmp_path):
    """``sweep(srv)`` reads the model, tokenizer and GPUs from the server itself."""
    from helpers.server import launch

    srv = fake_vllm().start()
    # the launched handle: its config names the served model, the model folder and the GPUs
    root, model, tokenizer, gpus, cfg = bench._measured(srv, None, None, None)
    assert (root, model, tokenizer, gpus) == (srv.url, "fake-model", "fake-model", 1)
    assert cfg is srv.config
    # an attached server has no config: GET /v1/models gives the id and what vLLM loaded
    attached = launch.attach_server(srv.base_url)
    assert bench._measured(attached, None, None, None)[1:4] == ("fake-model", "fake-model", 1)
    # explicit arguments win; the URL form keeps working as before
    assert bench._measured(srv, "m", str(tmp_path), 4)[1:4] == ("m", str(tmp_path), 4)
    assert bench._measured(srv.base_url, "m", "t", None)[:4] == (srv.url, "m", "t", 1)


def test_http_to_the_server_ignores_proxy_settings(fake_vllm, monkeypatch):
    """One HTTP stack (helpers.server.httpio, httpx with trust_env=False): a proxy in the
    environment that cannot reach the server does not turn it into "no answer"."""
    from helpers.bench import metrics
    from helpers.server import httpio

    srv = fake_vllm().start()
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens on the discard port
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    assert httpio.get(srv.url + "/health", timeout=5)[0] == 200
    assert srv.healthy() and metrics._healthy(srv.url)
    assert metrics._served_models(srv.url) == ["fake-model"]
    with pytest.raises(ConnectionError, match="GET http://127.0.0.1:9/health failed"):
        httpio.get("http://127.0.0.1:9/health", timeout=2)


def test_sweep_names_what_a_url_or_an_object_lacks():
    with pytest.raises(errors.BenchError, match="pass model and tokenizer too"):
        bench.sweep("http://127.0.0.1:9/v1", concurrencies=[1])
    with pytest.raises(errors.BenchError, match="has no .base_url"):
        bench.sweep(object(), concurrencies=[1])


def test_a_scenario_name_or_an_agent_mapping_is_refused_with_the_labs_call():
    """The core reads no scenario catalogue: a name is refused naming the lab's lookup, and an
    agent workload needs the scenario object that writes its sessions (its point_writer)."""
    with pytest.raises(errors.BenchError, match=r"lab\.bench\.scenarios\.scenario\('chat', srv\)"):
        bench._check_scenario("chat")
    with pytest.raises(errors.BenchError, match="writes each point's sessions itself"):
        bench._check_scenario({"input_len": 8, "output_len": 4, "agent": {"turns": 2}})
    shape = {"input_len": 8, "output_len": 4}
    assert bench._check_scenario(shape) is shape and bench._check_scenario(None) is None


@pytest.mark.server
def test_sweep_of_the_server_object(standin_server, standin_model, tmp_path, capsys):
    """``sweep(srv)``: the same point as the URL form, with nothing but the server. The point
    prints its ``vllm bench serve`` line: vLLM's own parser reads from it the arguments the
    point ran (the point's log, its saved JSON)."""
    import shlex

    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    df = bench.sweep(standin_server, concurrencies=[1], input_len=16, output_len=4, num_prompts=2,
                     num_warmups=0, out_dir=tmp_path, label="object", progress=False)  # fmt: skip
    assert list(df["concurrency"]) == [1] and int(df.loc[0, "completed"]) == 2
    assert df.loc[0, "gpu_count"] == 1  # the stand-in config's 0 GPUs count as 1
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("vllm bench serve")]
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    printed = parser.parse_args(shlex.split(line)[3:])
    ran = json.loads((tmp_path / "object-c1.json").read_text())
    assert (printed.backend, printed.model, printed.tokenizer) == (
        ran["backend"], ran["model_id"], ran["tokenizer_id"]
    )  # fmt: skip
    assert (printed.num_prompts, printed.max_concurrency, printed.label) == (2, 1, "object")
    assert (printed.random_input_len, printed.random_output_len, printed.num_warmups) == (16, 4, 0)
    assert printed.result_filename == "object-c1.json" and printed.save_result
    assert printed.base_url == standin_server.url and printed.metadata[:2] == [
        "gpu_count=1",
        "input_len=16",
    ]
    logged = (tmp_path / "object-c1.log").read_text().splitlines()[0]
    assert logged == line  # the point's log starts with the same line


@pytest.mark.server
def test_run_point_rejects_unknown_model(standin_server, standin_model, tmp_path):
    with pytest.raises(errors.BenchError, match="not 'no-such-model'"):
        point.run_point(
            standin_server.base_url, "no-such-model", standin_model, concurrency=1,
            num_prompts=1, input_len=8, output_len=4, out_dir=tmp_path, seed=0, num_warmups=0,
        )  # fmt: skip


# ---------------------------------------------------------------- drafts of which none accepted


def test_counters_with_nothing_accepted_give_an_error_verdict_on_the_row(tmp_path):
    """+576 drafts, +4032 draft tokens, +0 accepted over a point: an error verdict."""
    before = metrics_mod.SpecDecodeCounters(100, 700, 50)
    after = metrics_mod.SpecDecodeCounters(100 + 576, 700 + 4032, 50 + 0)
    acc = metrics_mod.acceptance_from_counters(before, after)
    assert acc["spec_decode_acceptance_length"] == 1.0
    assert acc["spec_decode_level"] == "error"
    assert acc["spec_decode_verdict"].startswith("speculative decoding accepted nothing")
    assert "576 drafts, 4032 draft tokens, 0 accepted" in acc["spec_decode_verdict"]
    # on the row: a point whose JSON has vLLM's own acceptance keys gets the verdict from the
    # scrapes (the real ngram-c2 point, with its counters replaced by the failing deltas)
    raw = json.loads((DATA / "ngram-c2.json").read_text())
    for key in [k for k in raw if k.startswith("spec_decode")]:
        del raw[key]
    path = tmp_path / "dflash-c64.json"
    path.write_text(json.dumps(raw))
    prom = lambda c: {metrics_mod.SPEC_DECODE_DRAFTS: c.num_drafts, metrics_mod.SPEC_DECODE_DRAFT_TOKENS: c.num_draft_tokens,  # noqa: E731
                      metrics_mod.SPEC_DECODE_ACCEPTED_TOKENS: c.num_accepted_tokens}  # fmt: skip
    results.annotate_point(path, prom(before), prom(after))
    row = results.load_results(path).iloc[0]
    assert row["spec_decode_level"] == "error"
    assert row["spec_decode_verdict"].startswith("speculative decoding accepted nothing")
    assert row["spec_decode_acceptance_length"] == 1.0


def test_nothing_accepted_over_too_few_draft_tokens_is_not_an_error():
    """Zero accepted is an error only over enough draft tokens to rule out chance."""
    few = metrics_mod.MIN_DRAFT_TOKENS_TO_JUDGE
    # the recorded stand-in point: 7 drafts, 21 draft tokens, 0 accepted (2 prompts at c1)
    small = {"spec_decode_num_drafts": 7, "spec_decode_draft_tokens": 21,
             "spec_decode_accepted_tokens": 0, "spec_decode_acceptance_length": 1.0}  # fmt: skip
    v = metrics_mod.acceptance_verdict(small)
    assert v["spec_decode_level"] == "too few drafts"
    assert v["spec_decode_verdict"].startswith("21 draft tokens, 0 accepted: too few to judge")
    assert (
        f"at least {few}" in v["spec_decode_verdict"]
        and "measure_acceptance" in v["spec_decode_verdict"]
    )
    # at the threshold the same zero is an error, on random and on real prompts
    for dataset in (None, "real:gsm8k"):
        enough = {**small, "spec_decode_draft_tokens": few, "dataset": dataset}
        assert metrics_mod.acceptance_verdict(enough)["spec_decode_level"] == "error"
    # one accepted token over few drafts is measured, not judged an error
    one = {**small, "spec_decode_accepted_tokens": 1, "spec_decode_acceptance_length": 1 + 1 / 7}
    assert metrics_mod.acceptance_verdict(one)["spec_decode_level"] == "random prompts"
    # the constant is the least draft count at which a 5 % drafter accepts none under 1 %
    assert 0.95**few < 0.01 <= 0.95 ** (few - 1)


def test_acceptance_verdict_from_vllm_json_alone():
    # vLLM's own keys with a 0 % rate and no counters: still an error
    assert (
        metrics_mod.acceptance_verdict(
            {"spec_decode_acceptance_rate": 0.0, "spec_decode_acceptance_length": 1.0}
        )["spec_decode_level"]
        == "error"
    )
    # the recorded ngram point (length 1.21, random prompts with --ignore-eos): the load's, not
    # real text's nor a bound on it (no "lower bound": n-gram can draft a forced answer's
    # repeats), never "not paying off" on that evidence
    v = metrics_mod.acceptance_verdict(json.loads((DATA / "ngram-c2.json").read_text()))
    assert v["spec_decode_level"] == "random prompts"
    assert "1.21 tokens per target step on random prompts" in v["spec_decode_verdict"]
    assert "nor a bound on it" in v["spec_decode_verdict"]
    assert "lower bound" not in v["spec_decode_verdict"]
    assert "not paying off" not in v["spec_decode_verdict"]
    assert "measure_acceptance" in v["spec_decode_verdict"]
    # the same figure measured on real prompts is judged: a warning naming the block size
    real = {**json.loads((DATA / "ngram-c2.json").read_text()), "dataset": "real:gsm8k"}
    v = metrics_mod.acceptance_verdict(real)
    assert v["spec_decode_level"] == "warning"
    assert v["spec_decode_verdict"].startswith("not paying off: acceptance length 1.21 on real")
    assert "num_speculative_tokens against the drafter's block size" in v["spec_decode_verdict"]
    assert (
        metrics_mod.acceptance_verdict(
            {"spec_decode_acceptance_length": 2.6, "dataset": "real:gsm8k"}
        )["spec_decode_level"]
        == "ok"
    )
    assert metrics_mod.acceptance_verdict({"completed": 3}) == {}
    # a point without speculative decoding has no verdict column
    assert "spec_decode_verdict" not in results.load_results(DATA / "standin-c1.json").columns


def test_recorded_ngram_sweep_point_accepted_nothing():
    """A real point: the stand-in (vLLM 0.32.0 CPU) with n-gram drafting on random prompts
    (benchmarks/record_runtime.py) drafted and accepted nothing; the row says so."""
    idle = metrics_mod.spec_decode_counters((RUNTIME / "metrics_idle.txt").read_text())
    after = metrics_mod.spec_decode_counters((RUNTIME / "metrics_after.txt").read_text())
    acc = metrics_mod.acceptance_from_counters(idle, after)
    assert (
        acc["spec_decode_num_drafts"],
        acc["spec_decode_draft_tokens"],
        acc["spec_decode_accepted_tokens"],
    ) == (48, 136, 0)
    assert acc["spec_decode_level"] == "error"  # 136 draft tokens: enough to judge
    # vLLM's own counts for the measured requests (the warm-up drafted the rest): 86 draft
    # tokens, below MIN_DRAFT_TOKENS_TO_JUDGE, so the row says too few rather than an error
    row = results.load_results(RUNTIME / "bench" / "ngram-standin-c8.json").iloc[0]
    assert row["spec_decode_level"] == "too few drafts"
    assert row["spec_decode_verdict"].startswith("86 draft tokens, 0 accepted: too few to judge")


def test_recorded_busy_scrape_has_both_gauges():
    values = metrics_mod.parse_prometheus((RUNTIME / "metrics_busy.txt").read_text())
    assert values[stall.NUM_RUNNING] == 4.0 and values[stall.NUM_WAITING] == 4.0
    assert not stall.StallDetector(timeout=0).observe_metrics(0, values)  # busy, not stalled


def test_publishing_points_leaves_no_lock_file_in_the_temp_folder(tmp_path, monkeypatch):
    """The publish lock lives in the results folder it guards; the system's temp folder gets
    nothing (one empty lock file per results folder piled up there)."""
    from helpers.bench import staging

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    stage, folder = tmp_path / ".partial-x", tmp_path / "bench"
    stage.mkdir()
    (stage / "run-c1.json").write_text("{}")
    (folder / "old").mkdir(parents=True)
    (folder / "run-c1.json").write_text('{"old": true}')
    assert staging.publish(stage, folder, "run", [stage / "run-c1.json"]) == [
        folder / "run-c1.json"
    ]
    assert json.loads((folder / "run-c1.json").read_text()) == {}
    assert list(temp.iterdir()) == []
    assert sorted(p.name for p in folder.iterdir()) == [staging.PUBLISH_LOCK, "old", "run-c1.json"]
