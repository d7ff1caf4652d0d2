"""Speculative decoding shown lossless: greedy outputs with drafting against without.

Greedy decoding with a correct verifier is lossless: a drafted token is kept only where the
target model would have produced it. :func:`greedy_tokens` asks a server for the generated
token ids of each prompt (temperature 0, vLLM's ``return_token_ids``); :func:`match` compares
two such lists prompt by prompt: the share of positions that agree (up to the shorter output)
and the first position where they part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from helpers.server.endpoint import make_client

#: Prompts the lossless check sends (the demo's own: the stand-in answers them; any model can).
LOSSLESS_PROMPTS = [
    "Briefly explain: what is vLLM?",
    "Explain speculative decoding in two sentences.",
    "What is vLLM?",
]


def greedy_tokens(
    server, prompts: Sequence[str], *, max_tokens: int = 64, thinking: bool = True
) -> list[list[int]]:
    """Token ids each prompt generates greedily on ``server`` (one request per prompt, in
    order; ``temperature=0``; ``max_tokens`` tokens at most, reasoning included).

    Raises:
        helpers.errors.CookbookError: the server does not return token ids (vLLM before
            ``return_token_ids``), naming the release needed.
    """
    from helpers.errors import CookbookError

    client = make_client(server.base_url)
    out: list[list[int]] = []
    for p in prompts:
        resp = client.chat.completions.create(
            model=server.model_name,
            messages=[{"role": "user", "content": p}],
            max_tokens=max_tokens,
            temperature=0.0,
            top_p=1.0,
            extra_body={
                "return_token_ids": True,
                "chat_template_kwargs": {"enable_thinking": thinking},
            },
        )
        ids = (resp.choices[0].model_extra or {}).get("token_ids")
        if ids is None:
            raise CookbookError(
                "The server returned no token_ids: greedy matching needs vLLM's "
                "`return_token_ids` request field (vLLM 0.11 or later)."
            )
        out.append(list(ids))
    return out


@dataclass(frozen=True)
class Match:
    """How far two greedy runs agree.

    Attributes:
        rate: agreeing positions / compared positions over all prompts (1.0: identical).
        identical: prompts whose outputs are token-for-token the same.
        prompts: prompts compared.
        per_prompt: one row per prompt: ``compared`` positions, ``agree``, ``first_divergence``
            (the first differing position, or None), and both lengths.
        accepted: draft tokens the target accepted while ``other`` was generated (the
            server's ``vllm:spec_decode_num_accepted_tokens_total`` before and after), or
            None when not measured.
    """

    rate: float
    identical: int
    prompts: int
    per_prompt: pd.DataFrame
    accepted: int | None = None

    @property
    def lossless(self) -> bool:
        """Every output token-for-token identical."""
        return self.identical == self.prompts

    @property
    def vacuous(self) -> bool:
        """No drafted token was accepted during the compared requests, so the comparison
        proves nothing either way (vLLM's own CPU test, ``tests/v1/e2e/test_cpu_spec_decode.py``
        in 0.32.0, fails such a run)."""
        return self.accepted == 0

    def summary(self, label: str = "drafting") -> str:
        """One line for a notebook: the verdict, the agreeing share, the first divergence."""
        firsts = [int(x) for x in self.per_prompt["first_divergence"].dropna()]
        where = f"; first divergence at token {min(firsts)}" if firsts else ""
        verdict = "lossless" if self.lossless else "NOT lossless"
        if self.vacuous:
            verdict = "proves nothing (no drafted token was accepted during these requests)"
        return (
            f"{label} vs no drafting, greedy: {verdict}: {self.rate:.1%} of token positions "
            f"agree, {self.identical}/{self.prompts} outputs identical{where}"
        )


def match(
    reference: Sequence[Sequence[int]], other: Sequence[Sequence[int]], accepted: int | None = None
) -> Match:
    """Compare ``other`` against ``reference`` prompt by prompt.

    Args:
        reference, other: token ids per prompt (greedy), the same prompts in the same order.
        accepted: draft tokens accepted while ``other`` was generated (:attr:`Match.accepted`).

    Raises:
        ValueError: the two runs cover a different number of prompts.
    """
    if len(reference) != len(other):
        raise ValueError(
            f"compare the same prompts: {len(reference)} reference outputs, {len(other)} others"
        )
    rows, agree_all, compared_all = [], 0, 0
    for i, (r, o) in enumerate(zip(reference, other, strict=True)):
        n = min(len(r), len(o))
        agree = sum(1 for a, b in zip(r[:n], o[:n], strict=True) if a == b)
        first = next((j for j in range(n) if r[j] != o[j]), None)
        if first is None and len(r) != len(o):
            first = n
        rows.append(
            {
                "prompt": i,
                "compared": n,
                "agree": agree,
                "first_divergence": first,
                "reference_len": len(r),
                "other_len": len(o),
            }
        )
        agree_all += agree
        compared_all += n
    table = pd.DataFrame(rows)
    identical = int(table["first_divergence"].isna().sum())
    return Match(
        agree_all / compared_all if compared_all else 1.0, identical, len(rows), table, accepted
    )
