"""Memory planner: hand-computed byte counts, the seeds' configurations, and a real server's figures."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from helpers.config import load
from helpers.config import resolve as recipes
from helpers.errors import RecipeError
from helpers.memory import architecture, planner, tokenbudget
from lab import plan_check
from tests.support import DATA as TEST_DATA
from tests.support import TESTS

GiB = 2**30


def test_architecture_from_the_registry():
    model = load.load_registry().model
    a = architecture.Architecture.from_schema(model.architecture, model.context_length_default)
    # MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME: 52 layers
    assert (len(a.pattern), a.num_mamba_layers, a.num_moe_layers, a.num_attention_layers) == (
        52,
        23,
        23,
        6,
    )
    assert (a.num_kv_heads, a.head_dim) == (2, 128)
    assert (a.mamba_num_heads, a.mamba_head_dim, a.ssm_state_size, a.n_groups, a.conv_kernel) == (
        64,
        64,
        128,
        8,
        4,
    )


def test_h100_nvfp4_byte_counts_by_hand():  # on the seeds' pin, 0.28.0 (2 Mamba blocks per request)
    """1x H100, NVFP4, --kv-cache-dtype fp8, --mamba-ssm-cache-dtype float16 (fast_ssm_cache)."""
    # the arithmetic at 0.9 (unset, vLLM's default is 0.92: test_the_default_utilization_is_the_release_s)
    cfg = recipes.resolve(
        "h100", vllm_version="0.28.0", extra_args={"--gpu-memory-utilization": 0.9}
    )
    assert (
        cfg.args["--kv-cache-dtype"] == "fp8" and cfg.args["--mamba-ssm-cache-dtype"] == "float16"
    )
    p = planner.plan(cfg)

    # KV: 2 (K, V) x 2 KV heads x 128 head_dim x 1 byte (fp8) = 512 B per token per layer
    assert p.kv_bytes_per_token_per_layer == 2 * 2 * 128 * 1 == 512
    # x 6 attention layers = 3072 B per token
    assert p.kv_bytes_per_token == 512 * 6 == 3072

    # Mamba conv state: conv_dim = 64 heads x 64 head_dim + 2 x 8 groups x 128 state = 4096 + 2048 = 6144
    # (conv_kernel - 1) = 3 rows -> 18432 elements x 2 B (bf16, the model dtype) = 36864 B
    assert p.mamba_conv_bytes_per_layer == (64 * 64 + 2 * 8 * 128) * 3 * 2 == 36_864
    # SSM state: 64 heads x 64 head_dim x 128 state = 524288 elements x 2 B (float16) = 1 MiB
    assert p.mamba_ssm_bytes_per_layer == 64 * 64 * 128 * 2 == 1_048_576
    # one layer 1,085,440 B; 23 Mamba layers -> 24,965,120 B (23.81 MiB) per sequence
    assert p.mamba_state_bytes_per_layer == 1_085_440
    assert p.mamba_state_bytes_per_seq == 1_085_440 * 23 == 24_965_120

    # Page alignment: block = 16 x ceil(1085440 / (16 x 512)) = 16 x ceil(132.5) = 16 x 133 = 2128 tokens
    assert p.block_size == 16 * math.ceil(1_085_440 / (16 * 512)) == 2128
    # page = 2128 x 512 = 1,089,536 B; the Mamba page is padded by 4096 B (0.38 %)
    assert p.page_bytes == 2128 * 512 == 1_089_536
    assert round(p.mamba_padding_pct, 2) == round(100 * 4096 / 1_085_440, 2) == 0.38

    # Groups of min(6, 23) = 6 layers: 1 attention + ceil(23 / 6) = 4 Mamba groups (1 padding layer)
    assert (p.group_size, p.attention_groups, p.mamba_groups) == (6, 1, 4)
    # one pool block = 6 pages = 6,537,216 B
    assert p.bytes_per_block == 6 * 1_089_536 == 6_537_216

    # budget: 80 GiB x 0.9 - 18 GiB weights - 4 GiB reserve = 50 GiB = 53,687,091,200 B
    assert p.kv_budget_bytes == int((80 * 0.9 - 18 - 4) * GiB) == 53_687_091_200
    # blocks = 53,687,091,200 // 6,537,216 = 8212
    assert p.num_blocks == 53_687_091_200 // 6_537_216 == 8212

    # a request of L tokens: ceil(L / 2128) attention blocks + 4 Mamba groups x 2 blocks (align
    # mode on the target's pinned vLLM 0.28.0; 3 from vLLM 0.32.0)
    assert p.vllm_version == "0.28.0"
    assert p.mamba_cache_mode == "align" and p.mamba_blocks_per_group == 2
    assert p.blocks_per_request(262_144) == math.ceil(262_144 / 2128) + 4 * 2 == 124 + 8
    # max_model_len 262,144 (the checkpoint default): 8212 / 132 = 62.21 requests; 16.3M tokens
    assert p.max_model_len == 262_144
    assert round(p.max_concurrency(), 2) == round(8212 / 132, 2) == 62.21
    assert p.kv_cache_tokens == int(8212 / 132 * 262_144)


def test_seed_config_256_seqs_on_one_h100_nvfp4_fits():
    """vendor 003: 32000 in / 2000 out at concurrency 256 on 1x H100 NVFP4, fp8 KV, recipe flags."""
    cfg = recipes.resolve(
        "h100", vllm_version="0.28.0", extra_args={"--gpu-memory-utilization": 0.9}
    )
    assert int(cfg.args["--max-num-seqs"]) == 256
    p = planner.plan(cfg, max_model_len=34_048)
    # ceil(34048 / 2128) = 16 attention blocks + 8 Mamba blocks = 24 -> 8212 // 24 = 342 >= 256
    assert p.blocks_per_request(34_048) == 16 + 8
    assert p.seqs_at_context == 8212 // 24 == 342
    assert p.fits and p.status == "fits" and not p.reasons
    # at the default 262,144-token context it starts, but only 62 full-length sequences fit at once
    d = planner.plan(cfg)
    assert d.starts and not d.fits and d.seqs_at_context == 62
    assert "--max-num-seqs" in d.reasons[0]
    # and 256 sequences at once fit up to (8212 // 256 - 8) x 2128 = 24 x 2128 = 51,072 tokens each
    assert d.max_len_for() == (8212 // 256 - 8) * 2128 == 51_072


def test_bf16_on_one_h100_leaves_little_room():
    """launch post: BF16 on 1x H100 (60 GB of weights on 80 GB)."""
    p = planner.plan(
        recipes.resolve(
            "h100-bf16", vllm_version="0.27.1", extra_args={"--gpu-memory-utilization": 0.9}
        )
    )
    # KV dtype auto = bf16: 2 x 2 x 128 x 2 B = 1024 B per token per layer, 6144 B per token
    assert p.kv_bytes_per_token == 6144
    # block = 16 x ceil(1085440 / (16 x 1024)) = 16 x 67 = 1072 tokens; page 1,097,728 B
    assert (p.block_size, p.page_bytes) == (1072, 1072 * 1024)
    # budget 80 x 0.9 - 60 - 4 = 8 GiB -> 8 GiB // (6 x 1,097,728) = 1304 blocks
    assert p.kv_budget_bytes == 8 * GiB and p.num_blocks == 8 * GiB // (6 * 1_097_728) == 1304
    # 1304 / (ceil(262144 / 1072) + 8) = 1304 / 253 = 5.15 full-length requests
    assert round(p.max_concurrency(), 2) == round(1304 / 253, 2) == 5.15
    # 256 sequences: even their Mamba state (256 x 12 blocks > 1304) does not fit
    assert p.max_len_for(256) == 0 and p.status == "partial"
    assert "Mamba state" in p.reasons[0]
    nv = planner.plan(recipes.resolve("h100"))
    assert p.kv_budget_bytes < nv.kv_budget_bytes / 6


def test_fp32_ssm_cache_doubles_the_state_and_tp_splits_it():
    """h100x8-bf16: TP 8, default SSM dtype (float32), MTP 3 speculative tokens."""
    p = planner.plan(recipes.resolve("h100x8-bf16", vllm_version="0.28.0"))
    assert p.tensor_parallel == 8 and p.num_speculative_tokens == 3 and p.ssm_dtype == "float32"
    # KV heads per GPU = max(1, 2 // 8) = 1 -> 2 x 1 x 128 x 2 B = 512 B per token per layer
    assert p.kv_bytes_per_token_per_layer == 512
    # conv: 6144 / 8 = 768 channels x (3 + 3 speculative) rows x 2 B = 9216 B
    assert p.mamba_conv_bytes_per_layer == 768 * 6 * 2 == 9216
    # SSM: 64 / 8 = 8 heads x 64 x 128 x 4 B (float32) = 262,144 B
    assert p.mamba_ssm_bytes_per_layer == 8 * 64 * 128 * 4 == 262_144
    # block = 16 x ceil(271360 / 8192) = 16 x 34 = 544 tokens
    assert p.block_size == 544
    # align mode on the pinned 0.28.0: 2 + 3 speculative blocks per Mamba group
    assert p.mamba_blocks_per_group == 5
    # weights split over 8 GPUs: 60 / 8 = 7.5 GiB each
    assert p.weights_gib == 7.5


def test_kv_cache_dtype_and_ssm_dtype_change_the_numbers():
    base = recipes.resolve("h100")
    fp8 = planner.plan(base)
    auto = planner.plan(base.with_args({"--kv-cache-dtype": "auto"}))
    assert auto.kv_bytes_per_token == 2 * fp8.kv_bytes_per_token
    f32 = planner.plan(base.with_args({"--mamba-ssm-cache-dtype": None}))
    assert (
        f32.ssm_dtype == "float32"
        and f32.mamba_ssm_bytes_per_layer == 2 * fp8.mamba_ssm_bytes_per_layer
    )
    low = planner.plan(base, activation_reserve_gb=10)
    assert low.kv_budget_bytes == fp8.kv_budget_bytes - 6 * GiB
    given = planner.plan(base, kv_budget_gb=20)
    assert given.kv_budget_bytes == 20 * GiB and given.budget_source.startswith("given")
    # --kv-cache-memory-bytes read as vLLM reads it (human_readable_int: K/M/G binary, k/m/g decimal)
    for value, size in (("20G", 20 * GiB), ("20g", 20 * 10**9), (str(3 * GiB), 3 * GiB)):
        flag = planner.plan(base.with_args({"--kv-cache-memory-bytes": value}))
        assert flag.kv_budget_bytes == size and flag.budget_source == "--kv-cache-memory-bytes"
    # a spelling vLLM refuses is refused here too, by name, not planned as a zero budget
    with pytest.raises(RecipeError, match=r"--kv-cache-memory-bytes '20GiB' is not a size"):
        planner.plan(base.with_args({"--kv-cache-memory-bytes": "20GiB"}))


def test_dflash_drafter_weights_count():
    p = planner.plan(recipes.resolve("h100", speculative="dflash"))
    assert p.drafter_gib == 1 and p.num_speculative_tokens == 3
    assert any("drafter" in n for n in p.notes)


def test_unfit_configurations_are_flagged_with_the_fix():
    # weights alone exceed a 16 GiB GPU
    p = planner.plan(recipes.resolve("h100"), gpu_memory_gb=16)
    assert p.status == "no-start" and not p.fits and "weights" in p.reasons[0]
    with pytest.raises(RecipeError, match="weights"):
        p.raise_if_unfit()
    # the Baseten preset's 1M context on 1 GiB of KV budget: one request does not fit
    q = planner.plan(recipes.resolve("h100-baseten-throughput"), kv_budget_gb=1)
    assert q.max_model_len == 1_048_576 and q.status == "no-start"
    assert re.search(r"--max-model-len \d+ or less", q.reasons[0])
    assert q.max_len_for(1) < 1_048_576


def test_summary_and_frame_for_the_notebook():
    p = planner.plan(recipes.resolve("h100"))
    text = p.summary()
    assert "KV cache size" in text and "3,072 B/token" in text and "23.81 MiB/sequence" in text
    df = p.to_frame()
    assert list(df.columns) == ["quantity", "value", "unit", "how"] and len(df) >= 10
    assert "<pre>" in p._repr_html_()


def test_every_gpu_target_plans():
    for target in (t for t in list(load.load_registry().targets) if t != "cpu"):
        p = planner.plan(recipes.resolve(target))
        assert p.kv_budget_gib > 0 and p.status in ("fits", "partial"), target


# ---------------------------------------------------------------------------------------------
# against vLLM's own figures
# ---------------------------------------------------------------------------------------------

LOG = """\
(EngineCore pid=1) INFO 11-29 20:10:29 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='/m', speculative_config=None, tokenizer='/m', dtype=torch.bfloat16, max_seq_len=2048
(Worker pid=2) INFO 11-29 20:10:51 [interface.py:1120] Padding mamba page size by 258.04% to ensure that mamba page size and attention page size are exactly equal.
(Worker pid=2) INFO 11-29 20:11:32 [cpu_worker.py:260] Explicitly set (1.0/14.96) GiB for KV cache on node 0.
(EngineCore pid=1) INFO 11-29 20:11:32 [kv_cache_utils.py:2327] CPU KV cache size: 3,532,045 tokens, Maximum concurrency for 2,048 tokens per request: 1724.63x
"""


def test_recorded_server_log_of_a_small_nemotron_h():
    """A vLLM 0.32 CPU server's log for a Nemotron-H with layers M * - (1 KV head x 64, Mamba
    4 x 32, state 16, 1 group, float32 checkpoint served as bf16), VLLM_CPU_KVCACHE_SPACE=1:
    the planner reproduces its figures exactly."""
    cfg_json = {
        "hybrid_override_pattern": "M*-", "hidden_size": 128, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 64, "mamba_num_heads": 4, "mamba_head_dim": 32,
        "ssm_state_size": 16, "n_groups": 1, "conv_kernel": 4, "torch_dtype": "float32",
        "mamba_ssm_cache_dtype": "float32", "max_position_embeddings": 4096,
    }  # fmt: skip
    arch = architecture.Architecture.from_hf_config(cfg_json)
    # that server ran with prefix caching on (vLLM's default: Mamba cache "align" mode)
    recorded = recipes.resolve("cpu", extra_args={"--no-enable-prefix-caching": None})
    p = planner.plan(recorded, architecture=arch)
    # attention: 2 x 1 x 64 x 2 B = 256 B/token; Mamba: conv 3 x (128 + 32) x 2 B = 960 B,
    # SSM 4 x 32 x 16 x 4 B = 8192 B -> 9152 B; block 128 (CPU), page 128 x 256 = 32768 B
    assert (p.kv_bytes_per_token_per_layer, p.mamba_state_bytes_per_layer, p.page_bytes) == (
        256,
        9152,
        32768,
    )
    # 1 GiB / 32768 = 32768 blocks; a 2048-token request: 16 + 1 Mamba group x 3 = 19 blocks
    assert p.num_blocks == 32768 and p.blocks_per_request(2048) == 19
    figures = plan_check.server_log_figures(LOG)
    assert figures == {
        "kv_cache_tokens": 3_532_045, "max_model_len": 2048, "max_concurrency": 1724.63,
        "mamba_padding_pct": 258.04, "kv_budget_gib": 1.0, "dtype": "bfloat16",
    }  # fmt: skip
    table = plan_check.compare_with_server(p, LOG)
    assert (table["diff_pct"].abs() < 0.01).all(), table


#: vLLM 0.26.0 on the H200 (docs/results/h200.md, "Memory"): the figures its logs gave, in its
#: own line format (vllm/v1/core/kv_cache_utils.py 0.26.0 logs "GPU KV cache size" and
#: "Maximum concurrency" on two lines; vllm/platforms/interface.py; vllm/v1/worker/gpu_worker.py).
H200_LOGS = {
    "bf16": """\
