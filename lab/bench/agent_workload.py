"""A multi-turn agent workload, generated locally (no dataset download) and replayed with
``vllm bench serve``'s custom dataset.

Every session shares one system prompt and one set of tool schemas; each turn's prompt is the
previous turn's conversation plus the assistant's tool call, the tool's result and (optionally)
a short user follow-up. Each request is rendered to text by the served model's own chat
template (``apply_chat_template(messages, tools=...)``), so the prefix cache sees exactly the
tokens a real agent would send. Lines are written turn by turn (turn 1 of every session, then
turn 2, ...): a turn is sent after the previous turn of its session has been prefilled, given
at least as many sessions as requests in flight. :func:`write_agent_workload` writes the JSONL
(``{"prompt", "output_tokens"}``, vLLM 0.32.0 ``CustomDataset``,
``vllm/benchmarks/datasets/datasets.py``) that :func:`helpers.bench.point.run_point` replays.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from helpers.errors import BenchError
from lab.bench.agent_text import prose, session_turns, speller, tool_schemas

#: Tokens of tool schema per tool below which :func:`lab.bench.scenarios.scale_for_standin`
#: drops tools: a schema's skeleton (name, four described parameters) is about 640 characters of
#: JSON, 278-302 tokens on the stand-in's 1,536-token byte-level vocabulary (measured).
MIN_TOOL_TOKENS = 150


@dataclasses.dataclass(frozen=True)
class AgentShape:
    """The size of an agent workload. Token counts are measured with the served tokenizer on
    the generated text (the chat template's own markup comes on top).

    Attributes:
        sessions, turns: conversations, and requests per conversation.
        system_len, tool_len: tokens of the system prompt and of all tool schemas (as JSON),
            shared by every request.
        tools: how many tool schemas ``tool_len`` is split into.
        user_len: tokens of each session's first user message.
        tool_result_len, followup_len: tokens of each tool result and of the user's follow-up
            after it (0: none) between two turns.
        output_len: tokens generated per turn (``output_tokens``, with ``--ignore-eos``); the
            assistant's tool call in the replayed history has about this many tokens too.
    """

    sessions: int
    turns: int
    system_len: int
    tool_len: int
    tools: int
    user_len: int
    tool_result_len: int
    followup_len: int
    output_len: int

    @classmethod
    def for_point(cls, agent: Mapping[str, Any], point: Mapping[str, Any]) -> AgentShape:
        """The shape of one sweep point: ``agent`` (a scenario's ``agent`` fields: ``turns``,
        ``tools``, ``system_len``, ``tool_result_len``, ``followup_len``) and ``point``
        (:func:`helpers.bench.sweep.sweep_points`: ``prefix_len`` = system + tools,
        ``input_len`` = the first user message, ``output_len``, ``num_prompts``).

        Raises:
            BenchError: a count below 1, or a system prompt longer than the shared prefix.
        """
        turns = int(agent["turns"])
        prefix, system = int(point["prefix_len"]), int(agent["system_len"])
        if turns < 1 or int(agent["tools"]) < 1 or system > prefix:
            raise BenchError(
                f"agent workload: turns={turns}, tools={agent['tools']}, system_len={system}, "
                f"prefix_len={prefix}: turns and tools must be at least 1 and system_len at "
                "most prefix_len (system prompt + tool schemas); fix the scenario."
            )
        return cls(
            sessions=max(1, -(-int(point["num_prompts"]) // turns)),
            turns=turns,
            system_len=system,
            tool_len=prefix - system,
            tools=int(agent["tools"]),
            user_len=int(point["input_len"]),
            tool_result_len=int(agent["tool_result_len"]),
            followup_len=int(agent.get("followup_len") or 0),
            output_len=int(point["output_len"]),
        )


@dataclasses.dataclass(frozen=True)
class AgentWorkload:
    """What :func:`write_agent_workload` wrote. Tokens as the served tokenizer counts them.

    Attributes:
        path: the JSONL file; ``shape``, ``seed``: what it was generated from.
        prompt_tokens: each request's prompt, in file (= replay) order.
        shared_prefix_tokens: tokens every request starts with (system prompt + tool schemas
            as the chat template renders them).
        turn_prompt_tokens: the mean prompt per turn (turn 1 first): how the history grows.
    """

    path: Path
    shape: AgentShape
    seed: int
    prompt_tokens: tuple[int, ...]
    shared_prefix_tokens: int
    turn_prompt_tokens: tuple[float, ...]
    token_ids: tuple[tuple[int, ...], ...] = dataclasses.field(repr=False, compare=False)

    @property
    def requests(self) -> int:
        """Lines of the JSONL (sessions x turns)."""
        return len(self.prompt_tokens)

    def predicted_hits(self, block: int, drafter: bool = False) -> int:
        """Prefix-cache hit tokens of one replay at concurrency 1 on a fresh server whose hits
        land on ``block``-token boundaries and that evicts nothing: each prompt hits its leading
        whole blocks that an earlier prompt holds, at most its length - 1 tokens (vLLM 0.32.0
        ``KVCacheManager.get_computed_blocks``). Requests in flight together cannot reuse each
        other, so a higher concurrency hits at most this. It counts every block boundary as a
        place a hit can end, as on an attention-only model or a hybrid served with
        ``--prefix-cache-retention-interval None``; a hybrid at vLLM's default
        ``prefix_cache_retention_interval`` 0 (0.32.0-0.34.0, ``CacheConfig``, vllm/config/
        cache.py) keeps Mamba states only at each prompt's end and at shared-prefix junctions
        a second request has pinned: there the second session's first prompt misses the shared
        system prompt and tools (it pins that junction for the sessions after it), and the
        measured hits fall below this (the sweep's reuse-floor line names the server's value).

        ``drafter``: the server drafts with MTP, DFlash or DSpark (vLLM's ``use_eagle``), which
        recomputes the last matched block of every hit for the drafter's hidden states
        (``find_longest_cache_hit``, ``vllm/v1/core/single_type_kv_cache_manager.py``, 0.32.0):
        each hit is one block shorter. On one H100 (vLLM 0.32.0, align mode, retention 0,
        2026-12-05, ``docs/results/h100/tune/drafting-0.32.0-2026-12-05/``) vLLM's counters
        equalled this to the token at 4 and 16 sessions without drafting and with MTP K=3, and
        at 4 sessions with MTP K=7 and DSpark K=7; at 16 those two fell 20 % short, their 4 GiB
        KV cache full."""
        seen: set[int] = set()
        hits = 0
        for ids in self.token_ids:
            h, found, chain = 0, 0, True
            for i in range(len(ids) // block):
                h = hash((h, ids[i * block : (i + 1) * block]))
                # a hit ends at the prompt's length - 1 (its last token's logits); a drafter's
                # may reach the whole prompt, then loses its last block (find_longest_cache_hit)
                if chain and h in seen and (i + 1) * block <= len(ids) - (not drafter):
                    found = i + 1
                else:
                    chain = False
                seen.add(h)
            hits += max(found - drafter, 0) * block
        return hits

    def predicted_hit_rate(self, block: int, drafter: bool = False) -> float:
        """:meth:`predicted_hits` (``block`` tokens, ``drafter`` as there) / all prompt tokens
        (0-1)."""
        return self.predicted_hits(block, drafter) / max(sum(self.prompt_tokens), 1)

    def summary(self) -> str:
        """One line: requests, the shared prefix and how each turn's prompt grows."""
        growth = " -> ".join(f"{t:,.0f}" for t in self.turn_prompt_tokens)
        return (
            f"agent workload: {self.shape.sessions} sessions x {self.shape.turns} turns = "
            f"{self.requests} requests; {self.shared_prefix_tokens:,}-token shared prefix (system "
            f"prompt + {self.shape.tools} tools); mean prompt per turn {growth} tokens; "
            f"{self.shape.output_len} output tokens per turn"
        )


def _spelled_message(m: dict[str, Any], spell) -> dict[str, Any]:
    """``m`` with its content and tool-call argument values spelled (roles and names kept)."""
    out = {**m, "content": spell(m.get("content") or "")}
    if m.get("tool_calls"):
        out["tool_calls"] = [
            {**c, "function": {**c["function"], "arguments": spell(c["function"]["arguments"])}}
            for c in m["tool_calls"]
        ]
    return out


def _spelled_tool(tool: dict[str, Any], spell) -> dict[str, Any]:
    """A tool schema with its descriptions spelled (names and types kept)."""
    fn = tool["function"]
    props = {
        k: {**p, "description": spell(p.get("description", ""))}
        for k, p in fn["parameters"]["properties"].items()
    }
    params = {**fn["parameters"], "properties": props}
    return {
        **tool,
        "function": {**fn, "description": spell(fn["description"]), "parameters": params},
    }


def write_agent_workload(
    shape: AgentShape,
    tokenizer: Any,
    path: str | Path,
    *,
    seed: int = 0,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> AgentWorkload:
    """Generate the sessions of ``shape`` and write them as a ``vllm bench serve`` custom
    dataset: one JSON line ``{"prompt": rendered text, "output_tokens": shape.output_len}``
    per request, turn by turn across sessions.

    Replay it with ``--dataset-name custom --dataset-path PATH --disable-shuffle
    --skip-chat-template --custom-output-len -1`` on the completions endpoint
    (:func:`helpers.bench.point.dataset_args`): the prompts are already rendered.

    Args:
        shape: the sizes (:class:`AgentShape`).
        tokenizer: the served model's folder (str / Path; its chat template renders the
            conversations) or a loaded ``transformers`` tokenizer.
        path: the ``.jsonl`` file to write (its folder is created).
        seed: the text's seed: another seed gives other sessions and another system prompt, so
            two points never hit each other's prefix cache.
        chat_template_kwargs: passed to ``apply_chat_template`` (e.g. ``{"enable_thinking":
            False}``).

    Returns:
        An :class:`AgentWorkload` describing what was written.

    Raises:
        BenchError: the tokenizer has no chat template, or its template ignores ``tools``.
    """
    tok = load_chat_tokenizer(tokenizer)
    rng = random.Random(f"agent|{seed}")
    system = prose(rng, tok, shape.system_len, "You are Atlas, the operations agent of a retailer.")
    tools = tool_schemas(rng, tok, shape.tools, shape.tool_len)
    sessions = [session_turns(rng, tok, shape, tools, s) for s in range(shape.sessions)]
    spell = speller(tok)
    if spell is not None:  # a word-level vocabulary: the text's words become its own words
        system, tools = spell(system), [_spelled_tool(t, spell) for t in tools]
        sessions = [[[_spelled_message(m, spell) for m in turn] for turn in s] for s in sessions]
    kwargs = dict(chat_template_kwargs or {})
    texts: list[str] = []
    for turn in range(shape.turns):
        for history in sessions:
            msgs = [{"role": "system", "content": system}, *history[turn]]
            texts.append(_render(tok, msgs, tools, kwargs))
    if tools[0]["function"]["name"] not in texts[0]:
        raise BenchError(
            "The served model's chat template ignores tools=: the agent workload needs a "
            "template that renders tool schemas (serve a model whose chat_template handles tools)."
        )
    ids = tuple(tuple(tok(t, add_special_tokens=False).input_ids) for t in texts)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for text in texts:
            fh.write(json.dumps({"prompt": text, "output_tokens": shape.output_len}) + "\n")
    n = shape.sessions
    return AgentWorkload(
        path=out,
        shape=shape,
        seed=int(seed),
        prompt_tokens=tuple(len(i) for i in ids),
        shared_prefix_tokens=_common_prefix(ids),
        turn_prompt_tokens=tuple(
            sum(len(i) for i in ids[t * n : (t + 1) * n]) / n for t in range(shape.turns)
        ),
        token_ids=ids,
    )


def write_point_workload(
    agent: Mapping[str, Any], point: Mapping[str, Any], tokenizer: Any, folder: Path, label: str
) -> tuple[AgentWorkload, dict[str, Any]]:
    """Write one sweep point's workload as ``<folder>/<label>-c<concurrency>.jsonl``, seeded by
    the point's ``seed`` (points never share a prefix cache).

    Args:
        agent, point: as :meth:`AgentShape.for_point`.
        tokenizer: as :func:`write_agent_workload` (a loaded one saves a load per point).
        folder, label: where, and the sweep's label.

    Returns:
        The :class:`AgentWorkload` and the :func:`helpers.bench.point.run_point` arguments that
        replay it: ``dataset``, ``num_prompts``, ``input_len`` (the mean prompt, tokens),
        ``prefix_len`` (the shared prefix), ``metadata``.

    Raises:
        BenchError: see :meth:`AgentShape.for_point` and :func:`write_agent_workload`.
    """
    from helpers.bench.point import _safe

    shape = AgentShape.for_point(agent, point)
    path = Path(folder) / f"{_safe(label)}-c{int(point['concurrency'])}.jsonl"
    work = write_agent_workload(shape, tokenizer, path, seed=int(point["seed"]))
    return work, {
        "dataset": work.path,
        "num_prompts": work.requests,
        "input_len": round(sum(work.prompt_tokens) / work.requests),
        "prefix_len": work.shared_prefix_tokens,
        "metadata": {"workload": "agent", "sessions": shape.sessions, "turns": shape.turns},
    }


def load_chat_tokenizer(tokenizer: Any):
    """``tokenizer`` loaded with ``transformers.AutoTokenizer`` when it is a folder or hub id
    (str / Path), as is otherwise; a sweep loads it once for all its points.

    Raises:
        BenchError: it has no chat template.
    """
    if isinstance(tokenizer, (str, Path)):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
    if not getattr(tokenizer, "chat_template", None):
        raise BenchError(
            f"The tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat "
            "template: pass the served model's folder (the one with chat_template.jinja)."
        )
    return tokenizer


def _render(tok, messages: list[dict], tools: list[dict], kwargs: Mapping[str, Any]) -> str:
    """The prompt text of one request, through the model's own chat template. A tokenizer that
    adds its BOS itself gets the text without the template's (the completions endpoint
    tokenizes with special tokens)."""
    text = tok.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=False, **kwargs
    )
    bos = getattr(tok, "bos_token", None)
    if bos and text.startswith(bos):
        probe = tok("a").input_ids
        if probe and probe[0] == tok.bos_token_id:
            text = text[len(bos) :]
    return text


def _common_prefix(ids: Sequence[Sequence[int]]) -> int:
    first, n = ids[0], len(ids[0])
    for other in ids[1:]:
        n = min(n, len(other))
        for i in range(n):
            if first[i] != other[i]:
                n = i
                break
    return n
