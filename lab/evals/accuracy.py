"""The accuracy step (:func:`evaluate`): score a running server on a shipped item set through
lm-eval (``lm-eval[api]==0.4.13``), as vLLM's own accuracy checks and SGLang's cookbook do. Its
chat client sends our request fields untouched (``chat_template_kwargs``,
``thinking_token_budget``), scores only ``message.content``, and a task is a YAML file over a
local JSON-lines file: no hub at run time. Items are scored as lm-eval scores GSM8K
(:data:`NUMBER_PATTERN`, :data:`IGNORE`: the answer's last number, exact match).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from helpers.chat.types import REASONING_PARSER_FLAGS, TOOL_PARSER_FLAGS
from helpers.config.demo import load_demo
from helpers.config.evalsets import ITEM_SETS, items_by_id, load_items
from helpers.config.run import GPU_MAX_TOKENS, run_of
from helpers.errors import CookbookError
from helpers.machine.libraries import LIBRARIES
from helpers.paths import out_dir
from helpers.server.endpoint import server_root
from lab.evals.settings import RequestSettings
from lab.evals.stats import Proportion, wilson

#: Published figures a notebook prints beside its own (source named; none is for Lightning on
#: this exact task: they say what a healthy model of the family scores).
REFERENCES = {
    "gsm8k": (
        "vLLM's CI floor for Nemotron-3-Nano-30B-A3B BF16 on GSM8K: 0.69 (1,319 items, 5-shot, "
        "completions; vllm-project/vllm tests/evals/gsm8k/configs/Nemotron-3-Nano-30B-A3B-BF16.yaml). "
        "NVIDIA: Lightning's NVFP4 checkpoint keeps a median 99.24 % of BF16 across its benchmarks."
    )
}
#: The floor of :data:`REFERENCES` as a fraction: vLLM's CI fails the family's BF16 checkpoint
#: below it on GSM8K (``tests/evals/gsm8k/configs/Nemotron-3-Nano-30B-A3B-BF16.yaml``, 0.69;
#: 5-shot completions, not this step's chat items, so only a score wholly below it is a sign).
REFERENCE_FLOORS = {"gsm8k": 0.69}

#: lm-eval's GSM8K ``flexible-extract`` filter: the last number in the answer.
NUMBER_PATTERN = r"(-?[$0-9.,]{2,})|(-?[0-9]+)"
#: GSM8K's ``regexes_to_ignore`` (lm-eval ``gsm8k.yaml``): commas, ``$``, a final period.
IGNORE = [",", "\\$", "(?s).*#### ", "\\.$"]


class EvalError(CookbookError):
    """The accuracy step could not run (the message names the cause and the fix)."""


@dataclass
class AccuracyResult:
    """One configuration scored on one item list.

    Attributes:
        label: what was scored (e.g. ``"nvfp4"``).
        item_set: the set's key (``"gsm8k"``).
        accuracy: right / scored, with its 95 % Wilson interval.
        items: one row per item: ``id``, ``target``, ``extracted``, ``correct``, ``response``.
        generated_tokens: tokens the server generated (reasoning + answers,
            ``vllm:generation_tokens_total``); None without metrics.
        seconds: wall time of the run.
        settings: the request settings sent (thinking, budget, max_tokens, sampling).
        path: the folder the per-item table (``items.csv``) and ``result.json`` went to.
        length_finished: requests the server ended at ``max_tokens``
            (``vllm:request_success_total{finished_reason="length"}``); None without metrics or
            with the two-pass budget (its first pass ends by length on purpose).
    """

    label: str
    item_set: str
    accuracy: Proportion
    items: pd.DataFrame
    generated_tokens: float | None
    seconds: float
    settings: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    length_finished: float | None = None

    @property
    def mean_tokens(self) -> float | None:
        """Mean generated tokens per item (reasoning included), or None."""
        n = len(self.items)
        return self.generated_tokens / n if self.generated_tokens is not None and n else None

    def scored_items(self) -> list[dict]:
        """The items this run scored, in its order (score another configuration on exactly
        these to pair the two: :func:`lab.evals.compare.compare`)."""
        return items_by_id([str(i) for i in self.items["id"]], self.item_set)

    def correct(self) -> list[bool]:
        """Per-item correctness, in item order (for the paired tests)."""
        return [bool(x) for x in self.items["correct"]]

    def unanswered(self) -> list[str]:
        """Ids of the items whose reply had no answer text: lm-eval scores a reply with
        ``content: null`` (reasoning that used every token, lm-eval #3244, #3044) as an empty
        answer, an ordinary wrong one; these are them, in item order."""
        return [str(i) for i, r in zip(self.items["id"], self.items["response"], strict=True)
                if not str(r if isinstance(r, str) else "").strip()]  # fmt: skip

    def summary(self) -> str:
        """The accuracy with its interval, tokens per item, seconds; then, when items got no
        answer, how many of N, their ids, why and the fixes (the accuracy stays lm-eval's)."""
        tok = f", {self.mean_tokens:.0f} tokens per item" if self.mean_tokens is not None else ""
        line = (
            f"{self.label}: {self.item_set} accuracy {self.accuracy}{tok}, "
            f"{self.seconds:.0f} s ({'one run' if self.settings.get('temperature', 0) else 'greedy'})"
        )
        empty = self.unanswered()
        if not empty:
            return line
        max_tokens = self.settings.get("max_tokens")
        ids = ", ".join(empty[:10]) + (f" and {len(empty) - 10} more" if len(empty) > 10 else "")
        if self.length_finished:
            why = (
                f"the server ended {self.length_finished:.0f} request(s) at max_tokens={max_tokens} "
                "(reasoning counts against max_tokens), so those replies had no answer text"
            )
        else:
            why = "those replies had no answer text (content empty or null)"
        fixes = (
            "raise max_tokens, set a reasoning budget (reasoning_budget=N below max_tokens), "
            "or turn thinking off"
            if self.settings.get("thinking")
            else "raise max_tokens"
        )
        return (
            f"{line}\n  {len(empty)} of {len(self.items)} items got no answer (ids {ids}): {why}. "
            f"They count as wrong in the accuracy above. Fix: {fixes}."
        )


def _task_yaml(name: str, data: Path, gen: dict[str, Any], prompt: str) -> str:
    """The lm-eval task over the local JSON-lines file ``data``."""
    doc_to_text = prompt.replace("{question}", "{{question}}")
    task = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": doc_to_text,
        "doc_to_target": "{{target}}",
        "generation_kwargs": gen,
        "filter_list": [
            {
                "name": "flexible-extract",
                "filter": [
                    {"function": "regex", "group_select": -1, "regex_pattern": NUMBER_PATTERN},
                    {"function": "take_first"},
                ],
            }
        ],
        "metric_list": [
            {
                "metric": "exact_match",
                "aggregation": "mean",
                "higher_is_better": True,
                "ignore_case": True,
                "ignore_punctuation": False,
                "regexes_to_ignore": IGNORE,
            }
        ],
        "metadata": {"version": 1},
    }
    return json.dumps(task, indent=2)  # JSON is YAML


def _resolve_items(items: list[dict] | int | None, item_set: str) -> list[dict]:
    if items is None or isinstance(items, int):
        every = load_items(item_set)
        items = every if items is None else every[: max(0, items)]
    if not items:
        raise EvalError("No items to score: pass items=N with N >= 1, or None for the whole set.")
    return items


@dataclass
class _Run:
    """One scored configuration, prepared: its folder, lm-eval task and request settings."""

    label: str
    folder: Path
    task: str
    settings: dict[str, Any]
    two_pass: bool = False


def _prepare(
    label: str,
    items: list[dict],
    opts: RequestSettings,
    item_set: str,
    budget_method: str = "server",
) -> _Run:
    """Write the run's items and its lm-eval task under ``out/evals/<label>/``."""
    prompt = load_demo()["accuracy"]["prompt"]
    folder = out_dir("evals", label)
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "items.jsonl"
    data.write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items))
    max_tokens = opts.max_tokens or GPU_MAX_TOKENS
    gen: dict[str, Any] = {
        "until": [],
        "max_gen_toks": max_tokens,
        "temperature": opts.temperature,
        "top_p": opts.top_p,
        "chat_template_kwargs": {"enable_thinking": opts.thinking},
    }
    if opts.reasoning_budget is not None:
        gen["thinking_token_budget"] = opts.reasoning_budget
    key = json.dumps([label, [it["id"] for it in items], gen], sort_keys=True)
    task = f"cookbook_{item_set}_{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    tasks_dir = folder / "task"
    shutil.rmtree(tasks_dir, ignore_errors=True)
    tasks_dir.mkdir()
    (tasks_dir / f"{task}.yaml").write_text(_task_yaml(task, data, gen, prompt))
    settings = {
        "thinking": opts.thinking,
        "reasoning_budget": opts.reasoning_budget,
        "max_tokens": max_tokens,
        "temperature": opts.temperature,
        "top_p": opts.top_p,
        "items": len(items),
        "item_set": ITEM_SETS[item_set].source,
    }
    two_pass = budget_method == "two_pass" and opts.reasoning_budget is not None and opts.thinking
    if opts.reasoning_budget is not None:
        settings["budget_method"] = "two_pass" if two_pass else "server"
    return _Run(label, folder, task, settings, two_pass)


