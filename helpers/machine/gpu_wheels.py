"""Which CUDA build of vLLM a GPU's driver takes, and FlashInfer's prebuilt kernels for it.

Used by :func:`helpers.machine.install.install_plan` (the install commands) and by
:mod:`helpers.server.failures` (the fixes a CUDA or FlashInfer failure names).
"""

from __future__ import annotations

import importlib.metadata
import mmap
import os
import re
import sys
from pathlib import Path
from typing import Any

from helpers.config.serveconfig import ServeConfig

# ---- CUDA 12 drivers: the +cu129 build ------------------------------------------------
#: vLLM's per-release wheel index of one CUDA variant (``/<release>/<variant>``; the nightly
#: ``/nightly/<variant>``), the form of vLLM's install docs (``wheels.vllm.ai/${VLLM_VERSION}/cpu``
#: for the CPU wheel, ``nightly/<variant>`` with ``cu129``, ``cu130``). Not reachable from this
#: project's machines: the form is the docs', not checked against the live index.
VLLM_VARIANT_INDEX = "https://wheels.vllm.ai/{release}/{variant}"
#: PyTorch's wheel index of one CUDA variant (vLLM docs: ``--extra-index-url
#: https://download.pytorch.org/whl/cu129`` for CUDA 12.9).
TORCH_VARIANT_INDEX = "https://download.pytorch.org/whl/{variant}"
#: The CUDA build of the PyPI vLLM wheels the registry offers (0.27.0-0.33.0): CUDA 13 (vLLM
#: 0.32.0's ``envs.VLLM_MAIN_CUDA_VERSION`` is "13.0"; its ``vllm/_C_stable_libtorch.abi3.so``
#: needs ``libcudart.so.13``, read in the wheel), with PyPI's CUDA 13 torch 2.13.0.
DEFAULT_CUDA_VARIANT = "cu130"
#: What a CUDA 12.x driver gets instead (CUDA 12 minor-version compatibility runs a 12.9 build
#: on any 12.x driver).
CUDA12_VARIANT = "cu129"
#: The oldest Linux driver branch with CUDA 13.0 (NVIDIA CUDA 13.0 release notes: 580.65.06).
CUDA13_DRIVER = "580"

# ---- FlashInfer's prebuilt kernels ----------------------------------------------------
#: ``flashinfer-python`` each vLLM release pins (its wheel's Requires-Dist: ``pip install --dry-run
#: --report`` for 0.27.0, 0.27.1, 0.28.0 and 0.33.0; the METADATA of 0.32.0 and 0.34.0).
FLASHINFER_PINS = {
    "0.27.0": "0.6.16.post3",
    "0.27.1": "0.6.16.post3",
    "0.28.0": "0.6.16.post3",
    "0.32.0": "0.7.0.post1",
    "0.33.0": "0.7.2.post1",
    "0.34.0": "0.7.3",
}
#: A release that pins a package version PyPI does not host: ``{release: (package, pinned,
#: the nearest one PyPI has)}``. vLLM 0.34.0's METADATA requires ``flashinfer-python==0.7.3``;
#: PyPI goes from 0.7.2.post1 to 0.7.4 (``pip download flashinfer-python==0.7.3``: "No matching
#: distribution", 2026-12-04), so ``pip install vllm==0.34.0`` cannot resolve.
PYPI_MISSING_PINS = {"0.34.0": ("flashinfer-python", "0.7.3", "0.7.4")}
#: Where FlashInfer publishes ``flashinfer-cubin`` (this index) and ``flashinfer-jit-cache``
#: (``<index>/<cuda variant>``): flashinfer 0.7.0.post1's own installer
#: (``flashinfer/__main__.py``: ``_build_cubin_index_url``, ``_build_jit_cache_index_url``,
#: requirement ``flashinfer-jit-cache==<version>+<cuda variant>``) and 0.6.16.post3's README.
#: Not PyPI: there ``flashinfer-cubin`` stops at 0.6.13 and ``flashinfer-jit-cache`` does not
#: exist (``pip download``, 2026-12-01).
FLASHINFER_INDEX = "https://flashinfer.ai/whl"
#: The CUDA variants flashinfer 0.7.0.post1 publishes jit-cache wheels for
#: (``_SUPPORTED_JIT_CACHE_CUDA_VERSIONS``: 12.9, 13.0, 13.4).
FLASHINFER_JIT_VARIANTS = ("cu129", "cu130", "cu134")
#: The backends flags whose FlashInfer values JIT-compile kernels at first use.
FLASHINFER_FLAGS = ("--mamba-backend", "--moe-backend", "--attention-backend")


