"""Check a tool call's arguments against the tool's JSON schema (``jsonschema``) and coerce what
can be coerced without losing anything (pydantic's lax validation) before the function runs.

Why: vLLM 0.32.0's ``qwen3_coder`` parser (``vllm/tool_parsers/qwen3coder_tool_parser.py``)
passes a value it cannot convert through as a *string* (``{"limit": "140.0"}`` for an
``integer``), and empty optionals as ``""``, JSON null or ``"None"`` (``coerce_to_schema_type``,
``vllm/tool_parsers/utils.py``; the format has no null). A call is never dropped.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from helpers.chat.types import ChatResult, ToolArgumentWarning, _warn

_log = logging.getLogger("helpers.chat")

# JSON-schema type name -> Python type pydantic validates (lax mode) into.
_PY_TYPES: dict[str, type] = {
    "integer": int,
    "number": float,
    "boolean": bool,
    "string": str,
    "array": list,
    "object": dict,
}


#: What a model writes for "no value" in the qwen3_coder format (compared stripped, lower case).
EMPTY_WORDS = ("", "null", "none")


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in EMPTY_WORDS)


def _types_of(schema: Mapping[str, Any]) -> list[str]:
    t = schema.get("type")
    return [t] if isinstance(t, str) else [x for x in (t or []) if isinstance(x, str)]


def _keeps_empty(schema: Mapping[str, Any], value: Any) -> bool:
    """A plain string (``{"type": "string"}``, no ``enum``) takes any text, ``"null"`` and ``""``
    included; an ``enum`` that lists the value takes it."""
    if "enum" in schema:
        return value in (schema.get("enum") or [])
    return _types_of(schema) == ["string"]


def drop_empty_optionals(
    arguments: Mapping[str, Any], parameters: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Arguments without the optional ones the model wrote empty, so the function's defaults apply.

    Written empty: JSON null or :data:`EMPTY_WORDS` (any case, blanks around). Left out when
    the parameter is optional, not a plain string (where ``"null"`` or ``""`` may be meant) and
    not an ``enum`` listing the value. A required one stays, with a problem line.

    Args:
        arguments: the parsed JSON arguments of one call, e.g. ``{"query": "GPUs", "limit": ""}``.
        parameters: the ``function.parameters`` object of the tool's OpenAI schema (``None`` or
            ``{}``: nothing is dropped).

    Returns:
        ``(arguments, dropped, problems)``: a new dict without the dropped arguments
        (``{"query": "GPUs"}``), ``["limit=''", ...]`` for each one left out, and one sentence
        per required argument written empty.
    """
    args = dict(arguments)
    props = (parameters or {}).get("properties") or {}
    required = set((parameters or {}).get("required") or [])
    dropped: list[str] = []
    problems: list[str] = []
    for key, value in list(args.items()):
        schema = props.get(key)
        if not isinstance(schema, Mapping) or not _is_empty(value) or _keeps_empty(schema, value):
            continue
        if key in required:
            problems.append(
                f"{key}={value!r} is required but was written empty; passed on as it is"
            )
            continue
        del args[key]
        dropped.append(f"{key}={value!r}")
    return args, dropped, problems


def _validator_for(schema: Mapping[str, Any]):
    """The jsonschema validator class for ``schema``, with a strict ``integer`` type."""
    import jsonschema
    from jsonschema import validators

    base = validators.validator_for(schema, default=jsonschema.Draft202012Validator)

    def is_strict_integer(checker, instance) -> bool:
        return isinstance(instance, int) and not isinstance(instance, bool)

    checker = base.TYPE_CHECKER.redefine("integer", is_strict_integer)
    return validators.extend(base, type_checker=checker)


def _convert(value: Any, json_types: list[str]) -> tuple[bool, Any]:
    """Try each JSON type in order with pydantic's lax validation; (ok, converted)."""
    from pydantic import TypeAdapter, ValidationError

    for t in json_types:
        py = _PY_TYPES.get(t)
        if py is None:
            continue
        adapter = TypeAdapter(py)
        try:
            if py in (list, dict) and isinstance(value, str):
                return True, adapter.validate_json(value)
            if py is str and not isinstance(value, str):
                continue  # never stringify a number or object: that would hide a bug
            if py is bool and not isinstance(value, (str, bool)):
                continue  # 1/0 as booleans: leave to the warning, not a silent guess
            if py in (int, float) and isinstance(value, bool):
                continue
            return True, adapter.validate_python(value)
        except (ValidationError, ValueError, TypeError):
            continue
    return False, value