def _result(run: _Run, item_set: str, done: dict[str, Any]) -> AccuracyResult:
    """The :class:`AccuracyResult` of a run from what the lm-eval child wrote."""
    samples = sorted(done["samples"], key=lambda s: s["doc_id"])
    rows = [
        {
            "id": s["doc"]["id"],
            "target": s["doc"]["target"],
            "extracted": s["filtered_resps"][0] if s.get("filtered_resps") else "",
            "correct": bool(s["exact_match"]),
            "response": s["resps"][0][0] if s.get("resps") else "",
        }
        for s in samples
    ]
    table = pd.DataFrame(rows)
    k = int(table["correct"].sum())
    before, after = done.get("tokens_before"), done.get("tokens_after")
    ended = [done.get("length_before"), done.get("length_after")]
    length = ended[1] - (ended[0] or 0.0) if ended[1] is not None and not run.two_pass else None
    result = AccuracyResult(
        label=run.label,
        item_set=item_set,
        accuracy=wilson(k, len(table)),
        items=table,
        generated_tokens=(after - before) if before is not None and after is not None else None,
        seconds=done["seconds"],
        settings=run.settings,
        path=run.folder,
        length_finished=length,
    )
    table.to_csv(run.folder / "items.csv", index=False)
    (run.folder / "result.json").write_text(
        json.dumps(
            {
                "label": run.label,
                "accuracy": result.accuracy.value,
                "k": k,
                "n": len(table),
                "wilson_95": [result.accuracy.low, result.accuracy.high],
                "generated_tokens": result.generated_tokens,
                "seconds": result.seconds,
                "unanswered": result.unanswered(),
                "length_finished": length,
                "settings": run.settings,
            },
            indent=2,
        )
    )
    return result


