"""What a vLLM release does beside its flags: sections 6-9 of ``python -m tools.drift``.

Each fact is read with ``ast`` from a release's own ``vllm/`` source (a wheel's Python files,
never imported) by :func:`read_behaviour`, or from its committed behaviour table
``docs/results/flags/behaviour-vllm-X.json`` (:func:`generate`, ``python -m tools.flagtables
behaviour WHEEL``); :mod:`tools.drift_reads` compares two releases' facts, with what the helpers
read marked:

6. **Model interfaces**: the classes ``vllm/model_executor/models/registry.py`` maps a
   Nemotron-H architecture to (``("nemotron_h", "NemotronHForCausalLM")``, the MTP drafter's
   ``("nemotron_h_mtp", "NemotronHMTP")``) and the classes of those files whose bases come from
   ``interfaces.py``: their bases, and the ``ClassVar[Literal[True]]`` flags those interfaces
   give (``supports_mamba_prefix_caching``: what ``supports_mamba_prefix_caching(model)``,
   ``getattr(model, "supports_mamba_prefix_caching", False)``, reads). For the MTP drafter,
   whether it builds its own embedding and LM head or takes the target's: the signal is
   (a) an assignment ``self.embed_tokens = <a call>`` / ``self.lm_head = <a call>`` anywhere in
   its file (it builds one: ``VocabParallelEmbedding(...)``, ``ParallelLMHead(...)``) or only
   ``= None`` (it is set from outside), and (b) the ``has_own_embed_tokens`` /
   ``has_own_lm_head`` attribute the speculative proposer reads
   (``vllm/v1/spec_decode/llm_base_proposer.py`` shares the target's when it is False): its
   class-level value, and the values methods set. 0.32.0 builds both and sets
   ``has_own_lm_head`` True when the checkpoint has ``lm_head.*``; 0.33.0 builds neither
   (``= None``) and declares both False.
7. **Protocol fields and events**: the fields of the pydantic models reachable from each API's
   root models (:data:`API_ROOTS`, found under ``vllm/entrypoints/`` wherever the release puts
   them) through the field annotations, with each ``Literal`` field's values; names vLLM takes
   from the ``openai`` / ``anthropic`` SDKs are listed, not read. The Responses streaming
   events are the ``response.*`` strings passed as ``type=`` (or declared as a
   ``type: Literal[...]``) under ``vllm/entrypoints/``.
8. **Speculative rejection methods**: the ``Literal`` values of ``SpeculativeConfig``'s field
   whose name has ``reject`` in it (``rejection_sample_method``, vllm/config/speculative.py),
   each with the words the file says about it (see :func:`rejection_methods` for the
   lossless / lossy rule).
9. **Metrics**: every ``"vllm:..."`` string constant in ``vllm/**/*.py`` outside
   ``vllm/benchmarks/`` (the client side).

What the helpers read (from their code) and the Markdown of sections 6-9: :mod:`tools.drift_reads`.
"""

from __future__ import annotations

import ast
import datetime as _dt
import hashlib
import json
import re
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from helpers.config.flagtable import FLAGS_DIR
from helpers.errors import CookbookError

