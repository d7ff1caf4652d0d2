"""The LoRA-overhead session (tools/device/lora_overhead_h200.py): two co-tenant waves of two
with drafting_h200's co-tenancy and uniform routing, every command checked against vLLM 0.32.0's
flag table, the points in their order with 3 runs each, what a deadline skips (a fake clock),
the memory line read from vLLM's own log, the shell entry, and the page the records make
(tools/lora_pages.py) on a recorded stand-in rehearsal."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.adapters.check import check_adapter
from lab.adapters.synthetic import random_adapter
from lab.bench.stats import compare, spread
from tests.support import TESTS

REPO_ROOT = TESTS.parent
#: The stand-in rehearsal's records (`--stand-in --out ...`, 2026-12-05), machine paths replaced.
REHEARSAL = TESTS / "data" / "lora_overhead" / "standin"


def _plan():
    spec = importlib.util.spec_from_file_location(
        "lora_overhead_h200", REPO_ROOT / "tools" / "device" / "lora_overhead_h200.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def plan():
    return _plan()


@pytest.fixture(scope="module")
def dry_run(plan):
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert plan.main(["--dry-run"]) == 0
    return buf.getvalue()


def _blocks(out: str) -> dict[str, str]:
    return {b.split(":")[0]: b.split("wave ")[0] for b in out.split("server ")[1:]}


def test_the_dry_run_prints_two_co_tenant_waves_each_command_checked(plan, dry_run):
    assert "wave 1: base, base-marlin (started together" in dry_run
    assert "wave 2: lora-r8, lora-r32 (started together" in dry_run
    blocks = _blocks(dry_run)
    assert set(blocks) == {"base", "base-marlin", "lora-r8", "lora-r32"}
    for name, block in blocks.items():  # drafting_h200's co-tenancy and uniform routing on each
        assert "--gpu-memory-utilization 0.2" in block, name
        assert f"--kv-cache-memory-bytes {4 * 1024**3}" in block, name
        assert "export TORCHINDUCTOR_COMPILE_THREADS=2" in block, name
        assert "export VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random" in block, name
    for base in ("base", "base-marlin"):
        assert "--enable-lora" not in blocks[base] and "--lora-modules" not in blocks[base]
    # LoRA servers run the Marlin MoE kernel (Humming takes no LoRA); base-marlin is their anchor
    assert (
        "--moe-backend humming" in blocks["base"]
        and "--moe-backend marlin" in blocks["base-marlin"]
    )
    for rank in plan.RANKS:
        block = blocks[f"lora-r{rank}"]
        assert f"--max-lora-rank {rank}" in block and "--max-loras 4" in block
        assert "--moe-backend marlin" in block and "--moe-backend humming" not in block
        assert all(f"{a}=" in block and f"r{rank}/{a}" in block for a in plan.adapter_names())
        assert "LoRA slots (--max-loras 4" in block
    # the co-tenancy is drafting_h200's own (imported, not copied)
    assert plan.co.CO_TENANT == {
        "--gpu-memory-utilization": "0.2",
        "--kv-cache-memory-bytes": str(4 * 1024**3),
    }
    assert plan.co.start_co_tenants.__module__ == "drafting_h200"


def test_the_dry_run_lists_every_point_with_3_runs_and_an_estimate_within_a_whole_session(
    plan, dry_run
):
    """24 points of 3 runs; the estimate, from the H100 session's own times (2026-12-06), within
    the 1,300 s that run needed, well inside the ~1,620 s a session leaves the job when its
    machine started at once (the last points are cut otherwise: point_order puts them last)."""
    points = re.findall(r"point \d+: (\S+), (\d) adapters active, c=(\d+), (\d) runs", dry_run)
    assert len(points) == 2 * 3 + 2 * 3 * 3  # 24 points
    assert {int(r) for *_, r in points} == {3}
    assert (
        "lora-r32, 4 adapters active, c=64, 3 runs x 128 requests, ~40 s, model=a1 "
        "--lora-modules a1 a2 a3 a4 --lora-assignment round-robin" in dry_run
    )
    assert "(1024 in / 256 out)" in dry_run
    total = re.search(r"time: wave 1 ~270 s to start \+ 18 runs .*; wave 2 ~170 s to start \+ "
                      r"54 runs .*; ~([\d,]+) s in all", dry_run)  # fmt: skip
    assert total and int(total.group(1).replace(",", "")) <= 1300  # the H100 run took 1,252 s


def test_wave_two_measures_four_active_then_none_then_one_alternating_the_ranks(plan):
    order = plan.point_order(("lora-r8", "lora-r32"), plan.DEVICE)
    assert [p["active"] for p in order] == [4] * 6 + [0] * 6 + [1] * 6
    assert [p["server"] for p in order[:4]] == ["lora-r8", "lora-r32"] * 2
    assert [p["concurrency"] for p in order[:6]] == [1, 1, 16, 16, 64, 64]
    assert [p["num_prompts"] for p in order[:6:2]] == [8, 32, 128]
    first = plan.point_order(("base", "base-marlin"), plan.DEVICE)
    assert [(p["server"], p["concurrency"]) for p in first[:2]] == [
        ("base-marlin", 1),
        ("base", 1),
    ]
    assert {p["active"] for p in first} == {0} and all(p["model"] is None for p in first)


def test_a_point_is_three_fresh_seeded_runs_with_its_model_and_vllms_lora_flags(
    plan, monkeypatch, tmp_path
):
    """repeat_point takes the adapter's name and the bench flags; vLLM 0.32.0's bench parser
    (the one run_point parses with) has --lora-modules and --lora-assignment round-robin."""
    import vllm.benchmarks.serve as vbs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    import lab.bench.repeats as repeats

    seen = []
    monkeypatch.setattr(repeats, "repeat_point", lambda *a, **k: seen.append((a, k)))
    point = plan.point_order(("lora-r8", "lora-r32"), plan.DEVICE)[0]
    plan._measure("srv", point, tmp_path, plan.DEVICE)
    (args, kw) = seen[0]
    assert args == ("srv", "a1") and kw["repeats"] == 3 and kw["concurrency"] == 1
    assert (kw["input_len"], kw["output_len"], kw["num_prompts"]) == (1024, 256, 8)
    assert kw["seed_label"] == "lora-overhead-active4" and kw["out_dir"] == tmp_path
    parser = FlexibleArgumentParser()
    vbs.add_cli_args(parser)
    parsed = parser.parse_args(["--model", "a1", *kw["extra_args"]])
    assert parsed.lora_modules == ["a1", "a2", "a3", "a4"]
    assert parsed.lora_assignment == "round-robin"


class _Server:
    def __init__(self, name):
        self.name, self.stopped, self.log_path = name, False, None

    def stop(self):
        self.stopped = True


def _fake_waves(plan, shape):
    """:func:`plan`'s waves without building a model: a config is only its command."""

    class Cfg:
        def __init__(self, name):
            self.name = name

        def shell_command(self):
            return f"vllm serve {self.name}"

    return [
        {
            "wave": i,
            "servers": [
                {"server": n, "command": f"vllm serve {n}", "config": Cfg(n)} for n in names
            ],
            "points": plan.point_order(names, shape),
            "estimate_s": 0,
        }
        for i, names in enumerate(plan.WAVES, 1)
    ]


