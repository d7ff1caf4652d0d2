"""After launch: what a *running* server's log says is wrong or wasted (warnings, not failures)."""

from __future__ import annotations

import dataclasses
import re
import warnings
from dataclasses import dataclass
from typing import Any

from helpers.server import vllm_log
from helpers.server.failures import Diagnosis, _line_of
from helpers.server.failures_engine import _engine_stalled
from helpers.server.vllm_log import OLDER_RELEASES, REGISTRY_RELEASES

#: Mean acceptance length below which speculative decoding is judged "not paying off":
#: fewer than half a token gained per target-model step. An assumption of this cookbook
#: (drafting costs a drafter pass and a wider verification step), not a vLLM number.
PAYING_OFF_LENGTH = 1.5


@dataclass(frozen=True)
class SpecDecodeStats:
    """One periodic speculative-decoding log line of a vLLM server, parsed (every wording
    since vLLM 0.8.5: :data:`helpers.server.vllm_log.SPEC_LINE`).

    Attributes:
        mean_acceptance_length: tokens per target step (1 + accepted / drafts); None in
            the pre-V1 wording.
        per_position: acceptance rate of draft position 1, 2, ... (0-1).
        draft_acceptance_rate_pct: accepted / drafted draft tokens, percent.
        accepted_tokens, drafted_tokens: counts over the logging interval, when logged.
        accepted_throughput, drafted_throughput: tokens/s, when logged.
        line: the log line.
    """

    mean_acceptance_length: float | None
    per_position: tuple[float, ...]
    draft_acceptance_rate_pct: float | None
    accepted_tokens: int | None = None
    drafted_tokens: int | None = None
    accepted_throughput: float | None = None
    drafted_throughput: float | None = None
    line: str = ""

    @property
    def accepted_nothing(self) -> bool:
        if self.drafted_tokens:
            return self.accepted_tokens == 0
        return self.draft_acceptance_rate_pct == 0.0 and (
            self.mean_acceptance_length in (None, 1.0)
        )

    @property
    def level(self) -> str:
        """``"error"`` (nothing accepted), ``"warning"`` (not paying off) or ``"ok"``."""
        if self.accepted_nothing:
            return "error"
        if (
            self.mean_acceptance_length is not None
            and self.mean_acceptance_length < PAYING_OFF_LENGTH
        ):
            return "warning"
        return "ok"

    @property
    def dead_positions(self) -> tuple[int, ...]:
        """1-based draft positions whose logged acceptance rate is 0.000."""
        return tuple(i + 1 for i, r in enumerate(self.per_position) if r == 0.0)

    def finding(self) -> tuple[str, str]:
        """``(cause, fix)`` of a line that is not ``"ok"``, as :func:`review` words them."""
        if self.level == "error":
            drafted = self.drafted_tokens if self.drafted_tokens is not None else "the"
            return "speculative decoding accepted nothing", (
                f"all {drafted} draft tokens of the last interval were rejected, so drafting "
                "only costs time: check the drafter matches the served checkpoint and revision, "
                "or serve without speculative decoding"
            )
        dead = self.dead_positions
        return (
            f"speculative decoding is not paying off (mean acceptance length "
            f"{self.mean_acceptance_length:.2f} over {len(self.per_position)} draft positions, "
            f"{self.draft_acceptance_rate_pct:.1f}% of draft tokens accepted"
            + (f"; positions {dead[0]}-{dead[-1]} accepted nothing" if dead else "")
            + ")"
        ), "check num_speculative_tokens against the drafter's block size"

    @property
    def verdict(self) -> str:
        """One line: ``"paying off: ..."``, or the finding (the cause, then the fix)."""
        if self.level == "ok":
            return f"paying off: {self.mean_acceptance_length:.2f} tokens per target-model step"
        cause, fix = self.finding()
        if self.level == "error":
            return f"{cause}: {fix}"
        return (
            f"not paying off: {fix}{cause.removeprefix('speculative decoding is not paying off')}"
        )


