"""What the helpers read from a vLLM server, checked against each release: sections 6-9 of
``python -m tools.drift`` (:class:`BehaviourDiff`).

What the helpers read comes from their code, not a list: the metric names are the
``"vllm:..."`` string constants in ``helpers/`` and ``lab/`` (:func:`helper_metrics`); the reply
fields are the ``_get(x, "field")`` calls in the functions
:data:`helpers.chat.types.REPLY_READERS` and :data:`lab.agents.apis.REPLY_READERS` name per
API, with their ``or`` fallbacks and the values they compare a field with
(:func:`helper_reads`). A field counts as defined by a release when any model of that API has
it (the helpers' receivers are untyped SDK objects or dicts). :func:`missing_reads` is the check
``tests/tools/test_drift_behaviour.py`` runs on every offered release's behaviour table
(:mod:`tools.drift_behaviour`, which reads those tables from the releases' source).
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from helpers.paths import REPO_ROOT
from tools.drift_behaviour import (
    API_ROOTS,
    LOSSLESS_WORDS,
    LOSSY_WORDS,
    METRIC_RE,
    MODEL_PREFIX,
    SHARED_WEIGHTS,
    BehaviourError,
    dotted_name,
)

#: What prometheus_client appends to a metric's name when it exposes it (a Counter
#: ``vllm:prompt_tokens`` is scraped as ``vllm:prompt_tokens_total``).
EXPOSED_SUFFIXES = ("_total", "_created", "_bucket", "_sum", "_count")
#: The helpers' folder; the function their reply readers' fields are read through.
HELPERS = "helpers"
GETTER = "_get"
#: The folders whose code is read: the core and the lab built on it.
READ_ROOTS = (HELPERS, "lab")
#: The files that each define a ``REPLY_READERS`` table: the core's (chat completions, models)
#: first, then the lab's (Responses, Messages); the lab's is left out of a tree without it.
READER_TABLES = (f"{HELPERS}/chat/types.py", "lab/agents/apis.py")


# --------------------------------------------------------------------------- what the helpers read


def helper_metrics(root: Path = REPO_ROOT) -> dict[str, list[str]]:
    """``{"vllm:name": ["helpers/bench/metrics.py", "lab/fleet/fleet.py::Fleet.requests"]}``:
    every string constant of ``helpers/**/*.py`` and ``lab/**/*.py`` that is a whole metric
    name (a docstring naming one is not), where: the function or method reading it, else the
    module. Named, not numbered, so the committed report does not move with every edit above
    the line."""
    out: dict[str, list[str]] = {}
    for path in _code_files(Path(root)):
        text = path.read_text(encoding="utf-8")
        if "vllm:" not in text:
            continue
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(text)
        owner = {id(n): qual.removeprefix("m.") for qual, fn in _functions(tree, "m")
                 for n in ast.walk(fn)}  # fmt: skip
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if METRIC_RE.fullmatch(node.value):
                    fn = owner.get(id(node))
                    where = f"{rel}::{fn}" if fn else rel
                    if where not in out.get(node.value, []):
                        out.setdefault(node.value, []).append(where)
    return dict(sorted(out.items()))


@dataclasses.dataclass
class Read:
    """A reply field the helpers read.

    Attributes:
        api: a key of :data:`API_ROOTS` (``"chat completions"``...).
        field: e.g. ``"reasoning"``.
        where: ``["helpers/chat/types.py:250", ...]``.
        alternatives: fields read instead when this one is missing (``_get(m, "reasoning") or
            _get(m, "reasoning_content")``): one of them present is enough.
        values: the values the helpers compare the field with (``kind == "reasoning"``,
            ``why in (None, "max_output_tokens")``, the keys of a dict it is looked up in).
    """

    api: str
    field: str
    where: list[str]
    alternatives: list[str]
    values: list[str]


def _code_files(root: Path) -> list[Path]:
    """The ``*.py`` files of :data:`READ_ROOTS` under ``root``, sorted (a missing root: none)."""
    return [p for folder in READ_ROOTS for p in sorted((root / folder).rglob("*.py"))]


def _table(root: Path, rel: str) -> dict[str, tuple[str, ...]]:
    tree = ast.parse((root / rel).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign):
            target, value = node.targets[0], node.value
        else:
            continue
        if dotted_name(target) == "REPLY_READERS":
            return ast.literal_eval(value)
    raise BehaviourError(f"{rel} defines no REPLY_READERS.")


def _readers(root: Path) -> dict[str, tuple[str, ...]]:
    """:data:`helpers.chat.types.REPLY_READERS` and :data:`lab.agents.apis.REPLY_READERS`
    (the files of :data:`READER_TABLES`), read from the files (``root`` may be a copy), merged
    per API."""
    out: dict[str, tuple[str, ...]] = {}
    for rel in READER_TABLES:
        if rel != READER_TABLES[0] and not (Path(root) / rel).is_file():
            continue
        for api, fns in _table(Path(root), rel).items():
            out[api] = out.get(api, ()) + tuple(fns)
    return out


def _functions(tree: ast.Module, module: str) -> Iterator[tuple[str, ast.AST]]:
    """``(qualified name, node)`` of each top-level function and method (nested code counts
    as its function's)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{module}.{node.name}", node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{module}.{node.name}.{sub.name}", sub


def _getter_field(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Call)
        and dotted_name(node.func) == GETTER
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    return None


def _constants(node: ast.AST) -> list[str]:
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def helper_reads(root: Path = REPO_ROOT) -> tuple[list[Read], list[str]]:
    """The reply fields the helpers read, from their code.

    Every ``_get(x, "field")`` call in ``helpers/**/*.py`` and ``lab/**/*.py`` is read; its API
    is the key of :data:`helpers.chat.types.REPLY_READERS` or
    :data:`lab.agents.apis.REPLY_READERS` that names the function it is in.

    Args:
        root: the checkout (default this one).

    Returns:
        ``(reads, strays)``: one :class:`Read` per (api, field), sorted; ``strays`` the
        ``"file::function"`` of each ``_get(x, "field")`` outside those functions (a
        reader that is not checked: add it to the ``REPLY_READERS`` of its root).
    """
    root = Path(root)
    api_of = {fn: api for api, fns in _readers(root).items() for fn in fns}
    found: dict[tuple[str, str], Read] = {}
    strays = []
    for path in _code_files(root):
        text = path.read_text(encoding="utf-8")
        if f"{GETTER}(" not in text:
            continue
        rel = path.relative_to(root).as_posix()
        module = rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        tree = ast.parse(text)
        dicts = {
            dotted_name(n.targets[0]): [
                k.value for k in n.value.keys if isinstance(k, ast.Constant)
            ]
            for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)
        }
        for qual, fn in _functions(tree, module):
            api = api_of.get(qual)
            var: dict[str, str] = {}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    got = _getter_field(node.value)
                    if got:
                        var[node.targets[0].id] = got
            for node in ast.walk(fn):
                field = _getter_field(node)
                if field is None:
                    continue
                where = f"{rel}::{qual.removeprefix(module + '.')}"  # named, not numbered
                if api is None:
                    strays.append(where)
                    continue
                r = found.setdefault((api, field), Read(api, field, [], [], []))
                if where not in r.where:
                    r.where.append(where)
            if api is None:
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                    names = [f for f in map(_getter_field, node.values) if f]
                    for f in names:
                        found[(api, f)].alternatives += [o for o in names if o != f]
                elif isinstance(node, ast.Compare):
                    left = _getter_field(node.left) or (
                        var.get(node.left.id) if isinstance(node.left, ast.Name) else None
                    )
                    if left:
                        for c in node.comparators:
                            found[(api, left)].values += _constants(c)
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get"
                    and dotted_name(node.func.value) in dicts
                    and node.args
                    and isinstance(node.args[0], ast.Name)
                    and node.args[0].id in var
                ):
                    found[(api, var[node.args[0].id])].values += dicts[dotted_name(node.func.value)]
    reads = []
    for key in sorted(found):
        r = found[key]
        r.alternatives = sorted(set(r.alternatives))
        r.values = sorted(set(r.values))
        reads.append(r)
    return reads, strays


