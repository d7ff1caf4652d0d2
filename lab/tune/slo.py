"""Service-level objectives over benchmark points (pure functions over sweep rows): the filter,
vLLM's goodput, the price and the choice. Two figures, on purpose different: a point *meets the
SLO* when its own percentiles are within the bounds (:func:`with_slo`); its *goodput* is vLLM's
``request_goodput``, the requests each of which met every bound (:func:`with_goodput`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from helpers.bench.metrics import _num
from helpers.errors import BenchError

Percentile = Literal["mean", "p50", "p90", "p99"]
#: The metrics an SLO can bound, and the name vLLM's ``--goodput`` gives each
#: (``check_goodput_args`` in vLLM 0.32.0 ``vllm/benchmarks/serve.py``: ttft, tpot, e2el).
METRICS = ("ttft", "tpot", "e2el")
_WORDS = {"ttft": "TTFT", "tpot": "TPOT", "e2el": "E2EL"}


class SLO(BaseModel):
    """Latency bounds a point must meet (at least one), in ms, each at a percentile (``"mean"``,
    ``"p50"``, ``"p90"``, ``"p99"``: what :func:`helpers.bench.point.run_point` asks vLLM for):
    ``ttft_ms`` (time to first token, default p99), ``tpot_ms`` (time per output token after
    the first, default p50), ``e2el_ms`` (end-to-end latency, default p99).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2el_ms: float | None = Field(default=None, gt=0)
    ttft_percentile: Percentile = "p99"
    tpot_percentile: Percentile = "p50"
    e2el_percentile: Percentile = "p99"

    @model_validator(mode="after")
    def _some_bound(self) -> SLO:
        if not self.bounds():
            raise ValueError("set at least one of ttft_ms, tpot_ms, e2el_ms")
        return self

    # ---- readings ---------------------------------------------------------------------
    def bounds(self) -> dict[str, tuple[str, float]]:
        """``{metric: (percentile, bound ms)}`` for each metric with a bound."""
        out = {}
        for m in METRICS:
            bound = getattr(self, f"{m}_ms")
            if bound is not None:
                out[m] = (getattr(self, f"{m}_percentile"), float(bound))
        return out

    def goodput_args(self) -> dict[str, float]:
        """vLLM's ``--goodput`` as a mapping (``{"ttft": 2000.0, "tpot": 20.0}``): each bound
        applied to every request (vLLM's goodput is per request; the percentile is this
        class's, not vLLM's)."""
        return {m: bound for m, (_, bound) in self.bounds().items()}

    def describe(self) -> str:
        """``"p50 TPOT <= 20 ms, p99 TTFT <= 2,000 ms"``."""
        return ", ".join(f"{p} {_WORDS[m]} <= {b:,.0f} ms" for m, (p, b) in self.bounds().items())

    def violations(self, point: Mapping[str, Any]) -> list[str]:
        """What ``point`` (a row: ``p99_ttft_ms``, ``p50_tpot_ms``, ``mean_e2el_ms``, ...)
        misses, one phrase per bound (``"p99 TTFT 2,561 ms > 2,000 ms"``); a figure the row
        lacks counts as missed (``"p99 TTFT not measured"``). Empty: the point meets the SLO."""
        out = []
        for m, (p, bound) in self.bounds().items():
            value = _num(point.get(f"{p}_{m}_ms"))
            if value is None:
                out.append(f"{p} {_WORDS[m]} not measured")
            elif value > bound:
                out.append(f"{p} {_WORDS[m]} {value:,.0f} ms > {bound:,.0f} ms")
        return out

    def meets(self, point: Mapping[str, Any]) -> bool:
        """True when ``point`` is within every bound (:meth:`violations` is empty)."""
        return not self.violations(point)

    def meeting(self, points: pd.DataFrame) -> pd.DataFrame:
        """The rows of ``points`` that meet every bound (:meth:`meets`), in their order."""
        return points[[self.meets(r) for r in points.to_dict("records")]]

    @classmethod
    def coerce(cls, value: Any, default: SLO | None = None) -> SLO:
        """An SLO from an SLO, a mapping of its fields (``{"tpot_ms": 20, "ttft_ms": 2000}``),
        or None (``default``, else :data:`DEFAULT_SLO`).

        Raises:
            BenchError: unknown keys, a bound that is not a positive number, an unknown
                percentile, or no bound at all; the message names the fields.
        """
        if value is None:
            return default or DEFAULT_SLO
        if isinstance(value, SLO):
            return value
        if not isinstance(value, Mapping):
            raise BenchError(
                f"slo={value!r} ({type(value).__name__}): pass a mapping such as "
                '{"tpot_ms": 20, "ttft_ms": 2000} or an SLO(...), or None for the default '
                f"({DEFAULT_SLO.describe()})."
            )
        try:
            return cls(**dict(value))
        except (ValidationError, ValueError, TypeError) as exc:
            raise BenchError(
                f"slo={dict(value)!r} is not an SLO ({_first_error(exc)}): use the keys "
                "ttft_ms / tpot_ms / e2el_ms (positive milliseconds) and optionally "
                "ttft_percentile / tpot_percentile / e2el_percentile (mean, p50, p90, p99), "
                'e.g. {"tpot_ms": 20, "ttft_ms": 2000}.'
            ) from None


