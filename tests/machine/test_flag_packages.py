"""The packages a serve flag needs beyond ``pip install vllm==X``, read from the release's own
``Requires-Dist`` (its flag table's ``requires`` and ``extras``, ``python -m tools.flagtables
extras``), planned pinned at the release's floor."""

from __future__ import annotations

import pytest

from helpers.config import resolve as recipes
from helpers.config.flagtable import load_table
from helpers.config.versions import VllmInstall
from helpers.machine import install
from helpers.machine.extras import flag_requirements, package_requirement

CUDA = VllmInstall("vllm", "0.28.0")


@pytest.mark.parametrize("release", ["0.28.0", "0.32.0", "0.33.0", "0.34.0"])
def test_every_offered_table_carries_the_release_requirements(release):
    tab = load_table(release)
    assert tab["extras"]["instanttensor"] and tab["extras"]["fastsafetensors"]
    assert any(r.startswith("torch") for r in tab["requires"])


def test_a_release_that_installs_the_package_only_with_an_extra_gets_the_pinned_install():
    # vLLM 0.28.0: instanttensor>=0.1.9 only with [instanttensor]; fastsafetensors>=0.3.3 for
    # every install. The rtx-pro-6000 target passes --load-format instanttensor.
    cfg = recipes.resolve("rtx-pro-6000", vllm_version="0.28.0")
    assert flag_requirements(cfg) == [
        ("--load-format instanttensor", "instanttensor", "instanttensor>=0.1.9")
    ]
    p = install.install_plan(cfg, method="pip", installed=CUDA, colab=False, driver=None)
    assert "pip install 'instanttensor>=0.1.9'" in p.commands
    assert any("[instanttensor] extra" in n for n in p.notes)
    docker = install.install_plan(cfg, method="docker", installed=CUDA, colab=False, driver=None)
    assert any("pip install 'instanttensor>=0.1.9'" in n for n in docker.notes)


def test_a_release_that_installs_it_with_vllm_adds_nothing():
    # 0.32.0's METADATA lists fastsafetensors>=0.3.3 and instanttensor>=0.2.2 in Requires-Dist
    for target in ("rtx-pro-6000", "dgx-spark"):
        cfg = recipes.resolve(target, vllm_version="0.32.0")
        assert cfg.args["--load-format"] in ("instanttensor", "fastsafetensors")
        assert flag_requirements(cfg) == []
    assert flag_requirements(recipes.resolve("h200", vllm_version="0.28.0")) == []


def test_a_module_is_matched_to_its_distribution_and_a_nightly_reads_the_newest_table():
    assert package_requirement("fastsafetensors.parallel_loader", "0.32.0") == (
        "fastsafetensors>=0.3.3",
        None,
        "0.32.0",
    )
    req, extra, release = package_requirement("runai_model_streamer", "nightly")
    assert req.startswith("runai-model-streamer") and extra == "runai" and release == "0.34.0"
    assert package_requirement("fastokens", "0.32.0") is None