#: The architecture modules read for section 6 (``vllm/model_executor/models/<prefix>*.py``).
MODEL_PREFIX = "nemotron_h"
#: The modules an MTP drafter could build for itself rather than take from the target.
SHARED_WEIGHTS = ("embed_tokens", "lm_head")
#: Each API's root pydantic models, the request's and the reply's; the fields of every vLLM
#: model reachable from them are read, and each model is marked with the sides that reach it.
API_ROOTS: dict[str, dict[str, tuple[str, ...]]] = {
    "chat completions": {
        "request": ("ChatCompletionRequest",),
        "reply": ("ChatCompletionResponse", "ChatCompletionStreamResponse"),
    },
    "responses": {"request": ("ResponsesRequest",), "reply": ("ResponsesResponse",)},
    "messages": {
        "request": ("AnthropicMessagesRequest",),
        "reply": ("AnthropicMessagesResponse", "AnthropicStreamEvent"),
    },
    "models": {"request": (), "reply": ("ModelList",)},
}
#: Words that make a rejection method lossy (checked first) or lossless; see
#: :func:`rejection_methods`.
LOSSY_WORDS = ("lossy", "degrade", "unconditional acceptance", "not lossless")
LOSSLESS_WORDS = ("lossless", "rejection sampling", "verification", "verifies")
METRIC_RE = re.compile(r"vllm:[a-z][a-z0-9_]*")
#: Packages an annotation names that are no API's types (left out of ``sdk_types``).
NOT_SDK = frozenset(
    {
        "typing",
        "typing_extensions",
        "pydantic",
        "collections",
        "enum",
        "abc",
        "dataclasses",
        "torch",
        "PIL",
        "numpy",
        "msgspec",
    }
)
EVENT_RE = re.compile(r"response\.[a-z_]+(?:\.[a-z_]+)*")


class BehaviourError(CookbookError):
    """A behaviour table is missing, or a release's source cannot be read."""


def behaviour_path(version: str) -> Path:
    """``docs/results/flags/behaviour-vllm-<version>.json`` (beside the flag tables; a name
    :func:`helpers.config.flagtable.available_versions`'s ``vllm-*.json`` glob leaves out)."""
    return FLAGS_DIR / f"behaviour-vllm-{version}.json"


def available_versions() -> list[str]:
    """The releases with a committed behaviour table."""
    return sorted(
        p.stem.removeprefix("behaviour-vllm-") for p in FLAGS_DIR.glob("behaviour-*.json")
    )


def load_behaviour(version: str) -> dict[str, Any]:
    """The committed behaviour table of vLLM ``version``.

    Raises:
        BehaviourError: there is none (names the ones there are and the command making one).
    """
    path = behaviour_path(version)
    if not path.is_file():
        raise BehaviourError(
            f"No behaviour table for vLLM {version} in docs/results/flags/ (there are: "
            f"{', '.join(available_versions()) or 'none'}): pip download vllm=={version} "
            "--no-deps, then python -m tools.flagtables behaviour WHEEL."
        )
    return json.loads(path.read_text())


