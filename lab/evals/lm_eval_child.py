"""``python -m lab.evals.lm_eval_child SPEC``: the lm-eval process of
:func:`lab.evals.accuracy.evaluate_runs` (imports lm-eval once for all its runs).

SPEC (JSON): ``base_url``, ``model``, ``concurrency``, ``runs: [{"task", "folder",
"two_pass"}]`` (task YAML in ``<folder>/task/``; ``two_pass``: requests go through
:func:`lab.evals.two_pass.two_pass_endpoint`). Per run: the server's generated tokens and
requests ended by length before and after, ``lm_eval.simple_evaluate`` (only this run's task
indexed: ``include_defaults=False`` saves about 4 s), then ``<folder>/done.json``. Exit status
1 on the first run that fails (its traceback on stderr).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from pathlib import Path


def labeled_total(text: str, name: str, **labels: str) -> float | None:
    """The sum of ``name``'s samples whose labels include ``labels`` in a ``/metrics`` scrape,
    e.g. ``labeled_total(text, REQUEST_SUCCESS, finished_reason="length")``: requests that
    ended at ``max_tokens``. None when the scrape has no such sample (or is not Prometheus)."""
    from helpers.bench.metrics import _samples

    try:
        values = [float(s.value) for s in _samples(text)
                  if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]  # fmt: skip
    except ValueError:
        return None
    return sum(values) if values else None


def _counters(base_url: str) -> dict[str, float | None]:
    """The server's generated tokens and its requests ended by length, from ``/metrics``
    (None each when the server has none)."""
    from helpers.bench.metrics import REQUEST_SUCCESS, parse_prometheus, scrape_metrics

    try:
        text = scrape_metrics(base_url)
        return {
            "tokens": parse_prometheus(text).get("vllm:generation_tokens_total"),
            "length": labeled_total(text, REQUEST_SUCCESS, finished_reason="length"),
        }
    except Exception:  # noqa: BLE001 - a server without /metrics: both unknown
        return {"tokens": None, "length": None}


def quiet(evaluator) -> None:
    """What lm-eval 0.4.13's ``evaluator`` adds to every result that this child does not keep
    (it writes the samples only), switched off:

    - torch's environment report (``loggers/utils.py`` ``add_env_info``:
      ``torch.utils.collect_env`` runs ``pip list`` and ``lsb_release``, 0.8 s a run on 2 cores);
    - the git probe (``get_git_commit_hash``: ``git describe`` in the current folder), which
      printed "fatal: not a git repository" on a GPU box running a copy without ``.git``.
    """
    evaluator.add_env_info = lambda results: None
    evaluator.get_git_commit_hash = lambda: None


def main(argv: list[str] | None = None) -> int:
    spec = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    import lm_eval.evaluator
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    quiet(lm_eval.evaluator)

    from lab.evals.two_pass import two_pass_endpoint

    for name in ("lm-eval", "lm_eval", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # but a failed request's body (lm_eval/models/api_models.py logs it as a warning before
    # it raises aiohttp's bare "Bad Request"): the parent quotes the server's words from it
    api = logging.getLogger("lm_eval.models.api_models")
    api.setLevel(logging.WARNING)
    api.addFilter(lambda record: "API request failed" in record.getMessage())
    base = spec["base_url"]
    for run in spec["runs"]:
        folder = Path(run["folder"])
        before = _counters(base)
        t0 = time.monotonic()
        with contextlib.ExitStack() as stack:
            url = base
            if run.get("two_pass"):  # the budget applied by the client in two passes
                url = stack.enter_context(two_pass_endpoint(base, spec["model"]))
            results = simple_evaluate(
                model="local-chat-completions",
                model_args={
                    "model": spec["model"],
                    "base_url": f"{url}/chat/completions",
                    "num_concurrent": spec["concurrency"],
                    "max_retries": 1,
                    "tokenized_requests": False,
                    "timeout": 3600,
                },
                tasks=[run["task"]],
                task_manager=TaskManager(include_defaults=False, include_path=str(folder / "task")),
                apply_chat_template=True,
                log_samples=True,
                bootstrap_iters=0,
                verbosity="ERROR",
            )
        seconds = time.monotonic() - t0
        after = _counters(base)
        done = {
            "samples": results["samples"][run["task"]],
            "seconds": seconds,
            "tokens_before": before["tokens"],
            "tokens_after": after["tokens"],
            "length_before": before["length"],
            "length_after": after["length"],
        }
        (folder / "done.json").write_text(json.dumps(done, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