def flashinfer_uses(cfg: ServeConfig) -> list[str]:
    """What in ``cfg`` runs FlashInfer kernels, e.g. ``["--mamba-backend flashinfer", "the
    top-k/top-p sampler"]``; [] for the CPU stand-in.

    The backend flags (:data:`FLASHINFER_FLAGS`, and the same keys in the speculative config)
    whose value names FlashInfer; and, on CUDA, vLLM's top-k/top-p sampler, which uses
    FlashInfer unless ``VLLM_USE_FLASHINFER_SAMPLER=0`` (vllm/envs.py, vLLM 0.32.0; the seeds'
    top_p 0.95 takes that path). Each compiles its kernels with nvcc on first use unless
    FlashInfer's prebuilt kernels are installed (:func:`flashinfer_kernel_specs`).
    """
    if cfg.stand_in:
        return []
    uses = [
        f"{flag} {cfg.args[flag]}"
        for flag in FLASHINFER_FLAGS
        if "flashinfer" in str(cfg.args.get(flag, "")).lower()
    ]
    spec = cfg.speculative_config or {}
    uses += [
        f"speculative {key} {spec[key]}"
        for key in ("moe_backend", "attention_backend")
        if "flashinfer" in str(spec.get(key, "")).lower()
    ]
    if str(cfg.env.get("VLLM_USE_FLASHINFER_SAMPLER", "1")) != "0":
        uses.append("the top-k/top-p sampler")
    return uses


def flashinfer_kernel_specs(
    vllm_version: str | None, cuda_variant: str = DEFAULT_CUDA_VARIANT
) -> tuple[str, str] | None:
    """``("flashinfer-cubin==V", "flashinfer-jit-cache==V+<variant>")`` pinned to the
    ``flashinfer-python`` that ``vllm_version`` requires (:data:`FLASHINFER_PINS`), or None when
    the release's pin is not recorded (a nightly) or FlashInfer has no jit-cache for the variant.
    FlashInfer refuses kernels of another version (``flashinfer/jit/env.py``
    ``_check_jit_cache_version``: "Please install the same version of both packages")."""
    pin = FLASHINFER_PINS.get(str(vllm_version))
    if pin is None or cuda_variant not in FLASHINFER_JIT_VARIANTS:
        return None
    return f"flashinfer-cubin=={pin}", f"flashinfer-jit-cache=={pin}+{cuda_variant}"


