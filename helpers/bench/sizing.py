"""How big each point of a sweep is: its seed, its prompt and warm-up counts, and the cap on a
concurrency far above what the server runs at once (:func:`helpers.bench.sweep.sweep` uses them).
"""

from __future__ import annotations

import warnings
import zlib
from typing import Any

# --------------------------------------------------------------------------- seeds and sizes


def point_seed(seed: int, label: str, concurrency: int, input_len: int, output_len: int) -> int:
    """A random-dataset seed of its own for one point.

    vLLM's random dataset builds prompt ``i`` from ``(offset_i + i + arange(len)) % vocab``
    with offsets drawn from ``numpy.random.default_rng(seed)``, so two points with the same
    seed send the same token prefixes and the second would be served from the first's
    prefix cache. Hashing the point's identity into the seed keeps points apart.

    Returns:
        an int in ``[0, 2**31)``, stable across runs and Python versions (CRC-32).
    """
    key = f"{seed}|{label}|{concurrency}|{input_len}|{output_len}".encode()
    return zlib.crc32(key) & 0x7FFFFFFF


def default_num_prompts(concurrency: int, floor: int = 16) -> int:
    """Prompts per point when the caller gives none: ``max(4 × concurrency, floor)``.

    At 4× the concurrency the server spends most of the run at full concurrency (the
    ramp-up and drain at the ends are a small share); the floor keeps low-concurrency
    points from resting on a handful of requests.
    """
    return max(4 * int(concurrency), int(floor))


def default_num_warmups(concurrency: int, cap: int = 8) -> int:
    """Warm-up requests per point when the caller gives none: ``min(concurrency, cap)``, >= 1.

    Enough to fill the batch once at low concurrency (CUDA graphs and kernels for that batch
    size are then warm) without spending minutes at high concurrency. The H200 reference run
    showed why it matters: BF16 at concurrency 64 without a warm-up gave 4,300 tok/s instead of
    6,191.
    """
    return max(1, min(int(concurrency), int(cap)))


#: How far above what the server runs at once (``--max-num-seqs``, summed over replicas) a
#: point's concurrency may go: beyond that the extra requests only wait in the queue, and a
#: point of ``4 x concurrency`` prompts takes hours (10,000 against 4 did). A cookbook choice.
OVERSUBSCRIPTION = 4


def _max_num_seqs(server: Any, cfg: Any) -> tuple[int, str] | None:
    """``(sequences the server runs at once, where that figure comes from)``, or None."""
    if cfg is None or not hasattr(cfg, "args"):
        return None
    seqs = cfg.args.get("--max-num-seqs")
    if seqs:
        where = f"--max-num-seqs {int(seqs)}"
    else:
        from helpers.memory.planner import default_max_num_seqs

        device = "cpu" if getattr(cfg, "stand_in", False) else "gpu"
        gpu = getattr(cfg, "gpu", None) or {}
        memory_gb = float(gpu.get("memory_gb") or 0)
        seqs = default_max_num_seqs(device, memory_gb, str(gpu.get("name", "")))
        where = f"vLLM's default --max-num-seqs {seqs}"
    dep = getattr(server, "deployment", None)
    replicas = int(getattr(dep, "count", 0) or 0)
    if replicas > 1 and getattr(dep, "layout", "") == "replicas":
        return int(seqs) * replicas, f"{where} x {replicas} replicas"
    return int(seqs), where


def _bound_concurrency(points: list[dict[str, int]], server: Any, cfg: Any, label: str):
    """Cap each point's concurrency at :data:`OVERSUBSCRIPTION` x what the server runs at once
    (when its config says), merging points that end up equal; say so."""
    known = _max_num_seqs(server, cfg)
    if known is None:
        return points
    seqs, where = known
    cap = OVERSUBSCRIPTION * seqs
    over = [p["concurrency"] for p in points if p["concurrency"] > cap]
    if not over:
        return points
    msg = (
        f"sweep {label!r}: concurrency {', '.join(map(str, over))} is far above what the server "
        f"runs at once ({where}): capped at {cap} ({OVERSUBSCRIPTION} x that); beyond it the "
        "requests only wait in the queue and a point takes hours. Raise --max-num-seqs to "
        "measure more in flight."
    )
    print(msg, flush=True)
    warnings.warn(msg, ConcurrencyCappedWarning, stacklevel=3)
    out: list[dict[str, int]] = []
    for p in points:
        if p["concurrency"] > cap:
            n = min(p["num_prompts"], default_num_prompts(cap))
            p = {**p, "concurrency": cap, "num_prompts": n}
        if all(q["concurrency"] != p["concurrency"] for q in out):
            out.append(p)
    return out


class ConcurrencyCappedWarning(UserWarning):
    """A sweep capped a concurrency far above what the server runs at once."""
