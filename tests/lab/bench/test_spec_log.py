"""lab.bench.spec_log: vLLM's periodic speculative-decoding line in every wording since 0.8.5,
parsed and judged, and the finding on a running server's log; the recorded lines are vLLM
0.32.0's own (tests/data/runtime/server_ngram.log, n-gram drafting on the stand-in)."""

from __future__ import annotations

import pytest

from helpers.server.diagnose import diagnose
from helpers.server.review import review
from lab.bench.spec_log import parse_spec_decode_line, spec_decode_finding, spec_decode_stats
from tests.support import DATA as TEST_DATA

SPEC_LINE = (
    "(APIServer pid=812) INFO 11-30 04:10:12 [metrics.py:121] SpecDecoding metrics: Mean acceptance "
    "length: 1.31, Accepted throughput: 13.40 tokens/s, Drafted throughput: 302.37 tokens/s, "
    "Per-position acceptance rate: 0.181, 0.067, 0.039, 0.014, 0.009, 0.000, 0.000, Avg Draft "
    "acceptance rate: 4.4%"
)


def test_spec_decode_line_parsed_with_verdict():
    # the periodic SpecDecoding line: acceptance and a verdict on it
    s = parse_spec_decode_line(SPEC_LINE)
    assert s.mean_acceptance_length == 1.31
    assert s.per_position == (0.181, 0.067, 0.039, 0.014, 0.009, 0.0, 0.0)
    assert s.draft_acceptance_rate_pct == 4.4
    assert s.level == "warning"
    assert s.verdict.startswith(
        "not paying off: check num_speculative_tokens against the drafter's block size"
    )
    d = spec_decode_finding(SPEC_LINE)
    assert d.name == "spec_decode" and d.level == "warning"
    assert "not paying off" in d.message and "block size" in d.message


@pytest.mark.parametrize(
    "line, length, rate, accepted",
    [
        # vLLM 0.26.0-0.32.0 (vllm/v1/spec_decode/metrics.py): with Accepted / Drafted counts
        (
            "SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, "
            "Drafted throughput: 302.37 tokens/s, Accepted: 0 tokens, Drafted: 4032 tokens, "
            "Per-position acceptance rate: 0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.0%",
            1.0,
            0.0,
            0,
        ),
        # vLLM 0.8.5 V1: rate first
        (
            "SpecDecoding metrics: Draft acceptance rate: 0.0%, Mean acceptance length: 1.00, "
            "Accepted: 0 tokens, Drafted: 4032 tokens, Per-position acceptance rate: 0.000, 0.000",
            1.0,
            0.0,
            0,
        ),
        # pre-V1 engine (vllm 0.8.5 vllm/engine/metrics.py): a fraction, named counts
        (
            "Speculative metrics: Draft acceptance rate: 0.000, System efficiency: 0.250, Number of "
            "speculative tokens: 3, Number of accepted tokens: 0, Number of draft tokens: 4032, Number "
            "of emitted tokens: 1344.",
            None,
            0.0,
            0,
        ),
    ],
)
def test_spec_decode_accepted_nothing_every_wording(line, length, rate, accepted):
    s = parse_spec_decode_line(line)
    assert s.mean_acceptance_length == length and s.draft_acceptance_rate_pct == rate
    assert s.accepted_tokens == accepted and s.drafted_tokens == 4032
    assert s.level == "error" and s.verdict.startswith("speculative decoding accepted nothing")
    d = spec_decode_finding(line)
    assert d.level == "error" and d.cause == "speculative decoding accepted nothing"


def test_recorded_spec_decode_lines_of_the_cpu_server():
    """vLLM 0.32.0's own lines (tests/data/runtime/server_ngram.log, n-gram drafting on the
    stand-in): every one parses, accepted nothing, and their Drafted counts add up to the
    server's vllm:spec_decode_num_draft_tokens_total (136)."""
    log = (TEST_DATA / "runtime" / "server_ngram.log").read_text()
    stats = spec_decode_stats(log)
    assert len(stats) == log.count("SpecDecoding metrics:") > 0
    assert sum(s.drafted_tokens for s in stats) == 136
    assert all(s.accepted_tokens == 0 and len(s.per_position) == 3 for s in stats)
    assert {s.level for s in stats} == {"error"}
    d = spec_decode_finding(log)
    assert d.cause == "speculative decoding accepted nothing" and d.level == "error"
    # the real stats lines: busy, never a stall (nor any other finding of the core's review)
    assert diagnose(log) is None and review(log) == []


def test_a_line_that_pays_off_and_a_start_up_log_are_no_finding():
    paying = SPEC_LINE.replace("length: 1.31", "length: 2.60")
    assert parse_spec_decode_line(paying).verdict == "paying off: 2.60 tokens per target-model step"
    assert spec_decode_finding(paying) is None
    assert spec_decode_finding((TEST_DATA / "logs" / "startup_cpu.log").read_text()) is None
