"""Does a server enforce ``thinking_token_budget`` while it drafts (speculative decoding)?

Public reports say it may not: vllm-project/vllm #39573 (vLLM 0.19, MTP) and #54906 (vLLM
0.28.1rc1.dev130, open: Model Runner V2 with MTP, a budget of 1 gave 32 reasoning tokens; V1
passed). In 0.28.0 and 0.32.0 both runners reach the budget on the drafting path (V1
``RejectionSampler.apply_logits_processors``, ``vllm/v1/sample/rejection_sampler.py``; V2
``RejectionSampler._verify``, ``vllm/v1/worker/gpu/spec_decode/rejection_sampler.py``), yet #54906
shows V2 failing at run time; vLLM 0.32.0 picks V2 on a GPU for MTP, DFlash and DSpark
(``VllmConfig.use_v2_model_runner``; DSpark is V2-only). So the helpers do not trust the server's
budget while it drafts: :func:`budget_method_for` says so, and :func:`two_pass_budget` keeps the
budget on the client in two plain requests.
"""

from __future__ import annotations

import json
import warnings
import weakref
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from helpers.chat.parse import check_reply
from helpers.chat.types import (
    THINK_END,
    THINK_START,
    ChatResult,
    ReasoningTruncatedWarning,
    _client_url,
    per_client,
)
from helpers.server import httpio
from helpers.server.endpoint import server_root

#: The reports of the budget ignored while drafting.
REPORTS = "vllm-project/vllm #39573, #54906"
#: A counter vLLM registers only when the server runs speculative decoding
#: (``vllm/v1/spec_decode/metrics.py`` ``SpecDecodingProm``, vLLM 0.32.0).
DRAFTING_METRIC = "vllm:spec_decode_num_drafts"


_FACTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def server_facts(client: Any, timeout: float = 5.0) -> dict[str, Any]:
    """``{"url": root, "version": "0.32.0" or None, "drafting": True / False / None}`` of the
    client's server, from ``GET /version`` and ``GET /metrics`` (drafting when
    :data:`DRAFTING_METRIC` is exported; ``timeout`` in seconds each), once per client and
    URL. A fact the server does not answer is ``None``; nothing raises."""
    facts = per_client(_FACTS, client)
    if facts:
        return facts
    root = server_root(_client_url(client))
    facts.update(url=root, version=None, drafting=None)
    for path, fact, read in (
        ("/version", "version", lambda text: str(json.loads(text).get("version") or "") or None),
        ("/metrics", "drafting", lambda text: DRAFTING_METRIC in text),
    ):
        try:
            status, text = httpio.get(root + path, timeout)
            if status == 200:
                facts[fact] = read(text)
        except (OSError, ValueError, AttributeError):
            pass
    return facts


def budget_method_for(client: Any) -> str:
    """``"two_pass"`` when the client's server drafts (:data:`REPORTS`): keep the budget with
    :func:`two_pass_budget`; else ``"server"``: send ``thinking_token_budget``."""
    return "two_pass" if server_facts(client)["drafting"] else "server"


