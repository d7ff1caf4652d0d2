"""The accuracy step: score a running server on a shipped item set through lm-eval.

Notebook verb: :func:`evaluate`. Why lm-eval (``lm-eval[api]==0.4.13``) and not evalscope:
it is what vLLM's own accuracy checks and SGLang's cookbook pages use against a served model
(``--model local-completions`` / ``local-chat-completions``), its chat client sends the
request fields we give it untouched (so ``chat_template_kwargs`` and ``thinking_token_budget``
reach vLLM) and scores only ``message.content`` (vLLM's reasoning parser keeps the reasoning
apart), and a task is a YAML file over a local JSON-lines file: no hub at run time.

The task: each item's question in demo.yaml's ``accuracy.prompt`` ("... give the final answer
as: The answer is N."), the last number of the answer taken (lm-eval's GSM8K
``flexible-extract`` filter), exact match against the item's target with commas, ``$`` and a
final period ignored (GSM8K's own ``regexes_to_ignore``). Tokens spent come from the server's
``vllm:generation_tokens_total`` counter (reasoning included), read before and after.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.metrics import parse_prometheus, scrape_metrics
from helpers.chat.request import ChatOptions
from helpers.config.evalsets import ITEM_SETS, items_by_id, load_items
from helpers.errors import CookbookError
from helpers.evals.stats import Proportion, wilson
from helpers.paths import out_dir
from helpers.standin.data import load_demo

#: Published figures a notebook prints beside its own (source named; none is for Lightning on
#: this exact task: they say what a healthy model of the family scores).
REFERENCES = {
    "gsm8k": (
        "vLLM's CI floor for Nemotron-3-Nano-30B-A3B BF16 on GSM8K: 0.69 (1,319 items, 5-shot, "
        "completions; vllm-project/vllm tests/evals/gsm8k/configs/Nemotron-3-Nano-30B-A3B-BF16.yaml). "
        "NVIDIA: Lightning's NVFP4 checkpoint keeps a median 99.24 % of BF16 across its benchmarks."
    )
}

#: lm-eval's GSM8K ``flexible-extract``: the last number in the answer.
NUMBER_PATTERN = r"(-?[$0-9.,]{2,})|(-?[0-9]+)"
#: GSM8K's ``regexes_to_ignore`` (lm-eval ``gsm8k.yaml``).
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
        generated_tokens: tokens the server generated for the run (reasoning + answers), from
            its ``vllm:generation_tokens_total`` counter; None when the server has no metrics.
        seconds: wall time of the run.
        settings: the request settings sent (thinking, budget, max_tokens, sampling).
        path: the folder the per-item table (``items.csv``) and ``result.json`` went to.
    """

    label: str
    item_set: str
    accuracy: Proportion
    items: pd.DataFrame
    generated_tokens: float | None
    seconds: float
    settings: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def mean_tokens(self) -> float | None:
        """Mean generated tokens per item (reasoning included), or None."""
        n = len(self.items)
        return self.generated_tokens / n if self.generated_tokens is not None and n else None

    def correct(self) -> list[bool]:
        """Per-item correctness, in item order (for the paired tests)."""
        return [bool(x) for x in self.items["correct"]]

    def summary(self) -> str:
        """One line: the accuracy with its interval, tokens per item, seconds."""
        tok = f", {self.mean_tokens:.0f} tokens per item" if self.mean_tokens is not None else ""
        return (
            f"{self.label}: {self.item_set} accuracy {self.accuracy}{tok}, "
            f"{self.seconds:.0f} s ({'one run' if self.settings.get('temperature', 0) else 'greedy'})"
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


def _generated_tokens(base_url: str) -> float | None:
    try:
        return parse_prometheus(scrape_metrics(base_url)).get("vllm:generation_tokens_total")
    except Exception:  # noqa: BLE001 - a server without /metrics: tokens unknown
        return None


def evaluate(
    server,
    items: list[dict] | int | None = None,
    *,
    item_set: str = "gsm8k",
    options: ChatOptions | None = None,
    label: str = "accuracy",
    concurrency: int = 4,
    progress: bool = True,
) -> AccuracyResult:
    """Score a running server on an item set, through lm-eval's ``local-chat-completions``.

    Args:
        server: anything with ``base_url`` (``http://host:port/v1``) and ``model_name``: a
            :class:`~helpers.server.vllm_server.VLLMServer`, an attached handle, a replica.
        items: the items (dicts from :func:`helpers.config.evalsets.load_items`), or the first
            N of the set (int), or None: the whole set (200 items).
        item_set: the set's key (:data:`helpers.config.evalsets.ITEM_SETS`).
        options: thinking on/off, ``reasoning_budget`` (sent as ``thinking_token_budget``),
            ``max_tokens`` (tokens per item, reasoning included; None: 16000), temperature
            and top_p; default :class:`ChatOptions` (the seeds' sampling).
        label: names the run (and its folder ``out/evals/<label>/``).
        concurrency: requests in flight (lm-eval's ``num_concurrent``).
        progress: lm-eval's progress bar over the items.

    Returns:
        :class:`AccuracyResult`; ``items.csv`` and ``result.json`` are written to its ``path``.

    Raises:
        EvalError: lm-eval is not installed (names the install), no items, or the server did
            not answer (names its URL and lm-eval's error).
    """
    try:
        import lm_eval  # noqa: F401 - checked before anything else runs
    except ImportError:
        raise EvalError(
            "The accuracy step needs lm-eval: pip install 'lm-eval[api]==0.4.13' "
            "(requirements.txt has it)."
        ) from None
    if items is None or isinstance(items, int):
        all_items = load_items(item_set)
        items = all_items if items is None else all_items[: max(0, items)]
    if not items:
        raise EvalError("No items to score: pass items=N with N >= 1, or None for the whole set.")
    opts = options or ChatOptions()
    demo = load_demo()
    prompt = demo["accuracy"]["prompt"]
    folder = out_dir("evals", label)
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "items.jsonl"
    data.write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items))
    body: dict[str, Any] = {"chat_template_kwargs": {"enable_thinking": opts.thinking}}
    if opts.reasoning_budget is not None:
        body["thinking_token_budget"] = opts.reasoning_budget
    max_tokens = opts.max_tokens or 16000
    gen = {
        "until": [],
        "max_gen_toks": max_tokens,
        "temperature": opts.temperature,
        "top_p": opts.top_p,
        **body,
    }
    key = json.dumps([label, [it["id"] for it in items], gen], sort_keys=True)
    task = f"cookbook_{item_set}_{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    tasks_dir = folder / "task"
    tasks_dir.mkdir(exist_ok=True)
    for old in tasks_dir.glob("*.yaml"):
        old.unlink()
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
    base = server.base_url.rstrip("/")
    before = _generated_tokens(base)
    t0 = time.monotonic()
    results = _run_lm_eval(base, server.model_name, task, tasks_dir, concurrency, progress)
    seconds = time.monotonic() - t0
    after = _generated_tokens(base)
    samples = sorted(results["samples"][task], key=lambda s: s["doc_id"])
    rows = []
    for s in samples:
        doc = s["doc"]
        response = s["resps"][0][0] if s.get("resps") else ""
        extracted = s["filtered_resps"][0] if s.get("filtered_resps") else ""
        rows.append(
            {
                "id": doc["id"],
                "target": doc["target"],
                "extracted": extracted,
                "correct": bool(s["exact_match"]),
                "response": response,
            }
        )
    table = pd.DataFrame(rows)
    k = int(table["correct"].sum())
    result = AccuracyResult(
        label=label,
        item_set=item_set,
        accuracy=wilson(k, len(table)),
        items=table,
        generated_tokens=(after - before) if before is not None and after is not None else None,
        seconds=seconds,
        settings=settings,
        path=folder,
    )
    table.to_csv(folder / "items.csv", index=False)
    (folder / "result.json").write_text(
        json.dumps(
            {
                "label": label,
                "accuracy": result.accuracy.value,
                "k": k,
                "n": len(table),
                "wilson_95": [result.accuracy.low, result.accuracy.high],
                "generated_tokens": result.generated_tokens,
                "seconds": seconds,
                "settings": settings,
            },
            indent=2,
        )
    )
    return result


