"""Weightless architecture mode (helpers.weights.weightless): config shape, sizes, tokenizer, vLLM parsing.

All on CPU. The transformers checks take a few seconds; the vLLM checks import vLLM
(~30 s on a 2-core box, shared with the other tests that import its parser).
"""

from __future__ import annotations

import json
from fnmatch import fnmatch

import pytest

from helpers import errors
from helpers.config.load import load_registry
from helpers.config.resolve import resolve
from helpers.memory import architecture
from helpers.weights import weightless

REGISTRY_ARCH = load_registry().model.architecture.model_dump()


@pytest.fixture(scope="module")
def bf16_dir(tmp_path_factory):
    return weightless.build_arch_model("bf16", tmp_path_factory.mktemp("arch") / "bf16")


@pytest.fixture(scope="module")
def nvfp4_dir(tmp_path_factory):
    return weightless.build_arch_model("nvfp4", tmp_path_factory.mktemp("arch") / "nvfp4")


# ------------------------------------------------------------------------------- config


@pytest.mark.parametrize("variant", weightless.VARIANTS)
def test_config_has_the_registry_shape(variant):
    cfg = weightless.arch_hf_config(variant)
    for key, value in REGISTRY_ARCH.items():
        assert cfg[key] == value, key
    assert cfg["architectures"] == ["NemotronHForCausalLM"]
    assert cfg["model_type"] == "nemotron_h"
    pattern = cfg["hybrid_override_pattern"]
    assert pattern == "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
    assert (pattern.count("M"), pattern.count("E"), pattern.count("*")) == (23, 23, 6)
    assert len(pattern) == cfg["num_hidden_layers"] == 52
    # docs/DESIGN.md numbers, spelled out so a registry edit cannot silently move them
    assert (cfg["hidden_size"], cfg["vocab_size"]) == (2688, 131072)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (32, 2, 128)
    assert (cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["ssm_state_size"]) == (64, 64, 128)
    assert (cfg["n_groups"], cfg["conv_kernel"]) == (8, 4)
    assert (cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["n_shared_experts"]) == (
        128,
        6,
        1,
    )
    assert cfg["mlp_hidden_act"] == "relu2"
    # public Nemotron-3-Nano-30B-A3B config.json values
    assert cfg["moe_intermediate_size"] == 1856
    assert cfg["moe_shared_expert_intermediate_size"] == 3712
    assert cfg["routed_scaling_factor"] == 2.5
    assert (cfg["n_group"], cfg["topk_group"], cfg["norm_topk_prob"]) == (1, 1, True)
    assert cfg["tie_word_embeddings"] is False
    assert ("quantization_config" in cfg) == (variant == "nvfp4")


def test_unknown_variant_names_the_valid_ones():
    with pytest.raises(errors.WeightlessError, match="pass one of bf16, nvfp4"):
        weightless.arch_hf_config("fp8")


def test_parameter_counts_are_30b_total_3b_active():
    p = architecture.param_counts(weightless.arch_hf_config())
    # Nemotron 3 Nano 30B-A3B: 31.6B total, 3.2B active (3.6B with embeddings)
    assert 31.0e9 < p["total"] < 32.0e9
    assert 3.4e9 < p["active"] < 3.8e9
    assert 3.0e9 < p["active_without_embeddings"] < 3.4e9
    assert p["moe_routed"] / p["total"] > 0.9  # the experts are almost all of it
    assert sum(v for k, v in p.items() if not k.startswith(("total", "active"))) == p["total"]


def test_weight_bytes_match_the_checkpoint_sizes():
    bf16 = architecture.weight_bytes(weightless.arch_hf_config("bf16"))
    nvfp4 = architecture.weight_bytes(weightless.arch_hf_config("nvfp4"))
    assert 60e9 < bf16 < 66e9  # registry: BF16 weights ~60 GB
    assert 17e9 < nvfp4 < 22e9  # registry: NVFP4 ~18 GB


