"""What the results page each target notebook links quotes from docs/results
(``docs/results/measured.md``, one section per target)."""

from __future__ import annotations

import json

import pytest

from helpers.config.run import Run
from helpers.paths import REPO_ROOT
from tools import results_pages as results

NB = REPO_ROOT / "notebooks"


def _notebook(name: str) -> str:
    return "".join(
        "".join(c["source"]) for c in json.loads((NB / f"{name}.ipynb").read_text())["cells"]
    )


def _text(target: str) -> str:
    """The target's section of docs/results/measured.md ("" when it has none)."""
    page = (REPO_ROOT / "docs" / "results" / "measured.md").read_text()
    sections = {part.split("\n", 1)[0]: part for part in page.split("\n## ")[1:]}
    return sections.get(target, "")


def test_the_measured_reference_is_only_in_the_section_of_its_target():
    assert "Measured reference" in _text("h200")
    assert "../docs/results/measured.md#h200" in _notebook("h200")  # one line links it
    assert "Measured best per workload" in _text("h100")  # the H200 tuning data applies there
    # h100's own sweep (vLLM 0.34.0 beside its 0.32.0 anchor) is its reference, linked to the
    # releases page since no h100.md exists
    assert "Measured reference** ([docs/results/h100/releases.md]" in _text("h100")
    for other in ("h100-bf16", "h100-baseten-throughput", "h100x8-bf16", "b200"):
        assert "Measured reference" not in _text(other), other
    assert "measured.md" not in _notebook("quickstart_cpu_standin")


def test_the_reference_paragraph_is_rendered_from_the_summary_json():
    text = _text("h200")
    for variant in ("nvfp4", "bf16"):
        summary = json.loads(
            (REPO_ROOT / "docs" / "results" / "h200" / f"summary-{variant}.json").read_text()
        )
        tok = " / ".join(
            f"{r['output_tok_s']:,.0f}"
            for r in sorted(summary["table"], key=lambda r: r["concurrency"])
        )
        assert tok in text
        assert f"vLLM {summary['versions']['vllm']}" in text
        for a in summary["adaptations"]:  # every flag the run adapted is listed
            assert f"`{a['flag']} {a['value']}`" in text
    assert "the weightless architecture on" not in results.measured_reference("h100")  # no summary


def test_the_notebooks_own_gpu_sweeps_are_in_the_reference_paragraph():
    """The h200 notebook's sweeps executed on the H200 (docs/results/h200/vllm-<release>/
    <variant>-<kernel>/) are quoted in the h200 notebook, default release first."""
    runs = results.notebook_runs("h200")
    got = [(r["release"], r["variant"], r["moe_backend"]) for r in runs]
    assert got[0][0] == "0.32.0" and ("0.28.0", "nvfp4", "humming") in got
    assert ("0.32.0", "bf16", "triton") in got and ("0.32.0", "nvfp4", "marlin") in got
    # failed / stopped attempts and the long-context data are not sweeps of the notebook
    assert not any("jit" in r["folder"] or "failed" in r["folder"] for r in runs)
    assert all(r["moe_backend"] != "context" for r in runs)
    text = _text("h200")
    for r in runs:
        tok = " / ".join(f"{v:,.0f}" for v in r["points"]["output_throughput"])
        assert tok in text and r["folder"] in text, r["folder"]
    assert list(runs[0]["points"]["concurrency"]) == [1, 16, 64, 256]
    # a newer release's same-session anchor is a run of its own release, routing read from its log
    h100 = [
        (r["release"], r["folder"].split("/")[-2], r["uniform"])
        for r in results.notebook_runs("h100")
    ]
    assert h100 == [("0.32.0", "anchor-vllm-0.32.0", True), ("0.34.0", "vllm-0.34.0", True)]
    assert ("0.32.0", "anchor-vllm-0.32.0", False) in [
        (r["release"], r["folder"].split("/")[-2], r["uniform"]) for r in runs
    ]  # the H200's 2026-12-04 anchor ran the dummy weights' own routing