# --------------------------------------------------------------------------- checking a table


def api_fields(table: Mapping[str, Any], api: str, side: str = "reply") -> dict[str, set[str]]:
    """``{field: its Literal values}`` over every model of ``api`` in a behaviour table that
    the ``side`` (``"reply"``: what the helpers read; ``"request"``) reaches."""
    out: dict[str, set[str]] = {}
    for model in table.get("protocol", {}).get(api, {}).get("models", {}).values():
        if side not in model.get("sides", [side]):
            continue
        for field, literals in model.get("fields", {}).items():
            out.setdefault(field, set()).update(literals)
    return out


def metric_source(table: Mapping[str, Any], name: str) -> str | None:
    """The name a release defines that ``name`` (as scraped) comes from: itself, or less a
    suffix prometheus_client adds (``vllm:prompt_tokens_total`` <- ``vllm:prompt_tokens``)."""
    names = table.get("metrics", {}).get("names", {})
    if name in names:
        return name
    for suffix in EXPOSED_SUFFIXES:
        if name.endswith(suffix) and name.removesuffix(suffix) in names:
            return name.removesuffix(suffix)
    return None


def _has_read(table: Mapping[str, Any], r: Read) -> bool:
    fields = api_fields(table, r.api)
    return any(f in fields for f in [r.field, *r.alternatives])


