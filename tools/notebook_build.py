"""Build the notebooks from one template: render, write, compare, and the README's badges.

Every notebook in ``notebooks/`` comes from ``cookbook/notebook_template.py`` (a jupytext
"percent" script with Jinja placeholders) filled with one registry target's data, so the
per-target notebooks differ only in data; the topic notebooks are plain jupytext scripts in
``cookbook/topics/``. :func:`build` writes them (and the README's "Open in Colab" badge
block); ``build(check=True)`` lists the committed files that differ from what the template
produces (``python -m tools.notebooks check``). The results page each target notebook links,
``docs/results/measured.md`` (:func:`measured_page`), is written and checked with them. Also
:func:`render`, :func:`render_topic`,
:func:`notebook_specs`, :func:`readme_badges`, :func:`colab_badge` and the paths
(:data:`TEMPLATE`, :data:`TOPICS_DIR`, :data:`NOTEBOOK_DIR`, :data:`README`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.errors import CookbookError
from helpers.paths import COOKBOOK_DIR, REPO_ROOT
from lab.workshop.runtime import colab_url, repository

if TYPE_CHECKING:
    from helpers.config.resolve import RegistryLike

TEMPLATE = COOKBOOK_DIR / "notebook_template.py"
TOPICS_DIR = COOKBOOK_DIR / "topics"  # topic notebooks: plain jupytext scripts, one per notebook
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
QUICKSTART = "quickstart_cpu_standin"
WORKSHOP = "workshop_colab"
README = REPO_ROOT / "README.md"
COLAB_BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"


def colab_badge(path: str, registry: RegistryLike = None) -> str:
    """Markdown "Open in Colab" badge for the notebook at ``path`` (repository-relative)."""
    return f"[![Open In Colab]({COLAB_BADGE_SVG})]({colab_url(path, registry)})"


@dataclass(frozen=True)
class NotebookSpec:
    """One generated notebook: file stem, target, stand-in default and prose."""

    stem: str
    target: str
    stand_in: bool
    title: str
    intro: str


def notebook_specs(registry: RegistryLike = None) -> list[NotebookSpec]:
    """The quickstart plus one notebook per GPU target in the registry (file order)."""
    from helpers.config import load

    reg = load.as_registry(registry)
    specs = [
        NotebookSpec(
            stem=QUICKSTART,
            target="h100",
            stand_in=True,
            title="Quickstart: Nemotron 3.5 Lightning on vLLM, end to end, on a CPU stand-in",
            intro=(
                "Serve Nemotron 3.5 Lightning with vLLM on any laptop or CI box, no GPU: a real "
                "vLLM server (its CPU build) runs a tiny stand-in model, so every step of a GPU "
                "deployment runs here in a few minutes. The first reply comes after two cells of "
                "set-up; then reasoning on and off, a reasoning budget, streaming, tool calls, a "
                "benchmark with plots, and a clean stop. On an H100, open `h100.ipynb` instead."
            ),
        )
    ]
    for name, t in reg.targets.items():
        if t.stand_in:
            continue
        specs.append(
            NotebookSpec(
                stem=name.replace("-", "_"),
                target=name,
                stand_in=False,
                title=f"Nemotron 3.5 Lightning on {t.label} with vLLM",
                intro=(
                    "Check the machine, install the pinned vLLM, download the checkpoint, "
                    "launch, talk to the model, benchmark, stop. Set `stand_in = True` to "
                    "rehearse on a CPU first."
                ),
            )
        )
    return specs


def render(spec: NotebookSpec, registry: RegistryLike = None):
    """Render one notebook (an ``nbformat.NotebookNode`` without outputs) from the template.

    Raises:
        CookbookError: the template fails to render or parse.
    """
    import jinja2
    import jupytext

    from helpers.config import load
    from helpers.config import resolve as recipes

    reg = load.as_registry(registry)
    # the template's view of the target: its registry entry with the defaults filled in
    t = reg.targets[spec.target].model_dump()
    t["variants"] = reg.target_variants(spec.target)
    t["speculative_modes"] = reg.target_modes(spec.target)
    t["seed_vllm_version"] = str(t["vllm_version"] or reg.model.seed_vllm_version)
    t["vllm_version"] = recipes.target_vllm_version(spec.target, reg)
    # the GPU command, in the markdown of step 1 (committed notebooks carry no outputs)
    t["shell_command"] = recipes.resolve(spec.target, registry=reg).shell_command()
    # what was measured for the target (its GPU runs, the tuning step's best per workload) is on
    # the results page (:func:`measured_page`); the notebook links its section
    measured = not spec.stand_in and _measured_section(spec.target, reg) is not None
    if t["colab_runtime"]:
        from helpers.memory import planner

        p = planner.plan(recipes.resolve(spec.target, registry=reg))
        t["planner_verdict"] = (
            f"{p.status.upper()}: KV budget {p.kv_budget_gib:.2f} GiB after {p.weights_gib:g} GiB of weights; "
            f"{p.max_num_seqs} sequences fit up to {p.max_len_for():,} tokens each (--max-model-len {p.max_model_len:,})."
        )
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    try:
        text = env.from_string(TEMPLATE.read_text()).render(
            target=spec.target,
            t=t,
            stand_in=spec.stand_in,
            title=spec.title,
            intro=spec.intro,
            measured=measured,
        )
    except jinja2.TemplateError as exc:
        raise CookbookError(
            f"{TEMPLATE} does not render for {spec.target}: {exc}; fix the template."
        ) from exc
    nb = jupytext.reads(text, fmt="py:percent")
    return _finalize(nb, spec.stem, "cookbook/notebook_template.py", spec.target)


def _finalize(nb, stem: str, generated_from: str, target: str | None):
    # The badge opens this very notebook in Colab; it is generated, so it never drifts.
    first_md = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if first_md is not None:
        first_md.source = colab_badge(f"notebooks/{stem}.ipynb") + "\n\n" + first_md.source
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "cookbook": {"generated_from": generated_from, "target": target},
    }
    for i, cell in enumerate(nb.cells):
        cell.id = f"{stem[:40]}-{i:02d}"
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        tags = cell.metadata.get("tags")
        cell.metadata = {"tags": tags} if tags else {}
    return nb


def render_topic(path: Path):
    """Render a topic notebook from its jupytext script in ``cookbook/topics/``."""
    import jupytext

    # __REPOSITORY__: the registry's `repository` (owner/name), the one place it is written
    nb = jupytext.reads(path.read_text().replace("__REPOSITORY__", repository()), fmt="py:percent")
    return _finalize(nb, path.stem, f"cookbook/topics/{path.name}", None)


MEASURED_PAGE = REPO_ROOT / "docs" / "results" / "measured.md"


def _measured_section(name: str, reg) -> str | None:
    """The markdown of target ``name``'s section of the results page, or None when nothing was
    measured for it: its notebook's runs on that GPU (``tools.results_pages.measured_reference``),
    the tuning step's results that apply to it (``tools.tune_pages.recommendation_markdown``) and
    the newest drafting session that applies (``tools.drafting_pages.measured_drafting``)."""
    from tools.drafting_pages import measured_drafting
    from tools.results_pages import measured_reference
    from tools.tune_pages import recommendation_markdown

    t = reg.targets[name]
    if t.stand_in:
        return None
    parts = [measured_reference(name), recommendation_markdown(name, registry=reg),
             measured_drafting(name)]  # fmt: skip
    parts = [p for p in parts if p]
    if not parts:
        return None
    # the paragraphs link as from notebooks/; the page lies in docs/results/
    text = "\n\n".join(parts).replace("](../docs/results/", "](")
    nb = name.replace("-", "_")
    return (
        f"## {name}\n\n{t.label}: [`notebooks/{nb}.ipynb`](../../notebooks/{nb}.ipynb)\n\n{text}\n"
    )


def _measured_sections(registry: RegistryLike = None) -> dict[str, str]:
    """``{target: markdown}`` for each GPU target with a measurement (:func:`_measured_section`),
    in registry order."""
    from helpers.config import load

    reg = load.as_registry(registry)
    sections = {name: _measured_section(name, reg) for name in reg.targets}
    return {name: text for name, text in sections.items() if text}


def measured_page(registry: RegistryLike = None) -> str:
    """``docs/results/measured.md``: per GPU target, what was measured for it, rendered from the
    committed results (the target notebooks link their section, ``#<target>``)."""
    head = (
        "# Measured for each target notebook\n\n"
        "Generated by `python -m tools.notebooks build` from the committed results "
        "(`tools/results_pages.py`, `tools/tune_pages.py`): per GPU target, the runs of its "
        "notebook on that GPU and the tuning step's measured best per workload "
        "(`notebooks/tuning.ipynb` measures your own). Each target notebook links its section.\n"
    )
    return "\n".join([head, *_measured_sections(registry).values()])


def _all_rendered():
    for spec in notebook_specs():
        yield spec.stem, render(spec)
    for path in sorted(TOPICS_DIR.glob("*.py")):
        yield path.stem, render_topic(path)


def _dumps(nb) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def readme_badges(readme: str, registry: RegistryLike = None) -> str:
    """``readme`` with every "Open in Colab" link pointed at the registry's ``repository``
    (the README's notebook table has one badge per notebook; a test checks none is missing)."""
    base = colab_url("", registry)
    return re.sub(
        r"https://colab\.research\.google\.com/github/[^/\s)]+/[^/\s)]+/blob/main/", base, readme
    )


def build(check: bool = False) -> list[Path]:
    """Write (or, with ``check=True``, compare) every generated notebook and the README's
    badge block.

    Returns:
        The stale paths (``check=True``) or the written paths.
    """
    paths = []
    readme = README.read_text()
    badges = readme_badges(readme)
    if badges != readme:
        if not check:
            README.write_text(badges)
        paths.append(README)
    page = measured_page()
    if not MEASURED_PAGE.exists() or MEASURED_PAGE.read_text() != page:
        if not check:
            MEASURED_PAGE.write_text(page)
        paths.append(MEASURED_PAGE)
    known = set()
    for stem, nb in _all_rendered():
        path = NOTEBOOK_DIR / f"{stem}.ipynb"
        known.add(path.name)
        text = _dumps(nb)
        if check:
            if not path.exists() or path.read_text() != text:
                paths.append(path)
        else:
            NOTEBOOK_DIR.mkdir(exist_ok=True)
            path.write_text(text)
            paths.append(path)
    extra = [p for p in NOTEBOOK_DIR.glob("*.ipynb") if p.name not in known and _is_generated(p)]
    if check:
        paths += extra
    else:
        for p in extra:
            p.unlink()
    return paths


def _is_generated(path: Path) -> bool:
    try:
        return "cookbook" in json.loads(path.read_text()).get("metadata", {})
    except (OSError, ValueError):
        return False
