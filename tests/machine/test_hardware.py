"""helpers.machine.hardware: recorded nvidia-smi outputs map to registry targets; check_machine refuses
what the GPUs cannot run, warns on a mismatched notebook, and points GPU-less machines to
stand-in mode. Fixtures: tests/data/hardware/*.csv (nvidia-smi's exact CSV format)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from helpers.config import load
from helpers.config import resolve as recipes
from helpers.config.run import Run
from helpers.errors import CookbookError, HardwareError
from helpers.machine import gpus as gpus_mod
from helpers.machine import hardware
from helpers.machine.gpus import GPU, GPUProcess
from tests.support import DATA as TEST_DATA

DATA = TEST_DATA / "hardware"


def smi(name: str) -> list[GPU]:
    return gpus_mod.parse_nvidia_smi((DATA / f"{name}.csv").read_text())


# fixture -> (targets that must match, targets that must not)
EXPECTED = {
    "h100": ({"h100", "h100-bf16", "h100-baseten-throughput"}, {"h100x8-bf16", "h200"}),
    "h100x8": ({"h100", "h100-bf16", "h100-baseten-throughput", "h100x8-bf16"}, {"h200"}),
    "h200": ({"h200"}, {"h100", "h100x8-bf16"}),
    "a100": ({"a100"}, {"h100"}),
    "l40s": ({"l40s"}, {"a100"}),
    "l4": ({"l4"}, {"l40s"}),  # Colab runtimes (hand-written fixtures)
    "a100_40gb": ({"a100-40gb"}, {"a100"}),
    "g4": ({"rtx-pro-6000"}, {"rtx-50xx"}),
    "rtx_pro_6000": ({"rtx-pro-6000"}, {"rtx-50xx"}),
    "rtx_5090": ({"rtx-50xx"}, {"rtx-pro-6000"}),
    "rtx_5080": ({"rtx-50xx"}, {"rtx-pro-6000"}),
    "gb10": ({"dgx-spark"}, {"rtx-50xx"}),
    "gb300": ({"dgx-station-gb300", "b300"}, {"b200"}),
    "b200": ({"b200"}, {"b300"}),
    "jetson_thor": ({"jetson"}, {"dgx-spark"}),
}


# ---- parsing ---------------------------------------------------------------------------


def test_parse_recorded_h200():
    (g,) = smi("h200")  # recorded on a real H200 (driver 580.159.04)
    assert g.name == "NVIDIA H200"
    assert g.compute_capability == "9.0"
    assert g.memory_total_gib == pytest.approx(143771 / 1024)
    assert g.memory_used_gib == 0


def test_parse_unified_memory_na_fields():
    (g,) = smi("gb10")
    assert g.unified_memory and g.memory_total_gib is None and g.memory_used_gib is None
    assert g.compute_capability == "12.1"


def test_parse_eight_gpus_keeps_indices():
    gpus = smi("h100x8")
    assert [g.index for g in gpus] == list(range(8))


def test_parse_empty_output_is_no_gpu():
    assert smi("none") == []


def test_nvml_shaped_records_parse_like_nvidia_smi():
    # What helpers.machine.gpus._read_nvml builds from pynvml: bytes name, memory in bytes,
    # compute capability as a (major, minor) tuple, memory None where NVML says NotSupported.
    nvml = [
        {
            "index": 0,
            "name": b"NVIDIA H200",
            "memory": {"total": 143771 * 2**20, "used": 0},
            "cuda_compute_capability": (9, 0),
        },
    ]
    assert gpus_mod.gpus_from_records(nvml) == smi("h200")
    unified = [
        {"index": 0, "name": "NVIDIA GB10", "memory": None, "cuda_compute_capability": (12, 1)}
    ]
    assert gpus_mod.gpus_from_records(unified) == smi("gb10")


def test_recorded_nvml_records_equal_recorded_nvidia_smi():
    # Both recorded on the same real H200.
    records = json.loads((DATA / "h200_nvml.json").read_text())
    assert gpus_mod.gpus_from_records(records) == smi("h200")


def test_recorded_busy_h200_is_refused_naming_the_pid():
    procs = gpus_mod.parse_compute_apps((DATA / "h200_busy_apps.csv").read_text())
    with pytest.raises(HardwareError) as exc:
        check("h200", "h200_busy", processes=procs)
    assert "pids: 522" in str(exc.value) and "below 0.31" in str(exc.value)


def test_parse_compute_apps():
    (p,) = gpus_mod.parse_compute_apps((DATA / "apps_busy.csv").read_text())
    assert p == GPUProcess(12345, "/usr/bin/python3", 40.0)


# ---- matching --------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_recorded_gpus_match_registry_targets(fixture):
    must, must_not = EXPECTED[fixture]
    got = set(hardware.match_targets(smi(fixture)))
    assert must <= got, f"{fixture}: {got}"
    assert not (must_not & got), f"{fixture}: {got}"
    assert got <= set(list(load.load_registry().targets))


def test_every_gpu_target_is_matched_by_some_fixture():
    covered = set().union(*(m for m, _ in EXPECTED.values()))
    reg = load.load_registry()
    gpu_targets = set(reg.gpu_targets())
    assert gpu_targets <= covered


def test_no_gpu_maps_to_stand_in():
    assert hardware.match_targets([]) == ["cpu"]


def test_unlisted_gpu_falls_back_to_compute_capability():
    gh200 = gpus_mod.gpus_from_records(
        [
            {
                "name": "NVIDIA GH200 480GB",
                "memory": {"total": 97871 * 2**20, "used": 0},
                "cuda_compute_capability": (9, 0),
            }
        ]
    )
    got = hardware.match_targets(gh200)
    assert (
        "h100" in got and "h200" not in got
    )  # 96 GB: H100-sized targets fit, H200's 141 GB do not


def test_turing_matches_nothing():
    assert hardware.match_targets(smi("t4")) == []


# ---- detection -------------------------------------------------------------------------


def _fake_smi(
    tmp_path: Path, gpu_csv: Path | None, apps_csv: Path | None = None, fail: str = ""
) -> str:
    """An executable named nvidia-smi that prints recorded output for the two queries."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "nvidia-smi"
    if fail:
        body = f"echo {fail!r}; exit 9"
    else:
        body = (
            'case "$1" in\n'
            f"  --query-gpu=name,memory.total,compute_cap,memory.used) cat {gpu_csv} ;;\n"
            f"  --query-compute-apps=*) cat {apps_csv or '/dev/null'} ;;\n"
            "  *) exit 2 ;;\n"
            "esac"
        )
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"


