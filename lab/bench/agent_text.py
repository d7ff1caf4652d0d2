"""The text of a generated agent workload (:mod:`lab.bench.agent_workload`): a system
prompt, tool schemas, tasks, tool calls, tool results and follow-ups of a retailer's operations
agent, from a small seeded vocabulary. Sizes are tokens of the served tokenizer.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_NOUNS = (
    "order", "invoice", "shipment", "customer", "warehouse", "refund", "ticket", "product",
    "inventory", "carrier", "address", "payment", "subscription", "coupon", "report", "region",
    "deployment", "service", "incident", "alert", "metric", "cluster", "database", "queue",
    "supplier", "contract", "budget", "forecast", "return", "catalog",
)  # fmt: skip
_VERBS = (
    "get", "list", "create", "update", "cancel", "search", "refund", "escalate", "schedule",
    "check", "summarize", "approve", "assign", "export", "validate", "merge", "restock", "notify",
)  # fmt: skip
_ADJ = (
    "pending", "overdue", "priority", "regional", "partial", "duplicate", "archived", "active",
    "delayed", "flagged", "recurring", "international", "verified", "open", "closed",
)  # fmt: skip
_SENTENCES = (
    "Always {verb} the {adj} {noun} before you answer.",
    "If a {noun} is {adj}, {verb} the related {noun2} and say so.",
    "Never {verb} a {noun} without the customer's confirmation.",
    "Report every {adj} {noun} with its identifier and its status.",
    "Prefer the {noun} tools over guessing when a {noun2} is mentioned.",
    "Keep the {noun} history short: {verb} only what changed since the last {noun2}.",
    "When the {noun2} looks {adj}, {verb} the {noun} first and explain why.",
)


def count_tokens(tok, text: str) -> int:
    """Tokens of ``text`` without special tokens (``tok``: a ``transformers`` tokenizer)."""
    return len(tok(text, add_special_tokens=False).input_ids)


def _sentence(rng: random.Random) -> str:
    noun, noun2 = rng.sample(_NOUNS, 2)
    return rng.choice(_SENTENCES).format(
        verb=rng.choice(_VERBS), adj=rng.choice(_ADJ), noun=noun, noun2=noun2
    )


def prose(rng: random.Random, tok, n: int, start: str = "") -> str:
    """``start`` and generated sentences until about ``n`` tokens (each sentence counted once,
    so the joins may add a few)."""
    parts, total = [start] if start else [], count_tokens(tok, start) if start else 0
    while total < n:
        s = _sentence(rng)
        parts.append(s)
        total += count_tokens(tok, " " + s)
    return " ".join(parts)


def tool_schemas(rng: random.Random, tok, count: int, total: int) -> list[dict[str, Any]]:
    """``count`` OpenAI-style function schemas of about ``total / count`` tokens each (as JSON; a
    schema's skeleton may be longer: :data:`lab.bench.agent_workload.MIN_TOOL_TOKENS`)."""
    names = [f"{v}_{n}" for v in _VERBS for n in _NOUNS]
    rng.shuffle(names)
    out = []
    for name in names[:count]:
        noun = name.split("_", 1)[1]
        props = {
            f"{noun}_id": {"type": "string", "description": f"The {noun}'s identifier."},
            "reason": {"type": "string", "description": "Why this call is made."},
        }
        for extra in rng.sample(("limit", "status", "region", "since", "notify"), 2):
            kind = {"limit": "integer", "notify": "boolean"}.get(extra, "string")
            props[extra] = {"type": kind, "description": _sentence(rng)}
        fn = {"name": name, "description": _sentence(rng),
              "parameters": {"type": "object", "properties": props,
                             "required": [f"{noun}_id", "reason"]}}  # fmt: skip
        tool = {"type": "function", "function": fn}
        size = count_tokens(tok, json.dumps(tool))
        while size < total // count:
            s = _sentence(rng)
            fn["description"] += " " + s
            size += count_tokens(tok, " " + s)
        out.append(tool)
    return out


def _call(rng: random.Random, tok, tools: Sequence[Mapping[str, Any]], n: int, tag: str):
    """An assistant message calling one tool, its arguments about ``n`` tokens (JSON)."""
    fn = rng.choice(tools)["function"]
    args: dict[str, Any] = {}
    for pname, p in fn["parameters"]["properties"].items():
        kind = p["type"]
        args[pname] = (
            rng.randint(1, 50) if kind == "integer" else rng.random() < 0.5 if kind == "boolean"
            else f"{tag}-{rng.randint(1000, 9999)}" if pname.endswith("_id") else rng.choice(_ADJ)
        )  # fmt: skip
    args["reason"] = prose(rng, tok, max(n - count_tokens(tok, json.dumps(args)), 1))
    call = {
        "id": f"call_{tag}",
        "type": "function",
        "function": {"name": fn["name"], "arguments": args},
    }
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def _result(rng: random.Random, tok, n: int) -> str:
    """A tool's JSON answer of about ``n`` tokens."""
    records, total = [], 0
    while total < n or not records:
        rec = {"id": f"{rng.choice(_NOUNS)}-{rng.randint(10000, 99999)}",
               "status": rng.choice(_ADJ), "note": _sentence(rng)}  # fmt: skip
        records.append(rec)
        total += count_tokens(tok, json.dumps(rec)) + 1
    return json.dumps({"ok": True, "records": records})


def session_turns(rng: random.Random, tok, shape: Any, tools, s: int) -> list[list[dict]]:
    """The messages (after the system prompt) of each turn of session ``s``: the user's task,
    then per turn the assistant's tool call (about ``output_len`` tokens), the tool's result and
    the user's follow-up (``shape``: a :class:`lab.bench.agent_workload.AgentShape`)."""
    task = prose(rng, tok, shape.user_len, f"Ticket {s}: a customer needs help.")
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    turns = [list(history)]
    for t in range(1, shape.turns):
        call = _call(rng, tok, tools, shape.output_len, f"{s}-{t}")
        history += [call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"],
                           "content": _result(rng, tok, shape.tool_result_len)}]  # fmt: skip
        if shape.followup_len:
            history.append({"role": "user", "content": prose(rng, tok, shape.followup_len)})
        turns.append(list(history))
    return turns


def speller(tok) -> Callable[[Any], Any] | None:
    """For a tokenizer that spells only its own words (the weightless architecture's word-level
    vocabulary, :mod:`helpers.weights.weightless_tokenizer`, maps every English word to one
    unknown token), a function that rewrites each whitespace-separated word of a message into
    one of the tokenizer's words, chosen by the word's CRC-32: the same word always gives the
    same token and different words (a session's identifiers) almost always different ones, so
    the prefix cache sees what it would see with real text. None for a tokenizer that spells
    English (``"order invoice customer"`` has no unknown token).
    """
    unk = getattr(tok, "unk_token_id", None)
    if unk is None or unk not in tok("order invoice customer", add_special_tokens=False).input_ids:
        return None
    special = set(getattr(tok, "all_special_tokens", ()))
    words = sorted(
        w for w in tok.get_vocab() if w not in special and not w.startswith("<") and w.isalnum()
    )

    def spell(value: Any) -> Any:
        if isinstance(value, str):
            return " ".join(words[zlib.crc32(w.encode()) % len(words)] for w in value.split())
        if isinstance(value, Mapping):  # tool-call arguments: the values
            return {k: spell(v) for k, v in value.items()}
        return value

    return spell
