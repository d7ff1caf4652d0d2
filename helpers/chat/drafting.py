"""Does a server enforce ``thinking_token_budget`` while it drafts (speculative decoding)?

Public reports say it may not: vllm-project/vllm #39573 (vLLM 0.19, MTP) and #54906 (vLLM
0.28.1rc1.dev130, open: Model Runner V2 with MTP, a budget of 1 gave 32 reasoning tokens; V1
passed). In 0.28.0 and 0.32.0 both runners reach the budget on the drafting path (V1
``RejectionSampler.apply_logits_processors``, ``vllm/v1/sample/rejection_sampler.py``; V2
``RejectionSampler._verify``, ``vllm/v1/worker/gpu/spec_decode/rejection_sampler.py``), yet #54906
shows V2 failing at run time; vLLM 0.32.0 picks V2 on a GPU for MTP, DFlash and DSpark
(``VllmConfig.use_v2_model_runner``; DSpark is V2-only). So the helpers do not trust the server's
budget while it drafts: they warn, and :func:`budget_method_for` picks the two-pass budget.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

from helpers.chat.types import _client_url, per_client
from helpers.server import httpio
from helpers.server.endpoint import server_root

#: The reports of the budget ignored while drafting.
REPORTS = "vllm-project/vllm #39573, #54906"
#: A counter vLLM registers only when the server runs speculative decoding
#: (``vllm/v1/spec_decode/metrics.py`` ``SpecDecodingProm``, vLLM 0.32.0).
DRAFTING_METRIC = "vllm:spec_decode_num_drafts"


class ReasoningBudgetUnenforcedWarning(UserWarning):
    """A server budget (``thinking_token_budget``) was asked of a server that drafts, where
    vLLM may not enforce it (:data:`REPORTS`)."""


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
    """``"two_pass"`` when the client's server drafts (:data:`REPORTS`), else ``"server"``: the
    ``budget_method`` for :func:`helpers.chat.completions.chat`."""
    return "two_pass" if server_facts(client)["drafting"] else "server"


def warn_if_drafting(client: Any, category: type[Warning], risk: str) -> bool:
    """Warn ``category`` ("This server drafts ..." then ``risk``) when the client's server
    drafts; return whether it warned."""
    from helpers.chat.parse import warn_from_caller

    facts = server_facts(client)
    if facts["drafting"]:
        release = facts["version"] or "an unknown release"
        warn_from_caller(
            category, f"This server drafts (speculative decoding; vLLM {release}){risk}"
        )
    return bool(facts["drafting"])


def warn_if_unenforced(client: Any) -> bool:
    """Warn (:class:`ReasoningBudgetUnenforcedWarning`) when a server budget is asked of a
    server that drafts; return whether it warned."""
    return warn_if_drafting(
        client,
        ReasoningBudgetUnenforcedWarning,
        ", and vLLM may not apply thinking_token_budget while drafting "
        f"({REPORTS}: the budget was ignored with MTP), so the reasoning may run past the budget. "
        "Use chat(..., budget_method='two_pass') (helpers.chat.drafting.budget_method_for(client) "
        "picks it), or serve without drafting.",
    )
