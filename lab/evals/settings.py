"""The request settings of one scored run (:class:`RequestSettings`): what lm-eval sends with
every item (``lab.evals.accuracy``), one value per field, checked once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from helpers.config.run import GPU_TEMPERATURE, GPU_TOP_P, run_of
from helpers.errors import check_number


@dataclass(frozen=True)
class RequestSettings:
    """What each item's request asks for.

    Attributes:
        thinking: reasoning on (the model card's default) or off, sent as
            ``chat_template_kwargs.enable_thinking``.
        reasoning_budget: a cap on reasoning tokens (tokens, >= 0, below ``max_tokens``), sent
            as ``thinking_token_budget`` (or kept by the client: ``budget_method="two_pass"``);
            None: no cap.
        max_tokens: reasoning + answer per item (tokens, >= 1; None: seed 004's 16000).
        temperature, top_p: sampling; seed 004's 1.0 and 0.95 by default.

    Raises:
        TypeError / ValueError: a value of the wrong type or range, or a budget at or above
            ``max_tokens`` (reasoning tokens count against it: the answer needs room).
    """

    thinking: bool = True
    reasoning_budget: int | None = None
    max_tokens: int | None = None
    temperature: float = GPU_TEMPERATURE
    top_p: float = GPU_TOP_P

    def __post_init__(self) -> None:
        fn = "RequestSettings"
        if not isinstance(self.thinking, bool):
            raise TypeError(f"{fn}: `thinking` must be True or False; got {self.thinking!r:.60}.")
        check_number(fn, "reasoning_budget", self.reasoning_budget, integer=True, minimum=0, optional=True)  # fmt: skip
        check_number(fn, "max_tokens", self.max_tokens, integer=True, minimum=1, optional=True)
        check_number(fn, "temperature", self.temperature, minimum=0)
        check_number(fn, "top_p", self.top_p, minimum=0, exclusive=True)
        budget, cap = self.reasoning_budget, self.max_tokens
        if budget is not None and cap is not None and budget >= cap:
            raise ValueError(
                f"{fn}: reasoning_budget={budget} is not below max_tokens={cap}: reasoning "
                "tokens count against max_tokens, so leave room for the answer."
            )

    def replace(self, **changes: Any) -> RequestSettings:
        """A copy with ``changes`` applied, checked as a new one is."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def for_run(
        cls,
        run: Any,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
    ) -> RequestSettings:
        """The run's settings (``srv.run.defaults``, :func:`helpers.config.run.run_defaults`:
        on a GPU temperature 1.0, top_p 0.95, max_tokens 16000, seed 004; the stand-in greedy,
        1024), the run's own ``max_tokens`` next; a value given here wins.

        Raises:
            TypeError: ``run`` is not a server or run (names what to pass).
        """
        r = run_of(run, "RequestSettings.for_run")
        d = r.defaults
        return cls(
            max_tokens=max_tokens or r.max_tokens or d.max_tokens,
            temperature=d.temperature if temperature is None else temperature,
            top_p=d.top_p if top_p is None else top_p,
        )
