"""helpers.server.diagnose: every catalogue entry against a log excerpt in vLLM's real format.

Logs under tests/data/logs/. Recorded from vLLM 0.32.0 (CPU build) on this project's
machine: port_in_use, invalid_choice, missing_fastokens, trust_remote_code,
cpu_memory_in_use, startup_cpu; unrecognized_arguments, max_model_len_too_long and
damaged_config by ``tests/support/record_logs.py`` (which re-records them with the installed vLLM). The GPU-only failures are written in
the same line format ("(Proc pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message") with the
message text taken from the source named in each test.
"""

from __future__ import annotations

import dataclasses

import pytest

from helpers.config import load
from helpers.config import resolve as recipes
from helpers.server.diagnose import CATALOGUE, diagnose
from helpers.server.failures import Diagnosis
from helpers.server.vllm_log import last_error_line
from tests.support import DATA as TEST_DATA
from tests.support import TESTS


def review(*args, **kwargs):
    """helpers.server.review.review, imported when a test calls it (so each test fails on its
    own where the function is missing)."""
    from helpers.server.review import review as _review

    return _review(*args, **kwargs)


LOGS = TEST_DATA / "logs"


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
    # profiling runs before the KV cache is sized: the utilization does not change it
    assert "--max-num-batched-tokens" in d.fix and "--max-model-len" in d.fix
    assert "0.85" not in d.fix and "--enforce-eager" in d.fix
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


def test_repository_not_found_text_is_not_a_gated_repo():
    # huggingface_hub 2.4.0 utils/_http.py: RepositoryNotFoundError always carries "If you are
    # trying to access a private or gated repo"; that sentence is no evidence of a gated repo
    text = (
        "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-x)\n\n"
        "Repository Not Found for url: https://huggingface.co/api/models/nvidia/NVIDIA-Nemotron-3.5-"
        "Lightning-NVFP4/revision/main.\nPlease make sure you specified the correct `repo_id` and "
        "`repo_type`.\nIf you are trying to access a private or gated repo, make sure you are "
        "authenticated and your token has the required permissions.\n"
    )
    d = diagnose(text)
    assert d.name == "hub_repo_not_found" and "accept the licence" not in d.message
    assert "nvidia/NVIDIA-Nemotron-3.5-Lightning-NVFP4" in d.cause  # the id it asked for
    assert "closest it names is nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4" in d.fix


@pytest.mark.parametrize(
    "log, name, cause, fix",
    [
        # a misspelled id without a token: 401 RepoNotFound
        ("hub_repo_not_found", "hub_repo_not_found",
         "no repo nvidia/NVIDIA-Nemotron-3.5-Lightning-NVFP4 that this request may see (HTTP 401, "
         "no token sent), and it is not an id the registry names",
         "the closest it names is nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"),
        # a misspelled id with a token: 404 RepoNotFound
        ("hub_repo_not_found_with_token", "hub_repo_not_found",
         "no repo nvidia/Nemotron-3.5-Lightning-30B-A3B-NVFP4 that this request may see (HTTP 404)",
         "the closest it names is nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"),
        # an invalid or expired token: 401 "Invalid credentials in Authorization header"
        ("hub_invalid_token", "hub_token_invalid",
         "refused the token sent for nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4 (HTTP 401",
         "create a read token at https://huggingface.co/settings/tokens and set HF_TOKEN"),
        # a gated repo, licence not accepted: 403 GatedRepo
        ("hub_gated", "gated_repo", "gated repo",
         "accept the licence at https://huggingface.co/nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"),
    ],
    ids=["typo-no-token", "typo-with-token", "invalid-token", "gated"],
)  # fmt: skip
def test_server_download_failures_tell_missing_from_bad_token_from_gated(log, name, cause, fix):
    """vLLM 0.32.0's own download traceback (tests/support/record_logs.py against tests/support/fake_hub.py,
    which answers with the hub's status codes and headers): the real huggingface_hub 2.4.0 and
    transformers 5.19.0 messages, each named for what it is."""
    text = _log(log)
    d = diagnose(text)
    assert d.name == name
    assert cause in d.cause and fix in d.fix
    if name != "gated_repo":
        assert "accept the licence" not in d.message and "private or gated repo" not in d.message
    _one_sentence(d)
    # the registry's own id, missing (private or removed), reads differently from a typo
    if log == "hub_repo_not_found":
        own = text.replace(
            "NVIDIA-Nemotron-3.5-Lightning-NVFP4", "NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"
        )
        d = diagnose(own)
        assert d.name == "hub_repo_not_found" and "missing or private" in d.cause
        assert "set HF_TOKEN" in d.fix and "exists" in d.fix


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