# --------------------------------------------------------------------------- reading a vllm/ tree


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def dotted_name(node: ast.AST) -> str:
    """``Name`` -> ``id``, ``a.b.C`` -> ``"a.b.C"``, anything else -> ``""``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted_name(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def _strings(nodes: Iterable[ast.AST]) -> list[str]:
    """String constants (f-strings with ``{}`` for their fields) under ``nodes``, in order."""
    out = []
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append(node.value)
            elif isinstance(node, ast.JoinedStr):
                out.append(
                    "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
                )
    return out


def _words(text: str) -> str:
    return " ".join(text.replace("*", "").split())


class VllmTree:
    """A release's ``vllm/`` package read with ``ast``: modules, classes, where a name in a
    module comes from.

    Args:
        root: a folder holding ``vllm/`` (an unpacked wheel or a site-packages folder).
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self._asts: dict[Path, ast.Module] = {}

    def parse(self, path: Path) -> ast.Module:
        """The module's AST (an empty module when it does not parse)."""
        if path not in self._asts:
            try:
                self._asts[path] = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
            except SyntaxError:
                self._asts[path] = ast.Module(body=[], type_ignores=[])
        return self._asts[path]

    def module(self, module: str) -> ast.Module | None:
        """The AST of dotted ``module`` (``vllm.config.speculative``), None when the release
        has no such module."""
        path = _module_file(self.root, module)
        return self.parse(path) if path else None

    def module_name(self, path: Path) -> str:
        """The dotted name of a file under the root (``.../vllm/a/__init__.py`` -> ``vllm.a``)."""
        rel = path.relative_to(self.root).with_suffix("")
        return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)

    def rel(self, path: Path) -> str:
        """``path`` relative to the root, as ``vllm/a/b.py``."""
        return path.relative_to(self.root).as_posix()

    def files(self, under: str = "vllm") -> list[Path]:
        """Every ``*.py`` under the root's folder ``under``, sorted."""
        return sorted((self.root / under).rglob("*.py"))

    def find_classes(self, name: str, under: str = "vllm/entrypoints") -> list[str]:
        """The modules under ``under`` that define a top-level class ``name``, a
        ``protocol.py`` first."""
        pat = re.compile(rf"^class {re.escape(name)}\b", re.M)
        found = []
        for path in self.files(under):
            if pat.search(path.read_text(encoding="utf-8", errors="replace")):
                found.append(path)
        found.sort(key=lambda p: (p.name != "protocol.py", str(p)))
        return [self.module_name(p) for p in found]

    def _package(self, module: str, level: int) -> str:
        path = _module_file(self.root, module)
        parts = module.split(".")
        if path is None or path.name != "__init__.py":
            parts = parts[:-1]
        return ".".join(parts[: len(parts) - (level - 1)] if level > 1 else parts)

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, str, Any] | None:
        """Where ``name`` as seen in ``module`` is defined: ``("class", module, ClassDef)``,
        ``("alias", module, value expr)`` (a module-level ``X = ...``), ``("external",
        "openai.types...X", None)`` (imported from outside vLLM), or None (a builtin, or
        not found)."""
        tree = self.module(module)
        if tree is None or depth > 8:
            return None
        body = list(tree.body)
        for node in tree.body:  # imports under `if TYPE_CHECKING:` / try
            if isinstance(node, (ast.If, ast.Try)):
                body += node.body
        for node in body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return "class", module, node
        for node in body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                return "alias", module, node.value
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == name
                and node.value is not None
            ):
                return "alias", module, node.value
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if (a.asname or a.name) != name:
                        continue
                    src = node.module or ""
                    if node.level:
                        pkg = self._package(module, node.level)
                        src = f"{pkg}.{src}" if src else pkg
                    if src.split(".")[0] != "vllm":
                        return "external", f"{src}.{a.name}", None
                    if _module_file(self.root, f"{src}.{a.name}") is not None:
                        return None  # a module, not a type
                    return self.resolve(src, a.name, depth + 1)
        for node in body:  # `from .types import *`
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                src = node.module or ""
                if node.level:
                    pkg = self._package(module, node.level)
                    src = f"{pkg}.{src}" if src else pkg
                if src.split(".")[0] == "vllm":
                    got = self.resolve(src, name, depth + 1)
                    if got is not None:
                        return got
        return None


# --------------------------------------------------------------------------- 6. model interfaces


def _class_flags(tree: VllmTree, module: str, cls: ast.ClassDef, seen: set[str]) -> list[str]:
    """The ``name: ClassVar[Literal[True]] = True`` attributes of an interface and its bases."""
    flags = []
    for stmt in cls.body:
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and "ClassVar" in ast.unparse(stmt.annotation)
            and isinstance(stmt.value, ast.Constant)
            and stmt.value.value is True
        ):
            flags.append(stmt.target.id)
    for base in cls.bases:
        got = tree.resolve(module, dotted_name(base))
        if got and got[0] == "class" and got[2].name not in seen:
            seen.add(got[2].name)
            flags += _class_flags(tree, got[1], got[2], seen)
    return sorted(set(flags))


def _flag_checks(tree: VllmTree, module: str) -> dict[str, str]:
    """``{flag: function}`` for each function of ``module`` that returns
    ``getattr(model, "flag", False)`` (``supports_pp``, ``supports_mamba_prefix_caching``...)."""
    out: dict[str, str] = {}
    mod = tree.module(module)
    for node in mod.body if mod else []:
        if not isinstance(node, ast.FunctionDef):
            continue
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Return)
                and isinstance(sub.value, ast.Call)
                and dotted_name(sub.value.func) == "getattr"
                and len(sub.value.args) >= 2
                and isinstance(sub.value.args[1], ast.Constant)
                and isinstance(sub.value.args[1].value, str)
            ):
                out.setdefault(sub.value.args[1].value, node.name)
    return out


