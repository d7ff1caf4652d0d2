"""Step 1 finds stale FlashInfer parts: kernel packages of another version than
``flashinfer-python``, a jit-cache wheel or a compiled JIT module of another CUDA than torch's.

The packages are real ``*.dist-info`` folders in a temporary site folder, read by
``importlib.metadata`` as any install is; the JIT module is a real shared object linked by the
system's C compiler against a ``libcudart.so.<major>``, in the cache layout of flashinfer
0.7.2.post1's ``flashinfer/jit/env.py``.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from helpers.config import resolve as recipes
from helpers.config.versions import VllmInstall
from helpers.machine import gpu_wheels, install
from helpers.machine.gpu_wheels import flashinfer_drift


def _site(tmp_path, packages: dict[str, str], torch_cuda: str | None = "12.9"):
    site = tmp_path / "site"
    for name, version in packages.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if torch_cuda is not None:
        (site / "torch").mkdir()
        (site / "torch" / "version.py").write_text(f"cuda: Optional[str] = '{torch_cuda}'\n")
    return [str(site)]


def _jit_module(cache, flashinfer: str, cudart_major: int, name: str = "sampling"):
    """A shared object whose DT_NEEDED is libcudart.so.<major>, where FlashInfer keeps one."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to link a shared object")
    lib = cache.parent / "cudart"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "stub.c").write_text("int cudart_stub(void) { return 0; }\n")
    soname = f"libcudart.so.{cudart_major}"
    cc = ["cc", "-shared", "-fPIC"]
    subprocess.run([*cc, f"-Wl,-soname,{soname}", "-o", lib / soname, lib / "stub.c"], check=True)
    folder = cache / flashinfer / "90" / "cached_ops" / name
    folder.mkdir(parents=True)
    (folder / "mod.c").write_text("int cudart_stub(void); int f(void) { return cudart_stub(); }\n")
    out = folder / f"{name}.so"
    subprocess.run([*cc, "-o", out, folder / "mod.c", "-L", lib, f"-l:{soname}"], check=True)
    return folder


def test_matching_parts_say_nothing(tmp_path):
    path = _site(
        tmp_path,
        {
            "flashinfer-python": "0.7.2.post1",
            "flashinfer-cubin": "0.7.2.post1",
            "flashinfer-jit-cache": "0.7.2.post1+cu129",
            "torch": "2.14.0+cu129",
        },
    )
    _jit_module(tmp_path / "cache", "0.7.2.post1", 12)
    assert flashinfer_drift(path, tmp_path / "cache") == []
    assert flashinfer_drift(_site(tmp_path / "none", {"torch": "2.14.0"}), tmp_path) == []


def test_kernel_packages_left_behind_by_an_upgrade_are_named_with_the_pinned_fix(tmp_path):
    # vLLM 0.32.0 -> 0.33.0 upgrades flashinfer-python 0.7.0.post1 -> 0.7.2.post1 only
    path = _site(
        tmp_path,
        {
            "flashinfer-python": "0.7.2.post1",
            "flashinfer-cubin": "0.7.0.post1",
            "flashinfer-jit-cache": "0.7.0.post1+cu130",
            "torch": "2.14.0",
        },
        torch_cuda="13.0",
    )
    cubin, jit = flashinfer_drift(path, tmp_path / "cache")
    assert cubin.startswith("flashinfer-cubin 0.7.0.post1 is not flashinfer-python 0.7.2.post1's")
    assert cubin.endswith(
        "pip install --no-deps --index-url https://flashinfer.ai/whl flashinfer-cubin==0.7.2.post1"
    )
    assert jit.startswith("flashinfer-jit-cache 0.7.0.post1+cu130 is not built for")
    assert jit.endswith(
        "pip install --index-url https://flashinfer.ai/whl/cu130 "
        "flashinfer-jit-cache==0.7.2.post1+cu130"
    )


def test_a_jit_cache_wheel_and_a_module_of_another_cuda_are_named(tmp_path):
    # torch for CUDA 12.9 (the +cu129 build for a CUDA 12 driver); a jit-cache wheel and a
    # module compiled by a CUDA 13 toolkit left from the default build
    path = _site(
        tmp_path,
        {
            "flashinfer-python": "0.7.2.post1",
            "flashinfer-jit-cache": "0.7.2.post1+cu130",
            "torch": "2.14.0+cu129",
        },
    )
    cache = tmp_path / "cache"
    stale = _jit_module(cache, "0.7.2.post1", 13)
    _jit_module(cache, "0.7.0.post1", 13, "old_release")  # another version's folder: unused
    jit, module = flashinfer_drift(path, cache)
    assert "on cu129 (torch's CUDA)" in jit
    assert jit.endswith(
        "--index-url https://flashinfer.ai/whl/cu129 flashinfer-jit-cache==0.7.2.post1+cu129"
    )
    assert "1 FlashInfer JIT module(s)" in module and "built by CUDA 13" in module
    assert f"rm -rf {stale} " in module and "must be CUDA 12" in module


def test_the_install_plan_prints_what_is_stale(tmp_path, monkeypatch):
    path = _site(
        tmp_path,
        {"flashinfer-python": "0.7.2.post1", "flashinfer-cubin": "0.7.0.post1", "torch": "2.14.0"},
        torch_cuda="13.0",
    )
    real = gpu_wheels.flashinfer_drift
    monkeypatch.setattr(install, "flashinfer_drift", lambda: real(path, tmp_path / "cache"))
    cfg = recipes.resolve("h200", vllm_version="0.33.0")
    plan = install.install_plan(
        cfg, method="pip", installed=VllmInstall("vllm", "0.33.0"), colab=False, driver=None
    )
    assert "STALE: flashinfer-cubin 0.7.0.post1" in plan.summary()
    assert "flashinfer-cubin==0.7.2.post1." in plan.summary()