def test_drafting_with_the_hopper_ssu_algorithm_names_the_simple_one():
    # the H200's own start-up log (vLLM 0.32.0, weightless NVFP4, MTP, the recipe's
    # --mamba-ssu-algorithm horizontal): FlashInfer's multi-token SSU refused it at graph capture
    d = diagnose(_log("ssu_mtp_sm90"))
    assert d.name == "ssu_mtp_sm90"
    assert "SM100+" in d.cause and "simple" in d.cause
    assert "drop --mamba-ssu-algorithm" in d.fix and "--mamba-ssu-algorithm simple" in d.fix
    assert "requires SM100+ (Blackwell)" in d.evidence
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


# ------------------------------------------------ token budget, MoE kernel, stall, older releases


def test_spec_token_budget_after_the_fact_names_the_three_settings():
    # vLLM 0.26.0's wording (vllm/config/vllm.py _set_max_num_scheduled_tokens);
    # the settings come from the log's own "non-default args" line
    d = diagnose(_log("spec_token_budget"))
    assert d.name == "spec_token_budget"
    for setting in ("--max-num-batched-tokens", "--max-num-seqs", "num_speculative_tokens"):
        assert setting in d.message
    # the numbers follow vLLM 0.26.0's rule: 1 + 16 tokens + 15 drafting slots per sequence
    assert "raise --max-num-batched-tokens to 8192 or more" in d.fix
    assert "lower --max-num-seqs to 64 or less" in d.fix
    assert "-1792" in d.evidence
    _one_sentence(d)


@pytest.mark.parametrize(
    "line",
    [
        # 0.26.0-0.32.0 (0.28+ drop "or max_num_seqs" at the end)
        "ValueError: max_num_scheduled_tokens is set to -1792 based on the speculative decoding "
        "settings, which does not allow any tokens to be scheduled. Increase max_num_batched_tokens "
        "to accommodate the additional draft token slots, or decrease num_speculative_tokens.",
        # 0.28.0-0.32.0: max_num_batched_tokens <= drafting slots
        "ValueError: VllmConfig does not have enough slots to schedule a token and support the "
        "speculative decoding settings. Got max_num_batched_tokens=16 and scheduled_token_delta=16.",
        # 0.26.0-0.27.1: an explicit max_num_scheduled_tokens
        "ValueError: VllmConfig received max_num_scheduled_tokens but it does not have enough slots "
        "to support the speculative decoding settings. It should be greater by at least 3840, but",
    ],
)
def test_spec_token_budget_every_wording(line):
    d = diagnose(line)
    assert d.name == "spec_token_budget"
    assert "--max-num-batched-tokens" in d.message and "--max-num-seqs" in d.message
    assert "num_speculative_tokens" in d.message


