"""The notebook runner (tools/notebook_run.py): its terminal echo of a server's launch (each
``[vllm ...]`` line, a heading only with the items under it)."""

from __future__ import annotations

import io

from tools.notebook_run import _Progress, _ServerLines


def test_a_launch_heading_is_echoed_with_its_items_and_never_empty():
    out = io.StringIO()
    sink = _ServerLines(_Progress("x", out=out))
    # what VLLMServer.start prints (helpers/server/vllm_server.py), written in two pieces
    sink.write(
        "[vllm] launched pid 1 on port 2; log: /tmp/l.log\n"
        "[vllm] the command, as launched (a shell of this environment starts the same server "
        "with it):\n/x/vllm serve /m \\\n  --max-num-seqs 4 \\\n  --port 2\n"
        "[vllm] how it differs from the target's command, and why:\n  - drops --moe-"
    )
    sink.write("backend humming: the CPU stand-in\n  - adds X=1: the launcher's\nnot ours\n")
    sink.write("[vllm    17s] ready: http://127.0.0.1:2\n")
    said = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert said == [
        "  [vllm] launched pid 1 on port 2; log: /tmp/l.log",
        "  [vllm] how it differs from the target's command, and why:",
        "    - drops --moe-backend humming: the CPU stand-in",
        "    - adds X=1: the launcher's",
        "  [vllm    17s] ready: http://127.0.0.1:2",
    ]
