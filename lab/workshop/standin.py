"""What the CPU stand-in is, said plainly for the workshop notebook: its architecture, its size
(its parameters counted from :data:`helpers.standin.train.RECIPE`), what it was trained on and
what it knows (:func:`standin_summary`).
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.standin.train import RECIPE, Recipe


@dataclass(frozen=True)
class StandinInfo:
    """What the stand-in is, for notebooks (filled from :data:`RECIPE` and demo.yaml)."""

    architecture: str
    layer_pattern: str
    hidden_size: int
    vocab_size: int
    parameters: int
    trained_on: str
    knows: str


def _count_params(r: Recipe) -> int:
    h = r.hidden_size
    n = 2 * r.vocab_size * h + h  # embeddings, lm_head, final norm
    for kind in r.pattern:
        n += h  # layer norm
        if kind == "M":
            inner = r.mamba_num_heads * r.mamba_head_dim
            conv_dim = inner + 2 * r.n_groups * r.ssm_state_size
            n += h * (inner + conv_dim + r.mamba_num_heads)  # in_proj
            n += conv_dim * r.conv_kernel + conv_dim  # conv1d weight + bias
            n += 3 * r.mamba_num_heads + inner  # dt_bias, A_log, D, gated norm
            n += inner * h  # out_proj
        elif kind == "*":
            q = r.num_attention_heads * r.head_dim
            kv = r.num_key_value_heads * r.head_dim
            n += h * q + 2 * h * kv + q * h
        elif kind == "-":
            n += 2 * h * r.intermediate_size
    return n


STANDIN = StandinInfo(
    architecture="NemotronHForCausalLM",
    layer_pattern=RECIPE.pattern,
    hidden_size=RECIPE.hidden_size,
    vocab_size=RECIPE.vocab_size,
    parameters=_count_params(RECIPE),
    trained_on=(
        "the scripted conversations in cookbook/demo.yaml (reasoning on and off, "
        "streaming, get_weather/get_time tool calls and their results, parallel calls, "
        "answers after a forced end of thinking), with small rephrasings"
    ),
    knows="only the cookbook's demo prompts; anything else gets a canned refusal or noise",
)


def standin_summary() -> str:
    """One paragraph for a notebook saying plainly what the stand-in model is."""
    s = STANDIN
    return (
        f"This run uses a stand-in, not Nemotron 3.5 Lightning: a {s.parameters / 1e6:.2f}M-parameter "
        f"{s.architecture} (layer pattern '{s.layer_pattern}': Mamba-2, attention, MLP; "
        f"hidden size {s.hidden_size}, {s.vocab_size}-token byte-level BPE vocabulary) trained "
        f"in about two minutes on CPU (the package ships the trained copy). It was trained only on {s.trained_on}, "
        "using the real Nemotron 3 chat format, so vLLM's nemotron_v3 reasoning parser and "
        "qwen3_coder tool parser work on its output exactly as on the real model. It knows "
        "only the demo prompts: its answers show the mechanics (reasoning vs content, tool "
        "calls, budgets, streaming, benchmarks), not the real model's quality or speed."
    )