def test_spec_token_budget_with_config_uses_the_targets_vllm():
    cfg = dataclasses.replace(
        recipes.resolve("h200", speculative="dflash").with_args(
            {"--max-num-batched-tokens": 2048, "--max-num-seqs": 256,
             "--speculative-config": {"method": "dflash", "num_speculative_tokens": 16}}
        ),
        vllm_version="0.32.0",
    )  # fmt: skip
    line = "ValueError: max_num_scheduled_tokens is set to -1792 based on the speculative decoding settings, which does not allow any tokens to be scheduled."
    d = diagnose(line, cfg)
    assert (
        "raise --max-num-batched-tokens to 8448 or more" in d.fix
    )  # 0.32.0: 1 + 16 + 16 per sequence
    assert "lower --max-num-seqs to 62 or less" in d.fix


def test_nvfp4_without_moe_kernel_names_the_alternatives_and_the_target_notes():
    # vllm/model_executor/layers/fused_moe/oracle/nvfp4.py (0.26.0-0.32.0)
    d = diagnose(_log("nvfp4_no_moe_backend"), recipes.resolve("rtx-50xx"))
    assert d.name == "nvfp4_no_moe_backend"
    assert "no NVFP4 MoE kernel for this GPU" in d.cause and "RTX 5090" in d.cause
    assert "vLLM 0.28.0" in d.cause  # the release from the log
    assert "--moe-backend marlin" in d.fix and "BF16" in d.fix and "release" in d.fix
    assert "rtx-50xx" in d.fix  # tied to the target's note in cookbook/recipe.yaml
    _one_sentence(d)
    # without a config it still points at the notes; an explicitly requested backend too
    assert "rtx-pro-6000" in diagnose(_log("nvfp4_no_moe_backend")).fix
    explicit = diagnose(
        "ValueError: NvFp4 MoE backend 'FLASHINFER_CUTLASS' does not support the deployment "
        "configuration since kernel does not support current device cuda."
    )
    assert explicit.name == "nvfp4_no_moe_backend" and "flashinfer_cutlass" in explicit.cause


def test_nvfp4_humming_under_lora_names_marlin_as_the_fix():
    # vLLM 0.32.0-0.34.0: --enable-lora marks every MoE layer is_lora_enabled, and
    # modular_kernel.py is_supported_config refuses a kernel without LoRA ("kernel does not
    # support LoRA"); select_nvfp4_moe_backend raises it for an explicit --moe-backend
    d = diagnose(
        "ValueError: NvFp4 MoE backend 'HUMMING' does not support the deployment "
        "configuration since kernel does not support LoRA.",
        recipes.resolve("h200"),
    )
    assert d.name == "nvfp4_no_moe_backend" and "humming" in d.cause and "LoRA" in d.cause
    assert "--moe-backend marlin" in d.fix and "--enable-lora" in d.fix
    assert "release" not in d.fix  # not the missing-kernel advice: no release fixes this
    _one_sentence(d)


def test_disk_full_during_download_names_both_figures():
    # a full disk: huggingface_hub 2.4.0 file_download._check_disk_space
    d = diagnose(_log("disk_space"))
    assert d.name == "disk_space"
    assert "4,915.92 MB" in d.cause and "748.94 MB" in d.cause
    assert "/blobs" in d.cause
    assert "HF_HOME" in d.fix
    _one_sentence(d)
    # the bare OSError (no hub warning before it) is the same kind
    assert diagnose("OSError: [Errno 28] No space left on device").name == "disk_space"


def test_stalled_engine_is_named():
    # stats lines (vllm/v1/metrics/loggers.py) with 3 waiting, 0 running for 70 s
    d = diagnose(_log("engine_stalled"))
    assert d.name == "engine_stalled"
    assert d.cause.startswith("engine stalled: requests waiting, none running")
    assert "70 s" in d.cause
    # under a minute, or with a request running, it is not a stall
    lines = _log("engine_stalled").splitlines()
    assert diagnose("\n".join(lines[:6])) is None  # 40 s
    busy = _log("engine_stalled").replace("Running: 0 reqs", "Running: 1 reqs")
    assert (
        diagnose(busy.replace("generation throughput: 0.0", "generation throughput: 9.0")) is None
    )


