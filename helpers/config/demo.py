"""The cookbook's demo data (``cookbook/demo.yaml``): the prompts the notebooks send, the
tool schemas and fake tool results, and the accuracy items the stand-in was trained on.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from helpers.errors import CookbookError
from helpers.paths import COOKBOOK_DIR

DEMO_PATH = COOKBOOK_DIR / "demo.yaml"

# --------------------------------------------------------------------------- demo data


def load_demo() -> dict[str, Any]:
    """Return ``cookbook/demo.yaml`` (the demo prompts, tool schemas and fake tool results).

    Raises:
        CookbookError: the file is missing or not a YAML mapping.
    """
    path = DEMO_PATH
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError as e:
        raise CookbookError(
            f"{path} is missing; restore it from git (`git checkout {path}`)."
        ) from e
    if not isinstance(data, dict):
        raise CookbookError(f"{path} must be a YAML mapping; restore it from git.")
    return data


def tool_result(demo: dict[str, Any], name: str, city: str) -> str:
    """Content of the tool message for ``name(city=city)``: ``json.dumps`` of demo.yaml's result.

    Raises:
        CookbookError: demo.yaml has no result for that tool and city.
    """
    table = {"get_weather": "weather", "get_time": "time"}.get(name)
    try:
        return json.dumps(demo[table]["results"][city])
    except (KeyError, TypeError) as e:
        raise CookbookError(
            f"cookbook/demo.yaml has no {name} result for {city!r}; add it under {table}.results."
        ) from e
