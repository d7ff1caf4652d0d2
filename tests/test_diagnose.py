"""helpers.diagnose: every catalogue entry against a log excerpt in vLLM's real format.

Logs under tests/data/logs/. Recorded from vLLM 0.32.0 (CPU build) on this project's
machine: port_in_use, unrecognized_arguments, invalid_choice, missing_fastokens,
trust_remote_code, cpu_memory_in_use, startup_cpu. The GPU-only failures are written in
the same line format ("(Proc pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message") with the
message text taken from the source named in each test.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from helpers import recipes
from helpers.diagnose import CATALOGUE, Diagnosis, diagnose, last_error_line

LOGS = Path(__file__).parent / "data" / "logs"


def _log(name: str) -> str:
    return (LOGS / f"{name}.log").read_text()


def _one_sentence(d: Diagnosis) -> None:
    msg = d.message
    assert msg.endswith(".") and msg.count("\n") == 0
    assert str(d) == msg
    assert d.evidence  # the matched log line travels with it


def test_mamba_cache_blocks_names_the_max_num_seqs_to_use():
    # vllm/config/compilation.py, resolve_cudagraph_mode_and_sizes
    d = diagnose(_log("mamba_cache_blocks"))
    assert d.name == "mamba_cache_blocks"
    assert "lower --max-num-seqs to 180" in d.message
    assert "256" in d.cause
    _one_sentence(d)


def test_out_of_memory_while_loading_names_a_smaller_variant():
    # torch.OutOfMemoryError text from c10/cuda/CUDACachingAllocator.cpp
    d = diagnose(_log("out_of_memory_loading"))
    assert d.name == "out_of_memory"
    assert "loading the weights" in d.cause
    assert "NVFP4" in d.fix and "--tensor-parallel-size" in d.fix
    _one_sentence(d)


def test_out_of_memory_while_profiling_names_the_memory_flags():
    d = diagnose(_log("out_of_memory_profiling"))
    assert d.name == "out_of_memory"
    assert "lower --gpu-memory-utilization" in d.fix and "--max-model-len" in d.fix
    _one_sentence(d)


def test_no_cache_memory_names_gpu_memory_utilization():
    # vllm/v1/core/kv_cache_utils.py, _check_enough_kv_cache_memory
    rtx_pro = recipes.resolve("rtx-pro-6000")  # its recipe sets --gpu-memory-utilization 0.8
    d = diagnose(_log("no_cache_memory"), rtx_pro)
    assert d.name == "no_cache_memory"
    assert "raise --gpu-memory-utilization (now 0.8)" in d.fix
    assert "--max-model-len" in d.fix
    _one_sentence(d)


def test_kv_cache_too_small_names_the_max_model_len_that_fits():
    # vllm/v1/core/kv_cache_utils.py, _check_enough_kv_cache_memory
    d = diagnose(_log("kv_cache_too_small"))
    assert d.name == "kv_cache_too_small"
    assert "lower --max-model-len to 734208" in d.message
    _one_sentence(d)


def test_gpu_memory_held_by_another_process():
    # vllm/v1/worker/utils.py, request_memory
    d = diagnose(_log("gpu_memory_in_use"))
    assert d.name == "memory_in_use"
    assert "62.15 of 139.80 GiB GPU memory" in d.cause
    assert "lower --gpu-memory-utilization to 0.39 or less" in d.fix
    _one_sentence(d)


def test_cpu_memory_reservation_recorded_on_this_machine():
    # vllm/v1/worker/cpu_worker.py, CPUWorker.__init__ (recorded log)
    d = diagnose(_log("cpu_memory_in_use"))
    assert d.name == "memory_in_use"
    assert "CPU memory" in d.cause
    assert "--gpu-memory-utilization" in d.fix and "--kv-cache-memory-bytes" in d.fix
    _one_sentence(d)


def test_api_port_in_use_names_the_port():
    # vllm/entrypoints/launchers/launcher.py, create_server_socket (recorded log)
    d = diagnose(_log("port_in_use"))
    assert d.name == "port_in_use"
    assert "API port 18124 is already in use" in d.cause
    assert "port=None" in d.fix
    _one_sentence(d)


def test_api_port_in_use_prefers_the_config_port():
    d = diagnose(_log("port_in_use"), recipes.resolve("h100", port=8123))
    assert "API port 8123" in d.cause


def test_internal_port_in_use_names_the_port_and_vllm_port():
    # torch c10d TCPStore message; vllm/config/parallel.py retries on EADDRINUSE
    d = diagnose(_log("internal_port_in_use"))
    assert d.name == "internal_port_in_use"
    assert "internal port 29500" in d.cause
    assert "VLLM_PORT" in d.fix and "end_leftovers" in d.fix
    _one_sentence(d)


def test_unrecognized_argument_names_flag_and_both_versions():
    # argparse via vllm/utils/argparse_utils.py (recorded log)
    pinned = dataclasses.replace(recipes.resolve("b200"), vllm_version="0.33.0")
    d = diagnose(_log("unrecognized_arguments"), pinned)
    assert d.name == "unrecognized_arguments"
    assert "--bogus-flag" in d.cause
    assert "vLLM 0.32.0" in d.cause  # the installed CPU build
    assert "'b200' pins vLLM 0.33.0" in d.fix and "pip install vllm==0.33.0" in d.fix
    _one_sentence(d)


def test_unrecognized_argument_without_config_says_check_spelling():
    d = diagnose(_log("unrecognized_arguments"))
    assert "vllm serve --help" in d.fix


def test_invalid_choice_lists_the_choices():
    # argparse via vllm/utils/argparse_utils.py (recorded log)
    d = diagnose(_log("invalid_choice"))
    assert d.name == "invalid_choice"
    assert "--mamba-ssu-algorithm x" in d.cause
    assert "'auto', 'horizontal', 'simple', 'vertical'" in d.fix
    _one_sentence(d)


def test_missing_fastokens_names_the_pip_install():
    # vllm/tokenizers/fastokens.py, apply_fastokens_patch (recorded log)
    d = diagnose(_log("missing_fastokens"))
    assert d.name == "missing_fastokens"
    assert 'pip install "fastokens>=0.2.0"' in d.fix
    assert "VLLM_USE_FASTOKENS" in d.message
    _one_sentence(d)


def test_missing_trust_remote_code_names_the_flag():
    # transformers/dynamic_module_utils.py, resolve_trust_remote_code (recorded log)
    d = diagnose(_log("trust_remote_code"))
    assert d.name == "trust_remote_code"
    assert "--trust-remote-code" in d.fix
    _one_sentence(d)


def test_gated_repo_names_the_licence_page_and_hf_token():
    # huggingface_hub/utils/_http.py (GatedRepoError) + transformers/utils/hub.py
    d = diagnose(_log("gated_repo"))
    assert d.name == "gated_repo"
    assert "https://huggingface.co/nvidia/NVIDIA-Nemotron-3.5-Lightning-BF16" in d.fix
    assert "HF_TOKEN" in d.fix
    _one_sentence(d)


def test_gated_repo_from_401_without_token():
    # huggingface_hub/utils/_http.py: 401 on a gated repo reads as RepositoryNotFoundError
    text = (
        "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-x)\n\n"
        "Repository Not Found for url: https://huggingface.co/api/models/nvidia/NVIDIA-Nemotron-3.5-"
        "Lightning-NVFP4/revision/main.\nPlease make sure you specified the correct `repo_id` and "
        "`repo_type`.\nIf you are trying to access a private or gated repo, make sure you are "
        "authenticated and your token has the required permissions.\n"
    )
    d = diagnose(text)
    assert d.name == "gated_repo"
    assert "nvidia/NVIDIA-Nemotron-3.5-Lightning-NVFP4" in d.fix


def test_a_clean_start_has_no_diagnosis():
    text = _log("startup_cpu")
    assert "Application startup complete" in text
    assert diagnose(text) is None
    assert diagnose("") is None


def test_every_catalogue_entry_has_a_log_here():
    names = {e.name for e in CATALOGUE}
    found = {d.name for p in LOGS.glob("*.log") if (d := diagnose(p.read_text())) is not None}
    assert names == found, f"catalogue entries without a log excerpt: {names - found}"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("cpu_memory_in_use", "ValueError: Available memory on node 0"),
        ("unrecognized_arguments", "api_server.py: error: unrecognized arguments: --bogus-flag"),
        ("missing_fastokens", "ImportError: The 'fastokens' package"),
    ],
)
def test_last_error_line_skips_the_generic_wrappers(name, expected):
    line = last_error_line(_log(name))
    assert line.startswith(expected)


def test_humming_moe_on_non_gated_experts_names_marlin_and_the_fixed_vllm():
    # recorded on the H200 (vLLM 0.26.0 + humming-kernels 0.1.10, NVFP4 arch, 2026-11-29):
    # docs/results/h200/nvfp4-hopper-kernels/server-humming-moe.log
    d = diagnose(_log("humming_non_gated_moe"))
    assert d.name == "humming_non_gated_moe"
    assert "3712" in d.cause and "1856" in d.cause  # the log's own numbers: 2 x 1856 expected
    assert "--moe-backend marlin" in d.fix and "0.27.0" in d.fix
    assert "weight shape mismatched" in d.evidence
    _one_sentence(d)


def test_stochastic_rounding_on_hopper_names_the_flashinfer_mamba_backend():
    # ptxas line as the H200 printed it (docs/results/h200/summary-bf16.json, adaptations);
    # the surrounding lines are in vLLM's log format
    d = diagnose(_log("stochastic_rounding_sm90"))
    assert d.name == "stochastic_rounding_sm90"
    assert "sm_90" in d.cause
    assert "--mamba-backend flashinfer" in d.fix
    assert "--enable-mamba-cache-stochastic-rounding" in d.fix
    _one_sentence(d)
    # a clean start gets no diagnosis
    assert diagnose(_log("startup_cpu")) is None


@pytest.mark.parametrize(
    "name, evidence",
    [
        ("damaged_checkpoint", "Error while deserializing header: incomplete metadata"),
        ("damaged_config", "is not a valid JSON file"),
    ],
)
def test_damaged_checkpoint_is_named_with_the_rebuild(name, evidence):
    # wording of vLLM 0.32.0 (safetensors 0.8.0, transformers) on a damaged stand-in copy
    d = diagnose(_log(name))
    assert d.name == "damaged_checkpoint" and evidence in d.evidence
    assert "download the checkpoint again" in d.fix  # no config: not known to be the stand-in
    _one_sentence(d)


def test_derived_max_model_len_is_named_with_the_bound_and_the_env_hint():
    # the real cause sits above pydantic's generic "1 validation error for ModelConfig"
    d = diagnose(_log("max_model_len_too_long"))
    assert d.name == "max_model_len_too_long"
    assert "--max-model-len 1000000000" in d.cause and "max_position_embeddings=4096.0" in d.cause
    assert "set --max-model-len 4096 or less" in d.fix and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in d.fix
    _one_sentence(d)
