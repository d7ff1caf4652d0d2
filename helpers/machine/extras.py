"""The packages a serve flag loads beyond what ``pip install vllm==X`` installs, read from the
release's own ``Requires-Dist`` (its flag table's ``requires`` and ``extras``: ``python -m
tools.flagtables extras``). ``--load-format fastsafetensors`` / ``instanttensor`` import the
package of that name (vLLM 0.32.0 ``model_loader/weight_utils.py``); 0.32.0-0.34.0 require both
of every install, 0.28.0 instanttensor only with its ``[instanttensor]`` extra.
"""

from __future__ import annotations

import re
from typing import Any

from helpers.config.flagtable import available_versions, load_table
from helpers.config.versions import parse_version

#: Flags whose value names a vLLM extra, or starts with one (``runai_streamer`` -> ``runai``).
EXTRA_FLAGS = ("--load-format",)


def _dist(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[\w.-]+", requirement).group(0)).lower()


def _requirements(version: Any) -> tuple[str, list[tuple[str, str | None]]]:
    """``(release read, [(requirement, extra or None)])``; a nightly reads the newest table."""
    have = available_versions()
    release = str(version) if str(version) in have else max(have, key=parse_version)
    tab = load_table(release)
    reqs = [(r.split(";")[0].strip(), None) for r in tab.get("requires", [])]
    return release, reqs + [(r, e) for e, rs in tab.get("extras", {}).items() for r in rs]


def flag_requirements(cfg: Any) -> list[tuple[str, str, str]]:
    """``[(flag text, extra, requirement)]`` ``cfg``'s command needs that its release installs
    only with an extra: vLLM 0.28.0 with ``--load-format instanttensor`` gives
    ``("--load-format instanttensor", "instanttensor", "instanttensor>=0.1.9")``; [] for the
    stand-in and where every install of the release gets the package."""
    if getattr(cfg, "stand_in", False):
        return []
    _, reqs = _requirements(cfg.vllm_version)
    base = {_dist(r) for r, e in reqs if e is None}
    values = [(f, str(cfg.args.get(f) or "")) for f in EXTRA_FLAGS]
    return [
        (f"{f} {v}", e, r)
        for f, v in values
        for r, e in reqs
        if e and (v == e or v.startswith(f"{e}_")) and _dist(r) not in base
    ]


def package_requirement(module: str, version: Any) -> tuple[str, str | None, str] | None:
    """``(requirement, extra, release read)`` of the package the dotted import name ``module``
    belongs to (by distribution name: ``runai_model_streamer`` -> ``runai-model-streamer``):
    ``extra`` None where every install of vLLM ``version`` gets it (0.32.0's
    ``instanttensor>=0.2.2``); None when the release names no such package."""
    release, reqs = _requirements(version)
    top = _dist(module.split(".")[0])
    return next(((r, e, release) for r, e in reqs if _dist(r) == top), None)