def missing_reads(
    tables: Mapping[str, Mapping[str, Any]],
    reads: Iterable[Read],
    metric_names: Iterable[str],
) -> dict[str, list[str]]:
    """What each release lacks of what the helpers read.

    A field (or a value compared with a ``Literal`` field) or metric is checked when at least
    one of ``tables`` defines it (the others are another library's: the SDK types vLLM reuses,
    the ``openai`` Responses output items); a field is there when it or one of its
    ``alternatives`` is.

    Args:
        tables: ``{version: behaviour table}`` (:func:`tools.drift_behaviour.load_behaviour`).
        reads: :func:`helper_reads`'s reads.
        metric_names: :func:`helper_metrics`'s names.

    Returns:
        ``{version: ["chat completions field `reasoning` (helpers/chat/types.py:250)", ...]}``,
        one key per table, [] when nothing is missing.
    """
    reads = list(reads)
    metric_names = list(metric_names)
    out: dict[str, list[str]] = {v: [] for v in tables}
    for r in reads:
        if not any(_has_read(t, r) for t in tables.values()):
            continue
        for v, t in tables.items():
            if not _has_read(t, r):
                out[v].append(f"{r.api} field `{r.field}` ({r.where[0]})")
                continue
            checked = set().union(
                *(api_fields(t2, r.api).get(r.field, set()) for t2 in tables.values())
            )
            have = api_fields(t, r.api).get(r.field, set())
            for value in r.values:
                if value in checked and value not in have:
                    out[v].append(f"{r.api} `{r.field}` value `{value}` ({r.where[0]})")
    for name in metric_names:
        if not any(metric_source(t, name) for t in tables.values()):
            continue
        for v, t in tables.items():
            if not metric_source(t, name):
                out[v].append(f"metric `{name}`")
    return out


# --------------------------------------------------------------------------- comparing two releases


def _codes(items: Iterable[str]) -> str:
    items = list(items)
    return ", ".join(f"`{i}`" for i in items) if items else "none"


def _quote(text: str, limit: int = 200) -> str:
    text = text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return '"' + text.replace("|", "\\|") + '"'


def _weight_verdict(w: Mapping[str, Any] | None) -> str:
    if not w:
        return "absent"
    if w.get("builds"):
        return "own"
    return "target's" if w.get("set_to_none") else "not set"


def _weight_words(w: Mapping[str, Any] | None, attr: str) -> str:
    """One drafter module (``embed_tokens`` / ``lm_head``) in words, from :func:`_shared_weight`."""
    if not w:
        return "no such drafter"
    flag = f"has_own_{attr}"
    if w.get("builds"):
        said = f"builds its own ({_codes(w['builds'])})"
    elif w.get("set_to_none"):
        said = f"builds none (`self.{attr} = None`): takes the target's"
    else:
        said = f"never sets `self.{attr}`"
    bits = []
    if w.get(flag) is not None:
        bits.append(f"`{flag} = {w[flag]}` on the class")
    if w.get(f"{flag}_set_to"):
        bits.append(
            f"its methods set `self.{flag}` to {' / '.join(str(v) for v in w[f'{flag}_set_to'])}"
        )
    if not bits:
        bits.append(f"no `{flag}`")
    return f"{said}; {', '.join(bits)}"


