"""Runtime naming and routing (lab.workshop.runtime) and the Colab links' repository.

GPU listings: ``tests/data/hardware/`` (its README says which are real recordings; the Colab
ones, T4 / L4 / A100 40 GB / H100 / G4, are written by hand in the recorded formats).
"""

from __future__ import annotations

import json

import pytest

from helpers import errors
from helpers.config import load
from helpers.machine import gpus, hardware
from lab.workshop import runtime
from tests.support import DATA as TEST_DATA

DATA = TEST_DATA / "hardware"


def smi(name: str):
    return gpus.parse_nvidia_smi((DATA / f"{name}.csv").read_text())


def nvml(name: str):
    return gpus.gpus_from_records(json.loads((DATA / f"{name}_nvml.json").read_text()))


# fixture -> (runtime key, routed target, stand-in?)
COLAB = {
    "t4": ("t4", "cpu", True),
    "l4": ("l4", "l4", False),
    "a100_40gb": ("a100-40gb", "a100-40gb", False),
    "h100": ("h100", "h100", False),
}


@pytest.mark.parametrize("reader", [smi, nvml], ids=["nvidia-smi", "nvml"])
@pytest.mark.parametrize("fixture", sorted(COLAB))
def test_colab_gpu_is_named_and_routed(fixture, reader):
    key, target, stand_in = COLAB[fixture]
    rt = runtime.classify(reader(fixture), colab=True)
    assert rt.key == key and rt.colab
    r = runtime.route(rt)
    assert (r.target, r.stand_in) == (target, stand_in)
    if not stand_in:
        assert r.plan is not None and r.plan.starts, r.plan
        assert target in r.reason


def test_t4_routes_to_the_stand_in_and_says_why():
    r = runtime.route(runtime.classify(smi("t4"), colab=True))
    assert r.stand_in and r.target == "cpu" and r.plan is None
    # the numbers that decide it, each in the reason
    assert "17.2 GiB" in r.reason and "15.0 GiB" in r.reason
    assert "compute capability 7.5" in r.reason and "no FP4" in r.reason and "8.0" in r.reason
    assert "L4" in r.reason  # and what to pick instead
    assert "Route: the CPU stand-in" in r.summary()


def test_a100_sizes_and_g4_and_cpu():
    assert runtime.classify(smi("a100"), colab=False).key == "a100-80gb"
    assert runtime.route(runtime.classify(smi("a100"), colab=False)).target == "a100"
    assert runtime.route(runtime.classify(smi("g4"), colab=True)).target == "rtx-pro-6000"
    cpu = runtime.route(runtime.classify([], colab=True, detail="nvidia-smi not found"))
    assert (
        cpu.stand_in and "No NVIDIA GPU" in cpu.reason and "nvidia-smi not found" in cpu.summary()
    )


def test_unknown_gpu_uses_the_registry_match_or_says_why_not():
    gh200 = [gpus.GPU(0, "NVIDIA GH200 480GB", 95.0, "9.0")]
    r = runtime.route(runtime.classify(gh200, colab=False))
    assert runtime.classify(gh200, colab=False).key == "unknown"
    assert not r.stand_in and r.target in hardware.match_targets(gh200)
    v100 = [gpus.GPU(0, "Tesla V100-SXM2-16GB", 16.0, "7.0")]
    r = runtime.route(runtime.classify(v100, colab=False))
    assert r.stand_in and "Tesla V100" in r.reason


def test_repository_must_be_owner_slash_name():
    def reg(repo: str):
        return load.load_registry().model_copy(update={"repository": repo})

    with pytest.raises(errors.CookbookError, match="owner/name"):
        runtime.repository(reg("not a repo"))
    assert runtime.colab_url("notebooks/x.ipynb", reg("a/b")) == (
        "https://colab.research.google.com/github/a/b/blob/main/notebooks/x.ipynb"
    )
