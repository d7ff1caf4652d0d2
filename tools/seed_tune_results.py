"""Convert the H200 sweeps committed before the tuning step into its result format.

The tuning step (:mod:`lab.tune.tune`) writes ``tune.json`` files (schema
:data:`lab.tune.tune.SCHEMA`); the Hopper notebooks render their "measured best"
table from such files under ``docs/results/h200/tune/`` (:mod:`tools.tune_pages`). The sweeps
measured before it existed are converted here, point by point, from the files they left, and
nothing else: each point keeps its source file, its vLLM release (the one the run's notebook or
script recorded) and the command that ran. Nothing is re-measured or estimated.

- ``vllm-<release>/<variant>-<kernel>/*-c<N>.json``: the h200 notebook executed by papermill on
  one H200 (weightless, chat endpoint, 1024 in / 256 out); the command is what the executed
  notebook (``vllm-<release>/h200-*.ipynb``, matched by its injected ``variant`` /
  ``moe_backend`` / ``vllm_version``) printed in step 1.
- ``summary-<variant>[-reference].json`` with ``<variant>[-reference]/*-c<N>.json``: the vLLM
  0.26.0 script runs (``tools/device/run_h200.py``), command from the summary's
  ``serve_command`` (adapted to what that bundle ran; see ``adaptations``).

Usage, from the repository root (rewrites ``docs/results/h200/tune/seed-*.json``)::

    python -m tools.seed_tune_results            # write
    python -m tools.seed_tune_results --check    # exit 1 when the committed files differ
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from helpers.paths import REPO_ROOT
from lab.tune.points import points_frame
from lab.tune.saved import SCHEMA, _saved_row

H200 = REPO_ROOT / "docs" / "results" / "h200"
OUT = H200 / "tune"
#: Targets whose notebooks may quote these H200 results besides h200 itself: the H100 is the
#: same Hopper SM90 with the same kernels (less memory and 3.35 vs 4.8 TB/s of bandwidth, so
#: the ranking carries over, not the figures).
APPLIES_TO = ["h100"]
#: The committed sweeps were 1024 in / 256 out at 4 x c prompts: the ``tune-1k`` workload.
WORKLOAD = {"name": "tune-1k", "input_len": 1024, "output_len": 256, "prefix_len": 0,
            "concurrencies": [1, 16, 64, 256]}  # fmt: skip
_FOLDER = re.compile(r"^(nvfp4|bf16)-([a-z_]+)$")


def _rel(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def _flags(command: str) -> dict[str, str]:
    """``{flag: value}`` of a rendered ``vllm serve`` command (``""`` for a bare switch);
    ``--host`` / ``--port`` and ``export`` lines left out."""
    words = shlex.split(" ".join(ln for ln in command.splitlines() if not ln.startswith("export ")))
    out, i = {}, 0
    while i < len(words):
        w = words[i]
        if w.startswith("--"):
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
            if w not in ("--host", "--port"):
                out[w] = value
            i += 2 if value else 1
        else:
            i += 1
    return out


def changes(command: str, recipe: str) -> str:
    """What ``command`` changes against the recipe's ``command``, in command words (the model
    id first when it differs)."""
    a, b = (
        shlex.split(command.split("vllm serve", 1)[-1]),
        shlex.split(recipe.split("vllm serve", 1)[-1]),
    )
    out = [f"model {a[0]}"] if a and b and a[0] != b[0] else []
    mine, theirs = _flags(command), _flags(recipe)
    for flag in dict.fromkeys([*theirs, *mine]):
        if flag not in mine:
            out.append(f"no {flag}")
        elif theirs.get(flag) != mine[flag]:
            out.append(f"{flag} {mine[flag]}".strip())
    return "; ".join(out)


def _notebook_run(nb_path: Path) -> dict[str, Any]:
    """The injected parameters of an executed notebook, and the command its step 1 printed."""
    nb = json.loads(nb_path.read_text())
    params: dict[str, Any] = {}
    command = None
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            for line in src.splitlines():
                m = re.match(r"^(\w+) = (.+)$", line)
                if m:
                    params[m.group(1)] = json.loads(
                        m.group(2).replace("True", "true").replace("False", "false")
                    )
        if command is None and cell["cell_type"] == "code" and "shell_command()" in src:
            text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
            command = text.split("\nflags checked")[0].strip()
    return {"params": params, "command": command, "notebook": _rel(nb_path)}


def _points(folder: Path, version: str) -> list[dict[str, Any]]:
    files = sorted(p for p in folder.glob("*-c*.json") if "restart" not in p.name)
    df = points_frame(files)
    rows = []
    for row in df.to_dict("records"):
        row["workload"] = WORKLOAD["name"]
        row["vllm_version"] = version
        row["source"] = _rel(Path(row["path"]))
        rows.append(_saved_row(row))
    return sorted(rows, key=lambda r: r["concurrency"])


def notebook_sweeps(release: str) -> dict[str, Any]:
    """The h200 notebook's sweeps on ``release`` (``docs/results/h200/vllm-<release>/``)."""
    root = H200 / f"vllm-{release}"
    runs = [_notebook_run(p) for p in sorted(root.glob("h200-*.ipynb"))]
    cands = []
    recipe_cmd = None
    for folder in sorted(root.iterdir()):
        m = _FOLDER.match(folder.name)
        if not m or not folder.is_dir() or not list(folder.glob("*-c*.json")):
            continue
        variant, kernel = m.groups()
        run = next(
            r for r in runs
            if r["params"].get("variant") == variant
            and r["params"].get("moe_backend", "humming" if variant == "nvfp4" else None) == kernel
        )  # fmt: skip
        recipe = variant == "nvfp4" and "moe_backend" not in run["params"]
        cands.append({
            "name": f"{variant}-{kernel}", "recipe": recipe and release == "0.32.0",
            "status": "ok", "variant": variant, "speculative": "none", "moe_backend": kernel,
            "vllm_version": release, "command": run["command"],
            "note": f"the h200 notebook executed by papermill ({run['notebook']}, weightless: "
                    "--load-format dummy on the architecture folder)"
                    + ("; the recipe's command" if recipe else ""),
            "spec": {k: v for k, v in run["params"].items()
                     if k in ("variant", "moe_backend", "vllm_version") and (k, v) != ("variant", "nvfp4")},
            "failures": [], "points": _points(folder, release),
        })  # fmt: skip
        if recipe:
            recipe_cmd = run["command"]
    for c in cands:
        diff = changes(c["command"], recipe_cmd) if recipe_cmd else ""
        c["changes"] = "; ".join(
            x for x in (f"vllm version {release}" if release != "0.32.0" else "", diff) if x
        )
    return _document(cands, f"docs/results/h200/vllm-{release}/ (the h200 notebook on one H200)")


