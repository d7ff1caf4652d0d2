"""What a notebook run's mode implies, in one table: sampling, ``max_tokens``, benchmark and
eval sizes, the reasoning budgets, and what the outputs mean.

A notebook runs on a GPU with the real checkpoint (``"download"``), on a GPU with random
weights (``"weightless"``: real kernels, shapes and memory; noise text), or on the CPU
stand-in (``"stand_in"``); attaching to a running server keeps the mode of the weights it
serves. Every default that depends on the mode is here, derived together, so that one
mode's defaults cannot contradict each other (a reasoning budget at or above ``max_tokens``
failed the h200 notebook's step 10 on an H200, weightless, 2026-12-01). The chat options
(:meth:`helpers.chat.request.ChatOptions.for_run`), the benchmark step and the quality step
(:func:`helpers.evals.step.quality_step`) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Seed 004: "Recommended sampling settings are a temperature of 1.0 and top_p of 0.95";
#: every example uses max_tokens=16000.
GPU_MAX_TOKENS = 16000
GPU_TEMPERATURE = 1.0
GPU_TOP_P = 0.95
#: The budget curve's capped point on a GPU (tokens of reasoning), when ``max_tokens`` leaves
#: room for it (:func:`budget_points`).
GPU_BUDGET = 1024
#: The stand-in's capped point: it reasons in tens of tokens (``cookbook/demo.yaml``).
STANDIN_BUDGET = 8

#: Per mode: max_tokens, temperature, top_p, benchmark concurrencies, input and output
#: tokens, eval items, budget-curve items, the curve's nominal cap, eval concurrency, noise.
_TABLE = {
    "download": (GPU_MAX_TOKENS, GPU_TEMPERATURE, GPU_TOP_P, (1, 16, 64, 256), 1024, 256, 200, 50, GPU_BUDGET, 32, False),
    "weightless": (256, GPU_TEMPERATURE, GPU_TOP_P, (1, 16, 64, 256), 1024, 256, 50, 50, GPU_BUDGET, 32, True),
    "stand_in": (1024, 0.0, 1.0, (1, 2, 4), 64, 32, 16, 16, STANDIN_BUDGET, 4, False),
}  # fmt: skip
MODES = tuple(_TABLE)


@dataclass(frozen=True)
class RunDefaults:
    """The defaults of one mode (a notebook parameter left at None takes these).

    Attributes:
        mode: ``"download"``, ``"weightless"`` or ``"stand_in"``.
        max_tokens: per chat request, reasoning included (tokens).
        temperature, top_p: sampling (the stand-in decodes greedily: it reproduces its
            training prompts only at temperature 0).
        bench_concurrencies: the benchmark's points (requests in flight).
        bench_input_len, bench_output_len: tokens per prompt / per answer in the benchmark.
        eval_items: items the accuracy step scores (the stand-in: its 8 trained + 8 held out).
        budget_items: items the budget curve scores (the first of the accuracy step's).
        budgets: the curve's points: ``"off"``, a reasoning cap in tokens (below
            ``max_tokens``), None for no cap.
        eval_concurrency: requests in flight during the evals.
        noise: the text is noise by construction (random weights): answers, accuracy,
            acceptance and schema answers prove the pipeline, not the model.
    """

    mode: str
    max_tokens: int
    temperature: float
    top_p: float
    bench_concurrencies: tuple[int, ...]
    bench_input_len: int
    bench_output_len: int
    eval_items: int
    budget_items: int
    budgets: tuple[str | int | None, ...]
    eval_concurrency: int
    noise: bool


def budget_points(nominal: int, max_tokens: int) -> tuple[str | int | None, ...]:
    """The budget curve's points for a run of ``max_tokens``: reasoning off, capped, no cap.

    The cap is ``nominal`` tokens, or a quarter of ``max_tokens`` when that is smaller, so
    that it stays below ``max_tokens`` with room for the answer (``ChatOptions`` refuses a
    budget at or above ``max_tokens``); below 4 ``max_tokens`` there is no capped point.

    Args:
        nominal: the cap the mode wants (tokens).
        max_tokens: the run's ``max_tokens`` (tokens, >= 1).
    """
    cap = min(nominal, max_tokens // 4)
    return ("off", cap, None) if cap >= 1 else ("off", None)  # under 4 tokens: no room for a cap


def run_defaults(mode: str, max_tokens: int | None = None) -> RunDefaults:
    """The defaults of ``mode``; ``max_tokens`` (a notebook's explicit value) sizes the
    budgets instead of the mode's own.

    - ``"download"`` (a GPU, real weights): seed 004's sampling and 16000 ``max_tokens``;
      the benchmark at 1 / 16 / 64 / 256 with 1024 in / 256 out; 200 GSM8K items, the
      budget curve (off / 1024 / no cap) on the first 50, 32 requests in flight.
    - ``"weightless"`` (a GPU, random weights): the same sampling and benchmark (the speed is
      real); 256 ``max_tokens`` (the text is noise, the time goes to the benchmark), 50 items
      scored once per budget (off / 64 / no cap).
    - ``"stand_in"`` (the CPU): greedy, 1024 ``max_tokens`` (its ``max_model_len`` is 2048),
      the benchmark at 1 / 2 / 4 with 64 in / 32 out, its 16 items, off / 8 / no cap, 4 in
      flight.

    Raises:
        ValueError: an unknown mode (names the three), or ``max_tokens`` < 1.
    """
    if mode not in MODES:
        raise ValueError(f"run_defaults: mode {mode!r} is not one of {', '.join(MODES)}.")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"run_defaults: max_tokens={max_tokens} must be >= 1.")
    (tokens, temperature, top_p, concurrencies, input_len, output_len, items, budget_items,
     nominal, eval_concurrency, noise) = _TABLE[mode]  # fmt: skip
    return RunDefaults(
        mode, tokens, temperature, top_p, concurrencies, input_len, output_len, items,
        budget_items, budget_points(nominal, max_tokens or tokens), eval_concurrency, noise,
    )  # fmt: skip


def mode_from(stand_in: bool, weightless: bool) -> str:
    """The mode of a notebook's ``stand_in`` / ``weightless`` parameters (the stand-in wins:
    it is random-free and CPU-sized even when ``weightless`` is also set)."""
    return "stand_in" if stand_in else "weightless" if weightless else "download"