def test_notebook_runs_read_only_release_variant_kernel_folders(tmp_path):
    src = REPO_ROOT / "docs/results/h200/vllm-0.28.0/nvfp4-humming/h200-nvfp4-none-c1.json"
    for sub in ("vllm-0.30.1/bf16-triton", "vllm-0.32.0/nvfp4-marlin", "vllm-0.32.0/long-context",
                "vllm-0.32.0/bf16-jit-stopped", "other/nvfp4-marlin"):  # fmt: skip
        (tmp_path / "t" / sub).mkdir(parents=True)
        (tmp_path / "t" / sub / src.name).write_bytes(src.read_bytes())
    runs = results.notebook_runs("t", tmp_path)
    assert [(r["release"], r["variant"], r["moe_backend"]) for r in runs] == [
        ("0.32.0", "nvfp4", "marlin"),  # the registry's default release first
        ("0.30.1", "bf16", "triton"),
    ]
    assert runs[0]["date"] == "2026-11-30" and runs[0]["input_len"] == 1024
    text = results.measured_reference("t", tmp_path)
    assert (
        text.startswith("**Measured reference**")
        and "vLLM 0.30.1, BF16, triton MoE, 2026-11-30: 250" in text
    )


H200 = REPO_ROOT / "docs" / "results" / "h200"


def _copy_sweeps(dest, folders):
    """Copies of committed h200 sweep folders (points and server logs) under ``dest/h200/``,
    each at the path given: {source folder under docs/results/h200: path under dest/h200}."""
    import shutil

    for src, to in folders.items():
        shutil.copytree(H200 / src, dest / "h200" / to)


def test_the_releases_page_is_the_one_the_committed_sweeps_give():
    page = (H200 / "releases.md").read_text()
    assert page == results.release_markdown("h200"), (
        "docs/results/h200/releases.md is stale: python -m tools.results_pages releases h200 --write"
    )
    runs = results.sweep_runs("h200")
    assert {"0.28.0", "0.32.0"} <= set(runs["release"])
    assert set(runs["concurrency"]) == {1, 16, 64, 256}
    # every committed sweep of the notebook is a source, the 0.26.0 script runs are not
    assert "vllm-0.32.0/nvfp4-marlin/`" in page and "/nvfp4/`" not in page
    # 0.33.0 was measured beside a 0.32.0 anchor on one machine: that pair decides, not the
    # medians of other sessions
    within = page.split("## Within one session")[1].split("## Across")[0]
    assert (
        "| NVFP4, humming | vllm-0.33.0 (2026-12-04" in within and "| 0.33.0 / 0.32.0 |" in within
    )
    across = page.split("## Across sessions")[1]
    assert "| NVFP4, humming | 0.33.0 | as loaded | measured beside 0.32.0 in one session" in across


def test_the_h100_releases_page_compares_uniform_routing_within_one_session():
    """The H100's pair (0.34.0, then its 0.32.0 anchor, both with vLLM's uniform routing
    simulation in their server logs) is one session's pair at uniform routing, and its page is
    the one the folders give."""
    page = (REPO_ROOT / "docs" / "results" / "h100" / "releases.md").read_text()
    assert page == results.release_markdown("h100"), (
        "docs/results/h100/releases.md is stale: python -m tools.results_pages releases h100 --write"
    )
    runs = results.sweep_runs("h100")
    assert set(runs["routing"]) == {"uniform"} and set(runs["release"]) == {"0.32.0", "0.34.0"}
    pairs = results.same_session_pairs(runs)
    assert sorted((n.iloc[0]["speculative"], n.iloc[0]["release"], o.iloc[0]["release"])
                  for n, o in pairs) == [("mtp", "0.34.0", "0.32.0"), ("none", "0.34.0", "0.32.0")]  # fmt: skip
    within = page.split("## Within one session")[1].split("## At equal")[0].splitlines()
    recipe, mtp = (line for line in within if "| 0.34.0 / 0.32.0 | uniform |" in line)
    assert recipe.startswith("| NVFP4, humming |") and recipe.count("tie (within noise)") == 4
    # the drafting pair: MTP with synthetic acceptance, which both releases accepted alike
    assert mtp.startswith("| NVFP4 + MTP K=3 at L = 2.77 (synthetic), humming |")
    cells = mtp.split(" | ")[-4:]
    assert cells[0].startswith("1.07x faster") and cells[3].startswith("1.12x faster")
    assert "tie (within noise)" in cells[1] and "tie (within noise)" in cells[2]
    drafted = runs[runs["speculative"] == "mtp"]
    assert set(drafted["drafting"]) == {"MTP K=3 at L = 2.77 (synthetic)"}
    assert drafted["spec_decode_acceptance_length"].between(2.7, 2.8).all()
    assert set(runs[runs["speculative"] == "none"]["drafting"]) == {""}
    assert runs[runs["speculative"] == "none"]["spec_decode_acceptance_length"].isna().all()
    assert "Measured: 2.76-2.78 tokens per target step" in page


