"""Reading ``cookbook/recipe.yaml`` and ``cookbook/flags.yaml`` into the typed registry: one
:class:`~helpers.errors.RegistryError` per failure (file, key path, allowed values or closest
key), results cached.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ValidationError

from helpers.config.schema import FlagReasons, Registry, _closest
from helpers.errors import RegistryError
from helpers.paths import COOKBOOK_DIR


def _unwrap(tp: Any) -> list[Any]:
    """The concrete types inside ``Annotated`` / ``Optional`` / unions."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(tp) for t in _unwrap(arg)]
    return [tp]


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class whose fields are at ``loc`` (dict keys and list indexes skipped)."""
    current: list[Any] = [root]
    for part in loc:
        nxt: list[Any] = []
        for tp in current:
            for t in _unwrap(tp):
                if isinstance(t, type) and issubclass(t, BaseModel):
                    field = t.model_fields.get(str(part))
                    if field is not None:
                        nxt.append(field.annotation)
                elif typing.get_origin(t) in (dict, list):
                    nxt.append(typing.get_args(t)[-1])
        current = nxt
    models = [
        t for tp in current for t in _unwrap(tp) if isinstance(t, type) and issubclass(t, BaseModel)
    ]
    return models[0] if models else None


def _describe(root: type[BaseModel], err: Mapping[str, Any]) -> str:
    """One line for one pydantic error: key path, what is wrong, allowed values / closest key."""
    loc = tuple(err["loc"])
    is_key = bool(loc) and loc[-1] == "[key]"
    if is_key:
        loc = loc[:-1]
    path = ".".join(str(p) for p in loc) or "(top level)"
    kind = err["type"]
    given = err.get("input")
    if kind == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
        allowed = list(parent.model_fields) if parent else []
        return (
            f"{path}: unknown key {str(loc[-1])!r}{_closest(loc[-1], allowed)}; allowed keys "
            f"here: {', '.join(allowed)}"
        )
    if kind == "literal_error":
        # pydantic's own list, in the Literal's order: "'a', 'b' or 'c'" (a lone int: "1")
        expected = str(err.get("ctx", {}).get("expected", ""))
        allowed = re.findall(r"'([^']*)'", expected) or [expected]
        what = "key" if is_key else "value"
        return f"{path}: {what} {given!r} is not allowed{_closest(given, allowed)}; allowed values: {', '.join(allowed)}"
    if kind == "missing":
        return f"{path}: required key missing"
    return f"{path}: {err['msg']} (got {given!r})"


def _fail(source: str, lines: list[str]) -> RegistryError:
    body = "\n".join(f"  - {line}" for line in lines)
    return RegistryError(
        f"{source}: {len(lines)} problem(s) in the registry:\n{body}\nFix the file (see the "
        "comments at its top for each layer's keys).",
        source=source,
        problems=lines,
    )


def parse_registry(data: Any, source: str = "cookbook/recipe.yaml") -> Registry:
    """Validate parsed registry YAML (``data``) into a :class:`Registry`; ``source`` is the file
    name the errors give.

    Raises:
        RegistryError: unknown keys (with the closest allowed key), out-of-vocabulary values
            (with the allowed values), wrong types, names that refer to nothing; one line per
            problem, each with its key path.
    """
    if not isinstance(data, Mapping):
        raise _fail(source, [f"the file must be a mapping of keys, got {type(data).__name__}"])
    try:
        reg = Registry.model_validate(data)
    except ValidationError as exc:
        raise _fail(source, [_describe(Registry, e) for e in exc.errors()]) from None
    errors = reg.reference_errors()
    if errors:
        raise _fail(source, errors)
    return reg


def _read_yaml(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except FileNotFoundError as exc:
        raise RegistryError(
            f"{path} not found: run from a checkout of the cookbook.", source=str(path)
        ) from exc
    except yaml.YAMLError as exc:
        raise RegistryError(
            f"{path} is not valid YAML ({exc}); fix the file.", source=str(path)
        ) from exc


def read_registry(path: str | Path) -> Registry:
    """Read and validate a registry YAML file (see :func:`parse_registry`).

    Raises:
        RegistryError: the file is missing, is not YAML, or does not match the schema.
    """
    path = Path(path)
    return parse_registry(_read_yaml(path), source=str(path))


def read_flag_reasons(path: str | Path) -> dict[str, str]:
    """``{flag: why}`` from a ``flags.yaml``.

    Raises:
        RegistryError: missing file, bad YAML, a key that is not a ``--flag``, or a why that
            is not text.
    """
    path = Path(path)
    try:
        return dict(FlagReasons.model_validate(_read_yaml(path)).root)
    except ValidationError as exc:
        raise _fail(str(path), [_describe(FlagReasons, e) for e in exc.errors()]) from None


# --------------------------------------------------------------------------------------
# The cookbook's own files
# --------------------------------------------------------------------------------------

REGISTRY_PATH = COOKBOOK_DIR / "recipe.yaml"
FLAGS_PATH = COOKBOOK_DIR / "flags.yaml"


@functools.lru_cache(maxsize=4)
def _cached(path: str) -> Registry:
    return read_registry(path)


def shared_registry(path: str | Path | None = None) -> Registry:
    """The validated registry, shared (cached): read it, never change it.

    Raises:
        RegistryError: see :func:`read_registry`.
    """
    return _cached(str(Path(path or REGISTRY_PATH)))


def load_registry(path: str | Path | None = None) -> Registry:
    """The validated registry (``path``, default ``cookbook/recipe.yaml``) as a private copy,
    safe to change (e.g. in a test).

    Raises:
        RegistryError: see :func:`read_registry`.
    """
    return shared_registry(path).model_copy(deep=True)


def as_registry(registry: Registry | Mapping[str, Any] | None) -> Registry:
    """``registry`` as a :class:`Registry`: None -> the shared ``cookbook/recipe.yaml``; a
    mapping (parsed YAML, e.g. a test's edited copy) is validated.

    Raises:
        RegistryError: the mapping does not match the schema.
    """
    if registry is None:
        return shared_registry()
    if isinstance(registry, Registry):
        return registry
    return parse_registry(registry, source="the registry mapping passed in")


@functools.lru_cache(maxsize=1)
def _flag_reasons() -> dict[str, str]:
    return read_flag_reasons(FLAGS_PATH)


def flag_reasons() -> dict[str, str]:
    """Return ``{flag: why}`` from ``cookbook/flags.yaml`` (the reference table's why column).

    Raises:
        RegistryError: the file is missing or does not match its schema.
    """
    return dict(_flag_reasons())