def flashinfer_drift(path: list[str] | None = None, cache: str | Path | None = None) -> list[str]:
    """What is stale among the installed FlashInfer parts, one sentence each with its fix
    (pinned to the installed ``flashinfer-python`` and torch's CUDA); [] when they agree or
    FlashInfer is absent.

    ``flashinfer-cubin`` and ``flashinfer-jit-cache`` of another version than
    ``flashinfer-python`` are ignored with a warning (flashinfer 0.7.2.post1
    ``flashinfer/jit/env.py``: ``_check_cubin_version``, ``_check_jit_cache_version``), so their
    kernels are fetched or compiled again; a jit-cache wheel of another CUDA (``+cu129``) than
    torch's (``torch/version.py``'s ``cuda``) is stale too. A module FlashInfer compiled lives in
    ``<cache>/<flashinfer version>/<archs>/cached_ops/<module>/<module>.so`` (``env.py``:
    ``FLASHINFER_JIT_DIR``; cache ``$FLASHINFER_WORKSPACE_BASE`` or home, ``/.cache/flashinfer``),
    linked with ``-lcudart`` (``cpp_ext.py``): its ``libcudart.so.<major>`` names the toolkit
    that built it, and another major than torch's fails to load (flashinfer-ai/flashinfer#5145).

    Args:
        path: folders the packages are read from (default ``sys.path``).
        cache: FlashInfer's cache folder (default: where FlashInfer puts it).
    """
    dists = importlib.metadata.distributions
    have = {n: next(iter(dists(name=n, path=path or sys.path)), None) for n in _FLASHINFER_PARTS}
    if have["flashinfer-python"] is None:
        return []
    want, torch = have["flashinfer-python"].version, have["torch"]
    f = torch and Path(torch.locate_file("torch/version.py"))
    m = f and f.is_file() and re.search(r"^cuda\b.*'(\d+)\.(\d)", f.read_text(), re.M)
    m = m or (torch and re.search(r"\+cu(\d+)(\d)$", torch.version))
    cuda = f"cu{m.group(1)}{m.group(2)}" if m else None
    out, cubin, jit = [], have["flashinfer-cubin"], have["flashinfer-jit-cache"]
    if cubin and cubin.version != want:
        out.append(
            f"flashinfer-cubin {cubin.version} is not flashinfer-python {want}'s, so FlashInfer "
            f"ignores it: pip install --no-deps --index-url {FLASHINFER_INDEX} "
            f"flashinfer-cubin=={want}"
        )
    base, _, built = jit.version.partition("+") if jit else ("", "", "")
    if jit and (base != want or (cuda and built != cuda)):
        v = cuda or built
        out.append(
            f"flashinfer-jit-cache {jit.version} is not built for flashinfer-python {want} on "
            f"{cuda or built} (torch's CUDA), so FlashInfer ignores it: pip install --index-url "
            f"{FLASHINFER_INDEX}/{v} flashinfer-jit-cache=={want}+{v}"
        )
    home = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE") or Path.home())
    root = Path(cache or home / ".cache" / "flashinfer") / want
    stale = {}
    for so in sorted(root.glob("*/cached_ops/*/*.so")) if cuda else []:
        if not so.stat().st_size:
            continue
        with open(so, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            lib = re.search(rb"libcudart\.so\.(\d+)", mm)
            major = lib.group(1).decode() if lib else cuda[2:-1]
        if major != cuda[2:-1]:
            stale.setdefault(major, []).append(so.parent)
    for major, dirs in stale.items():
        out.append(
            f"{len(dirs)} FlashInfer JIT module(s) in {root} were built by CUDA {major} "
            f"(libcudart.so.{major}) and torch here is {cuda}, so they fail to load: rm -rf "
            f"{' '.join(str(d) for d in dirs)} (FlashInfer rebuilds them at first use with the nvcc "
            f"on PATH, which must be CUDA {cuda[2:-1]})"
        )
    return out


_FLASHINFER_PARTS = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache", "torch")


def cuda_variant_for(driver: Any) -> tuple[str, str | None]:
    """The vLLM CUDA build for this machine's driver, and a sentence when it is not the default.

    Args:
        driver: :class:`helpers.machine.gpus.DriverInfo` (``cuda``: e.g. ``(12, 8)``), or None.

    Returns:
        ``(variant, note)``: :data:`DEFAULT_CUDA_VARIANT` and no note for a CUDA 13+ driver or
        none; :data:`CUDA12_VARIANT` for a 12.x driver; for an older one the default and a note
        to update the driver.
    """
    cuda = getattr(driver, "cuda", None)
    if not cuda or cuda[0] >= 13:
        return DEFAULT_CUDA_VARIANT, None
    which = f"driver {driver.version} " if getattr(driver, "version", None) else "the driver "
    if cuda[0] == 12:
        return CUDA12_VARIANT, (
            f"The NVIDIA {which}supports CUDA {cuda[0]}.{cuda[1]}, and PyPI's vLLM wheel is built "
            "for CUDA 13 (import fails with 'libcudart.so.13: cannot open shared object file', or "
            "torch says 'The NVIDIA driver on your system is too old'): this plan installs the "
            f"+{CUDA12_VARIANT} build from vLLM's per-release index with PyTorch's {CUDA12_VARIANT} "
            f"torch. Or update the driver to {CUDA13_DRIVER} or newer (CUDA 13) for the default wheel."
        )
    return DEFAULT_CUDA_VARIANT, (
        f"The NVIDIA {which}supports only CUDA {cuda[0]}.{cuda[1]}: no vLLM build of the releases "
        f"this cookbook offers runs on it. Update the driver to {CUDA13_DRIVER} or newer (CUDA 13), "
        "then install."
    )