def test_stalled_engine_pre_v1_wording():
    # vllm 0.8.5 vllm/engine/metrics.py: "Running: N reqs, Swapped: N reqs, Pending: N reqs"
    text = "\n".join(
        f"INFO 11-30 04:2{i}:00 metrics.py:486] Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 5 reqs, GPU KV cache "
        "usage: 0.0%, CPU KV cache usage: 0.0%."
        for i in range(3)
    )
    d = diagnose(text)
    assert d.name == "engine_stalled" and "5 waiting" in d.cause


def test_kv_cache_too_small_older_wordings():
    # pre-V1 engine (vllm 0.8.5 vllm/worker/worker.py)
    v0 = (
        "ValueError: The model's max seq len (262144) is larger than the maximum number of tokens "
        "that can be stored in KV cache (98304). Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine."
    )
    d = diagnose(v0)
    assert d.name == "kv_cache_too_small"
    assert "lower --max-model-len to 98304" in d.fix
    # vllm 0.8.5's V1 engine wrote "models's"
    v1_old = (
        "ValueError: To serve at least one request with the models's max seq len (262144), (12.00 "
        "GiB KV cache is needed, which is larger than the available KV cache memory (4.21 GiB). "
        "Based on the available memory, the estimated maximum model length is 92160."
    )
    assert "lower --max-model-len to 92160" in diagnose(v1_old).fix


def test_every_catalogue_entry_records_the_releases_checked():
    # a field on each entry; diagnose() reports it
    for entry in CATALOGUE:
        assert entry.checked_releases, f"{entry.name}: no checked_releases"
        vllm_wordings = [r for r in entry.checked_releases if r.startswith("vllm ")]
        if len(vllm_wordings) > 1:  # a vLLM wording: every release the registry pins was read
            for release in ("vllm 0.27.0", "vllm 0.27.1", "vllm 0.28.0", "vllm 0.32.0"):
                assert release in entry.checked_releases, f"{entry.name} not checked in {release}"
    d = diagnose(_log("kv_cache_too_small"))
    assert "vllm 0.8.5" in d.checked_releases and "vllm 0.28.0" in d.checked_releases
    assert "wording checked in" in d.report()


def test_registry_vllm_releases_are_all_checked():
    # the registry's pinned releases (except nightly) are in the catalogue's checked list
    from helpers.server.vllm_log import REGISTRY_RELEASES

    reg = load.load_registry()
    pinned = {str(t.vllm_version) for t in reg.targets.values()} - {"nightly"}
    assert {f"vllm {v}" for v in pinned} <= set(REGISTRY_RELEASES)


# ---------------------------------------------------------------- after launch: review()

#: select_nvfp4_moe_backend's line (vllm 0.26.0-0.32.0) after a Nemotron-H architecture.
TRTLLM_LOG = (
    "(APIServer pid=9) INFO 11-30 04:00:01 [model.py:733] Resolved architecture: NemotronHForCausalLM\n"
    "(EngineCore pid=90) INFO 11-30 04:00:40 [nvfp4.py:270] Using 'FLASHINFER_TRTLLM' NvFp4 MoE "
    "backend out of potential backends: ['FLASHINFER_TRTLLM', 'FLASHINFER_CUTEDSL', "
    "'FLASHINFER_CUTEDSL_BATCHED', 'FLASHINFER_CUTLASS', 'VLLM_CUTLASS', 'MARLIN', 'EMULATION'].\n"
)


def test_flashinfer_trtllm_on_blackwell_with_nemotron_h_warns_with_the_fix():
    log = TRTLLM_LOG
    b200 = recipes.resolve("b200")
    (d,) = review(log, b200)
    assert d.name == "nvfp4_moe_backend" and d.level == "warning"
    assert "FLASHINFER_TRTLLM" in d.cause and "compute capability 10.0" in d.cause
    assert "--moe-backend flashinfer_cutlass" in d.fix
    # another backend, or a Hopper GPU, is no finding
    assert (
        review(log.replace("'FLASHINFER_TRTLLM' NvFp4", "'FLASHINFER_CUTLASS' NvFp4"), b200) == []
    )
    assert review(log, recipes.resolve("h200")) == []


