"""After launch: what a *running* server's log says is wrong or wasted (warnings, not failures)."""

from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Any

from helpers.server import vllm_log
from helpers.server.failures import Diagnosis, _line_of
from helpers.server.failures_engine import _engine_stalled
from helpers.server.vllm_log import OLDER_RELEASES, REGISTRY_RELEASES


def _is_nemotron_h(text: str, config: Any) -> bool:
    model = str(getattr(config, "model", "") or "") if config is not None else ""
    return bool(re.search(vllm_log.NEMOTRON_H_ARCH, text) or re.search(r"nemotron", model, re.I))


def _compute_capability(config: Any) -> str | None:
    gpu = (getattr(config, "gpu", None) or {}) if config is not None else {}
    cc = gpu.get("compute_capability")
    return str(cc) if cc else None


#: Backends known to give fluent but wrong output with Nemotron-H NVFP4 on compute
#: capability 10.x (public report, 2026), and the one to pin instead.
KNOWN_BAD_NVFP4_MOE = {"FLASHINFER_TRTLLM": "flashinfer_cutlass"}


def review(log_text: str, config: Any = None) -> list[Diagnosis]:
    """Findings on a *running* server's log: what works but is known to be wrong or wasted.

    Checks (each a :class:`Diagnosis` with ``level``):

    - ``nvfp4_moe_backend`` (warning): a :data:`KNOWN_BAD_NVFP4_MOE` backend chosen for a
      Nemotron-H checkpoint on compute capability 10.x (or an unknown GPU); the fix
      ``--moe-backend flashinfer_cutlass`` (``MoEBackend``, ``vllm/config/kernel.py``, 0.28.0
      and 0.32.0).
    - ``moe_config_default`` (warning): no tuned Triton MoE file (:data:`.vllm_log.MOE_CONFIG_DEFAULT`).
    - ``engine_stalled`` (error): stats lines with requests waiting and none running, or
      running with no throughput, for :data:`helpers.server.vllm_log.STALL_SECONDS`
      (:func:`helpers.server.vllm_log.stalled_span`).

    Speculative decoding's line, logged only once requests were drafted, is the lab's
    (:func:`lab.bench.spec_log.spec_decode_finding`).

    Args:
        log_text: the server log.
        config: the ServeConfig (GPU compute capability, model) when known.

    Returns:
        The findings, most severe first; empty when nothing is wrong.
    """
    found: list[Diagnosis] = []
    text = log_text or ""
    chosen = re.finditer(vllm_log.NVFP4_MOE_CHOSEN, text)
    m = next((m for m in chosen if m.group("backend") in KNOWN_BAD_NVFP4_MOE), None)
    cc = _compute_capability(config)
    if m and (cc is None or cc.startswith("10")) and _is_nemotron_h(text, config):
        backend = m.group("backend")
        found.append(
            Diagnosis(
                "nvfp4_moe_backend",
                f"vLLM chose the {backend} NvFp4 MoE backend"
                + (f" on compute capability {cc}" if cc else "")
                + ", which gives fluent but wrong output with Nemotron-H NVFP4 checkpoints "
                "(public report)",
                f"restart with --moe-backend {KNOWN_BAD_NVFP4_MOE[backend]} (pinned for the b200 "
                "/ b300 targets in cookbook/recipe.yaml) and check answers before benchmarking",
                _line_of(m, text),
                level="warning",
                checked_releases=REGISTRY_RELEASES,
            )
        )
    moe = list(re.finditer(vllm_log.MOE_CONFIG_DEFAULT, text))  # vLLM logs each file once
    if moe:  # e.g. docs/results/h100/tune/drafting-0.32.0-2026-12-06 (BF16 + FP8 on an H100)
        found.append(Diagnosis("moe_config_default", f"vLLM has no tuned Triton MoE config for this GPU, shape and dtype ({', '.join(dict.fromkeys(m['file'] for m in moe))}) and runs default tiles in the kernels that read it (BF16 or online-FP8 experts, an NVFP4 checkpoint's unquantized MTP block, LoRA's MoE kernels: all seen in docs/results), so they may be slower than they can be",
            "tune each such file on this GPU (vLLM's source tree, not its wheel, has benchmarks/kernels/benchmark_moe.py) and set VLLM_TUNED_CONFIG_FOLDER to their folder (vllm/envs.py: read before the files vLLM ships in fused_moe/configs/)", _line_of(moe[0], text), level="warning", checked_releases=("vllm 0.32.0", "vllm 0.34.0")))  # fmt: skip
    stall = vllm_log.STATS_LINE.search(text)
    d = _engine_stalled(stall, text, config) if stall else None
    if d is not None:
        found.append(dataclasses.replace(d, checked_releases=REGISTRY_RELEASES + OLDER_RELEASES))
    return sorted(found, key=lambda d: d.level != "error")


class ServerFindingWarning(UserWarning):
    """A running server's log shows a known problem (:func:`review`); the message names the fix."""


def warn_findings(log_text: str, config: Any = None) -> list[Diagnosis]:
    """:func:`review` the log and issue one :class:`ServerFindingWarning` per finding; return
    them. Never raises: a review that fails is no finding."""
    try:
        found = review(log_text, config)
    except Exception:  # noqa: BLE001 - a finding must never break a started server
        return []
    for d in found:
        warnings.warn(d.report(), ServerFindingWarning, stacklevel=3)
    return found
