"""What a notebook run's mode implies, in one table: sampling, ``max_tokens``, benchmark and
eval sizes, the reasoning budgets, and what the outputs mean.

Derived together so that one mode's defaults cannot contradict each other (a reasoning budget
at or above ``max_tokens`` failed the h200 notebook's step 10 on an H200, weightless,
2026-12-01).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
        max_tokens: per chat request, reasoning included (tokens).
        temperature, top_p: sampling (the stand-in reproduces its training prompts only at
            temperature 0).
        bench_concurrencies: the benchmark's points (requests in flight).
        bench_input_len, bench_output_len: tokens per prompt / per answer in the benchmark.
        eval_items, budget_items: items the accuracy step scores (the stand-in: its 8 trained
            + 8 held out) / the budget curve scores (the first of those).
        budgets: the curve's points: ``"off"``, a reasoning cap (tokens), None for no cap.
        eval_concurrency: requests in flight during the evals.
        noise: the text is noise by construction (random weights).
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
    """The budget curve's points for a run of ``max_tokens`` (tokens, >= 1): reasoning off,
    capped at ``nominal`` tokens or a quarter of ``max_tokens`` if smaller (``RequestSettings``
    refuses a budget at or above ``max_tokens``), no cap.
    """
    cap = min(nominal, max_tokens // 4)
    return ("off", cap, None) if cap >= 1 else ("off", None)  # under 4 tokens: no room for a cap


def run_defaults(mode: str, max_tokens: int | None = None) -> RunDefaults:
    """The defaults of ``mode`` (the rows of ``_TABLE``); ``max_tokens`` (a notebook's explicit
    value, tokens) sizes the budgets instead of the mode's own.

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


#: What a run serves (:attr:`Run.weights`): the checkpoint, random weights, the CPU stand-in.
WEIGHTS = MODES


