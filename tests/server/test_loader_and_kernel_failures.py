"""A serve flag's package missing or too old, and a kernel library probing what a
unified-memory GPU lacks: each diagnosed by name, with the install line or the backend.

Recorded by ``tests/support/record_logs.py`` from vLLM 0.32.0 (CPU build) on the stand-in:
``load_format_missing_fastsafetensors``, ``load_format_missing_instanttensor`` (the package
absent) and ``load_format_old_fastsafetensors`` (fastsafetensors 0.1.15, without the
``parallel_loader`` module 0.32.0 imports). The GPU-only ones are written in vLLM's line format:
``load_format_old_instanttensor`` (0.32.0's weight_utils.py frame; the exception is the one
instanttensor 0.1.9's ``safe_open`` raised here for 0.32.0's ``tensor_filter`` keyword) and
``humming_unified_memory_nvml`` (the frames of humming-kernels 0.1.11 and nvidia-ml-py
13.615.71 at their line numbers, the vLLM entry of vllm-project/vllm#49554).
"""

from __future__ import annotations

import dataclasses

import pytest

from helpers.config import resolve as recipes
from helpers.server.diagnose import diagnose
from tests.support import DATA

LOGS = DATA / "logs"


def _diagnose(name: str, config=None):
    d = diagnose((LOGS / f"{name}.log").read_text(), config)
    assert d is not None, f"{name}: no diagnosis"
    assert d.message.endswith(".") and "\n" not in d.message and d.evidence
    return d


@pytest.mark.parametrize(
    ("log", "package", "floor"),
    [
        ("load_format_missing_fastsafetensors", "fastsafetensors", "fastsafetensors>=0.3.3"),
        ("load_format_missing_instanttensor", "instanttensor", "instanttensor>=0.2.2"),
    ],
)
def test_a_load_format_without_its_package_names_the_pinned_install(log, package, floor):
    # vLLM 0.32.0 model_loader/weight_utils.py imports the package inside the weight iterator;
    # the floor is 0.32.0's METADATA (docs/results/flags/vllm-0.32.0.json, "requires")
    d = _diagnose(log)
    assert d.name == "loader_package"
    assert f"--load-format {package} needs the {package} package" in d.cause
    assert "not installed" in d.cause and "vLLM 0.32.0" in d.cause
    assert f"pip install -U '{floor}'" in d.fix
    assert "extra_args={'--load-format': None}" in d.fix
    assert f"No module named '{package}'" in d.evidence


@pytest.mark.parametrize(
    ("log", "said"),
    [
        ("load_format_old_fastsafetensors", "No module named 'fastsafetensors.parallel_loader'"),
        ("load_format_old_instanttensor", "unexpected keyword argument 'tensor_filter'"),
    ],
)
def test_a_load_format_package_below_the_floor_is_named_too_old(log, said):
    d = _diagnose(log)
    assert d.name == "loader_package"
    assert "the installed one is older" in d.cause and said in d.cause
    assert "pip install -U '" in d.fix and ">=" in d.fix


def test_a_keyword_error_outside_a_weight_loader_is_not_a_package_problem():
    text = (LOGS / "load_format_old_instanttensor.log").read_text()
    text = text.replace("instanttensor_weights_iterator", "build_model")
    d = diagnose(text)
    assert d is None or d.name != "loader_package"


def test_the_floor_follows_the_release_that_serves():
    # vLLM 0.28.0 installs instanttensor only with its extra, at 0.1.9 (its metadata, read with
    # `pip install --dry-run --report`): a 0.28.0 config gets that floor and the extra named
    cfg = recipes.resolve("rtx-pro-6000")
    old = dataclasses.replace(cfg, vllm_version="0.28.0")
    text = (LOGS / "load_format_missing_instanttensor.log").read_text()
    text = text.replace("(v0.32.0)", "(v0.28.0)")
    d = diagnose(text, old)
    assert "instanttensor>=0.1.9" in d.fix and "[instanttensor] extra" in d.cause


def test_humming_on_a_unified_memory_gpu_names_marlin_and_the_release_with_the_fix():
    # humming-kernels 0.1.11 humming/utils/device.py calculate_gpu_bandwidth asks NVML for the
    # memory clock; 0.1.12 (vLLM 0.28.0's pin) returns GB10's bandwidth without asking
    d = _diagnose("humming_unified_memory_nvml")
    assert d.name == "humming_unified_memory_nvml"
    assert "GB10" in d.cause and "memory clock" in d.cause
    assert "--moe-backend marlin" in d.fix and "vLLM 0.28.0" in d.fix and "0.1.12" in d.fix
    assert "NVMLError_NotSupported" in d.evidence


def test_an_nvml_refusal_outside_humming_is_not_blamed_on_it():
    text = (LOGS / "humming_unified_memory_nvml.log").read_text().replace("humming", "other")
    d = diagnose(text)
    assert d is None or d.name != "humming_unified_memory_nvml"


def test_an_adapter_vllm_refuses_at_start_up_is_named_with_the_check_that_catches_it():
    """``lora_start_dora`` (recorded, vLLM 0.32.0 CPU build): the stand-in started with
    ``--lora-modules dora=<a DoRA adapter>``; the engine's add_lora fails and the start ends.
    The diagnosis quotes vLLM's reason and names the pre-launch check (not "no known failure")."""
    d = _diagnose("lora_start_dora")
    assert d.name == "lora_adapter_refused"
    assert d.cause.endswith("so the start ended: vLLM does not yet support DoRA")
    assert "DoRA: fix the adapter" in d.message  # the reason's own full stop is not kept: no ".:"
    assert "drop it from --lora-modules" in d.fix and "check_adapter(folder, base)" in d.fix
    assert d.evidence.startswith("ValueError: Call to add_lora method failed")


def test_adapters_named_without_enable_lora_get_add_enable_lora_as_the_fix():
    """``lora_start_not_enabled`` (recorded, vLLM 0.32.0 CPU build): a good adapter in
    ``--lora-modules`` on a command without ``--enable-lora``. The fix is the missing flag, not
    "fix the adapter"."""
    d = _diagnose("lora_start_not_enabled")
    assert d.name == "lora_adapter_refused"
    assert d.cause.endswith("LoRA is not enabled. Use --enable-lora to enable LoRA")
    assert d.fix.startswith("add --enable-lora") and "fix the adapter" not in d.fix
