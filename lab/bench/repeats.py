"""The same benchmark point run several times: its run-to-run spread
(:func:`lab.bench.stats.spread` reads the result), with a warning the repeats share printed once
(and, inside :func:`said_once`, once for every sweep and repeat of one server).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.point import _safe
from helpers.bench.sweep import _WARNED, sweep
from helpers.errors import BenchError
from helpers.paths import out_dir as _out_dir


def check_repeats(repeats: Any) -> int:
    """``repeats`` as an int, checked: runs of one point that measure the run-to-run spread.

    Call it before a server starts (a GPU start takes minutes); :func:`repeat_point` does too.

    Raises:
        BenchError: not an int, or below 2 (one run has no spread).
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 2:
        raise BenchError(
            f"repeats={repeats!r}: pass an int of 2 or more (repeat_point needs two runs to "
            "measure a spread; 3 is the notebooks' default)."
        )
    return repeats


def repeat_point(
    server: Any,
    model: str | None = None,
    tokenizer: str | Path | None = None,
    concurrency: int | None = None,
    repeats: int = 3,
    *,
    out_dir: str | Path | None = None,
    label: str = "default",
    seed: int = 0,
    **sweep_args: Any,
) -> pd.DataFrame:
    """Run the same point ``repeats`` times to measure its run-to-run spread.

    Each repeat is one :func:`~helpers.bench.sweep.sweep` of a single concurrency, with its own warm-up and seed
    (``seed + r``, hashed by :func:`~helpers.bench.sizing.point_seed`: no repeat is served from another's prefix
    cache), written to ``<out_dir>/rep<r>/``; :func:`lab.bench.stats.spread` reads the result.
    A warning the repeats share (no prefix-cache hit, a replica down) is printed once.

    Args:
        server, model, tokenizer: as :func:`~helpers.bench.sweep.sweep` (the server object, or its URL with
            the model name and tokenizer).
        concurrency: ``--max-concurrency`` of the point.
        repeats: how many runs (at least 2 for a spread; 3 or more is better).
        out_dir, label, seed, sweep_args: as :func:`~helpers.bench.sweep.sweep` (``scenario``, ``input_len``,
            ``num_prompts``, ``gpu_count``, ``extra_args``, ``progress``, ...).

    Returns:
        :func:`~helpers.bench.results.load_results` rows, one per repeat, with a ``repeat`` column (0-based).

    Raises:
        BenchError: see :func:`~helpers.bench.point.run_point`; ``repeats < 2``; no ``concurrency``.
    """
    if concurrency is None or isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise BenchError(
            f"repeat_point: concurrency={concurrency!r}: pass the point's --max-concurrency "
            "as an int, e.g. repeat_point(srv, concurrency=4)."
        )
    check_repeats(repeats)
    folder = Path(out_dir) if out_dir is not None else _out_dir("bench", _safe(label) + "-repeats")
    frames = []
    with said_once():  # a warning the repeats share is printed once
        for r in range(int(repeats)):
            df = sweep(server, model, tokenizer, [int(concurrency)], out_dir=folder / f"rep{r}",
                       label=label, seed=int(seed) + r, **sweep_args)  # fmt: skip
            frames.append(df.assign(repeat=r))
    return pd.concat(frames, ignore_index=True)


@contextlib.contextmanager
def said_once() -> Iterator[None]:
    """Inside it, a line each :func:`~helpers.bench.sweep.sweep` prints once (the prefix cache's
    floor read from the server, a warning: no prefix-cache hit, a replica down) is printed once
    for every sweep and :func:`repeat_point` in it: wrap one server's sweep and repeats. Nested,
    the outer one counts. Every row still keeps its own warning."""
    token = _WARNED.set(set()) if _WARNED.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _WARNED.reset(token)