def _api_lines(
    api: str, x: Mapping[str, Any], y: Mapping[str, Any], read_by: set, n: str
) -> list[str]:
    """Section 7's lines of one API: its fields and models added and removed, by side, between
    two releases' ``protocol[api]`` (``x`` old, ``y`` new)."""
    lines: list[str] = []
    ma, mb = x.get("models", {}), y.get("models", {})
    roots = y.get("roots") or x.get("roots") or {}
    where = sorted({m for m in roots.values() if m})
    head = f"- **{api}** ({_codes(roots)} in {', '.join(where) or 'nowhere'}; {len(ma)} → {len(mb)} models)"
    missing_roots = [r for r, m in (y.get("roots") or {}).items() if m is None]
    if missing_roots:
        head += f"; **no {_codes(missing_roots)} in {n}**"

    def side(model: str) -> str:
        sides = (mb.get(model) or ma.get(model) or {}).get("sides", [])
        return sides[0] if len(sides) == 1 else "both"

    def mark(field: str, model: str) -> str:
        text = f"{model}.{field}"
        read = (api, field) in read_by and side(model) != "request"
        return f"**`{text}`**" if read else f"`{text}`"

    def by_side(items: list[tuple[str, str]]) -> str:
        groups: dict[str, list[str]] = {}
        for model, text in items:
            groups.setdefault(side(model), []).append(text)
        return "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(groups.items()))

    added, removed, values = [], [], []
    for model in sorted(set(ma) & set(mb)):
        fa, fb = ma[model].get("fields", {}), mb[model].get("fields", {})
        added += [(model, mark(f, model)) for f in sorted(set(fb) - set(fa))]
        removed += [(model, mark(f, model)) for f in sorted(set(fa) - set(fb))]
        for f in sorted(set(fa) & set(fb)):
            plus = sorted(set(fb[f]) - set(fa[f]))
            minus = sorted(set(fa[f]) - set(fb[f]))
            if plus or minus:
                values.append(f"{mark(f, model)}: added {_codes(plus)}; removed {_codes(minus)}")
    new_models = sorted(set(mb) - set(ma))
    gone_models = sorted(set(ma) - set(mb))
    lines.append(head + ":")
    lines.append(f"  - fields added: {by_side(added) or 'none'}")
    lines.append(f"  - fields removed: {by_side(removed) or 'none'}")
    if new_models:
        shown = []
        for m in new_models:
            fields = list(mb[m].get("fields", {}))
            more = f", +{len(fields) - 6}" if len(fields) > 6 else ""
            shown.append(
                (
                    m,
                    f"`{m}` ({', '.join(mark(f, m) for f in fields[:6]) or 'no fields'}{more})",
                )
            )
        lines.append(f"  - models new: {by_side(shown)}")
    if gone_models:
        lines.append(f"  - models gone: {_codes(gone_models)}")
    if values:
        lines.append(f"  - `Literal` values: {'; '.join(values)}")
    sdk_new = sorted(set(y.get("sdk_types", [])) - set(x.get("sdk_types", [])))
    sdk_gone = sorted(set(x.get("sdk_types", [])) - set(y.get("sdk_types", [])))
    if sdk_new or sdk_gone:
        lines.append(f"  - SDK types used: added {_codes(sdk_new)}; removed {_codes(sdk_gone)}")
    return lines