(EngineCore pid=1349) INFO 11-29 20:23:58 [interface.py:905] Setting attention block size to 1072 tokens to ensure that attention page size is >= mamba page size.
(EngineCore pid=1349) INFO 11-29 20:23:58 [interface.py:929] Padding mamba page size by 1.13% to ensure that mamba page size and attention page size are exactly equal.
(EngineCore pid=1349) INFO 11-29 20:24:40 [gpu_worker.py:436] Available KV cache memory: 66.79 GiB
(EngineCore pid=1349) INFO 11-29 20:24:40 [kv_cache_utils.py:2177] GPU KV cache size: 5,574,656 tokens
(EngineCore pid=1349) INFO 11-29 20:24:40 [kv_cache_utils.py:2178] Maximum concurrency for 8,192 tokens per request: 680.50x
""",
    "nvfp4": """\
(EngineCore pid=2131) INFO 11-29 20:28:47 [interface.py:905] Setting attention block size to 2128 tokens to ensure that attention page size is >= mamba page size.
(EngineCore pid=2131) INFO 11-29 20:28:47 [interface.py:929] Padding mamba page size by 0.38% to ensure that mamba page size and attention page size are exactly equal.
(EngineCore pid=2131) INFO 11-29 20:29:31 [gpu_worker.py:436] Available KV cache memory: 106.45 GiB
(EngineCore pid=2131) INFO 11-29 20:29:31 [kv_cache_utils.py:2177] GPU KV cache size: 11,935,061 tokens
(EngineCore pid=2131) INFO 11-29 20:29:31 [kv_cache_utils.py:2178] Maximum concurrency for 8,192 tokens per request: 1456.92x
""",
}


@pytest.mark.parametrize("variant", ["bf16", "nvfp4"])
def test_planner_matches_the_h200_servers_kv_capacity(variant):
    """The full-size architecture on vLLM 0.26.0 (H200, h200 recipe + the reference settings):
    with the server's measured KV budget the planner gives its KV tokens within 0.01 %;
    0.26.0 holds 2 Mamba blocks per group per request in align mode, 0.32.0 holds 3."""
    from helpers.weights import weightless

    figures = plan_check.server_log_figures(H200_LOGS[variant])
    assert set(figures) >= {"kv_cache_tokens", "max_concurrency", "max_model_len", "kv_budget_gib"}
    cfg = recipes.resolve("h200", variant, extra_args={
        "--max-model-len": 8192, "--max-num-seqs": 256, "--max-num-batched-tokens": 16384,
        "--enable-prefix-caching": True,
    })  # fmt: skip
    arch = architecture.Architecture.from_hf_config(weightless.arch_hf_config(variant))
    p = planner.plan(
        cfg, architecture=arch, kv_budget_gb=figures["kv_budget_gib"], vllm_version="0.26.0"
    )
    assert p.mamba_blocks_per_group == 2 and p.vllm_version == "0.26.0"
    assert p.block_size == figures["block_size"]
    table = plan_check.compare_with_server(p, H200_LOGS[variant])
    # the log rounds the budget to 0.01 GiB: 0.005 % at most
    assert (table["diff_pct"].abs() <= 0.01).all(), table
    # the version is what moved it: with 0.32.0's three blocks the plan is 25 % short
    p32 = planner.plan(
        cfg, architecture=arch, kv_budget_gb=figures["kv_budget_gib"], vllm_version="0.32.0"
    )
    assert p32.mamba_blocks_per_group == 3
    assert p32.kv_cache_tokens < 0.8 * figures["kv_cache_tokens"]


def test_align_mamba_blocks_by_vllm_version():
    assert [
        planner.align_mamba_blocks(v)
        for v in ("0.26.0", "0.28.0", "0.31.9", "0.32.0", "0.32.0+cpu", "1.0.0")
    ] == [2, 2, 2, 3, 3, 3]
    assert planner.align_mamba_blocks(None) == planner.align_mamba_blocks("nightly") == 3
    # the plan takes the target's pinned vLLM when none is given
    assert (
        planner.plan(recipes.resolve("h100")).vllm_version == recipes.resolve("h100").vllm_version
    )
    assert planner.plan(recipes.resolve("h100"), vllm_version="0.32.0").mamba_blocks_per_group == 3


@pytest.mark.server
def test_planner_matches_the_standin_servers_kv_capacity(standin_server):
    """The stand-in server's "KV cache size" and "Maximum concurrency" lines vs the planner,
    from the stand-in's config.json and the server's VLLM_CPU_KVCACHE_SPACE: within 10 %."""
    cfg = standin_server.config
    assert cfg.env.get("VLLM_CPU_KVCACHE_SPACE"), "the cpu target sizes the KV cache explicitly"
    p = planner.plan(cfg)
    assert p.arch.source.endswith("config.json")
    figures = plan_check.server_log_figures(standin_server.log_path)
    assert {"kv_cache_tokens", "max_concurrency"} <= set(figures), standin_server.log_tail(60)
    assert figures["max_model_len"] == p.max_model_len == int(cfg.args["--max-model-len"])
    assert figures["dtype"] == p.model_dtype
    assert figures["kv_budget_gib"] == pytest.approx(p.kv_budget_gib)
    table = plan_check.compare_with_server(p, standin_server.log_path)
    print("\n" + table.to_string(index=False))
    assert (table["diff_pct"].dropna().abs() <= 10).all(), table
    assert abs(p.kv_cache_tokens - figures["kv_cache_tokens"]) <= 0.10 * figures["kv_cache_tokens"]


def test_more_seqs_than_cache_blocks_is_refused_before_launch_as_vllm_would():
    """vLLM (vllm/config/compilation.py) refuses to capture full decode CUDA graphs for a Mamba
    model when --max-num-seqs exceeds the pool's blocks: the planner says so before launch,
    with the same number the diagnosis of tests/data/logs/mamba_cache_blocks.log gives after."""
    from helpers.server.diagnose import diagnose

    cfg = recipes.resolve("h100")
    per_block = planner.plan(cfg).bytes_per_block  # 6 pages of 1,089,536 B
    budget = (180 * per_block + 1024) / GiB  # room for exactly 180 blocks
    p = planner.plan(cfg, kv_budget_gb=budget, max_model_len=4096)
    assert p.num_blocks == 180 and p.max_num_seqs == 256 and p.full_cudagraphs
    assert not p.starts and p.status == "no-start"
    assert "lower --max-num-seqs to 180" in p.reasons[0]
    with pytest.raises(RecipeError, match="--max-num-seqs"):
        p.raise_if_unfit()
    after = diagnose((TEST_DATA / "logs" / "mamba_cache_blocks.log").read_text())
    assert "lower --max-num-seqs to 180" in after.fix
    # without full CUDA graphs there is no such limit: the extra sequences only queue
    eager = planner.plan(
        recipes.resolve("h100", extra_args={"--enforce-eager": True}),
        kv_budget_gb=budget,
        max_model_len=4096,
    )
    assert not eager.full_cudagraphs and eager.starts and eager.status == "partial"
    # nor on the CPU build
    assert not planner.plan(recipes.resolve("cpu")).full_cudagraphs


# ---------------------------------------------------------------- speculative token budget


def _dflash16(target="h200", version="0.32.0"):
    return dataclasses.replace(
        recipes.resolve(target, speculative="dflash").with_args(
            {"--max-num-batched-tokens": 2048, "--max-num-seqs": 256,
             "--speculative-config": {"method": "dflash", "num_speculative_tokens": 16}}
        ),
        vllm_version=version,
    )  # fmt: skip


def test_dflash_token_budget_refused_before_launch_with_both_fixes():
    """--max-num-batched-tokens 2048, --max-num-seqs 256, DFlash K=16.

    Every decoding sequence schedules 1 + K = 17 tokens (256 x 17 = 4352, the issue's
    figure); vLLM 0.32.0's scheduler also charges DFlash's K = 16 drafting slots per request
    (``input_budget -= num_new_tokens + draft_slots``, vllm/v1/core/sched/scheduler.py;
    ``max_num_new_slots_for_drafting`` = K for dflash), so all 256 decode in one step only
    from 256 x 33 = 8448 tokens, and 2048 holds 2048 // 33 = 62 sequences.
    """
    p = planner.plan(_dflash16())
    assert p.status == "refused" and not p.fits
    reason = p.reasons[-1]
    assert "256 x 17 = 4352" in reason
    assert "raise --max-num-batched-tokens to 8448 or more" in reason
    assert "lower --max-num-seqs to 62 or less" in reason
    with pytest.raises(RecipeError, match="--max-num-batched-tokens to 8448.*--max-num-seqs to 62"):
        p.raise_if_unfit()
    assert "REFUSED" in p.summary()


def test_dflash_token_budget_on_vllm_0_26_is_the_logged_refusal():
    """vLLM 0.26.0 lowers max_num_scheduled_tokens by (K - 1) x max_num_seqs up front:
    2048 - 15 x 256 = -1792, the number of the issue's log line; vLLM refuses to start."""
    p = planner.plan(_dflash16(version="0.26.0"))
    assert p.status == "no-start"
    tb = p.token_budget
    assert tb.scheduled_tokens == -1792 and tb.vllm_refuses
    assert "refuses to start" in p.reasons[-1] and "-1792" in p.reasons[-1]
    assert (tb.needed, tb.seqs_that_fit) == (8192, 64)


