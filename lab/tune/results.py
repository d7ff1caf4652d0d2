"""The result of a tuning run (:class:`TuneResult`), built from a run's folder by
:func:`collect` (no server is touched): points, candidates' status, the recommendation and its words.

Over 500 lines: the recommendation, its table and the summary's notes (measured apart, an SLO
limit's probe beyond the pick, no reference) read one result object and stay beside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.metrics import _num
from helpers.bench.results import NOT_MEASURED_ON_STANDIN
from helpers.config.run import serves_standin
from helpers.errors import BenchError
from lab.bench.scenarios import Scenario
from lab.tune import noise
from lab.tune import slo as slos
from lab.tune.points import _read_json, _repeat_of, _write_json, limit, point_runs, points_frame
from lab.tune.saved import RECIPE, _where, document

#: Decimals of :meth:`TuneResult.recommendation_table`'s columns, for reading (tok/s and ms to
#: 0.1, the share of good requests to 0.01, dollars to 0.001); ``tune.json`` keeps full precision.
TABLE_DECIMALS = {
    "output_tok_s_per_gpu": 1, "per_user_tok_s": 1, "goodput_tok_s_per_gpu": 1,
    "good_requests": 2, "p99_ttft_ms": 1, "p50_tpot_ms": 1, "usd_per_m_output_tokens": 3,
}  # fmt: skip


# --------------------------------------------------------------------------- results


def collect(
    folder: str | Path,
    target: Any,
    cands: Sequence[Any],
    loads: Sequence[Scenario],
    bounds: slos.SLO,
    *,
    gpu_hour_usd: float | None = None,
    run: Any = None,
    skipped: Mapping[str, Mapping[str, Any]] | None = None,
    repeats: int = 1,
    api_prices: Any = None,
) -> TuneResult:
    """What ``folder`` holds for these candidates and workloads, as a :class:`TuneResult`:
    every saved run (``runs``), the points as medians over their repeats with their spread
    (``points``, :func:`lab.tune.noise.aggregate`), the SLO limits, failures, SLO check,
    goodput and cost. ``run`` (None: a GPU) says whether the stand-in played them; ``api_prices``
    as :meth:`lab.tune.slo.APIPrice.coerce`. A point meets the SLO when the median over its
    repeats of each bounded percentile does."""
    folder = Path(folder)
    frames, rows, limits, recorded = [], [], [], {}
    for cand in cands:
        record = _read_json(folder / cand.name / "candidate.json") or {}
        recorded[cand.name] = _read_json(folder / cand.name / "failures.json") or []
        failures = [
            *recorded[cand.name],
            *([dict(skipped[cand.name])] if cand.name in (skipped or {}) else []),
        ]
        n, dates = 0, []
        for w in loads:
            paths = [p for c in w.concurrencies for p in point_runs(folder, cand.name, w, c)]
            limits.append(limit(folder, cand.name, w, bounds, gpu_hour_usd))
            if not paths:
                continue
            df = points_frame(paths)
            df.insert(0, "repeat", [_repeat_of(p) for p in df["path"]])
            df.insert(0, "workload", w.name)
            df.insert(0, "candidate", cand.name)
            df["recipe"] = cand.recipe
            df["vllm_version"] = record.get("vllm_version") or cand.config.vllm_version
            df["host"] = record.get("host")
            frames.append(df)
            n += int((df["repeat"] == 0).sum())
            dates += list(noise.run_dates(df))
        last = failures[-1] if failures else None
        expected = sum(len(w.concurrencies) for w in loads)
        stopped = "skipped" if last and last.get("stage") == "release" else "failed"
        status = "ok" if n == expected else "partial" if n else stopped if last else "not run"
        rows.append({
            "candidate": cand.name, "status": status, "points": n, "of": expected,
            "measured": f"{min(dates):%Y-%m-%d %H:%M}" if dates else None,
            "host": record.get("host"),
            "stage": last.get("stage") if last else None,
            "reason": _reason(last) if last else "",
            "note": cand.note, "vllm_version": cand.config.vllm_version,
            "changes": changes(cand.config, target) + (  # what the stand-in drafted with
                f" (the stand-in drafts {record['standin_drafting']})"
                if record.get("standin_drafting") else ""),
            "command": cand.config.shell_command(),
            "acceptance": record.get("acceptance"),
        })  # fmt: skip
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    points = runs
    if not runs.empty:
        runs = slos.with_cost(slos.with_goodput(slos.with_slo(runs, bounds)), gpu_hour_usd)
        runs["score"] = slos.scores(runs)
        points = noise.aggregate(runs)
        # the SLO check and the price of the median point (not the median of the verdicts)
        points = slos.with_cost(slos.with_slo(points, bounds), gpu_hour_usd)
    return TuneResult(
        points=points, runs=runs, repeats=int(repeats),
        limits=pd.DataFrame(limits).astype({"limit": "Int64", "misses_at": "Int64"})
        if limits
        else pd.DataFrame(),
        api_prices=slos.APIPrice.coerce(api_prices),
        candidates=pd.DataFrame(rows), slo=bounds, workloads=list(loads),
        configs={c.name: c.config for c in cands}, folder=folder, target=target,
        gpu_hour_usd=gpu_hour_usd, stand_in=serves_standin(run),
        failures=recorded,
        specs={c.name: c.spec for c in cands},
    )  # fmt: skip


def _reason(failure: Mapping[str, Any]) -> str:
    diag = failure.get("diagnosis")
    where = f" (c={failure['concurrency']})" if failure.get("concurrency") is not None else ""
    text = f"{diag['cause']}: {diag['fix']}" if diag else failure.get("message", "")
    return f"{failure.get('stage')}{where}: {text}"


@dataclasses.dataclass
class Recommendation:
    """The chosen point of one workload, with the command that serves it.

    Attributes:
        workload, candidate, concurrency: where it was measured.
        output_throughput_per_gpu: output tokens/s per GPU at that point.
        per_user: tokens/s one user sees (1000 / mean TPOT; end-to-end on the stand-in).
        goodput_tok_s_per_gpu: vLLM's goodput as output tokens/s per GPU (None without).
        cost_per_m_tokens_usd: US dollars per million output tokens at that point (None
            without a price).
        shell_command, docker_command: the target's command for the candidate.
        slo: the SLO it meets, in words.
        repeats: runs of the point (the figures above are their medians).
        spread: ``{metric: (min, max)}`` over the runs, for :data:`lab.tune.noise.SPREAD_METRICS`.
        verdict: the tie rule's words against the recipe (:func:`lab.tune.noise.verdict`),
            None for the recipe itself or without a recipe point.
        tied_with: the candidate whose margin was within the noise (the recipe stays), or None.
        slo_limit: the candidate's :attr:`TuneResult.limits` row at this workload, or None.
        api: per API price (:data:`lab.tune.slo.API_PRICES`): ``provider``, the API's
            ``usd_per_m_output`` for this workload (input tokens included) and
            ``break_even_utilization`` (:func:`lab.tune.slo.break_even_utilization`).
        drafting: for a candidate that drafted at a synthetic acceptance (a weightless run):
            that acceptance with its source, the break-even acceptance length at this point
            (:func:`drafting_words`) and how to measure one's own; None otherwise.
        reference_over_slo: when no recipe point met the SLO, what its point at this
            concurrency (the reference, :func:`lab.tune.slo.reference_beside`) missed; else None.
    """

    workload: str
    candidate: str
    concurrency: int
    output_throughput_per_gpu: float
    per_user: float | None
    goodput_tok_s_per_gpu: float | None
    cost_per_m_tokens_usd: float | None
    shell_command: str
    docker_command: str | None
    slo: str
    repeats: int = 1
    spread: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    verdict: str | None = None
    tied_with: str | None = None
    slo_limit: dict[str, Any] | None = None
    api: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    drafting: str | None = None
    reference_over_slo: str | None = None

    @property
    def tie(self) -> str | None:
        """``"tie (within noise)"`` or ``"tie (measured apart)"`` when ``tied_with`` did not
        replace the recipe (:attr:`lab.tune.noise.Verdict.tie`); else None."""
        return self.verdict.split(":", 1)[0] if self.tied_with and self.verdict else None

    def _figure(self, value: float, metric: str) -> str:
        lo_hi = self.spread.get(metric)
        if self.repeats < 2 or lo_hi is None:
            return f"{value:,.0f}"
        return f"{value:,.0f} (median of {self.repeats}, {lo_hi[0]:,.0f}-{lo_hi[1]:,.0f})"

    def __str__(self) -> str:
        usd, g = self.cost_per_m_tokens_usd, self.goodput_tok_s_per_gpu
        cost = f", ${usd:,.3f} per million output tokens" if usd is not None else ""
        ratio = f", {self.verdict}" if self.verdict else ""
        if self.tied_with:
            ratio = f"; {self.tied_with}: {self.verdict}, so the recipe stays"
        good = (
            "" if g is None else f", goodput {self._figure(g, 'goodput_tok_s_per_gpu')} tok/s/GPU"
        )
        runs = "" if self.repeats > 1 else " (one run)"
        tput = self._figure(self.output_throughput_per_gpu, "output_throughput_per_gpu")
        return (
            f"{self.workload}: {self.candidate} at concurrency {self.concurrency}{runs}: "
            f"{tput} output tok/s/GPU{good}{cost}{ratio} ({self.slo})"
        )

    def lines(self) -> list[str]:
        """:meth:`__str__`, then the SLO limit and the cost against each API price."""
        out = [str(self)]
        if self.drafting:
            out.append("  " + self.drafting)
        lim = self.slo_limit
        if lim is not None:
            out.append("  " + limit_words(lim))
        for a in self.api:
            u = a["break_even_utilization"]
            if u is None:
                continue
            even = (
                f"self-hosting breaks even at {u:.0%} GPU utilization"
                if u <= 1
                else f"the API is cheaper even at 100 % utilization (break-even would need {u:.0%})"
            )
            out.append(
                f"  vs {a['provider']}'s API (${a['usd_per_m_output']:.3f} per million output "
                f"tokens of this workload, its input tokens included; {a['price']}): {even}"
            )
        return out


#: How a user measures their own acceptance length (what a synthetic point's verdict hinges on).
OWN_ACCEPTANCE = (
    "measure your own L with the real weights on your prompts: notebooks/speculative_decoding.ipynb "
    "step 4, or vLLM's /metrics: 1 + vllm:spec_decode_num_accepted_tokens_total / "
    "vllm:spec_decode_num_drafts_total"
)


def drafting_words(
    caption: str, length: float | None, candidate_tput: float, recipe_tput: float | None
) -> str:
    """A drafting recommendation's condition: the acceptance it was timed at (``caption``), the
    break-even acceptance length at the point (``length`` x ``recipe_tput`` / ``candidate_tput``:
    speed taken as proportional to L, :func:`lab.breakeven.break_even`'s ``model="origin"``),
    and how to measure one's own (:data:`OWN_ACCEPTANCE`)."""
    even = ""
    if length and recipe_tput and candidate_tput:
        even = (f"; it beats the recipe here only above L = {length * recipe_tput / candidate_tput:.2f} "
                "(the break-even acceptance length, speed taken as proportional to L)")  # fmt: skip
    return f"drafting at {caption}{even}; {OWN_ACCEPTANCE}"


def limit_words(lim: Mapping[str, Any]) -> str:
    """One :attr:`TuneResult.limits` row in words: the highest concurrency that meets the SLO,
    how it was found, and the goodput there."""
    who, probes = lim["candidate"], int(_num(lim.get("probes")) or 0)
    low, high, good = (_num(lim.get(k)) for k in ("limit", "misses_at", "goodput_tok_s_per_gpu"))
    how = f"bisection, {probes} extra point(s), one run each" if probes else "the grid's points"
    if low is None:
        return f"SLO limit ({who}): no measured concurrency meets the SLO (misses from {high:.0f})"
    at = f"; goodput {good:,.0f} tok/s/GPU there, one run" if good is not None else ""
    if high is None:
        return (f"SLO limit ({who}): every measured concurrency meets it, up to {low:.0f}: the "
                f"limit is {low:.0f} or more ({how}){at}")  # fmt: skip
    state = "found" if high - low <= 1 else f"between {low:.0f} and {high:.0f}"
    return (f"SLO limit ({who}): concurrency {low:.0f} meets it, {high:.0f} misses ({state}; "
            f"{how}){at}")  # fmt: skip


def changes(cfg: Any, base: Any) -> str:
    """What ``cfg`` changes against ``base`` (the recipe), in command words:
    ``"variant bf16; --moe-backend triton; --max-num-seqs 64"``; ``""`` when nothing."""
    from helpers.config.serveconfig import _flag_argv

    out = []
    for attr in ("variant", "speculative", "vllm_version"):
        if getattr(cfg, attr, None) != getattr(base, attr, None):
            out.append(f"{attr.replace('_', ' ')} {getattr(cfg, attr)}")
    for flag in dict.fromkeys([*base.args, *cfg.args]):
        if flag not in cfg.args:
            out.append(f"no {flag}")
        elif base.args.get(flag) != cfg.args[flag]:
            out.append(" ".join(_flag_argv(flag, cfg.args[flag])))
    return "; ".join(out)


@dataclasses.dataclass
class TuneResult:
    """What a tuning run measured (:func:`tune`, :func:`collect`).

    Attributes:
        points: one row per candidate x workload x concurrency, the median over its repeats
            (``repeats``; ``<metric>_min`` / ``_max`` of :data:`lab.tune.noise.SPREAD_METRICS`):
            :func:`load_results`'s columns, vLLM's percentiles (``p50_tpot_ms``, ...),
            ``candidate``, ``workload``, ``recipe``, ``vllm_version`` and :mod:`lab.tune.slo`'s
            ``meets_slo``, ``slo_violations``, ``good_fraction``, ``goodput_tok_s(_per_gpu)``,
            ``cost_per_m_output_tokens_usd``.
        runs: the same columns, one row per run (``repeat``, 0-based): what the medians are of.
        limits: per candidate and workload, the SLO limit (:func:`lab.tune.points.limit`: ``limit``,
            ``misses_at``, ``probes``, ``found``, goodput there).
        repeats: the runs the call asked for at each decision point.
        api_prices: the API prices the cost is set beside (:class:`lab.tune.slo.APIPrice`).
        candidates: one row per candidate: ``status`` (ok / partial / failed / not run),
            ``points``, ``reason`` (the diagnosis of a failure), ``command``.
        failures: every recorded failure per candidate (stage, message, diagnosis, log).
        slo, workloads, configs, folder, target, gpu_hour_usd, stand_in: what it ran with.
    """

    points: pd.DataFrame
    candidates: pd.DataFrame
    slo: slos.SLO
    workloads: list[Scenario]
    configs: dict[str, Any]
    folder: Path
    target: Any
    gpu_hour_usd: float | None = None
    stand_in: bool = False
    failures: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    specs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    runs: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    limits: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    repeats: int = 1
    api_prices: tuple[Any, ...] = ()

    @property
    def per_user_column(self) -> str:
        """``tokens_per_s_per_user`` (1000 / mean TPOT); on the stand-in, whose 2 busy cores
        stream tokens in bursts, ``e2e_tokens_per_s_per_user``."""
        return "e2e_tokens_per_s_per_user" if self.stand_in else "tokens_per_s_per_user"

    def _workload(self, workload: str | None) -> str:
        names = [w.name for w in self.workloads]
        if workload is None:
            return names[0]
        if workload not in names:
            raise BenchError(f"workload {workload!r} was not measured here; measured: {names}.")
        return workload

    def _of(self, workload: str) -> pd.DataFrame:
        return _where(self.points, workload=workload)

    def _decidable(self, workload: str) -> pd.DataFrame:
        """The points a recommendation may rest on at ``workload``: of each candidate, those run
        as often as its most repeated point, so a choice by medians never lands on a point of
        one run beside repeated ones."""
        pts = self._of(workload)
        if pts.empty or "repeats" not in pts:
            return pts
        runs = pts["repeats"].fillna(1)
        return pts[runs >= runs.groupby(pts["candidate"]).transform("max")]

    def _runs_at(self, point: Mapping[str, Any]) -> pd.DataFrame:
        """The runs (one row each) of one point."""
        runs = self.runs if not self.runs.empty else self.points
        return _where(runs, **{k: point[k] for k in noise.POINT_KEYS})

    def _run_scores(self, point: Mapping[str, Any], objective: str = "goodput") -> list[float]:
        """Each run's score (:func:`lab.tune.slo.scores`) at one point."""
        return [v for v in slos.scores(self._runs_at(point), objective) if v == v]

    def recommended(self, workload: str | None = None) -> Recommendation | None:
        """The best point under the SLO at ``workload`` by medians (:meth:`_decidable`,
        :func:`lab.tune.slo.choose`) when it beats the recipe's best beyond the noise
        (:func:`lab.tune.noise.verdict`, the candidates screened at ``workload`` counted)
        and was measured beside it
        (:func:`lab.tune.noise.apart`), else the recipe's, the tie named in ``tied_with``.
        When no recipe point meets the SLO, the best is compared with the recipe's own point at
        its concurrency (:func:`lab.tune.slo.reference_beside`) and recommended only when it
        beats it. None when no point meets the SLO (:meth:`closest` says which came nearest),
        or the recipe has none and nothing beats it where it was measured."""
        name = self._workload(workload)
        pts = self._decidable(name)
        if pts.empty:
            return None
        best = slos.choose(pts, self.slo)
        if best is None:
            return None
        recipe = slos.choose(pts[pts["recipe"]], self.slo) if pts["recipe"].any() else None
        # the recipe's own point at the best's load, when none of its points meets the SLO
        beside = None
        if recipe is None and not best.get("recipe"):
            beside = slos.reference_beside(pts[pts["recipe"]], best["concurrency"], self.slo)
            if beside is None and self.unreferenced(name):
                return None  # the recipe ran and left no point here: nothing to beat, no verdict
            recipe = beside
        words, tied = None, None
        if recipe is not None and best["candidate"] != recipe["candidate"]:
            v = noise.verdict(
                self._run_scores(best),
                self._run_scores(recipe, recipe.get("objective", "goodput")),
                noise.apart(self._runs_at(best), self._runs_at(recipe), best["candidate"]),
                screened=noise.screened_count(pts),
            )
            if beside is not None and not v.beats:
                return None  # a recipe over the SLO cannot stay recommended: no verdict
            words = slos.with_over_slo(v.text, recipe)
            if not v.beats:
                best, tied = recipe, best["candidate"]
        cfg = self.configs[best["candidate"]]
        tput = _num(best.get("output_throughput"))
        gpus = _num(best.get("gpu_count")) or 1
        lim = _where(self.limits, candidate=best["candidate"], workload=name)
        w = next(x for x in self.workloads if x.name == name)
        return Recommendation(
            workload=name, candidate=best["candidate"], concurrency=int(best["concurrency"]),
            output_throughput_per_gpu=float(best["output_throughput_per_gpu"]),
            per_user=_num(best.get(self.per_user_column)),
            goodput_tok_s_per_gpu=_num(best.get("goodput_tok_s_per_gpu")),
            cost_per_m_tokens_usd=_num(best.get("cost_per_m_output_tokens_usd")),
            shell_command=cfg.shell_command(),
            docker_command=cfg.docker_command() if getattr(cfg, "docker_image", None) else None,
            slo=self.slo.describe(),
            repeats=int(best.get("repeats") or 1),
            spread={m: (float(best[f"{m}_min"]), float(best[f"{m}_max"]))
                    for m in noise.SPREAD_METRICS if _num(best.get(f"{m}_min")) is not None},
            verdict=words, tied_with=tied, reference_over_slo=beside["over_slo"] if beside else None,
            slo_limit=lim.iloc[0].to_dict() if not lim.empty else None,
            drafting=self._drafting(best, name),
            api=[{"provider": a.provider, "price": a.describe(),
                  "usd_per_m_output": a.per_m_output(w.input_len, w.output_len),
                  "break_even_utilization": slos.break_even_utilization(
                      tput, self.gpu_hour_usd, a.per_m_output(w.input_len, w.output_len), gpus)}
                 for a in self.api_prices],
        )  # fmt: skip

    def _drafting(self, point: Mapping[str, Any], workload: str) -> str | None:
        """:func:`drafting_words` for a point of a candidate that drafted at a synthetic
        acceptance (its ``acceptance`` in :attr:`candidates`), else None."""
        if self.candidates.empty or "acceptance" not in self.candidates:
            return None
        row = self.candidates[self.candidates["candidate"] == point["candidate"]]
        caption = row["acceptance"].iloc[0] if not row.empty else None
        if not isinstance(caption, str) or not caption:
            return None
        recipe = _where(self._of(workload), recipe=True, concurrency=point["concurrency"])
        recipe_tput = _num(recipe["output_throughput"].iloc[0]) if not recipe.empty else None
        return drafting_words(caption, _num(point.get("spec_decode_acceptance_length")),
                              float(point["output_throughput"]), recipe_tput)  # fmt: skip

    def unreferenced(self, workload: str) -> str | None:
        """Why no candidate can be judged at ``workload``: the recipe was among the candidates
        but left no point there that meets the SLO: none at all (its server died mid-sweep, its
        points failed), or points that all miss it (each concurrency's misses are named) while
        a candidate meets it but does not beat the recipe's point at its concurrency
        (:func:`lab.tune.slo.reference_beside`); None when the recipe has such a point, was not
        a candidate, or neither it nor any candidate meets the SLO (:meth:`closest`)."""
        rows = self.candidates
        if rows.empty or "candidate" not in rows or not (rows["candidate"] == RECIPE).any():
            return None
        pts = self._of(workload)
        if (
            not pts.empty
            and pts["recipe"].any()
            and slos.choose(pts[pts["recipe"]], self.slo) is not None
        ):
            return None
        status = rows.loc[rows["candidate"] == RECIPE].iloc[0].get("status", "")
        mine = pts[pts["recipe"]] if not pts.empty else pts
        if not mine.empty and self.slo.meeting(pts[~pts["recipe"]]).empty:
            return None  # nothing meets the SLO: closest() says which point came nearest
        if not mine.empty:  # it served the load and missed the SLO at every concurrency
            missed = "; ".join(f"c={int(r['concurrency'])}: {'; '.join(self.slo.violations(r))}"
                               for r in mine.sort_values("concurrency").to_dict("records"))  # fmt: skip
            return (
                f"the recipe's command (status: {status}) misses {self.slo.describe()} at every "
                f"concurrency measured here ({missed}), and no candidate that meets it leads the "
                "recipe's point at the candidate's concurrency beyond the noise (or the recipe "
                "has none there): measure the recipe at a lower concurrency, or both with more "
                "runs (remeasure=['recipe'])"
            )
        return (
            f"the recipe's command (status: {status}) has no point here that meets "
            f"{self.slo.describe()}, so no candidate can be set against it: measure the recipe "
            "again (remeasure=['recipe'])"
        )

    def closest(self, workload: str | None = None) -> dict[str, Any] | None:
        """The point that missed the SLO by the least (the fewest bounds missed, then the
        highest throughput), for the message when nothing meets it; None without points."""
        pts = self._of(self._workload(workload))
        if pts.empty:
            return None
        ranked = pts.assign(_n=[len(self.slo.violations(r)) for r in pts.to_dict("records")])
        ranked = ranked.sort_values(["_n", "output_throughput_per_gpu"], ascending=[True, False])
        return ranked.iloc[0].drop(labels=["_n"]).to_dict()

    def recommendation_table(self) -> pd.DataFrame:
        """Per workload, one row each (``role``) for the recommended point, the recipe's best
        under the same SLO and, on a tie, the candidate within the noise: medians over ``runs``
        (``*_range``: min-max, ``"one run"`` without repeats) of throughput per GPU, per-user
        speed, goodput, good-request share, p99 TTFT, p50 TPOT; cost per million output tokens,
        ``verdict`` and ``changes`` against the recipe. Nothing meets the SLO: one row saying so."""
        rows = []
        for w in self.workloads:
            pts = self._decidable(w.name)
            rec = self.recommended(w.name)
            picks = []
            if rec is not None:
                picks.append(("recommended", rec.candidate, rec.concurrency))
            if not pts.empty and pts["recipe"].any():
                r = slos.choose(pts[pts["recipe"]], self.slo)
                if r is None and rec is not None and rec.reference_over_slo:
                    r = slos.reference_beside(pts[pts["recipe"]], rec.concurrency, self.slo)
                if r is not None:
                    picks.append(("recipe", r["candidate"], int(r["concurrency"])))
            if rec is not None and rec.tied_with:
                t = slos.choose(_where(pts, candidate=rec.tied_with), self.slo)
                picks.append((rec.tie, rec.tied_with, int(t["concurrency"])))
            missing = self.unreferenced(w.name) if not picks else None
            if missing:  # the recipe left no point within the SLO to set anything against
                rows.append({"workload": w.name, "role": "no recommendation", "misses": missing})
                continue
            if not picks:
                near = self.closest(w.name)
                rows.append({"workload": w.name, "role": "none meets the SLO",
                             "candidate": near["candidate"] if near else None,
                             "concurrency": near["concurrency"] if near else None,
                             "misses": near["slo_violations"] if near else "no point measured"})  # fmt: skip
                continue
            for role, cand, conc in picks:
                row = _where(pts, candidate=cand, concurrency=conc).iloc[0]
                n = int(row.get("repeats") or 1)

                def spread(m: str, digits: int = 0, row=row, n=n) -> str:
                    lo, hi = _num(row.get(f"{m}_min")), _num(row.get(f"{m}_max"))
                    if lo is None or hi is None:
                        return ""
                    return f"{lo:,.{digits}f}-{hi:,.{digits}f}" if n > 1 else "one run"

                tpot_na = self.stand_in
                rows.append({
                    "workload": w.name, "role": role, "candidate": cand, "concurrency": conc,
                    "runs": n,
                    "output_tok_s_per_gpu": row["output_throughput_per_gpu"],
                    "output_tok_s_range": spread("output_throughput_per_gpu"),
                    "per_user_tok_s": row.get(self.per_user_column),
                    "goodput_tok_s_per_gpu": row.get("goodput_tok_s_per_gpu"),
                    "goodput_range": spread("goodput_tok_s_per_gpu"),
                    "good_requests": row.get("good_fraction"),
                    "p99_ttft_ms": row.get("p99_ttft_ms"),
                    "p50_tpot_ms": NOT_MEASURED_ON_STANDIN if tpot_na else row.get("p50_tpot_ms"),
                    "p50_tpot_range": NOT_MEASURED_ON_STANDIN if tpot_na else spread("p50_tpot_ms", 1),
                    "usd_per_m_output_tokens": row.get("cost_per_m_output_tokens_usd"),
                    "verdict": (rec.verdict or "") if rec is not None and role != "recipe" else "",
                    "changes": changes(self.configs[cand], self.target) or "(the recipe's command)",
                })  # fmt: skip
        return pd.DataFrame(rows).round(TABLE_DECIMALS)

    def summary(self) -> str:
        """One line per workload: the recommendation (:class:`Recommendation`), or why none;
        then one line per candidate that failed (it is in no comparison), with its reason."""
        lines = []
        for w in self.workloads:
            rec = self.recommended(w.name)
            if rec is not None:
                lines += rec.lines()
                if self.stand_in and rec.api:  # the cost lines price a CPU's speed at a GPU's rate
                    lines.append("  (stand-in: a CPU's speed at the example GPU price: the "
                                 "arithmetic of a GPU run, not a verdict on one)")  # fmt: skip
                lines += self.measured_apart(w.name, rec.tied_with or rec.candidate)
                lines += self.probes_ahead(w, rec)
                continue
            missing = self.unreferenced(w.name)
            if missing:
                lines.append(f"{w.name}: no recommendation: {missing}")
                continue
            near = self.closest(w.name)
            if near is None:
                lines.append(f"{w.name}: nothing measured yet (see the candidates' status).")
                continue
            lines.append(
                f"{w.name}: no point meets {self.slo.describe()}; closest: {near['candidate']} at "
                f"c={near['concurrency']} ({near['slo_violations']}). Relax the SLO, or add "
                "candidates (a smaller --max-num-seqs, another kernel)."
            )
        if "status" in self.candidates:  # a candidate that never ran is not in any pick above
            for row in self.candidates[self.candidates["status"] == "failed"].to_dict("records"):
                lines.append(f"not compared: {row['candidate']} failed ({row.get('stage')}): "
                             f"{str(row.get('reason') or '')[:300]}")  # fmt: skip
        return "\n".join(lines)

    def probes_ahead(self, w: Scenario, rec: Recommendation) -> list[str]:
        """One line per candidate whose SLO limit lies between the grid's concurrencies (a
        bisection probe, one run) with more goodput per GPU than ``rec``: the pick rests on the
        grid's repeated points, so the probe cannot decide it, and the line says how to measure
        that concurrency as the rule requires (in the grid: its runs repeat); else none."""
        if rec.goodput_tok_s_per_gpu is None or self.limits.empty:
            return []
        out = []
        for row in _where(self.limits, workload=w.name).to_dict("records"):
            good, at = _num(row.get("goodput_tok_s_per_gpu")), row.get("limit")
            if good is None or at is None or at != at or int(at) in w.concurrencies:
                continue
            if good > rec.goodput_tok_s_per_gpu:
                grid = sorted({*w.concurrencies, int(at)})
                out.append(
                    f"  note: {row['candidate']} met the SLO at concurrency {int(at)} (its SLO "
                    f"limit, a bisection probe of one run) with {good:,.0f} goodput tok/s/GPU, "
                    f"more than this pick's {rec.goodput_tok_s_per_gpu:,.0f}; one run decides "
                    f"nothing: measure it with repeats, tune(..., concurrencies={grid})."
                )
        return out

    def measured_apart(self, workload: str, candidate: str) -> list[str]:
        """One line, with the fix, when ``candidate``'s points at ``workload`` may not compare
        with the recipe's: measured apart (:func:`lab.tune.noise.apart`: more than
        :data:`lab.tune.noise.MEASURED_APART_S`, or on another host) or on another vLLM
        release (a resumed run mixes them); else none."""
        pts = self._of(workload)
        if pts.empty or candidate == RECIPE or not pts["recipe"].any():
            return []
        mine, ref = _where(pts, candidate=candidate), pts[pts["recipe"]]
        reasons = noise.apart(mine, ref, candidate)
        a, b = noise.run_dates(mine), noise.run_dates(ref)
        older = candidate if len(a) and len(b) and a.median() < b.median() else RECIPE
        if "vllm_version" in pts:
            a, b = set(mine["vllm_version"].dropna()), set(ref["vllm_version"].dropna())
            if a and b and a != b:
                reasons.append(f"on another vLLM release ({candidate}: {', '.join(map(str, a))}; "
                               f"the recipe: {', '.join(map(str, b))})")  # fmt: skip
        if not reasons:
            return []
        return [
            f"  note: {candidate} and the recipe were {'; '.join(reasons)}: load and machine "
            "differ between them, so the ratio may be theirs, not the flags'. Re-measure the "
            f"older beside the other, on one host: tune(..., remeasure=[{older!r}])."
        ]

    def plot(self, path: str | Path | None = None, workload: str | None = None):
        """The frontier plot of ``workload`` (:func:`lab.bench.plots.tune_frontier`), each
        repeated point with the range of its runs."""
        from lab.bench.plots import tune_frontier

        name = self._workload(workload)
        rec = self.recommended(name)
        pts = self._of(name)
        wl = next((w for w in self.workloads if w.name == name), None)
        shape = f", {wl.input_len:,} in / {wl.output_len:,} out tokens" if wl else ""
        versions = sorted({str(v) for v in pts.get("vllm_version", []) if v})
        x, y = (
            self.per_user_column,
            "output_throughput" if self.stand_in else "output_throughput_per_gpu",
        )
        # each point's range over its runs, the bars: noise.aggregate has it for SPREAD_METRICS
        # (a GPU's axes); the stand-in's axes are not among them
        runs = self.runs[self.runs["workload"] == name] if "workload" in self.runs else self.runs
        missing = [c for c in (x, y) if f"{c}_min" not in pts and c in runs]
        if missing and not runs.empty:
            spread = runs.groupby(["candidate", "concurrency"])[missing].agg(["min", "max"])
            spread.columns = [f"{c}_{s}" for c, s in spread.columns]
            pts = pts.merge(spread.reset_index(), on=["candidate", "concurrency"], how="left")
        return tune_frontier(
            pts, recommended=(rec.candidate, rec.concurrency) if rec else None,
            vllm_version=", ".join(versions) or None,
            x=x,
            y=y,
            title=f"Tuning: {name}{shape} ({self.slo.describe()})",
            target=getattr(self.target, "label", None) + (" (CPU stand-in)" if self.stand_in else ""),
            path=path,
        )  # fmt: skip

    # ---- the saved form ---------------------------------------------------------------
    def to_dict(self, applies_to: Sequence[str] = ()) -> dict[str, Any]:
        """The :data:`~lab.tune.saved.SCHEMA` document (:func:`lab.tune.saved.document`)."""
        return document(self, applies_to)

    def save(self, path: str | Path | None = None, applies_to: Sequence[str] = ()) -> Path:
        """Write :meth:`to_dict` as JSON (default ``<folder>/tune.json``); return the path."""
        path = Path(path) if path else self.folder / "tune.json"
        _write_json(path, self.to_dict(applies_to))
        return path
