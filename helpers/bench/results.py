"""Benchmark results: the points ``vllm bench serve`` saved (``--save-result`` JSON, never
rewritten) plus the cookbook's sidecar of ``/metrics`` notes (:func:`annotate_point`), loaded
into pandas (:func:`load_results`; vLLM's terms ``ttft``, ``tpot``, ``itl``, ``e2el``, in ms).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.metrics import (
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    _num,
    acceptance_from_counters,
    acceptance_verdict,
    queue_share,
    spec_decode_counters,
)
from helpers.config.run import serves_standin
from helpers.errors import BenchError

_LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
_LATENCY_STATS = ("mean", "median", "p99")

#: Column order of :func:`load_results`; optional columns appear only when some point has them.
COLUMNS = [
    *("label", "concurrency", "num_prompts", "input_len", "output_len", "gpu_count"),
    *("completed", "failed", "duration_s", "request_throughput", "output_throughput"),
    *("total_token_throughput", "output_throughput_per_gpu", "tokens_per_s_per_user"),
    *("e2e_tokens_per_s_per_user", "request_goodput"),
    *[f"{stat}_{m}_ms" for m in _LATENCY_METRICS for stat in _LATENCY_STATS],
    *("spec_decode_acceptance_rate", "spec_decode_acceptance_length"),
    *("spec_decode_level", "spec_decode_verdict", "prefix_cache_hit_rate", "prefix_cache_hits"),
    *("prefix_cache_queries", "prefix_cache_warning", "queue_share", "queue_warning"),
    *("replicas", "replicas_serving", "replica_warning", "path"),
]
#: Columns left out when no point has them: the goodput (measured with an SLO only) and every
#: column after the latencies but ``path``.
_OPTIONAL_COLUMNS = {"request_goodput", *COLUMNS[COLUMNS.index("spec_decode_acceptance_rate") : -1]}

#: Appended to a point's JSON file name for its sidecar of cookbook annotations.
SIDECAR_SUFFIX = ".annotations"


def sidecar_path(path: str | Path) -> Path:
    """The annotations sidecar of a point's JSON: ``c4.json`` -> ``c4.json.annotations``."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def prefix_cache_warning(
    prefix_len: int, queries: float, hits: float, cache_config: Mapping[str, str] | None = None
) -> str | None:
    """Why a point whose prompts share a prefix got no prefix-cache hit, or None. vLLM reuses
    whole KV blocks only (``vllm/v1/core/kv_cache_utils.py``), and for a hybrid Mamba model
    vLLM 0.32.0 enlarges the block to hold a Mamba state (``Platform._align_hybrid_block_size``,
    ``vllm/platforms/interface.py``: 2,128 tokens for NVFP4 on the H200, 1,072 for BF16), so a
    shared prefix shorter than one block never hits.

    Args:
        prefix_len: tokens every prompt of the point shares (``--random-prefix-len``).
        queries, hits: prefix-cache tokens queried and hit during the point
            (``vllm:prefix_cache_queries_total`` / ``..._hits_total`` deltas).
        cache_config: the labels of ``vllm:cache_config_info``
            (:func:`helpers.bench.metrics.info_labels`): ``enable_prefix_caching``,
            ``block_size``; None or ``{}`` when the scrape had none.

    Returns:
        One sentence naming the cause and the fix when ``prefix_len > 0`` and nothing hit;
        None otherwise.
    """
    if not prefix_len or prefix_len <= 0 or hits > 0:
        return None
    info = dict(cache_config or {})
    shared = f"the prompts share a {int(prefix_len):,}-token prefix but no prefix-cache block hit"
    if info.get("enable_prefix_caching") == "False" or (not info and queries <= 0):
        return (
            f"{shared}: no prefix caching on this server (it runs without prefix caching: "
            "--no-enable-prefix-caching, or a build that turns it off), so every prompt is "
            "prefilled in full; serve with --enable-prefix-caching to measure a cached prefix"
        )
    try:
        block = int(info.get("block_size", ""))
    except ValueError:
        block = 0
    if block and prefix_len < block:
        return (
            f"{shared}: it is shorter than one KV block ({block:,} tokens: a hybrid Mamba "
            "model's attention block is enlarged to hold one Mamba state page), and prefix "
            "caching reuses whole blocks only, so a prefix under one block never hits; share "
            f"at least {block:,} tokens (prefix_len), or read this hit rate as expected"
        )
    return (
        f"{shared} although prefix caching is on"
        + (f" (block {block:,} tokens)" if block else "")
        + ": check that the prompts really start with the same tokens (the chat template "
        "comes first) and that max_model_len is above the block size"
    )


