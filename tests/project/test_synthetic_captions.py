"""Every synthetic-acceptance number a reader meets says where it comes from.

A drafting speed measured on random weights is drafting's *at a stated acceptance length*
(:mod:`lab.synthetic_acceptance`): a number without its source reads like a measurement of the
model. This scans the generated notebooks (their cells, committed without outputs) and every
results page, and fails on a line that gives a synthetic acceptance length without naming its
source in the same line; and the README, whose drafting speed-ups (a drafter and a ratio in
one line) must name the synthetic acceptance they were timed at and its source.
"""

from __future__ import annotations

import json
import re

from tests.support import TESTS

REPO = TESTS.parent
#: A synthetic acceptance length as the pages and notebooks write it.
NUMBER = re.compile(
    r"synthetic acceptance (?:length )?\d|synthetic_acceptance_length[\\\"']*\s*[:=]\s*\d|synthetic AL \d"
)
#: What names a source: the registry's (a public benchmark), a derivation, a choice, an assumption.
SOURCE = re.compile(
    r"ai-dynamo/dynamo|derived from|a chosen length|assumption|the notebook's parameter"
)


def _lines():
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            for line in "".join(cell["source"]).splitlines():
                yield path, line
    for path in sorted((REPO / "docs").rglob("*.md")):
        for line in path.read_text().splitlines():
            yield path, line


def unsourced(lines) -> list[str]:
    return [
        f"{p.relative_to(REPO)}: {line.strip()[:160]}"
        for p, line in lines
        if NUMBER.search(line) and not SOURCE.search(line)
    ]


#: A drafting speed-up as the README states one: a drafter, then a ratio (``DSpark K=7 1.64x``).
SPEEDUP = re.compile(r"\b(?:MTP|DSpark|DFlash) K=\d[^.|]*?\b\d+\.\d+x")


def unsourced_speedups(text: str) -> list[str]:
    """The sentences of ``text`` with a drafting speed-up and no synthetic acceptance source
    (a README paragraph is one line: sentence by sentence, each figure's own words count)."""
    sentences = (
        s for line in text.splitlines() for s in re.split(r"(?<=\.)\s+(?=[A-Z\[(*])", line)
    )
    return [
        s.strip()[:160]
        for s in sentences
        if SPEEDUP.search(s) and not ("synthetic acceptance" in s and SOURCE.search(s))
    ]


def test_the_readmes_drafting_speedups_name_their_acceptance_and_source():
    found = unsourced_speedups((REPO / "README.md").read_text())
    assert found == [], "a drafting speed-up without its synthetic acceptance:\n" + "\n".join(found)
    assert unsourced_speedups("DSpark K=7 2.76x the recipe at one user") != []
    assert (
        unsourced_speedups("DSpark K=7 2.76x (synthetic acceptance 3.69, ai-dynamo/dynamo)") == []
    )
    # one line, two sentences: the second's figure has no source of its own
    two = (
        "DSpark K=7 2.76x (synthetic acceptance 3.69, ai-dynamo/dynamo). MTP K=3 1.57x at one user."
    )
    assert unsourced_speedups(two) == ["MTP K=3 1.57x at one user."]


def test_every_synthetic_acceptance_number_names_its_source():
    found = unsourced(_lines())
    assert found == [], "a synthetic acceptance length without its source:\n" + "\n".join(found)


def test_the_scan_catches_a_bare_number_and_passes_a_sourced_one():
    assert len(unsourced([(REPO / "x.md", "| MTP, synthetic acceptance 3.69 | 455 |")])) == 1
    assert len(unsourced([(REPO / "x.md", '{"synthetic_acceptance_length": 2.6}')])) == 1
    sourced = (
        "synthetic acceptance 3.69 at K=7 (ai-dynamo/dynamo recipes/...): speed at that acceptance"
    )
    assert unsourced([(REPO / "x.md", sourced)]) == []