@pytest.mark.parametrize(
    "method, k, version, slots",
    [
        ("dflash", 16, "0.32.0", 16), ("dflash", 16, "0.28.0", 16), ("dflash", 16, "0.27.1", 15),
        ("dspark", 7, "0.32.0", 6), ("dspark", 7, "0.26.0", 6), ("mtp", 3, "0.32.0", 0),
        ("ngram", 3, "0.32.0", 0), ("draft_model", 3, "0.32.0", 1), ("draft_model", 3, "0.27.0", 1),
        ("dflash", 3, "nightly", 3),
    ],
)  # fmt: skip
def test_drafting_slots_follow_each_release(method, k, version, slots):
    # vllm/config/speculative.py max_num_new_slots_for_drafting, read in each release's wheel
    assert tokenbudget.drafting_slots(method, k, version) == slots


def test_token_budget_that_fits_and_the_registry_targets():
    ok = tokenbudget.spec_token_budget(32768, 512, "dflash", 3, "0.27.0")  # the Baseten preset
    assert ok.fits and ok.needed == 512 * (1 + 3 + 2)
    # no registry target is refused for its token budget
    for name, t in load.load_registry().targets.items():
        if t.stand_in:
            continue
        for mode in t.speculative_modes or []:
            p = planner.plan(recipes.resolve(name, speculative=mode))
            assert p.token_budget is None or p.token_budget.fits, (name, mode, p.reasons)


