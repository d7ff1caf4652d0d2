"""lab.bench.acceptance against the session's stand-in server (real prompts, vLLM's custom
dataset)."""

from __future__ import annotations

import pytest

from lab.bench.acceptance import DRAFTED_NOTHING, measure_acceptance


@pytest.mark.server
def test_an_acceptance_run_that_drafted_nothing_still_has_a_verdict(standin_server, tmp_path):
    """A real-prompt acceptance run during which nothing was drafted (here: a server without
    --speculative-config; on a loaded CI machine a drafting run once did the same) has the
    same columns as any other row, with a verdict saying so (the speculative notebook's table
    selects ``spec_decode_verdict``: it raised KeyError on a976314)."""
    row = measure_acceptance(standin_server, num_prompts=2, output_len=8, out_dir=tmp_path)
    assert row["completed"] == 2
    assert row["spec_decode_level"] == "warning" and row["spec_decode_verdict"] == DRAFTED_NOTHING