def test_only_drafting_sweeps_beside_a_release_run_are_read(tmp_path):
    """A drafting sweep (``-mtp-c<N>.json``) counts as a release's when it lies in an ``mtp/``
    folder beside the run it pairs with; an ``mtp/`` folder of a drafting session is not a
    release sweep (that session's page reads it), and a drafting sweep whose server log lacks
    its ``--speculative-config`` is shown as such, without a measured range when its points
    have no acceptance length."""
    import json
    import shutil

    src = REPO_ROOT / "docs" / "results" / "h100" / "vllm-0.34.0" / "mtp" / "nvfp4-humming"
    h100 = tmp_path / "h100"
    shutil.copytree(src, h100 / "vllm-0.34.0" / "mtp" / "nvfp4-humming")
    shutil.copytree(src, h100 / "drafting-2026-12-09" / "mtp" / "k3")  # a session's own folder
    shutil.copytree(src, h100 / "vllm-0.34.0" / "nvfp4-humming")  # not in mtp/: not read
    runs = results.sweep_runs("h100", tmp_path)
    assert set(runs["folder"]) == {"docs/results/h100/vllm-0.34.0/mtp/nvfp4-humming"}
    assert set(runs["speculative"]) == {"mtp"} and list(runs["concurrency"]) == [1, 16, 64, 256]
    assert "Measured: 2.76-2.78 tokens per target step" in results.release_markdown(
        "h100", tmp_path
    )
    folder = h100 / "vllm-0.34.0" / "mtp" / "nvfp4-humming"
    log = folder / "server.log"
    log.write_text(log.read_text().replace("--speculative-config", "--no-such-flag"))
    for p in folder.glob("*.json"):
        point = json.loads(p.read_text())
        point.pop("spec_decode_acceptance_length")
        p.write_text(json.dumps(point))
    page = results.release_markdown("h100", tmp_path)
    assert "| NVFP4 + MTP (config not logged), humming | 0.34.0 |" in page
    assert "tokens per target step" not in page and "nan" not in page


def test_releases_across_sessions_win_only_beyond_the_spread_between_sessions(tmp_path):
    """0.28.0 against the default 0.32.0, NVFP4 with Humming, from two 0.32.0 sessions
    (2026-11-30 and 2026-12-01) and one 0.28.0 session: at c = 1 the 0.32.0 runs agree within
    3 % and 0.28.0 is 16 % faster, a win; at c = 256 0.28.0 is 17 % faster than the 0.32.0 median,
    but the two 0.32.0 runs differ by 25 %, so it is a tie."""
    _copy_sweeps(
        tmp_path,
        {
            "vllm-0.28.0/nvfp4-humming": "vllm-0.28.0/nvfp4-humming",
            "vllm-0.32.0/nvfp4-humming": "vllm-0.32.0/nvfp4-humming",
            "notebooks-2026-12-01/h200-nvfp4/h200-nvfp4-none": "s/h200-nvfp4/h200-nvfp4-none",
            "notebooks-2026-12-01/h200-nvfp4/logs": "s/h200-nvfp4/logs",
        },
    )
    page = results.release_markdown("h200", tmp_path)
    across = page.split("## Across sessions")[1].splitlines()
    row = next(
        line for line in across if line.startswith("| NVFP4, humming | 0.28.0 | as loaded |")
    )
    cells = row.split(" | ")
    assert cells[3].startswith("1.16x faster") and "tie (within noise) (noise 25%)" in cells[6]
    median = next(
        line for line in page.splitlines() if line.startswith("| NVFP4, humming | 0.32.0 (default)")
    )
    assert "2026-11-30, 2026-12-01" in median and "5,712 (5,007-6,417)" in median
    assert "No two releases were measured in one session yet." in page