#: The issue's example SLO (p50 TPOT <= 20 ms, p99 TTFT <= 2 s): an interactive chat service
#: where a user reads faster than 50 tokens/s would be wasted and waits at most 2 s to start.
DEFAULT_SLO = SLO(tpot_ms=20.0, ttft_ms=2000.0)


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e.get("loc", ())) or "slo"
        return f"{where}: {e.get('msg')}"
    return str(exc)


def _series(df: pd.DataFrame, column: str) -> pd.Series:
    """``df[column]`` as floats (NaN where not a number; all NaN when the column is absent)."""
    if column not in df:
        return pd.Series(float("nan"), index=df.index, dtype=float)
    return pd.to_numeric(df[column], errors="coerce").astype(float)


# --------------------------------------------------------------------------- columns


def with_slo(points: pd.DataFrame, slo: SLO) -> pd.DataFrame:
    """``points`` with ``meets_slo`` (bool) and ``slo_violations`` (``"; "``-joined phrases of
    :meth:`SLO.violations`, ``""`` when met). A copy; rows keep their order."""
    out = points.copy()
    misses = [slo.violations(row) for row in out.to_dict("records")]
    out["meets_slo"] = [not m for m in misses]
    out["slo_violations"] = ["; ".join(m) for m in misses]
    return out


def with_goodput(points: pd.DataFrame) -> pd.DataFrame:
    """``points`` (a copy) with vLLM's goodput in output tokens: a request is good when its TTFT,
    TPOT = (latency - TTFT) / (output tokens - 1) and latency are each within the ``--goodput``
    bound (:meth:`SLO.goodput_args`; vLLM 0.32.0
    ``vllm/benchmarks/serve.py`` ``calculate_metrics``). Adds ``good_fraction`` =
    ``request_goodput / request_throughput`` (0-1), ``goodput_tok_s`` = that x
    ``output_throughput`` (tokens/s; ``--ignore-eos`` makes every output the same length) and
    ``goodput_tok_s_per_gpu``; NaN where measured without ``--goodput``.
    """
    out = points.copy()
    good, rate = _series(out, "request_goodput"), _series(out, "request_throughput")
    tput = _series(out, "output_throughput")
    gpus = _series(out, "gpu_count").fillna(1).clip(lower=1)
    frac = (good / rate).where(rate > 0)
    out["good_fraction"] = frac
    out["goodput_tok_s"] = frac * tput
    out["goodput_tok_s_per_gpu"] = frac * tput / gpus
    return out


def cost_per_million(
    output_tok_s: float | None, gpu_hour_usd: float | None, gpu_count: int | float = 1
) -> float | None:
    """US dollars per million output tokens at ``output_tok_s`` (the whole server's output
    tokens/s) on ``gpu_count`` GPUs at ``gpu_hour_usd`` each per hour:
    ``gpu_hour_usd x gpu_count / (output_tok_s x 3600) x 1e6``. None when either is unknown or
    the throughput is not positive. Prices the GPU time only (no idle time, no egress).

    Raises:
        BenchError: a negative price or GPU count.
    """
    if gpu_hour_usd is None or output_tok_s is None:
        return None
    price, gpus, tput = float(gpu_hour_usd), max(float(gpu_count or 1), 1.0), float(output_tok_s)
    if price < 0 or float(gpu_count or 1) < 0:
        raise BenchError(
            f"gpu_hour_usd={gpu_hour_usd!r}, gpu_count={gpu_count!r}: a price per GPU hour (USD) "
            "and a GPU count cannot be negative, e.g. gpu_hour_usd=3.5."
        )
    if math.isnan(tput) or tput <= 0:
        return None
    return price * gpus / (tput * 3600.0) * 1e6