@dataclass(frozen=True)
class Run:
    """One notebook run: what it serves, where the server runs, and every default that follows.

    Made by :func:`helpers.weights.prepare.prepare`, completed by
    :func:`helpers.weights.prepare.fetch`, kept on the server handle (``srv.run``) by
    :func:`helpers.server.launch.launch_server`; later steps read it with :func:`run_of`.

    Attributes:
        weights: one of :data:`WEIGHTS`: ``"download"`` (the real checkpoint), ``"weightless"``
            (random weights on a GPU) or ``"stand_in"`` (the CPU stand-in).
        server_url: a server that runs elsewhere, attached to instead of launched (``weights``
            still says what it serves).
        max_tokens: the notebook's explicit ``max_tokens`` (tokens; None: the mode's).
        target: the resolved GPU target (a ``ServeConfig``) the notebook names.
        served: the config actually served, once fetched (else None).
    """

    weights: str = "download"
    server_url: str | None = None
    max_tokens: int | None = None
    target: Any = None
    served: Any = None

    def __post_init__(self) -> None:
        if self.weights not in WEIGHTS:
            raise ValueError(f"Run: weights={self.weights!r} is not one of {', '.join(WEIGHTS)}.")
        n, mml = self.max_tokens, (getattr(self.served, "args", None) or {}).get("--max-model-len")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"max_tokens={n!r}: pass a whole number of tokens >= 1 per request, or None (the mode's).")  # fmt: skip
        if n and type(mml) is int and n >= mml:  # vLLM would answer 400
            raise ValueError(f"max_tokens={n} is not below the served --max-model-len {mml} (prompt and answer share it): pass max_tokens below {mml}, or on a GPU a larger --max-model-len in extra_args.")  # fmt: skip

    @property
    def mode(self) -> str:
        """``"attach"`` when the server runs elsewhere, else :attr:`weights`."""
        return "attach" if self.server_url else self.weights

    @property
    def stand_in(self) -> bool:
        """The CPU stand-in is served."""
        return self.weights == "stand_in"

    @property
    def weightless(self) -> bool:
        """Random weights on a GPU (noise text)."""
        return self.weights == "weightless"

    @property
    def attached(self) -> bool:
        """The server runs elsewhere (nothing launched, nothing stopped)."""
        return bool(self.server_url)

    @property
    def defaults(self) -> RunDefaults:
        """This mode's sizes and sampling (:func:`run_defaults`, budgets sized by
        :attr:`max_tokens` when given)."""
        return run_defaults(self.weights, self.max_tokens)

    @property
    def noise(self) -> bool:
        """The text is noise by construction (random weights)."""
        return self.defaults.noise

    @property
    def tag(self) -> str:
        """What output names add for this mode: ``"-standin"`` on the stand-in, else ``""``."""
        return "-standin" if self.stand_in else ""

    @property
    def shown_as(self) -> str:
        """What a plot's or table's title adds: ``" (CPU stand-in)"``, ``" (weightless)"``
        or ``""``."""
        return {"stand_in": " (CPU stand-in)", "weightless": " (weightless)"}.get(self.weights, "")

    @property
    def config(self) -> Any:
        """The config served when fetched, else the target."""
        return self.served if self.served is not None else self.target

    def for_target(self, target: Any) -> Run:
        """The same mode for another target (e.g. a comparison's second config): not
        fetched, launched here (no ``server_url``), ``max_tokens`` kept."""
        return Run(self.weights, None, self.max_tokens, target, None)

    def serving(self, config: Any) -> Run:
        """This run serving ``config`` (a config built by hand, e.g. the stand-in with a
        drafting mode's flags) instead of what :func:`~helpers.weights.prepare.fetch` gets."""
        return Run(self.weights, self.server_url, self.max_tokens, self.target, config)

    def describe(self) -> str:
        """One line: the mode and what its output means."""
        said = {
            "download": "the real checkpoint on a GPU",
            "weightless": "the exact architecture with random weights on a GPU (real speed "
            "and memory; the text is noise)",
            "stand_in": "the tiny CPU stand-in (the pipeline, not the model)",
        }[self.weights]
        where = f", attached to {self.server_url}" if self.server_url else ""
        return f"run: {self.weights}{where}: {said}"

    @classmethod
    def of_config(cls, config: Any, server_url: str | None = None) -> Run:
        """The run a ``ServeConfig`` serves by itself (a server launched without
        :func:`~helpers.weights.prepare.prepare`): the stand-in when ``config.stand_in``,
        weightless when its args load dummy weights (``--load-format dummy``), else the
        checkpoint; ``config`` None (an attached server of unknown config): the checkpoint."""
        args = getattr(config, "args", None)
        if getattr(config, "stand_in", False):
            weights = "stand_in"
        elif isinstance(args, Mapping) and args.get("--load-format") == "dummy":
            weights = "weightless"
        else:
            weights = "download"
        return cls(weights, server_url or None, None, config, config)


def serves_standin(source: Any) -> bool:
    """True when ``source`` (as :func:`run_of` takes it; None: a GPU run) serves the CPU
    stand-in: the tables, plots, scenarios and tuning grids that shrink or relabel for it."""
    return source is not None and run_of(source).stand_in


def run_of(source: Any, caller: str = "run_of") -> Run:
    """The :class:`Run` of ``source``: a ``Run``, a server or fleet (``srv.run``, or from its
    ``config``), or a ``ServeConfig`` (:meth:`Run.of_config`); ``caller`` names the user's function
    in the error.

    Raises:
        TypeError: anything else (None, a target name, a number): names what to pass.
    """
    if isinstance(source, Run):
        return source
    run = getattr(source, "run", None)
    if isinstance(run, Run):
        return run
    if hasattr(source, "base_url") or hasattr(source, "replicas"):  # a server or a fleet
        return Run.of_config(getattr(source, "config", None))
    if callable(getattr(source, "cli_flags", None)):  # a ServeConfig
        return Run.of_config(source)
    raise TypeError(
        f"{caller}: pass the server (srv = launch_server(...)), its run (srv.run, or the run "
        f"prepare() returned) or a ServeConfig; got {type(source).__name__} {source!r:.60}."
    )