def test_the_plan_states_the_prefix_reuse_floor_and_what_prefix_match_unit_changes():
    """vLLM 0.32.0 resolve_kv_cache_block_sizes: hits on whole blocks, or on --prefix-match-unit
    boundaries (a divisor of the block) where a Mamba state is stored."""
    cfg = recipes.resolve("h200")
    p = planner.plan(cfg)
    floor = next(n for n in p.notes if n.startswith("prefix caching reuses whole"))
    assert floor.startswith(
        "prefix caching reuses whole 2,128-token blocks: a shared prefix shorter than 2,128 "
        "tokens never hits, a longer one hits in multiples of 2,128"
    )
    assert "--prefix-match-unit U (a divisor of 2,128) would hash every U tokens" in floor
    assert f"note: {floor}" in p.summary()  # printed with the block
    fine = planner.plan(cfg.with_args({"--prefix-match-unit": 16}))
    note = next(n for n in fine.notes if "--prefix-match-unit 16" in n)
    assert note.startswith("--prefix-match-unit 16 hashes every 16 tokens: a hit can land on any")
    assert planner.prefix_reuse(2128, mamba_align=True, prefix_match_unit=16).floor == 16
    # vLLM refuses a unit that does not divide the block, and any other unit without Mamba
    with pytest.raises(RecipeError, match="--prefix-match-unit 100 is refused"):
        planner.plan(cfg.with_args({"--prefix-match-unit": 100}))
    with pytest.raises(RecipeError, match="divisor of 32"):
        planner.prefix_reuse(32, mamba_align=False, prefix_match_unit=16)
    # a drafter (MTP, DFlash, DSpark) has the last matched unit of every hit recomputed for its
    # hidden states (find_longest_cache_hit): a hit needs two units (an H100's counters agree,
    # tests/lab/bench/test_agent_workload.py)
    assert planner.prefix_reuse(2128, mamba_align=True, drafter=True).floor == 4256
    assert (
        planner.prefix_reuse(2128, mamba_align=True, prefix_match_unit=16, drafter=True).floor == 32
    )
    mtp = planner.plan(recipes.resolve("h200", speculative="mtp"))
    said = next(n for n in mtp.notes if n.startswith("prefix caching reuses whole"))
    assert said.endswith(f"with this drafter the last {mtp.block_size:,} tokens of each hit are "
                         f"recomputed for it, so a shared prefix needs {2 * mtp.block_size:,}")  # fmt: skip
    assert not floor.count("drafter")
    # the n-gram drafter reads no hidden states: no block recomputed (vLLM's use_eagle)
    ngram = recipes.resolve("cpu", speculative="ngram").with_args(
        {"--no-enable-prefix-caching": None}
    )
    assert ngram.speculative == "ngram" and not any(
        "drafter" in n for n in planner.plan(ngram).notes
    )
    # what a shared prefix keeps: one block fewer with a drafter
    assert "2,192 tokens (1 whole blocks of 2,192, one fewer with a drafter" in planner.plan(
        recipes.resolve("h200", speculative="mtp"), shared_prefix=5000
    ).prefix_cache_note(5000, drafter=True)
    # the Mamba states kept, as --prefix-cache-retention-interval says
    kept = lambda r: planner.prefix_reuse(2128, mamba_align=True, retention_interval=r).sentence  # noqa: E731
    assert "keeps those at all of them" in kept(None) and "at every 4,256 tokens," in kept(4256)
    assert "at each prompt's end" in kept(0)
    # no prefix caching: no floor to state
    off = planner.plan(cfg.with_args({"--no-enable-prefix-caching": True}))
    assert not any("prefix caching reuses" in n for n in off.notes)


