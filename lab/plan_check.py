"""The memory planner against the server's own start-up log: the same figures, read back.

In the lab: no target notebook runs it; the GPU device scripts (``tools/device/run_h200.py``,
``long_context.py``) and the planner's tests do. The log's wordings stay in
:mod:`helpers.server.vllm_log` (``SERVER_FIGURES``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from helpers.memory.plan import Plan
from helpers.server.vllm_log import CUDAGRAPH_ESTIMATE_ENV, SERVER_FIGURES


def server_log_figures(log: str | Path) -> dict[str, Any]:
    """The memory figures a vLLM server logs at start-up (a log path or its text).

    Returns:
        Whichever were found (the wordings: :data:`helpers.server.vllm_log.SERVER_FIGURES`):
        ``kv_cache_tokens``, ``max_model_len`` (tokens), ``max_concurrency`` (requests),
        ``mamba_padding_pct``, ``block_size`` (tokens), ``kv_budget_gib``, ``dtype``,
        ``weights_gib``; the CUDA-graph memory estimate reserved before the KV cache since
        vLLM 0.21: ``cudagraph_estimate_gib``, ``cudagraph_actual_gib``,
        ``gpu_memory_utilization``, ``utilization_without_estimate``,
        ``suggested_utilization``, and ``cudagraph_estimate`` (False when the log says it is
        off). ``kv_budget_gb=figures["kv_budget_gib"]`` re-plans with
        :func:`helpers.memory.planner.plan`.
    """
    if isinstance(log, Path):
        text = log.read_text(errors="replace")
    elif "\n" not in log and len(log) < 4096 and Path(log).is_file():
        text = Path(log).read_text(errors="replace")
    else:
        text = log
    out: dict[str, Any] = {}
    tokens = re.findall(SERVER_FIGURES["kv_tokens"], text)
    if tokens:
        out["kv_cache_tokens"] = int(tokens[-1].replace(",", ""))
    conc = re.findall(SERVER_FIGURES["concurrency"], text)
    if conc:
        mml, x = conc[-1]
        out.update(max_model_len=int(mml.replace(",", "")), max_concurrency=float(x))
    for key, name, conv in (
        ("padding", "mamba_padding_pct", float),
        ("block_size", "block_size", int),
        ("available_gib", "kv_budget_gib", float),
        ("cpu_explicit_gib", "kv_budget_gib", float),
        ("dtype", "dtype", str),
        ("weights_gib", "weights_gib", float),
    ):
        found = re.findall(SERVER_FIGURES[key], text)
        if found:
            out[name] = conv(found[-1])
    pool = re.findall(SERVER_FIGURES["cudagraph_pool_gib"], text)
    if pool:
        out["cudagraph_actual_gib"] = float(pool[-1][0])
    # the V1 runner's estimate line, else the pool line's "(estimated)" (the V2 runner's)
    found = re.findall(SERVER_FIGURES["cudagraph_estimate_gib"], text)
    estimate = [a for a, _ in found if a] or [b for _, b in found]
    if estimate:
        out["cudagraph_estimate_gib"] = float(estimate[-1])
    util = re.findall(SERVER_FIGURES["cudagraph_utilization"], text)
    if util:
        u, v, sug = (float(x) for x in util[-1])
        out.update(
            cudagraph_estimate=True,
            gpu_memory_utilization=u,
            utilization_without_estimate=v,
            suggested_utilization=sug,
        )
    elif re.search(SERVER_FIGURES["cudagraph_profiling_off"], text):
        out["cudagraph_estimate"] = False
    return out


#: Relative KV-budget shortfall (server below plan) that :func:`kv_shortfall` explains.
SHORTFALL_TOLERANCE = 0.01


def kv_shortfall(p: Plan, log: str | Path | dict[str, Any]) -> str | None:
    """Why the server's KV budget is below the plan's, as far as its log says; or None.

    vLLM >= 0.21 reserves an estimate of CUDA-graph memory before it sizes the KV cache
    (``determine_available_memory``, ``vllm/v1/worker/gpu_worker.py``, vLLM 0.32.0). The
    sentence names that estimate's share, the two ways back (the estimate off, or the
    utilisation vLLM suggests) and what the weights took beyond the plan's figure.

    Args:
        p: the plan of the configuration the server ran.
        log: the server log (path or text), or its :func:`server_log_figures`.

    Returns:
        One sentence when the log's KV budget is more than :data:`SHORTFALL_TOLERANCE` below
        the plan's, else None (no budget in the log, or no shortfall).
    """
    f = log if isinstance(log, dict) else server_log_figures(log)
    served = f.get("kv_budget_gib")
    planned = p.kv_budget_gib
    if served is None or planned <= 0 or served >= planned * (1 - SHORTFALL_TOLERANCE):
        return None
    short = planned - served
    parts = [
        f"the server's KV cache budget is {served:.2f} GiB, {short:.2f} GiB "
        f"({100 * short / planned:.0f} %) below the plan's {planned:.2f} GiB"
    ]
    estimate = f.get("cudagraph_estimate_gib")
    if estimate:
        share = min(estimate, short)
        suggested = f.get("suggested_utilization")
        way_back = f"set {CUDAGRAPH_ESTIMATE_ENV}=0 (vLLM then warns the graphs may not fit)"
        if suggested:
            way_back += (
                f", or raise --gpu-memory-utilization from {f.get('gpu_memory_utilization', 0):g} "
                f"to {suggested:g} (vLLM's own suggestion) to keep the KV cache as without it"
            )
        actual = f.get("cudagraph_actual_gib")
        measured = f"; measured after capture: {actual:.2f} GiB" if actual is not None else ""
        parts.append(
            f"{share:.2f} GiB of it is vLLM's CUDA-graph memory estimate, reserved before the "
            f"KV cache is sized (default since vLLM 0.21{measured})"
        )
        parts.append(f"to get it back, {way_back}")
    elif f.get("cudagraph_estimate") is False:
        parts.append(f"the CUDA-graph estimate was off ({CUDAGRAPH_ESTIMATE_ENV}=0): not the cause")
    weights = f.get("weights_gib")
    extra = weights - p.weights_gib if weights is not None and p.device == "gpu" else 0.0
    if extra > 0.05 * max(p.weights_gib, 1e-9):
        parts.append(
            f"the weights took {weights:.2f} GiB against the plan's {p.weights_gib:g} GiB "
            f"({extra:.2f} GiB more: record it as the target's weights_gib in cookbook/recipe.yaml)"
        )
    rest = short - (min(estimate, short) if estimate else 0.0) - max(extra, 0.0)
    if rest > 0.05:
        parts.append(
            f"the remaining {rest:.2f} GiB is vLLM's profiled activation peak and non-torch "
            f"memory above the plan's {p.activation_reserve_gib:g} GiB reserve (plan again with "
            "kv_budget_gb= the log's 'Available KV cache memory')"
        )
    return "; ".join(parts)


def compare_with_server(p: Plan, log: str | Path):
    """A DataFrame of the plan's figures next to the server log's, with the relative difference.

    Rows: KV cache budget (GiB, when the log names it), KV cache size (tokens), maximum
    concurrency at max_model_len, Mamba page padding (%). ``attrs["shortfall"]`` (and the
    budget row's ``note``) holds :func:`kv_shortfall`'s sentence.
    """
    import pandas as pd

    f = server_log_figures(log)
    rows = []
    budget = (
        [("KV cache budget [GiB]", round(p.kv_budget_gib, 2), "kv_budget_gib")]
        if "kv_budget_gib" in f
        else []
    )
    for name, planned, key in (
        *budget,
        ("KV cache size [tokens]", p.kv_cache_tokens, "kv_cache_tokens"),
        (
            f"max concurrency at {p.max_model_len} tokens",
            round(p.max_concurrency(), 2),
            "max_concurrency",
        ),
        ("Mamba page padding [%]", round(p.mamba_padding_pct, 2), "mamba_padding_pct"),
    ):
        served = f.get(key)
        diff = None if served in (None, 0) else round(100.0 * (planned - served) / served, 2)
        rows.append({"figure": name, "planner": planned, "server log": served, "diff_pct": diff})
    shortfall = kv_shortfall(p, f)
    for row in rows:
        row["note"] = shortfall if row["figure"].startswith("KV cache budget") and shortfall else ""
    table = pd.DataFrame(rows)
    table.attrs["shortfall"] = shortfall
    return table