def test_cache_sizes_per_token_and_sequence():
    """The weightless shape's cache sizes, by the memory planner's own arithmetic."""
    from helpers.memory.architecture import Architecture

    arch = Architecture.from_hf_config(weightless.arch_hf_config())
    assert arch.kv_bytes_per_token("bf16") == 6 * 2 * 2 * 128 * 2
    assert arch.kv_bytes_per_token("fp8") == 6 * 2 * 2 * 128
    fp32 = arch.num_mamba_layers * arch.mamba_state_bytes_per_layer("float32", "bf16")
    fp16 = arch.num_mamba_layers * arch.mamba_state_bytes_per_layer("float16", "bf16")
    assert fp32 == 23 * (64 * 64 * 128 * 4 + 3 * (4096 + 2 * 8 * 128) * 2)
    assert fp16 < fp32 / 1.9
    with pytest.raises(errors.RecipeError):
        arch.kv_bytes_per_token("int3")


# ------------------------------------------------------------------- NVFP4 quantization


def _excluded(prefix: str, ignore: list[str]) -> bool:
    """vLLM's ModelOpt exclusion on a vLLM module name (modelopt.py is_layer_excluded +
    apply_vllm_mapper: ``backbone`` -> ``model``, ``x*`` -> ``x`` and ``x.*``)."""
    pats = []
    for p in ignore:
        p = p.replace("backbone.embeddings", "model.embed_tokens").replace("backbone.", "model.")
        pats += [p[:-1], p[:-1] + ".*"] if p.endswith("*") and not p.endswith(".*") else [p]
    return any(p == prefix or p in prefix or fnmatch(prefix, p) for p in pats)


def test_nvfp4_block_quantizes_exactly_the_experts():
    cfg = weightless.arch_hf_config("nvfp4")
    q = cfg["quantization_config"]
    assert q["quant_method"] == "modelopt"
    assert q["quant_algo"] == "W4A16_NVFP4"
    assert q["group_size"] == 16
    assert q["kv_cache_scheme"] == {"dynamic": False, "num_bits": 8, "type": "float"}
    ignore = q["ignore"]
    assert _excluded("lm_head", ignore)
    for i, kind in enumerate(cfg["hybrid_override_pattern"]):
        base = f"model.layers.{i}.mixer"
        if kind == "M":
            for m in ("in_proj", "out_proj", "conv1d"):
                assert _excluded(f"{base}.{m}", ignore), (i, m)
        elif kind == "*":
            for m in ("qkv_proj", "o_proj"):
                assert _excluded(f"{base}.{m}", ignore), (i, m)
        else:
            assert _excluded(f"{base}.gate", ignore), i
            for m in ("experts", "shared_experts.up_proj", "shared_experts.down_proj"):
                assert not _excluded(f"{base}.{m}", ignore), (i, m)


# ---------------------------------------------------------------- folder and tokenizer


def test_folder_files_and_metadata(bf16_dir):
    names = {p.name for p in bf16_dir.iterdir()}
    assert {
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    } <= names
    assert not any(n.endswith((".safetensors", ".bin")) for n in names)
    meta = weightless.arch_metadata(bf16_dir)
    assert meta["variant"] == "bf16" and meta["version"] == weightless.ARCH_VERSION
    assert json.loads((bf16_dir / "config.json").read_text()) == weightless.arch_hf_config("bf16")
    # a second build with nothing changed keeps the folder as it is
    stamp = (bf16_dir / "tokenizer.json").stat().st_mtime_ns
    assert weightless.build_arch_model("bf16", bf16_dir) == bf16_dir
    assert (bf16_dir / "tokenizer.json").stat().st_mtime_ns == stamp