def test_the_line_step_1_prints_names_the_prefix_caches_reuse_floor():
    """Step 1 prints the verdict: the hybrid's enlarged block is the shortest shared prefix the
    prefix cache can reuse (2,128 tokens for the H200 recipe); the stand-in caches nothing."""
    from helpers.config.resolve import resolve as resolve_target
    from helpers.memory.planner import plan as plan_target

    assert plan_target(resolve_target("h200")).verdict.endswith(
        "; prefix caching reuses whole 2,128-token blocks (a shorter shared prefix never hits)"
    )
    assert plan_target(resolve_target("cpu")).verdict.endswith("; no prefix caching")


def test_the_default_utilization_is_the_release_s():
    """An unset --gpu-memory-utilization is 0.92 up to vLLM 0.33.0 and 1.0 from 0.34.0 on CUDA
    (vllm/config/cache.py CacheConfig.gpu_memory_utilization, resolved_gpu_memory_utilization)."""
    h200 = recipes.resolve("h200")
    assert "--gpu-memory-utilization" not in h200.args
    for version, util in (("0.28.0", 0.92), ("0.32.0", 0.92), ("0.33.0", 0.92), ("0.34.0", 1.0)):
        p = planner.plan(recipes.resolve("h200", vllm_version=version))
        assert p.gpu_memory_utilization == util, version
        assert f"141 GiB x {util:g} utilization" in p.summary()
    assert planner.default_gpu_memory_utilization("nightly") == 1.0


