"""A notebook's parameters checked against the types its ``parameters`` cell declares.

papermill injects values as written on its command line, so ``-p max_tokens 64k`` or a
string for a list would otherwise fail many cells later; :func:`check_parameters` fails
in the first code cell, naming the parameter, the value and an example of the right type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Optional, Union

from pydantic import NonNegativeFloat, PositiveFloat, PositiveInt, TypeAdapter, ValidationError

from helpers.config.load import shared_registry
from helpers.config.schema import _closest
from helpers.errors import CookbookError

#: The names a parameters cell's annotation strings may use (evaluated with no builtins).
_NAMES = {"Optional": Optional, "Union": Union, "List": list, "list": list, "dict": dict}
_NAMES.update({t.__name__: t for t in (str, int, float, bool)} | {"None": None})
_NAMES.update(PositiveInt=PositiveInt, NonNegativeFloat=NonNegativeFloat, PositiveFloat=PositiveFloat)  # fmt: skip


def _type_error(value: Any, annotation: Any) -> str | None:
    """Why ``value`` does not fit ``annotation`` (a type, or a string such as
    ``"Optional[list[int]]"`` or ``"str | None"``), in pydantic's strict-mode words (no
    conversion: bool is not an int, ``"3"`` is not an int, an int is a float); None when it
    fits or when the annotation names anything outside :data:`_NAMES` (not checked).
    """
    try:
        if isinstance(annotation, str):
            annotation = eval(annotation, {"__builtins__": {}}, _NAMES)  # noqa: S307
        TypeAdapter(annotation).validate_python(value, strict=True)
    except ValidationError as e:
        return "; ".join(err["msg"] for err in e.errors(include_url=False))
    except Exception:  # noqa: BLE001 - an annotation this checker does not read: accept
        return None
    return None


def _example(name: str, annotation: str) -> str:
    """How to pass a right value: the cookbook's runner (``python -m tools.notebooks run``,
    ``make quickstart``) and papermill both take ``-p NAME VALUE``; a list needs papermill's
    ``-y``."""
    text = annotation.replace(" ", "").replace("PositiveInt", "int").replace("NonNegativeF", "f").replace("PositiveF", "f")  # fmt: skip
    if "list[int]" in text:
        return (
            f"-p {name} '[1, 2, 4]' (python -m tools.notebooks run; papermill: -y "
            f"'{name}: [1, 2, 4]'; Python: parameters={{{name!r}: [1, 2, 4]}})"
        )
    examples = {"int": "64", "float": "0.5", "bool": "True", "dict": """'{"key": "value"}'"""}
    for kind, value in examples.items():
        if re.search(rf"\b{kind}\b", text):
            return f"-p {name} {value}"
    return f"-p {name} VALUE"


def check_parameters(declared: Mapping[str, Any], **values: Any) -> None:
    """Check a notebook's parameters, each passed by name, against the types its ``parameters``
    cell declares: ``check_parameters(__annotations__, target=target, variant=variant, ...)``.

    Right after the parameters (and papermill's injected values), a wrong type fails at once,
    by name. The declarations are the cell's annotations (``name:
    "Optional[list[int]]" = None``, also papermill's ``--help-notebook``), checked in pydantic's
    strict mode (``str``, ``int``, ``float``, ``bool``, ``None``, ``list[X]``, ``dict``,
    ``Optional[X]``, ``X | Y``, pydantic's ``PositiveInt``, ``PositiveFloat`` and
    ``NonNegativeFloat``; bool is not an int). A ``quality`` parameter is also checked key by
    key (:func:`check_quality`), before anything is downloaded or launched.

    Args:
        declared: ``{name: annotation}``: the parameters cell's ``__annotations__``.
        **values: every declared parameter, by its name.

    Raises:
        CookbookError: a keyword the cell does not declare, or a declared parameter left out
            (names them); one line per parameter of the wrong type, with the expected type and
            how to pass it; the first problem of ``quality``.
    """
    extra, missing = sorted(set(values) - set(declared)), sorted(set(declared) - set(values))
    if extra or missing:
        raise CookbookError(
            f"check_parameters: {', '.join(extra) or 'none'} undeclared, {', '.join(missing) or 'none'} "
            f"not passed: pass by name each parameter the cell declares ({', '.join(declared)})."
        )
    bad = []
    for name, annotation in declared.items():
        ann = getattr(annotation, "__name__", str(annotation))  # a string has no __name__
        why = _type_error(values[name], annotation)
        if why:
            bad.append(
                f"{name} = {values[name]!r} ({type(values[name]).__name__}), but the parameters "
                f"cell declares {ann} ({why}): pass e.g. {_example(name, ann)}"
            )
    if bad:
        raise CookbookError(f"Notebook parameter of the wrong type or range: {'; '.join(bad)}.")
    target = values.get("target")
    if "quality" in values and isinstance(target, str):
        targets = shared_registry().targets
        default = targets[target].variant if target in targets else None
        check_quality(values["quality"], target, values.get("variant") or default)


#: The keys of a notebook's ``quality`` parameter (quality.ipynb; step 10's) and its ``compare``.
QUALITY_KEYS = ("items", "budgets", "compare")
COMPARE_KEYS = ("variant", "extra_args")


def _unknown(where: str, key: Any, known: tuple[str, ...]) -> CookbookError:
    return CookbookError(
        f"{where} has no key {key!r}{_closest(key, known)}: the keys are {', '.join(known)}. "
        "A misspelled key would be ignored and the step would run with its defaults."
    )


def check_quality(quality: Any, target: str, variant: str | None = None) -> None:
    """Check a notebook's ``quality`` parameter in step 1, before any download or launch.

    ``{"items": N, "budgets": [...], "compare": {"variant": V} or {"extra_args": {...}}}``:
    every key known (a misspelling gets "did you mean"), ``items`` a whole number >= 0, each
    budget ``"off"``, None or whole tokens >= 0, ``variant`` one of the target's, ``extra_args``
    a mapping; a comparison that serves the run's own command is refused.

    Args:
        quality: the parameter's value (None: the defaults).
        target: the notebook's target (its variants: cookbook/recipe.yaml).
        variant: the run's own variant, for the identical-comparison check.

    Raises:
        CookbookError: the first problem, by name, with the fix.
    """
    if quality is None:
        return
    variants = tuple(shared_registry().target_variants(target))
    if not isinstance(quality, dict):
        raise CookbookError(
            f"quality={quality!r} must be a dict such as {{'items': 50}} or None (the defaults)."
        )
    for key in quality:
        if key not in QUALITY_KEYS:
            raise _unknown("quality", key, QUALITY_KEYS)
    items = quality.get("items")
    if items is not None and (isinstance(items, bool) or not isinstance(items, int) or items < 0):
        raise CookbookError(
            f"quality['items']={items!r} must be a whole number of items >= 0 (0 skips the "
            "quality steps), e.g. {'items': 50}."
        )
    budgets = quality.get("budgets")
    if budgets is not None:
        if not isinstance(budgets, (list, tuple)):
            raise CookbookError(
                f"quality['budgets']={budgets!r} must be a list such as ['off', 64, None]."
            )
        for b in budgets:
            ok = (
                b is None
                or b == "off"
                or (isinstance(b, int) and not isinstance(b, bool) and b >= 0)
            )
            if not ok:
                raise CookbookError(
                    f"quality['budgets'] holds {b!r}: each budget is 'off', None (no cap) or a "
                    "whole number of reasoning tokens >= 0."
                )
    compare = quality.get("compare")
    if compare is None:
        return
    if not isinstance(compare, dict) or not compare:
        raise CookbookError(
            f"quality['compare']={compare!r} must be a dict: {{'variant': 'bf16'}} or "
            "{'extra_args': {'--flag': value}}."
        )
    for key in compare:
        if key not in COMPARE_KEYS:
            raise _unknown("quality['compare']", key, COMPARE_KEYS)
    other = compare.get("variant")
    if other is not None and other not in variants:
        raise CookbookError(
            f"quality['compare']['variant']={other!r} is not a variant of this target: use one "
            f"of {', '.join(variants)}."
        )
    extra = compare.get("extra_args")
    if extra is not None and not isinstance(extra, dict):
        raise CookbookError(
            f"quality['compare']['extra_args']={extra!r} must be a dict of serve flags, e.g. "
            "{'--kv-cache-dtype': 'auto'}."
        )
    if (other is None or other == variant) and not extra:
        raise CookbookError(
            "quality['compare'] serves the same command as the run (same variant, no extra "
            "flags): the comparison would measure one configuration twice. Name another variant "
            "or add extra_args."
        )