def with_cost(points: pd.DataFrame, gpu_hour_usd: float | None) -> pd.DataFrame:
    """``points`` with ``cost_per_m_output_tokens_usd`` (:func:`cost_per_million` of each row's
    ``output_throughput`` and ``gpu_count``) and ``cost_per_m_good_tokens_usd`` (the same over
    ``goodput_tok_s``, when the row has it). A copy."""
    out = points.copy()
    gpus = _series(out, "gpu_count").fillna(1)
    for column, source in (
        ("cost_per_m_output_tokens_usd", "output_throughput"),
        ("cost_per_m_good_tokens_usd", "goodput_tok_s"),
    ):
        out[column] = [
            cost_per_million(_num(t), gpu_hour_usd, g)
            for t, g in zip(_series(out, source), gpus, strict=True)
        ]
    return out


#: What :func:`choose` maximises: goodput per GPU (vLLM's, where measured), output throughput
#: per GPU, or the per-user speed (a latency workload).
OBJECTIVES = ("goodput", "throughput", "per_user")


def scores(
    points: pd.DataFrame, objective: str = "goodput", *, per_user: str = "tokens_per_s_per_user"
) -> pd.Series:
    """The figure :func:`choose` ranks each row by (higher is better), as floats: goodput per GPU
    (output tokens/s per GPU where a row has no goodput), output tokens/s per GPU, or the
    ``per_user`` column. Applied to each repeat of a point, it gives the values the tie rule
    compares (:func:`lab.tune.noise.verdict`).

    Raises:
        BenchError: an unknown objective; ``"per_user"`` without its column.
    """
    if objective not in OBJECTIVES:
        raise BenchError(f"objective={objective!r}: use one of {', '.join(OBJECTIVES)}.")
    tput = _series(points, "output_throughput_per_gpu")
    if objective == "goodput":
        return _series(points, "goodput_tok_s_per_gpu").fillna(tput)
    if objective == "throughput":
        return tput
    if per_user not in points:
        raise BenchError(f"choose(objective='per_user'): no column {per_user!r} in the points.")
    return _series(points, per_user)


def choose(
    points: pd.DataFrame,
    slo: SLO | None = None,
    objective: str = "goodput",
    *,
    per_user: str = "tokens_per_s_per_user",
) -> dict[str, Any] | None:
    """The best point among those that meet ``slo`` (all points when ``slo`` is None).

    Args:
        points: rows with ``output_throughput_per_gpu``, the SLO's percentile columns and,
            for ``"goodput"``, ``goodput_tok_s_per_gpu`` (:func:`with_goodput`).
        slo: the bounds a point must meet.
        objective: as :func:`scores`.
        per_user: the per-user speed column (``e2e_tokens_per_s_per_user`` on the stand-in).

    Returns:
        The chosen row as a dict (ties broken by output tokens/s per GPU, then by lower
        concurrency), or None when no point meets the SLO.

    Raises:
        BenchError: an unknown objective, or a column the objective needs is missing.
    """
    if objective not in OBJECTIVES:
        raise BenchError(f"objective={objective!r}: use one of {', '.join(OBJECTIVES)}.")
    data = points if slo is None else slo.meeting(points)
    if data.empty:
        return None
    tput = _series(data, "output_throughput_per_gpu")
    score = scores(data, objective, per_user=per_user)
    if score.isna().all():
        raise BenchError(
            f"choose(objective={objective!r}): no point has the figure it ranks by "
            "(output_throughput_per_gpu / goodput / the per-user speed)."
        )
    ranked = data.assign(_score=score, _tput=tput).sort_values(
        ["_score", "_tput", "concurrency"], ascending=[False, False, True], kind="stable"
    )
    best = ranked.iloc[0].to_dict()
    best.pop("_score"), best.pop("_tput")
    best["objective"] = objective
    best["score"] = float(ranked.iloc[0]["_score"])
    return best


