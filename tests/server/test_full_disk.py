"""A disk that fills while a server is launched: the launch record (``out/run/vllm-<pid>.json``)
cannot be written. The launched process is ended, no half-written record is left under
``out/run/``, and the error is one sentence naming the fix (it was an OSError's traceback and a
stray ``vllm-<pid>.tmp``, with the server left running untracked).

The disk fills for real: a child process whose file-size limit (``RLIMIT_FSIZE``, SIGXFSZ
ignored) lets the log's header through and stops the record's write with EFBIG, the error a
write past the end of a full disk's room takes (ENOSPC) in the same code path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers.paths import REPO_ROOT

CHILD = r"""
import json, resource, signal, sys
from pathlib import Path
import psutil
from helpers.errors import CookbookError
from tests.support.fake_vllm import make_fake_server

out = Path(sys.argv[1])
first = make_fake_server(progress=False)  # sizes: its log header and its record
first.start()
header = len(b"".join(first.log_path.read_bytes().splitlines(keepends=True)[:2]))
record = Path(first._record.path).stat().st_size
first.stop()
limit = (header + record) // 2
assert header + 60 < limit < record - 60, (header, record)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
srv = make_fake_server(progress=False)
try:
    srv.start()
    said = "started"
except CookbookError as exc:
    said = str(exc)
except OSError as exc:
    said = f"OSError {exc}"
pid = srv._proc.pid if srv._proc else None
print(json.dumps({"said": said, "pid": pid, "alive": pid is not None and psutil.pid_exists(pid)
                  and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE,
                  "run": sorted(p.name for p in (out / "run").iterdir())}))
"""


def test_a_launch_record_that_cannot_be_written_ends_the_launch_and_leaves_nothing(tmp_path):
    env = {**os.environ, "COOKBOOK_OUT": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    child = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    got = json.loads(child.stdout.strip().splitlines()[-1])
    assert got["said"].startswith(f"Cannot write {tmp_path / 'run'}/vllm-{got['pid']}.json ("), got
    assert got["said"].endswith(
        "): free space on its disk, or set COOKBOOK_OUT to a folder on a disk with room."
    ), got
    assert got["alive"] is False and got["run"] == [], got  # ended, and no stray record