def test_detect_via_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _fake_smi(tmp_path, DATA / "h100_busy.csv", DATA / "apps_busy.csv"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    probe = gpus_mod.detect_gpus(use_nvml=False)
    assert probe.source == "nvidia-smi"
    assert probe.gpus == smi("h100_busy")
    assert probe.processes[0].pid == 12345


def test_detect_honours_cuda_visible_devices(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _fake_smi(tmp_path, DATA / "h100x8.csv"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    probe = gpus_mod.detect_gpus(use_nvml=False)
    assert [g.index for g in probe.gpus] == [2, 3]


def test_detect_without_driver(tmp_path, monkeypatch):
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    monkeypatch.setenv("PATH", _fake_smi(tmp_path, None, fail=msg))
    probe = gpus_mod.detect_gpus(use_nvml=False)
    assert probe.gpus == [] and "couldn't communicate" in probe.detail


def test_detect_without_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    probe = gpus_mod.detect_gpus(use_nvml=False)
    assert probe.gpus == [] and probe.source is None and "not found" in probe.detail


def test_detect_on_this_machine_never_raises():
    probe = gpus_mod.detect_gpus()
    assert probe.source in (None, "nvml", "nvidia-smi")


# ---- check_machine ---------------------------------------------------------------------


def check(target, fixture, *, stand_in=False, **kw):
    cfg = kw.pop("cfg", None) or recipes.resolve(target)
    run = Run("stand_in", target=cfg) if stand_in else cfg
    return hardware.check_machine(run, gpus=smi(fixture), processes=kw.pop("processes", []), **kw)


@pytest.mark.parametrize(
    "target,fixture",
    [
        ("h100", "h100"),
        ("h200", "h200"),
        ("a100", "a100"),
        ("l40s", "l40s"),
        ("rtx-pro-6000", "rtx_pro_6000"),
        ("rtx-50xx", "rtx_5090"),
        ("dgx-spark", "gb10"),
        ("dgx-station-gb300", "gb300"),
        ("b300", "gb300"),
        ("b200", "b200"),
        ("jetson", "jetson_thor"),
        ("h100x8-bf16", "h100x8"),
        ("h100-bf16", "h100"),
    ],
)
def test_check_machine_accepts_its_own_target(target, fixture, capsys):
    report = check(target, fixture)
    assert report.ok and report.target_matches and not report.warnings
    assert "OK" in capsys.readouterr().out


def test_mismatched_notebook_warns_with_fix(capsys):
    report = check("h100", "l40s")
    assert report.ok and not report.target_matches
    (w,) = report.warnings
    assert "l40s" in w and "open the notebook of a matching target" in w
    assert "WARNING" in capsys.readouterr().out


def test_refuses_old_compute_capability():
    with pytest.raises(HardwareError) as exc:
        check("l40s", "t4")
    msg = str(exc.value)
    assert "compute capability 8.0" in msg and "7.5" in msg and "stand_in=True" in msg
    assert isinstance(exc.value, CookbookError)


def test_refuses_bf16_on_small_gpu():
    cfg = recipes.resolve("h100-bf16")
    with pytest.raises(HardwareError) as exc:
        check(None, "l40s", cfg=cfg)
    msg = str(exc.value)
    assert "72 GB" in msg and "use the NVFP4 variant" in msg


def test_refuses_nvfp4_on_16gb_rtx_5080():
    with pytest.raises(HardwareError, match=r"needs at least 18 GB.*use a GPU with at least 18 GB"):
        check("rtx-50xx", "rtx_5080")


def test_refuses_too_few_gpus_for_tensor_parallel():
    with pytest.raises(HardwareError, match=r"uses 8 GPUs.*lower --tensor-parallel-size"):
        check("h100x8-bf16", "h100")


def test_refuses_fp4_moe_backend_on_sm120():
    cfg = recipes.resolve("rtx-50xx", extra_args={"--moe-backend": "flashinfer_cutlass"})
    with pytest.raises(HardwareError, match=r"'--moe-backend': 'marlin'"):
        check(None, "rtx_5090", cfg=cfg)


def test_refuses_when_other_process_holds_memory():
    procs = gpus_mod.parse_compute_apps((DATA / "apps_busy.csv").read_text())
    with pytest.raises(HardwareError) as exc:
        check("h100", "h100_busy", processes=procs)
    msg = str(exc.value)
    assert (
        "12345" in msg and "stop those processes" in msg and "lower --gpu-memory-utilization" in msg
    )
    assert exc.value.report.held_gib == pytest.approx(40962 / 1024)


def test_reports_small_held_memory_as_warning():
    report = check("h100", "h100_some_used")
    assert report.ok and report.held_gib == pytest.approx(2210 / 1024)
    assert any("held by other processes" in w for w in report.warnings)


def test_no_gpu_refuses_and_points_to_stand_in():
    with pytest.raises(HardwareError) as exc:
        hardware.check_machine(recipes.resolve("h100"), gpus=[], quiet=True)
    assert "No NVIDIA GPU" in str(exc.value) and "stand_in=True" in str(exc.value)


def test_no_gpu_in_stand_in_mode_reports_and_continues(capsys):
    report = hardware.check_machine(Run("stand_in", target=recipes.resolve("h100")), gpus=[])
    assert report.ok and report.matches == ["cpu"]
    assert any("stand-in" in w for w in report.warnings)
    assert "OK for the CPU stand-in" in capsys.readouterr().out


def test_stand_in_mode_turns_refusals_into_warnings():
    report = check("h100-bf16", "t4", stand_in=True)
    assert report.ok and any("compute capability 8.0" in w for w in report.warnings)


def test_cpu_target_needs_no_gpu():
    report = hardware.check_machine(recipes.resolve("cpu"), gpus=[], quiet=True)
    assert report.ok and not report.warnings


def test_raise_on_error_false_returns_errors():
    report = check("h100x8-bf16", "h100", raise_on_error=False, quiet=True)
    assert not report.ok and "tensor-parallel-size" in report.errors[0]


def test_check_machine_on_this_machine_in_stand_in_mode():
    # What the notebooks run in CI: never raises in stand-in mode.
    report = hardware.check_machine(Run("stand_in", target=recipes.resolve("h100")), quiet=True)
    assert report.ok