def _shared_weight(tree: ast.Module, attr: str) -> dict[str, Any]:
    """How a drafter's module file sets ``attr`` (``embed_tokens`` / ``lm_head``): the calls
    assigned to ``self.<attr>`` (``builds``), whether it is assigned None, the class-level
    ``has_own_<attr>`` value and the values methods set it to."""
    builds: set[str] = set()
    none = False
    flag = f"has_own_{attr}"
    class_value: list[Any] = []
    method_values: set[Any] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                targets = (
                    stmt.targets
                    if isinstance(stmt, ast.Assign)
                    else [stmt.target]
                    if isinstance(stmt, ast.AnnAssign)
                    else []
                )
                value = getattr(stmt, "value", None)
                if any(dotted_name(t) == flag for t in targets) and isinstance(value, ast.Constant):
                    class_value.append(value.value)
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        value = getattr(node, "value", None)
        for t in targets:
            name = dotted_name(t)
            if name == f"self.{attr}":
                if isinstance(value, ast.Call):
                    builds.add(dotted_name(value.func) or ast.unparse(value.func))
                elif isinstance(value, ast.Constant) and value.value is None:
                    none = True
            elif name == f"self.{flag}" and isinstance(value, ast.Constant):
                method_values.add(value.value)
            elif name == f"self.{flag}":
                method_values.add(ast.unparse(value) if value is not None else None)
    return {
        "builds": sorted(builds),
        "set_to_none": none,
        flag: class_value[0] if class_value else None,
        f"{flag}_set_to": sorted(method_values, key=str),
    }


def model_interfaces(tree: VllmTree, prefix: str = MODEL_PREFIX) -> dict[str, Any]:
    """Section 6's facts of one release.

    Args:
        tree: the release's source.
        prefix: the architecture modules read (``vllm/model_executor/models/<prefix>*.py``).

    Returns:
        ``{"classes": {class: {"module", "architectures": [...], "bases": [...], "flags":
        [...]}}, "interfaces": {base: {"doc": its docstring, "flags": [...]}}, "flag_checks":
        {flag: the function of interfaces.py that reads it}, "drafters": {class: {"embed_tokens":
        ..., "lm_head": ...}}}`` (:func:`_shared_weight` per module; a drafter is a class of a
        ``*_mtp`` module). Read from ``vllm/model_executor/models/registry.py``, the
        ``<prefix>*.py`` files and the interface modules their bases are imported from.
    """
    models = "vllm.model_executor.models"
    archs: dict[tuple[str, str], list[str]] = {}
    reg = tree.module(f"{models}.registry")
    for node in ast.walk(reg) if reg else []:
        if not isinstance(node, ast.Dict):
            continue
        for k, v in zip(node.keys, node.values, strict=False):
            if (
                isinstance(k, ast.Constant)
                and isinstance(v, ast.Tuple)
                and len(v.elts) == 2
                and all(isinstance(e, ast.Constant) for e in v.elts)
                and str(v.elts[0].value).startswith(prefix)
            ):
                archs.setdefault((str(v.elts[0].value), str(v.elts[1].value)), []).append(
                    str(k.value)
                )
    classes: dict[str, Any] = {}
    interfaces: dict[str, Any] = {}
    checks: dict[str, str] = {}
    drafters: dict[str, Any] = {}
    iface_modules: set[str] = set()
    files = sorted((tree.root / "vllm/model_executor/models").glob(f"{prefix}*.py"))
    for path in files:
        short = path.stem
        module = f"{models}.{short}"
        mod = tree.parse(path)
        for cls in mod.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            named = archs.get((short, cls.name), [])
            resolved = {dotted_name(b): tree.resolve(module, dotted_name(b)) for b in cls.bases}
            from_interfaces = {
                b: r
                for b, r in resolved.items()
                if r and r[0] == "class" and r[1].split(".")[-1].startswith("interfaces")
            }
            if not named and not from_interfaces:
                continue
            flags: set[str] = set()
            for _, where, node in from_interfaces.values():
                flags.update(_class_flags(tree, where, node, {node.name}))
                iface_modules.add(where)
            classes[cls.name] = {
                "module": module,
                "architectures": sorted(named),
                "bases": [dotted_name(b) or ast.unparse(b) for b in cls.bases],
                "flags": sorted(flags),
            }
            if short.endswith("_mtp") and named:
                drafters[cls.name] = {a: _shared_weight(mod, a) for a in SHARED_WEIGHTS}
    for where in sorted(iface_modules):  # every interface there: a dropped one's words too
        mod = tree.module(where)
        for node in mod.body if mod else []:
            if isinstance(node, ast.ClassDef):
                interfaces[node.name] = {
                    "module": where,
                    "doc": _words(ast.get_docstring(node) or "")[:400],
                    "flags": _class_flags(tree, where, node, {node.name}),
                }
        checks.update(_flag_checks(tree, where))
    return {
        "classes": classes,
        "interfaces": dict(sorted(interfaces.items())),
        "flag_checks": dict(sorted(checks.items())),
        "drafters": drafters,
    }