def test_a_small_gpu_at_high_utilization_with_cuda_graphs_is_warned():
    """The l4 target: 22.5 GiB at 0.95 leaves 1.13 GiB for the graphs captured after the KV
    cache is sized (vllm #57475); --enforce-eager, a roomier utilization or 0.34.0's extensible
    KV cache (sized after capture) clear it."""
    l4 = recipes.resolve("l4")
    p = planner.plan(l4)
    warned = [r for r in p.reasons if "CUDA graphs are captured after the KV cache" in r]
    assert warned and "1.13 GiB" in warned[0] and "--gpu-memory-utilization to 0.91" in warned[0]
    assert "--enforce-eager" in warned[0] and p.status == "fits"
    for cleared in (
        recipes.resolve("l4", extra_args={"--enforce-eager": True}),
        recipes.resolve("l4", extra_args={"--gpu-memory-utilization": 0.9}),
        recipes.resolve("l4", vllm_version="0.34.0"),
        recipes.resolve("h200"),
    ):
        assert not any("captured after the KV cache" in r for r in planner.plan(cleared).reasons)


#: One H100, vLLM 0.32.0, 2026-12-06: co-tenant servers with a 4 GiB KV cache
#: (docs/results/h100/drafting-2026-12-06/), then each server alone with 24 GiB
#: (docs/results/h100/drafting-2026-12-06-alone/), the recipe and MTP K=7; their logs as committed.
H100_DRAFTING = TESTS.parent / "docs" / "results" / "h100"