def _set_at(root: Any, path: list[Any], value: Any) -> None:
    node = root
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _where(path: list[Any]) -> str:
    if not path:
        return "the arguments"
    head, rest = str(path[0]), "".join(f"[{p!r}]" for p in path[1:])
    return f"{head}{rest}"


def coerce_arguments(
    arguments: Mapping[str, Any], parameters: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[str]]:
    """Arguments fitted to a tool's ``parameters`` JSON schema.

    The validator is the schema's ``$schema`` class (default Draft 2020-12) with ``integer``
    refusing ``140.0``. Coerced: ``"140.0"`` / ``140.0`` -> ``140``, ``"2.5"`` -> ``2.5``,
    ``"true"`` -> ``True``, a JSON array / object string -> parsed. ``"140.5"`` for an integer,
    a missing required argument or a value outside an ``enum`` stay, with a problem line.

    Args:
        arguments: the parsed JSON arguments of one call, e.g. ``{"limit": "140.0"}``.
        parameters: the ``function.parameters`` object of the tool's OpenAI schema
            (``None`` or ``{}``: nothing to check).

    Returns:
        ``(arguments, problems)``: a new dict with every lossless coercion applied
        (``{"limit": 140}``), and one sentence per remaining schema violation.

    Raises:
        jsonschema.SchemaError: ``parameters`` is not a valid JSON schema (the tool's
            schema needs fixing).
    """
    args = copy.deepcopy(dict(arguments))
    if not parameters:
        return args, []
    cls = _validator_for(parameters)
    cls.check_schema(parameters)
    validator = cls(parameters)
    problems: list[str] = []
    # Each pass fixes the type errors it can; a fixed container may reveal errors inside
    # it (a JSON-string array whose items need coercing), hence a few passes.
    unfixable: set[tuple[Any, ...]] = set()
    for _ in range(5):
        changed = False
        for err in validator.iter_errors(args):
            path = list(err.absolute_path)
            if err.validator != "type" or tuple(path) in unfixable or not path:
                continue
            wanted = (
                err.validator_value
                if isinstance(err.validator_value, list)
                else [err.validator_value]
            )
            ok, new = _convert(err.instance, wanted)
            # A container parsed from a JSON string is kept even if its items still
            # need fixing (the next pass does that); a scalar only if it now fits.
            fits = ok and (
                isinstance(new, (list, dict)) or not any(cls(err.schema).iter_errors(new))
            )
            if fits:
                _set_at(args, path, new)
                changed = True
            else:
                unfixable.add(tuple(path))
        if not changed:
            break
    for err in validator.iter_errors(args):
        path = list(err.absolute_path)
        if err.validator == "type":
            wanted = err.validator_value
            problems.append(
                f"{_where(path)}={err.instance!r} is not of type {wanted!r} and cannot be "
                "converted without changing its value; passed on as it is"
            )
        else:
            problems.append(f"{_where(path)}: {err.message} (schema rule {err.validator!r})")
    return args, problems


def _schema_parameters(tool_schemas: list[dict[str, Any]] | None, name: str) -> Any:
    for t in tool_schemas or []:
        fn = t.get("function") if isinstance(t, Mapping) else None
        if isinstance(fn, Mapping) and fn.get("name") == name:
            return fn.get("parameters")
    return None


def fit_calls(result: ChatResult, tool_schemas: list[dict[str, Any]] | None) -> ChatResult:
    """Fit each call of a checked turn to its tool's JSON schema, in place: optional arguments
    written empty left out (one info line per call, also in ``result.notes``), then the
    lossless coercions; an argument that still does not fit warns
    (:class:`~helpers.chat.types.ToolArgumentWarning`) and is passed on as written."""

    for call in result.tool_calls:
        params = _schema_parameters(tool_schemas, call.name)
        if call.error is not None or not params:
            continue
        call.arguments, dropped, empty_required = drop_empty_optionals(call.arguments, params)
        if dropped:
            note = (
                f"Tool {call.name!r}: left out {', '.join(dropped)}, written empty for optional "
                "parameters (qwen3_coder has no null), so the function's defaults apply."
            )
            result.notes.append(note)
            _log.info(note)
        call.arguments, problems = coerce_arguments(call.arguments, params)
        said = tuple(f"{p.split('=', 1)[0]}=" for p in empty_required)  # one line per argument
        problems = empty_required + [p for p in problems if not p.startswith(said or ("\0",))]
        for p in problems:
            _warn(
                result,
                ToolArgumentWarning,
                f"Tool {call.name!r}: {p}. The function gets the value as the model wrote it; "
                "check the tool's schema or the function's handling of it.",
            )
    return result
