"""A notebook's parameters checked against the types its ``parameters`` cell declares.

papermill injects values as written on its command line, so ``-p max_tokens 64k`` or a
string for a list would otherwise fail many cells later; :func:`check_parameters` fails
in the first code cell, naming the parameter, the value and an example of the right type.
"""

from __future__ import annotations

import re
from typing import Any

from helpers.errors import CookbookError


def _type_ok(value: Any, annotation: str) -> bool:
    """Does ``value`` fit ``annotation`` (``int``, ``Optional[list[int]]``, ``str | None``...)?"""
    text = annotation.replace(" ", "")
    m = re.fullmatch(r"Optional\[(.+)\]", text)
    if m:
        return value is None or _type_ok(value, m.group(1))
    if "|" in text:
        return any(_type_ok(value, part) for part in text.split("|"))
    m = re.fullmatch(r"(?:list|List)\[(.+)\]", text)
    if m:
        return isinstance(value, (list, tuple)) and all(_type_ok(v, m.group(1)) for v in value)
    if text in ("list", "List"):
        return isinstance(value, (list, tuple))
    if text in _SIMPLE_TYPES:
        if isinstance(value, bool) and text in ("int", "float"):
            return False
        return isinstance(value, _SIMPLE_TYPES[text])
    return True  # an annotation this checker does not read: accept


def _example(name: str, annotation: str) -> str:
    """How to pass a right value: the cookbook's runner (``python -m tools.notebooks run``,
    ``make quickstart``) and papermill both take ``-p NAME VALUE``; a list needs papermill's
    ``-y``."""
    text = annotation.replace(" ", "")
    if "list[int]" in text:
        return (
            f"-p {name} '[1, 2, 4]' (python -m tools.notebooks run; papermill: -y "
            f"'{name}: [1, 2, 4]'; Python: parameters={{{name!r}: [1, 2, 4]}})"
        )
    if re.search(r"\bint\b", text):
        return f"-p {name} 64"
    if re.search(r"\bfloat\b", text):
        return f"-p {name} 0.5"
    if "bool" in text:
        return f"-p {name} True"
    return f"-p {name} VALUE"


def check_parameters(namespace: dict[str, Any]) -> None:
    """Check a notebook's parameters against the types its ``parameters`` cell declares.

    Called in a notebook right after the parameters (and papermill's injected values) are
    set, so a wrong type fails at once, naming the parameter, instead of many cells later.
    The declarations are the parameters cell's annotations (``name: "Optional[list[int]]"
    = None``), which papermill also shows in ``--help-notebook``; the checker reads
    ``str``, ``int``, ``float``, ``bool``, ``None``, ``list[X]``, ``Optional[X]`` and
    ``X | Y`` (bool is not accepted as int).

    Args:
        namespace: the notebook's globals (``globals()``).
    Raises:
        CookbookError: one line per parameter of the wrong type, with the expected type
            and how to pass it.
    """
    declared = namespace.get("__annotations__") or {}
    bad = []
    for name, annotation in declared.items():
        if name not in namespace:
            continue
        ann = (
            annotation
            if isinstance(annotation, str)
            else getattr(annotation, "__name__", str(annotation))
        )
        value = namespace[name]
        if not _type_ok(value, ann):
            bad.append(
                f"{name} = {value!r} ({type(value).__name__}), but the parameters cell declares "
                f"{ann}: pass e.g. {_example(name, ann)}"
            )
    if bad:
        raise CookbookError("Notebook parameter of the wrong type: " + "; ".join(bad) + ".")


_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "None": (type(None),),
}
