"""Checks of notebooks, committed and executed, that several test folders make: the cell that
first shows a model reply, an executed copy's outputs as a reader sees them, and where the
suite's executed copies go (``out/notebooks``)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from helpers.bench.results import NOT_MEASURED_ON_STANDIN
from helpers.paths import REPO_ROOT

#: How soon a notebook a GPU reader opens first reaches the model's reply (its cell index).
MAX_FIRST_REPLY_INDEX = 12


def notebook_cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def cell_source(cell: dict) -> str:
    return "".join(cell["source"])


def cell_python(source: str) -> ast.Module:
    """A code cell as Python (IPython's ``%pip`` lines become ``pass``)."""
    return ast.parse(re.sub(r"^(\s*)%.*$", r"\1pass", source, flags=re.M))


def calls(tree: ast.AST, *names: str) -> list[ast.Call]:
    """The calls in ``tree`` of a function or method named one of ``names``."""
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) in names
    ]


def first_reply_cell(cells: list[dict]) -> int:
    """Index of the first code cell that sends a chat request (the SDK's
    ``chat.completions.create``) and shows the reply."""
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            tree = cell_python(cell_source(cell))
            if calls(tree, "create") and calls(tree, "show"):
                return i
    raise AssertionError("no cell sends a chat request and shows its reply")


def real_out_notebooks() -> Path:
    """``out/notebooks`` of the checkout: where the suite's executed copies are kept."""
    path = REPO_ROOT / "out" / "notebooks"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _outputs(path: Path) -> list[tuple[dict, dict]]:
    return [
        (c, o)
        for c in notebook_cells(path)
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
    ]


def assert_clean_outputs(executed: Path, *, stand_in: bool, benchmarks: bool = True) -> None:
    """What a reader of an executed notebook must not see: object reprs, a figure twice,
    pip output, a stand-in number that is no measurement, a progress bar left mid-way.
    ``benchmarks=False``: a notebook that runs no benchmark (no bar, no TPOT table)."""
    text_outputs = []
    for _cell, o in _outputs(executed):
        plain = "".join(o.get("data", {}).get("text/plain", "")) + "".join(o.get("text", ""))
        text_outputs.append(plain)
        assert not re.match(r"^\w+\(\w+=", plain), f"object repr shown: {plain[:120]}"
    joined = "\n".join(text_outputs)
    assert "InstallPlan(" not in joined
    assert "Obtaining file:" not in joined and "Successfully installed" not in joined  # no %pip run
    assert "Triton is installed, but doesn't include CPU backend" not in joined
    assert "than expected after decoding and re-encoding" not in joined
    # each figure once: one image per saved PNG of the cell that made them
    for cell in notebook_cells(executed):
        images = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        saved = re.findall(
            r"plots: (.*)", "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
        )
        if images or saved:
            pngs = saved[0].split() if saved else []
            assert len(images) == len(pngs), (len(images), pngs)
            assert len({i["data"]["image/png"] for i in images}) == len(images), (
                "a figure shown twice"
            )
            for png in pngs:
                title = _png_title(Path(png))
                assert ("(CPU stand-in)" in title) == stand_in, title
    if not benchmarks:
        return
    # the benchmark bar saved at its final state (a text bar: its last update per bar)
    bars: dict[str, str] = {}
    for t in text_outputs:
        for seg in re.split(r"[\r\n]", t):
            m = re.match(r"(bench [^:]+): ", seg)
            if m:
                bars[m.group(1)] = seg
    assert bars, "no benchmark progress bar in the executed copy"
    for bar in bars.values():
        m = re.search(r"(\d+)/(\d+)", bar)
        assert m and m.group(1) == m.group(2) and "100%" in bar, bar
    if stand_in:  # TPOT on 2 CPU cores is no measurement: the table says so
        assert NOT_MEASURED_ON_STANDIN in joined


def _png_title(path: Path) -> str:
    """The title a saved plot carries in its PNG metadata (helpers.bench.plots writes it)."""
    from PIL import Image

    with Image.open(path) as im:
        return im.text.get("Title", "")


def write_notebook(path: Path, parameters: str, *cells: str) -> Path:
    """A small notebook for the runner's tests at ``path`` (its folder made): a ``parameters``
    cell with ``parameters``, then ``cells`` (a source starting with ``## `` is a markdown
    heading, the rest code), on the ``python3`` kernel."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]})] + [
        nbformat.v4.new_markdown_cell(c) if c.startswith("## ") else nbformat.v4.new_code_cell(c)
        for c in cells
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb))
    return path