def _served_max_model_len(base: str) -> int | None:
    """The server's ``max_model_len`` (tokens) from ``GET {base}/models``; None when it does
    not say (another OpenAI-compatible server) or does not answer (lm-eval then names that)."""
    try:
        data = httpx.get(f"{base}/models", timeout=10).json().get("data") or []
        value = data[0].get("max_model_len") if data else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _fit_max_tokens(label: str, opts: RequestSettings, limit: int | None) -> RequestSettings:
    """``opts`` with ``max_tokens`` fitted to the server's ``max_model_len`` (said in one
    line): vLLM 0.32.0 refuses ``max_tokens`` above ``max_model_len`` with HTTP 400
    (``vllm/renderers/params.py``) and gives each reply what its prompt leaves of the rest
    (``get_max_tokens``, ``vllm/entrypoints/serve/utils/api_utils.py``).

    Raises:
        EvalError: a reasoning budget that the fitted ``max_tokens`` cannot hold (names both).
    """
    asked = opts.max_tokens or GPU_MAX_TOKENS
    if limit is None or asked <= limit:
        return opts
    if opts.reasoning_budget is not None and opts.reasoning_budget >= limit:
        raise EvalError(
            f"{label}: reasoning_budget={opts.reasoning_budget} does not fit the server's "
            f"max_model_len={limit} (prompt + reasoning + answer): lower the budget below "
            f"{limit}, or restart vLLM with a larger --max-model-len."
        )
    print(
        f"{label}: max_tokens={asked} is above the server's max_model_len={limit}: each item "
        f"is sent with max_tokens={limit} (vLLM gives a reply what its prompt leaves of it)."
    )
    return opts.replace(max_tokens=limit)