# --------------------------------------------------------------------------- 7. protocol


def _annotation(node: ast.AST | None, names: list[str], literals: list[str]) -> None:
    """Collect the type names an annotation refers to and its ``Literal`` values."""
    if node is None:
        return
    if isinstance(node, ast.Subscript):
        base = dotted_name(node.value).split(".")[-1]
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base == "Literal":
            literals += [str(p.value) for p in parts if isinstance(p, ast.Constant)]
        elif base == "Annotated":
            _annotation(parts[0], names, literals)
        else:
            _annotation(node.value, names, literals)
            for p in parts:
                _annotation(p, names, literals)
    elif isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            _annotation(e, names, literals)
    elif isinstance(node, ast.BinOp):
        _annotation(node.left, names, literals)
        _annotation(node.right, names, literals)
    elif isinstance(node, (ast.Name, ast.Attribute)):
        names.append(dotted_name(node))
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            _annotation(ast.parse(node.value, mode="eval").body, names, literals)
        except SyntaxError:
            pass


class _Walk:
    """The models reachable from some roots, with their fields."""

    def __init__(self, tree: VllmTree):
        self.tree = tree
        self.models: dict[str, Any] = {}
        self.external: set[str] = set()
        self.queue: list[tuple[str, ast.ClassDef]] = []
        self.seen: set[tuple[str, str]] = set()

    def add(self, module: str, cls: ast.ClassDef) -> None:
        if (module, cls.name) not in self.seen:
            self.seen.add((module, cls.name))
            self.queue.append((module, cls))

    def refer(self, module: str, names: list[str], literals: list[str], depth: int = 0) -> None:
        """Queue the vLLM classes ``names`` are; an alias's ``Literal`` values go to
        ``literals``; SDK types go to :attr:`external`."""
        for n in names:
            if not n or n.split(".")[-1] in ("None", "Literal"):
                continue
            got = self.tree.resolve(module, n.split(".")[-1]) if "." not in n else None
            if got is None:
                continue
            kind, where, node = got
            if kind == "class":
                self.add(where, node)
            elif kind == "external":
                if where.split(".")[0] not in NOT_SDK and where.split(".")[-1][:1].isupper():
                    self.external.add(where)
            elif kind == "alias" and depth < 6:
                more: list[str] = []
                _annotation(node, more, literals)
                self.refer(where, more, literals, depth + 1)

    def fields(self, module: str, cls: ast.ClassDef, depth: int = 0) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for base in cls.bases:
            got = self.tree.resolve(module, dotted_name(base)) if dotted_name(base) else None
            if got and got[0] == "class" and depth < 8:
                out.update(self.fields(got[1], got[2], depth + 1))
            elif got and got[0] == "external" and depth == 0:
                sdk = got[1]
                if sdk.split(".")[0] not in NOT_SDK:
                    self.external.add(sdk)
                    self.models.setdefault(cls.name, {}).setdefault("sdk_bases", []).append(sdk)
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            field = stmt.target.id
            if field.startswith("_") or "ClassVar" in ast.unparse(stmt.annotation):
                continue
            names: list[str] = []
            literals: list[str] = []
            _annotation(stmt.annotation, names, literals)
            self.refer(module, names, literals)
            out[field] = sorted(set(literals))
        return out

    def run(self) -> dict[str, Any]:
        while self.queue:
            module, cls = self.queue.pop(0)
            key = (
                cls.name
                if cls.name not in self.models
                or (self.models[cls.name].get("module") in (None, module))
                else f"{module}.{cls.name}"
            )
            entry = self.models.setdefault(key, {})
            entry["module"] = module
            entry["fields"] = self.fields(module, cls)
        return {
            "models": {k: self.models[k] for k in sorted(self.models)},
            "sdk_types": sorted(self.external),
        }