def test_review_of_a_clean_log_is_empty():
    assert review(_log("startup_cpu")) == []


def test_warn_findings_issues_one_warning_per_finding():
    from helpers.server.review import ServerFindingWarning, warn_findings

    with pytest.warns(ServerFindingWarning, match="--moe-backend flashinfer_cutlass"):
        found = warn_findings(TRTLLM_LOG, recipes.resolve("b200"))
    assert [d.name for d in found] == ["nvfp4_moe_backend"]


def test_blackwell_targets_pin_a_moe_backend_other_than_flashinfer_trtllm():
    # the b200 / b300 targets never leave the NVFP4 MoE backend to auto
    reg = load.load_registry()
    assert "nvfp4_moe_backend_blackwell" in reg.model.choices
    for target in ("b200", "b300", "dgx-station-gb300"):
        backend = recipes.resolve(target).args.get("--moe-backend")
        assert backend not in (None, "auto", "flashinfer_trtllm"), target


def test_flashinfer_cutlass_is_a_moe_backend_the_installed_vllm_accepts():
    # the fix review() names parses with vLLM 0.32.0's own serve parser (0.28.0: MoEBackend
    # Literal in vllm/config/kernel.py, read in the wheel)
    pytest.importorskip("vllm")
    recipes.resolve("b200").with_args({"--moe-backend": "flashinfer_cutlass"}).validate()


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
    assert (
        "set --max-model-len 4096 or less" in d.fix and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in d.fix
    )
    _one_sentence(d)


def test_fastokens_that_cannot_load_the_tokenizer_is_named():
    """Recorded on the H200 (vLLM 0.32.0, BF16 recipe in weightless mode): fastokens refused
    the architecture folder's word-level tokenizer inside VllmConfig's validation."""
    d = diagnose(_log("fastokens_unsupported_tokenizer"))
    assert d.name == "fastokens_unsupported_tokenizer"
    assert "WhitespaceSplit" in d.message and "unset VLLM_USE_FASTOKENS" in d.fix
    assert "fastokens 0.3.5" in " ".join(d.checked_releases)


def test_a_truncated_standin_is_named_with_the_standin_rebuild(tmp_path):
    """The truncated-safetensors start of a stand-in copy (the recorded vLLM 0.32.0 log of
    tests/server/test_faults.py's launched-anyway case): with the launch's config, whose model
    folder is a stand-in (it has standin.json), the fix is the stand-in's rebuild."""
    copy = tmp_path / "standin-copy"
    copy.mkdir()
    (copy / "standin.json").write_text("{}")
    d = diagnose(_log("damaged_checkpoint"), recipes.resolve("cpu").with_model(str(copy)))
    assert d.name == "damaged_checkpoint" and "weights file (.safetensors) is truncated" in d.cause
    assert "build_standin_model(force=True)" in d.fix
    _one_sentence(d)


# ------------------------------------------------------------------ a damaged or foreign compile cache

_AOT_DIR = (
    "/data/out/cache/vllm-0.32.0-sm90/vllm/torch_compile_cache/torch_aot_compile/3f2a/rank_0_0"
)