def test_two_releases_in_one_session_are_compared_point_by_point(tmp_path):
    """BF16 with Triton on 0.32.0 (12:14 UTC) and 0.28.0 (12:35 UTC), put in one session folder:
    paired, and every ratio within 5 % is a tie; in two session folders they are not paired."""
    _copy_sweeps(
        tmp_path,
        {"vllm-0.32.0/bf16-triton": "s/a/bf16-x", "vllm-0.28.0/bf16-triton": "s/b/bf16-x"},
    )
    runs = results.sweep_runs("h200", tmp_path)
    assert sorted(set(runs["release"])) == ["0.28.0", "0.32.0"]  # from the server logs
    ((new, old),) = results.same_session_pairs(runs)
    assert (new.iloc[0]["release"], old.iloc[0]["release"]) == ("0.32.0", "0.28.0")
    page = results.release_markdown("h200", tmp_path)
    row = next(line for line in page.splitlines() if "| 0.32.0 / 0.28.0 |" in line)
    assert row.count("tie (within noise)") == 4 and "0.96x" in row
    (tmp_path / "h200" / "t").mkdir()
    (tmp_path / "h200" / "s" / "b").rename(tmp_path / "h200" / "t" / "b")
    assert results.same_session_pairs(results.sweep_runs("h200", tmp_path)) == []


def test_a_sweep_whose_server_log_contradicts_its_folder_name_is_refused(tmp_path):
    _copy_sweeps(tmp_path, {"vllm-0.28.0/nvfp4-humming": "vllm-0.32.0/nvfp4-humming"})
    with pytest.raises(ValueError, match="says vLLM 0.28.0 with --moe-backend humming.*rename"):
        results.sweep_runs("h200", tmp_path)
    (tmp_path / "h200" / "vllm-0.32.0" / "nvfp4-humming" / "server.log").unlink()
    (tmp_path / "h200" / "vllm-0.32.0" / "nvfp4-humming").rename(tmp_path / "h200" / "x")
    with pytest.raises(ValueError, match="no server log names its vLLM release"):
        results.sweep_runs("h200", tmp_path)


def test_gpu_notebook_parameters_for_the_gpu_path():
    """The parameters the H200 runs set exist with safe defaults."""
    import papermill

    params = papermill.inspect_notebook(str(NB / "h200.ipynb"))
    for name, default in (
        ("stand_in", "False"),
        ("weightless", "False"),
        ("variant", "None"),
        ("vllm_version", "None"),
        ("install_vllm", "False"),
        ("moe_backend", "None"),
        ("extra_args", "None"),
        ("server_url", "None"),
        ("max_tokens", "None"),
        ("temperature", "None"),
        ("top_p", "None"),
    ):
        assert params[name]["default"] == default, name
    assert "0.32.0" in params["vllm_version"]["help"] and "0.28.0" in params["vllm_version"]["help"]


def test_the_results_table_shows_the_default_columns_rounded_and_says_what_the_standin_cannot_measure():
    import pandas as pd

    from helpers.bench.results import NOT_MEASURED_ON_STANDIN, results_table

    df = pd.DataFrame(
        {
            "concurrency": [1, 2],
            "completed": [16, 16],
            "failed": [0, 0],
            "output_throughput": [387.821898, 676.02811],
            "tokens_per_s_per_user": [512.3456, 300.0],
            "e2e_tokens_per_s_per_user": [388.5766, 338.7765],
            "median_ttft_ms": [66.41, 13.34],
            "median_tpot_ms": [1.9, 2.8],
            "label": ["x", "x"],
        }
    )
    gpu = results_table(df)
    assert list(gpu.columns) == [
        "concurrency", "completed", "failed", "output_throughput", "tokens_per_s_per_user",
        "median_ttft_ms", "median_tpot_ms",
    ]  # fmt: skip
    assert gpu["output_throughput"].tolist() == [387.8, 676.0]
    cpu = results_table(df, run=Run("stand_in"))
    assert "e2e_tokens_per_s_per_user" in cpu.columns and "tokens_per_s_per_user" not in cpu.columns
    assert set(cpu["median_tpot_ms"]) == {NOT_MEASURED_ON_STANDIN}
    assert df["output_throughput"].iloc[0] == 387.821898  # the DataFrame is not changed