def test_a_deadline_skips_what_cannot_fit_and_the_summary_follows_every_point(plan, tmp_path):
    """Fake clock: each point takes its estimate. The deadline leaves wave 2 its start and four
    points: the rest is recorded as skipped, never started; summary.json is on disk after each
    point, and every server is stopped. The shape's LoRA wave starts slower than the plain one
    (the estimate before the H100 session measured it), so the gate is LoRA's start."""
    shape = _gated(plan)
    now = [0.0]
    started, measured, servers = [], [], {}

    def start(configs, deadline, record):
        started.append(list(configs))
        now[0] += shape.wave_start_s
        for name in configs:
            record[name]["ready_s"] = shape.wave_start_s
            servers[name] = _Server(name)
        return {n: servers[n] for n in configs}

    def measure(srv, point, folder, shape_):
        on_disk = json.loads((tmp_path / "summary.json").read_text())
        measured.append((point["server"], point["active"], point["concurrency"],
                         sum("status" in p for p in on_disk["points"])))  # fmt: skip
        now[0] += point["estimate_s"]

    waves = _fake_waves(plan, shape)
    wave1 = shape.wave_start_s + sum(p["estimate_s"] for p in waves[0]["points"])
    four = sum(p["estimate_s"] for p in waves[1]["points"][:4])
    deadline = wave1 + shape.wave_start_s + four + plan.STOP_S + 1
    assert shape.start_s(["lora-r8", "lora-r32"]) > shape.wave_start_s  # the gate: LoRA's start
    summary = plan.run(waves, tmp_path, deadline, shape, clock=lambda: now[0], start=start,
                       measure=measure)  # fmt: skip
    assert started == [["base", "base-marlin"], ["lora-r8", "lora-r32"]]
    assert len(measured) == 6 + 4
    # the summary on disk already held every earlier point's status when a point began
    assert [m[3] for m in measured] == list(range(10))
    statuses = [p["status"] for p in summary["points"]]
    assert statuses[:10] == ["measured"] * 10
    assert all(s.startswith("skipped: ") and "s left" in s for s in statuses[10:])
    assert len(statuses) == 24
    assert all(srv.stopped for srv in servers.values())
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert [p["status"] for p in on_disk["points"]] == statuses
    assert on_disk["servers"]["lora-r8"]["ready_s"] == shape.wave_start_s
    assert (tmp_path / "lora-r32" / "command.sh").read_text() == "vllm serve lora-r32\n"