def test_damaged_compile_cache_names_the_folder_this_launch_used():
    """Recorded with vLLM 0.32.0 on the stand-in (tests/support/record_logs.py): compiled once into its
    own VLLM_CACHE_ROOT, the saved AOT artifact cut to half, started with VLLM_FORCE_AOT_LOAD=1:
    decorators.py's load-failure warning, then the engine died on the unpickling error."""
    text = _log("compile_cache_damaged")
    assert "UnpicklingError: pickle data was truncated" in text
    d = diagnose(text)
    assert d.name == "compile_cache" and "pickle data was truncated" in d.cause
    folder = "<tmp>/cache/vllm/torch_compile_cache"  # the launch's root, not vLLM's ~/.cache/vllm
    assert f"mv {folder} {folder}.bad" in d.fix and "VLLM_DISABLE_COMPILE_CACHE=1" in d.fix
    assert "this launch's VLLM_CACHE_ROOT is <tmp>/cache/vllm" in d.fix
    _one_sentence(d)
    # the same warning on a start that recompiled and came up is no failure
    healed = text[: text.index("Compiling model again")] + text.splitlines()[50] + "\n"
    assert diagnose(healed) is None


def test_failed_compile_of_a_corrupted_artifact_names_the_helpers_cache_root():
    # vllm/compilation/compiler_interface.py (InductorAdaptor.compile), vLLM 0.32.0; the first
    # line is the header helpers.server.vllm_server writes for each launch
    text = (
        "# helpers.server.vllm_server cache: VLLM_CACHE_ROOT=/data/out/cache/vllm-0.32.0-sm90/vllm "
        "TRITON_CACHE_DIR=/data/out/cache/vllm-0.32.0-sm90/triton\n"
        "(EngineCore pid=90) ERROR 12-01 10:00:00 [core.py:1510] RuntimeError: vLLM failed to "
        "compile the model. The most likely reason for this is that a previous compilation failed, "
        "leading to a corrupted compilation artifact. We recommend trying to remove "
        "~/.cache/vllm/torch_compile_cache and try again to see the real issue. \n"
    )
    d = diagnose(text)
    assert d.name == "compile_cache" and "damaged artifact" in d.cause
    folder = "/data/out/cache/vllm-0.32.0-sm90/vllm/torch_compile_cache"
    assert f"move {folder} aside" in d.fix and "VLLM_DISABLE_COMPILE_CACHE=1" in d.fix
    assert "vLLM's own message names ~/.cache/vllm/torch_compile_cache" in d.fix
    # without the header or a config, vLLM's default root, and no contradiction to point out
    d = diagnose(text.split("\n", 1)[1])
    assert "move ~/.cache/vllm/torch_compile_cache aside" in d.fix and "own message" not in d.fix


def test_a_loaded_aot_artifact_that_crashes_in_the_graph_is_the_cache():
    # decorators.py (vLLM 0.32.0): "Directly load AOT compilation from path %s", then the
    # loaded function runs in __call__ ("output = self.aot_compiled_fn(self, *args, **kwargs)");
    # an artifact built for another GPU fails in its kernels
    load = (
        "(EngineCore pid=90) INFO 12-01 10:00:00 [decorators.py:320] [backbone] Directly load AOT "
        f"compilation from path {_AOT_DIR}/model\n"
    )
    crash = (
        "(EngineCore pid=90) ERROR 12-01 10:00:02 [core.py:1510] Traceback (most recent call last):\n"
        '(EngineCore pid=90) ERROR 12-01 10:00:02 [core.py:1510]   File "/venv/vllm/compilation/'
        'decorators.py", line 595, in __call__\n'
        "(EngineCore pid=90) ERROR 12-01 10:00:02 [core.py:1510]     output = self.aot_compiled_fn"
        "(self, *args, **kwargs)\n"
        "(EngineCore pid=90) ERROR 12-01 10:00:02 [core.py:1510] torch.AcceleratorError: CUDA "
        "error: no kernel image is available for execution on the device\n"
    )
    d = diagnose(load + crash)
    assert d.name == "compile_cache" and f"{_AOT_DIR}/model" in d.cause
    assert "another GPU, kernel build or vLLM release" in d.cause
    assert "/data/out/cache/vllm-0.32.0-sm90/vllm/torch_compile_cache" in d.fix
    # a warm start that loads its artifacts is no failure; a known failure after a load is that
    assert (
        diagnose(load + "(APIServer pid=9) INFO [launcher.py:46] Application startup complete.\n")
        is None
    )
    kv = _log("kv_cache_too_small")
    assert diagnose(load + kv).name == "kv_cache_too_small"


