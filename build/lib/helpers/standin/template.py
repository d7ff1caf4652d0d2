"""The stand-in's chat format: its special tokens, its chat template and a renderer.

The template (``chat_template.jinja``, package data next to this module, :data:`CHAT_TEMPLATE`)
is Nemotron-3-style: ChatML turns, ``<think>\\n`` opens reasoning after the assistant header
when thinking is on, ``<think></think>`` when it is off, tools listed in the system turn and
called in qwen3_coder XML, tool results as ``<tool_response>`` blocks in a user turn. Unknown
kwargs (``force_nonempty_content``, ...) are ignored. The stand-in's cache key
(:func:`helpers.standin.build.standin_hash`) covers the template text, so editing the file
rebuilds the model. Also :data:`SPECIAL_TOKENS`, :data:`MARKER_TOKENS`, :func:`render_chat`.
"""

from __future__ import annotations

import json
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


def _jinja_env():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    # Same environment settings as transformers' chat template renderer
    # (transformers/utils/chat_template_utils.py).
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


_TEMPLATE = None


def render_chat(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    **kwargs: Any,
) -> str:
    """Render ``messages`` with the stand-in's chat template (no tokenizer needed).

    Gives the same text as ``tokenizer.apply_chat_template(..., tokenize=False)`` on the
    built model (a test checks this).
    """
    global _TEMPLATE
    if _TEMPLATE is None:
        _TEMPLATE = _jinja_env().from_string(CHAT_TEMPLATE)
    return _TEMPLATE.render(
        messages=messages, tools=tools, add_generation_prompt=add_generation_prompt, **kwargs
    )