#: vLLM 0.32.0's 400 for a max_tokens above max_model_len (``vllm/renderers/params.py``).
_MAX_TOKENS_400 = re.compile(
    r"max_(?:completion_)?tokens=(\d+) cannot be greater than max_model_len=(\d+)"
)


def explain_bad_request(text: str) -> str | None:
    """The cookbook's sentence (cause, fix, the server's words) for a known HTTP 400 of vLLM
    0.32.0 in ``text`` (the error's text, as lm-eval logged it); None for any other.

    Known: ``max_tokens=N cannot be greater than max_model_len=M`` (``vllm/renderers/
    params.py``), "maximum context length is N tokens", ``thinking_token_budget is set but
    reasoning_config is not configured`` (``vllm/v1/engine/input_processor.py``; NeMo-RL PR
    #4220 met it) and tools without a tool parser (``vllm/renderers/online_renderer.py``).
    """
    m = _MAX_TOKENS_400.search(text)
    if m:
        limit = m.group(2)
        return (
            f"max_tokens={m.group(1)} does not fit this server: its max_model_len is {limit} "
            f"tokens (prompt + output). Pass max_tokens below {limit}, or restart vLLM with a "
            f"larger --max-model-len. Server said: {text}"
        )
    m = re.search(r"maximum context length is (\d+) tokens", text)
    if m:  # the prompt (plus output, older releases) exceeds max_model_len
        return (
            f"The request does not fit the server's max_model_len of {m.group(1)} tokens: "
            "shorten the conversation, lower max_tokens, or restart vLLM with a larger "
            "--max-model-len. Server said: " + text
        )
    if "thinking_token_budget" in text:
        return (
            "The server rejected `thinking_token_budget`: it was launched without a reasoning "
            f"parser. Restart vLLM with `{REASONING_PARSER_FLAGS}`, or score with "
            "budget_method='two_pass'. Server said: " + text
        )
    if "tool choice requires" in text or "requires --tool-call-parser" in text:
        return (
            "The server refused the tools: it was launched without tool calling. "
            f"Restart vLLM with `{TOOL_PARSER_FLAGS}`. Server said: " + text
        )
    return None


#: lm-eval 0.4.13 logs the body of a failed request before it retries and raises a bare
#: "Bad Request" (``lm_eval/models/api_models.py``): ``model_call`` (one request at a time)
#: as "API request failed with error message: BODY. Retrying...", ``amodel_call`` (concurrent)
#: as "API request failed! Status code: N, Response text: BODY. Retrying...".
_FAILED_REQUEST = re.compile(
    r"API request failed(?: with error message: |! Status code: (?P<status>\d+), Response text: )"
    r"(?P<body>.*?)\. Retrying"
)


def _server_words(log: str) -> tuple[int | None, str] | None:
    """``(HTTP status or None, vLLM's message)`` of the last request lm-eval logged as
    failed in ``log`` (its whole output: with every request refused, lm-eval 0.4.13 logs the
    bodies near the top and then tens of KB of aiohttp tracebacks), or None. The status comes
    from lm-eval's line, else from vLLM's body (``code``)."""
    found = list(_FAILED_REQUEST.finditer(log))
    if not found:
        return None
    status, body = found[-1].group("status"), found[-1].group("body")
    message: object = body
    try:
        err = json.loads(body)
        err = err.get("error", err) if isinstance(err, dict) else err
        if isinstance(err, dict):
            message = err.get("message", body)
            status = status or err.get("code")
    except ValueError:
        pass
    return (int(status) if status else None), " ".join(str(message).split())[:500]