def _num(pattern: str, line: str, conv=float):
    m = re.search(pattern, line)
    return conv(m.group(1)) if m else None


def parse_spec_decode_line(line: str) -> SpecDecodeStats | None:
    """One speculative-decoding metrics line, parsed; None when ``line`` is not one."""
    if not re.search(vllm_log.SPEC_LINE_START, line or ""):
        return None
    f = vllm_log.SPEC_FIELDS
    pos = re.search(f["per_position"], line)
    per_position = tuple(float(x) for x in pos.group(1).split(",") if x.strip()) if pos else ()
    rate = _num(f["rate_pct"], line)
    if rate is None:
        frac = _num(f["rate_fraction"], line)  # pre-V1: a fraction
        rate = None if frac is None else frac * 100.0
    accepted = _num(f["accepted"], line, int)
    if accepted is None:
        accepted = _num(f["accepted_pre_v1"], line, int)
    drafted = _num(f["drafted"], line, int)
    if drafted is None:
        drafted = _num(f["drafted_pre_v1"], line, int)
    return SpecDecodeStats(
        mean_acceptance_length=_num(f["mean_acceptance_length"], line),
        per_position=per_position,
        draft_acceptance_rate_pct=rate,
        accepted_tokens=accepted,
        drafted_tokens=drafted,
        accepted_throughput=_num(f["accepted_throughput"], line),
        drafted_throughput=_num(f["drafted_throughput"], line),
        line=line.strip()[:600],
    )


def spec_decode_stats(log_text: str) -> list[SpecDecodeStats]:
    """Every speculative-decoding metrics line of a server log, parsed, oldest first."""
    out = []
    for m in vllm_log.SPEC_LINE.finditer(log_text or ""):
        s = parse_spec_decode_line(m.group(0))
        if s is not None:
            out.append(s)
    return out


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
    - ``spec_decode`` (error when nothing was accepted, warning when not paying off): the
      last "SpecDecoding metrics" line (:func:`parse_spec_decode_line`).
    - ``engine_stalled`` (error): stats lines with requests waiting and none running, or
      running with no throughput, for :data:`helpers.server.vllm_log.STALL_SECONDS`
      (:func:`helpers.server.vllm_log.stalled_span`).

    Args:
        log_text: the server log.
        config: the ServeConfig (GPU compute capability, model) when known.

    Returns:
        The findings, most severe first; empty when nothing is wrong.
    """
    found: list[Diagnosis] = []
    text = log_text or ""
    for m in re.finditer(vllm_log.NVFP4_MOE_CHOSEN, text):
        backend = m.group("backend")
        cc = _compute_capability(config)
        if (
            backend in KNOWN_BAD_NVFP4_MOE
            and (cc is None or cc.startswith("10"))
            and _is_nemotron_h(text, config)
        ):
            fix = KNOWN_BAD_NVFP4_MOE[backend]
            found.append(
                Diagnosis(
                    "nvfp4_moe_backend",
                    f"vLLM chose the {backend} NvFp4 MoE backend"
                    + (f" on compute capability {cc}" if cc else "")
                    + ", which gives fluent but wrong output with Nemotron-H NVFP4 checkpoints "
                    "(public report)",
                    f"restart with --moe-backend {fix} (pinned for the b200 / b300 targets in "
                    "cookbook/recipe.yaml) and check answers before benchmarking",
                    _line_of(m, text),
                    level="warning",
                    checked_releases=REGISTRY_RELEASES,
                )
            )
            break
    stats = spec_decode_stats(text)
    if stats and stats[-1].level != "ok":
        last = stats[-1]
        found.append(
            Diagnosis(
                "spec_decode",
                *last.finding(),
                last.line,
                level=last.level,
                checked_releases=REGISTRY_RELEASES + OLDER_RELEASES,
            )  # fmt: skip
        )
    stall = vllm_log.STATS_LINE.search(text)
    if stall:
        d = _engine_stalled(stall, text, config)
        if d is not None:
            found.append(
                dataclasses.replace(d, checked_releases=REGISTRY_RELEASES + OLDER_RELEASES)
            )
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
