"""A newcomer's first run, timed phase by phase: clone, ``make quickstart`` from nothing, again warm.

Usage (``make first-run``; system Python, stdlib only)::

    python3 tools/first_run.py [--source REPO] [--warm-cache] [--record]

It clones the committed ``HEAD`` of ``--source`` (default: this checkout) into a temporary
folder, runs ``make quickstart`` there with empty installer caches (uv's and pip's; the
machine's own wheel folders and indexes stay, as on any machine), then runs it once more with
everything built. The phases come from what the run itself records: ``make setup``'s
``.venv/.cookbook-setup.json`` (``tools/setup_venv.py``) and the executed notebook's
per-cell papermill timings (stand-in and server start, first reply, the rest).

Prints a table and writes ``out/bench/first-run/<UTC stamp>.json``; ``--record`` (what
``make first-run`` passes) also writes ``docs/results/first_run.json``, its table
``docs/results/first_run.md`` and the README's first-run sentence (a test checks that the
sentence matches the recorded file). Exit status 1 when a ``make quickstart`` failed (its
log tail is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = "quickstart_cpu_standin.ipynb"
RECORD = REPO / "docs" / "results" / "first_run.json"
PAGE = REPO / "docs" / "results" / "first_run.md"


def _run(argv: list[str], cwd: Path, env: dict, log: Path) -> tuple[int, float]:
    """Run ``argv``, its output to ``log`` with each line also printed; (exit status, seconds)."""
    t0 = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            if line.startswith(("setup:", "[")):
                print(f"  {time.monotonic() - t0:6.1f} s  {line.rstrip()[:110]}", flush=True)
        rc = proc.wait()
    return rc, time.monotonic() - t0


def _iso(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def notebook_phases(executed: Path) -> dict[str, float]:
    """Seconds from the notebook's first cell to: the server ready (end of the cell that calls
    ``launch_server``, which also prepares the stand-in), the first reply (end of the first
    ``chat(`` cell after it), and the last cell; from papermill's per-cell metadata."""
    nb = json.loads(executed.read_text())
    cells = [
        c
        for c in nb["cells"]
        if c["cell_type"] == "code" and c.get("metadata", {}).get("papermill", {}).get("end_time")
    ]
    t0 = _iso(cells[0]["metadata"]["papermill"]["start_time"])

    def end(cell) -> float:
        return round((_iso(cell["metadata"]["papermill"]["end_time"]) - t0).total_seconds(), 1)

    src = ["".join(c["source"]) for c in cells]
    launch = next(i for i, s in enumerate(src) if "launch_server(" in s and "import" in s)
    reply = next(i for i, s in enumerate(src) if i > launch and "chat(" in s)
    return {
        "server_ready": end(cells[launch]),
        "first_reply": end(cells[reply]),
        "notebook": end(cells[-1]),
    }


def first_run(source: Path, *, warm_cache: bool = False, keep: bool = False) -> dict:
    """Clone ``source``'s HEAD, run ``make quickstart`` from nothing and then warm; return
    the phase record (seconds; see the module docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix="cookbook-first-run-"))
    clone = tmp / "cookbook"
    env = dict(os.environ)
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "COOKBOOK_OUT"):
        env.pop(key, None)
    if not warm_cache:
        env["UV_CACHE_DIR"] = str(tmp / "uv-cache")
        env["PIP_NO_CACHE_DIR"] = "1"
    record: dict = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
        "caches": "warm" if warm_cache else "empty uv and pip caches",
    }
    try:
        t0 = time.monotonic()
        subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True)
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True
        ).stdout.strip()
        record["commit"] = commit
        record["clone"] = round(time.monotonic() - t0, 1)
        print(f"cloned {source} at {commit} ({record['clone']} s); make quickstart from nothing:")
        rc, cold = _run(["make", "quickstart"], clone, env, tmp / "cold.log")
        if rc != 0:
            tail = (tmp / "cold.log").read_text()[-3000:]
            raise RuntimeError(f"make quickstart (from nothing) failed, exit {rc}:\n{tail}")
        setup = json.loads((clone / ".venv" / ".cookbook-setup.json").read_text())
        executed = clone / "out" / "notebooks" / NOTEBOOK
        nb = notebook_phases(executed)
        record["cold"] = {
            "make_quickstart": round(cold, 1),
            "setup": setup["seconds"],
            "installer": setup["installer"],
            "setup_phases": {p["phase"]: p["seconds"] for p in setup["phases"]},
            "notebook_start": round(cold - setup["seconds"] - nb["notebook"], 1),
            **nb,
        }
        print("make quickstart again, everything built:")
        rc, warm = _run(["make", "quickstart"], clone, env, tmp / "warm.log")
        if rc != 0:
            tail = (tmp / "warm.log").read_text()[-3000:]
            raise RuntimeError(f"make quickstart (warm) failed, exit {rc}:\n{tail}")
        record["warm"] = {"make_quickstart": round(warm, 1), **notebook_phases(executed)}
        record["from_nothing"] = round(record["clone"] + cold, 1)
        return record
    finally:
        if keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def table(r: dict) -> str:
    """The phase table as Markdown."""
    c, w = r["cold"], r["warm"]
    rows = [("clone", r["clone"])]
    rows += [(f"make setup: {k}", v) for k, v in c["setup_phases"].items()]
    rows += [
        ("notebook runner and kernel start", c["notebook_start"]),
        ("stand-in ready and server up (from the first cell)", c["server_ready"]),
        ("first reply (from the first cell)", c["first_reply"]),
        ("whole notebook", c["notebook"]),
        ("**from nothing to the end of `make quickstart`**", r["from_nothing"]),
        ("`make quickstart` again, warm", w["make_quickstart"]),
        ("warm: first reply (from the first cell)", w["first_reply"]),
    ]
    out = [
        f"{r['date']}, commit {r['commit']}, {r['machine']}, {r['caches']}, installer {c['installer']}",
        "",
        "| phase | seconds |",
        "|---|---:|",
    ]
    out += [f"| {name} | {sec:.1f} |" for name, sec in rows]
    return "\n".join(out)


README = REPO / "README.md"
_MARK = re.compile(r"(<!-- first-run:[^\n]*-->\n)(.*?)(\n<!-- /first-run -->)", re.S)


def readme_sentence(r: dict) -> str:
    """The README's sentence about the first run, from a record (:func:`first_run`)."""
    c, w = r["cold"], r["warm"]
    return (
        f"First run, measured by `make first-run` ({r['date']}: a fresh clone, {r['caches']}, "
        f"{r['machine'].split(',')[0]}): from nothing to the end of `make quickstart` in "
        f"**{r['from_nothing']:.0f} s** (set-up {c['setup']:.0f} s, then the first reply "
        f"{c['first_reply']:.0f} s after the notebook starts); warm, {w['make_quickstart']:.0f} s "
        "([phase by phase](docs/results/first_run.md))."
    )


def write_readme(r: dict, path: Path = README) -> None:
    """Replace the marked first-run sentence of the README with :func:`readme_sentence`.

    Raises:
        RuntimeError: the README has no ``<!-- first-run: ... -->`` block.
    """
    text = path.read_text()
    if not _MARK.search(text):
        raise RuntimeError(f"{path} has no <!-- first-run: --> ... <!-- /first-run --> block")
    path.write_text(_MARK.sub(lambda m: m.group(1) + readme_sentence(r) + m.group(3), text))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/first_run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default=str(REPO), help="the repository to clone (its HEAD)")
    ap.add_argument("--warm-cache", action="store_true", help="keep uv's and pip's caches")
    ap.add_argument("--keep", action="store_true", help="keep the temporary clone")
    ap.add_argument("--record", action="store_true", help=f"also write {RECORD.relative_to(REPO)}")
    args = ap.parse_args(argv)
    try:
        r = first_run(Path(args.source), warm_cache=args.warm_cache, keep=args.keep)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"first run failed: {e}", file=sys.stderr)
        return 1
    print("\n" + table(r))
    out = REPO / "out" / "bench" / "first-run"
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (out / f"{stamp}.json").write_text(json.dumps(r, indent=2))
    if args.record:
        RECORD.write_text(json.dumps(r, indent=2) + "\n")
        PAGE.write_text(
            "# A newcomer's first run, phase by phase\n\n"
            "Written by `make first-run` (`python3 tools/first_run.py --record`): a fresh clone, "
            "`make quickstart` from nothing, then again with everything built. The README quotes "
            "these figures; `first_run.json` holds them.\n\n" + table(r) + "\n"
        )
        write_readme(r)
        print(
            f"wrote {RECORD.relative_to(REPO)}, {PAGE.relative_to(REPO)} and the README's sentence"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