def evaluate_runs(
    server,
    runs: list[tuple[str, RequestSettings]],
    items: list[dict] | int | None = None,
    *,
    item_set: str = "gsm8k",
    concurrency: int = 4,
    progress: bool = True,
    budget_method: str = "server",
) -> list[AccuracyResult]:
    """Score several request settings on the same items in one lm-eval process.

    Args:
        server: anything with ``base_url`` (``http://host:port/v1``) and ``model_name``.
        runs: ``[(label, options)]``: each label names a folder ``out/evals/<label>/``; one
            another process is scoring into is waited for, said in one line (:func:`_only_scorer`).
        items, item_set, concurrency, progress: as :func:`evaluate`.
        budget_method: how a run's ``reasoning_budget`` is applied: ``"server"`` (vLLM's
            ``thinking_token_budget``) or ``"two_pass"`` (lm-eval's requests go through
            :func:`lab.evals.two_pass.two_pass_endpoint`: the client's two-pass budget,
            for a server that drafts; :func:`helpers.chat.drafting.budget_method_for`).

    Raises:
        EvalError: as :func:`evaluate`; an unknown ``budget_method``.
    """
    if budget_method not in ("server", "two_pass"):
        raise EvalError(f"budget_method={budget_method!r}: use 'server' or 'two_pass'.")
    if importlib.util.find_spec("lm_eval") is None:
        raise EvalError(
            f"The accuracy step needs lm-eval: pip install '{LIBRARIES['lm_eval'].requirement}' "
            "(the cookbook's notebook extra and requirements.txt have it)."
        )
    items = _resolve_items(items, item_set)
    base = server.base_url.rstrip("/")
    limit = _served_max_model_len(base)
    runs = [(label, _fit_max_tokens(label, opts, limit)) for label, opts in runs]
    with contextlib.ExitStack() as held:  # sorted: two runs never hold one folder each
        for folder in sorted({out_dir("evals", label) for label, _ in runs}):
            held.enter_context(_only_scorer(folder))
        prepared = [_prepare(label, items, opts, item_set, budget_method) for label, opts in runs]
        done = _run_lm_eval(base, server.model_name, prepared, concurrency, progress)
        return [_result(run, item_set, d) for run, d in zip(prepared, done, strict=True)]


