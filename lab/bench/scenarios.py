"""Benchmark scenarios from ``cookbook/scenarios.yaml``: the request shapes the seeds measure
(on ``vllm bench serve``'s random dataset) and the multi-turn agent workload (a custom dataset
generated locally: :mod:`lab.bench.agent_workload`), scaled down for the CPU stand-in by
the YAML's ``standin`` section (:func:`scale_for_standin`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from helpers.config.run import serves_standin
from helpers.errors import BenchError, RecipeError
from helpers.paths import COOKBOOK_DIR
from lab.bench.agent_workload import (
    MIN_TOOL_TOKENS,
    AgentShape,
    load_chat_tokenizer,
    write_point_workload,
)

SCENARIOS_PATH = COOKBOOK_DIR / "scenarios.yaml"


#: Output tokens/s per user by concurrency, NVFP4 weightless architecture on one H200 through
#: these helpers (docs/results/h200/summary-nvfp4.json: vLLM 0.26.0, Marlin MoE, 1024 in / 256
#: out): 272.1, 2,981.7 / 16, 4,680.1 / 64, 5,071.4 / 256. Used only to estimate durations.
H200_PER_USER_TPS = {1: 272.1, 16: 2981.7 / 16, 64: 4680.1 / 64, 256: 5071.4 / 256}
#: Prefill tokens/s on one H200: the same run's total throughput at concurrency 256 (25,476
#: tok/s, four fifths of it prompt tokens), rounded down.
H200_PREFILL_TPS = 20_000.0
#: Speed relative to the H200: decode is memory-bound, so the HBM bandwidth ratio (NVIDIA
#: datasheets: H100 SXM 3.35 TB/s, H200 4.8 TB/s).
GPU_SPEED = {"h200": 1.0, "h100": 3.35 / 4.8}
#: A cold server start with the recipe's Hopper kernels: 155-254 s measured on the H200
#: (docs/results/README.md#cold-starts-on-an-h200; vLLM 0.32.0 / 0.28.0), rounded up to 5 minutes.
STARTUP_S = 300.0


def per_user_tps(concurrency: int) -> float:
    """:data:`H200_PER_USER_TPS` at ``concurrency``, interpolated log-log (clamped at the ends)."""
    pts = sorted(H200_PER_USER_TPS.items())
    c = min(max(float(concurrency), pts[0][0]), pts[-1][0])
    for (c0, v0), (c1, v1) in zip(pts, pts[1:], strict=False):
        if c0 <= c <= c1:
            t = (math.log(c) - math.log(c0)) / (math.log(c1) - math.log(c0))
            return math.exp(math.log(v0) + t * (math.log(v1) - math.log(v0)))
    return pts[-1][1]


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One benchmark shape. Token counts are per request.

    Attributes:
        name, label, description, source: identity and the seed it comes from.
        input_len: tokens of each prompt's own part (``--random-input-len``).
        output_len: tokens generated per request (``--random-output-len``, ``--ignore-eos``).
        prefix_len: tokens of one prefix shared by every prompt of a point (``--random-prefix-len``).
        concurrencies: ``--max-concurrency`` values to sweep.
        num_prompts: fixed prompts per point, or None (see :meth:`num_prompts_for`).
        prompts_per_concurrency: prompts per point = this x concurrency (agentic rounds), or None.
        reference: a seed's measured numbers for this shape, if any.
        stand_in: True when scaled down for the CPU stand-in; ``scale`` is the factor applied.
        agent: a multi-turn agent workload's own fields (:data:`AGENT_FIELDS`: ``turns``,
            ``tools``, ``system_len``, ``tool_result_len``, ``followup_len``,
            ``sessions_per_concurrency``), or None (the random dataset). Then ``prefix_len`` is
            the system prompt + tool schemas, ``input_len`` each session's first user message,
            ``output_len`` the tokens generated per turn (:class:`AgentShape`).
    """

    name: str
    label: str
    description: str
    source: str
    input_len: int
    output_len: int
    prefix_len: int = 0
    concurrencies: tuple[int, ...] = (1,)
    num_prompts: int | None = None
    prompts_per_concurrency: int | None = None
    reference: Mapping[str, Any] | None = None
    stand_in: bool = False
    scale: float = 1.0
    agent: Mapping[str, int] | None = None

    @property
    def title(self) -> str:
        """The shapes this scenario runs, for a figure's title: its ``label`` as written; scaled
        for the stand-in, its name and the scaled token counts (the label states the full
        scenario's), e.g. ``"agentic scaled for the stand-in: 279-token shared prefix, 17 in /
        87 out tokens"``."""
        if not self.stand_in:
            return self.label
        shared = f"{self.prefix_len:,}-token shared prefix, " if self.prefix_len else ""
        per = " per turn" if self.agent else ""
        return (
            f"{self.name} scaled for the stand-in: {shared}{self.input_len:,} in / "
            f"{self.output_len:,} out tokens{per}"
        )

    @property
    def turn_growth(self) -> int:
        """Tokens an agent session's prompt grows by per turn (the tool call, its result and the
        follow-up); 0 without an agent workload."""
        a = self.agent
        return self.output_len + a["tool_result_len"] + a.get("followup_len", 0) if a else 0

    @property
    def total_len(self) -> int:
        """prefix + input + output tokens of one request; an agent workload's last turn (its
        history grown by :attr:`turn_growth` per turn). The chat template's markup comes on top."""
        turns = int(self.agent["turns"]) if self.agent else 1
        return self.prefix_len + self.input_len + (turns - 1) * self.turn_growth + self.output_len

    def agent_shape(self, concurrency: int | None = None) -> AgentShape | None:
        """The :class:`AgentShape` of one point (sessions from :meth:`num_prompts_for`), or None
        without an agent workload."""
        if not self.agent:
            return None
        c = int(concurrency or self.concurrencies[0])
        point = {"prefix_len": self.prefix_len, "input_len": self.input_len,
                 "output_len": self.output_len, "num_prompts": self.num_prompts_for(c)}  # fmt: skip
        return AgentShape.for_point(self.agent, point)

    def point_writer(
        self, tokenizer: Any
    ) -> Callable[[Mapping[str, Any], Path, str], tuple[str, dict[str, Any]]]:
        """What :func:`helpers.bench.sweep.sweep` calls to write each point's own sessions of
        this agent workload: loads the served model's chat tokenizer (``tokenizer``: its folder
        or a loaded one) once, and returns ``write(point, folder, label)``, which writes the
        point's sessions beside it (:func:`~lab.bench.agent_workload.write_point_workload`,
        seeded by the point) and returns ``(one line on the workload, the run_point arguments
        that replay it)``.

        Raises:
            BenchError: the scenario has no agent workload, or the tokenizer no chat template.
        """
        if not self.agent:
            raise BenchError(
                f"scenario {self.name!r} has no agent workload: its points are vLLM's random "
                "dataset, which the sweep generates itself."
            )
        tok, agent = load_chat_tokenizer(tokenizer), self.agent

        def write(point: Mapping[str, Any], folder: Path, label: str):
            work, run_args = write_point_workload(agent, point, tok, folder, label)
            return work.summary(), run_args

        return write

    def num_prompts_for(self, concurrency: int, floor: int = 16) -> int:
        """Prompts at one point: ``num_prompts`` if fixed, else ``prompts_per_concurrency``
        x concurrency, else ``max(4 x concurrency, floor)`` (:func:`helpers.bench.sizing.default_num_prompts`)."""
        if self.num_prompts:
            return int(self.num_prompts)
        if self.prompts_per_concurrency:
            return int(self.prompts_per_concurrency) * int(concurrency)
        return max(4 * int(concurrency), int(floor))

    def with_num_prompts(self, num_prompts: int | None) -> Scenario:
        """This scenario with ``num_prompts`` requests at every point (a quicker or a longer
        look at the same shape); None returns it unchanged.

        Raises:
            RecipeError: ``num_prompts`` is not a whole number of at least 1.
        """
        if num_prompts is None:
            return self
        if isinstance(num_prompts, bool) or not isinstance(num_prompts, int) or num_prompts < 1:
            raise RecipeError(
                f"num_prompts={num_prompts!r}: pass a whole number of requests per point "
                "(at least 1; 2 x the concurrency or more keeps every slot busy), or None for "
                f"the scenario's own ({self.name!r})"
            )
        return dataclasses.replace(self, num_prompts=num_prompts, prompts_per_concurrency=None)

    def bench_args(
        self, concurrency: int | None = None, dataset_path: str | None = None
    ) -> list[str]:
        """The dataset and load flags of ``vllm bench serve`` for one point. An agent workload
        replays the JSONL :func:`lab.bench.agent_workload.write_agent_workload` writes
        (``dataset_path``, default ``<name>-c<concurrency>.jsonl``) with no warm-up: see
        :func:`helpers.bench.point.dataset_args`."""
        c = int(concurrency or self.concurrencies[0])
        if self.agent:
            from helpers.bench.point import dataset_args

            path = dataset_path or f"{self.name}-c{c}.jsonl"
            return [
                *dataset_args(path), "--ignore-eos", "--num-warmups", "0",
                "--max-concurrency", str(c), "--num-prompts", str(self.num_prompts_for(c)),
            ]  # fmt: skip
        return [
            "--dataset-name", "random",
            "--random-input-len", str(self.input_len),
            "--random-output-len", str(self.output_len),
            "--random-prefix-len", str(self.prefix_len),
            "--ignore-eos",
            "--max-concurrency", str(c),
            "--num-prompts", str(self.num_prompts_for(c)),
        ]  # fmt: skip

    def bench_command(
        self,
        model: str = "nemotron-3.5-lightning",
        concurrency: int | None = None,
        base_url: str = "http://127.0.0.1:8000",
        floor: Any = None,
    ) -> str:
        """A ``vllm bench serve`` command line for a terminal (one point): the chat endpoint, or
        for an agent workload the completions endpoint (its prompts are rendered already).
        With ``floor`` (a :class:`~helpers.bench.prefix_floor.PrefixFloor`, e.g.
        :func:`~helpers.bench.prefix_floor.prefix_floor` of the server's ``/metrics`` labels, or
        its sentence), a comment line stating the prefix cache's reuse floor comes first."""
        from helpers.bench.point import (
            CHAT_BACKEND,
            CHAT_ENDPOINT,
            COMPLETIONS_BACKEND,
            COMPLETIONS_ENDPOINT,
        )

        backend, endpoint = (
            (COMPLETIONS_BACKEND, COMPLETIONS_ENDPOINT)
            if self.agent
            else (CHAT_BACKEND, CHAT_ENDPOINT)
        )
        command = shlex.join([
            "vllm", "bench", "serve",
            "--backend", backend,
            "--endpoint", endpoint,
            "--base-url", base_url,
            "--model", model,
            *self.bench_args(concurrency),
        ])  # fmt: skip
        if floor is None:
            return command
        return f"# {getattr(floor, 'sentence', floor)}\n{command}"

    @property
    def new_tokens_per_request(self) -> float:
        """Prompt tokens a request brings beyond what an earlier request of its point holds:
        ``input_len``, or an agent session's mean per turn (the first user message, then each
        turn's growth)."""
        if not self.agent:
            return float(self.input_len)
        turns = int(self.agent["turns"])
        return (self.input_len + (turns - 1) * self.turn_growth) / turns

    def expected_seconds(
        self, gpu: str = "h100", concurrencies: Sequence[int] | None = None, repeats: int = 0
    ) -> float:
        """Estimated seconds of one sweep on one GPU, without drafting or server start: per point
        ``(warm-ups + prompts) / c`` waves, each decoding ``output_len`` tokens at the measured
        per-user speed (:data:`H200_PER_USER_TPS`) and prefilling ``c x input_len`` tokens
        (:data:`H200_PREFILL_TPS`; the shared prefix once per point), scaled by
        :data:`GPU_SPEED`. ``repeats`` adds that many runs of the lowest and highest point.
        An agent workload has no warm-up and prefills :attr:`new_tokens_per_request` per request
        (its history is served from the prefix cache).
        """
        factor = GPU_SPEED[gpu.lower()]
        cs = list(concurrencies or self.concurrencies)
        total = 0.0
        for c in cs + [min(cs), max(cs)] * int(repeats):
            prompts = self.num_prompts_for(c) + (0 if self.agent else min(int(c), 8))
            waves = math.ceil(prompts / c)
            decode = self.output_len / (per_user_tps(c) * factor)
            prefill = c * self.new_tokens_per_request / (H200_PREFILL_TPS * factor)
            total += waves * (decode + prefill) + self.prefix_len / (H200_PREFILL_TPS * factor)
        return total