def test_transformers_reads_config_and_tokenizer(bf16_dir):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.from_pretrained(bf16_dir)
    assert cfg.model_type == "nemotron_h"
    assert cfg.num_hidden_layers == 52
    assert cfg.hybrid_override_pattern == REGISTRY_ARCH["hybrid_override_pattern"]
    assert (cfg.n_groups, cfg.conv_kernel, cfg.mamba_num_heads) == (8, 4, 64)
    assert (cfg.moe_intermediate_size, cfg.n_routed_experts, cfg.num_experts_per_tok) == (
        1856,
        128,
        6,
    )

    tok = transformers.AutoTokenizer.from_pretrained(bf16_dir)
    assert tok.vocab_size == len(tok) == 131072
    assert tok.eos_token == "<|im_end|>"
    for marker in ("<think>", "</think>", "<tool_call>", "</tool_call>"):
        assert tok.convert_tokens_to_ids(marker) != tok.unk_token_id
    # every id decodes, and decode -> encode gives the ids back (vLLM's random dataset)
    ids = list(range(70_000, 71_024)) + [131_071]
    assert tok.encode(tok.decode(ids), add_special_tokens=False) == ids
    text = tok.apply_chat_template(
        [{"role": "user", "content": "w100 w200"}], tokenize=False, add_generation_prompt=True
    )
    # the stand-in's Nemotron format: a system turn (empty here), then the user's
    assert text == (
        "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nw100 w200<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n"
    )
    # tool schemas are listed in the system turn (an agent workload's shared prefix)
    tool = {"type": "function", "function": {"name": "get_order", "description": "w7",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}  # fmt: skip
    with_tools = tok.apply_chat_template(
        [{"role": "user", "content": "w100"}],
        tools=[tool],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert "<name>get_order</name>" in with_tools.split("<|im_end|>")[0]
    off = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}],
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=False,
    )
    assert off.endswith("<think></think>")


# ------------------------------------------------------------------------ ServeConfig


def test_arch_config_adds_dummy_load_and_keeps_the_command(bf16_dir, nvfp4_dir):
    base = resolve("h200", "bf16")
    with pytest.warns(UserWarning, match="VLLM_USE_FASTOKENS"):
        cfg = weightless.arch_config(base, bf16_dir)
    assert cfg.model == str(bf16_dir) and cfg.revision is None
    assert cfg.args["--load-format"] == "dummy"
    assert {k: v for k, v in cfg.args.items() if k != "--load-format"} == base.args
    # everything is local: the server may not ask the hub during start-up
    # every variable kept but the fast tokenizer (it cannot load the folder's tokenizer)
    # and vLLM's uniform MoE routing simulation (not the dummy weights' 6 experts a step)
    assert cfg.env == {
        **{k: v for k, v in base.env.items() if k != weightless.FAST_TOKENIZER_ENV},
        "HF_HUB_OFFLINE": "1",
        "VLLM_MOE_ROUTING_SIMULATION_STRATEGY": "uniform_random",
    }
    flags = cfg.cli_flags()
    assert flags[flags.index("--load-format") + 1] == "dummy"
    assert "--revision" not in flags and "--tokenizer" not in flags

    nv = weightless.arch_config(resolve("h200", "nvfp4"), nvfp4_dir)
    assert nv.args["--quantization"] == "modelopt_fp4"
    with pytest.raises(errors.WeightlessError, match="build_arch_model"):
        weightless.arch_config(resolve("h200", "nvfp4"), bf16_dir)
    with pytest.raises(errors.WeightlessError, match="not an architecture folder"):
        weightless.arch_config(base, bf16_dir.parent)


def test_weightless_routes_moe_tokens_uniformly_unless_the_config_says_otherwise(nvfp4_dir):
    """vLLM 0.32.0's dummy weights send every token of a step to the same 6 experts (at 16
    requests on an H200, uniform routing ran 0.79x of that, docs/results/h200/routing-2026-12-05/):
    a weightless server routes uniformly (vLLM's RoutingSimulatorRouter, read from the installed
    vLLM's envs.py), and a config's own choice ("" keeps the dummy routing) is kept."""
    from vllm import envs

    assert weightless.ROUTING_ENV in envs.environment_variables
    served = weightless.arch_config(resolve("h200", "nvfp4"), nvfp4_dir)
    assert served.env[weightless.ROUTING_ENV] == "uniform_random"
    assert "export VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random" in served.shell_command()
    as_loaded = resolve("h200", "nvfp4").with_args({}, **{weightless.ROUTING_ENV: ""})
    assert weightless.arch_config(as_loaded, nvfp4_dir).env[weightless.ROUTING_ENV] == ""


# ----------------------------------------------------------------- vLLM's own parsing


