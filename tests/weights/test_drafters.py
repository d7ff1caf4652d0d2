"""Weightless DFlash / DSpark drafters (helpers.weights.drafters) and their place in
weightless mode (helpers.weights.weightless.arch_config, helpers.weights.prepare).

The vLLM checks run vLLM 0.32.0's own code on CPU (no mocks): the engine arguments a
weightless H200 run passes, resolved into the target's ``ModelConfig`` and the
``SpeculativeConfig`` that loads the drafter folder, then the functions the GPU model runner
calls on the resolved draft config (aux layers, mask token, per-layer attention). A drafter
config missing a key those read fails here, not on the GPU.
"""

from __future__ import annotations

import json

import pytest

from helpers import errors
from helpers.config.load import load_registry
from helpers.config.resolve import resolve
from helpers.weights import drafters, prepare, weightless
from helpers.weights.download import fetch

ARCH = load_registry().model.architecture.model_dump()


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return weightless.build_arch_model("nvfp4", tmp_path_factory.mktemp("arch") / "nvfp4")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("drafters")
    return {m: drafters.build_drafter_model(m, out=root / m) for m in drafters.METHODS}


# ------------------------------------------------------------------------- the shapes


def test_published_shapes_fit_the_target():
    for method in drafters.METHODS:
        cfg = drafters.drafter_hf_config(method)
        assert cfg["hidden_size"] == ARCH["hidden_size"] == 2688
        assert cfg["vocab_size"] == ARCH["vocab_size"] == 131072
        assert cfg["num_hidden_layers"] == 6 and cfg["intermediate_size"] == 6144
        assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (
            32,
            2,
            128,
        )
        taps = cfg["dflash_config"]["target_layer_ids"]
        assert taps == cfg["target_layer_ids"] == [1, 5, 19, 29, 41, 51]
        assert cfg["eagle_aux_hidden_state_layer_ids"] == [i + 1 for i in taps]
        assert max(cfg["eagle_aux_hidden_state_layer_ids"]) == ARCH["num_hidden_layers"]
        # the inventory's fc: 16,128 inputs = 6 target states of 2688
        assert len(taps) * cfg["hidden_size"] == 16128
        assert cfg["dflash_config"]["mask_token_id"] == 990 < cfg["vocab_size"]
        q = cfg["quantization_config"]
        assert (q["quant_algo"], q["group_size"]) == ("W4A16_NVFP4", 16)
        assert q["ignore"] == q["exclude_modules"] and "*self_attn*" in q["ignore"]
    dspark = drafters.drafter_hf_config("dspark")
    assert dspark["architectures"] == ["Qwen3DSparkModel"] and dspark["block_size"] == 8
    assert dspark["markov_rank"] == 512 and dspark["sliding_window"] == 1024
    assert "*markov_w1*" in dspark["quantization_config"]["ignore"]
    dflash = drafters.drafter_hf_config("dflash")
    assert dflash["architectures"] == ["DFlashDraftModel"] and "block_size" not in dflash
    assert dflash["rope_parameters"]["rope_type"] == "yarn"
    assert "*markov_w1*" not in dflash["quantization_config"]["ignore"]


def test_folder_files_metadata_and_rebuild(folders, tmp_path):
    for method, folder in folders.items():
        assert sorted(p.name for p in folder.iterdir()) == ["config.json", drafters.METADATA_FILE]
        config = json.loads((folder / "config.json").read_text())
        assert config == drafters.drafter_hf_config(method)
        meta = drafters.drafter_metadata(folder)
        assert meta["method"] == method and meta["version"] == drafters.DRAFTER_VERSION
        assert set(meta["assumed"]) == set(drafters.ASSUMED[method])
        assert set(meta["published"]) | set(meta["assumed"]) == set(config)
        assert meta["sources"][method] == drafters.SOURCES[method]
        assert meta["stands_in_for"].endswith(
            f"-NVFP4-{'DFlash' if method == 'dflash' else 'DSpark'}"
        )
    assert drafters.drafter_metadata(tmp_path) is None
    # the same version is kept as it is; force rewrites, a stale config is rewritten
    folder = drafters.build_drafter_model("dspark", out=tmp_path / "d")
    stamp = (folder / "config.json").stat().st_mtime_ns
    assert drafters.build_drafter_model("dspark", out=folder) == folder
    assert (folder / "config.json").stat().st_mtime_ns == stamp
    (folder / "config.json").write_text("{}")
    drafters.build_drafter_model("dspark", out=folder)
    assert json.loads((folder / "config.json").read_text())["block_size"] == 8