def _gated(plan):
    """The device shape as estimated before its H100 session: a LoRA wave's start (330 s)
    above a plain one's (250 s), runs of 12.5 / 8.6 / 13.5 s, LoRA 1.3x."""
    return plan.DEVICE._replace(wave_start_s=250, run_s={1: 12.5, 16: 8.6, 64: 13.5},
                                lora_factor=1.3, lora_start_s=330)  # fmt: skip


def test_a_wave_that_cannot_fit_is_not_started_and_a_failed_server_skips_its_points(plan, tmp_path):
    shape = _gated(plan)
    now = [0.0]
    started = []

    def start(configs, deadline, record):
        started.append(list(configs))
        record["base"]["error"] = "start: refused"  # base fails, base-marlin serves
        return {"base-marlin": _Server("base-marlin")}

    def measure(srv, point, folder, shape_):
        if point["concurrency"] == 16:
            raise RuntimeError("all requests failed")
        now[0] += 10

    waves = _fake_waves(plan, shape)
    # wave 1 fits (250 s + its first point's 37.5 + 30 <= 340); after its 20 s of points,
    # wave 2 (250 + 48.75 + 30) does not
    deadline = 340
    summary = plan.run(waves, tmp_path, deadline, shape, clock=lambda: now[0], start=start,
                       measure=measure)  # fmt: skip
    assert started == [["base", "base-marlin"]]
    by = {(p["server"], p["active"], p["concurrency"]): p["status"] for p in summary["points"]}
    assert by[("base-marlin", 0, 1)] == "measured"
    assert by[("base-marlin", 0, 16)] == "error: RuntimeError: all requests failed"
    assert by[("base-marlin", 0, 64)] == "measured"
    assert by[("base", 0, 1)] == "skipped: its server did not start"
    assert summary["waves"][1]["status"].startswith("skipped: ")
    assert {by[k] for k in by if k[0].startswith("lora-")} == {"skipped: its wave was not started"}
    assert summary["servers"]["base"]["error"] == "start: refused"


