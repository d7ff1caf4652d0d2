"""An engine that stops: a start-up whose log goes silent in one phase, and a running engine
whose token counters stop with requests running (helpers.server.vllm_server: the start wait,
``engine_counters``, ``progress_check``; helpers.server.stall: ``engine_hung``,
``silent_phase``).

The counters are read from the real CPU server; the decision logic from the fake server
(tests/support/fake_vllm_server.py: ``--silent-capturing``, ``--running N``), whose
``/metrics`` uses vLLM's metric names and types (vllm/v1/metrics/loggers.py, 0.32.0).
"""

from __future__ import annotations

import dataclasses

import pytest

from helpers.config import resolve as recipes
from helpers.errors import ServerStartError
from helpers.server import vllm_server as server_mod
from helpers.server.stall import engine_hung, silent_phase


def test_a_start_silent_in_graph_capture_says_which_phase_how_long_and_what_to_try(
    fake_vllm, monkeypatch
):
    monkeypatch.setattr(server_mod, "HEARTBEAT_S", 1.0)
    monkeypatch.setattr(server_mod, "SILENT_S", 1.0)
    seen: list[str] = []
    srv = fake_vllm("--silent-capturing", startup_timeout=4, progress=lambda ph, t: seen.append(ph))
    with pytest.raises(ServerStartError) as ei:
        srv.start()
    msg = str(ei.value)
    assert srv.phase == "capturing CUDA graphs (0/35)"
    assert "it was 'capturing CUDA graphs (0/35)' since" in msg
    assert "no log line for" in msg and "--max-cudagraph-capture-size" in msg
    assert "--enforce-eager" in msg
    # the heartbeat said it before the timeout did
    assert any("no log line for" in ph and ph.startswith("still capturing") for ph in seen), seen


def _nvls(cfg, value):
    """``cfg`` with ``NCCL_NVLS_ENABLE`` set to ``value`` (None: unset)."""
    env = {k: v for k, v in (cfg.env or {}).items() if k != "NCCL_NVLS_ENABLE"}
    return dataclasses.replace(cfg, env={**env, **({"NCCL_NVLS_ENABLE": value} if value else {})})


def test_a_silent_weight_load_on_several_gpus_names_nccl_nvls(monkeypatch):
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    tp8 = recipes.resolve("h100x8-bf16")
    assert "NVIDIA/nccl #2167" in silent_phase("loading weights (3/13 shards)", _nvls(tp8, None))
    assert "disk or network" in silent_phase("loading weights", _nvls(tp8, "0"))
    assert "disk or network" in silent_phase("loading weights", recipes.resolve("h200"))


def test_a_hung_engine_is_named_from_its_counters(fake_vllm):
    srv = fake_vllm("--running", "2", progress=False).start()
    d = srv.progress_check(seconds=1.5, poll=0.5)
    assert d is not None and d.name == "engine_stalled"
    assert d.cause.startswith("engine hung: 2 requests running, no token counted for 2 s")
    assert "its log silent for" in d.cause  # the fake logs nothing once ready
    assert "vllm #52682" in d.cause and "py-spy dump" in d.fix  # one GPU: a blocked kernel


def test_a_hung_data_and_expert_parallel_engine_matches_its_report(fake_vllm):
    srv = fake_vllm(
        "--running", "3", "--data-parallel-size", "2", "--enable-expert-parallel", progress=False
    ).start()
    d = srv.progress_check(seconds=1.0, poll=0.5)
    assert "vllm #43547" in d.cause and "--data-parallel-size 1" in d.fix


def test_an_idle_engine_is_not_hung(fake_vllm):
    srv = fake_vllm(progress=False).start()
    assert srv.engine_counters() == {"running": 0.0, "waiting": 0.0, "tokens": 157.0}
    assert srv.progress_check(seconds=5.0, poll=0.5) is None  # nothing runs: at once


def test_hung_words_name_nvls_on_several_gpus(monkeypatch):
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    tp8 = recipes.resolve("h100x8-bf16")
    on = engine_hung(70, 4, _nvls(tp8, None))
    assert "NVIDIA/nccl #2167" in on.cause and "NCCL_NVLS_ENABLE=0" in on.fix
    assert "vllm #52682" in engine_hung(70, 4, _nvls(tp8, "0")).cause


@pytest.mark.server
def test_the_real_servers_counters_move_with_a_request(standin_server):
    srv = standin_server
    before = srv.engine_counters()
    assert before["running"] == 0 and before["waiting"] == 0
    srv.client().chat.completions.create(
        model=srv.model_name, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    after = srv.engine_counters()
    assert after["tokens"] > before["tokens"]  # prompt + generated tokens were counted
    assert srv.progress_check(seconds=1.0, poll=0.5) is None  # nothing runs now