def protocol(
    tree: VllmTree, roots: Mapping[str, Mapping[str, Iterable[str]]] = API_ROOTS
) -> dict[str, Any]:
    """Section 7's fields of one release.

    Args:
        tree: the release's source.
        roots: ``{api: {"request": [class], "reply": [class]}}`` (:data:`API_ROOTS`); each
            class is looked for under ``vllm/entrypoints/`` (a ``protocol.py`` first: 0.33.0's
            ``ChatCompletionRequest`` is in vllm/entrypoints/openai/chat_completion/protocol.py,
            its ``ModelList`` in vllm/entrypoints/serve/engine/protocol.py).

    Returns:
        ``{api: {"roots": {root: module or None}, "models": {class: {"module", "sides":
        ["reply", "request"], "fields": {field: [Literal values]}, "sdk_bases": [...]}},
        "sdk_types": [...]}}``: every vLLM class reachable from the roots through field
        annotations and bases; ``sides`` says which roots reach it.
    """
    out = {}
    for api, sides in roots.items():
        found: dict[str, str | None] = {}
        models: dict[str, Any] = {}
        sdk: set[str] = set()
        for side, names in sides.items():
            walk = _Walk(tree)
            for root in names:
                modules = tree.find_classes(root)
                found[root] = modules[0] if modules else None
                if modules:
                    got = tree.resolve(modules[0], root)
                    if got and got[0] == "class":
                        walk.add(got[1], got[2])
            part = walk.run()
            sdk.update(part["sdk_types"])
            for key, model in part["models"].items():
                entry = models.setdefault(key, {**model, "sides": []})
                entry["sides"].append(side)
        out[api] = {
            "roots": found,
            "models": {k: models[k] for k in sorted(models)},
            "sdk_types": sorted(sdk),
        }
    return out


def responses_events(tree: VllmTree) -> dict[str, str]:
    """``{event type: file}``: the ``response.*`` strings passed as ``type=`` to a call, or
    declared as a field's ``Literal[...]``, in ``vllm/entrypoints/**/*.py`` (the events the
    server sends; the benchmark client's list of events it reads is left out)."""
    out: dict[str, str] = {}
    for path in tree.files("vllm/entrypoints"):
        if "response." not in path.read_text(encoding="utf-8", errors="replace"):
            continue
        for node in ast.walk(tree.parse(path)):
            values: list[ast.AST] = []
            if isinstance(node, ast.Call):
                values = [k.value for k in node.keywords if k.arg == "type"]
            elif (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == "type"
            ):
                values = [node.annotation]
            for v in values:
                for s in _strings([v]):
                    if EVENT_RE.fullmatch(s):
                        out.setdefault(s, tree.rel(path))
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- 8. rejection methods