@dataclasses.dataclass
class BehaviourDiff:
    """Sections 6-9 of the drift report: two behaviour tables and what the helpers read.

    Attributes:
        old / new: the versions; old_table / new_table: their behaviour tables
            (:func:`tools.drift_behaviour.read_behaviour`'s contents).
        reads / strays: :func:`helper_reads`; metric_names: :func:`helper_metrics`.
    """

    old: str
    new: str
    old_table: dict[str, Any]
    new_table: dict[str, Any]
    reads: list[Read]
    strays: list[str]
    metric_names: dict[str, list[str]]

    @property
    def missing(self) -> list[str]:
        """What the helpers read that the new release lacks (and the old one defines)."""
        tables = {self.old: self.old_table, self.new: self.new_table}
        return missing_reads(tables, self.reads, self.metric_names)[self.new]

    @property
    def breaking(self) -> list[str]:
        """One line per helper read that breaks on the new release."""
        return [f"the helpers read {m}: gone in {self.new}" for m in self.missing]

    # ----------------------------------------------------------------- 6
    def _interfaces(self) -> list[str]:
        o, n = self.old, self.new
        a = self.old_table.get("model_interfaces", {})
        b = self.new_table.get("model_interfaces", {})
        lines = [
            "",
            f"## 6. Model interfaces ({MODEL_PREFIX}: vllm/model_executor/models/"
            f"{MODEL_PREFIX}*.py), {o} → {n}",
            "",
            "The classes vllm/model_executor/models/registry.py maps a Nemotron-H architecture "
            "to, and the classes of those files whose bases come from interfaces.py; flags are "
            "the `ClassVar[Literal[True]]` attributes the interfaces give (what vLLM's "
            "`supports_*(model)` checks read).",
            "",
            f"| class (architectures) | bases in {n} | change from {o} |",
            "|---|---|---|",
        ]
        ca, cb = a.get("classes", {}), b.get("classes", {})
        notes = []
        for name in sorted(set(ca) | set(cb), key=lambda c: (c not in cb, c)):
            x, y = ca.get(name), cb.get(name)
            archs = (y or x or {}).get("architectures") or []
            label = f"`{name}`" + (f" ({', '.join(archs)})" if archs else "")
            if y is None:
                lines.append(f"| {label} | **gone** | was {', '.join(x['bases'])} |")  # type: ignore[index]
                continue
            if x is None:
                lines.append(f"| {label} | {', '.join(y['bases'])} | new in {n} |")
                continue
            gone = [s for s in x["bases"] if s not in y["bases"]]
            added = [s for s in y["bases"] if s not in x["bases"]]
            lost = [f for f in x["flags"] if f not in y["flags"]]
            gained = [f for f in y["flags"] if f not in x["flags"]]
            change = "; ".join(
                [f"**drops {_codes(gone)}**"] * bool(gone)
                + [f"adds {_codes(added)}"] * bool(added)
                + [f"flags lost: {_codes(lost)}"] * bool(lost)
                + [f"flags gained: {_codes(gained)}"] * bool(gained)
            )
            lines.append(f"| {label} | {', '.join(y['bases'])} | {change or '—'} |")
            for base in gone:
                was = a.get("interfaces", {}).get(base, {})
                now = b.get("interfaces", {}).get(base)
                said = f"`{name}` no longer lists `{base}`"
                if was.get("doc"):
                    said += f" ({o}: {_quote(was['doc'])})"
                said += (
                    f"; {n} still defines it: {_quote(now['doc'])}"
                    if now and now.get("doc")
                    else f"; {n} has no such interface"
                    if now is None
                    else ""
                )
                notes.append(said + ".")
            for flag in lost:
                check = a.get("flag_checks", {}).get(flag)
                still = b.get("flag_checks", {}).get(flag)
                notes.append(
                    f"`{name}` loses `{flag}`: "
                    + (
                        f'{o}\'s `{check}(model)` (`getattr(model, "{flag}", False)`) was True, '
                        if check
                        else ""
                    )
                    + (
                        f"{n}'s `{still}(model)` says False."
                        if still
                        else f"a check for it now says False ({n} has no `{check or flag}` check)."
                    )
                )
        da, db = a.get("drafters", {}), b.get("drafters", {})
        for name in sorted(set(da) | set(db)):
            for attr in SHARED_WEIGHTS:
                wa, wb = da.get(name, {}).get(attr), db.get(name, {}).get(attr)
                va, vb = _weight_verdict(wa), _weight_verdict(wb)
                head = f"MTP drafter `{name}`, `{attr}`"
                if wa == wb:
                    notes.append(f"{head}: unchanged, {_weight_words(wb, attr)}.")
                else:
                    mark = "**" if va != vb else ""
                    notes.append(
                        f"{head}: {mark}{o} {va} → {n} {vb}{mark}: {o} {_weight_words(wa, attr)}; "
                        f"{n} {_weight_words(wb, attr)}."
                    )
        lines.append("")
        lines += [f"- {x}" for x in notes] or ["- No interface changed."]
        return lines

    # ----------------------------------------------------------------- 7
    def _protocol(self) -> list[str]:
        o, n = self.old, self.new
        pa, pb = self.old_table.get("protocol", {}), self.new_table.get("protocol", {})
        read_by = {(r.api, r.field) for r in self.reads}
        lines = [
            "",
            f"## 7. API fields and events, {o} → {n}",
            "",
            "Fields of the pydantic models reachable from each API's root models through their "
            "annotations (wherever the release defines them under vllm/entrypoints/); "
            "request / reply / both: the roots that reach a model; **bold**: a reply field the "
            "helpers read (`helpers.chat.types.REPLY_READERS`, "
            "`lab.agents.apis.REPLY_READERS`).",
            "",
        ]
        for api in API_ROOTS:
            lines += _api_lines(api, pa.get(api, {}), pb.get(api, {}), read_by, n)
        ea = self.old_table.get("responses_events", {})
        eb = self.new_table.get("responses_events", {})
        lines.append(
            f'- **Responses streaming events** the server sends (`type="response.…"` under '
            f"vllm/entrypoints/; {len(ea)} → {len(eb)}): added "
            + (", ".join(f"`{e}` ({eb[e]})" for e in sorted(set(eb) - set(ea))) or "none")
            + f"; removed {_codes(sorted(set(ea) - set(eb)))}"
        )
        lines += [
            "",
            f'What the helpers read (their `_get(x, "field")` calls), on {o} and {n}:',
            "",
        ]
        lines += ["| API | field | where | values compared | " + o + " | " + n + " |"]
        lines.append("|---|---|---|---|---|---|")
        tables = {o: self.old_table, n: self.new_table}
        missing = missing_reads(tables, self.reads, {})
        for r in self.reads:
            cells = []
            for v, t in tables.items():
                if not any(_has_read(t2, r) for t2 in tables.values()):
                    cells.append("not in vLLM's source (an SDK type's field)")
                    continue
                gone = [
                    m
                    for m in missing[v]
                    if m.startswith(f"{r.api} field `{r.field}`")
                    or m.startswith(f"{r.api} `{r.field}` value")
                ]
                fields = api_fields(t, r.api)
                via = [f for f in [r.field, *r.alternatives] if f in fields]
                if gone:
                    cells.append("**missing**: " + "; ".join(g.split(" (")[0] for g in gone))
                elif r.field in fields:
                    cells.append("yes")
                else:
                    cells.append(f"via {_codes(via)}")
            alt = f" (or {_codes(r.alternatives)})" if r.alternatives else ""
            known = set().union(
                *(api_fields(t, r.api).get(r.field, set()) for t in tables.values())
            )
            outside = [v for v in r.values if v not in known]
            compared = (
                _codes(v for v in r.values if v in known) if len(outside) < len(r.values) else ""
            )
            if outside:
                compared += ("; " if compared else "") + f"{_codes(outside)} not in vLLM's source"
            lines.append(
                f"| {r.api} | `{r.field}`{alt} | {r.where[0]}"
                + (f" +{len(r.where) - 1}" if len(r.where) > 1 else "")
                + f" | {compared or '—'} | {cells[0]} | {cells[1]} |"
            )
        if self.strays:
            lines.append(
                f"- **Not checked** (a `_get` outside REPLY_READERS): {', '.join(self.strays)}"
            )
        return lines

    # ----------------------------------------------------------------- 8
    def _rejection(self) -> list[str]:
        o, n = self.old, self.new
        a, b = self.old_table.get("rejection", {}), self.new_table.get("rejection", {})
        field = b.get("field") or a.get("field")
        lines = [
            "",
            f"## 8. Speculative rejection methods (`SpeculativeConfig.{field}`, "
            f"{b.get('file') or a.get('file')}), {o} → {n}",
            "",
        ]
        if not field:
            return lines + ["Neither release has a rejection-method field."]
        lines += [
            f"| method | {o} | {n} | lossless? | the code's words |",
            "|---|---|---|---|---|",
        ]
        ma, mb = a.get("methods", {}), b.get("methods", {})
        for m in list(dict.fromkeys([*ma, *mb])):
            x, y = ma.get(m), mb.get(m)
            cur = y or x or {}
            verdict = cur.get("verdict", "not said")
            key = LOSSY_WORDS if verdict == "lossy" else LOSSLESS_WORDS
            words = [
                w for w in cur.get("words", []) if any(k in w.lower().replace("*", "") for k in key)
            ]
            words = words[:2] or cur.get("words", [])[:1]
            default = " (default)" if m == (b.get("default") or a.get("default")) else ""
            lines.append(
                f"| `{m}`{default} | {'yes' if x else '**no**'} | "
                f"{'yes' if y else '**no**'}{' (new)' if y and not x else ''} | "
                f"{'**lossy**' if verdict == 'lossy' else verdict} | "
                f"{'; '.join(_quote(w, 160) for w in words) or '—'} |"
            )
        lines += [
            "",
            "The rule: the words vLLM says about a method (its part of the field's docstring, "
            "other fields' docstrings that name it, the warnings and errors under `if "
            f'... .{field} == "<method>"`) make it lossy when they hold '
            f"{_codes(LOSSY_WORDS)}, else lossless when they hold {_codes(LOSSLESS_WORDS)} (the "
            'draft is verified against the target), else "not said".',
        ]
        return lines

    # ----------------------------------------------------------------- 9
    def _metrics(self) -> list[str]:
        o, n = self.old, self.new
        a = self.old_table.get("metrics", {}).get("names", {})
        b = self.new_table.get("metrics", {}).get("names", {})
        added, removed = sorted(set(b) - set(a)), sorted(set(a) - set(b))
        lines = [
            "",
            f"## 9. Prometheus metrics (`vllm:*` names in vllm/**/*.py, less vllm/benchmarks/), {o} → {n}",
            "",
            f"- {o} defines {len(a)}, {n} {len(b)}: added ({len(added)}) {_codes(added)}; "
            f"removed ({len(removed)}) {_codes(removed)}",
        ]
        built = self.new_table.get("metrics", {}).get("built_at_run_time", [])
        if built:
            lines.append(
                f'- Names built at run time (`f"vllm:{{...}}"`, not listed): {", ".join(built)}'
            )
        lines += [
            "",
            f"| metric the helpers scrape | where | {o} | {n} |",
            "|---|---|---|---|",
        ]
        for name, where in self.metric_names.items():
            cells = []
            for t in (self.old_table, self.new_table):
                src = metric_source(t, name)
                cells.append(
                    "**missing**" if src is None else "yes" if src == name else f"yes (`{src}`)"
                )
            lines.append(f"| `{name}` | {', '.join(where)} | {cells[0]} | {cells[1]} |")
        return lines

    def markdown(self) -> list[str]:
        """Sections 6-9 as Markdown lines (the drift report appends them)."""
        return self._interfaces() + self._protocol() + self._rejection() + self._metrics()


def compare(
    old: str,
    new: str,
    old_table: Mapping[str, Any],
    new_table: Mapping[str, Any],
    root: Path = REPO_ROOT,
) -> BehaviourDiff:
    """Two releases' behaviour tables and what the helpers of the checkout ``root`` read.

    Args:
        old / new: the versions (``"0.32.0"``).
        old_table / new_table: their behaviour tables
            (:func:`tools.drift_behaviour.read_behaviour` or ``load_behaviour``).
        root: the checkout whose ``helpers/`` and ``lab/`` are read.

    Raises:
        BehaviourError: ``helpers/chat/types.py`` (or ``lab/agents/apis.py``, when there is
            one) defines no ``REPLY_READERS``.
    """
    reads, strays = helper_reads(root)
    return BehaviourDiff(
        old, new, dict(old_table), dict(new_table), reads, strays, helper_metrics(root)
    )