def test_a_loaded_aot_artifact_that_fails_inductors_input_check_is_the_cache():
    # An artifact compiled for other inputs, loaded and run: torch 2.13.0's Inductor runtime
    # (torch/_inductor/output_code.py line 763 calls the compiled graph through
    # utils.py align_inputs_from_check_idxs.run, line 3832, whose copy_misaligned_inputs asserts
    # at line 3876: "Expected tensors only, but got: {type(_inp)}"), reached from vLLM 0.32.0's
    # decorators.py line 703 (output = self.aot_compiled_fn(...)). Frame lines as in those wheels;
    # the user-reported shape of this crash (ls1intum/edutelligence #579).
    pre = "(EngineCore pid=90) ERROR 12-01 10:00:02 [core.py:1510] "
    load = (
        "(EngineCore pid=90) INFO 12-01 10:00:00 [decorators.py:320] [backbone] Directly load AOT "
        f"compilation from path {_AOT_DIR}/model\n"
    )
    inductor = [
        '  File "/venv/torch/_inductor/output_code.py", line 763, in __call__',
        "    return self.current_callable(inputs)",
        '  File "/venv/torch/_inductor/utils.py", line 3832, in run',
        "    old_tensors, new_tensors = copy_misaligned_inputs(",
        '  File "/venv/torch/_inductor/utils.py", line 3876, in copy_misaligned_inputs',
        "    assert isinstance(_inp, torch.Tensor), (",
        "AssertionError: Expected tensors only, but got: <class 'int'>",
    ]
    vllm_frames = [
        '  File "/venv/vllm/compilation/decorators.py", line 703, in __call__',
        "    output = self.aot_compiled_fn(self, *args, **kwargs)",
    ]
    whole = ["Traceback (most recent call last):", *vllm_frames, *inductor]
    d = diagnose(load + "".join(pre + line + "\n" for line in whole))
    assert d.name == "compile_cache" and f"{_AOT_DIR}/model" in d.cause
    assert "/data/out/cache/vllm-0.32.0-sm90/vllm/torch_compile_cache" in d.fix
    # the worker's short traceback keeps only the innermost frames: Inductor's runtime alone
    short = ["Traceback (most recent call last):", *inductor]
    d = diagnose(load + "".join(pre + line + "\n" for line in short))
    assert d is not None and d.name == "compile_cache"
    assert "VLLM_DISABLE_COMPILE_CACHE=1" in d.fix
    # the same assertion with no saved artifact loaded first is not the cache
    other = diagnose("".join(pre + line + "\n" for line in short))
    assert other is None or other.name != "compile_cache"


# ------------------------------------------------------------ no CUDA compiler; CUDA 12 driver, CUDA 13 wheel


def test_flashinfer_without_nvcc_names_the_pinned_kernels_a_toolkit_and_the_sampler_switch():
    # flashinfer 0.7.0.post1 flashinfer/jit/cpp_ext.py get_cuda_path (its text produced by that
    # function from the wheel), reached from vLLM 0.32.0's sampler at the first sampled request
    d = diagnose(_log("flashinfer_no_nvcc"))
    assert d.name == "flashinfer_no_nvcc" and "the top-k/top-p sampler" in d.cause
    assert "Could not find nvcc and default cuda_home='/usr/local/cuda'" in d.evidence
    assert (
        "flashinfer-cubin==0.7.0.post1" in d.fix
    )  # vLLM 0.32.0 pins flashinfer-python 0.7.0.post1
    assert (
        "flashinfer-jit-cache==0.7.0.post1+cu130" in d.fix and "https://flashinfer.ai/whl" in d.fix
    )
    assert "CUDA_HOME" in d.fix and "VLLM_USE_FLASHINFER_SAMPLER=0" in d.fix
    _one_sentence(d)
    # the Mamba backend's build (0.28.0's pin): no sampler switch offered, that release's kernels
    mamba = (
        _log("flashinfer_no_nvcc")
        .replace("v0.32.0", "v0.28.0")
        .replace(
            "vllm/v1/sample/ops/topk_topp_sampler.py", "vllm/model_executor/layers/mamba/ops/ssu.py"
        )
        .replace("flashinfer/sampling.py", "flashinfer/mamba/selective_state_update.py")
    )
    d = diagnose(mamba)
    assert "Mamba backend" in d.cause and "VLLM_USE_FLASHINFER_SAMPLER" not in d.fix
    assert "flashinfer-cubin==0.6.16.post3" in d.fix


