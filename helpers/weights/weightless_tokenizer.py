"""The weightless mode's tokenizer: a word-level vocabulary of exactly ``vocab_size`` ids.

The special / marker tokens the parsers look up, a few role words, the 94 printable ASCII
characters one token each, then ``w<id>`` for every other id: every id decodes and decoded
text re-encodes to the same ids (``vllm bench serve --dataset-name random`` relies on it).

The characters are there for guided decoding: xgrammar builds its token mask from this raw
vocabulary, and without a token that spells ``{`` vLLM 0.32.0 logs ``grammar rejected tokens
[0] ... Terminating request`` and answers HTTP 500 (H200, ``notebooks/agents.ipynb``,
2026-12-01; reproduced on the CPU build). Tokens decode joined by spaces, so a schema answer
from random weights fails validation: noise, as every weightless answer is.
"""

from __future__ import annotations

import json
from pathlib import Path

# Special and marker tokens, in id order: the stand-in's own (one list for both tokenizers;
# why each is one token: helpers.standin.template).
from helpers.standin.template import CHAT_TEMPLATE as STANDIN_CHAT_TEMPLATE
from helpers.standin.template import MARKER_TOKENS, SPECIAL_TOKENS

_WORDS = ["system", "user", "assistant", "tool"]
#: One token per printable ASCII character (``!`` to ``~``): what a grammar needs to spell JSON.
CHAR_TOKENS = [chr(c) for c in range(0x21, 0x7F)]

# The chat format of the stand-in (helpers/standin/chat_template.jinja): ChatML turns with
# Nemotron-style thinking (`<think>\n` when on, `<think></think>` when off), tool schemas listed
# in the system turn, tool calls in the qwen3_coder format, tool results as `<tool_response>`.
# The model is noise; the format makes a prompt's tokens what a real agent request's are in
# shape (an agent workload's shared system prompt and tools: lab.bench.agent_workload).
CHAT_TEMPLATE = STANDIN_CHAT_TEMPLATE


def _tokenizer_vocab(vocab_size: int) -> dict[str, int]:
    fixed = SPECIAL_TOKENS + MARKER_TOKENS + _WORDS + CHAR_TOKENS
    if len(fixed) > vocab_size:
        raise ValueError(
            f"a vocabulary of {vocab_size} ids cannot hold the {len(fixed)} fixed tokens"
        )
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
    special_map = {
        "bos_token": "<s>",
        "eos_token": "<|im_end|>",
        "unk_token": "<unk>",
        "pad_token": "<unk>",
    }
    tok_cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special_map,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(max_len),
        "chat_template": CHAT_TEMPLATE,
    }
    (dest / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2) + "\n")
    (dest / "special_tokens_map.json").write_text(json.dumps(special_map, indent=2) + "\n")
