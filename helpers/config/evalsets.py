"""The item sets the accuracy step scores against, shipped in ``cookbook/evals/`` (no hub).

``gsm8k``: 200 items of GSM8K's test split (openai/grade-school-math, MIT licence; how they
were drawn: ``cookbook/evals/README.md``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import CookbookError
from helpers.paths import COOKBOOK_DIR

EVALS_DIR = COOKBOOK_DIR / "evals"


@dataclass(frozen=True)
class ItemSet:
    """One shipped item set: its key (``"gsm8k"``), JSON-lines file, and ``source`` (where the
    items come from, with the licence, for a notebook to print).
    """

    name: str
    path: Path
    source: str


ITEM_SETS = {
    "gsm8k": ItemSet(
        "gsm8k",
        EVALS_DIR / "gsm8k_test_200.jsonl",
        "GSM8K test split, 200 of 1,319 items (openai/grade-school-math @ 3101c7d, MIT licence)",
    )
}


def load_items(name: str = "gsm8k") -> list[dict]:
    """The items of a shipped set, in file order: ``[{"id", "question", "answer", "target"}]``.

    Raises:
        CookbookError: an unknown set (names the known ones) or a missing / damaged file
            (names it and says to restore it from git).
    """
    try:
        item_set = ITEM_SETS[name]
    except KeyError:
        raise CookbookError(
            f"Unknown item set {name!r}: use one of {', '.join(ITEM_SETS)}."
        ) from None
    try:
        lines = item_set.path.read_text(encoding="utf-8").splitlines()
        items = [json.loads(line) for line in lines if line.strip()]
        for it in items:
            if not all(isinstance(it[k], str) for k in ("id", "question", "target")):
                raise TypeError(f"line {it!r} lacks a string id, question or target")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CookbookError(
            f"{item_set.path} is missing or damaged ({type(e).__name__}: {e}): restore it from "
            f"git (`git checkout -- {item_set.path.relative_to(COOKBOOK_DIR.parent)}`)."
        ) from None
    return items


def items_by_id(ids: list[str], name: str = "gsm8k") -> list[dict]:
    """The items of set ``name`` with these ids, in the order given.

    Raises:
        CookbookError: an id the set does not have (named).
    """
    table = {it["id"]: it for it in load_items(name)}
    missing = [i for i in ids if i not in table]
    if missing:
        raise CookbookError(f"Item set {name!r} has no item {', '.join(missing)}.")
    return [table[i] for i in ids]
