"""Read this machine's NVIDIA GPUs: NVML first, ``nvidia-smi`` as the fallback. Memory in GiB.

Unified-memory devices (DGX Spark GB10, Jetson Thor) report no framebuffer (NVML
``NotSupported``, nvidia-smi ``[N/A]``: NVIDIA DGX Spark known issues): their capacity is
:func:`system_memory_gib`, their memory held by others the per-process sum of
``nvidia-smi --query-compute-apps``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from typing import Any

import psutil

NVIDIA_SMI_QUERY = [
    "nvidia-smi",
    "--query-gpu=name,memory.total,compute_cap,memory.used",
    "--format=csv,noheader,nounits",
]
NVIDIA_SMI_APPS_QUERY = [
    "nvidia-smi",
    "--query-compute-apps=pid,process_name,used_memory",
    "--format=csv,noheader,nounits",
]


# ---- GPU records ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GPU:
    """One GPU as the driver reports it (``name``: e.g. ``"NVIDIA H100 80GB HBM3"``).

    ``memory_total_gib`` / ``memory_used_gib`` are None on unified-memory devices (GB10, Thor:
    the driver reports ``[N/A]``); ``compute_capability`` is ``"9.0"`` style or None.
    """

    index: int
    name: str
    memory_total_gib: float | None
    compute_capability: str | None
    memory_used_gib: float | None = None

    @property
    def unified_memory(self) -> bool:
        """True when the driver reports no framebuffer (shares system memory)."""
        return self.memory_total_gib is None

    @property
    def cc_tuple(self) -> tuple[int, int] | None:
        return _cc_tuple(self.compute_capability)

    def describe(self) -> str:
        mem = "unified memory" if self.unified_memory else f"{self.memory_total_gib:.1f} GiB"
        return f"{self.name} ({mem}, compute capability {self.compute_capability or '?'})"


@dataclasses.dataclass(frozen=True)
class GPUProcess:
    """A process holding GPU memory (``nvidia-smi --query-compute-apps`` / NVML)."""

    pid: int
    name: str
    used_gib: float | None


def _cc_tuple(cc: Any) -> tuple[int, int] | None:
    if cc is None:
        return None
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        return int(cc[0]), int(cc[1])
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", str(cc))
    return (int(m.group(1)), int(m.group(2))) if m else None


#: NVML's key for the compute capability in the records :func:`gpus_from_records` reads.
_CC = "cuda_compute_capability"


def _na(value: Any) -> bool:
    return value is None or str(value).strip().strip("[]").lower() in ("n/a", "not supported", "")


def gpus_from_records(records: Iterable[Mapping[str, Any]]) -> list[GPU]:
    """Turn NVML-shaped records into :class:`GPU` objects.

    Args:
        records: one mapping per GPU, as NVML answers: ``{"index": 0, "name": b"NVIDIA H200" |
            str, "memory": {"total": bytes, "used": bytes} | None (NVML ``NotSupported``),
            "cuda_compute_capability": (9, 0) | "9.0" | None}`` (:func:`parse_nvidia_smi` reads
            nvidia-smi's CSV into the same shape).
    """
    gpus = []
    for i, rec in enumerate(records):
        name = rec.get("name")
        if isinstance(name, bytes):
            name = name.decode("utf-8", "replace")
        mem = rec.get("memory") or {}  # None: NotSupported (unified memory)
        total, used = (
            None if mem.get(k) is None else float(mem[k]) / 2**30 for k in ("total", "used")
        )
        cc = _cc_tuple(rec.get(_CC))
        cc_text = f"{cc[0]}.{cc[1]}" if cc else None
        name = str(name or "unknown GPU").strip()
        gpus.append(GPU(int(rec.get("index", i)), name, total, cc_text, memory_used_gib=used))
    return gpus


def parse_nvidia_smi(text: str) -> list[GPU]:
    """GPUs from :data:`NVIDIA_SMI_QUERY`'s output (MiB), through :func:`gpus_from_records`;
    ``[N/A]`` / ``[Not Supported]`` memory (unified memory) becomes ``memory: None``.
    """
    records = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4:  # a blank or short line
            continue
        # Names never contain commas today; keep it robust if one ever does.
        name = ",".join(fields[: len(fields) - 3]).strip()
        total, cc, used = fields[-3:]
        memory, mib = None, 2**20
        if not _na(total):
            memory = {"total": float(total) * mib, "used": None if _na(used) else float(used) * mib}
        cc = None if _na(cc) else cc
        records.append({"index": len(records), "name": name, "memory": memory, _CC: cc})
    return gpus_from_records(records)


def parse_compute_apps(text: str) -> list[GPUProcess]:
    """Parse ``nvidia-smi --query-compute-apps=pid,process_name,used_memory
    --format=csv,noheader,nounits`` output (MiB)."""
    procs = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        used = None if _na(fields[-1]) else float(fields[-1]) / 1024
        procs.append(GPUProcess(int(fields[0]), ",".join(fields[1:-1]), used))
    return procs


# ---- Reading the machine --------------------------------------------------------------


@dataclasses.dataclass
class Probe:
    """What :func:`detect_gpus` found (``gpus`` after ``CUDA_VISIBLE_DEVICES`` when it lists
    indices; ``processes`` holding GPU memory, may be empty) and how: ``source`` ``"nvml"``,
    ``"nvidia-smi"`` or None (no GPU), ``detail`` why nothing was found, or "".
    """

    gpus: list[GPU]
    processes: list[GPUProcess]
    source: str | None
    detail: str = ""


@contextlib.contextmanager
def _nvml():
    """``pynvml`` (nvidia-ml-py) between ``nvmlInit`` and ``nvmlShutdown``; raises what
    ``import pynvml`` or ``nvmlInit`` raise (no library, no driver)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        yield pynvml
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _read_nvml() -> tuple[list[dict[str, Any]], list[GPUProcess]]:
    with _nvml() as pynvml:
        records, procs = [], []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            memory = None  # NotSupported on unified memory (GB10, Thor)
            try:
                # v2 reports driver-reserved memory apart from "used", as nvidia-smi does
                # (v1's "used" includes ~0.6 GiB reserved on an idle H200).
                m = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
                memory = {"total": m.total, "used": m.used, "reserved": m.reserved}
            except (pynvml.NVMLError, AttributeError, TypeError):
                with contextlib.suppress(pynvml.NVMLError):
                    m = pynvml.nvmlDeviceGetMemoryInfo(h)
                    memory = {"total": m.total, "used": m.used}
            cc = None
            with contextlib.suppress(pynvml.NVMLError):
                cc = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            name = pynvml.nvmlDeviceGetName(h)
            records.append({"index": i, "name": name, "memory": memory, _CC: cc})
            with contextlib.suppress(pynvml.NVMLError):
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                    used = getattr(p, "usedGpuMemory", None)
                    pname = ""
                    with contextlib.suppress(pynvml.NVMLError):
                        pname = pynvml.nvmlSystemGetProcessName(p.pid)
                        pname = pname.decode() if isinstance(pname, bytes) else str(pname)
                    procs.append(
                        GPUProcess(int(p.pid), pname, None if used is None else used / 2**30)
                    )
        return records, procs


def _run_smi(argv: list[str], timeout: float = 20) -> tuple[int, str]:
    exe = shutil.which(argv[0])
    if exe is None:
        return 127, "nvidia-smi not found"
    try:
        out = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, f"nvidia-smi failed: {exc}"
    return out.returncode, out.stdout if out.returncode == 0 else (out.stdout + out.stderr).strip()


def _visible(gpus: list[GPU]) -> list[GPU]:
    """Apply ``CUDA_VISIBLE_DEVICES`` when it lists indices (UUIDs / MIG ids are left alone)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return gpus
    items = [x.strip() for x in cvd.split(",") if x.strip()]
    if not items or items == ["-1"]:
        return [] if cvd.strip() in ("", "-1") else gpus
    if not all(x.isdigit() for x in items):
        return gpus
    by_index = {g.index: g for g in gpus}
    return [by_index[int(x)] for x in items if int(x) in by_index]


def detect_gpus(*, use_nvml: bool = True) -> Probe:
    """Read this machine's NVIDIA GPUs: NVML first, then ``nvidia-smi``.

    Never raises: a machine without a GPU (or without a driver) gives ``Probe(gpus=[])``
    with ``detail`` saying why.
    """
    detail = ""
    if use_nvml:
        try:
            records, procs = _read_nvml()
            if records:
                return Probe(_visible(gpus_from_records(records)), procs, "nvml")
            detail = "NVML reports no GPU"
        except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded ...
            detail = f"NVML unavailable ({type(exc).__name__})"
    rc, text = _run_smi(NVIDIA_SMI_QUERY)
    if rc != 0:
        first = text.strip().splitlines()[0] if text.strip() else f"exit code {rc}"
        return Probe([], [], None, f"{detail}; {first}" if detail else first)
    gpus = parse_nvidia_smi(text)
    if not gpus:
        return Probe([], [], None, "nvidia-smi lists no GPU")
    rc, apps = _run_smi(NVIDIA_SMI_APPS_QUERY)
    procs = parse_compute_apps(apps) if rc == 0 else []
    return Probe(_visible(gpus), procs, "nvidia-smi")


@dataclasses.dataclass(frozen=True)
class DriverInfo:
    """This machine's NVIDIA driver: ``version`` (e.g. ``"570.124.06"``), ``cuda`` the newest
    CUDA it supports (e.g. ``(12, 8)``; None when unknown), ``source`` ``"nvml"`` or
    ``"nvidia-smi"``.
    """

    version: str | None
    cuda: tuple[int, int] | None
    source: str

    def describe(self) -> str:
        cuda = f"CUDA {self.cuda[0]}.{self.cuda[1]}" if self.cuda else "CUDA ?"
        return f"driver {self.version or '?'} ({cuda}, {self.source})"


def cuda_from_nvml(value: int) -> tuple[int, int]:
    """NVML's CUDA driver version integer as ``(major, minor)``: 12080 -> (12, 8), 13000 ->
    (13, 0) (NVML's ``NVML_CUDA_DRIVER_VERSION_MAJOR(v) = v / 1000``, ``MINOR = (v % 1000) / 10``)."""
    return int(value) // 1000, (int(value) % 1000) // 10


def parse_smi_driver(text: str) -> tuple[str | None, tuple[int, int] | None]:
    """``(driver version, (major, minor))`` from ``nvidia-smi``'s header line
    ``| NVIDIA-SMI 570.124.06   Driver Version: 570.124.06   CUDA Version: 12.8 |``."""
    version = re.search(r"Driver Version:\s*([\d.]+)", text or "")
    cuda = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", text or "")
    return (
        version.group(1) if version else None,
        (int(cuda.group(1)), int(cuda.group(2))) if cuda else None,
    )


def driver_info() -> DriverInfo | None:
    """Read the NVIDIA driver: NVML (``nvmlSystemGetDriverVersion``,
    ``nvmlSystemGetCudaDriverVersion``), else ``nvidia-smi``'s header. Never raises; None when
    neither answers (no driver)."""
    try:
        with _nvml() as pynvml:
            version = pynvml.nvmlSystemGetDriverVersion()
            version = version.decode() if isinstance(version, bytes) else str(version)
            cuda = cuda_from_nvml(pynvml.nvmlSystemGetCudaDriverVersion())
        return DriverInfo(version, cuda, "nvml")
    except Exception:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded ...
        pass
    rc, text = _run_smi(["nvidia-smi"])
    if rc != 0:
        return None
    version, cuda = parse_smi_driver(text)
    return DriverInfo(version, cuda, "nvidia-smi") if version or cuda else None


def system_memory_gib() -> float:
    """Total system memory in GiB (``psutil.virtual_memory().total``: ``/proc/meminfo``
    MemTotal on Linux), the GPU's on unified memory."""
    return psutil.virtual_memory().total / 2**30
