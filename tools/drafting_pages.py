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
from pathlib import Path

import pandas as pd

from helpers.bench.results import load_results
from helpers.paths import REPO_ROOT
from lab.breakeven import break_even, plot_break_even, summary

#: Ratios within this fraction of 1 are called a tie (one run per point).
TIE = 0.05
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


def _ratio(value: float, base: float) -> str:
    r = value / base
    return f"{r:.2f}x" + (", tie" if abs(r - 1) < TIE else "")


def drafting_markdown(session: Path, *, plot: bool = False) -> str:
    """The session's page (and, with ``plot``, its break-even plot beside it)."""
    manifest, points = load_session(session)
    runs = {r["folder"]: r for r in manifest["runs"]}
    base_name = manifest["baseline"]
    base = points[points["run"] == base_name].set_index("concurrency")
    concs = sorted(int(c) for c in base.index)
    lines = [f"# {manifest['title']}", "", manifest["about"], ""]
    head = (
        "| configuration | "
        + " | ".join(f"c={c}" for c in concs)
        + " | TPOT c=1 (ms) | acceptance measured |"
    )
    lines += ["Output tokens/s per concurrency (one run per point), and the ratio to the first row:", "", head,
              "|---|" + "---:|" * (len(concs) + 2)]  # fmt: skip
    for name, run in runs.items():
        df = points[points["run"] == name].set_index("concurrency")
        cells = []
        for c in concs:
            v = float(df.loc[c, "output_throughput"])
            cells.append(
                f"{v:,.0f}"
                + (
                    ""
                    if name == base_name
                    else f" ({_ratio(v, float(base.loc[c, 'output_throughput']))})"
                )
            )
        acc = (
            df["spec_decode_acceptance_length"]
            if "spec_decode_acceptance_length" in df
            else pd.Series(dtype=float)
        )
        measured = f"{acc.min():.2f}-{acc.max():.2f}" if acc.notna().any() else "no drafting"
        lines.append(
            f"| {run['label']} | "
            + " | ".join(cells)
            + f" | {float(df.loc[concs[0], 'median_tpot_ms']):.2f} | {measured} |"
        )
    drafting = [r for r in runs.values() if r.get("num_speculative_tokens")]
    if drafting:
        lines += ["", "Where each drafting row's acceptance comes from:", ""]
        lines += [f"- {r['label']}: {_caption(r)}." for r in drafting]
        pts = points[points["run"].isin([r["folder"] for r in drafting])]
        result = pd.concat(
            [break_even(pts[pts["run"] == r["folder"]], base.reset_index(),
                        model="line" if len(r.get("lengths", [1])) > 1 else "origin").assign(run=r["folder"])
             for r in drafting], ignore_index=True)  # fmt: skip
        lines += ["", "**Break-even acceptance length** (below it, drafting is slower than the first row at that "
                  "concurrency; `lab.breakeven`):", ""]  # fmt: skip
        for r in drafting:
            for line in summary(result[result["run"] == r["folder"]]):
                lines.append(f"- {r['label']}: {line}")
        if plot:
            plot_break_even(pts, base.reset_index(), result, session / PLOT,
                            caption="; ".join(_caption(r) for r in drafting))  # fmt: skip
        lines += ["", f"![break-even acceptance length]({PLOT})"]
    if manifest.get("reading"):
        lines += ["", f"**Reading it.** {manifest['reading']}"]
    lines += ["", "Records: " + ", ".join(f"`{r['folder']}/`" + (f" (`{r['notebook']}`)" if r.get("notebook") else "")
                                       for r in runs.values()) + "; papermill logs in `logs/`.", ""]  # fmt: skip
    return "\n".join(lines)


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
