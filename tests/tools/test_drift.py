"""The drift check (``python -m tools.drift``) and the flag-table generator it builds on.

No network: the 0.32.0 -> 0.33.0 comparison reads the committed tables (made from the two
wheels); synthetic changes are small hand-made tables, ``vllm/`` trees and wheels.
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path

import pytest

from helpers.config import flagtable
from helpers.errors import FlagError
from tools import drift, flagtables

OLD, NEW = "0.32.0", "0.33.0"


def _tables(tmp_path, new: str = NEW, old: str = OLD):
    return (
        drift.open_release(new, tmp_path, tables_only=True),
        drift.open_release(old, tmp_path, tables_only=True),
    )


@pytest.fixture(scope="module")
def report_032_033(tmp_path_factory):
    new, old = _tables(tmp_path_factory.mktemp("drift"))
    return drift.check(new, old)


# ------------------------------------------------------------- 0.32.0 -> 0.33.0, committed tables


def test_every_registry_command_runs_on_033_and_only_the_mamba_cache_mode_it_passes_is_deprecated(
    report_032_033,
):
    r = report_032_033
    assert r.commands > 100 and r.command_failures == {}
    used = {u.flag: u for u in r.flag_uses}
    assert {"--moe-backend", "--reasoning-parser", "--speculative-config"} <= set(used)
    assert "humming" in used["--moe-backend"].values
    # the one change: 0.33.0 still accepts --mamba-cache-mode, but its help (read from the
    # wheel's parser) says it does nothing; measured on the H200 2026-12-04, the server warns
    changed = {u.flag: u.change for u in r.flag_uses if u.breaks or u.change}
    assert (
        list(changed) == ["--mamba-cache-mode"]
        and "It has no effect" in changed["--mamba-cache-mode"]
    )
    assert not any(u.breaks for u in r.flag_uses)
    verdict = r.markdown().split("## 1.")[0]
    assert "Deprecated on 0.33.0 and passed by the registry" in verdict
    assert "`--mamba-cache-mode` (--mamba-cache-mode is deprecated" in verdict
    assert r.breaking == []  # tables only: wordings are not read


def test_033_respells_the_negative_switches_and_keeps_the_old_ones_hidden(report_032_033):
    oc = report_032_033.options
    assert oc["removed"] == [] and oc["renamed"] == []
    assert "--disable-prefix-caching" in oc["respelled"]
    assert "--no-enable-prefix-caching" in oc["hidden"]  # the cpu target's flag: still accepted
    assert {"--reasoning-effort-map", "--watchdog-config"} <= set(oc["added"])
    table = flagtable.load_table(NEW)
    assert flagtable.check_argv(["--no-enable-prefix-caching"], NEW, table=table) == []


def test_033_names_added_and_removed_per_flag(report_032_033):
    names = report_032_033.names
    assert {"medusa", "mlp_speculator"} <= set(names["speculative method"]["removed"])
    assert "musespark1x" in names["--reasoning-parser"]["added"]
    assert "nemotron_v3" not in names["--reasoning-parser"]["removed"]
    assert "aiter_triton_mxfp4_mxfp4" in names["--moe-backend"]["added"]
    text = report_032_033.markdown()
    assert "the registry passes `nemotron_v3`: still there" in text


def test_the_moved_parser_module_has_a_fallback_and_the_shim_points_at_the_launcher(
    report_032_033,
):
    states = {(s.use.module, s.use.where.split(":")[0]): s for s in report_032_033.imports}
    moved = states[("vllm.entrypoints.launchers.cli_args", "helpers/config/flagcheck.py")]
    assert moved.problems and moved.use.guarded and not moved.breaks
    assert "vllm.entrypoints.common.cli_args" in moved.problems[0]
    assert not states[("vllm.entrypoints.common.cli_args", "helpers/config/flagcheck.py")].problems
    launcher = states[("vllm.entrypoints.launchers.api_server.entry", "helpers/server/command.py")]
    assert launcher.problems == [] and launcher.notes == []
    shim = states[("vllm.entrypoints.openai.api_server", "helpers/server/command.py")]
    assert shim.use.guarded and "deprecation shim in 0.33.0 (in 0.32.0 too)" in shim.notes[0]
    assert "vllm.entrypoints.launchers.api_server.entry" in shim.notes[1]


def test_the_command_prints_markdown_and_exits_0_when_nothing_breaks(capsys):
    assert drift.main([NEW, "--tables"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# vLLM 0.32.0 → 0.33.0")
    assert "Log wordings: not checked" in out and "| `--moe-backend` |" in out


def test_bad_input_exits_2_with_one_sentence(capsys):
    assert drift.main(["0.0.1", "--tables"]) == 2
    assert "no committed table for vLLM 0.0.1" in capsys.readouterr().err
    assert drift.main(["not-a-release"]) == 2
    assert "neither a vLLM version" in capsys.readouterr().err


# ------------------------------------------------------------- a synthetic release


def test_a_synthetic_release_that_breaks_the_registry_is_reported(tmp_path):
    """A made-up release that drops a choice the registry passes, a reasoning parser, renames
    an option and loses a module the helpers import: each is named, and it counts as
    breaking."""
    new, old = _tables(tmp_path, new=OLD)
    t = copy.deepcopy(new.table)
    t["options"]["--moe-backend"]["choices"].remove("humming")
    t["registries"]["--reasoning-parser"].remove("nemotron_v3")
    t["options"]["--max-num-sequences"] = t["options"].pop("--max-num-seqs")
    t["modules"].remove("vllm.benchmarks.serve")
    made_up = drift.Release("9.9.0", t, None, "synthetic")
    r = drift.check(made_up, old)
    uses = {u.flag: u for u in r.flag_uses}
    assert uses["--moe-backend"].breaks and "--moe-backend humming" in uses["--moe-backend"].change
    assert "has no such name" in uses["--reasoning-parser"].change
    assert uses["--max-num-seqs"].breaks
    assert (
        uses["--max-num-seqs"].change == "gone from 9.9.0 (the same setting is --max-num-sequences)"
    )
    assert ("--max-num-seqs", ["--max-num-sequences"]) in r.options["renamed"]
    assert len(r.command_failures) > 50
    assert any(
        "helpers/bench/point.py" in b and "no module vllm.benchmarks.serve" in b for b in r.breaking
    )
    text = r.markdown()
    assert "**breaks**" in text and "| `--max-num-seqs` |" in text


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "vllm" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_reworded_log_line_turns_its_diagnosis_silent(tmp_path):
    old = _tree(
        tmp_path / "old",
        {
            "config/compilation.py": 'raise ValueError(\n    f"max_num_seqs ({n}) exceeds "\n'
            '    f"available Mamba cache blocks ({m})")\n',
            "v1/metrics/loggers.py": 'parts = ["Avg prompt throughput: %.1f tokens/s", '
            '"Avg generation throughput: %.1f tokens/s", "Running: %d reqs"]\n',
        },
    )
    new = _tree(
        tmp_path / "new",
        {
            "config/compilation.py": 'raise ValueError(f"{n} sequences do not fit {m} Mamba blocks")\n',
            "v1/metrics/loggers.py": (old / "vllm/v1/metrics/loggers.py").read_text(),
        },
    )
    states = drift.wording_states(old, new)
    by = {(s.kind, s.name): s for s in states}
    mamba = by[("diagnosis", "mamba_cache_blocks")]
    assert mamba.old is True and mamba.new is False and mamba.silent  # split literal joined by ast
    assert by[("reading", "STATS_LINE")].old and by[("reading", "STATS_LINE")].new
    assert by[("diagnosis", "gated_repo")].old is False  # the hub's wording: in neither
    silent = drift.diagnoses_gone_silent(states)
    assert any(
        line.startswith('mamba_cache_blocks: 1 of its 1 wordings no longer occur ("max_num_seqs (…')
        and line.endswith("the diagnosis goes silent)")
        for line in silent
    )


def test_literal_pieces_skip_numbers_and_regex_syntax():
    assert drift.literal_alternatives(r"max_num_seqs \((\d+)\) exceeds available Mamba cache") == [
        ["max_num_seqs (", ") exceeds available Mamba cache"]
    ]
    assert drift.literal_alternatives(r"Running: 0 reqs,") == [["Running: "]]
    assert drift.literal_alternatives(r"Dynamo bytecode|Compiling a graph for") == [
        ["Dynamo bytecode"],
        ["Compiling a graph for"],
    ]
    assert drift.literal_alternatives(r"\d+ \w+") == []


# ------------------------------------------------------------- the generator, per layout


LAYOUTS = {
    "0.28.0": "vllm.entrypoints.openai.cli_args",
    "0.32.0": "vllm.entrypoints.launchers.cli_args",
    "0.33.0": "vllm.entrypoints.common.cli_args",
}


@pytest.mark.parametrize("version", sorted(LAYOUTS))
def test_the_parser_is_found_where_each_release_defines_it(tmp_path, version):
    module = LAYOUTS[version]
    rel = module.removeprefix("vllm.").replace(".", "/") + ".py"
    _tree(
        tmp_path,
        {
            rel: "def make_arg_parser(parser):\n    return parser\n",
            "entrypoints/cli/serve.py": f"from {module} import (\n    make_arg_parser,\n)\n",
            "entrypoints/launchers/run_batch.py": "def make_arg_parser(parser):\n    pass\n",
        },
    )
    assert flagtables.find_parser_module(tmp_path) == module
    # the committed table of that release says it was read there
    assert flagtable.load_table(version)["generated"]["how"].startswith(module + ".make_arg_parser")


def test_a_parser_in_a_new_place_is_followed_and_none_is_an_error(tmp_path):
    _tree(
        tmp_path,
        {
            "entrypoints/future/args.py": "def make_arg_parser(parser):\n    return parser\n",
            "entrypoints/cli/serve.py": "from vllm.entrypoints.future.args import make_arg_parser\n",
        },
    )
    assert flagtables.find_parser_module(tmp_path) == "vllm.entrypoints.future.args"
    (tmp_path / "vllm/entrypoints/cli/serve.py").unlink()
    assert flagtables.find_parser_module(tmp_path) == "vllm.entrypoints.future.args"
    (tmp_path / "vllm/entrypoints/future/args.py").write_text("x = 1\n")
    with pytest.raises(FlagError, match="defines make_arg_parser"):
        flagtables.find_parser_module(tmp_path)


_FAKE = {
    "__init__.py": "__version__ = '{version}'\n",
    "utils/__init__.py": "",
    "utils/argparse_utils.py": "import argparse\nclass FlexibleArgumentParser(argparse.ArgumentParser):\n    pass\n",
    "entrypoints/__init__.py": "",
    "entrypoints/cli/__init__.py": "",
    "entrypoints/cli/serve.py": "from vllm.entrypoints.later.cli_args import make_arg_parser\n",
    "entrypoints/later/__init__.py": "",
    "entrypoints/later/cli_args.py": (
        "def make_arg_parser(parser):\n"
        "    parser.add_argument('--moe-backend', choices=['triton', 'marlin'])\n"
        "    a = parser.add_argument('--disable-prefix-caching', action='store_true')\n"
        "    parser._option_string_actions['--no-enable-prefix-caching'] = a  # hidden alias\n"
        "    parser.add_argument('--reasoning-parser')\n"
        "    return parser\n"
        "if __name__ == '__main__':\n    pass\n"
    ),
    "entrypoints/openai/__init__.py": "",
    "entrypoints/openai/api_server.py": (
        "import warnings\nwarnings.warn('`vllm.entrypoints.openai.api_server` is deprecated: "
        "use `vllm.entrypoints.later`', DeprecationWarning)\n"
    ),
    "config/__init__.py": (
        "import dataclasses, typing\n@dataclasses.dataclass\nclass SpeculativeConfig:\n"
        "    method: typing.Literal['mtp', 'dspark'] | None = None\n"
        "    num_speculative_tokens: int = 1\n"
    ),
    "reasoning/__init__.py": (
        "class ReasoningParserManager:\n    @classmethod\n    def list_registered(cls):\n"
        "        return ['nemotron_v3', 'qwen3']\n"
    ),
}


def _wheel(folder: Path, version: str) -> Path:
    path = folder / f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in _FAKE.items():
            z.writestr(f"vllm/{rel}", text.replace("{version}", version))
    return path


def test_a_table_is_generated_from_a_synthetic_wheel(tmp_path):
    out = flagtables.generate(_wheel(tmp_path, "9.9.0"), out=tmp_path / "t.json")
    t = json.loads(out.read_text())
    assert t["vllm_version"] == t["imported_version"] == "9.9.0"
    assert t["generated"]["how"].startswith("vllm.entrypoints.later.cli_args.make_arg_parser")
    assert t["options"]["--moe-backend"]["choices"] == ["marlin", "triton"]
    assert t["options"]["--no-enable-prefix-caching"].get("hidden") is True
    assert "hidden" not in t["options"]["--disable-prefix-caching"]
    assert t["speculative_methods"] == ["mtp", "dspark"]
    assert t["registries"] == {"--reasoning-parser": ["nemotron_v3", "qwen3"]}  # no tool parsers
    assert "vllm.entrypoints.later.cli_args" in t["modules"]
    assert "deprecated" in t["deprecated_modules"]["vllm.entrypoints.openai.api_server"]
    assert t["runnable_modules"] == ["vllm.entrypoints.later.cli_args"]
    problems = flagtable.check_argv(["--reasoning-parser", "nemotron_v4"], "9.9.0", table=t)
    assert problems == [
        "--reasoning-parser nemotron_v4: vLLM 9.9.0 has no such name (it has nemotron_v3, qwen3)"
    ]


def test_drift_between_two_synthetic_wheels_exits_1_naming_what_broke(tmp_path, capsys):
    old, new = _wheel(tmp_path, "9.8.0"), _wheel(tmp_path, "9.9.0")
    assert drift.main([str(new), "--against", str(old)]) == 1
    out = capsys.readouterr().out
    assert "# vLLM 9.8.0 → 9.9.0" in out
    assert "--max-num-seqs does not exist in vLLM 9.9.0" in out  # not in the made-up parser
    assert "**silent on 9.9.0**" not in out  # the same wordings on both sides


@pytest.mark.parametrize(
    "page,old,new,command",
    [
        ("vllm-0.32-to-0.33.md", "0.32.0", "0.33.0", "python -m tools.drift 0.33.0"),
        ("vllm-0.32-to-0.34.md", "0.32.0", "0.34.0", "python -m tools.drift 0.34.0"),
        ("vllm-0.33-to-0.34.md", "0.33.0", "0.34.0", "python -m tools.drift 0.33.0 0.34.0"),
    ],
)
def test_the_committed_results_page_is_the_drift_checks_output(tmp_path, page, old, new, command):
    """Each docs/results/vllm-A-to-B.md is its `python -m tools.drift` command's output: its
    flag, option and name sections and its behaviour sections (6-9) are what the committed
    flag and behaviour tables give today (the wordings section needs the wheels' source and
    is not rebuilt here); a page's hand-written section (drift.BY_HAND) follows them."""
    from helpers.paths import REPO_ROOT

    text = (REPO_ROOT / "docs/results" / page).read_text()
    assert f"Generated by `{command}`" in text
    report = drift.check(*_tables(tmp_path, new=new, old=old)).markdown()
    at = text.find("\n" + drift.BY_HAND)
    generated = text if at < 0 else text[:at]

    def middle(md):
        return md[md.index("## 1. ") : md.index("## 4. ")]

    assert middle(generated) == middle(report)
    assert generated[generated.index("## 6. ") :] == report[report.index("## 6. ") :]
    if old == "0.32.0":  # the CPU build's memory-reservation wording left in 0.33.0
        assert f"**silent on {new}**: diagnosis `memory_in_use`" in text


def test_the_page_keeps_its_hand_written_section(tmp_path):
    """--out rewrites the generated sections and keeps what a maintainer wrote under BY_HAND."""
    page = tmp_path / "page.md"
    assert drift.kept_by_hand(page) == ""  # no page yet
    page.write_text(f"# old generated text\n\n{drift.BY_HAND}\n\nread in the wheel\n")
    assert drift.kept_by_hand(page) == f"\n{drift.BY_HAND}\n\nread in the wheel\n"
    page.write_text("# generated only\n")
    assert drift.kept_by_hand(page) == ""
