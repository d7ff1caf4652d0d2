"""The GPU's weightless defaults, rehearsed in CI on noise text (``noise_server``: the
stand-in's architecture untrained, with the weightless tokenizer, on the real vLLM CPU build).

A GPU-only combination of defaults used to break unseen: on an H200 (2026-12-01, weightless)
the h200 notebook stopped at step 10 on a reasoning budget of 1024 against the weightless
``max_tokens`` of 256, and the agents notebook's first schema answer got HTTP 500 (the
weightless tokenizer could not spell ``{``). Here the notebooks run with ``stand_in = False,
weightless = True`` attached to the noise server, with every default resolved as on a GPU
(``helpers.config.run``) except the sizes each test names.
"""

from __future__ import annotations

import json
import re
import time
from typing import Literal

import pydantic
import pytest

from helpers.config.run import Run, run_defaults
from helpers.errors import ServerRequestError
from helpers.paths import REPO_ROOT
from lab.agents.structured import structured_chat
from tests.support.notebook_checks import assert_clean_outputs, real_out_notebooks
from tools import notebook_run

pytestmark = [pytest.mark.notebook, pytest.mark.server]


def _output_text(executed) -> str:
    """What the executed notebook's cells printed and showed (not their source)."""
    cells = json.loads(executed.read_text())["cells"]
    return "\n".join(
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
    )  # fmt: skip


def test_the_target_template_runs_top_to_bottom_with_the_weightless_gpu_defaults(
    noise_server, noise_kernel
):
    """notebooks/h200.ipynb (the target template; the other target notebooks differ only in
    registry data: test_committed_notebooks_match_the_template) with the weightless GPU
    defaults. What the CPU cannot carry is cut, and only that: the benchmark runs one point
    (concurrency 1, 32 in / 16 out) instead of 1 / 16 / 64 / 256 at 1024 / 256, the accuracy
    step 6 items instead of 20, and each reply 32 tokens instead of 256 (a noise token costs
    25-80 ms here). The sampling (1.0 / 0.95) and the eval's concurrency (32) stay the GPU's."""
    gpu = run_defaults("weightless")
    assert (gpu.max_tokens, gpu.temperature, gpu.budgets) == (256, 1.0, ("off", 64, None))
    assert run_defaults("weightless", max_tokens=32).budgets == ("off", 8, None)
    book = REPO_ROOT / "notebooks" / "h200.ipynb"
    started = time.time()
    executed = notebook_run.run_notebook(
        book,
        {"install": False, "stand_in": False, "weightless": True, "server_url": noise_server.url,
         "max_tokens": 32, "bench_concurrencies": [1], "bench_input_len": 32,
         "bench_output_len": 16, "quality": {"items": 6}},
        output=real_out_notebooks() / "h200-weightless-noise.ipynb", progress=False,
        kernel=noise_kernel,
    )  # fmt: skip
    print(f"\nh200 notebook, weightless defaults on noise: {time.time() - started:.0f} s")
    text = executed.read_text()
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "libraries for the later steps: lm_eval, scipy import" in text  # step 1
    assert "attach mode: the server runs elsewhere" in text
    assert "max_tokens=32 temperature=1.0 top_p=0.95" in text  # step 3: the GPU's sampling
    assert "Scoring 6 items through lm-eval" in text  # step 10: accuracy only
    assert "Weightless run (random weights): the answers are noise" in text
    assert "Reasoning-budget curve" not in text  # the curve is the quality notebook's
    assert noise_server.is_running()  # attached, left alone
    assert_clean_outputs(executed, stand_in=False)