def test_a_wave_whose_start_raises_is_recorded_and_the_next_wave_still_runs(plan, tmp_path):
    """A start that raises (a full disk, a bad config) ends its wave, not the run: the wave and
    its points say why, the next wave starts; a server that failed to start leaves its vLLM log
    in its folder (the path ``start_co_tenants`` records), with the memory lines read."""
    shape = plan.DEVICE
    now = [0.0]
    log = tmp_path / "failed.log"
    log.write_text("Model loading took 26.3 GiB memory and 50.1 seconds\nCUDA out of memory\n")

    def start(configs, deadline, record):
        if "base" in configs:
            raise OSError("No space left on device")
        record["lora-r32"].update(error="start: CUDA out of memory", log_path=str(log))
        return {"lora-r8": _Server("lora-r8")}

    def measure(srv, point, folder, shape_):
        now[0] += 1

    summary = plan.run(_fake_waves(plan, shape), tmp_path / "out", 10**6, shape,
                       clock=lambda: now[0], start=start, measure=measure)  # fmt: skip
    assert summary["waves"][0]["status"] == "error: start: OSError: No space left on device"
    by = {(p["server"], p["active"], p["concurrency"]): p["status"] for p in summary["points"]}
    assert by[("base", 0, 1)] == "skipped: its wave's start failed"
    assert by[("lora-r8", 4, 64)] == "measured"
    assert by[("lora-r32", 4, 64)] == "skipped: its server did not start"
    kept = tmp_path / "out" / "lora-r32" / "vllm.log"
    assert kept.read_text() == log.read_text()
    assert summary["servers"]["lora-r32"]["model_loading_gib"] == 26.3


def test_the_deadline_stops_a_server_whose_point_outruns_its_estimate(plan, tmp_path):
    """Real clock: a point estimated to fit runs past the deadline; the timer stops the
    servers, the point is recorded as cut by it."""
    shape = plan.STAND_IN._replace(run_s={1: 0.01, 2: 0.01})
    srv = _Server("base-marlin")

    def measure(server, point, folder, shape_):
        end = time.time() + 5
        while not server.stopped and time.time() < end:
            time.sleep(0.02)
        if server.stopped:
            raise RuntimeError("server gone")

    waves = _fake_waves(plan, shape)[:1]
    start = lambda configs, deadline, record: {"base-marlin": srv}  # noqa: E731
    shape = shape._replace(wave_start_s=0)
    plan_stop, plan.STOP_S = plan.STOP_S, 0
    try:
        summary = plan.run(waves, tmp_path, time.time() + 0.3, shape, start=start, measure=measure)
    finally:
        plan.STOP_S = plan_stop
    first = summary["points"][0]
    assert first["status"].startswith("error (the deadline stopped its server)"), first
    assert srv.stopped


def test_the_memory_line_is_read_from_vllms_own_log_with_the_slots_inside_it(plan):
    """ "Model loading took" of a recorded H100 start (0.32.0, V2 runner); in the installed
    vLLM the LoRA manager is created inside the DeviceMemoryProfiler that line reports."""
    log = REPO_ROOT / "docs/results/h100/routing-2026-12-05/logs/server-0.32.0-none-uniform.log"
    assert plan.model_memory(log)["model_loading_gib"] == 20.4
    assert plan.model_memory(None) == {
        "model_loading_gib": None,
        "available_kv_gib": None,
        "kv_cache_tokens": None,
    }
    import vllm

    root = Path(vllm.__file__).parent / "v1" / "worker"
    for runner in (root / "gpu" / "model_runner.py", root / "gpu_model_runner.py"):
        text = runner.read_text()
        body = text[text.index("with DeviceMemoryProfiler() as m:") :]
        inside = body[: body.index("consumed_memory")]  # the with-block, up to its result
        assert "self.load_lora_model(" in inside, runner
        assert "Model loading took" in body[: body.index("Model loading took") + 20]
    servers = {"base-marlin": {"model_loading_gib": 20.4},
               "lora-r8": {"model_loading_gib": 22.1, "lora_buffers_gib": 1.68}}  # fmt: skip
    assert plan.memory_summary(servers) == {
        "lora-r8": {"model_loading_gib": 22.1, "over_base_marlin_gib": 1.7, "predicted_gib": 1.68}
    }


