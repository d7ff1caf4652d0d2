"""Speculative decoding in a running server's log: vLLM's periodic "SpecDecoding metrics" line,
parsed (every wording since vLLM 0.8.5, :data:`helpers.server.vllm_log.SPEC_LINE`) and judged
against :data:`helpers.bench.metrics.PAYING_OFF_LENGTH`. vLLM writes the line only once requests
were drafted (``SpecDecodingLogging.log`` returns early without drafts,
``vllm/v1/spec_decode/metrics.py``, 0.32.0-0.34.0), so a start-up log has none: the core's
:func:`helpers.server.review.review`, run when a launch is ready, does not look for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from helpers.bench.metrics import PAYING_OFF_LENGTH
from helpers.server import vllm_log
from helpers.server.failures import Diagnosis


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
        """``(cause, fix)`` of a line that is not ``"ok"``, as :func:`spec_decode_finding` words them."""
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


def spec_decode_finding(log_text: str) -> Diagnosis | None:
    """The ``spec_decode`` finding on a running server's log: its last speculative-decoding
    line when not ``"ok"`` (:attr:`SpecDecodeStats.level`: ``"error"`` when nothing was
    accepted, ``"warning"`` when not paying off), with its cause and fix; else None."""
    stats = spec_decode_stats(log_text)
    if not stats or stats[-1].level == "ok":
        return None
    last = stats[-1]
    return Diagnosis(
        "spec_decode",
        *last.finding(),
        last.line,
        level=last.level,
        checked_releases=vllm_log.SPEC_CHECKED,
    )  # fmt: skip