def _run_lm_eval(
    base: str, model: str, task: str, tasks_dir: Path, concurrency: int, progress: bool
) -> dict:
    """``lm_eval.simple_evaluate`` against ``base``'s chat completions; its logging quieted
    (its tqdm bar is the progress)."""
    os.environ.setdefault("HF_DATASETS_CACHE", str(out_dir("cache", "datasets")))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the task reads a local file: never the hub
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    for name in ("lm-eval", "lm_eval", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink):
            results = simple_evaluate(
                model="local-chat-completions",
                model_args={
                    "model": model,
                    "base_url": f"{base}/chat/completions",
                    "num_concurrent": concurrency,
                    "max_retries": 1,
                    "tokenized_requests": False,
                    "timeout": 3600,
                },
                tasks=[task],
                task_manager=TaskManager(include_path=str(tasks_dir)),
                apply_chat_template=True,
                log_samples=True,
                bootstrap_iters=0,
                verbosity="ERROR",
            )
    except Exception as e:  # noqa: BLE001 - lm-eval's errors name no fix
        raise EvalError(
            f"lm-eval could not score {base} ({type(e).__name__}: {str(e)[:400]}): check the server "
            "answers (helpers.server.endpoint.make_client(base_url).models.list())."
        ) from e
    if not results or task not in results.get("samples", {}):
        raise EvalError(f"lm-eval returned no samples for {task}: see the output above.")
    del progress  # lm-eval shows its own bar (tqdm) over the requests
    return results


def evaluate_ids(server, ids: list[str], **kwargs) -> AccuracyResult:
    """:func:`evaluate` on the items with these ids (e.g. demo.yaml's ``accuracy.trained``)."""
    return evaluate(server, items_by_id(ids, kwargs.get("item_set", "gsm8k")), **kwargs)