def _compares(test: ast.AST, field: str) -> list[str]:
    """The values ``<x>.field == "v"`` / ``<x>.field in ("v", ...)`` tests for."""
    out = []
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and dotted_name(node.left).split(".")[-1] == field:
            for c in node.comparators:
                out += [
                    str(e.value)
                    for e in (c.elts if isinstance(c, (ast.Tuple, ast.List, ast.Set)) else [c])
                    if isinstance(e, ast.Constant)
                ]
    return out


def rejection_methods(tree: VllmTree) -> dict[str, Any]:
    """Section 8's facts of one release, from ``vllm/config/speculative.py``.

    The field is ``SpeculativeConfig``'s field whose name holds ``reject``
    (``rejection_sample_method`` in 0.28.0-0.33.0); its values are its annotation's ``Literal``
    (through a module-level alias, ``RejectionSampleMethod``). The words said about a value
    ``v``: the part of the field's docstring from ``'v'`` to the next value named; the
    docstrings of the other fields that name ``'v'`` (``synthetic_acceptance_rates``: "only
    valid when rejection_sample_method is 'synthetic'"); the strings (warnings, errors) in the
    body of every ``if ... .field == "v":``. The rule: **lossy** when those words hold one of
    :data:`LOSSY_WORDS` ("lossy", "degrade", "unconditional acceptance": a draft accepted at a
    set rate, whatever the target says; "not lossless"); else **lossless** when they hold one of
    :data:`LOSSLESS_WORDS` (the method verifies the draft against the target: "rejection
    sampling", "verification"...); else **not said**. 0.33.0's ``fly`` is lossy by its own
    docstring ("FLy's lossy, entropy-gated deferred window") and warning ("FLy verification is
    a lossy speculative decoding method and may degrade model outputs").

    Returns:
        ``{"field": name or None, "file": "vllm/config/speculative.py", "default": value,
        "methods": {value: {"verdict": "lossless" | "lossy" | "not said", "words": [...]}}}``.
    """
    module = "vllm.config.speculative"
    mod = tree.module(module)
    empty: dict[str, Any] = {"field": None, "file": None, "default": None, "methods": {}}
    if mod is None:
        return empty
    cls = next(
        (n for n in mod.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig"),
        None,
    )
    if cls is None:
        return empty
    docs: dict[str, str] = {}
    field, values, default = None, [], None
    body = cls.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            nxt = body[i + 1] if i + 1 < len(body) else None
            if (
                isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[stmt.target.id] = _words(nxt.value.value)
            if field is None and "reject" in stmt.target.id:
                names: list[str] = []
                lits: list[str] = []
                _annotation(stmt.annotation, names, lits)
                walk = _Walk(tree)
                walk.refer(module, names, lits)
                if lits:
                    field, values = stmt.target.id, list(dict.fromkeys(lits))
                    if isinstance(stmt.value, ast.Constant):
                        default = stmt.value.value
    if field is None:
        return empty
    said: dict[str, list[str]] = {v: [] for v in values}
    doc = docs.get(field, "")
    marks = sorted((doc.find(f"'{v}'"), v) for v in values if f"'{v}'" in doc)
    for j, (at, v) in enumerate(marks):
        end = marks[j + 1][0] if j + 1 < len(marks) else len(doc)
        said[v].append(doc[at:end].strip())
    for other, text in docs.items():
        if other != field:
            for v in values:
                if f"'{v}'" in text:
                    said[v].append(f"{other}: {text}")
    for node in ast.walk(cls):
        if isinstance(node, ast.If):
            for v in _compares(node.test, field):
                if v in said:
                    said[v] += [_words(s) for s in _strings(node.body) if len(s.split()) > 2]
    methods = {}
    for v in values:
        text = " ".join(said[v]).lower()
        verdict = (
            "lossy"
            if any(w in text for w in LOSSY_WORDS)
            else "lossless"
            if any(w in text for w in LOSSLESS_WORDS)
            else "not said"
        )
        methods[v] = {"verdict": verdict, "words": list(dict.fromkeys(said[v]))}
    return {
        "field": field,
        "file": tree.rel(_module_file(tree.root, module)),  # type: ignore[arg-type]
        "default": default,
        "methods": methods,
    }


# --------------------------------------------------------------------------- 9. metrics


def metrics(tree: VllmTree) -> dict[str, Any]:
    """Section 9's facts of one release: ``{"names": {name: first file}, "built_at_run_time":
    [files with an f-string ``f"vllm:{...}"``]}`` over ``vllm/**/*.py`` less
    ``vllm/benchmarks/`` (a client that reads metrics)."""
    names: dict[str, str] = {}
    built = []
    for path in tree.files():
        rel = tree.rel(path)
        if rel.startswith("vllm/benchmarks/"):
            continue
        if "vllm:" not in path.read_text(encoding="utf-8", errors="replace"):
            continue
        for node in ast.walk(tree.parse(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if METRIC_RE.fullmatch(node.value):
                    names.setdefault(node.value, rel)
            elif isinstance(node, ast.JoinedStr):
                head = node.values[0] if node.values else None
                if isinstance(head, ast.Constant) and str(head.value).startswith("vllm:"):
                    built.append(rel)
    return {"names": dict(sorted(names.items())), "built_at_run_time": sorted(set(built))}


def read_behaviour(root: str | Path) -> dict[str, Any]:
    """Every behaviour fact of the release whose ``vllm/`` package is under ``root``.

    Args:
        root: an unpacked wheel or a site-packages folder.

    Returns:
        ``{"model_interfaces": ..., "protocol": ..., "responses_events": ...,
        "rejection": ..., "metrics": ...}`` (:func:`model_interfaces`, :func:`protocol`,
        :func:`responses_events`, :func:`rejection_methods`, :func:`metrics`).

    Raises:
        BehaviourError: ``root`` holds no ``vllm/`` package.
    """
    root = Path(root)
    if not (root / "vllm").is_dir():
        raise BehaviourError(
            f"{root} holds no vllm/ package: pass the folder a wheel unpacks into."
        )
    tree = VllmTree(root)
    return {
        "model_interfaces": model_interfaces(tree),
        "protocol": protocol(tree),
        "responses_events": responses_events(tree),
        "rejection": rejection_methods(tree),
        "metrics": metrics(tree),
    }


def generate(wheel: str | Path, *, out: Path | None = None) -> Path:
    """Write ``docs/results/flags/behaviour-vllm-<version>.json`` from a vLLM wheel file.

    Unpacks the wheel's ``vllm/**/*.py`` into a temporary folder and reads it
    (:func:`read_behaviour`); nothing is imported.

    Args:
        wheel: ``vllm-X-...whl`` from ``pip download vllm==X --no-deps``.
        out: output path (default :func:`behaviour_path` of the wheel's version).

    Raises:
        BehaviourError: not a wheel file.
    """
    wheel = Path(wheel)
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise BehaviourError(f"No wheel at {wheel}: pip download vllm==X --no-deps.")
    version = wheel.name.split("-")[1]
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-") as tmp:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                if info.filename.startswith("vllm/") and info.filename.endswith(".py"):
                    z.extract(info, tmp)
        data = read_behaviour(tmp)
    doc = {
        "vllm_version": version,
        "generated": {
            "from": wheel.name,
            "sha256": sha,
            "how": "the wheel's vllm/**/*.py read with ast, not imported (tools/drift_behaviour.py)",
            "by": "python -m tools.flagtables behaviour WHEEL",
            "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
        },
        **data,
    }
    path = out or behaviour_path(version)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path
