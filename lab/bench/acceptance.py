"""Speculative-decoding acceptance measured on real prompts, not on random tokens.

The sweeps (:func:`helpers.bench.sweep.sweep`) send vLLM's random dataset with
``--ignore-eos``: right for throughput (every answer has the same length), wrong for
acceptance. A drafter predicts the target's next tokens: a learned drafter predicts random
prompt tokens worse than real text (vllm-project/vllm #52536, #33497), while an answer forced
past its end can repeat itself, which n-gram lookup drafts, so the sweeps' acceptance length is
the load's, neither real text's nor a bound on it. vLLM's own acceptance
regression test uses real prompts at temperature 0: :func:`measure_acceptance` does that through
``vllm bench serve`` itself, and its point's ``dataset="real:<item set>"`` metadata is what lets
:func:`helpers.bench.metrics.acceptance_verdict` say "not paying off".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.bench.metrics import (
    acceptance_from_counters,
    acceptance_verdict,
    parse_prometheus,
    scrape_metrics,
    server_root,
    spec_decode_counters,
)
from helpers.bench.point import _check_tokenizer, _run_bench_main, _safe, chat_target_args
from helpers.bench.results import read_point
from helpers.config.demo import load_demo
from helpers.config.evalsets import load_items
from helpers.errors import BenchError
from helpers.paths import out_dir as _out_dir

#: The ``dataset`` metadata value of points measured on real prompts (prefix; the item set follows).
REAL_DATASET = "real"


def real_prompts_file(
    path: str | Path, *, item_set: str = "gsm8k", num_prompts: int | None = None
) -> Path:
    """Write the shipped item set's questions as a ``vllm bench serve --dataset-name custom``
    file (``{"prompt": ...}`` per line, in demo.yaml's accuracy prompt); return its path.

    Args:
        path: the ``.jsonl`` file to write (its folder is created).
        item_set: a key of :data:`helpers.config.evalsets.ITEM_SETS`.
        num_prompts: the first N items (None: all; 200 for GSM8K).

    Raises:
        BenchError: ``num_prompts`` below 1, or a path that does not end in ``.jsonl`` (vLLM
            0.32.0's custom dataset reads only JSON lines).
    """
    path = Path(path)
    if path.suffix != ".jsonl":
        raise BenchError(f"{path}: vllm bench serve's custom dataset reads .jsonl files only.")
    if num_prompts is not None and num_prompts < 1:
        raise BenchError(f"num_prompts={num_prompts}: pass 1 or more (or None for every item).")
    template = load_demo()["accuracy"]["prompt"]
    items = load_items(item_set)
    items = items if num_prompts is None else items[:num_prompts]
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"prompt": template.format(question=it["question"])}) for it in items]
    path.write_text("\n".join(lines) + "\n")
    return path


def measure_acceptance(
    server: Any,
    model: str | None = None,
    tokenizer: str | Path | None = None,
    *,
    num_prompts: int = 32,
    output_len: int = 256,
    concurrency: int = 1,
    item_set: str = "gsm8k",
    label: str = "acceptance",
    out_dir: str | Path | None = None,
    temperature: float = 0.0,
    extra_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Acceptance of the server's drafter on the shipped item set's real prompts: one ``vllm
    bench serve`` run over :func:`real_prompts_file` (``--dataset-name custom``, vLLM 0.32.0
    ``CustomDataset``; ``--custom-output-len`` a cap, no ``--ignore-eos``; greedy by default, as
    vLLM's acceptance test), read from the ``vllm:spec_decode_*`` counters before and after.

    Args:
        server, model, tokenizer: as :func:`helpers.bench.sweep.sweep`.
        num_prompts: requests (the first N items of ``item_set``; at most its size).
        output_len: the most tokens per answer (reasoning included).
        concurrency: requests in flight (1 measures what one user gets).
        item_set, label: the prompts, and the run's name (file ``<label>.json``).
        out_dir: folder of the JSON and its log (default ``out/bench/acceptance``).
        temperature: sampling temperature of every request.
        extra_args: more ``vllm bench serve`` flags.

    Returns:
        A dict: ``label``, ``dataset`` (``"real:gsm8k"``), ``num_prompts``, ``completed``,
        ``mean_output_tokens`` (tokens per answer), ``output_throughput`` (tokens/s),
        ``spec_decode_acceptance_length`` (tokens per target step), ``_rate`` (%),
        ``spec_decode_num_drafts`` / ``_draft_tokens`` / ``_accepted_tokens`` (counter
        deltas; None without drafting), ``spec_decode_level`` / ``_verdict``, ``path``.

    Raises:
        BenchError: the server does not answer, a bad argument (names it), or every request
            failed (quotes vLLM's errors, names the log).
    """
    from helpers.bench.sweep import _measured

    if num_prompts < 1 or output_len < 1 or concurrency < 1:
        raise BenchError(
            f"num_prompts={num_prompts}, output_len={output_len}, concurrency={concurrency}: "
            "each must be 1 or more."
        )
    root, model, tokenizer, gpu_count, _ = _measured(server, model, tokenizer, None)
    _check_tokenizer(tokenizer)
    available = len(load_items(item_set))
    num_prompts = min(num_prompts, available)
    folder = Path(out_dir) if out_dir is not None else _out_dir("bench", "acceptance")
    folder.mkdir(parents=True, exist_ok=True)
    stem = _safe(label)
    data = real_prompts_file(
        folder / f"{stem}-prompts.jsonl", item_set=item_set, num_prompts=num_prompts
    )
    json_path, log_path = folder / f"{stem}.json", folder / f"{stem}.log"
    dataset = f"{REAL_DATASET}:{item_set}"
    argv = [
        *chat_target_args(root, model, tokenizer),
        "--dataset-name", "custom",
        "--dataset-path", str(data),
        "--custom-output-len", str(int(output_len)),
        "--skip-chat-template",  # the server applies it
        "--disable-shuffle",
        "--temperature", f"{float(temperature):g}",
        "--max-concurrency", str(int(concurrency)),
        "--num-prompts", str(int(num_prompts)),
        "--num-warmups", "0",
        "--seed", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,99",
        "--label", label,
        "--save-result",
        "--result-dir", str(folder),
        "--result-filename", json_path.name,
        "--disable-tqdm",
        "--metadata", f"gpu_count={int(gpu_count)}", f"dataset={dataset}",
        f"output_len={int(output_len)}",
        *map(str, extra_args),
    ]  # fmt: skip
    before = spec_decode_counters(parse_prometheus(scrape_metrics(root)))
    result = _run_bench_main(argv, log_path, root=root, stall_timeout=None)
    after = spec_decode_counters(parse_prometheus(scrape_metrics(server_root(root))))
    if not result.get("completed") or not json_path.exists():
        raise BenchError(
            f"Acceptance run {label!r} against {root}: no request completed. The benchmark's "
            f"output is in {log_path}.",
            log_path=log_path,
        )
    point = read_point(json_path)
    counted = acceptance_from_counters(before, after) or {}
    spec = ("spec_decode_acceptance_length", "spec_decode_acceptance_rate")
    counts = ("spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens")
    row: dict[str, Any] = {
        "label": label,
        "dataset": dataset,
        "num_prompts": num_prompts,
        "completed": point.get("completed"),
        "mean_output_tokens": (point.get("total_output_tokens") or 0)
        / max(point.get("completed") or 1, 1),
        "output_throughput": point.get("output_throughput"),
        **{k: counted.get(k, point.get(k)) for k in spec},  # the counters', else vLLM's own
        **{k: counted.get(k) for k in counts},
        "path": str(json_path),
    }
    # a run that drafted nothing (no draft between the two scrapes, no figures in vLLM's
    # JSON) gets a verdict too, so every row has the same columns (a notebook's table failed
    # with KeyError 'spec_decode_verdict' on a loaded CI machine)
    row.update(
        acceptance_verdict(row)
        or {"spec_decode_level": "warning", "spec_decode_verdict": DRAFTED_NOTHING}
    )
    return row


#: The verdict of an acceptance run during which the server drafted nothing.
DRAFTED_NOTHING = (
    "drafted nothing during these requests (the speculative-decoding counters did not move): "
    "no acceptance to report; check that the server runs --speculative-config"
)