@contextlib.contextmanager
def _only_scorer(folder: Path):
    """Hold ``out/evals/<label>/`` while one run scores into it (a lock file, ``filelock``):
    two notebooks on one ``out/`` (two quickstarts) rewrote each other's items, task and
    ``done.json``, and one failed in lm-eval's KeyError. The second waits, saying so."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(folder / ".scoring.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(
            f"[evals] another run is scoring into {folder}: waiting for it to end (runs on one "
            "out/ share out/evals/<label>; COOKBOOK_OUT gives a run a folder of its own)",
            flush=True,
        )
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def evaluate(
    server,
    items: list[dict] | int | None = None,
    *,
    item_set: str = "gsm8k",
    options: RequestSettings | None = None,
    label: str = "accuracy",
    concurrency: int = 4,
    progress: bool = True,
) -> AccuracyResult:
    """Score a running server on an item set, through lm-eval's ``local-chat-completions``.

    Args:
        server: anything with ``base_url`` (``http://host:port/v1``) and ``model_name``.
        items: the items (:func:`helpers.config.evalsets.load_items` dicts), the first N of the
            set (int), or None: the whole set (200 items).
        item_set: the set's key (:data:`helpers.config.evalsets.ITEM_SETS`).
        options: thinking, ``reasoning_budget`` (sent as ``thinking_token_budget``),
            ``max_tokens`` (per item, reasoning included; None: 16000), sampling.
        label: names the run (and its folder ``out/evals/<label>/``).
        concurrency: requests in flight (lm-eval's ``num_concurrent``).
        progress: lm-eval's progress bar over the items (stderr).

    Returns:
        :class:`AccuracyResult`; ``items.csv`` and ``result.json`` are written to its ``path``.

    Raises:
        EvalError: lm-eval is not installed (names the install), no items, or lm-eval could
            not score the server (names its URL, lm-eval's last lines and its log file).
    """
    return evaluate_runs(
        server,
        [(label, options or RequestSettings())],
        items,
        item_set=item_set,
        concurrency=concurrency,
        progress=progress,
    )[0]


def _answers(base: str) -> bool:
    """True when something answers HTTP at ``base``'s server root (``/health``)."""
    try:
        httpx.get(f"{server_root(base)}/health", timeout=5)
    except httpx.HTTPError:
        return False
    return True


def _run_lm_eval(
    base: str, model: str, runs: list[_Run], concurrency: int, progress: bool
) -> list[dict[str, Any]]:
    """Score ``runs`` in a child process (:mod:`lab.evals.lm_eval_child`: lm-eval's
    ``asyncio.run()`` fails in a Jupyter kernel's loop, and a child ends with its requests when
    the cell is interrupted); per run its ``done.json``. Its progress bar (stderr) is forwarded.
    """
    work = runs[0].folder
    spec = {
        "base_url": base,
        "model": model,
        "concurrency": concurrency,
        "runs": [{"task": r.task, "folder": str(r.folder), "two_pass": r.two_pass} for r in runs],
    }
    (work / "spec.json").write_text(json.dumps(spec, indent=2))
    for r in runs:
        (r.folder / "done.json").unlink(missing_ok=True)
    env = dict(os.environ)
    env.setdefault("HF_DATASETS_CACHE", str(out_dir("cache", "datasets")))
    env.setdefault("HF_HUB_OFFLINE", "1")  # the tasks read local files: never the hub
    log = work / "lm_eval.log"
    argv = [sys.executable, "-m", "lab.evals.lm_eval_child", str(work / "spec.json")]
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            argv, stdout=fh, stderr=subprocess.PIPE, env=env, start_new_session=True
        )
        assert proc.stderr is not None
        tail = b""
        try:
            for chunk in iter(lambda: proc.stderr.read1(4096), b""):
                tail = (tail + chunk)[-8000:]
                fh.write(chunk.decode(errors="replace"))
                if progress:
                    sys.stderr.write(chunk.decode(errors="replace"))
                    sys.stderr.flush()
            rc = proc.wait()
        except BaseException:  # an interrupted cell: end lm-eval and its requests with it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    missing = [r for r in runs if not (r.folder / "done.json").is_file()]
    if rc != 0 or missing:  # the whole log: a long traceback pushes lm-eval's line out of the tail
        said = _server_words(log.read_text(errors="replace"))
        if said is not None:
            status, message = said
            raise EvalError(
                f"lm-eval's requests to {base} failed with HTTP {status or '4xx/5xx'}: "
                + (explain_bad_request(message) or f"the server said: {message}")
                + f" (lm-eval's whole output: {log})"
            )
        text = tail.decode(errors="replace").strip().splitlines()
        if not _answers(base):  # aiohttp then says "Session is closed" or "Cannot connect"
            raise EvalError(
                f"lm-eval could not score {base}: the server does not answer (connection "
                "refused: its process ended or was stopped during the run, or it was never "
                "there). Start it again (launch_server) and run the step again; lm-eval's last "
                f"words: {' | '.join(text[-2:])[:300]} (whole output: {log})."
            )
        raise EvalError(
            f"lm-eval could not score {base} (exit {rc}): {' | '.join(text[-6:])[:800]}. Check "
            "that the server answers (helpers.server.endpoint.make_client(base_url).models.list()); "
            f"the whole output is in {log}."
        )
    return [json.loads((r.folder / "done.json").read_text()) for r in runs]


#: Items the accuracy step scores by default (the issue's GPU default: about 200).
GPU_ITEMS = 200


def default_items(run: Any, n: int | None = None, item_set: str = "gsm8k") -> list[dict]:
    """The items a notebook's accuracy step scores for ``run`` (a server, its ``srv.run`` or a
    :class:`helpers.config.run.Run`): on the stand-in, the items it was trained on then the
    held-out ones (demo.yaml ``accuracy``: 8 + 8); elsewhere the first ``n`` of the set
    (None: :data:`GPU_ITEMS`). ``n`` also caps the stand-in's list."""
    if run_of(run).stand_in:
        acc = load_demo()["accuracy"]
        chosen = items_by_id([*acc["trained"], *acc["held_out"]], item_set)
        return chosen if n is None else chosen[:n]
    return check_items(n, item_set)[: GPU_ITEMS if n is None else n]


def check_items(n: int | None, item_set: str = "gsm8k") -> list[dict]:
    """Refuse more items than the shipped ``item_set`` holds (GSM8K: 200 of its 1,319 test
    items, ``helpers.config.evalsets.ITEM_SETS``), in step 1 before a launch; None: the default.

    Returns:
        The set's items (:func:`helpers.config.evalsets.load_items`), read once for the check.
    Raises:
        ValueError: ``n`` above the set's size, naming the size and where the set comes from.
    """
    items = load_items(item_set)
    size = len(items)
    if n is not None and n > size:
        raise ValueError(
            f"quality items={n}: the shipped {item_set} set holds {size} items "
            f"({ITEM_SETS[item_set].source}). Ask for at most {size} (quality={{'items': {size}}}), "
            "or score more with lm-eval's own task on the full set."
        )
    return items