def reference_beside(
    recipe: pd.DataFrame, concurrency: int, slo: SLO | None, objective: str = "goodput"
) -> dict[str, Any] | None:
    """The recipe's own point at ``concurrency`` when none of its points meets ``slo``: what a
    candidate that meets the SLO at that load, measured in the same session, is compared with,
    scored by its output tokens/s per GPU (``objective`` and ``score`` set to
    ``"throughput"``).

    The recipe served that load but missed the SLO. Within the SLO it must run a lower load,
    where it delivers at most its output tokens/s here when throughput rises with load (the
    H100 screen of 2026-12-05: the recipe's 686 output tok/s at 4 agent sessions, 1,296 at 16,
    ``docs/results/h100/tune/drafting-0.32.0-2026-12-05/``), so a goodput or throughput ratio
    against this point is a lower bound of the candidate's lead. Per-user speed falls as load
    rises, so for that objective there is no such bound and no reference. The H100
    confirmation of 2026-12-06 is the case: at 16 agent sessions the recipe's p99 TTFT was
    1,838-3,121 ms over 6 runs, DSpark K=7's 812-1,423 ms.

    Args:
        recipe: the recipe's points (rows as :func:`choose` takes them) of one workload.
        concurrency: the candidate's concurrency (requests in flight).
        slo: the bounds; None: every point meets it, so there is no such reference.
        objective: the comparison's objective, as :func:`scores`; ``"per_user"`` gets None.

    Returns:
        The point as :func:`choose` gives it by throughput, with ``over_slo`` (what it misses,
        :meth:`SLO.violations`), or None: a recipe point meets the SLO (compare with
        :func:`choose`'s), the recipe has no point at ``concurrency``, or the objective is
        per-user speed.
    """
    if slo is None or objective == "per_user" or recipe.empty:
        return None
    if choose(recipe, slo, objective) is not None:
        return None
    at = recipe[recipe["concurrency"].astype(int) == int(concurrency)]
    point = choose(at, None, "throughput") if not at.empty else None
    return None if point is None else {**point, "over_slo": "; ".join(slo.violations(point))}


def with_over_slo(text: str, reference: Mapping[str, Any]) -> str:
    """A verdict's ``text`` against the recipe's point ``reference``, with what that says when
    the point is :func:`reference_beside`'s (its ``over_slo``): ``"...; the recipe misses the
    SLO there (p99 TTFT 2,236 ms > 2,000 ms): set against its output tok/s there, more than it
    delivers within the SLO if its throughput rises with load, so the ratio is a lower
    bound"``; ``text`` as it is otherwise."""
    if not reference.get("over_slo"):
        return text
    return (
        f"{text}; the recipe misses the SLO there ({reference['over_slo']}): set against its "
        "output tok/s there, more than it delivers within the SLO if its throughput rises with "
        "load, so the ratio is a lower bound"
    )


# --------------------------------------------------------------------------- the SLO limit


def slo_limit(meets: Mapping[int, bool]) -> tuple[int | None, int | None]:
    """``(low, high)`` from measured points ``{concurrency: meets the SLO}``: ``high`` the lowest
    concurrency that misses, ``low`` the highest that meets below it (a noisy pass above a
    failing point does not move the limit up).

    Returns:
        ``(low, high)``: ``low`` None when nothing meets the SLO at or below ``high``; ``high``
        None when every measured point meets it (the limit is at or above ``low``).
    """
    fails = sorted(int(c) for c, ok in meets.items() if not ok)
    high = fails[0] if fails else None
    passes = [int(c) for c, ok in meets.items() if ok and (high is None or int(c) < high)]
    return (max(passes) if passes else None), high


def next_probe(meets: Mapping[int, bool]) -> int | None:
    """The next concurrency of the bisection for the SLO limit: the midpoint (rounded down)
    of :func:`slo_limit`'s ``(low, high)``, or None when there is nothing to search (no point
    meets the SLO, every point meets it, or ``high - low <= 1``: the limit is found).

    ``k`` probes bound the limit to ``(high - low) / 2**k``.
    """
    low, high = slo_limit(meets)
    if low is None or high is None or high - low <= 1:
        return None
    return (low + high) // 2