@functools.lru_cache(maxsize=4)
def _load(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError as exc:
        raise RecipeError(
            f"Scenario file {path} not found: run from a checkout of the cookbook."
        ) from exc
    except yaml.YAMLError as exc:
        raise RecipeError(f"Scenario file {path} is not valid YAML ({exc}); fix it.") from exc
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), dict):
        raise RecipeError(f"{path} has no 'scenarios' mapping; see cookbook/scenarios.yaml.")
    return data


#: The fields of a scenario's ``agent`` mapping (cookbook/scenarios.yaml), all whole numbers:
#: requests per session, tool schemas, system-prompt tokens (of ``prefix_len``; the tools get the
#: rest), tokens of each tool result and of each user follow-up (0: none), sessions per
#: concurrency slot.
AGENT_FIELDS = ("turns", "tools", "system_len", "tool_result_len", "followup_len",
                "sessions_per_concurrency")  # fmt: skip


def _agent_entry(name: str, raw: Any) -> dict[str, int] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) != set(AGENT_FIELDS):
        raise RecipeError(
            f"Scenario {name!r}: its agent mapping must have exactly {', '.join(AGENT_FIELDS)} "
            f"(got {sorted(raw) if isinstance(raw, Mapping) else raw!r}); fix cookbook/scenarios.yaml."
        )
    agent = {k: int(raw[k]) for k in AGENT_FIELDS}
    if (
        min(agent["turns"], agent["tools"], agent["sessions_per_concurrency"]) < 1
        or min(agent.values()) < 0
    ):
        raise RecipeError(
            f"Scenario {name!r}: agent turns, tools and sessions_per_concurrency must be at least 1 "
            "and token counts at least 0; fix cookbook/scenarios.yaml."
        )
    return agent


