"""The weightless mode's tokenizer: a word-level vocabulary of exactly ``vocab_size`` ids.

:func:`helpers.weights.weightless.build_arch_model` writes it next to the architecture's
``config.json``: the special / marker tokens the parsers look up (``<|im_start|>``,
``<|im_end|>``, ``<think>``, ``</think>``, ``<tool_call>``, ...), a few role words, then
``w<id>`` for every other id, so every id decodes and decoded text re-encodes to the same ids
(``vllm bench serve --dataset-name random`` relies on it). Not the real tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path

# Special and marker tokens, in id order: the stand-in's own (one list for both tokenizers).
# ``<|im_end|>`` ends a turn (EOS of the chat template); ``<think>``/``</think>`` and
# ``<tool_call>``/``</tool_call>`` are looked up by vLLM's ``nemotron_v3`` / ``qwen3_coder``
# parsers (``vllm/parser/qwen3.py``).
from helpers.standin.template import MARKER_TOKENS, SPECIAL_TOKENS

_WORDS = ["system", "user", "assistant", "tool"]

# ChatML turns with Nemotron-style thinking: `<think>\n` opens reasoning after the
# assistant header when thinking is on, `<think></think>` when off. Tools are not listed
# (the model is noise); content parts of type text are concatenated.
CHAT_TEMPLATE = (
    "{%- set enable_thinking = enable_thinking if enable_thinking is defined else true -%}"
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' -}}"
    "{%- if m['content'] is string -%}{{- m['content'] -}}"
    "{%- elif m['content'] -%}{%- for p in m['content'] -%}"
    "{%- if p['type'] == 'text' -%}{{- p['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking -%}{{- '<think>\\n' -}}{%- else -%}{{- '<think></think>' -}}{%- endif -%}"
    "{%- endif -%}"
)


def _tokenizer_vocab(vocab_size: int) -> dict[str, int]:
    fixed = SPECIAL_TOKENS + MARKER_TOKENS + _WORDS
    vocab = {tok: i for i, tok in enumerate(fixed)}
    for i in range(len(fixed), vocab_size):
        vocab[f"w{i}"] = i
    return vocab


def write_tokenizer(dest: Path, vocab_size: int, max_len: int) -> None:
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab=_tokenizer_vocab(vocab_size), unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # No decoder: tokens are joined with single spaces, which WhitespaceSplit undoes, so
    # decode -> encode gives the same ids back (vLLM's random dataset relies on it).
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKER_TOKENS])
    tok.save(str(dest / "tokenizer.json"))
    tok_cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "<|im_end|>",
        "unk_token": "<unk>",
        "pad_token": "<unk>",
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(max_len),
        "chat_template": CHAT_TEMPLATE,
    }
    (dest / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2) + "\n")
    special_map = {
        "bos_token": "<s>",
        "eos_token": "<|im_end|>",
        "unk_token": "<unk>",
        "pad_token": "<unk>",
    }
    (dest / "special_tokens_map.json").write_text(json.dumps(special_map, indent=2) + "\n")
