"""A tiny, locally trained Nemotron-H checkpoint that the CPU build of vLLM can serve.

The cookbook's notebooks run on a GPU with the real Nemotron 3.5 Lightning. In CI and on
laptops they run "as a stand-in": same client code, same vLLM parsers, but the server is
the CPU build of vLLM serving this model. It is a real ``NemotronHForCausalLM``
checkpoint (Mamba-2, attention and MLP layers; no MoE, because the CPU backend has no
kernel for Nemotron-H's non-gated ReLU² experts, see docs/DESIGN.md) with a byte-level BPE
tokenizer and a Nemotron-3-style chat template. It is trained for about two minutes on
the demo conversations in ``cookbook/demo.yaml`` so that, served with
``--reasoning-parser nemotron_v3 --enable-auto-tool-choice --tool-call-parser qwen3_coder``
and greedy decoding, it reasons, answers, calls tools and respects a thinking budget on
those prompts. It knows nothing else.

Public API: :func:`build_standin_model`, :data:`STANDIN`, :func:`standin_summary`,
:func:`load_demo`, :func:`tool_result`, :func:`check_checkpoint`.
The flags that serve it live in the registry (``cookbook/recipe.yaml``, target ``cpu``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock
import yaml

from helpers.errors import CookbookError
from helpers.paths import COOKBOOK_DIR, out_dir

DEMO_PATH = COOKBOOK_DIR / "demo.yaml"

# Bump when anything in the recipe below changes in a way the hash would not see
# (training code, sample construction, tokenizer settings).
RECIPE_VERSION = 3

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

# Nemotron-3-style chat template: ChatML turns, `<think>\n` opens reasoning after the
# assistant header when thinking is on, `<think></think>` when it is off, tools listed in
# the system turn and called in qwen3_coder XML, tool results as <tool_response> blocks
# in a user turn. Unknown kwargs (force_nonempty_content, ...) are ignored.
CHAT_TEMPLATE = r"""{%- set enable_thinking = enable_thinking if enable_thinking is defined else true -%}
{%- set truncate_history_thinking = truncate_history_thinking if truncate_history_thinking is defined else true -%}
{%- if messages and messages[0].role == 'system' -%}
{%- set system_message = messages[0].content if messages[0].content is string else '' -%}
{%- set loop_messages = messages[1:] -%}
{%- else -%}
{%- set system_message = '' -%}
{%- set loop_messages = messages -%}
{%- endif -%}
{%- set ns = namespace(last_user=-1) -%}
{%- for m in loop_messages -%}
{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{{- '<|im_start|>system\n' + system_message -}}
{%- if tools -%}
{%- if system_message %}{{- '\n\n' -}}{%- endif -%}
{{- '# Tools\n\nYou have access to the following functions:\n\n<tools>' -}}
{%- for tool in tools -%}
{%- set fn = tool.function if tool.function is defined else tool -%}
{{- '\n<function>\n<name>' + fn.name + '</name>' -}}
{%- if fn.description -%}{{- '\n<description>' + fn.description + '</description>' -}}{%- endif -%}
{{- '\n<parameters>' -}}
{%- if fn.parameters is defined and fn.parameters and fn.parameters.properties is defined -%}
{%- for pname, p in fn.parameters.properties.items() -%}
{{- '\n<parameter>\n<name>' + pname + '</name>' -}}
{%- if p.type is defined -%}{{- '\n<type>' + p.type | string + '</type>' -}}{%- endif -%}
{%- if p.description is defined -%}{{- '\n<description>' + p.description + '</description>' -}}{%- endif -%}
{{- '\n</parameter>' -}}
{%- endfor -%}
{%- endif -%}
{%- if fn.parameters is defined and fn.parameters and fn.parameters.required is defined -%}
{{- '\n<required>' + fn.parameters.required | tojson + '</required>' -}}
{%- endif -%}
{{- '\n</parameters>\n</function>' -}}
{%- endfor -%}
{{- '\n</tools>\n\nTo call a function, reply in this format:\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter>\nvalue\n</parameter>\n</function>\n</tool_call>' -}}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- for message in loop_messages -%}
{%- set content = message.content if message.content is string else '' -%}
{%- if message.role == 'user' or message.role == 'system' -%}
{{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>\n' -}}
{%- elif message.role == 'assistant' -%}
{%- if message.reasoning_content is defined and message.reasoning_content is string -%}
{%- set reasoning = message.reasoning_content -%}
{%- elif message.reasoning is defined and message.reasoning is string -%}
{%- set reasoning = message.reasoning -%}
{%- else -%}
{%- set reasoning = '' -%}
{%- endif -%}
{%- if '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].split('<think>')[-1] -%}
{%- set content = content.split('</think>')[-1] -%}
{%- endif -%}
{%- set reasoning = reasoning.strip() -%}
{%- set content = content.strip() -%}
{{- '<|im_start|>assistant\n' -}}
{%- if reasoning and (not truncate_history_thinking or loop.index0 > ns.last_user) -%}
{{- '<think>\n' + reasoning + '\n</think>\n' -}}
{%- else -%}
{{- '<think></think>' -}}
{%- endif -%}
{{- content -}}
{%- if message.tool_calls is defined and message.tool_calls -%}
{%- for tc in message.tool_calls -%}
{%- set f = tc.function if tc.function is defined else tc -%}
{%- if not loop.first or content -%}{{- '\n' -}}{%- endif -%}
{{- '<tool_call>\n<function=' + f.name + '>\n' -}}
{%- if f.arguments is mapping -%}
{%- for k, v in f.arguments.items() -%}
{{- '<parameter=' + k + '>\n' + (v if v is string else v | tojson) + '\n</parameter>\n' -}}
{%- endfor -%}
{%- elif f.arguments -%}
{{- f.arguments | string + '\n' -}}
{%- endif -%}
{{- '</function>\n</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'tool' -%}
{%- if loop.first or loop_messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\n<tool_response>\n' + content + '\n</tool_response>' -}}
{%- if loop.last or loop_messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking -%}{{- '<think>\n' -}}{%- else -%}{{- '<think></think>' -}}{%- endif -%}
{%- endif -%}"""


@dataclass(frozen=True)
class Recipe:
    """Everything that determines the stand-in's weights besides the demo data.

    Sizes are chosen so that the model overfits the demo conversations in about two
    minutes on 2 CPU cores and so that the CPU build of vLLM 0.32 has a kernel for
    every layer: Mamba-2 (``M``), attention with head_dim 64 (``*``; head_dim 16 has
    no CPU attention kernel) and ReLU² MLP (``-``); no MoE (``E``).

    Measured choices (teacher-forced greedy check of every training sequence, seeds
    0-2): with 2 attention heads the lookup of the city from the prompt into the
    reasoning and the tool call formed in only some seeds within the step budget; 8
    heads got every sequence right in all three. One training thread: on a shared
    2-core box, 2 threads ran 5x slower (spin-waiting), and a fixed thread count keeps
    the weights identical on every machine. 300 steps of 32 sequences (~25 epochs)
    take 100-180 s.
    """

    pattern: str = "M*M-"
    hidden_size: int = 128
    num_attention_heads: int = 8
    num_key_value_heads: int = 8
    head_dim: int = 64
    mamba_num_heads: int = 4
    mamba_head_dim: int = 32
    ssm_state_size: int = 16
    n_groups: int = 1
    conv_kernel: int = 4
    chunk_size: int = 128
    intermediate_size: int = 256
    vocab_size: int = 1536
    max_position_embeddings: int = 4096
    seed: int = 0
    threads: int = 1
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 20
    weight_decay: float = 0.0


RECIPE = Recipe()


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
        f"hidden size {s.hidden_size}, {s.vocab_size}-token byte-level BPE vocabulary) built and "
        f"trained locally in about two minutes on CPU. It was trained only on {s.trained_on}, "
        "using the real Nemotron 3 chat format, so vLLM's nemotron_v3 reasoning parser and "
        "qwen3_coder tool parser work on its output exactly as on the real model. It knows "
        "only the demo prompts: its answers show the mechanics (reasoning vs content, tool "
        "calls, budgets, streaming, benchmarks), not the real model's quality or speed."
    )


# --------------------------------------------------------------------------- demo data


def load_demo(path: Path | None = None) -> dict[str, Any]:
    """Return ``cookbook/demo.yaml`` (the demo prompts, tool schemas and fake tool results).

    Raises:
        CookbookError: the file is missing or not a YAML mapping.
    """
    path = Path(path or DEMO_PATH)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError as e:
        raise CookbookError(
            f"{path} is missing; restore it from git (`git checkout {path}`)."
        ) from e
    if not isinstance(data, dict):
        raise CookbookError(f"{path} must be a YAML mapping; restore it from git.")
    return data


def tool_result(demo: dict[str, Any], name: str, city: str) -> str:
    """Content of the tool message for ``name(city=city)``: ``json.dumps`` of demo.yaml's result.

    Raises:
        CookbookError: demo.yaml has no result for that tool and city.
    """
    table = {"get_weather": "weather", "get_time": "time"}.get(name)
    try:
        return json.dumps(demo[table]["results"][city])
    except (KeyError, TypeError) as e:
        raise CookbookError(
            f"cookbook/demo.yaml has no {name} result for {city!r}; add it under {table}.results."
        ) from e


# ------------------------------------------------------------------------- template


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


# --------------------------------------------------------------------- training data


@dataclass
class Sample:
    """One training sequence: ``prompt`` (no loss) then ``target`` (loss) pieces.

    ``pieces`` is a list of ``(text, trained)``; the prompt is the first piece. With
    ``cut_reasoning`` the sample stands for one sequence per token position ``k`` of that
    reasoning: prompt, its first ``k`` tokens, ``</think>`` (no loss), then the rest.
    """

    pieces: list[tuple[str, bool]]
    cut_reasoning: str | None = None
    two_pass: bool = False


def _tool_call_text(calls: list[tuple[str, str]]) -> str:
    return "\n".join(
        f"<tool_call>\n<function={name}>\n<parameter=city>\n{city}\n</parameter>\n</function>\n</tool_call>"
        for name, city in calls
    )


def _assistant_msg(calls: list[tuple[str, str]], reasoning: str | None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": {"city": city}},
            }
            for i, (name, city) in enumerate(calls)
        ],
    }
    if reasoning:
        msg["reasoning_content"] = reasoning
    return msg


def _completion(reasoning: str, body: str, thinking: bool) -> str:
    end = "<|im_end|>"
    if thinking:
        return f"{reasoning}\n</think>\n{body}{end}"
    return f"{body}{end}"


def _answer_for(demo: dict[str, Any], calls: list[tuple[str, str]]) -> str:
    w = demo["weather"]
    parts = []
    for name, city in calls:
        if name == "get_weather":
            parts.append(w["answer"].format(**demo["weather"]["results"][city]))
        else:
            t = demo["time"]["results"][city]
            parts.append(f"The local time in {city} is {t['local_time']}.")
    return " ".join(parts)


def _answer_reasoning_for(demo: dict[str, Any], calls: list[tuple[str, str]]) -> str:
    if len(calls) == 1 and calls[0][0] == "get_weather":
        return demo["weather"]["answer_reasoning"].format(**demo["weather"]["results"][calls[0][1]])
    return demo["parallel"]["answer_reasoning"]


def build_samples(demo: dict[str, Any]) -> list[Sample]:
    """Turn demo.yaml into training sequences in the served chat format.

    Each conversation is rendered with :data:`CHAT_TEMPLATE` exactly as vLLM renders a
    request (generation prompt included), followed by the completion the model must
    produce: ``reasoning\\n</think>\\nanswer<|im_end|>`` with thinking on, ``answer<|im_end|>``
    with thinking off, qwen3_coder ``<tool_call>`` blocks for tool calls.
    """
    samples: list[Sample] = []
    all_tools = demo["tools"]
    toolsets: list[list[dict[str, Any]] | None] = [None, all_tools[:1], all_tools]

    def add(messages, tools, thinking, reasoning, body):
        prompt = render_chat(messages, tools=tools, enable_thinking=thinking)
        samples.append(Sample([(prompt, False), (_completion(reasoning, body, thinking), True)]))

    # Plain questions, thinking on and off, with and without tools in the request.
    plain = [demo["reasoning"], demo["streaming"]]
    for item in plain:
        for prompt in [item["prompt"], *item.get("variants", [])]:
            for tools in toolsets:
                for thinking in (True, False):
                    add(
                        [{"role": "user", "content": prompt}],
                        tools,
                        thinking,
                        item["reasoning"],
                        item["answer"],
                    )
    for item in demo.get("extras", []):
        for tools in (None, all_tools):
            for thinking in (True, False):
                add(
                    [{"role": "user", "content": item["prompt"]}],
                    tools,
                    thinking,
                    item["reasoning"],
                    item["answer"],
                )
    fb = demo["fallback"]
    for prompt in fb["prompts"]:
        for thinking in (True, False):
            add(
                [{"role": "user", "content": prompt}], None, thinking, fb["reasoning"], fb["answer"]
            )

    # Tool conversations: call, then answer from the tool result.
    w = demo["weather"]
    convs: list[tuple[str, list[tuple[str, str]], str]] = []
    for city in w["results"]:
        for tmpl in [w["prompt"], *w.get("variants", [])]:
            convs.append(
                (tmpl.format(city=city), [("get_weather", city)], w["reasoning"].format(city=city))
            )
    for pair in demo["parallel"]["pairs"]:
        convs.append(
            (pair["prompt"], [tuple(c) for c in pair["calls"]], demo["parallel"]["reasoning"])
        )
    for prompt, calls, reasoning in convs:
        needs_time = any(name == "get_time" for name, _ in calls)
        for tools in [all_tools] if needs_time else [all_tools[:1], all_tools]:
            for thinking in (True, False):
                user = {"role": "user", "content": prompt}
                add([user], tools, thinking, reasoning, _tool_call_text(calls))
                results = [
                    {
                        "role": "tool",
                        "tool_call_id": f"call_{i}",
                        "content": tool_result(demo, n, c),
                    }
                    for i, (n, c) in enumerate(calls)
                ]
                # The client may or may not send the call's reasoning back.
                for keep in (True, False) if thinking else (False,):
                    history = [user, _assistant_msg(calls, reasoning if keep else None), *results]
                    add(
                        history,
                        tools,
                        thinking,
                        _answer_reasoning_for(demo, calls),
                        _answer_for(demo, calls),
                    )

    # Thinking budget: vLLM forces `</think>` after N reasoning tokens (vllm/v1/sample/
    # thinking_budget_state.py); the two-pass client budget closes the think block in the
    # prompt instead. Either way the model must answer after a `</think>` it did not
    # choose. `_encode_samples` expands these into one sequence per cut token position.
    item = demo["reasoning"]
    forced = [(p, item) for p in [item["prompt"], *item.get("variants", [])]]
    forced += [
        (p, demo["streaming"])
        for p in [demo["streaming"]["prompt"], *demo["streaming"].get("variants", [])]
    ]
    for prompt, it in forced:
        head = render_chat([{"role": "user", "content": prompt}], enable_thinking=True)
        samples.append(
            Sample(
                [(head, False), ("\n" + it["answer"] + "<|im_end|>", True)],
                cut_reasoning=it["reasoning"],
                two_pass=prompt == demo["budget"]["prompt"],
            )
        )
    return samples


# ------------------------------------------------------------------------ building


def _versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }


def standin_hash(demo: dict[str, Any] | None = None, recipe: Recipe = RECIPE) -> str:
    """Cache key: sha256 (first 12 hex digits) of demo data, recipe, template and versions."""
    demo = load_demo() if demo is None else demo
    payload = {
        "recipe_version": RECIPE_VERSION,
        "recipe": dataclasses.asdict(recipe),
        "demo": demo,
        "template": CHAT_TEMPLATE,
        "special": SPECIAL_TOKENS + MARKER_TOKENS,
        "versions": _versions(),
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@contextlib.contextmanager
def _torch_settings(threads: int) -> Iterator[None]:
    import torch

    old_threads = torch.get_num_threads()
    old_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)


def _train_tokenizer(samples: list[Sample], recipe: Recipe):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    # Words (a space and what follows up to the next space or .,!?) are the largest tokens, so
    # reasoning and answers take one token per word or more (a thinking budget of 8
    # tokens cuts real text), while markup without spaces (tool schemas, tool-call XML)
    # compresses to a few tokens and keeps sequences short enough to train in minutes.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r" ?[^ .,!?]+|[.,!?]+| +"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe.vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS + MARKER_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    specials = SPECIAL_TOKENS + MARKER_TOKENS

    def texts():
        for s in samples:
            text = "".join(t for t, _ in s.pieces)
            for sp in specials:
                text = text.replace(sp, "\n")
            yield text

    tok.train_from_iterator(texts(), trainer=trainer)
    # Register the specials as added tokens so they are never split.
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKER_TOKENS])
    return tok


def _make_hf_tokenizer(tok):
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        pad_token="<unk>",
        clean_up_tokenization_spaces=False,
        model_max_length=RECIPE.max_position_embeddings,
    )
    hf.chat_template = CHAT_TEMPLATE
    hf.add_bos_token = False
    return hf


def _make_config(recipe: Recipe, tok):
    from transformers import NemotronHConfig

    return NemotronHConfig(
        vocab_size=recipe.vocab_size,
        hidden_size=recipe.hidden_size,
        hybrid_override_pattern=recipe.pattern,
        num_attention_heads=recipe.num_attention_heads,
        num_key_value_heads=recipe.num_key_value_heads,
        head_dim=recipe.head_dim,
        intermediate_size=recipe.intermediate_size,
        mlp_hidden_act="relu2",
        mamba_num_heads=recipe.mamba_num_heads,
        mamba_head_dim=recipe.mamba_head_dim,
        ssm_state_size=recipe.ssm_state_size,
        n_groups=recipe.n_groups,
        conv_kernel=recipe.conv_kernel,
        chunk_size=recipe.chunk_size,
        expand=2,
        max_position_embeddings=recipe.max_position_embeddings,
        tie_word_embeddings=False,
        pad_token_id=tok.token_to_id("<unk>"),
        bos_token_id=tok.token_to_id("<s>"),
        eos_token_id=tok.token_to_id("<|im_end|>"),
        num_logits_to_keep=1,
        use_cache=True,
        residual_in_fp32=False,
        rescale_prenorm_residual=True,
        dtype="float32",
    )


def _encode_samples(tok, samples: list[Sample]) -> list[tuple[list[int], list[int]]]:
    """Token ids and labels (-100 = no loss) for each training sequence."""
    end_think = tok.token_to_id("</think>")
    out = []
    for s in samples:
        ids: list[int] = []
        labels: list[int] = []
        for i, (text, trained) in enumerate(s.pieces):
            piece = tok.encode(text, add_special_tokens=False).ids
            if i == 1 and s.cut_reasoning is not None:
                head, head_labels = list(ids), list(labels)
            ids.extend(piece)
            labels.extend(piece if trained else [-100] * len(piece))
        if s.cut_reasoning is None:
            out.append((ids, labels))
            continue
        tail = ids[len(head) :]
        tail_labels = labels[len(head) :]
        reasoning = tok.encode(s.cut_reasoning, add_special_tokens=False).ids
        head_text = s.pieces[0][0]
        # Every cut in the first 16 tokens (the demo budgets), then every 4th.
        for k in sorted(set(range(min(16, len(reasoning)))) | set(range(16, len(reasoning), 4))):
            # Server-side budget: the generated tokens, then a forced `</think>`.
            seq = head + reasoning[:k] + [end_think] + tail
            lab = head_labels + [-100] * (k + 1) + tail_labels
            out.append((seq, lab))
            if s.two_pass and k % 2 == 1:
                # Two-pass client budget (helpers.client): the cut reasoning goes back as
                # text, `<think>\n{reasoning}\n</think>`, and is tokenized afresh.
                text = head_text + tok.decode(reasoning[:k]).rstrip() + "\n</think>"
                pre = tok.encode(text, add_special_tokens=False).ids
                out.append((pre + tail, [-100] * len(pre) + tail_labels))
    return out


def _train(
    model, data: list[tuple[list[int], list[int]]], recipe: Recipe, log=None, progress: bool = False
) -> dict[str, float]:
    import torch

    rng = random.Random(recipe.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": recipe.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=recipe.lr,
        betas=(0.9, 0.95),
    )

    def lr_at(step):
        if step < recipe.warmup:
            return recipe.lr * (step + 1) / recipe.warmup
        progress = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
        return recipe.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))

    def batches() -> Iterator[list[int]]:
        # Shuffled epochs; within pools of 8 batches, sequences of similar length share a
        # batch (less padding, so fewer wasted tokens on 1-2 CPU cores).
        pool = 8 * recipe.batch_size
        while True:
            perm = list(range(len(data)))
            rng.shuffle(perm)
            epoch: list[list[int]] = []
            for start in range(0, len(perm), pool):
                chunk = sorted(perm[start : start + pool], key=lambda i: (len(data[i][0]), i))
                epoch += [
                    chunk[j : j + recipe.batch_size]
                    for j in range(0, len(chunk), recipe.batch_size)
                ]
            rng.shuffle(epoch)
            yield from epoch

    stream = batches()
    model.train()
    last = float("nan")
    t0 = time.perf_counter()
    from tqdm.std import tqdm  # the text bar: an executed notebook saves its final state

    bar = tqdm(total=recipe.steps, desc="training the stand-in", unit="step", disable=not progress)
    for step in range(recipe.steps):
        batch = [data[i] for i in next(stream)]
        L = max(len(ids) for ids, _ in batch)
        input_ids = torch.zeros((len(batch), L), dtype=torch.long)
        labels = torch.full((len(batch), L), -100, dtype=torch.long)
        for i, (ids, lab) in enumerate(batch):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            labels[i, : len(lab)] = torch.tensor(lab)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        hidden = model.model(input_ids=input_ids, use_cache=False).last_hidden_state
        target = labels[:, 1:]
        keep = target != -100
        logits = model.lm_head(hidden[:, :-1][keep])  # logits only where there is a loss
        loss = torch.nn.functional.cross_entropy(logits.float(), target[keep])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        last = float(loss.detach())
        bar.update(1)
        if step % 25 == 0:
            bar.set_postfix(loss=f"{last:.3f}")
        if log and (step % 25 == 0 or step == recipe.steps - 1):
            log(f"step {step:4d}  loss {last:.4f}  {time.perf_counter() - t0:6.1f}s")
    bar.set_postfix(loss=f"{last:.3f}")
    bar.close()
    return {"final_loss": last, "train_seconds": time.perf_counter() - t0}


def _build(
    dest: Path, demo: dict[str, Any], recipe: Recipe, digest: str, log=None, progress: bool = False
) -> dict[str, Any]:
    import torch
    from transformers import GenerationConfig, NemotronHForCausalLM

    t0 = time.perf_counter()
    samples = build_samples(demo)
    tok = _train_tokenizer(samples, recipe)
    if tok.get_vocab_size() > recipe.vocab_size:
        raise CookbookError(
            f"stand-in tokenizer has {tok.get_vocab_size()} tokens, more than the model's "
            f"{recipe.vocab_size}; raise Recipe.vocab_size in helpers/standin.py."
        )
    hf_tok = _make_hf_tokenizer(tok)
    config = _make_config(recipe, tok)
    data = _encode_samples(tok, samples)
    with _torch_settings(recipe.threads):
        torch.manual_seed(recipe.seed)
        model = NemotronHForCausalLM(config).float()
        stats = _train(model, data, recipe, log=log, progress=progress) if recipe.steps > 0 else {}
        model.eval()
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=[config.eos_token_id, tok.token_to_id("</s>")],
        pad_token_id=config.pad_token_id,
    )
    # Saved in bfloat16: the CPU build of vLLM serves float32 checkpoints in bfloat16
    # anyway ("Downcasting torch.float32 to torch.bfloat16"), so this is what runs.
    model.to(torch.bfloat16)
    model.config.dtype = "bfloat16"
    model.save_pretrained(dest, safe_serialization=True)
    hf_tok.save_pretrained(dest)
    (dest / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    # vLLM reads `hybrid_override_pattern` through NemotronHConfig's property; write it too
    # so older readers of config.json see the familiar Nemotron-H key.
    cfg = json.loads((dest / "config.json").read_text())
    cfg["hybrid_override_pattern"] = recipe.pattern
    (dest / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
    meta = {
        "hash": digest,
        "recipe_version": RECIPE_VERSION,
        "recipe": dataclasses.asdict(recipe),
        "parameters": sum(p.numel() for p in model.parameters()),
        "samples": len(samples),
        "tokens": sum(len(ids) for ids, _ in data),
        "max_len": max(len(ids) for ids, _ in data),
        "build_seconds": time.perf_counter() - t0,
        "versions": _versions(),
        **stats,
    }
    meta["files"] = file_manifest(dest)
    (dest / "standin.json").write_text(json.dumps(meta, indent=2))
    return meta


# ---------------------------------------------------------------------------------------
# is the checkpoint whole? (checked before every reuse and every launch)
# ---------------------------------------------------------------------------------------

REBUILD = "rebuild with `build_standin_model(force=True)`"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """``{file name: {"size": bytes, "sha256": hex}}`` of a built stand-in's files
    (``standin.json`` itself excluded); recorded in ``standin.json`` at build."""
    folder = Path(folder)
    return {
        p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != "standin.json"
    }


def _safetensors_problem(path: Path) -> str | None:
    """Why a ``.safetensors`` file is not whole, or None. The format (safetensors docs):
    8 bytes little-endian header length N, N bytes of JSON header whose ``data_offsets``
    index the data that follows; the file ends exactly where the last tensor ends."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                return f"{path.name} is {size} bytes, too short for a safetensors header"
            n = int.from_bytes(head, "little")
            if n > size - 8:
                return (
                    f"{path.name} is {size} bytes but its header alone claims {n} bytes (truncated)"
                )
            header = json.loads(fh.read(n))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        return f"{path.name} has an unreadable header ({type(e).__name__})"
    ends = [
        v["data_offsets"][1]
        for k, v in header.items()
        if k != "__metadata__" and isinstance(v, dict) and "data_offsets" in v
    ]
    want = 8 + n + max(ends, default=0)
    if size != want:
        return f"{path.name} is {size:,} bytes but its header describes {want:,} bytes (truncated or padded)"
    return None


def check_checkpoint(folder: str | Path) -> None:
    """Check that a local checkpoint folder is whole before it is served.

    Checks: ``config.json`` exists and is valid JSON; every ``*.safetensors`` file's
    header parses and its size matches the tensors it describes; and, for a stand-in
    whose ``standin.json`` records a manifest (:func:`file_manifest`), every file has the
    recorded size and SHA-256. Reads the whole of a stand-in's files (a few MB) but only
    the headers of other checkpoints.

    Raises:
        CookbookError: one sentence naming the damaged file and the fix (for the
            stand-in: rebuild with ``build_standin_model(force=True)``; otherwise download
            or copy the checkpoint again).
    """
    folder = Path(folder)
    meta_path = folder / "standin.json"
    is_standin = meta_path.is_file()
    fix = (
        REBUILD
        if is_standin
        else "download it again (helpers.weights.download(..., force_download=True)) or copy it again"
    )
    what = "stand-in model" if is_standin else "checkpoint"
    problems: list[str] = []
    config = folder / "config.json"
    if not config.is_file():
        problems.append("config.json is missing")
    else:
        try:
            json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as e:
            problems.append(f"config.json is not valid JSON ({e})")
    for st in sorted(folder.glob("*.safetensors")):
        problem = _safetensors_problem(st)
        if problem:
            problems.append(problem)
    if is_standin and not problems:
        try:
            files = json.loads(meta_path.read_text()).get("files") or {}
        except (OSError, ValueError) as e:
            problems.append(f"standin.json is not valid JSON ({e})")
            files = {}
        for name, rec in files.items():
            p = folder / name
            if not p.is_file():
                problems.append(f"{name} is missing")
            elif p.stat().st_size != rec.get("size"):
                problems.append(
                    f"{name} is {p.stat().st_size:,} bytes, the build recorded {rec.get('size'):,}"
                )
            elif rec.get("sha256") and _sha256(p) != rec["sha256"]:
                problems.append(f"{name} does not match the SHA-256 recorded at build")
    if problems:
        raise CookbookError(f"The {what} at {folder} is damaged ({'; '.join(problems)}): {fix}.")


def _adopt_manifest(folder: Path) -> None:
    """Record the manifest of a stand-in built before manifests existed (after it passed
    the structural checks), so later damage is caught by size and hash."""
    meta_path = folder / "standin.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return
    if meta.get("files"):
        return
    meta["files"] = file_manifest(folder)
    tmp = meta_path.with_suffix(f".tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps(meta, indent=2))
        os.replace(tmp, meta_path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def build_standin_model(
    force: bool = False,
    out: Path | None = None,
    *,
    recipe: Recipe | None = None,
    verbose: bool = False,
    progress: bool = True,
) -> Path:
    """Build (or reuse) the stand-in checkpoint and return its folder.

    The folder holds ``config.json``, ``model.safetensors``, ``generation_config.json``,
    ``tokenizer.json`` / ``tokenizer_config.json`` (with ``chat_template``),
    ``chat_template.jinja`` and ``standin.json`` (build metadata: hash, parameter count,
    training seconds, final loss). Serve it with the registry's ``cpu`` target, e.g.
    ``helpers.server.VLLMServer(helpers.recipes.resolve("cpu").with_model(path))``.

    Args:
        force: rebuild even when a cached copy with the same hash exists.
        out: parent folder for the cache (default ``helpers.paths.out_dir("models")``);
            the model lands in ``<out>/standin-<hash>``.
        recipe: training recipe (default :data:`RECIPE`); e.g.
            ``dataclasses.replace(RECIPE, seed=1)`` to check robustness across seeds.
        verbose: print training progress (a line every 25 steps).
        progress: show a tqdm bar over the training steps (text, on stderr) when a build
            runs (about 2 minutes); a cached model prints nothing.

    The hash covers demo.yaml, :data:`RECIPE`, :data:`RECIPE_VERSION`, the chat template
    and the torch/transformers/tokenizers versions; a build takes about 2 minutes on 2
    CPU cores and is deterministic (fixed seed and thread count). It is written to a
    temporary folder and renamed into place, under a file lock, so a crash or a
    concurrent caller never sees a half-written model.

    A cached copy is checked before it is reused (:func:`check_checkpoint`: JSON files
    parse, safetensors are whole, sizes and SHA-256 match the manifest recorded at build).

    Raises:
        CookbookError: demo.yaml is missing or malformed, the build failed, or the cached
            copy is damaged (the message says to rebuild with ``force=True``).
    """
    demo = load_demo()
    recipe = recipe or RECIPE
    digest = standin_hash(demo, recipe)
    parent = Path(out) if out is not None else out_dir("models")
    parent.mkdir(parents=True, exist_ok=True)
    final = parent / f"standin-{digest}"
    if not force and (final / "standin.json").is_file():
        check_checkpoint(final)
        _adopt_manifest(final)
        return final
    log = print if verbose else None
    lock_path = parent / f".standin-{digest}.lock"
    with filelock.FileLock(lock_path):  # one build per digest across processes
        if not force and (final / "standin.json").is_file():
            check_checkpoint(final)
            return final  # built by a concurrent caller while we waited
        tmp = parent / f".tmp-standin-{digest}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            _build(tmp, copy.deepcopy(demo), recipe, digest, log=log, progress=progress)
        except CookbookError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except Exception as e:  # noqa: BLE001 - wrap with a fix-naming message
            shutil.rmtree(tmp, ignore_errors=True)
            raise CookbookError(
                f"building the stand-in model failed ({type(e).__name__}: {e}); check that "
                "the .venv has torch, transformers and tokenizers (`make setup`) and that "
                "cookbook/demo.yaml is valid."
            ) from e
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
    return final


def standin_metadata(path: Path) -> dict[str, Any]:
    """Return the build metadata (``standin.json``) of a built stand-in folder."""
    return json.loads((Path(path) / "standin.json").read_text())


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.standin [--force]``: build (or reuse) the stand-in model and print
    its folder. ``make test`` runs it before the suite, so the first test does not wait for
    the build (about 2 minutes on 2 CPU cores; a cached copy is checked and reused)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m helpers.standin", description=main.__doc__)
    ap.add_argument("--force", action="store_true", help="rebuild even when a cached copy exists")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    path = build_standin_model(force=args.force)
    print(f"stand-in model: {path} ({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