def test_unknown_method_and_bf16_are_refused_with_the_fix(tmp_path):
    with pytest.raises(errors.WeightlessError, match="dflash, dspark"):
        drafters.build_drafter_model("eagle3", out=tmp_path)
    with pytest.raises(errors.WeightlessError, match="variant='nvfp4'"):
        drafters.build_drafter_model("dflash", "bf16", out=tmp_path)


# ------------------------------------------------------------- weightless mode serves them


@pytest.mark.parametrize("method", drafters.METHODS)
def test_arch_config_points_the_speculative_config_at_the_local_drafter(target, method):
    cfg = resolve("h200", "nvfp4", speculative=method)
    served = weightless.arch_config(cfg, target)
    spec = served.speculative_config
    folder = target.parent / f"{target.name}-{method}"
    assert spec["model"] == str(folder) and (folder / "config.json").is_file()
    # everything else of the recipe's speculative config is kept; the hub pin is gone
    assert {k: v for k, v in spec.items() if k != "model"} == {
        k: v for k, v in cfg.speculative_config.items() if k not in ("model", "revision")
    }
    assert served.env["HF_HUB_OFFLINE"] == "1" and served.args["--load-format"] == "dummy"
    assert [d.local_path for d in served.drafters] == [str(folder)]
    # the served command still parses with vLLM's own parser
    served.validate()
    # the real drafter, downloaded: the hub id stays and the hub stays reachable
    real = weightless.arch_config(cfg, target, allow_hub_drafter=True)
    assert real.speculative_config["model"] == cfg.speculative_config["model"]
    assert "HF_HUB_OFFLINE" not in real.env


def test_weightless_run_downloads_nothing_for_dflash_or_dspark(tmp_path, monkeypatch):
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a download attempt would fail loudly
    for method in drafters.METHODS:
        cfg = resolve("h200", "nvfp4", speculative=method)
        served = prepare.fetch(prepare.prepare(cfg, weightless=True)).served
        folder = tmp_path / "out" / "arch" / f"nemotron-3.5-lightning-nvfp4-{method}"
        assert served.speculative_config["model"] == str(folder)
        assert drafters.drafter_metadata(folder)["method"] == method
        assert fetch(served, local_files_only=True, quiet=True).snapshots == []


def test_a_hub_drafter_without_a_weightless_twin_is_still_refused(target):
    cfg = resolve("h200", "nvfp4").with_args(
        {
            "--speculative-config": {
                "method": "eagle3",
                "model": "org/some-eagle3",
                "num_speculative_tokens": 3,
            }
        }
    )
    with pytest.raises(errors.WeightlessError, match="allow_hub_drafter=True"):
        weightless.arch_config(cfg, target)


# -------------------------------------------------------------------- vLLM 0.32.0's reading


def _engine_args(target, spec):
    """The engine arguments of a weightless H200 NVFP4 run that vLLM's CPU build can parse."""
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(
        model=str(target),
        load_format="dummy",
        quantization="modelopt_fp4",
        kv_cache_dtype="fp8",
        max_model_len=8192,
        enable_prefix_caching=True,
        mamba_cache_mode="align",
        speculative_config=dict(spec),
    )