def test_the_quality_notebook_sizes_its_budget_curve_from_the_weightless_max_tokens(
    noise_server, noise_kernel
):
    """notebooks/quality.ipynb with the weightless GPU defaults, on noise: the rule that sizes
    the budget curve from ``max_tokens`` (off / 64 / no cap at 256, off / 8 / no cap at 32: a
    budget of 1024 against either failed the h200 notebook on an H200, 2026-12-01) stays the
    GPU's; 6 items instead of 50, each reply 32 tokens."""
    book = REPO_ROOT / "notebooks" / "quality.ipynb"
    executed = notebook_run.run_notebook(
        book,
        {"install": False, "stand_in": False, "weightless": True, "server_url": noise_server.url,
         "max_tokens": 32, "quality": {"items": 6}},
        output=real_out_notebooks() / "quality-weightless-noise.ipynb", progress=False,
        kernel=noise_kernel,
    )  # fmt: skip
    text = executed.read_text()
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "Weightless run (random weights): the answers are noise" in text
    assert "Reasoning-budget curve on 6 items" in text
    for budget in ("off", "8", "no cap"):
        assert re.search(rf"\\n\s*\d+\s+{budget}\s", text) or f">{budget}<" in text, budget
    assert '"Step 4 skipped' in text
    assert noise_server.is_running()  # attached, left alone
    assert_clean_outputs(executed, stand_in=False, benchmarks=False)


def test_the_agents_notebook_on_noise_text_completes_and_says_what_did_not(
    noise_server, noise_kernel
):
    """notebooks/agents.ipynb as on a GPU with ``weightless = True`` (greedy, 64 tokens, so the
    noise is the same on every run). Every cell completes; no schema request fails on the
    server (the weightless tokenizer spells JSON); what cannot complete on noise (a schema
    answer of spaced-out characters, reasoning that never closes, the agent) says so by
    name instead of raising."""
    book = REPO_ROOT / "notebooks" / "agents.ipynb"
    executed = notebook_run.run_notebook(
        book,
        {"install": False, "stand_in": False, "weightless": True, "server_url": noise_server.url,
         "temperature": 0.0, "max_tokens": 64},
        output=real_out_notebooks() / "agents-noise.ipynb", progress=False,
        kernel=noise_kernel,
    )  # fmt: skip
    assert noise_server.is_running()  # attached, left alone
    text = executed.read_text()
    assert "Traceback" not in text and '"output_type": "error"' not in text
    said = _output_text(executed)
    assert "ServerRequestError" not in said and "failed POST" not in said  # no request failed
    assert "libraries for the later steps: pydantic_ai, anthropic import" in text
    valid = re.search(
        r"schema answers validated with pydantic: thinking off (\d) of 2, thinking on (\d) of 2", text
    )  # fmt: skip
    assert valid, "the schema section did not count its answers"
    missing = 4 - int(valid.group(1)) - int(valid.group(2))
    reported = text.count(
        "weightless mode: the schema answer did not complete because the text is noise"
    )
    assert reported >= missing
    for api in ("chat completions", "responses", "messages"):
        assert api in text
    assert (
        "weightless mode: the agent did not complete because the text is noise" in text
        or "answer WarmerCity(" in text
    )
    assert "schema + tools: TypeError: structured_chat: `tools` are not sent" in text


class Accent(pydantic.BaseModel):
    word: Literal["café"]


def test_a_server_500_is_the_helpers_error_with_the_servers_words_and_its_log(noise_server):
    """A schema the served tokenizer cannot spell (``café``: the weightless vocabulary has
    ASCII only) makes vLLM 0.32.0 end the request (``grammar rejected tokens ... Terminating
    request``) and answer HTTP 500 with "Internal server error" only. The helpers raise
    their own ``ServerRequestError`` with the server's words, the cause and the log's lines,
    never the SDK's traceback; weightless mode does not pass it off as noise."""
    client = noise_server.client()
    weightless = Run("weightless")
    for noise in (False, weightless.noise):  # weightless mode does not pass it off as noise
        with pytest.raises(ServerRequestError) as e:
            structured_chat(client, noise_server.model_name, "Say café.", Accent, thinking=False,
                            max_tokens=32, temperature=0.0, noise_tolerant=noise)  # fmt: skip
        said = str(e.value)
        assert (
            f"The server at {noise_server.base_url} failed POST /v1/chat/completions (HTTP 500)"
            in said
        )
        assert "Cause: guided decoding could not follow the schema's grammar" in said
        assert "grammar rejected tokens" in said  # the log's own line
        assert f"Log: {noise_server.log_path}" in said
        assert e.value.__cause__ is None and e.value.__suppress_context__  # no SDK traceback
