"""Notebooks: generated from one template, committed clean, and executed with papermill."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import psutil
import pytest

from helpers.config import load
from helpers.config import resolve as recipes
from helpers.errors import CookbookError
from helpers.paths import REPO_ROOT, out_dir
from helpers.server import processes as server
from tests.support.notebook_checks import (
    MAX_FIRST_REPLY_INDEX,
    assert_clean_outputs,
    cell_source,
    first_reply_cell,
    notebook_cells,
    write_notebook,
)
from tests.support.proctools import group_left, vllm_processes
from tests.support.shared_kernel import SharedKernel
from tools import notebook_build, notebook_run, notebooks

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


def serves_features(server, config) -> bool:
    """True when ``server`` (launched from a ServeConfig) serves every feature ``config``
    uses (``reasoning``, ``tool_calling``, ...): a client of ``config`` can attach to it.
    Code that reads ``config.features`` then skips what its config lacks, as it would on
    its own server."""
    return set(config.features) <= set(server.config.features)


def test_committed_notebooks_match_the_template():
    stale = notebook_build.build(check=True)
    assert stale == [], f"run `python -m tools.notebooks build`: {stale}"


def test_one_notebook_per_gpu_target_plus_quickstart():
    names = {p.stem for p in NOTEBOOKS}
    for target in list(load.load_registry().targets):
        if target != "cpu":
            assert target.replace("-", "_") in names
    assert notebook_build.QUICKSTART in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_hygiene(path):
    cells = notebook_cells(path)
    code = [c for c in cells if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    assert sum("parameters" in c.get("metadata", {}).get("tags", []) for c in cells) == 1
    source = "\n".join("".join(c["source"]) for c in code)
    assert "%pip install" in source
    assert not re.search(r"^\s*!.*&\s*$", source, re.M), "no background shell commands"
    # thin cells: the logic lives in helpers
    assert max(len("".join(c["source"]).splitlines()) for c in code) <= notebooks.MAX_CELL_LINES


def _port_free(port: int) -> bool:
    # SO_REUSEADDR like vLLM itself, so TIME_WAIT sockets of closed connections do not count
    return server.port_is_free(port)


@pytest.mark.notebook
@pytest.mark.server
def test_quickstart_runs_end_to_end(capsys, tmp_path, monkeypatch):
    """The main job: a real CPU vLLM server launched, used, benchmarked, plotted, stopped.

    The one notebook run that launches its own server (the others attach to the session's).
    Run as ``make quickstart`` runs it (default parameters, so ``install = True``: the
    helpers are importable, so nothing is pip-installed), with ``out/`` in a folder of its
    own (``COOKBOOK_OUT``; the cached stand-in model linked in): the h100 target notebook,
    which may run at the same time in the other test worker, writes the same file names.
    """
    out = tmp_path / "out"
    out.mkdir()
    models = REPO_ROOT / "out" / "models"
    models.mkdir(parents=True, exist_ok=True)
    (out / "models").symlink_to(models, target_is_directory=True)
    monkeypatch.setenv("COOKBOOK_OUT", str(out))
    started = time.time()
    executed = notebook_run.run_notebook(
        REPO_ROOT / "notebooks" / f"{notebook_build.QUICKSTART}.ipynb"
    )
    assert out_dir() == out
    assert executed.exists() and executed.parent == out / "notebooks"
    fresh = [p for p in out.rglob("*") if p.is_file() and p.stat().st_mtime >= started]
    bench_jsons = [p for p in fresh if p.suffix == ".json" and "bench" in p.parts]
    assert len(bench_jsons) >= 3
    for p in bench_jsons:
        data = json.loads(p.read_text())
        if "completed" in data:
            assert data["completed"] > 0 and data.get("failed", 0) == 0
    pngs = [p for p in fresh if p.suffix == ".png"]
    assert pngs and all(p.stat().st_size > 1000 for p in pngs)
    text = executed.read_text()
    port = int(re.search(r"base_url: http://127\.0\.0\.1:(\d+)", text).group(1))
    assert _port_free(port)
    assert not vllm_processes(port)
    # the server ran in its own session: no process of that process group may be left
    pgid = int(re.search(r"\[vllm\] launched pid (\d+)", text).group(1))
    left = _group_left(pgid)
    assert not left, f"the notebook's server left processes behind: {left}"
    _assert_session_outputs(text, reasoning_parser=True, tool_calling=True)
    assert_clean_outputs(executed, stand_in=True)
    # the short accuracy step scored the stand-in's trained and held-out items through lm-eval,
    # beside the published reference; the budget curve is the quality notebook's
    # (tests/lab/evals/test_evals.py); the target notebooks' runs skip the step or score two items
    assert "items the stand-in was trained on: 100.0% (8/8" in text
    assert "items the stand-in was never shown: 0.0% (0/8" in text
    assert "Published reference: vLLM's CI floor" in text and "Reasoning-budget curve" not in text
    assert (out / "evals" / "h100-nvfp4-none-standin" / "items.csv").is_file()
    # the benchmark step: its table and plots (the h100 notebook's attached run: one point)
    assert "output_throughput" in text and "-standin-pareto.png" in text
    # the first reply is printed early (tests/notebooks/test_notebook_layout.py checks the same cell)
    first = next(
        i for i, c in enumerate(notebook_cells(executed))
        if any("── answer ──" in "".join(o.get("text", "")) for o in c.get("outputs", []))
    )  # fmt: skip
    assert first == first_reply_cell(notebook_cells(executed)) and first <= MAX_FIRST_REPLY_INDEX
    # start-up phases: one line each, a phase updated in place saved as its last state
    launch = "".join(
        "".join(o.get("text", "")) for c in notebook_cells(executed) if "launch_server(" in "".join(c["source"])
        for o in c.get("outputs", [])
    )  # fmt: skip
    assert "\r" not in launch and len(re.findall(r"^\[vllm\s+\d+s\] ", launch, re.M)) >= 3
    # the command as launched (a `vllm serve` line a shell pastes), then what it changes from
    # step 1's command, each with its reason
    assert re.search(r"^\S*/vllm serve \S*/models/standin-\w+ \\$", launch, re.M), launch
    assert "[vllm] how it differs from the target's command, and why:" in launch
    assert "(target: nvidia/" in launch and ": the CPU stand-in" in launch
    # the terminal saw each section as it started, the server's phases, and the copy's path
    said = capsys.readouterr().out
    assert re.search(r"\[\s*\d+ s\] 2\. Launch the server", said)
    assert re.search(r"\[\s*\d+ s\]   \[vllm\s+\d+s\] ready: ", said)
    assert f"-> {executed}" in said or f"-> {executed.relative_to(Path.cwd())}" in said


def _cell_sources(path: Path, marker: str) -> list[str]:
    return ["".join(c["source"]) for c in notebook_cells(path) if marker in "".join(c["source"])]


TARGET_NOTEBOOKS = [
    p
    for p in NOTEBOOKS
    if json.loads(p.read_text())["metadata"].get("cookbook", {}).get("target")
    and p.stem != notebook_build.QUICKSTART
]


def test_target_notebooks_share_the_quickstarts_launch_and_stop_cells():
    """The launch/stop code each target notebook runs is the quickstart's, which CI executes."""
    quick = REPO_ROOT / "notebooks" / f"{notebook_build.QUICKSTART}.ipynb"
    for marker in ("srv = launch_server(fetch(run)", "srv.stop()"):
        expected = _cell_sources(quick, marker)
        assert len(expected) == 1
        for path in TARGET_NOTEBOOKS:
            assert _cell_sources(path, marker) == expected, path.name


#: A target notebook's markdown, in words (``str.split``): check, install, download, launch,
#: talk, benchmark, stop, one short accuracy step; the research is in the topic notebooks.
MAX_TARGET_WORDS = 1300


def markdown_words(path: Path) -> int:
    """Words of a notebook's markdown cells (``str.split``: a link or a table cell counts as
    the words between its spaces)."""
    return sum(
        len(cell_source(c).split()) for c in notebook_cells(path) if c["cell_type"] == "markdown"
    )


def test_a_notebooks_markdown_stays_under_its_word_budget():
    """h100.ipynb is the measure (2,249 words when step 9 carried an H200 tuning table); every
    notebook, the template's and the topics' (speculative_decoding.ipynb reached 1,508), stays
    at or under the budget."""
    assert markdown_words(REPO_ROOT / "notebooks" / "h100.ipynb") <= MAX_TARGET_WORDS
    books = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
    assert set(TARGET_NOTEBOOKS) <= set(books) and len(books) > len(TARGET_NOTEBOOKS)
    over = {p.name: markdown_words(p) for p in books if markdown_words(p) > MAX_TARGET_WORDS}
    assert over == {}, f"over {MAX_TARGET_WORDS} markdown words: {over}"
    assert markdown_words(REPO_ROOT / "notebooks" / "h100.ipynb") > 500  # the counter counts


#: Each talk step of a target notebook and the SDK call its cell must show a user.
SDK_CALLS = {
    "3. The first reply": ("chat.completions.create(", "messages=", "max_tokens=", "temperature=", "top_p="),
    "4. Reasoning off": ("chat.completions.create(", 'extra_body=', '"enable_thinking": False'),
    "5. A reasoning budget": ("chat.completions.create(", "extra_body=", '"thinking_token_budget"', "two_pass_budget("),
    "6. Streaming": ("chat.completions.create(", "stream=True", "stream_options="),
    "7. Tool calling": ("chat.completions.create(", "tools=", '"role": "tool"', '"tool_call_id": call.id'),
    "8. Parallel tool calls": ("chat.completions.create(", "tools=", '"role": "tool"', '"tool_call_id": call.id'),
}  # fmt: skip


def step_code(path: Path) -> dict[str, str]:
    """``{step heading: the code of the cells under it}`` of a numbered notebook."""
    steps: dict[str, str] = {}
    current = None
    for cell in notebook_cells(path):
        text = cell_source(cell)
        if cell["cell_type"] == "markdown":
            m = re.search(r"^## (\d+\. .*)$", text, re.M)
            current = m.group(1).strip() if m else current
        elif current:
            steps[current] = steps.get(current, "") + text + "\n"
    return steps


@pytest.mark.parametrize(
    "path",
    [*TARGET_NOTEBOOKS, REPO_ROOT / "notebooks" / f"{notebook_build.QUICKSTART}.ipynb"],
    ids=lambda p: p.stem,
)
def test_each_talk_step_shows_the_sdk_call_it_exercises(path):
    """The request in the cell: each step that talks to the model writes the OpenAI SDK call a
    user would (its fields, ``extra_body``, the stream options, the tool messages), then one
    helper call that checks and shows the reply; no helper sends the request for it."""
    steps = step_code(path)
    for step, needles in SDK_CALLS.items():
        assert step in steps, f"{path.name}: no step {step!r}"
        missing = [n for n in needles if n not in steps[step]]
        assert missing == [], f"{path.name} step {step!r} does not show {missing}"
        assert "show(" in steps[step], f"{path.name} step {step!r} does not check the reply"
    code = "\n".join(steps.values())
    for gone in ("chat(llm", "stream_chat(", "run_tool_loop(", "ChatOptions"):
        assert gone not in code, f"{path.name}: {gone} sends the request for the user"


#: A topic notebook's talk steps and what their cells must show: each SDK's own call (the
#: OpenAI SDK's chat completions and Responses, the Anthropic SDK's Messages), then the checker
#: of its reply.
TOPIC_SDK_CALLS = {
    "agents": {
        "2. A JSON-schema answer, validated": (
            "llm.chat.completions.create(", "extra_body=", '"structured_outputs"',
            '"enable_thinking"', '"stream": True', "check_reply(", "Capital.model_validate_json(",
            "check_structured(",
        ),
        "3. The same turn on the Responses and Messages APIs": (
            "llm.chat.completions.create(", "llm.responses.create(", "claude_style.messages.create(",
            "check_reply(", "check_responses_reply(", "check_messages_reply(",
        ),
    },
}  # fmt: skip


@pytest.mark.parametrize("stem", sorted(TOPIC_SDK_CALLS))
def test_each_topic_talk_step_shows_the_sdk_call_it_exercises(stem):
    """As for the target notebooks: the request in the cell, a helper only checks the reply
    (the agents notebook's steps 2-3 once sent theirs through structured_chat / responses_chat /
    messages_chat)."""
    steps = step_code(REPO_ROOT / "notebooks" / f"{stem}.ipynb")
    for step, needles in TOPIC_SDK_CALLS[stem].items():
        assert step in steps, f"{stem}.ipynb: no step {step!r}"
        missing = [n for n in needles if n not in steps[step]]
        assert missing == [], f"{stem}.ipynb step {step!r} does not show {missing}"
        for sender in ("structured_chat(", "responses_chat(", "messages_chat("):
            assert sender not in steps[step], f"{stem}.ipynb step {step!r}: {sender} sends it"


#: The target notebook whose CI run executes the short accuracy step (on two items: the
#: quickstart runs it on its 16 items, with the same cell).
ACCURACY_NOTEBOOK = "h200"
#: The target notebook whose CI run executes the benchmark step attached to a stand-in (one
#: point, its table and plots); the others skip it (``bench_concurrencies = []``) to keep CI's
#: budget: the step's cell is the same in every notebook (the template's) and the quickstart
#: runs it in full.
SWEEP_NOTEBOOKS = {"h100"}  # and h200 in GPU mode (tests/notebooks/test_gpu_defaults.py)


def _code_cells(path: Path) -> list[str]:
    """A notebook's code cells; of its parameters cell, the parameters and their defaults
    without the ``target`` line and without the comments (which name the target's registry
    defaults: its variant, its drafter)."""
    out = []
    for c in notebook_cells(path):
        if c["cell_type"] != "code":
            continue
        src = "".join(c["source"])
        if "parameters" in c["metadata"].get("tags", []):
            lines = (line.split("  #")[0].rstrip() for line in src.splitlines())
            src = "\n".join(line for line in lines if not line.startswith("target"))
        out.append(src)
    return out


def _behaviour(path: Path) -> tuple:
    """What a target notebook's cells branch on, from its registry entry: the stand-in's
    features, the drafting method, the variant and the GPU count."""
    cfg = recipes.resolve(json.loads(path.read_text())["metadata"]["cookbook"]["target"])
    own = recipes.standin_config(cfg, "standin")
    return tuple(sorted(own.features)), cfg.speculative, cfg.variant, cfg.gpu_count


#: One target notebook per behaviour (:func:`_behaviour`) runs on the stand-in in CI: the
#: accuracy and sweep notebooks first, then the first of each other behaviour. The others
#: differ from one of these only in the registry data their ``target`` names
#: (test_target_notebooks_differ_only_in_their_target); the registry itself is checked for
#: every target without a notebook run (tests/config/test_recipes.py, tests/config/test_registry.py).
STANDIN_RUNS: list[Path] = []
for _path in sorted(
    TARGET_NOTEBOOKS, key=lambda p: (p.stem not in {ACCURACY_NOTEBOOK, *SWEEP_NOTEBOOKS}, p.stem)
):
    if _path.stem in {ACCURACY_NOTEBOOK, *SWEEP_NOTEBOOKS} or _behaviour(_path) not in {
        _behaviour(q) for q in STANDIN_RUNS
    }:
        STANDIN_RUNS.append(_path)


def test_target_notebooks_differ_only_in_their_target():
    """Every target notebook has the same code cells as every other (the template's), its
    parameters cell apart from the ``target`` line included: what one run on the stand-in
    shows for a behaviour holds for each notebook of that behaviour."""
    reference = _code_cells(TARGET_NOTEBOOKS[0])
    for path in TARGET_NOTEBOOKS[1:]:
        assert _code_cells(path) == reference, (
            f"{path.name} differs from {TARGET_NOTEBOOKS[0].name}"
        )
    behaviours = {_behaviour(p) for p in TARGET_NOTEBOOKS}
    assert {_behaviour(p) for p in STANDIN_RUNS} == behaviours and len(STANDIN_RUNS) < len(
        TARGET_NOTEBOOKS
    )


@pytest.mark.notebook
@pytest.mark.server
@pytest.mark.parametrize("path", STANDIN_RUNS, ids=lambda p: p.stem)
def test_target_notebook_runs_in_stand_in_mode(path, standin_server, shared_kernel):
    """Each target notebook: real command rendered + validated, then the story on the stand-in.

    To keep the suite inside CI's budget every target notebook attaches to the session's
    stand-in server (``server_url``); launch and stop run in the quickstart, from identical
    cells (test_target_notebooks_share_the_quickstarts_launch_and_stop_cells). The session
    server serves every stand-in feature, and a notebook decides what to run from its own
    config's features: a target whose stand-in serves fewer (Baseten's preset has no
    parsers, Jetson's no tool parser) must say which steps it skips instead of failing.
    They run one after another in one kernel (``shared_kernel``: each notebook starts from an
    empty namespace; vLLM's benchmark module and the helpers are imported once).
    """
    cfg = recipes.resolve(json.loads(path.read_text())["metadata"]["cookbook"]["target"])
    own = recipes.standin_config(cfg, standin_server.config.model)
    assert serves_features(standin_server, own), (
        f"{path.stem} uses a feature the session server lacks"
    )
    params = {
        "stand_in": True,
        "install": False,
        "server_url": standin_server.url,
        # one point: the sweep, its table and plots (the quickstart runs three)
        "bench_concurrencies": [2] if path.stem in SWEEP_NOTEBOOKS else [],
        "bench_input_len": 16,
        "bench_output_len": 8,
    }
    # the accuracy step on the stand-in's 16 items runs in the quickstart
    # (test_quickstart_runs_end_to_end); one target notebook scores two items; the others skip
    full_accuracy = path.stem == ACCURACY_NOTEBOOK
    params["quality"] = {"items": 2 if full_accuracy else 0}
    executed = notebook_run.run_notebook(path, params, progress=False, kernel=shared_kernel)
    text = executed.read_text()
    if full_accuracy:
        assert "items the stand-in was trained on: 100.0% (2/2" in text, "accuracy step"
        assert "Published reference: vLLM's CI floor" in text and "Reasoning-budget" not in text
    else:
        assert "Accuracy step skipped (quality items = 0)." in text
    if path.stem in SWEEP_NOTEBOOKS:
        assert "output_throughput" in text and "-standin-pareto.png" in text, "the sweep"
        assert '"Step 9 skipped' not in text  # an output line (the source has print('Step 9 ...)
    else:
        assert '"Step 9 skipped (bench_concurrencies = []).' in text
    assert f"vllm serve {cfg.model}" in text  # the real target's command was shown
    assert standin_server.is_running()
    _assert_session_outputs(
        text,
        reasoning_parser="reasoning" in own.features,
        tool_calling="tool_calling" in own.features,
    )


def test_the_launch_of_reduced_feature_stand_ins_is_validated():
    """The stand-in commands of targets with fewer features (their notebooks attach to the
    session server in CI) still parse with the installed vLLM's own parser."""
    model = str(REPO_ROOT / "out" / "models" / "standin")
    reduced = []
    for target in list(load.load_registry().targets):
        if target == "cpu":
            continue
        own = recipes.standin_config(recipes.resolve(target), model)
        if set(own.features) != set(recipes.resolve("cpu").features):
            reduced.append(target)
            own.validate()
    assert reduced, "no target serves fewer features on the stand-in"


_group_left = group_left  # tests/support/proctools.py


def _assert_session_outputs(text: str, *, reasoning_parser: bool, tool_calling: bool) -> None:
    """What an executed notebook printed reads like a real session: reasoning and answer
    sections, the budget behaving (or a stated skip), the tool's result used, no traceback."""
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "── answer ──" in text
    if reasoning_parser:
        assert "── reasoning" in text
        assert re.search(
            r"thinking_token_budget=\d+: \d+ reasoning tokens \(budget \d+\), then an answer", text
        ), "budget line"
        assert "UNEXPECTED thinking_token_budget" not in text
    else:
        assert "skipped: " in text and "--reasoning-parser" in text
    if tool_calling:
        assert "get_weather(" in text and "── tool get_weather returned ──" in text
    else:
        assert "skipped: " in text and "--tool-call-parser" in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_parameter_is_visible_to_papermill(path):
    """`papermill --help-notebook` lists every parameter (a comment it cannot parse hides one)."""
    import papermill

    cell = next(
        c for c in notebook_cells(path) if "parameters" in c.get("metadata", {}).get("tags", [])
    )
    names = re.findall(r"^(\w+)\s*(?::[^=]*)?=", "".join(cell["source"]), re.M)
    assert list(papermill.inspect_notebook(str(path))) == names


# ------------------------------------------------------------------ the runner (a tiny notebook)


def _tiny_notebook(path: Path) -> Path:
    return write_notebook(
        path,
        "fail = False\nnap = 0.0",
        "## 1. First step\n\nprose",
        "import time\ntime.sleep(nap)\nprint('[vllm    1s] ready: fake')",
        "## 2. Second step",
        "assert not fail, 'asked to fail'\nprint('second ok')",
    )


@pytest.mark.notebook
def test_a_shared_kernel_starts_each_notebook_from_an_empty_namespace(tmp_path, monkeypatch):
    """Notebooks run one after another in one SharedKernel see none of each other's
    variables, run in their own folder, write where the caller's COOKBOOK_OUT says at that
    moment (set, changed, unset), and the kernel process ends with the block."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    for folder in (first, second):
        write_notebook(
            folder / "nb.ipynb",
            "value = 0",
            "import os\nprint('cwd:', os.getcwd())\nprint('left over:', 'kept' in globals())\nkept = value\n"
            "print('out:', os.environ.get('COOKBOOK_OUT'))",
        )
    texts = []
    with SharedKernel() as kernel:
        pid = kernel.km.provisioner.process.pid
        for i, folder in enumerate((first, second, first)):
            if i < 2:
                monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / f"o{i}"))
            else:
                monkeypatch.delenv("COOKBOOK_OUT")
            out = notebook_run.run_notebook(
                folder / "nb.ipynb",
                {"value": i},
                output=tmp_path / f"out{i}.ipynb",
                progress=False,
                kernel=kernel,
            )
            texts.append(out.read_text())
        assert kernel.runs == 3 and psutil.pid_exists(pid)
    outs = (tmp_path / "o0", tmp_path / "o1", None)
    for text, folder, want in zip(texts, (first, second, first), outs, strict=True):
        assert f"cwd: {folder}" in text
        assert "left over: False" in text
        assert f"out: {want}" in text
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(CookbookError, match="not running"):
        kernel.reset(first)


@pytest.mark.notebook
def test_the_runners_command_line_takes_parameters(tmp_path):
    """The README's command, as a user types it: ``python -m tools.notebooks run NB -p ...``
    (its own process, so the module runs as ``__main__``)."""
    import subprocess
    import sys

    _tiny_notebook(tmp_path / "tiny.ipynb")
    env = {**os.environ, "COOKBOOK_OUT": str(tmp_path / "out")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-m", "tools.notebooks", "run", "tiny.ipynb", "-p", "nap", "0.1",
         "-p", "fail", "False"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "second ok" in (tmp_path / "out" / "notebooks" / "tiny.ipynb").read_text()
    bad = subprocess.run(
        [sys.executable, "-m", "tools.notebooks", "run", "tiny.ipynb", "-p", "fail", "true"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 1 and "asked to fail" in bad.stderr, bad.stdout + bad.stderr


@pytest.mark.notebook
def test_runner_reports_steps_and_keeps_the_last_good_copy(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(notebook_run, "HEARTBEAT_S", 1.0)  # read where the runner uses it
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "cli-out"))
    _tiny_notebook(tmp_path / "tiny.ipynb")
    dest = tmp_path / "out" / "tiny.ipynb"
    assert notebooks.main(["run", "tiny.ipynb", "-p", "nap", "2.5"]) == 0
    assert (tmp_path / "cli-out" / "notebooks" / "tiny.ipynb").is_file()
    said = capsys.readouterr().out
    lines = said.splitlines()
    assert re.match(r"\[\s*\d+ s\] running tiny\.ipynb -> ", lines[0]), lines[0]
    assert any(re.match(r"\[\s*\d+ s\] 1\. First step$", ln) for ln in lines), said
    assert any(re.match(r"\[\s*\d+ s\]   \[vllm    1s\] ready: fake$", ln) for ln in lines), said
    assert any("... still in '1. First step'" in ln for ln in lines), said  # the heartbeat
    assert re.search(r"done: executed tiny\.ipynb in \d+ s -> ", lines[-1]), lines[-1]

    good = notebook_run.run_notebook("tiny.ipynb", output=dest, progress=False)
    assert good == dest and "second ok" in dest.read_text()
    before = dest.read_text()
    with pytest.raises(
        CookbookError,
        match=r"failed in cell .*asked to fail.*tiny\.failed\.ipynb.*last good run stays at",
    ):
        notebook_run.run_notebook("tiny.ipynb", {"fail": True}, output=dest, progress=False)
    assert dest.read_text() == before  # the last good copy is kept
    assert "asked to fail" in (tmp_path / "out" / "tiny.failed.ipynb").read_text()
    assert not list((tmp_path / "out").glob(".*running*"))  # no temporary copy left


def test_a_missing_notebook_lists_the_notebooks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO_ROOT / "notebooks")
    assert (
        notebook_run.resolve_notebook("h100.ipynb") == REPO_ROOT / "notebooks" / "h100.ipynb"
    )  # from here
    monkeypatch.chdir(REPO_ROOT)
    with pytest.raises(CookbookError) as ei:
        notebook_run.resolve_notebook("notebooks/h10.ipynb")
    msg = str(ei.value)
    assert "No notebook at notebooks/h10.ipynb" in msg and "notebooks/h100.ipynb" in msg
    assert "build" not in msg
    assert notebooks.main(["run", "nope.ipynb"]) == 1
    assert "notebooks/quickstart_cpu_standin.ipynb" in capsys.readouterr().err


def test_parameter_values_are_read_as_json_then_python_literals():
    parse = notebooks._parse_value
    assert parse("true") is True and parse("True") is True and parse("None") is None
    assert parse("[1, 2]") == [1, 2] and parse("3") == 3 and parse("0.5") == 0.5
    assert parse("h100") == "h100" and parse('"3"') == "3"


@pytest.mark.notebook
def test_a_misspelled_quality_key_stops_step_1_before_any_launch(tmp_path):
    """The breaker's finding: ``quality = {"compare": {"varient": "bf16"}}`` was ignored (the
    same configuration served twice, "+0.0 %, McNemar p = 1"). Step 1 now names the key with
    "did you mean", before anything is downloaded or launched."""
    from helpers.errors import CookbookError

    with pytest.raises(CookbookError, match="step 1|cell"):
        notebook_run.run_notebook(
            REPO_ROOT / "notebooks" / "h200.ipynb",
            {"stand_in": True, "install": False, "quality": {"compare": {"varient": "bf16"}}},
            output=tmp_path / "h200.ipynb", progress=False,
        )  # fmt: skip
    failed = (tmp_path / "h200.failed.ipynb").read_text()
    assert "has no key 'varient' (did you mean 'variant'?)" in failed
    assert "[vllm] launched" not in failed and "nothing to download" not in failed


@pytest.mark.parametrize(
    "quality, said",
    [
        ({"item": 4}, "quality has no key 'item' (did you mean 'items'?)"),
        ({"items": -3}, "quality['items']=-3 must be a whole number"),
        ({"items": 2.5}, "quality['items']=2.5 must be a whole number"),
        ({"budgets": [1.5]}, "each budget is 'off', None (no cap) or a whole number"),
        ({"compare": {"variant": "fp8"}}, "is not a variant of this target: use one of"),
        ({"compare": {"variant": "nvfp4"}}, "serves the same command as the run"),
        ({"compare": {"extra_args": "--dtype float32"}}, "must be a dict of serve flags"),
    ],
)  # fmt: skip
def test_each_quality_problem_is_named(quality, said):
    from helpers.config.parameters import check_quality
    from helpers.errors import CookbookError

    with pytest.raises(CookbookError) as err:
        check_quality(quality, "h200", "nvfp4")
    assert said in str(err.value)
    check_quality(
        {"items": 4, "budgets": ["off", 8, None], "compare": {"variant": "bf16"}}, "h200", "nvfp4"
    )