def _check_what_the_gpu_runner_reads(spec_config, method):
    """The draft-config reads of vLLM 0.32.0's V2 model runner, on the resolved draft config:
    ``get_eagle3_aux_layers_from_config`` (which target layers to keep), the speculator's
    ``get_parallel_drafting_token_id`` (the mask token), ``_resolve_layer_attention`` and
    ``dflash_has_any_non_causal`` (each draft layer's window and causality, the attention
    backend's choice) and, for DSpark, ``Qwen3DSparkModel``'s ``config.markov_rank``."""
    from vllm.model_executor.models.qwen3_dflash import (
        _resolve_layer_attention,
        dflash_has_any_non_causal,
    )
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import (
        get_eagle3_aux_layers_from_config,
    )
    from vllm.v1.worker.gpu.spec_decode.utils import get_parallel_drafting_token_id

    hf = spec_config.draft_model_config.hf_config
    layers = get_eagle3_aux_layers_from_config(spec_config)
    assert layers == (2, 6, 20, 30, 42, 52)
    assert all(0 < i <= ARCH["num_hidden_layers"] for i in layers)
    assert get_parallel_drafting_token_id(hf) == drafters.MASK_TOKEN_ID
    attention = {_resolve_layer_attention(hf, i) for i in range(hf.num_hidden_layers)}
    if method == "dflash":
        assert attention == {(None, False)} and dflash_has_any_non_causal(hf)
    else:
        assert attention == {(1024, True)} and not dflash_has_any_non_causal(hf)
        assert hf.markov_rank == 512


@pytest.mark.parametrize("method", drafters.METHODS)
def test_vllm_resolves_the_drafter_against_the_weightless_target(target, folders, method):
    """vLLM 0.32.0's ``SpeculativeConfig`` resolves the folder (architecture, method, parallel
    drafting, the draft's ModelOpt quantization), through the engine arguments' own path
    (``create_model_config`` + ``create_speculative_config``, what ``create_engine_config``
    runs), and the runner's reads hold. ``create_engine_config`` itself: DFlash completes on
    CPU; DSpark stops only at ``VllmConfig``'s model-runner check, because the CPU build has no
    Triton and so no V2 runner, the only one that runs DSpark (a GPU has both)."""
    pytest.importorskip("vllm")
    from vllm.config import ParallelConfig
    from vllm.model_executor.layers.quantization.modelopt import ModelOptNvFp4Config

    spec = {**resolve("h200", "nvfp4", speculative=method).speculative_config}
    spec["model"] = str(folders[method])
    spec.pop("revision", None)
    args = _engine_args(target, spec)
    sc = args.create_speculative_config(args.create_model_config(), ParallelConfig())
    assert sc.method == method and sc.parallel_drafting
    assert sc.num_speculative_tokens == spec["num_speculative_tokens"]
    arch = "DFlashDraftModel" if method == "dflash" else "Qwen3DSparkModel"
    assert sc.draft_model_config.architectures == [arch]
    assert sc.draft_model_config.quantization == "modelopt_fp4"
    _check_what_the_gpu_runner_reads(sc, method)
    q = ModelOptNvFp4Config.from_config(sc.draft_model_config.hf_config.quantization_config)
    assert q.quant_method == "W4A16_NVFP4"
    assert q.is_layer_excluded("model.layers.52.self_attn.qkv_proj")
    assert not q.is_layer_excluded("model.layers.52.mlp.down_proj")
    assert not q.is_layer_excluded("model.fc")

    if method == "dflash":
        vc = _engine_args(target, spec).create_engine_config()
        assert vc.speculative_config.draft_model_config.architectures == [arch]
    else:
        with pytest.raises(Exception, match="Model Runner V1 does not support: dspark"):
            _engine_args(target, spec).create_engine_config()


def test_the_vllm_checks_catch_a_drafter_without_its_mask_token_or_window(tmp_path):
    """The reads above fail on a config that lacks what vLLM needs (so they test something)."""
    pytest.importorskip("vllm")
    from types import SimpleNamespace

    from vllm.model_executor.models.qwen3_dflash import _resolve_layer_attention
    from vllm.v1.worker.gpu.spec_decode.utils import get_parallel_drafting_token_id

    cfg = drafters.drafter_hf_config("dspark")
    for key in ("mask_token_id", "pard_token"):
        cfg.pop(key)
    cfg["dflash_config"].pop("mask_token_id")
    with pytest.raises(ValueError, match="mask_token_id"):
        get_parallel_drafting_token_id(SimpleNamespace(**cfg))
    cfg["dflash_config"].pop("swa_window_size")
    cfg["sliding_window"] = None
    with pytest.raises(ValueError, match="window size"):
        _resolve_layer_attention(SimpleNamespace(**cfg), 0)
