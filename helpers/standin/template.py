"""The stand-in's chat format: its special tokens, its chat template and a renderer.

The template (``chat_template.jinja``, package data) is Nemotron-3-style: ChatML turns,
``<think>\n`` after the assistant header when thinking is on, ``<think></think>`` when off,
tools in the system turn called in qwen3_coder XML, results as ``<tool_response>`` blocks.
Unknown kwargs are ignored. :func:`helpers.standin.build.standin_hash` covers the template
text, so editing it rebuilds the model.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

# Special tokens, in id order. Ids 0-2 follow Nemotron's tokenizer (<unk>, <s>, </s>);
# the chat and tool markers are single tokens so that vLLM's nemotron_v3 / qwen3_coder
# parsers (vllm/parser/qwen3.py `token_id_terminals`) and the thinking-budget logits
# processor (vllm/config/reasoning.py encodes "</think>") find them as token ids.
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
MARKER_TOKENS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]

TEMPLATE_FILE = "chat_template.jinja"

# The file ends with a newline (as text files do); the template is the text without it,
# exactly as it was when it lived in a Python string (the stand-in's hash covers it).
CHAT_TEMPLATE = (
    resources.files("helpers.standin")
    .joinpath(TEMPLATE_FILE)
    .read_text(encoding="utf-8")
    .removesuffix("\n")
)


def render_chat(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    **kwargs: Any,
) -> str:
    """Render ``messages`` with the stand-in's chat template, through transformers' own
    renderer (``transformers.utils.chat_template_utils.render_jinja_template``, what
    ``tokenizer.apply_chat_template(..., tokenize=False)`` runs), without a tokenizer."""
    from transformers.utils.chat_template_utils import render_jinja_template

    (text,), _ = render_jinja_template(
        [messages],
        tools=tools,
        chat_template=CHAT_TEMPLATE,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )
    return text
