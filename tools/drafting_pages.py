"""The page of one drafting session on a GPU: ``docs/results/<target>/drafting-<date>/README.md``.

A session folder holds one sweep folder per configuration (``vllm bench serve`` point JSONs and
the server log) and ``runs.json``, the manifest written with the records: what each folder
served, its drafting (``num_speculative_tokens``, the synthetic acceptance length and its
source), which folder is the baseline, and a paragraph of provenance. The page puts every
configuration beside the baseline measured in the same session (ratios; a difference under
:data:`TIE` is called a tie: single runs of one command moved 20-40 % between machines,
``docs/results/h200/releases.md``), names the acceptance of every drafting row with its source,
and estimates the break-even acceptance length per drafting configuration
(:func:`lab.breakeven.break_even`; through the origin when one length was timed, said so).

    python -m tools.drafting_pages docs/results/h200/drafting-2026-12-04 [--write]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

from helpers.bench.results import load_results
from helpers.paths import REPO_ROOT
from lab.bench.stats import compare, spread
from lab.breakeven import break_even, plot_break_even, summary
from lab.tune.noise import SINGLE_RUN_TIE
from tools.weightless_routing import DUMMY_ROUTING, MEASURED

#: Said under every table of a session whose manifest has no ``"routing": "uniform"``: the
#: MoE routing of vLLM 0.32.0's dummy weights (benchmarks/dummy_moe_routing.py).
DUMMY_ROUTING_NOTE = (
    f"**MoE routing on these dummy weights.** {DUMMY_ROUTING}. A drafting step verifies K+1 "
    "tokens per request, which read more expert weights with real routing than on 0.32.0's "
    f"dummy weights: these drafting ratios are optimistic, more at K=7 than at K=3, {MEASURED}."
)
#: Ratios within this fraction of 1 are called a tie (one run per point): the tuning step's.
TIE = SINGLE_RUN_TIE
#: A point whose requests spent more than this share of their time in vLLM's waiting queue
#: (``queue_share``) ran fewer than its concurrency at once, and is marked so.
QUEUED_SHARE = 0.05
PLOT = "break-even.png"


def _caption(run: dict) -> str:
    """The acceptance a drafting run timed, with its source (the registry's caption form)."""
    return (
        f"synthetic acceptance {run['synthetic_acceptance_length']:g} at K={run['num_speculative_tokens']} "
        f"({run['source']}): speed at that acceptance, text not the model's"
    )


def load_session(session: Path) -> tuple[dict, pd.DataFrame]:
    """The manifest and one row per point of every run (columns of
    :func:`helpers.bench.results.load_results` plus ``run``, ``num_speculative_tokens`` and
    ``synthetic_acceptance_length`` from the manifest).

    Raises:
        FileNotFoundError: no ``runs.json``; BenchError: a run folder without points.
    """
    manifest = json.loads((session / "runs.json").read_text())
    frames = []
    for run in manifest["runs"]:
        df = load_results(session / run["folder"])
        frames.append(
            df.assign(
                run=run["folder"],
                num_speculative_tokens=run.get("num_speculative_tokens"),
                synthetic_acceptance_length=run.get("synthetic_acceptance_length"),
            )
        )
    return manifest, pd.concat(frames, ignore_index=True)


def _ratio(value: float, base: float, runs: pd.DataFrame, base_runs: pd.DataFrame) -> str:
    """``1.95x``, or ``0.87x, tie``: one run a side, a ratio within :data:`TIE` of 1 is a tie;
    repeats on both sides, one whose two points' runs overlap (:func:`lab.bench.stats.compare`,
    the notebooks' rule and the tuning step's)."""
    r = value / base
    if len(runs) > 1 and len(base_runs) > 1:
        sides = (spread(base_runs, "output_throughput"), spread(runs, "output_throughput"))
        tie = compare(base, value, sides=sides).winner is None
    else:
        tie = abs(r - 1) < TIE
    return f"{r:.2f}x" + (", tie" if tie else "")


def _ratio_at(points: pd.DataFrame, name: str, ref_name: str, c: int) -> str:
    """:func:`_ratio` of run ``name``'s mean output tok/s over run ``ref_name``'s at
    concurrency ``c``."""
    here = points[(points["run"] == name) & (points["concurrency"] == c)]
    there = points[(points["run"] == ref_name) & (points["concurrency"] == c)]
    return _ratio(float(here["output_throughput"].mean()), float(there["output_throughput"].mean()),
                  here, there)  # fmt: skip


def release_pairs(session: Path) -> list[dict]:
    """The pairs of one session that set two vLLM releases side by side: each run whose
    manifest names its ``release`` against its reference (:func:`_reference`) of another
    release. One dict per pair: ``releases`` (``"0.34.0 / 0.32.0"``), ``routing``
    (``"uniform"`` or ``"as loaded"``) and ``cells`` (per concurrency of the baseline,
    ``{c: "0.99x, tie"}``: ratio of means, a tie where the two points' runs overlap,
    :func:`_ratio_at`)."""
    manifest, points = load_session(session)
    runs = {r["folder"]: r for r in manifest["runs"]}
    base = manifest["baseline"]
    concs = sorted(int(c) for c in points.loc[points["run"] == base, "concurrency"].unique())
    pairs = []
    for name, run in runs.items():
        ref = runs.get(_reference(run, base))
        if name == base or not run.get("release") or ref.get("release") in (None, run["release"]):
            continue
        pairs.append({"cells": {c: _ratio_at(points, name, ref["folder"], c) for c in concs},
                      "releases": f"{run['release']} / {ref['release']}",
                      "routing": "uniform" if run.get("routing") == "uniform" else "as loaded"})  # fmt: skip
    return pairs


def _plot_caption(drafting: list[dict]) -> str:
    """The plot's provenance line: each source once, with the lengths taken from it."""
    by_source: dict[str, list[str]] = {}
    for r in drafting:
        by_source.setdefault(r["source"], []).append(
            f"{r['synthetic_acceptance_length']:g} ({r.get('fit') or r['label']})"
        )
    said = "; ".join(f"{', '.join(v)}: {k}" for k, v in by_source.items())
    return f"Synthetic acceptance {said}. Speed at that acceptance, text not the model's."


def _in_flight(run: dict, c: int, points: pd.DataFrame) -> int | None:
    """The most requests ``run``'s server ran at once at concurrency ``c`` when it held fewer
    than ``c``, else None: the manifest's ``in_flight`` (e.g. ``{"64": 15}``, read from the
    server log's ``Running: N reqs`` lines), else from the points' ``queue_share`` (vLLM's
    queue-time share, :func:`helpers.bench.metrics.queue_share`) above :data:`QUEUED_SHARE`:
    ``c x (1 - share)`` of the run that waited most."""
    n = run.get("in_flight", {}).get(str(c))
    if n is None and "queue_share" in points:
        share = points.loc[(points["run"] == run["folder"]) & (points["concurrency"] == c), "queue_share"].max()  # fmt: skip
        n = round(c * (1 - share)) if pd.notna(share) and share > QUEUED_SHARE else None
    return n if n is not None and n < c else None


def _queued(run: dict, c: int, points: pd.DataFrame) -> bool:
    """Whether ``run``'s point at ``c`` measured a queue rather than ``c`` requests: its
    server ran fewer than half of them at once (:func:`_in_flight`). Such a point is shown,
    marked, and left out of the break-even fit."""
    n = _in_flight(run, c, points)
    return n is not None and n < c / 2


def _fits(runs: dict, points: pd.DataFrame) -> list[tuple[str, list[dict], pd.DataFrame]]:
    """The break-even fits: runs sharing a manifest ``fit`` name are one line (several
    acceptance lengths of one K), every other drafting run its own (through the origin); a
    queued point (:func:`_queued`) is left out."""
    fits: dict[str, list[dict]] = {}
    for r in runs.values():
        if r.get("num_speculative_tokens"):
            fits.setdefault(r.get("fit") or r["label"], []).append(r)
    kept = points[[not _queued(runs[r], int(c), points) if r in runs else True
                   for r, c in zip(points["run"], points["concurrency"], strict=True)]]  # fmt: skip
    return [(name, rs, kept[kept["run"].isin([r["folder"] for r in rs])])
            for name, rs in fits.items()]  # fmt: skip


def _agent_lines(session: Path, agent: dict) -> list[str]:
    """The agent workload's table: one row per server and concurrency (one run each)."""
    lines = ["", f"**{agent['title']}** {agent['about']}", "",
             "| server | concurrency | prefix-cache hit rate | TTFT p50 (ms) | TTFT p99 (ms) | "
             "output tokens/s per user | output tokens/s |", "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for run in agent["runs"]:
        df = load_results(session / run["folder"])
        for row in df.sort_values("concurrency").itertuples():
            rate = getattr(row, "prefix_cache_hit_rate", float("nan"))
            hit = f"{rate:.0%}" if pd.notna(rate) else "caching off"
            lines.append(
                f"| {run['label']} | {row.concurrency} | {hit} | {row.median_ttft_ms:,.0f} | "
                f"{row.p99_ttft_ms:,.0f} | {row.tokens_per_s_per_user:,.0f} | "
                f"{row.output_throughput:,.0f} |"
            )
    return lines


BREAK_EVEN_HEAD = ("**Break-even acceptance length** (below it, drafting is slower than the median run of "
                   "the row it is compared with at that concurrency, its first row unless named; "
                   "`lab.breakeven`):")  # fmt: skip


def _routing_lines(manifest: dict) -> list[str]:
    """:data:`DUMMY_ROUTING_NOTE` unless every run ran with uniform routing
    (``VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random``): ``"routing": "uniform"`` on the
    manifest (every server), or on each run of it; or the session compares the two routings
    (``"routing": "compared"``: its page is what the note cites)."""
    uniform = all(r.get("routing", manifest.get("routing")) == "uniform" for r in manifest["runs"])
    return [] if uniform or manifest.get("routing") == "compared" else ["", DUMMY_ROUTING_NOTE]


def _reference(run: dict, base_name: str) -> str:
    """The run a row's ratios and break-even are against: its ``versus`` (e.g. MTP with uniform
    routing against the recipe with uniform routing), else the session's baseline."""
    return run.get("versus") or base_name


def _names_k(name: str, runs: list[dict]) -> bool:
    """Whether a fit's ``name`` already says its ``K=7`` (its lines then leave it out)."""
    return bool(re.search(rf"(?<![\w=])K={runs[0]['num_speculative_tokens']}(?!\d)", name))


def _drafting_lines(runs: dict, points: pd.DataFrame, base_name: str):
    """``(lines, fits, result)`` for the session's drafting runs: where each acceptance comes
    from and the break-even lengths (``lines``), :func:`_fits`, and one
    :func:`lab.breakeven.break_even` table for all of them (its ``series`` column names the
    fit; a fit of one length is through the origin; each against its runs' reference,
    :func:`_reference`)."""
    drafting = [r for r in runs.values() if r.get("num_speculative_tokens")]
    lines = ["", "Where each drafting row's acceptance comes from:", ""]
    lines += [f"- {r['label']}: {_caption(r)}." for r in drafting]
    fits = _fits(runs, points)
    results = []
    for name, rs, pts in fits:
        lengths = {r["synthetic_acceptance_length"] for r in rs}
        model = "line" if len(lengths) > 1 or len(rs[0].get("lengths", [1])) > 1 else "origin"
        ref = points[points["run"] == _reference(rs[0], base_name)]
        results.append(break_even(pts, ref, model=model).assign(series=name))
    result = pd.concat(results, ignore_index=True)
    lines += ["", BREAK_EVEN_HEAD, ""]
    for name, rs, _ in fits:
        named = _names_k(name, rs)  # "MTP K=7": its lines say "at concurrency 1", not "K=7 at ..."
        fit = result[result["series"] == name]  # summary says one line per row, in order
        for c, line in zip(fit["concurrency"], summary(fit, with_k=not named), strict=True):
            fewer = sorted({n for r in rs if (n := _in_flight(r, c, points))})
            said = f" (the drafting servers ran at most {fewer[-1]} at once)" if fewer else ""
            lines.append(f"- {name}{', ' if named else ': '}{line}{said}")
        queued: dict[int, int] = {}  # concurrency -> the most any of the fit's servers ran
        for r in rs:
            for c in map(int, points.loc[points["run"] == r["folder"], "concurrency"].unique()):
                if _queued(r, c, points):
                    queued[c] = max(queued.get(c, 0), _in_flight(r, c, points))
        head = f"- {name}, " if named else f"- {name}: K={rs[0]['num_speculative_tokens']} "
        lines += [f"{head}at concurrency {c}: not fitted: the drafting servers ran at most {n} requests at "
                  f"once (the rest waited in vLLM's queue), so their points measure a queue, not {c} requests"
                  for c, n in sorted(queued.items())]  # fmt: skip
    return lines, fits, result


def _table(runs: dict, points: pd.DataFrame, base_name: str) -> list[str]:
    """The output tokens/s table: a row per run, a column per concurrency of the baseline;
    a row's ratio is to the baseline, or to its ``versus`` run (named in the cell)."""
    concs = sorted(int(c) for c in points.loc[points["run"] == base_name, "concurrency"].unique())
    repeated = int(points.groupby(["run", "concurrency"]).size().max()) > 1
    lines = []
    head = (
        "| configuration | "
        + " | ".join(f"c={c}" for c in concs)
        + f" | TPOT c={concs[0]} (ms) | acceptance measured |"
    )
    if repeated:
        said = ("Output tokens/s per concurrency, the mean of each point's runs (their range in brackets), and "
                "the ratio of means to the first row: a ratio whose two points' runs overlap is a tie (every run "
                "of one beyond every run of the other, or no win):")  # fmt: skip
    else:
        said = (
            "Output tokens/s per concurrency (one run per point), and the ratio to the first row:"
        )
    lines += [said, "", head, "|---|" + "---:|" * (len(concs) + 2)]
    for name, run in runs.items():
        df = points[points["run"] == name]
        cells = []
        for c in concs:
            here = df[df["concurrency"] == c]
            v = float(here["output_throughput"].mean())
            lo, hi = here["output_throughput"].min(), here["output_throughput"].max()
            text = f"{v:,.0f}" + (f" [{lo:,.0f}-{hi:,.0f}]" if len(here) > 1 else "")
            ref_name = _reference(run, base_name)
            if name != base_name:
                vs = "" if ref_name == base_name else f" of {runs[ref_name]['label']}"
                n = _in_flight(run, c, points)
                vs += f", {n} in flight" if n else ""
                text += f" ({_ratio_at(points, name, ref_name, c)}{vs})"
            cells.append(text)
        acc = (
            df["spec_decode_acceptance_length"]
            if "spec_decode_acceptance_length" in df
            else pd.Series(dtype=float)
        )
        measured = f"{acc.min():.2f}-{acc.max():.2f}" if acc.notna().any() else "no drafting"
        tpot = float(df.loc[df["concurrency"] == concs[0], "median_tpot_ms"].mean())
        lines.append(f"| {run['label']} | " + " | ".join(cells) + f" | {tpot:.2f} | {measured} |")
    return lines


def drafting_markdown(session: Path, *, plot: bool = False) -> str:
    """The session's page (and, with ``plot``, its break-even plot beside it).

    A point measured more than once (a sweep point and its repeats) shows the mean of its
    runs with their range; ratios are of means. The manifest may add, per run, ``fit`` (runs
    of one K at several acceptance lengths fitted as one line), ``versus`` (the run its ratios
    and break-even are against instead of the baseline) and ``routing: uniform`` (it ran vLLM's
    uniform routing simulation; on the manifest: every run did), and ``agent`` (a table of the
    agent workload: ``title``, ``about``, ``runs`` of ``folder`` and ``label``) and
    ``notes`` (paragraphs after the break-even lines)."""
    manifest, points = load_session(session)
    runs = {r["folder"]: r for r in manifest["runs"]}
    base_name = manifest["baseline"]
    lines = [f"# {manifest['title']}", "", manifest["about"], ""]
    lines += _table(runs, points, base_name)
    lines += _routing_lines(manifest)
    drafting = [r for r in runs.values() if r.get("num_speculative_tokens")]
    if drafting:
        said, fits, result = _drafting_lines(runs, points, base_name)
        lines += said
        if plot:  # the fits against the first fit's reference: one baseline band a panel
            ref = _reference(fits[0][1][0], base_name)
            shown = [f for f in fits if _reference(f[1][0], base_name) == ref]
            series = pd.concat([pts.assign(series=n) for n, _, pts in shown], ignore_index=True)
            plot_break_even(
                series, points[points["run"] == ref],
                result[result["series"].isin([n for n, _, _ in shown])], session / PLOT,
                caption=_plot_caption([r for _, rs, _ in shown for r in rs]),
            )  # fmt: skip
        lines += ["", f"![break-even acceptance length]({PLOT})"]
    for note in manifest.get("notes", []):
        lines += ["", note]
    if manifest.get("agent"):
        lines += _agent_lines(session, manifest["agent"])
    if manifest.get("reading"):
        lines += ["", f"**Reading it.** {manifest['reading']}"]
    records = [f"`{r['folder']}/`" + (f" (`{r['notebook']}`)" if r.get("notebook") else "")
               for r in [*runs.values(), *manifest.get("agent", {}).get("runs", [])]]  # fmt: skip
    lines += [
        "",
        "Records: "
        + ", ".join(records)
        + f"; {manifest.get('logs', 'papermill logs in `logs/`')}.",
        "",
    ]
    return "\n".join(lines)


def measured_drafting(target: str, results_dir: Path | None = None) -> str | None:
    """The "drafting, measured" paragraph of ``target``'s section of ``docs/results/measured.md``
    (links as from ``notebooks/``): the newest session whose manifest lists ``target`` under
    ``targets``, its table, where each synthetic acceptance comes from and the break-even
    lengths; a target other than the session's ``measured_on`` is told so. Then the same for
    every session that lists ``target`` under ``line_for`` (a break-even line measured again,
    e.g. with uniform routing, or at other concurrencies), oldest first. None when no session
    applies."""
    root = results_dir or REPO_ROOT / "docs" / "results"

    def listing(key: str) -> list[Path]:  # oldest first: the folder names start with the date
        return sorted((s for s in root.glob("*/drafting-*/")
                       if target in json.loads((s / "runs.json").read_text()).get(key, [])),
                      key=lambda s: (s.name, s.parent.name))  # fmt: skip

    said = []
    for session, head in [*((s, "Drafting, measured") for s in listing("targets")[-1:]),
                          *((s, "The break-even line, measured again") for s in listing("line_for"))]:  # fmt: skip
        manifest, points = load_session(session)
        runs = {r["folder"]: r for r in manifest["runs"]}
        link = f"../docs/results/{session.relative_to(root).as_posix()}/README.md"
        elsewhere = manifest["measured_on"] != target
        lines = [f"**{head}** ([{session.name}]({link}): {manifest['summary']})"
                 + (f" Measured on {manifest['measured_on']}, not on this GPU: the same Hopper kernels, "
                    "so expect the ranking to hold, not the figures." if elsewhere else ""), ""]  # fmt: skip
        lines += _table(runs, points, manifest["baseline"])
        lines += _routing_lines(manifest)
        lines += _drafting_lines(runs, points, manifest["baseline"])[0]
        said.append("\n".join(lines))
    return "\n\n".join(said) or None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tools.drafting_pages", description=__doc__.splitlines()[0]
    )
    p.add_argument("session", type=Path)
    p.add_argument(
        "--write", action="store_true", help="write README.md and the plot into the folder"
    )
    args = p.parse_args(argv)
    session = args.session if args.session.is_absolute() else REPO_ROOT / args.session
    text = drafting_markdown(session, plot=args.write)
    if args.write:
        (session / "README.md").write_text(text)
        print((session / "README.md").relative_to(REPO_ROOT))
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