def test_the_shell_entry_starts_the_lora_run_with_the_sessions_deadline(tmp_path):
    """`h200_drafting.sh start LAST BUDGET_S lora [args]` (stubs for the stack and the jobs;
    its /tmp/t0 moved into tmp_path): the chain's job is the LoRA run with --deadline t0 +
    BUDGET_S, its own arguments passed through, none when none is given; `tune [args]` too."""
    device = tmp_path / "tools" / "device"
    device.mkdir(parents=True)
    script = (REPO_ROOT / "tools/device/h200_drafting.sh").read_text()
    (device / "h200_drafting.sh").write_text(script.replace("/tmp/t0", str(tmp_path / "t0")))
    (device / "stack.sh").write_text('echo "stack $*"\n')
    (device / "env.sh").write_text(":\n")
    (device / "jobs.sh").write_text('printf "jobs:"; for a in "$@"; do printf " <%s>" "$a"; done; echo\n')  # fmt: skip
    (tmp_path / "t0").write_text("1000\n")

    def start(*extra, what="lora"):
        return subprocess.run(["bash", "tools/device/h200_drafting.sh", "start", "11", "1500",
                               what, *extra], cwd=tmp_path, capture_output=True, text=True).stdout  # fmt: skip

    job = ("<COOKBOOK_OUT=/tmp/runs/draft/cookbook python3 tools/device/lora_overhead_h200.py "
           "--out /tmp/runs/draft/out --deadline 2500 ")  # fmt: skip
    assert "stack join 0.32.0 11" in start()  # the last of twelve 25 MB chunks, c11
    assert job + ">" in start()
    assert job + "--variant bf16 >" in start("--variant", "bf16")
    # the tuning entry the same way: no argument given passes none (not an empty '')
    budget = "--budget-s $(( (left = 2500 - $(date +%s)) > 1 ? left : 1 ))"
    assert (
        f"tune_h200.py --no-grid --drafting --co-tenant --out /tmp/runs/draft/out {budget} >"
        in start(what="tune")
    )
    assert f"{budget} --only recipe dspark-k7 >" in start(
        "--only", "recipe", "dspark-k7", what="tune"
    )


def test_the_adapters_it_serves_have_the_real_architectures_shapes(tmp_path):
    """A rank-8 random adapter of the weightless NVFP4 architecture passes the pre-launch
    check at --max-lora-rank 8: every tensor of Lightning's widths, shared experts included."""
    from helpers.weights import weightless

    arch = weightless.build_arch_model("nvfp4", tmp_path / "arch")
    config = json.loads((arch / "config.json").read_text())
    folder = random_adapter(arch, tmp_path / "a1", rank=8)
    report = check_adapter(folder, arch, max_lora_rank=8)
    assert report.rank == 8 and report.tensors > 0
    keys = json.loads((folder / "adapter_config.json").read_text())["target_modules"]
    assert "in_proj" in keys and "q_proj" in keys
    from safetensors import safe_open

    with safe_open(folder / "adapter_model.safetensors", framework="numpy") as f:
        names = list(f.keys())
    pattern = config.get("hybrid_override_pattern") or ""
    if "E" in pattern:
        assert any(".shared_experts.up_proj." in n for n in names)


def _page(folder: Path) -> str:
    from tools.lora_pages import lora_markdown

    return lora_markdown(folder)


