"""The memory planner against the server's own start-up log: the same figures, read back.

:func:`server_log_figures` reads what vLLM logs at start-up (KV cache tokens, maximum
concurrency, Mamba padding, block size, KV budget); :func:`compare_with_server` puts a
:class:`~helpers.memory.plan.Plan` beside them, so a plan is checked by the server it planned.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from helpers.memory.plan import Plan
from helpers.server.vllm_log import SERVER_FIGURES


def server_log_figures(log: str | Path) -> dict[str, Any]:
    """The memory figures a vLLM server logs at start-up (a log path or its text).

    Returns:
        Whichever were found: ``kv_cache_tokens`` and ``max_model_len`` (tokens) and
        ``max_concurrency`` (requests) from "KV cache size: N tokens" and "Maximum
        concurrency for X tokens per request: Yx" (one line in vLLM 0.32, two in 0.26);
        ``mamba_padding_pct`` ("Padding mamba page size by P%");
        ``block_size`` ("Setting attention block size to N tokens", GPU); ``kv_budget_gib``
        ("Available KV cache memory" on GPU, "Explicitly set" on the CPU build);
        ``dtype`` (the model dtype vLLM chose). Pass ``kv_budget_gb=figures["kv_budget_gib"]``
        to :func:`helpers.memory.planner.plan` to re-plan with the measured budget.
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
    ):
        found = re.findall(SERVER_FIGURES[key], text)
        if found:
            out[name] = conv(found[-1])
    return out


def compare_with_server(p: Plan, log: str | Path):
    """A DataFrame of the plan's figures next to the server log's, with the relative difference.

    Rows: KV cache size (tokens), maximum concurrency at max_model_len, Mamba page padding (%).
    """
    import pandas as pd

    f = server_log_figures(log)
    rows = []
    for name, planned, key in (
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
    return pd.DataFrame(rows)
