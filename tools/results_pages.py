"""Committed measurements a notebook quotes: the "measured reference" paragraph of a target.

A notebook quotes a measurement only when it was taken on its own target:
:func:`measured_reference` renders it from the summary JSON files under
``docs/results/<target>/`` and the target notebook's own GPU sweeps (:func:`notebook_runs`:
the point JSONs under ``docs/results/<target>/vllm-<release>/<variant>-<moe kernel>/``).
Targets without such files get None (no paragraph). Used when the notebooks are built.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.results import load_results
from helpers.paths import REPO_ROOT
from tools.weightless_routing import DUMMY_ROUTING, MEASURED

RESULTS_DIR = REPO_ROOT / "docs" / "results"


def _fmt(value: float) -> str:
    return f"{value:,.0f}"


def summaries(target: str, results_dir: Path | None = None) -> list[dict]:
    """The committed ``summary-<variant>.json`` files of ``target`` (the main profile only:
    ``summary-<variant>-<profile>.json`` files are left out), sorted by variant."""
    folder = Path(results_dir or RESULTS_DIR) / target
    out = []
    for path in sorted(folder.glob("summary-*.json")):
        if path.stem.count("-") != 1:
            continue
        data = json.loads(path.read_text())
        data["_file"] = f"docs/results/{target}/{path.name}"
        out.append(data)
    return out


#: Where an executed target notebook's sweep is committed: ``vllm-<release>/<variant>-<moe kernel>``
#: under ``docs/results/<target>/`` (e.g. ``vllm-0.32.0/nvfp4-humming``).
_NOTEBOOK_RUN = re.compile(r"^vllm-(\d+\.\d+\.\d+)/(nvfp4|bf16)-([a-z_]+)$")
#: The same-session anchor of a newer release's run: ``vllm-<new>/anchor-vllm-<release>/...``.
_ANCHOR_RUN = re.compile(r"^vllm-[\d.]+/anchor-vllm-(\d+\.\d+\.\d+)/(nvfp4|bf16)-([a-z_]+)$")


def _first(points: pd.DataFrame, column: str) -> Any:
    """The first non-null value of ``column`` (None when the column is absent or empty)."""
    values = points[column].dropna() if column in points else ()
    return values.iloc[0] if len(values) else None


def notebook_runs(target: str, results_dir: Path | None = None) -> list[dict]:
    """The target notebook's own sweeps executed on the GPU and committed under
    ``docs/results/<target>/vllm-<release>/<variant>-<moe kernel>/``, or as a newer release's
    same-session anchor under ``vllm-<newer>/anchor-vllm-<release>/`` (one
    ``vllm bench serve --save-result`` JSON per concurrency).

    Returns one dict per run, the default vLLM release first (then newest first), variant
    and kernel in name order: ``release``, ``variant``, ``moe_backend``, ``folder`` (repo
    path), ``date`` (``YYYY-MM-DD``), ``uniform`` (the server log shows vLLM's uniform MoE
    routing simulation), ``input_len`` / ``output_len`` (tokens) and ``points``
    (a DataFrame from :func:`load_results`: ``concurrency``, ``output_throughput`` tok/s,
    ``median_ttft_ms``, ``mean_tpot_ms``, ...). An empty list when there are none.
    """
    root = Path(results_dir or RESULTS_DIR) / target
    default = _default_release()
    runs = []
    for folder in sorted([*root.glob("vllm-*/*/"), *root.glob("vllm-*/anchor-vllm-*/*/")]):
        rel = folder.relative_to(root).as_posix()
        m = _NOTEBOOK_RUN.match(rel) or _ANCHOR_RUN.match(rel)
        files = sorted(folder.glob("*-c*.json"))
        if not m or not files:
            continue
        points = load_results(files)
        date = json.loads(files[0].read_text()).get("date", "")
        runs.append(
            {
                "release": m.group(1),
                "variant": m.group(2),
                "moe_backend": m.group(3),
                "folder": f"docs/results/{target}/{folder.relative_to(root).as_posix()}",
                "date": f"{date[:4]}-{date[4:6]}-{date[6:8]}" if len(date) >= 8 else "",
                "uniform": (log := _server_log(folder)) is not None
                and _UNIFORM_ROUTING in log.read_text(errors="replace"),
                "input_len": _first(points, "input_len"),
                "output_len": _first(points, "output_len"),
                "points": points.sort_values("concurrency").reset_index(drop=True),
            }
        )
    runs.sort(
        key=lambda r: (
            r["release"] != default,
            [-x for x in _release_key(r["release"])],  # newest release first
            r["variant"],
            r["moe_backend"],
            r["folder"],
        )
    )
    return runs


def _notebook_lines(target: str, results_dir: Path | None) -> list[str]:
    """The measured-reference lines for :func:`notebook_runs` (empty when there are none)."""
    runs = notebook_runs(target, results_dir)
    if not runs:
        return []
    first = runs[0]
    cs = " / ".join(str(c) for c in first["points"]["concurrency"])
    dates = sorted({r["date"] for r in runs})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    lines = [
        f"- This notebook itself, executed by papermill on the GPU ({when}; weightless, "
        f"the recipe's command with the kernel named; {first['input_len']:.0f} in / "
        f"{first['output_len']:.0f} out, chat endpoint, one run per point), output tok/s at "
        f"concurrency {cs}:"
    ]
    for r in runs:
        p = r["points"]
        tok = " / ".join(_fmt(v) for v in p["output_throughput"])
        ttft = " / ".join(_fmt(v) for v in p["median_ttft_ms"])
        routing = ", uniform MoE routing" if r["uniform"] else ""
        lines.append(
            f"  - vLLM {r['release']}, {r['variant'].upper()}, {r['moe_backend']} MoE{routing}, "
            f"{r['date']}: {tok} (median TTFT {ttft} ms); source `{r['folder']}/`."
        )
    page = Path(results_dir or RESULTS_DIR) / target / "releases.md"
    if page.is_file():
        lines.append(
            f"  - Lines of different sessions do not compare: the same command measures "
            f"differently from one machine to the next. The releases compared on one machine, "
            f"and with the spread between sessions, are in "
            f"[docs/results/{target}/releases.md](../docs/results/{target}/releases.md)."
        )
    return lines


def measured_reference(target: str, results_dir: Path | None = None) -> str | None:
    """The "measured reference" paragraph for ``target`` (markdown lines without the
    leading ``# ``), or None when nothing was measured on that target.

    Each variant gives its vLLM version, endpoint, lengths, output tokens/s per
    concurrency, mean TPOT range, and the flags its run adapted (flag, value, what it
    became, why), all read from the summary JSON.
    """
    runs = summaries(target, results_dir)
    notebook = _notebook_lines(target, results_dir)
    if not runs and not notebook:
        return None
    root = Path(results_dir or RESULTS_DIR)
    page = next(
        (p for p in (f"{target}.md", f"{target}/releases.md") if (root / p).is_file()), None
    )
    head = "**Measured reference**" + (
        f" ([docs/results/{page}](../docs/results/{page}))" if page else ""
    )
    if runs:
        gpu = runs[0]["versions"].get("gpu", target).split(",")[0]
        head += f", the weightless architecture on {gpu}"
    lines = [head + ":"]
    for run in runs:
        table = sorted(run.get("table") or [], key=lambda r: r["concurrency"])
        if not table:
            continue
        v = run["versions"]
        cs = " / ".join(str(r["concurrency"]) for r in table)
        tok = " / ".join(_fmt(r["output_tok_s"]) for r in table)
        tpot = [r["mean_tpot_ms"] for r in table]
        lines.append(
            f"- {run['variant'].upper()} on vLLM {v.get('vllm')} (torch {v.get('torch')}, "
            f"{v.get('date_utc', '')[:10]}), 1024 in / 256 out, {run.get('endpoint') or 'chat'} endpoint: "
            f"{tok} output tok/s at concurrency {cs} (mean TPOT {min(tpot):.1f} to {max(tpot):.0f} ms); "
            f"source `{run['_file']}`."
        )
        for a in run.get("adaptations") or []:
            now = "dropped" if a.get("now") is None else f"replaced by `{a['now']}`"
            why = str(a.get("error", "")).split(" ... ")[0].split(". The target")[0]
            lines.append(
                f"  - adapted: `{a['flag']} {a['value']}` {now} ({a.get('stage')}: {why[:160]})"
            )
    return "\n".join(lines + notebook)


# --------------------------------------------------------------------------------------
# vLLM releases side by side: every committed GPU sweep of a target notebook
# --------------------------------------------------------------------------------------

#: A point of a target notebook's own sweep, ``<target>-<variant>-none[-<moe kernel>]-c<N>.json``
#: (speculative mode none), wherever its folder lies under ``docs/results/<target>/``.
_SWEEP_POINT = "{target}-*-none*-c*.json"
#: A drafting sweep of the same notebook (``speculative = "mtp"``), kept in an ``mtp/`` folder
#: beside the release run it pairs with: ``vllm-<release>[/anchor-vllm-<release>]/mtp/<variant>-<moe kernel>/``.
_DRAFTING_POINT = "{target}-*-mtp-c*.json"
#: The launch line's drafting configuration, as vLLM's server log writes it (quotes escaped).
_SPEC_CONFIG = re.compile(r"--speculative-config[ =](\{[^}]*\})")
_ENGINE_RELEASE = re.compile(r"Initializing a V1 LLM engine \(v(\d+\.\d+\.\d+)\)")
#: What vLLM logs when ``VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random`` is set
#: (``routing_simulator_router.py`` in 0.32.0 and 0.34.0): the helpers' weightless servers set it
#: since 2026-12-05, so such a sweep routes alike on every release.
_UNIFORM_ROUTING = "Simulating MoE routing using a uniform_random strategy"
#: When the helpers' weightless servers began to route uniformly (commit ae69928, UTC).
UNIFORM_SINCE = pd.Timestamp("2026-12-05 14:23")
_MOE_FLAG = re.compile(r"--moe-backend[ =]([a-z_]+)")
#: The concurrencies every GPU sweep of the target notebooks measures (its default
#: ``bench_concurrencies`` on a GPU).
RELEASE_CONCURRENCIES = (1, 16, 64, 256)


def _server_log(folder: Path) -> Path | None:
    """The vLLM server log of a sweep folder: its own ``server.log``, else the one log under
    ``../logs/`` (the layout of an executed notebook's outputs), else None."""
    own = folder / "server.log"
    if own.is_file():
        return own
    logs = sorted((folder.parent / "logs").glob("*.log"))
    return logs[0] if len(logs) == 1 else None


def sweep_runs(target: str, results_dir: Path | None = None) -> pd.DataFrame:
    """One row per point of every committed GPU sweep of ``target``'s notebook, whatever
    release and session measured it.

    A sweep is a folder of ``<target>-<variant>-none[-<moe kernel>]-c<N>.json`` files (``vllm bench serve
    --save-result``, one per concurrency), or of ``<target>-<variant>-mtp-c<N>.json`` files in
    an ``mtp/`` folder beside a release run (the notebook with ``speculative = "mtp"``). Its vLLM release and MoE kernel come from its server
    log (the engine's ``Initializing a V1 LLM engine (vX.Y.Z)`` line and the launch line's
    ``--moe-backend``) and otherwise from a ``vllm-<release>/<variant>-<moe kernel>`` folder
    name; both must agree where both exist.

    Returns:
        Columns ``release``, ``variant``, ``speculative`` (``"none"`` or ``"mtp"``),
        ``drafting`` (``""``, or the drafting configuration: :func:`_drafting_label`),
        ``moe_backend``, ``routing`` (``"uniform"`` when the
        server log shows vLLM's uniform routing simulation, ``"as loaded"`` (the dummy weights'
        own) when it does not; without a log, as loaded before :data:`UNIFORM_SINCE`, else
        ``"unknown"``), ``folder`` (repo path),
        ``session`` (the first folder under ``docs/results/<target>/``: one device session
        writes one), ``time`` (the point's ``date``, UTC), ``concurrency``, ``num_prompts``,
        ``input_len`` / ``output_len`` (tokens), ``output_throughput`` (tok/s),
        ``median_ttft_ms``, ``median_tpot_ms``, ``spec_decode_acceptance_length`` (tokens per
        target step; NaN without drafting); sorted by release, variant, speculative, kernel, time.

    Raises:
        ValueError: a sweep whose release or kernel cannot be read, or whose log and folder
            name disagree.
    """
    from lab.tune.noise import VLLM_DATE

    root = Path(results_dir or RESULTS_DIR) / target
    frames = []
    sweeps = {(p.parent, _SWEEP_POINT) for p in root.rglob(_SWEEP_POINT.format(target=target))}
    sweeps |= {(p.parent, _DRAFTING_POINT) for p in root.rglob("mtp/*/" + _DRAFTING_POINT.format(target=target))}  # fmt: skip
    for folder, pattern in sorted(sweeps):
        rel = folder.relative_to(root).as_posix()
        drafted = pattern == _DRAFTING_POINT
        name = rel.replace("/mtp/", "/") if drafted else rel  # named as the run it pairs with
        named = _NOTEBOOK_RUN.match(name) or _ANCHOR_RUN.match(name)
        if drafted and (not named or "/mtp/" not in rel):
            continue  # an mtp/ folder of a drafting session: its own page reads it
        release = kernel = None
        routing = None  # read from the server log, else from the date
        text, log = "", _server_log(folder)
        if log is not None:
            text = log.read_text(errors="replace")
            engine, flag = _ENGINE_RELEASE.search(text), _MOE_FLAG.search(text)
            routing = "uniform" if _UNIFORM_ROUTING in text else "as loaded"
            release, kernel = engine and engine.group(1), flag and flag.group(1)
        if named:
            if (release or named.group(1)) != named.group(1) or (kernel or named.group(3)) != (
                named.group(3)
            ):
                raise ValueError(
                    f"docs/results/{target}/{rel}: its server log says vLLM {release} with "
                    f"--moe-backend {kernel}, its folder name {named.group(1)} / "
                    f"{named.group(3)}; rename the folder."
                )
            release, kernel = named.group(1), named.group(3)
        if not release or not kernel:
            raise ValueError(
                f"docs/results/{target}/{rel}: no server log names its vLLM release and "
                "--moe-backend; add the run's server.log or name the folder "
                "vllm-<release>/<variant>-<moe kernel>."
            )
        files = sorted(folder.glob(pattern.format(target=target)))
        points = load_results(files, extra=("date", "spec_decode_acceptance_length"))
        variant = points["label"].str.split("-").str[1]
        speculative = points["label"].str.split("-").str[2]
        drafting = _drafting_label(text) if drafted else ""
        time = pd.to_datetime(points["date"], format=VLLM_DATE)
        if routing is None:  # no log: before the helpers routed uniformly, as loaded
            routing = "as loaded" if time.max() < UNIFORM_SINCE else "unknown"
        frames.append(
            points.assign(
                release=release,
                variant=variant,
                speculative=speculative,
                drafting=drafting,
                moe_backend=kernel,
                routing=routing,
                folder=f"docs/results/{target}/{rel}",
                session=rel.split("/")[0],
                time=time,
            )
        )
    if not frames:
        return pd.DataFrame()
    columns = [
        "release",
        "variant",
        "speculative",
        "drafting",
        "moe_backend",
        "routing",
        "folder",
        "session",
        "time",
        "concurrency",
        "num_prompts",
        "input_len",
        "output_len",
        "output_throughput",
        "median_ttft_ms",
        "median_tpot_ms",
        "spec_decode_acceptance_length",
    ]
    out = pd.concat(frames, ignore_index=True)[columns]
    return out.sort_values(
        ["release", "variant", "speculative", "moe_backend", "time", "concurrency"]
    ).reset_index(drop=True)


def _drafting_label(log_text: str) -> str:
    """``MTP K=3 at L = 2.77 (synthetic)`` from a server log's ``--speculative-config`` (the
    method, draft tokens K, and the acceptance length L of vLLM's synthetic rejection sampler
    when it ran); ``MTP (config not logged)`` without one."""
    found = _SPEC_CONFIG.search(log_text)
    if not found:
        return "MTP (config not logged)"
    from lab.synthetic_acceptance import of_config

    cfg = json.loads(found.group(1).replace('\\"', '"'))
    label = f"{cfg.get('method', 'mtp').upper()} K={cfg.get('num_speculative_tokens', '?')}"
    synthetic = of_config(cfg)
    return label + (f" at L = {synthetic.length:g} (synthetic)" if synthetic else "")


def _drafting_note(runs: pd.DataFrame) -> list[str]:
    """The paragraph (and a blank line) that says what a drafting row measured, none without."""
    drafted = runs[runs["drafting"] != ""]
    if drafted.empty:
        return []
    measured = drafted["spec_decode_acceptance_length"].dropna()
    span = (
        f" Measured: {measured.min():.2f}-{measured.max():.2f} tokens per target step "
        "(`spec_decode_acceptance_length`)."
        if not measured.empty
        else ""
    )
    return [
        'Rows marked `+ MTP` run the same notebook with `speculative = "mtp"`, the registry\'s '
        "MTP command as its server log gives it: K draft tokens, and where marked synthetic, "
        "vLLM's synthetic rejection sampler, which accepts drafts at the set mean length L "
        "whatever the weights (the registry's L for that K; `lab.synthetic_acceptance` names its "
        "source), so every release drafts alike." + span,
        "",
    ]


def _kind(variant: str, drafting: str) -> str:
    """``NVFP4`` for the recipe's sweep, ``NVFP4 + MTP K=3 at L = 2.77 (synthetic)`` for a
    drafting one (its :func:`_drafting_label`)."""
    return variant.upper() + (f" + {drafting}" if drafting else "")


def _release_key(release: str) -> list[int]:
    return [int(x) for x in release.split(".")]


def _cell(values: pd.Series, digits: int = 0) -> str:
    """``212`` for one run, ``218 (212-231)`` for several: the median and range over runs."""
    vals = sorted(values)

    def f(v: float) -> str:
        return f"{v:,.{digits}f}"

    if len(vals) == 1:
        return f(vals[0])
    return f"{f(pd.Series(vals).median())} ({f(vals[0])}-{f(vals[-1])})"


def same_session_pairs(runs: pd.DataFrame) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """Sweeps of two releases (same variant, MoE kernel and routing) measured in one device session: the
    same session folder and started within :data:`lab.tune.noise.MEASURED_APART_S` of each
    other. Each pair is (newer release, older release), each a frame of its points."""
    from lab.tune.noise import MEASURED_APART_S

    pairs = []
    sweeps = [g for _, g in runs.groupby("folder", sort=True)]
    for a in sweeps:
        for b in sweeps:
            ka, kb = a.iloc[0], b.iloc[0]
            same = ("variant", "drafting", "moe_backend", "routing", "session")
            if [ka[k] for k in same] != [kb[k] for k in same] or _release_key(
                ka["release"]
            ) <= _release_key(kb["release"]):
                continue
            if abs((a["time"].min() - b["time"].min()).total_seconds()) <= MEASURED_APART_S:
                pairs.append((a, b))
    return pairs


def _verdict(ratio: float, noise: float) -> str:
    """``faster`` / ``slower`` when the lead passes the noise in whole percent (as the page
    shows both), else ``tie (within noise)``."""
    if round(abs(ratio - 1) * 100) <= round(noise * 100):
        return "tie (within noise)"
    return "faster" if ratio > 1 else "slower"


def release_markdown(target: str, results_dir: Path | None = None) -> str | None:
    """The Markdown page that sets the vLLM releases side by side on ``target`` (None when no
    sweep of its notebook is committed): output tok/s and median TPOT per release, variant and
    MoE kernel at each concurrency (median and range over the sessions that measured it), then
    the ratios of each release pair measured in one session, a winner only beyond
    :data:`lab.tune.noise.SINGLE_RUN_TIE` (one run per point), and, for a release never
    measured beside the default in one session, the ratios of medians across sessions, a winner
    only beyond the larger of that and the spread between sessions (the same 0.32.0 command
    measured 212, 218 and 281 tok/s at c = 1 on three machines).

    Raises:
        ValueError: sweeps of different workloads (prompt / answer lengths) are compared.
    """
    from lab.tune.noise import SINGLE_RUN_TIE

    runs = sweep_runs(target, results_dir)
    if runs.empty:
        return None
    shapes = runs[["input_len", "output_len"]].drop_duplicates()
    if len(shapes) != 1:
        raise ValueError(
            f"the {target} sweeps measure different workloads ({shapes.to_dict('records')}); "
            "compare one workload."
        )
    default = _default_release()
    cs = [c for c in RELEASE_CONCURRENCIES if c in set(runs["concurrency"])]
    lines = [
        f"# vLLM releases side by side on {target}",
        "",
        f"Generated by `python -m tools.results_pages releases {target}` from every committed "
        f"sweep of `notebooks/{target}.ipynb` on the GPU (weightless: real kernels and shapes, "
        f"noise text; {runs['input_len'].iloc[0]:.0f} prompt / {runs['output_len'].iloc[0]:.0f} "
        "answer tokens, chat endpoint, `vllm bench serve` with 4 x c prompts per point, one run "
        "per point in each session). Do not edit by hand.",
        "",
        ROUTING_NOTE,
        "",
        *_drafting_note(runs),
        "## Output tok/s",
        "",
        "The median over the sessions that measured it, the range in brackets when more than one "
        "did; then p50 TPOT (ms) the same way.",
        "",
        "| variant, MoE kernel | vLLM | MoE routing | sessions | "
        + " | ".join(f"c = {c}" for c in cs)
        + " | "
        + " | ".join(f"TPOT c = {c}" for c in cs)
        + " |",
        "|---|---|---|---" + "|---:" * (2 * len(cs)) + "|",
    ]
    key = ["variant", "drafting", "moe_backend", "release", "routing"]  # a row per sweep kind
    sweeps = dict(list(runs.groupby(key)))
    order = sorted(
        sweeps,
        key=lambda k: (
            k[4],
            k[0] != "nvfp4",
            k[1] != "",
            k[2],
            k[3] != default,
            [-x for x in _release_key(k[3])],
        ),
    )
    for variant, spec, kernel, release, routing in order:
        g = sweeps[variant, spec, kernel, release, routing]
        dates = ", ".join(sorted({f"{t:%Y-%m-%d}" for t in g.groupby("folder")["time"].min()}))
        tok = [_cell(g[g["concurrency"] == c]["output_throughput"]) for c in cs]
        tpot = [_cell(g[g["concurrency"] == c]["median_tpot_ms"], 1) for c in cs]
        mark = " (default)" if release == default else ""
        lines.append(
            f"| {_kind(variant, spec)}, {kernel} | {release}{mark} | {routing} | {dates} | "
            + " | ".join(tok + tpot)
            + " |"
        )
    pairs = sorted(same_session_pairs(runs), key=lambda p: p[0].iloc[0]["drafting"] != "")
    lines += [
        "",
        "## Within one session",
        "",
        f"Output tok/s of the newer release over the older, each point one run on the same "
        f"machine; a difference within {SINGLE_RUN_TIE:.0%} is a tie (one run per point: "
        "`lab.tune.noise.SINGLE_RUN_TIE`).",
        "",
    ]
    if not pairs:
        lines.append("No two releases were measured in one session yet.")
    else:
        lines += [
            "| variant, MoE kernel | session | releases | MoE routing | "
            + " | ".join(f"c = {c}" for c in cs)
            + " |",
            "|---|---|---|---" + "|---" * len(cs) + "|",
        ]
        for new, old in pairs:
            cells = _ratio_cells(new, old, cs, across=False)
            k = new.iloc[0]
            lines.append(
                f"| {_kind(k['variant'], k['drafting'])}, {k['moe_backend']} | {k['session']} "
                f"({new['time'].min():%Y-%m-%d %H:%M}) | {k['release']} / {old.iloc[0]['release']} | "
                f"{k['routing']} | " + " | ".join(cells) + " |"
            )
    lines += equal_routing_lines(results_dir)
    lines += [
        "",
        f"## Across sessions, against the default release {default}",
        "",
        "For a release not measured beside the default in one session: the ratio of medians, a "
        f"winner only when it passes the larger of {SINGLE_RUN_TIE:.0%} and the spread between "
        "sessions of either side ((max - min) / median, in brackets).",
        "",
        "| variant, MoE kernel | vLLM / "
        + default
        + " | MoE routing | "
        + " | ".join(f"c = {c}" for c in cs)
        + " |",
        "|---|---|---" + "|---" * len(cs) + "|",
    ]
    beside = {tuple(new.iloc[0][key]) for new, old in pairs if old.iloc[0]["release"] == default}
    for variant, spec, kernel, release, routing in order:
        if release == default:
            continue
        head = f"| {_kind(variant, spec)}, {kernel} | {release} | {routing} | "
        if (variant, spec, kernel, release, routing) in beside:
            lines.append(
                head + f"measured beside {default} in one session: the table above decides |"
                + " |" * (len(cs) - 1)
            )  # fmt: skip
            continue
        ref = sweeps.get((variant, spec, kernel, default, routing))
        if ref is None:
            continue
        cells = _ratio_cells(sweeps[variant, spec, kernel, release, routing], ref, cs, across=True)
        lines.append(head + " | ".join(cells) + " |")
    sources = sorted(set(runs["folder"]))
    lines += ["", "Sources: " + ", ".join(f"`{s}/`" for s in sources) + "."]
    return "\n".join(lines) + "\n"


def equal_routing_lines(results_dir: Path | None = None) -> list[str]:
    """The section "At equal MoE routing": every routing session on any GPU
    (``docs/results/<gpu>/routing-<date>/``, :func:`tools.drafting_pages.release_pairs`) that
    ran two releases, a row per pair: the newer release over the older at each concurrency,
    3 runs a point, a tie where the two points' runs overlap. Empty when none did."""
    from tools.drafting_pages import release_pairs

    root = results_dir or REPO_ROOT / "docs" / "results"
    rows = []
    for session in sorted(root.glob("*/routing-*/")):
        gpu = session.parent.name.upper()
        rows += [(gpu, session, pair) for pair in release_pairs(session)]
    if not rows:
        return []
    cs = sorted({c for _, _, pair in rows for c in pair["cells"]})
    lines = [
        "",
        "## At equal MoE routing, within one session",
        "",
        "Output tok/s of the newer release over the older: the recipe's NVFP4 command with "
        "Humming on the weightless architecture, a fixed 4 GiB KV cache, 3 runs per point "
        "(`tools/device/drafting_h200.py`); a ratio whose two points' runs overlap is a "
        "tie. With uniform routing (`VLLM_MOE_ROUTING_SIMULATION_STRATEGY="
        "uniform_random`) both releases route alike, so the row compares their code; as loaded "
        "it compares their dummy fills as well.",
        "",
        "| GPU | session | releases | MoE routing | " + " | ".join(f"c = {c}" for c in cs) + " |",
        "|---|---|---|---" + "|---" * len(cs) + "|",
    ]
    for gpu, session, pair in rows:
        where = session.relative_to(root).as_posix()
        lines.append(
            f"| {gpu} | [{where}](../{where}/README.md) | {pair['releases']} | {pair['routing']} | "
            + " | ".join(pair["cells"].get(c, "—") for c in cs)
            + " |"
        )
    return lines


def _ratio_cells(new: pd.DataFrame, old: pd.DataFrame, cs: list[int], *, across: bool) -> list[str]:
    """Per concurrency in ``cs``: the median output tok/s of ``new`` over ``old`` and its verdict
    (``—`` where either lacks the point). Within one session (``across=False``) the noise is
    :data:`lab.tune.noise.SINGLE_RUN_TIE`; across sessions also the spread between
    sessions of either side, shown in brackets."""
    from lab.tune.noise import SINGLE_RUN_TIE

    cells = []
    for c in cs:
        a = new[new["concurrency"] == c]["output_throughput"]
        b = old[old["concurrency"] == c]["output_throughput"]
        if a.empty or b.empty:
            cells.append("—")
            continue
        r = float(a.median() / b.median())
        noise = max(SINGLE_RUN_TIE, _spread(a), _spread(b)) if across else SINGLE_RUN_TIE
        cells.append(f"{r:.2f}x {_verdict(r, noise)}" + (f" (noise {noise:.0%})" if across else ""))
    return cells


def _spread(values: pd.Series) -> float:
    """(max - min) / median of a point's runs; 0 for one run."""
    return float((values.max() - values.min()) / values.median()) if len(values) > 1 else 0.0


#: Said on the page before any ratio (tools.weightless_routing).
ROUTING_NOTE = (
    "**The releases' weightless rows above one request are not the same experiment.** "
    f"{DUMMY_ROUTING}. A step of many requests on 0.33.0 reads several times the expert weights "
    "it reads on 0.32.0, and that, not its code, made 0.33.0 measure slower at c = 16 below "
    "(shown on 0.34.0, which keeps 0.33.0's fill; 0.33.0 itself was not re-run, and its c = 64 "
    "and 256 as loaded are not explained by routing alone), "
    f"{MEASURED}. So above one request the rows routed as loaded compare two dummy fills, not "
    "two releases' code; the rows with uniform MoE routing (vLLM's simulation, which the "
    'weightless servers set since 2026-12-05) and the section "At equal MoE routing" compare '
    "the code. c = 1 (6 experts on every release) compares as it stands."
)


def _default_release() -> str:
    from helpers.config.load import shared_registry

    return str(shared_registry().model.default_vllm_version)


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.results_pages releases TARGET [--write]``: print the releases page of
    TARGET, or with ``--write`` write it to ``docs/results/TARGET/releases.md``. Exit 2 when
    nothing of TARGET's notebook was measured on a GPU."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m tools.results_pages")
    parser.add_argument("page", choices=["releases"])
    parser.add_argument("target")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    text = release_markdown(args.target)
    if text is None:
        print(f"no GPU sweep of notebooks/{args.target}.ipynb is committed", file=sys.stderr)
        return 2
    if args.write:
        path = RESULTS_DIR / args.target / "releases.md"
        path.write_text(text)
        print(path.relative_to(REPO_ROOT))
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