def annotate_point(
    path: str | Path,
    before: Mapping[str, float],
    after: Mapping[str, float],
    cache_config: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write what two ``/metrics`` scrapes around a point add to it into its sidecar
    (:func:`sidecar_path`, JSON; none when there is nothing to add; vLLM's JSON is left as is).

    Written: the :func:`helpers.bench.metrics.acceptance_from_counters` figures vLLM's JSON
    lacks (``"spec_decode_source": "metrics_scrape"`` when it had no acceptance length) and the
    merged point's :func:`~helpers.bench.metrics.acceptance_verdict`;
    ``cookbook_prefix_cache_hit_rate`` (0-1) with ``cookbook_prefix_cache_hits`` and
    ``..._queries`` (tokens: the ``vllm:prefix_cache_hits_total`` / ``..._queries_total``
    deltas; vLLM 0.32.0 counts each new request's prompt tokens as queries and its cached
    tokens as hits, ``PrefixCacheStats.record``, ``vllm/v1/metrics/stats.py``) when the cache
    was queried; ``cookbook_prefix_cache_warning`` (:func:`prefix_cache_warning`);
    ``cookbook_queue_share`` (:func:`~helpers.bench.metrics.queue_share`) and, above one half,
    ``cookbook_queue_warning``.

    Args:
        path: the point's ``--save-result`` JSON.
        before, after: :func:`helpers.bench.metrics.parse_prometheus` of the scrapes.
        cache_config: the server's ``vllm:cache_config_info`` labels
            (:func:`helpers.bench.metrics.info_labels`), for the warning's cause.
        extra: more ``cookbook_*`` notes to store (e.g. a fleet's replicas serving during
            the point, from :func:`helpers.bench.sweep.sweep`).

    Returns:
        The annotations written (``{}`` when none).
    """
    path = Path(path)
    data = json.loads(path.read_text())
    notes: dict[str, Any] = {}
    acc = acceptance_from_counters(spec_decode_counters(before), spec_decode_counters(after))
    if acc:
        if data.get("spec_decode_acceptance_length") is None:
            notes["spec_decode_source"] = "metrics_scrape"
        for key, value in acc.items():  # the counter deltas; vLLM's own keys stay
            if data.get(key) is None:
                notes[key] = value
        notes.update(acceptance_verdict({**data, **notes}))  # judged on what the row shows
    queries = after.get(PREFIX_CACHE_QUERIES, 0.0) - before.get(PREFIX_CACHE_QUERIES, 0.0)
    hits = 0.0
    if queries > 0:
        hits = after.get(PREFIX_CACHE_HITS, 0.0) - before.get(PREFIX_CACHE_HITS, 0.0)
        notes["cookbook_prefix_cache_hit_rate"] = hits / queries
        notes["cookbook_prefix_cache_hits"] = int(hits)
        notes["cookbook_prefix_cache_queries"] = int(queries)
    prefix_len = int(_num(data.get("prefix_len")) or 0)
    warning = prefix_cache_warning(prefix_len, queries, hits, cache_config)
    if warning:
        notes["cookbook_prefix_cache_warning"] = warning
    share, c = queue_share(before, after), _num(data.get("max_concurrency"))
    if share is not None:
        notes["cookbook_queue_share"] = round(share, 3)
    if share is not None and c and share > 0.5:  # most of the requests' time waiting: a queue
        notes["cookbook_queue_warning"] = f"requests spent {share:.0%} of their time in vLLM's waiting queue: on average at most about {c * (1 - share):.0f} ran at once, not {c:.0f}, so this point measures a queue; the server's KV cache or --max-num-seqs holds fewer (raise --kv-cache-memory-bytes / --gpu-memory-utilization, or lower the concurrency)"  # fmt: skip
    notes.update({k: v for k, v in (extra or {}).items() if k not in data})
    if notes:
        sidecar_path(path).write_text(json.dumps(notes, indent=1))
    return notes


def read_point(path: str | Path) -> dict[str, Any]:
    """One point: vLLM's JSON with its sidecar's annotations (:func:`annotate_point`) on top.

    Raises:
        BenchError: the file (or its sidecar) is not JSON, or the file is not a
            ``vllm bench serve`` result.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise BenchError(f"{path} is not JSON ({e}); remove it or rerun the point.") from e
    if not isinstance(data, dict) or "completed" not in data:
        raise BenchError(
            f"{path} is not a vllm bench serve result (no 'completed' key). Keep only "
            "--save-result JSON files in the folder, or pass the files explicitly."
        )
    side = sidecar_path(path)
    if side.is_file():
        try:
            notes = json.loads(side.read_text())
        except ValueError as e:
            raise BenchError(
                f"{side} is not JSON ({e}); delete it (the point stays usable)."
            ) from e
        data.update(notes)  # annotate_point never writes a key vLLM's JSON has
    return data


NOT_MEASURED_ON_STANDIN = "n/a (CPU stand-in)"


def _standin_unmeasurable(column: str) -> bool:
    """Per-token timing columns: on 2 shared CPU cores tokens arrive in bursts, so TPOT and
    ITL read near zero (measured on the stand-in: median TPOT 0.0046 ms, p50 ITL 0 ms), and
    so does the per-user speed derived from TPOT."""
    return "_tpot_" in column or "_itl_" in column or column == "tokens_per_s_per_user"


#: The columns a notebook shows of a sweep (:func:`results_table`'s default); the per-user
#: speed is end-to-end on the stand-in (see :func:`helpers.bench.plots.plot_sweep`).
TABLE_COLUMNS = (
    "concurrency", "completed", "failed", "output_throughput", "tokens_per_s_per_user",
    "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
    "spec_decode_acceptance_length", "spec_decode_verdict", "prefix_cache_hit_rate",
)  # fmt: skip
#: Decimals :func:`results_table` keeps per column (others: 1, tokens/s and ms).
_TABLE_DECIMALS = {"prefix_cache_hit_rate": 3}


def results_table(
    results: pd.DataFrame, columns: Sequence[str] | None = None, *, run: Any = None
) -> pd.DataFrame:
    """The ``columns`` present of a results DataFrame (default :data:`TABLE_COLUMNS`), rounded
    to 0.1 (tokens/s, ms; the prefix-cache hit rate, 0-1, to 0.001). When ``run`` (a server, its ``srv.run`` or a
    :class:`helpers.config.run.Run`; None: a GPU) serves the stand-in, the per-user speed is
    end-to-end and per-token timing columns hold :data:`NOT_MEASURED_ON_STANDIN`.
    """
    stand_in = serves_standin(run)
    if columns is None:
        per_user = "e2e_tokens_per_s_per_user" if stand_in else "tokens_per_s_per_user"
        columns = [per_user if c == "tokens_per_s_per_user" else c for c in TABLE_COLUMNS]
    table = results[[c for c in columns if c in results.columns]].copy()
    table = table.round({c: _TABLE_DECIMALS.get(c, 1) for c in table.columns})
    if stand_in:
        for c in table.columns:
            if _standin_unmeasurable(c):
                table[c] = NOT_MEASURED_ON_STANDIN
    return table


# --------------------------------------------------------------------------- loading


def _json_paths(paths_or_dir: str | Path | Iterable[str | Path]) -> list[Path]:
    items = [paths_or_dir] if isinstance(paths_or_dir, (str, Path)) else list(paths_or_dir)
    found: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found += sorted(
                q
                for q in p.rglob("*.json")
                if not q.name.endswith(".pytorch.json")
                # a sweep's private stage (.partial-*) and other hidden entries are not results
                and not any(part.startswith(".") for part in q.relative_to(p).parts)
            )
        elif p.is_file():
            found.append(p)
        else:
            raise BenchError(f"No benchmark result at {p}. Pass a JSON file or a folder of them.")
    return found


#: Columns read as numbers from a point's JSON or its sidecar: ``{column: key}``.
_NUMBERS = {
    "input_len": "input_len", "output_len": "output_len", "duration_s": "duration",
    "request_throughput": "request_throughput", "total_token_throughput": "total_token_throughput",
    "request_goodput": "request_goodput",
    "spec_decode_acceptance_rate": "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length": "spec_decode_acceptance_length",
    "prefix_cache_hit_rate": "cookbook_prefix_cache_hit_rate",
    "prefix_cache_hits": "cookbook_prefix_cache_hits",
    "prefix_cache_queries": "cookbook_prefix_cache_queries", "queue_share": "cookbook_queue_share",
    **{f"{stat}_{m}_ms": f"{stat}_{m}_ms" for m in _LATENCY_METRICS for stat in _LATENCY_STATS},
}  # fmt: skip
#: Columns read as they are: ``{column: key}``.
_AS_IS = {
    "concurrency": "max_concurrency", "num_prompts": "num_prompts", "completed": "completed",
    "failed": "failed", "prefix_cache_warning": "cookbook_prefix_cache_warning",
    "replicas": "cookbook_replicas", "replicas_serving": "cookbook_replicas_serving",
    "replica_warning": "cookbook_replica_warning", "queue_warning": "cookbook_queue_warning",
}  # fmt: skip


def _row(data: Mapping[str, Any], path: Path, extra: Sequence[str] = ()) -> dict[str, Any]:
    gpu_count = _num(data.get("gpu_count")) or 1.0
    tput, tpot, e2el, total, done = (
        _num(data.get(k))
        for k in ("output_throughput", "mean_tpot_ms", "mean_e2el_ms", "total_output_tokens", "completed")
    )  # fmt: skip
    verdict = acceptance_verdict(data)
    return {
        **{column: _num(data.get(key)) for column, key in _NUMBERS.items()},
        **{column: data.get(key) for column, key in _AS_IS.items()},
        "label": data.get("label") or path.parent.name,
        "gpu_count": int(gpu_count),
        "output_throughput": tput,
        "output_throughput_per_gpu": tput / gpu_count if tput is not None else None,
        "tokens_per_s_per_user": 1000.0 / tpot if tpot else None,
        "e2e_tokens_per_s_per_user": total / done / (e2el / 1000.0)
        if total and done and e2el
        else None,
        "spec_decode_level": verdict.get("spec_decode_level"),
        "spec_decode_verdict": verdict.get("spec_decode_verdict"),
        "path": str(path),
        **{k: data.get(k) for k in extra},
    }


def load_results(
    paths_or_dir: str | Path | Iterable[str | Path], extra: Sequence[str] = ()
) -> pd.DataFrame:
    """Load ``vllm bench serve --save-result`` JSON files into one row per point.

    Each file is read with its sidecar of cookbook annotations when it has one
    (:func:`read_point`).

    Args:
        paths_or_dir: a JSON file, a folder (searched recursively for ``*.json``), or a
            list of either.
        extra: more keys of vLLM's JSON, kept as they are (``p90_ttft_ms``, ``date``), even
            when no point has them: in their place among the columns below, else after them.

    Returns:
        DataFrame sorted by ``label`` then ``concurrency``, with columns (units):

        - ``label``, ``concurrency`` (``max_concurrency``), ``num_prompts``,
          ``input_len`` / ``output_len`` (tokens, from the cookbook's ``--metadata``),
          ``gpu_count``;
        - ``completed``, ``failed`` (requests), ``duration_s`` (s);
        - ``request_throughput`` (req/s), ``output_throughput`` and
          ``total_token_throughput`` (tokens/s, whole server);
        - ``output_throughput_per_gpu`` = output_throughput / gpu_count (tokens/s/GPU);
        - ``tokens_per_s_per_user`` = 1000 / ``mean_tpot_ms``: the decode speed one user
          sees while tokens stream (TPOT excludes the first token, so queueing and prefill
          do not enter it; they are in ``ttft``). The usual x axis of throughput /
          interactivity Pareto charts. Needs a server that streams token by token: a
          starved CPU server flushes many tokens per chunk and TPOT collapses toward 0;
        - ``e2e_tokens_per_s_per_user`` = mean output tokens per request / mean
          ``e2el`` (s): the whole-response speed including TTFT; robust to chunked
          streaming (use it as ``pareto(x=...)`` on the CPU stand-in);
        - ``request_goodput`` (req/s meeting the SLOs; only when SLOs were given);
        - ``{mean,median,p99}_{ttft,tpot,itl,e2el}_ms`` (ms);
        - ``spec_decode_acceptance_rate`` (%) and ``spec_decode_acceptance_length``
          (tokens per target forward pass), only when speculative decoding ran;
        - ``prefix_cache_hit_rate`` (0–1), ``prefix_cache_hits`` and ``prefix_cache_queries``
          (tokens), from :func:`helpers.bench.sweep.sweep`'s scrapes, when measured;
        - ``prefix_cache_warning``: why a point whose prompts share a prefix got no hit
          (:func:`prefix_cache_warning`), when that happened;
        - ``queue_share`` (0-1: of the requests' time, in vLLM's waiting queue) and
          ``queue_warning`` (above one half: the point measured a queue), when scraped;
        - ``replicas``, ``replicas_serving``, ``replica_warning``: through a fleet, its
          replicas and those serving during the point (a dead one is named);
        - ``path`` (the JSON file).

        Optional columns that no point has are left out.

    Raises:
        BenchError: a path does not exist, a file is not a benchmark result, or nothing
            was found.
    """
    rows = [_row(read_point(path), path, extra) for path in _json_paths(paths_or_dir)]
    if not rows:
        raise BenchError(
            f"No benchmark JSON found in {paths_or_dir}. Run helpers.bench.sweep.sweep(...) first."
        )
    df = pd.DataFrame(rows)
    keep = [c for c in COLUMNS if c not in _OPTIONAL_COLUMNS or c in extra or df[c].notna().any()]
    df = df[keep + [k for k in extra if k not in COLUMNS]]
    for col in ("concurrency", "num_prompts", "completed", "failed"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    return df.sort_values(["label", "concurrency"], kind="stable").reset_index(drop=True)