def script_sweeps() -> dict[str, Any]:
    """The vLLM 0.26.0 script runs (``summary-<variant>[-<profile>].json``)."""
    cands = []
    for summary in sorted(H200.glob("summary-*.json")):
        data = json.loads(summary.read_text())
        folder = H200 / summary.stem.removeprefix("summary-")
        if not folder.is_dir():
            continue
        version = data["versions"]["vllm"]
        kernel = _flags(data["serve_command"]).get("--moe-backend") or "default (Triton)"
        endpoint = data.get("endpoint") or "chat"
        cands.append({
            "name": f"{folder.name}-{version}", "recipe": False, "status": "ok",
            "variant": data["variant"], "speculative": "none", "moe_backend": kernel,
            "vllm_version": version, "command": data["serve_command"],
            "changes": changes(data["serve_command"], data["recipe_command"]),
            "note": f"tools/device/run_h200.py on vLLM {version} ({_rel(summary)}: the recipe's "
                    f"command adapted to that bundle, see its adaptations; {endpoint} endpoint)",
            "spec": {"variant": data["variant"], "vllm_version": version},
            "failures": [], "points": _points(folder, version),
        })  # fmt: skip
    return _document(cands, "docs/results/h200/summary-*.json (vLLM 0.26.0 script runs)")


def _document(cands: list[dict[str, Any]], origin: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "measured_on": {"target": "h200", "gpu": "NVIDIA H200 (143,771 MiB)", "stand_in": False},
        "applies_to": APPLIES_TO,
        "origin": f"converted by tools/seed_tune_results.py from {origin}; no number added",
        "slo": None,
        "workloads": [WORKLOAD],
        "candidates": cands,
    }


def documents() -> dict[str, dict[str, Any]]:
    """``{file name: document}`` of every seed file."""
    docs = {f"seed-vllm-{r}.json": notebook_sweeps(r) for r in ("0.32.0", "0.28.0")}
    docs["seed-vllm-0.26.0.json"] = script_sweeps()
    return docs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    stale = []
    for name, doc in documents().items():
        text = json.dumps(doc, indent=1) + "\n"
        path = OUT / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print("wrote", _rel(path))
    if stale:
        print("stale:", *stale, "(run python -m tools.seed_tune_results)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