def two_pass_budget(
    client: Any,
    model: str,
    messages: list[dict[str, Any]],
    budget: int,
    *,
    max_tokens: int,
    echo: bool = False,
    **create_kwargs: Any,
) -> ChatResult:
    """A reasoning budget kept by the client, for a server where ``thinking_token_budget`` may
    not hold (one that drafts, :data:`REPORTS`; or one older than vLLM 0.32). Two plain
    requests, the second only when the first was cut while still reasoning::

        # 1. reason up to the budget
        first = client.chat.completions.create(
            model=model, messages=messages, max_tokens=budget, **create_kwargs)
        # 2. continue from the closed think block: the model writes the answer
        client.chat.completions.create(
            model=model,
            messages=messages + [{"role": "assistant",
                                  "content": "<think>\n" + reasoning.strip() + "\n</think>\n\n"}],
            max_tokens=max_tokens - first.usage.completion_tokens,
            extra_body={"continue_final_message": True, "add_generation_prompt": False},
            **create_kwargs)

    ``continue_final_message`` makes vLLM render the assistant message as the start of the reply
    (``vllm/entrypoints/openai/chat_completion/protocol.py``); the reasoning goes in stripped as the
    template renders it, else transformers' check answers HTTP 400 (a leading space, H100 12-06).

    Args:
        client: an ``openai.OpenAI`` client.
        model: the served model name.
        messages: the conversation (OpenAI message dicts).
        budget: reasoning tokens allowed (>= 1): the first request's ``max_tokens``.
        max_tokens: both requests together (tokens, above ``budget``).
        echo: print each request's keywords before it is sent.
        **create_kwargs: more ``create`` keywords for both (``temperature``, ``top_p``,
            ``extra_body``: merged with the second request's, ``stop``, ``seed``...).

    Returns:
        The checked turn: the first request's reasoning, the second's answer, both usages added
        but reasoning tokens (the first's; ``raw``: both replies); the first alone if it fit.

    Raises:
        TypeError: an argument of the wrong type.
        ValueError: ``budget`` < 1, or not below ``max_tokens``.
        openai.APIError: as ``create``.
    """
    from helpers.errors import check_number

    check_number("two_pass_budget", "budget", budget, integer=True, minimum=1)
    check_number("two_pass_budget", "max_tokens", max_tokens, integer=True, minimum=2)
    if budget >= max_tokens:
        raise ValueError(
            f"two_pass_budget: budget={budget} is not below max_tokens={max_tokens}: the answer "
            "needs room after the reasoning (raise max_tokens or lower the budget)."
        )
    extra = create_kwargs.pop("extra_body", None) or {}
    if not isinstance(extra, Mapping):
        raise TypeError(f"two_pass_budget: `extra_body` must be a dict; got {extra!r:.60}.")

    def send(step: str, **kwargs: Any) -> Any:
        if echo:
            shown = {k: v for k, v in kwargs.items() if k != "messages"}
            print(f"{step}: client.chat.completions.create(messages=[... {len(kwargs['messages'])}"
                  f" messages], {', '.join(f'{k}={v!r}' for k, v in shown.items())})")  # fmt: skip
        return client.chat.completions.create(model=model, **kwargs)

    first_reply = send("1. reason up to the budget", messages=list(messages), max_tokens=budget,
                       **({"extra_body": dict(extra)} if extra else {}), **create_kwargs)  # fmt: skip
    with warnings.catch_warnings():  # running out at the budget is the point of pass 1: no warning
        warnings.simplefilter("ignore", ReasoningTruncatedWarning)
        first = check_reply(first_reply, max_tokens=budget)
    first.warnings = [w for w in first.warnings if "while still reasoning" not in w]
    if first.finish_reason != "length" or first.tool_calls or first.content.strip():
        first.truncated_in_reasoning = False
        return first
    r = first.reasoning.strip()  # as rendered; an empty think block is rendered closed
    prefix = f"{THINK_START}\n{r}\n{THINK_END}\n\n" if r else f"{THINK_START}{THINK_END}"
    rest = max(1, max_tokens - first.usage.completion_tokens)
    second_reply = send("2. answer after the closed think block", max_tokens=rest,
                        messages=[*messages, {"role": "assistant", "content": prefix}],
                        extra_body={**extra, "continue_final_message": True, "add_generation_prompt": False},
                        **create_kwargs)  # fmt: skip
    off = {"chat_template_kwargs": {"enable_thinking": False}}  # the think block is closed
    second = check_reply(second_reply, max_tokens=rest, extra_body=off)
    return ChatResult(
        reasoning=first.reasoning,
        # all new text is the answer, though vLLM 0.32.0's parser, blind to the prompt's closed
        # think block, returns it as reasoning and counts it in usage (H100 2026-12-06, 0.34.0 not)
        content=second.content or second.reasoning,
        tool_calls=second.tool_calls,
        finish_reason=second.finish_reason,
        usage=first.usage + replace(second.usage, reasoning_tokens=None),
        raw=[first_reply, second_reply],
        reasoning_parser_missing=first.reasoning_parser_missing,
        warnings=first.warnings + second.warnings,
    )