@pytest.mark.parametrize(("session", "kv_gib"), [("drafting-2026-12-06", 4), ("drafting-2026-12-06-alone", 24)])  # fmt: skip
@pytest.mark.parametrize(
    ("speculative", "log"), [("none", "server-none.log"), ("mtp", "server-mtp.log")]
)
def test_planner_counts_the_mtp_blocks_attention_with_the_targets(
    speculative, log, session, kv_gib
):
    """vLLM groups the MTP block's attention layer with the target's six (seven to a group, so a
    block holds 7 layers' pages): the planner's KV tokens match both servers' logs exactly at
    4 GiB (1,266,386 and 884,524) and at 24 GiB (7,598,320 and 5,313,912); without that layer it
    gave 1,033,354 for MTP at 4 GiB, 17 % high."""
    from helpers.weights import weightless

    text = (H100_DRAFTING / session / "logs" / log).read_text()
    figures = plan_check.server_log_figures(text)
    cfg = recipes.resolve("h200", speculative=speculative).with_args(
        {"--kv-cache-memory-bytes": str(kv_gib * 1024**3)}
    )
    if speculative == "mtp":
        spec = {**cfg.speculative_config, "num_speculative_tokens": 7}
        cfg = cfg.with_args({"--speculative-config": spec})
    arch = architecture.Architecture.from_hf_config(weightless.arch_hf_config("nvfp4"))
    p = planner.plan(cfg, architecture=arch, vllm_version="0.32.0")
    assert p.block_size == figures["block_size"] and p.kv_cache_tokens == figures["kv_cache_tokens"]
    assert p.arch.num_attention_layers == (7 if speculative == "mtp" else 6)
    assert ("the MTP block's attention layers counted with the target's" in p.notes) == (
        speculative == "mtp"
    )
    # requests of 1,280 tokens (one block) at once: 1 + K Mamba blocks a group, as the logs ran
    # them. At 4 GiB MTP ran 15 while 49 waited; the recipe's 64 filled 48.8 %, so 131 fit. At
    # 24 GiB both ran all 64 (MTP at 67.2 %, 95 fit; the recipe at 8.1 %, 788 within the
    # log's rounding to 0.1 %)
    plan_short = planner.plan(cfg, architecture=arch, vllm_version="0.32.0", context_len=1280)
    note = next(n for n in plan_short.notes if n.startswith("a request of at most one"))
    fit = int(re.search(r"about (\d+) such requests run at once", note).group(1))
    runs = [(int(r), int(w), float(u)) for r, w, u in re.findall(r"Running: (\d+) reqs, Waiting: (\d+) reqs, GPU KV cache usage: ([\d.]+)%", text)]  # fmt: skip
    ran, waiting, usage = max(runs)
    if waiting:  # the cache was full: it held exactly what the plan says
        assert fit == ran
    else:
        assert int(ran / ((usage + 0.05) / 100)) <= fit <= int(ran / ((usage - 0.05) / 100))