def test_the_page_of_the_recorded_rehearsal_has_every_point_its_ratios_and_ties():
    """Every point of the stand-in rehearsal (2 runs each) is a row; a LoRA row's ratio is to
    base-marlin at its concurrency, base-marlin's to base; tie where the runs overlap."""
    from tools.lora_pages import load_runs

    summary, runs = load_runs(REHEARSAL)
    page = _page(REHEARSAL)
    rows = [line for line in page.splitlines() if re.match(r"\| (base|lora)", line)]
    assert len(rows) == len(summary["points"]) == 16
    assert all("n/a (CPU stand-in)" in r for r in rows)  # TPOT on 2 shared cores is no figure
    assert "(CPU stand-in rehearsal)" in page and "not a measurement" in page
    assert "VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random" in page
    for row in rows:
        name, active, c = (x.strip() for x in row.split("|")[1:4])
        here = runs[
            (runs.server == name) & (runs.active == int(active)) & (runs.concurrency == int(c))
        ]
        assert len(here) == 2
        median = here["output_throughput"].median()
        lo, hi = here["output_throughput"].min(), here["output_throughput"].max()
        assert f"{median:,.0f} [{lo:,.0f}-{hi:,.0f}]" in row
        ref = {"base-marlin": "base", "lora-r8": "base-marlin", "lora-r32": "base-marlin"}.get(name)
        if ref is None:
            assert row.rstrip().endswith("|  |")
            continue
        there = runs[(runs.server == ref) & (runs.active == 0) & (runs.concurrency == int(c))]
        ratio = median / there["output_throughput"].median()
        tie = compare(there["output_throughput"].median(), median,
                      sides=(spread(there), spread(here))).winner is None  # fmt: skip
        assert f"{ratio:.2f}x of {ref}, {'tie' if tie else 'apart'}" in row
    predicted = summary["memory"]["lora-r32"]["predicted_gib"]  # lab.adapters.check's, in GiB
    assert f"lora-r32 not logged (`lora_buffers` predicts {predicted * 1024:.1f} MiB)" in page
    assert "The CPU runner logs no such line" in page


def test_the_page_shows_tpot_off_the_stand_in_and_names_what_was_not_measured(tmp_path):
    """The same records read as a GPU run's (TPOT shown) with one point cut by the deadline:
    its row says why, and nothing is compared with it."""
    folder = tmp_path / "records"
    shutil.copytree(REHEARSAL, folder)
    summary = json.loads((folder / "summary.json").read_text())
    summary["stand_in"] = False
    cut = next(
        p for p in summary["points"] if p["server"] == "base-marlin" and p["concurrency"] == 2
    )
    cut["status"] = "skipped: 40 s left, the point needs about 68"
    (folder / "summary.json").write_text(json.dumps(summary))
    page = _page(folder)
    assert "| base-marlin | 0 | 2 | not measured (skipped: 40 s left" in page
    lora_c2 = [r for r in page.splitlines() if r.startswith("| lora-r8 | 4 | 2 |")][0]
    assert lora_c2.rstrip().endswith("|  |")  # its anchor is missing: no ratio
    tpot = [r for r in page.splitlines() if r.startswith("| base | 0 | 1 |")][0].split("|")[5]
    assert re.fullmatch(r" \d+\.\d\d ", tpot)


@pytest.mark.skipif(sys.platform != "linux", reason="the rehearsal's records are Linux paths")
def test_the_recorded_rehearsal_holds_no_machine_path():
    for path in REHEARSAL.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert str(REPO_ROOT) not in text and "/tmp/" not in text, path


@pytest.mark.parametrize(
    ("here", "ref", "cell"),
    [
        ([112.0], [100.0], "1.12x of base-marlin, one run a side"),
        ([103.0], [100.0], "1.03x of base-marlin, tie (one run a side)"),
        ([97.0, 99.0], [100.0], "0.98x of base-marlin, tie (one run a side)"),
        ([80.0], [100.0, 101.0], "0.80x of base-marlin, one run a side"),
    ],
)
def test_a_single_run_ratio_follows_the_projects_one_run_rule(here, ref, cell):
    """One run on either side: no spread, so a ratio within SINGLE_RUN_TIE (5 %) of 1 is a
    tie, as the tuning step's and the drafting pages' single runs; beyond it the cell says
    it rests on one run a side."""
    import pandas as pd

    from tools.lora_pages import ratio_cell

    frame = lambda v: pd.DataFrame({"output_throughput": v})  # noqa: E731
    assert ratio_cell(frame(here), frame(ref), "base-marlin") == cell