def test_vllm_parses_config_quantization_and_random_prompts(bf16_dir, nvfp4_dir):
    pytest.importorskip("vllm")
    from transformers import AutoTokenizer
    from vllm.benchmarks.datasets import RandomDataset
    from vllm.model_executor.layers.quantization.modelopt import ModelOptNvFp4Config
    from vllm.model_executor.models.nemotron_h import NemotronHForCausalLM
    from vllm.transformers_utils.config import get_config

    hf = get_config(str(nvfp4_dir), trust_remote_code=False)
    assert hf.hybrid_override_pattern == REGISTRY_ARCH["hybrid_override_pattern"]
    q = ModelOptNvFp4Config.from_config(hf.quantization_config)
    assert q.get_name() == "modelopt_fp4"
    assert q.quant_method == "W4A16_NVFP4" and q.group_size == 16 and q.kv_cache_quant_algo == "FP8"
    q.packed_modules_mapping = NemotronHForCausalLM.packed_modules_mapping
    q.apply_vllm_mapper(NemotronHForCausalLM.hf_to_vllm_mapper)
    assert q.is_layer_excluded("model.layers.0.mixer.in_proj")
    assert q.is_layer_excluded("model.layers.5.mixer.qkv_proj")
    assert q.is_layer_excluded("model.layers.1.mixer.gate")
    assert q.is_layer_excluded("lm_head")
    assert not q.is_layer_excluded("model.layers.1.mixer.experts")
    assert not q.is_layer_excluded("model.layers.51.mixer.shared_experts.up_proj")

    # `vllm bench serve --dataset-name random` builds prompts of exactly the asked length
    tok = AutoTokenizer.from_pretrained(bf16_dir)
    reqs = RandomDataset(random_seed=7).sample(
        tokenizer=tok, num_requests=3, input_len=1024, output_len=256, range_ratio=0.0
    )
    assert [r.prompt_len for r in reqs] == [1024] * 3
    assert all(len(tok.encode(r.prompt, add_special_tokens=False)) == 1024 for r in reqs)

    # the served command parses with the installed vLLM (the CPU build's parser)
    weightless.arch_config(resolve("h200", "bf16"), bf16_dir).validate()


def test_weightless_bf16_drops_the_fast_tokenizer_that_cannot_load_its_tokenizer(tmp_path):
    """On the H200 (vLLM 0.32.0) the BF16 weightless start died with fastokens' "unsupported
    pre-tokenizer type: WhitespaceSplit": the architecture folder's word-level tokenizer is
    not one fastokens loads. arch_config drops VLLM_USE_FASTOKENS for it, and says so."""
    from helpers.config import resolve as recipes
    from helpers.weights import weightless

    path = weightless.build_arch_model("bf16", tmp_path)
    cfg = recipes.resolve("h200", "bf16")
    assert cfg.env.get(weightless.FAST_TOKENIZER_ENV) == "1"  # the recipe's BF16 setting
    with pytest.warns(UserWarning, match="VLLM_USE_FASTOKENS dropped"):
        served = weightless.arch_config(cfg, path)
    assert weightless.FAST_TOKENIZER_ENV not in served.env
    fastokens = pytest.importorskip("fastokens")  # the real library, where installed
    with pytest.raises(ValueError, match="unsupported"):
        fastokens.Tokenizer.from_file(str(path / "tokenizer.json"))


def test_config_carries_the_mtp_block_vllm_turns_into_its_draft_model(nvfp4_dir):
    """vLLM 0.32.0's own speculative-config override makes the MTP draft model of the folder's
    config: the weightless architecture can serve ``speculative="mtp"`` (the checkpoint's own
    heads) on a GPU."""
    from transformers import AutoConfig
    from vllm.config.speculative import SpeculativeConfig

    hf = AutoConfig.from_pretrained(nvfp4_dir)
    assert hf.num_nextn_predict_layers == 1 and hf.mtp_hybrid_override_pattern == "*E"
    draft = SpeculativeConfig.hf_config_override(hf)
    assert draft.model_type == "nemotron_h_mtp"
    assert draft.architectures == ["NemotronHMTPModel"]
    assert draft.n_predict == 1
    # the MTP layers stay BF16 in the NVFP4 shape (the training recipe's keep_mtp_spec_in_bf16)
    quant = json.loads((nvfp4_dir / "config.json").read_text())["quantization_config"]
    assert "mtp" in quant["ignore"]
