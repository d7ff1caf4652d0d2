"""The page of one LoRA-overhead session: the table ``tools/device/lora_overhead_h200.py``'s
records make, for ``docs/results/<gpu>/lora-<date>/README.md``.

The records are the run's ``--out`` folder: ``summary.json`` (every point, measured or skipped
and why; each server's command and memory) and the points' ``vllm bench serve`` JSONs, one
folder of runs per point. The table has a row per server, adapters active and concurrency:
output tok/s as the median of the point's runs with their [min-max], the median of the runs'
p50 TPOT, and a ratio of medians: a LoRA server's against ``base-marlin`` at that concurrency
(LoRA's cost), ``base-marlin``'s against ``base`` (the Marlin MoE kernel's cost, the kernel
every LoRA server needs). A ratio whose two points' runs overlap is a tie
(:func:`lab.bench.stats.compare` with ``sides=``, the tuning step's and the drafting pages'
rule); otherwise every run of one is beyond every run of the other ("apart"); with one run on
either side, a ratio within 5 % of 1 is a tie (:data:`lab.tune.noise.SINGLE_RUN_TIE`). Under
it, each server's GPU memory at load (vLLM's "Model loading took": weights plus LoRA slots)
beside :func:`lab.adapters.check.lora_buffers`'s prediction.

    python -m tools.lora_pages OUT [--write]     # --write: OUT/README.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import pandas as pd

from helpers.bench.results import NOT_MEASURED_ON_STANDIN, load_results
from lab.bench.stats import compare, spread
from lab.tune.noise import SINGLE_RUN_TIE

#: The reference of each server's ratio: LoRA's cost against the Marlin base, the kernel's cost
#: against the recipe.
REFERENCE = {"base-marlin": "base", "lora-r8": "base-marlin", "lora-r32": "base-marlin"}


def load_runs(out: Path) -> tuple[dict, pd.DataFrame]:
    """The run's ``summary.json`` and one row per measured run: the columns of
    :func:`helpers.bench.results.load_results` plus ``server`` and ``active`` (adapters active).

    Raises:
        FileNotFoundError: no ``summary.json`` in ``out``.
        helpers.errors.BenchError: a point the summary calls measured has no run in its folder.
    """
    summary = json.loads((Path(out) / "summary.json").read_text())
    frames = [
        load_results(Path(out) / p["folder"]).assign(server=p["server"], active=p["active"])
        for p in summary.get("points", [])
        if p.get("status") == "measured"
    ]
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return summary, runs


def _runs(runs: pd.DataFrame, server: str, active: int, concurrency: int) -> pd.DataFrame:
    if runs.empty:
        return runs
    pick = (runs["server"] == server) & (runs["active"] == active)
    return runs[pick & (runs["concurrency"] == concurrency)]


def ratio(here: pd.DataFrame, ref: pd.DataFrame) -> tuple[float, bool, bool] | None:
    """``(ratio, tie, one_run)``: the ratio of two points' median output tok/s, whether it is a
    tie (their runs' ranges overlap, :func:`lab.bench.stats.compare` with ``sides=``; with a
    single run on either side no spread is measured, so within
    :data:`lab.tune.noise.SINGLE_RUN_TIE` of 1, the project's one-run rule) and whether a side
    had one run; None when either point is missing."""
    if here.empty or ref.empty:
        return None
    a, b = ref["output_throughput"].astype(float), here["output_throughput"].astype(float)
    r = float(b.median() / a.median())
    if len(a) < 2 or len(b) < 2:
        return r, abs(r - 1) < SINGLE_RUN_TIE, True
    sides = (spread(ref, "output_throughput"), spread(here, "output_throughput"))
    return r, compare(a.median(), b.median(), sides=sides).winner is None, False


def ratio_cell(here: pd.DataFrame, ref: pd.DataFrame, ref_name: str | None) -> str:
    """:func:`ratio` in words: ``0.87x of base-marlin, apart`` / ``0.98x of base-marlin, tie``,
    with one run a side ``1.12x of base-marlin, one run a side`` / ``0.98x of base-marlin, tie
    (one run a side)``; ``ref_name`` None leaves out ``of ...`` (``0.87x, apart``); an empty
    string when either point is missing."""
    got = ratio(here, ref)
    if got is None:
        return ""
    r, tie, one_run = got
    said = (
        ("tie (one run a side)" if tie else "one run a side")
        if one_run
        else ("tie" if tie else "apart")
    )
    return f"{r:.2f}x" + (f" of {ref_name}" if ref_name else "") + f", {said}"


def _tok_s(here: pd.DataFrame) -> str:
    v = here["output_throughput"].astype(float)
    return f"{v.median():,.0f}" + (f" [{v.min():,.0f}-{v.max():,.0f}]" if len(v) > 1 else "")


def _size(gib: float) -> str:
    """``6.71 GiB``, or ``2.0 MiB`` under a tenth of a GiB."""
    return f"{gib:.2f} GiB" if gib >= 0.1 else f"{gib * 1024:.1f} MiB"


def memory_line(summary: dict) -> str:
    """The GPU memory each server took at load ("Model loading took X GiB", vLLM 0.32.0's
    ``load_model``: the weights and, on a LoRA server, its slots; this process's allocations
    only, so a co-tenant's do not enter it), a LoRA server's excess over ``base-marlin`` beside
    :func:`lab.adapters.check.lora_buffers`'s prediction."""
    servers = summary.get("servers", {})
    memory = summary.get("memory", {})
    parts = []
    for name, rec in servers.items():
        gib = rec.get("model_loading_gib")
        text = f"{name} {gib:.2f} GiB" if gib is not None else f"{name} not logged"
        if name in memory:
            over, predicted = (
                memory[name].get("over_base_marlin_gib"),
                memory[name].get("predicted_gib"),
            )
            said = [f"{over:+.2f} GiB over base-marlin"] if over is not None else []
            if predicted is not None:
                said.append(f"`lora_buffers` predicts {_size(predicted)}")
            text += f" ({'; '.join(said)})" if said else ""
        parts.append(text)
    why = (" The CPU runner logs no such line (vllm/v1/worker/cpu_model_runner.py): on the "
           "stand-in the figures are missing." if summary.get("stand_in") else "")  # fmt: skip
    return ("**GPU memory at load** (vLLM's \"Model loading took\": weights, and a LoRA server's "
            "slots, allocated in the same measured step; a fixed KV cache, so the KV size no longer "
            f"shows them): {'; '.join(parts)}.{why}")  # fmt: skip


def provenance(out: Path, summary: dict) -> str:
    """Where and when: ``device.txt``'s lines (the GPU as ``nvidia-smi`` named it, the vLLM
    release), the run's start and end (UTC, ``summary.json``), each wave's time to ready, and
    the records the folder holds; an empty string when it says none of these."""
    out = Path(out)
    device = out / "device.txt"
    said = (
        [x.strip() for x in device.read_text().splitlines() if x.strip()]
        if device.is_file()
        else []
    )
    start, end = summary.get("started", ""), summary.get("ended", "")
    if start:
        said.append(f"run {start[:10]} {start[11:16]}-{end[11:16] or '?'} UTC")
    said += [f"wave {w['wave']} ({' + '.join(w['servers'])}) ready {w['start_s']} s after its start"
             for w in summary.get("waves", []) if w.get("start_s") is not None]  # fmt: skip
    if not said:
        return ""
    per_server = " and ".join(
        f"`{n}`" for n in ("command.sh", "vllm.log") if any(out.glob(f"*/{n}"))
    )
    records = ["`summary.json`", *([f"each server's {per_server}"] if per_server else []),
               "one folder of `vllm bench serve` JSONs per point",
               *(f"`{n}`" for n in ("run.log", "host.log", "device.txt") if (out / n).is_file())]  # fmt: skip
    return "**Run:** " + "; ".join(said) + ". Records here: " + ", ".join(records) + "."


def reading(summary: dict, runs: pd.DataFrame) -> list[str]:
    """What the table says, computed from it: per adapters active, the range of the LoRA
    servers' ratios to ``base-marlin`` and how many are ties; ``base-marlin`` against ``base``
    (the kernel's cost); then four adapters against one
    on the same server (vLLM 0.32.0 runs both through the same CUDA graphs, every slot
    allocated, so a gap is the per-request mixing of adapters). Empty when nothing compares."""
    lora = [s for s in summary.get("servers", {}) if s.startswith("lora-")]
    points = {(p["server"], p["active"], p["concurrency"]) for p in summary.get("points", [])
              if p.get("status") == "measured"}  # fmt: skip
    lines, cs = [], sorted({c for _, _, c in points})
    for active, what in ((0, "`--enable-lora`, no adapter in the batch"), (1, "one adapter active"),
                         (4, "four adapters active, round-robin")):  # fmt: skip
        cells = [ratio(_runs(runs, s, active, c), _runs(runs, "base-marlin", 0, c))
                 for s in lora for c in cs if (s, active, c) in points]  # fmt: skip
        cells = [cell for cell in cells if cell is not None]
        if cells:
            lo, hi = min(r for r, _, _ in cells), max(r for r, _, _ in cells)
            ties = sum(tie for _, tie, _ in cells)
            lines.append(
                f"- {what}: {lo:.2f}x-{hi:.2f}x of base-marlin over {len(cells)} points, {ties} of them ties."
            )
    kernel = [f"c={c} {ratio_cell(_runs(runs, 'base-marlin', 0, c), _runs(runs, 'base', 0, c), None)}"
              for c in cs if ("base-marlin", 0, c) in points and ("base", 0, c) in points]  # fmt: skip
    if kernel:
        lines.append("- Marlin's MoE kernel (what `--enable-lora` needs for NVFP4 experts) against the recipe's, "
                     "no LoRA: " + "; ".join(kernel) + ".")  # fmt: skip
    pairs = [f"{s} c={c} {ratio_cell(_runs(runs, s, 4, c), _runs(runs, s, 1, c), None)}"
             for s in lora for c in cs if (s, 4, c) in points and (s, 1, c) in points]  # fmt: skip
    if pairs:
        lines.append(
            "- four adapters against one on the same server (output tok/s): "
            + "; ".join(pairs)
            + "."
        )
    head = "**Reading** (ratios of medians; a tie where the runs overlap, or within 5 % with one run a side):"
    return [head, "", *lines] if lines else []


def lora_markdown(out: Path) -> str:
    """The session's page: provenance, the table (one row per server, adapters active and
    concurrency, in the summary's order of servers), what was skipped, the memory line.

    Raises:
        FileNotFoundError, helpers.errors.BenchError: as :func:`load_runs`.
    """
    summary, runs = load_runs(out)
    shape = summary.get("shape", {})
    stand_in = bool(summary.get("stand_in"))
    co = summary.get("co_tenant", {})
    flags = " ".join(f"{k} {v}" for k, v in co.get("flags", {}).items())
    title = "LoRA adapters' overhead" + (" (CPU stand-in rehearsal)" if stand_in else "")
    lines = [f"# {title}", ""]
    if stand_in:
        lines += ["The control flow rehearsed on the CPU stand-in with adapters of its shapes: "
                  "not a measurement of LoRA's cost.", ""]  # fmt: skip
    measured = provenance(out, summary)
    lines += [measured, ""] if measured else []
    routing = " ".join(f"{k}={v}" for k, v in summary.get("routing_env", {}).items())
    lines += [
        f"Co-tenant waves of two on one device ({flags or 'the CPU build'}; "
        f"{' '.join(f'{k}={v}' for k, v in co.get('env', {}).items())}; started "
        f"{co.get('stagger_s')} s apart), each server measured while the other idled; MoE routing "
        f"{summary.get('routing', 'as loaded')} on every server ({routing or 'no variable'}). "
        f"{shape.get('runs')} runs a point with fresh seeds (the same prompts on every server), "
        f"{shape.get('input_len')} tokens in, {shape.get('output_len')} out. Output tok/s is the "
        "median of a point's runs with their [min-max]; TPOT the median of the runs' p50; a "
        "ratio is of medians, against `base-marlin` for a LoRA server (LoRA's cost) and against "
        "`base` for `base-marlin` (the Marlin MoE kernel's cost), a tie where the two points' "
        "runs overlap (`lab.bench.stats.compare`).",
        "",
        "| server | adapters active | concurrency | output tok/s | TPOT p50 (ms) | ratio |",
        "|---|---:|---:|---:|---:|---|",
    ]
    points = summary.get("points", [])
    order = list(summary.get("servers", {}))
    keyed = sorted(points, key=lambda p: (order.index(p["server"]) if p["server"] in order
                                          else len(order), p["active"], p["concurrency"]))  # fmt: skip
    for p in keyed:
        name, active, c = p["server"], p["active"], p["concurrency"]
        head = f"| {name} | {active} | {c} | "
        if p.get("status") != "measured":
            lines.append(head + f"not measured ({p.get('status', 'no status')}) | | |")
            continue
        here = _runs(runs, name, active, c)
        tpot = (NOT_MEASURED_ON_STANDIN if stand_in
                else f"{statistics.median(here['median_tpot_ms'].astype(float)):.2f}")  # fmt: skip
        ref_name = REFERENCE.get(name)
        ratio = ratio_cell(here, _runs(runs, ref_name, 0, c), ref_name) if ref_name else ""
        lines.append(head + f"{_tok_s(here)} | {tpot} | {ratio} |")
    skipped = [f"wave {w['wave']} ({', '.join(w['servers'])}): {w['status']}"
               for w in summary.get("waves", []) if w.get("status") != "started"]  # fmt: skip
    if skipped:
        lines += ["", "Not started: " + "; ".join(skipped) + "."]
    said = reading(summary, runs)
    lines += ["", *said] if said else []
    lines += ["", memory_line(summary), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the page of ``OUT`` (or, with ``--write``, write it to ``OUT/README.md``); 0."""
    p = argparse.ArgumentParser(prog="python -m tools.lora_pages",
                                description=__doc__.splitlines()[0])  # fmt: skip
    p.add_argument("out", type=Path, help="the run's --out folder (summary.json and the points)")
    p.add_argument("--write", action="store_true", help="write README.md into the folder")
    args = p.parse_args(argv)
    text = lora_markdown(args.out)
    if args.write:
        (args.out / "README.md").write_text(text)
        print(args.out / "README.md")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