H100_RUN = REPO_ROOT / "docs" / "results" / "h100" / "lora-2026-12-06"


def test_the_committed_gpu_page_regenerates_from_its_records():
    """docs/results/h100/lora-2026-12-06/README.md is what ``lora_markdown`` makes of the
    records beside it: a change to the page builder or the records shows here."""
    assert (H100_RUN / "README.md").read_text() == _page(H100_RUN)


def test_the_reading_gives_each_adapter_counts_range_and_ties_from_the_runs():
    """The reading's ranges are the LoRA servers' ratios to base-marlin at each concurrency,
    min and max over both ranks, and its tie count is the table's; four against one compares
    the same server's points."""
    from tools.lora_pages import load_runs

    summary, runs = load_runs(H100_RUN)
    page = _page(H100_RUN)

    def med(server, active, c):
        pick = (runs.server == server) & (runs.active == active) & (runs.concurrency == c)
        return runs[pick]["output_throughput"].median()

    rows = [line for line in page.splitlines() if re.match(r"\| lora", line)]
    for active, what in ((0, "no adapter in the batch"), (1, "one adapter active"), (4, "four")):
        ratios = [med(s, active, c) / med("base-marlin", 0, c)
                  for s in ("lora-r8", "lora-r32") for c in (1, 16, 64)]  # fmt: skip
        ties = sum(r.split("|")[2].strip() == str(active) and r.rstrip().endswith("tie |")
                   for r in rows)  # fmt: skip
        line = next(x for x in page.splitlines() if x.startswith("- ") and what in x)
        assert f"{min(ratios):.2f}x-{max(ratios):.2f}x of base-marlin over 6 points" in line
        assert f"{ties} of them ties" in line
    four = next(x for x in page.splitlines() if x.startswith("- four adapters against one"))
    for s in ("lora-r8", "lora-r32"):
        for c in (1, 16, 64):
            assert f"{s} c={c} {med(s, 4, c) / med(s, 1, c):.2f}x" in four
    assert "**Run:** NVIDIA H100 80GB HBM3" in page and "vLLM 0.32.0" in page
    assert f"ready {summary['waves'][1]['start_s']} s after its start" in page


def test_a_rehearsal_without_device_record_still_says_when_it_ran(tmp_path):
    """No device.txt (the stand-in rehearsal): the provenance line gives the run's times and
    the waves only; with one, its lines come first; the records named are those present."""
    from tools.lora_pages import provenance

    summary = json.loads((REHEARSAL / "summary.json").read_text())
    line = provenance(REHEARSAL, summary)
    assert line.startswith(f"**Run:** run {summary['started'][:10]}") and "wave 1 (" in line
    (tmp_path / "device.txt").write_text("A GPU, 80 GiB\nvLLM 9.9\n")
    assert provenance(tmp_path, summary).startswith("**Run:** A GPU, 80 GiB; vLLM 9.9; run ")
    assert provenance(tmp_path, {}) == (
        "**Run:** A GPU, 80 GiB; vLLM 9.9. Records here: `summary.json`, one folder of `vllm "
        "bench serve` JSONs per point, `device.txt`."
    )
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "vllm.log").write_text("")
    (tmp_path / "run.log").write_text("")
    assert provenance(tmp_path, {}).endswith(
        "`summary.json`, each server's `vllm.log`, one folder of `vllm bench serve` JSONs per "
        "point, `run.log`, `device.txt`."
    )
    assert provenance(tmp_path / "nothing", {}) == ""