def _from_entry(name: str, e: Mapping[str, Any]) -> Scenario:
    try:
        agent = _agent_entry(name, e.get("agent"))
        rounds = e.get("rounds")
        if agent:  # one prompt per turn of each session
            rounds = agent["sessions_per_concurrency"] * agent["turns"]
        s = Scenario(
            name=name,
            label=str(e.get("label", name)),
            description=" ".join(str(e.get("description", "")).split()),
            source=str(e.get("source", "")),
            input_len=int(e["input_len"]),
            output_len=int(e["output_len"]),
            prefix_len=int(e.get("prefix_len") or 0),
            concurrencies=tuple(int(c) for c in (e.get("concurrencies") or [1])),
            num_prompts=int(e["num_prompts"]) if e.get("num_prompts") else None,
            prompts_per_concurrency=int(rounds) if rounds else None,
            reference=dict(e["reference"]) if e.get("reference") else None,
            agent=agent,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RecipeError(
            f"Scenario {name!r} in cookbook/scenarios.yaml is incomplete ({exc!r}): it needs integer "
            "input_len and output_len, and optional prefix_len, concurrencies, num_prompts, rounds."
        ) from exc
    if min(s.input_len, s.output_len) < 1 or s.prefix_len < 0 or min(s.concurrencies) < 1:
        raise RecipeError(
            f"Scenario {name!r}: token counts and concurrencies must be positive; fix cookbook/scenarios.yaml."
        )
    if agent and agent["system_len"] > s.prefix_len:
        raise RecipeError(
            f"Scenario {name!r}: agent system_len {agent['system_len']} exceeds prefix_len "
            f"{s.prefix_len} (the system prompt + tool schemas); fix cookbook/scenarios.yaml."
        )
    return s


def load_scenarios(path: str | Path | None = None) -> dict[str, Scenario]:
    """Every scenario of ``cookbook/scenarios.yaml`` at full (GPU) size, by name, in file order.

    Raises:
        RecipeError: the file is missing, not YAML, or an entry lacks a field.
    """
    data = _load(str(Path(path or SCENARIOS_PATH)))
    return {name: _from_entry(name, e) for name, e in data["scenarios"].items()}


def standin_settings(path: str | Path | None = None) -> dict[str, Any]:
    """The ``standin`` section: max_model_len, chat_template_tokens, token_budget, ..."""
    return dict(_load(str(Path(path or SCENARIOS_PATH))).get("standin") or {})


def scale_for_standin(s: Scenario, settings: Mapping[str, Any] | None = None) -> Scenario:
    """``s`` shrunk for the CPU stand-in: token counts x ``token_budget / total`` (at most 1,
    at least ``min_tokens``; a zero prefix stays zero), concurrencies capped at
    ``max_concurrency``, a fixed ``num_prompts`` keeping its ratio to the largest concurrency
    (at least ``min_prompts_per_concurrency`` x concurrency). An agent workload's token fields
    shrink by the same factor (its ``total`` is the last turn), and its tools to one per
    :data:`~lab.bench.agent_workload.MIN_TOOL_TOKENS` of the scaled tool schemas (at least
    one); its turns and sessions stay.

    Raises:
        RecipeError: the scaled request does not fit the stand-in's ``max_model_len``.
    """
    st = dict(settings or standin_settings())
    budget = int(st.get("token_budget", 384))
    floor = int(st.get("min_tokens", 8))
    cap = int(st.get("max_concurrency", 4))
    per_c_min = int(st.get("min_prompts_per_concurrency", 4))
    concs = tuple(dict.fromkeys(min(int(c), cap) for c in s.concurrencies))
    num_prompts = None
    if s.num_prompts:
        ratio = s.num_prompts / max(s.concurrencies)
        num_prompts = max(round(ratio * max(concs)), per_c_min * max(concs))
    per_c = max(s.prompts_per_concurrency, per_c_min) if s.prompts_per_concurrency else None

    def scaled(factor: float) -> Scenario:
        def shrink(n: int) -> int:
            return 0 if n == 0 else max(floor, round(n * factor))

        agent = None
        if s.agent:
            agent = dict(s.agent)
            for key in ("system_len", "tool_result_len", "followup_len"):
                agent[key] = shrink(agent[key])
            agent["system_len"] = min(agent["system_len"], shrink(s.prefix_len))
            tool_len = shrink(s.prefix_len) - agent["system_len"]
            agent["tools"] = max(1, min(agent["tools"], tool_len // MIN_TOOL_TOKENS))
        return dataclasses.replace(
            s, input_len=shrink(s.input_len), output_len=shrink(s.output_len),
            prefix_len=shrink(s.prefix_len), concurrencies=concs, num_prompts=num_prompts,
            prompts_per_concurrency=per_c, stand_in=True, scale=factor, agent=agent,
        )  # fmt: skip

    small = scaled(min(1.0, budget / s.total_len))
    for _ in range(8):  # an agent's floors add up over its turns: shrink until it fits
        if small.total_len <= budget or not s.agent:
            break
        small = scaled(small.scale * budget / small.total_len * 0.98)
    limit = int(st.get("max_model_len", 2048)) - int(st.get("chat_template_tokens", 16))
    if small.total_len > limit:
        raise RecipeError(
            f"Scenario {s.name!r} scaled for the stand-in needs {small.total_len} tokens per request, "
            f"over the stand-in's --max-model-len {st.get('max_model_len')} minus the chat template: "
            "lower standin.token_budget in cookbook/scenarios.yaml."
        )
    return small


def scenario(name: str, run: Any = None, *, path: str | Path | None = None) -> Scenario:
    """One scenario by name, scaled for the CPU stand-in when ``run`` (a server, its
    ``srv.run`` or a :class:`helpers.config.run.Run`; None: as written) serves the stand-in.

    Raises:
        RecipeError: an unknown name (the message lists the valid ones).
    """
    all_ = load_scenarios(path)
    if name not in all_:
        raise RecipeError(
            f"Unknown scenario {name!r}. Valid scenarios: {', '.join(all_)} (cookbook/scenarios.yaml)."
        )
    s = all_[name]
    return scale_for_standin(s, standin_settings(path)) if serves_standin(run) else s


def scenarios_frame(run: Any = None, names: Sequence[str] | None = None):
    """A pandas DataFrame of the scenarios (one row each) for a notebook, scaled for ``run``
    as :func:`scenario` does."""
    import pandas as pd

    rows = []
    for n in names or load_scenarios():
        s = scenario(n, run)
        rows.append(
            {
                "scenario": s.name,
                "prefix_len": s.prefix_len,
                "input_len": s.input_len,
                "output_len": s.output_len,
                "concurrencies": list(s.concurrencies),
                "prompts/point": ", ".join(str(s.num_prompts_for(c)) for c in s.concurrencies),
                "source": s.source,
            }
        )
    return pd.DataFrame(rows)
