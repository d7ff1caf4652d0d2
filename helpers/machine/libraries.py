"""The libraries a notebook's later steps import, checked in step 1, before anything is
downloaded or launched.

None is a dependency of the package (they are its ``notebook`` extra); a kernel without one
used to fail after the launch and the benchmark (an H200 run, 2026-12-01: ``EvalError: The
accuracy step needs lm-eval`` at step 10).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

from helpers.errors import InstallError


@dataclass(frozen=True)
class Library:
    """One library a later step imports: its pip ``requirement`` (as in ``requirements.txt`` and
    the ``notebook`` extra), the ``modules`` the step imports, the step (``needed_by``, in a user's
    words) and how to ``skip`` that step instead (or ``""``).
    """

    requirement: str
    modules: tuple[str, ...]
    needed_by: str
    skip: str = ""


#: Every library a notebook step imports that the package does not depend on, by import
#: name. The device kit (``tools/device/notebook-kernel-requirements.txt``) carries each
#: (a test checks it).
LIBRARIES: dict[str, Library] = {
    "lm_eval": Library(
        "lm-eval[api]==0.4.13",
        # what lab.evals.lm_eval_child imports: the evaluator, its tasks (datasets) and
        # the local-chat-completions model (aiohttp, tenacity)
        ("lm_eval.evaluator", "lm_eval.tasks", "lm_eval.models.openai_completions"),
        "the answer-quality steps (lm-eval scores the answers)",
        'set quality = {"items": 0} to skip them',
    ),
    "scipy": Library(
        "scipy>=1.11",
        ("scipy.stats",),
        "the answer-quality steps (the interval and McNemar's test) and the tuning step's "
        "choice (the Mann-Whitney test, lab.tune.noise)",
        'in a target notebook, set quality = {"items": 0} to skip the answer-quality steps',
    ),
    "pydantic_ai": Library(
        "pydantic-ai-slim[openai]==2.68.0",
        ("pydantic_ai", "pydantic_ai.models.openai", "pydantic_ai.providers.vllm"),
        "the agent section (lab.agents.agent; Python 3.11+)",
    ),
    "anthropic": Library("anthropic==2.15.0", ("anthropic",), "the Messages API section"),
}

_PROBE = """
import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as e:  # an ImportError, or a library broken at import
        out[name] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


#: ``(python, module)`` pairs a child of this process has imported: not probed again (each
#: probe is a Python that imports lm-eval, scipy and pydantic-ai, about 2 CPU-seconds, and a
#: kernel runs one per notebook). Only successes are kept: a library installed after a failed
#: check is seen at the next one.
_IMPORTED: set[tuple[str, str]] = set()


def missing_modules(modules: list[str], python: str = sys.executable) -> dict[str, str]:
    """``{module: why}`` for each of ``modules`` that does not import in a child ``python``
    (a module that imported there before, in this process, is not tried again).

    Raises:
        InstallError: the child Python could not run at all.
    """
    modules = [m for m in modules if (python, m) not in _IMPORTED]
    if not modules:
        return {}
    try:
        done = subprocess.run(
            [python, "-c", _PROBE, *modules], capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InstallError(f"Could not run {python} to check the libraries: {e}") from None
    try:
        failed = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise InstallError(
            f"Checking the libraries in {python} failed: {done.stderr.strip()[-500:]}"
        ) from None
    _IMPORTED.update((python, m) for m in modules if m not in failed)
    return failed


def check_libraries(*names: str) -> None:
    """Check that each library (import names, keys of :data:`LIBRARIES`) imports; print one
    line when all do.

    Args:
        names: e.g. ``"lm_eval", "scipy"``; none: nothing to check.

    Raises:
        KeyError: a name that is not in :data:`LIBRARIES` (names the known ones).
        InstallError: one does not import: names the library, the step that needs it, its
            reason, the ``%pip install`` line (then restart the kernel) and, where a step can
            be skipped, how.
    """
    unknown = [n for n in names if n not in LIBRARIES]
    if unknown:
        raise KeyError(f"check_libraries: unknown {unknown}; known: {', '.join(LIBRARIES)}.")
    if not names:
        return
    modules = [m for n in names for m in LIBRARIES[n].modules]
    failed = missing_modules(modules)
    for n in names:
        lib = LIBRARIES[n]
        bad = [m for m in lib.modules if m in failed]
        if bad:
            dist = lib.requirement.split("[")[0].split("=")[0].split(">")[0]
            raise InstallError(
                f"A library for {lib.needed_by} is missing: {dist} does not import here "
                f"({bad[0]}: {failed[bad[0]][:300]}). Install it: "
                f"%pip install '{lib.requirement}' (or the cookbook with its notebook extra: "
                "%pip install -e '..[notebook]'), then restart the kernel"
                + (f"; or {lib.skip}." if lib.skip else ".")
            )
    print("libraries for the later steps: " + ", ".join(names) + " import")
