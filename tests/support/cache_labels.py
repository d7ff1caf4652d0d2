"""Recorded ``vllm:cache_config_info`` labels (a CPU server's /metrics,
``tests/data/runtime/metrics_after.txt``) with the prefix-cache values a test sets."""

from __future__ import annotations

from helpers.bench import metrics
from tests.support import DATA


def cache_config_labels(enabled: bool, block: int, mode: str, **more: str) -> dict[str, str]:
    """The recorded labels with prefix caching ``enabled``, the scheduler ``block`` (tokens),
    the Mamba cache ``mode`` (``"align"`` sets the Mamba block to ``block`` too) and ``more``."""
    labels = metrics.info_labels((DATA / "runtime" / "metrics_after.txt").read_text())
    mamba = str(block) if mode == "align" else labels["mamba_block_size"]
    return {**labels, "enable_prefix_caching": str(enabled), "block_size": str(block),
            "effective_attention_block_size": str(block), "mamba_cache_mode": mode,
            "mamba_block_size": mamba, **more}  # fmt: skip
