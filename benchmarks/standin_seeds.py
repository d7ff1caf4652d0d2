"""How robust is the CPU stand-in's training? Build it with several seeds and check each one's
behaviours through a real vLLM server.

For each seed (:func:`run_seed`): build the stand-in with that seed (about 2 minutes on 2
cores, cached under ``out/models``), serve it with the registry's ``cpu`` target through
``helpers.server.vllm_server.VLLMServer``, run every behaviour check of
``tests/standin/test_standin.py`` (reasoning on / off, streaming, the budget, tool calls; greedy, values
checked, not text), stop. Usage, after ``make setup``:
``.venv/bin/python benchmarks/standin_seeds.py --seeds 0 1 2``. Prints a table (seed, checks
passed / total, failures, build and start seconds) and the pass rate; writes
``out/bench/standin-seeds/results.{json,csv}``. Exit status 1 when any check failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from helpers.config import resolve as recipes
from helpers.paths import out_dir
from helpers.server import endpoint as client
from helpers.server.vllm_server import VLLMServer
from helpers.standin import build as standin
from helpers.standin import train


def _behaviour_module():
    """tests/standin/test_standin.py, whose checks are plain functions of an ``openai`` client."""
    spec = importlib.util.spec_from_file_location(
        "standin_checks", REPO / "tests" / "standin" / "test_standin.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_seed(seed: int, checks) -> dict:
    """Build, serve and check one seed; returns a result row (seconds, pass/fail by check)."""
    recipe = dataclasses.replace(train.RECIPE, seed=seed)
    t0 = time.monotonic()
    path = standin.build_standin_model(recipe=recipe)
    build_s = time.monotonic() - t0
    meta = standin.standin_metadata(path)
    with VLLMServer(recipes.resolve("cpu").with_model(path), progress=False) as srv:
        results = checks.run_behaviours(client.make_client(srv.base_url))
        start_s = srv.startup_seconds
    failed = {k: v for k, v in results.items() if v is not None}
    return {
        "seed": seed,
        "passed": len(results) - len(failed),
        "total": len(results),
        "failed": failed,
        "build_seconds": round(build_s, 1),
        "train_seconds": meta.get("train_seconds"),
        "final_loss": meta.get("final_loss"),
        "server_ready_seconds": round(start_s or 0, 1),
        "model": str(path),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=None, help="default out/bench/standin-seeds")
    a = ap.parse_args()
    out = a.out or out_dir("bench") / "standin-seeds"
    out.mkdir(parents=True, exist_ok=True)
    checks = _behaviour_module()
    rows = []
    for seed in a.seeds:
        row = run_seed(seed, checks)
        rows.append(row)
        print(f"seed {seed}: {row['passed']}/{row['total']} checks passed"
              + (f"; failed: {sorted(row['failed'])}" if row["failed"] else ""), flush=True)  # fmt: skip
        (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")

    import pandas as pd

    table = pd.DataFrame(rows)[
        ["seed", "passed", "total", "train_seconds", "final_loss", "server_ready_seconds"]
    ]
    table.to_csv(out / "results.csv", index=False)
    passed, total = int(table["passed"].sum()), int(table["total"].sum())
    print(table.to_string(index=False))
    print(
        f"pass rate: {passed}/{total} = {100 * passed / total:.1f} % over seeds {a.seeds}; results in {out}"
    )
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