@pytest.mark.parametrize(
    "log, cause",
    [
        # the dynamic loader on the 0.32.0 wheel's vllm/_C_stable_libtorch.abi3.so (produced here)
        ("cuda_runtime_missing", "need the CUDA 13 runtime (libcudart.so.13)"),
        # torch 2.13.0 c10/cuda/CUDAFunctions.cpp: NVML's 12080 is CUDA 12.8
        ("driver_too_old", "the NVIDIA driver supports CUDA 12.8 (torch: found version 12080)"),
    ],
)
def test_cuda_13_wheel_on_a_cuda_12_driver_names_the_cu129_build_or_a_new_driver(log, cause):
    d = diagnose(_log(log), recipes.resolve("h100"))
    assert d.name == "cuda_version_mismatch" and cause in d.cause
    assert (
        "pip install vllm==0.32.0+cu129 --extra-index-url https://wheels.vllm.ai/0.32.0/cu129 "
        "--extra-index-url https://download.pytorch.org/whl/cu129" in d.fix
    )
    assert "update the NVIDIA driver to 580 or newer" in d.fix
    _one_sentence(d)


#: Three vLLM 0.32.0 servers on one H100 (2026-12-06): the NVFP4 recipe, MTP K=1 (its MTP block
#: reads the H100's unquantized Triton file) and BF16 + online FP8 (no H100 FP8 file in 0.32.0).
H100_SCREEN = (
    TESTS / ".." / "docs" / "results" / "h100" / "tune" / "drafting-0.32.0-2026-12-06" / "logs"
)


def test_default_moe_tiles_are_named_with_the_missing_file_and_the_tuned_config_folder():
    logs = {p.name.split("-")[4]: p.read_text() for p in H100_SCREEN.glob("vllm-*.log")}
    assert set(logs) == {"52027", "45829", "49865"}
    (d,) = review(logs["49865"])  # BF16 + --quantization fp8
    assert d.name == "moe_config_default" and d.level == "warning"
    assert "E=128,N=1856,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json" in d.cause
    assert "VLLM_TUNED_CONFIG_FOLDER" in d.fix and "Using default MoE config" in d.evidence
    # a server that found its file ("Using configuration from ...") or runs no Triton MoE: none
    assert "Using configuration from" in logs["45829"]
    assert review(logs["45829"]) == [] and review(logs["52027"]) == []
    # the H200 has an FP8 file but no BF16 one: its BF16 record ran default tiles too
    bf16 = (
        H100_SCREEN.parents[3] / "h200" / "vllm-0.32.0" / "bf16-triton" / "server.log"
    ).read_text()
    assert "E=128,N=1856,device_name=NVIDIA_H200.json" in review(bf16)[0].cause
    # two files missing (BF16 experts and a LoRA kernel's): one finding naming both
    lora = (H100_SCREEN.parents[2] / "lora-2026-12-06" / "lora-r8" / "vllm.log").read_text()
    (both,) = review(bf16 + lora)
    assert "NVIDIA_H200.json, E=128,N=5376,device_name=NVIDIA_H100_80GB_HBM3.json" in both.cause