# --------------------------------------------------------------------------- the API's price


class APIPrice(BaseModel):
    """A published per-token price of this model behind a hosted API.

    Attributes:
        provider: who sells it (``"Vercel"``).
        input_usd_per_m, output_usd_per_m: US dollars per million input / output tokens.
        source: where the price was read (a page or a note).
        date: when it was read (a price changes: quote the date with it).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str
    input_usd_per_m: float = Field(ge=0)
    output_usd_per_m: float = Field(gt=0)
    source: str
    date: str

    def per_m_output(self, input_len: float = 0, output_len: float = 1) -> float:
        """US dollars the API charges per million output tokens of a workload of
        ``input_len`` tokens in and ``output_len`` out per request, its input tokens included
        (a self-hosted GPU reads the prompts in the same GPU time it prices):
        ``output_usd_per_m + input_usd_per_m x input_len / output_len``."""
        ratio = float(input_len) / max(float(output_len), 1.0)
        return self.output_usd_per_m + self.input_usd_per_m * ratio

    def describe(self) -> str:
        """``"Vercel: $0.04 in / $0.12 out per million tokens (read late 2026)"``."""
        return (
            f"{self.provider}: ${self.input_usd_per_m:g} in / ${self.output_usd_per_m:g} out "
            f"per million tokens (read {self.date})"
        )

    @classmethod
    def coerce(cls, value: Any) -> tuple[APIPrice, ...]:
        """API prices from None (:data:`API_PRICES`), an :class:`APIPrice`, a mapping of its
        fields, or a list of them.

        Raises:
            BenchError: a field missing or of the wrong kind; the message names the fields.
        """
        if value is None:
            return API_PRICES
        items = [value] if isinstance(value, (APIPrice, Mapping)) else list(value)
        out = []
        for item in items:
            try:
                out.append(item if isinstance(item, APIPrice) else cls(**dict(item)))
            except (ValidationError, TypeError, ValueError) as exc:
                raise BenchError(
                    f"api_prices={item!r} is not an API price ({_first_error(exc)}): pass "
                    '{"provider": "Vercel", "input_usd_per_m": 0.04, "output_usd_per_m": 0.12, '
                    '"source": "...", "date": "2026-11"} or a list of them (None: the defaults).'
                ) from None
        return tuple(out)


#: Published prices of Nemotron 3.5 Lightning (30B-A3B) behind hosted APIs, as read in late
#: 2026; pass your own (``tune(..., api_prices=...)``): a price is only as good as its date.
API_PRICES = (
    APIPrice(provider="Vercel", input_usd_per_m=0.04, output_usd_per_m=0.12,
             source="Vercel, its published per-token price of the model", date="late 2026"),
    APIPrice(provider="W&B", input_usd_per_m=0.07, output_usd_per_m=0.20,
             source="W&B Inference, its published per-token price of the model",
             date="late 2026"),
)  # fmt: skip


def break_even_utilization(
    output_tok_s: float | None,
    gpu_hour_usd: float | None,
    api_usd_per_m_output: float,
    gpu_count: int | float = 1,
) -> float | None:
    """The share of hours a self-hosted server must run at ``output_tok_s`` for its GPU time to
    cost what the API charges for the same tokens: :func:`cost_per_million` at full use over the
    API's price. Above 1 (returned unclamped): the API is cheaper even at 100 % use.

    Args:
        output_tok_s: the whole server's output tokens/s at the chosen point.
        gpu_hour_usd: US dollars per GPU hour; gpu_count: GPUs behind the server.
        api_usd_per_m_output: the API's US dollars per million output tokens
            (:meth:`APIPrice.per_m_output`).

    Returns:
        ``u`` (0.25 = 25 % of the hours), or None without a price or a positive throughput.

    Raises:
        BenchError: a negative GPU price or count, or an API price that is not positive.
    """
    if not api_usd_per_m_output or api_usd_per_m_output <= 0:
        raise BenchError(
            f"api_usd_per_m_output={api_usd_per_m_output!r}: an API price per million output "
            "tokens must be positive, e.g. 0.12."
        )
    full = cost_per_million(output_tok_s, gpu_hour_usd, gpu_count)
    return None if full is None else full / float(api_usd_per_m_output)
