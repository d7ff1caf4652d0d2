"""The drafting session pages under docs/results: each is what its records give, names the
source of every synthetic acceptance it shows, and puts each configuration beside the baseline
of its own session."""

from __future__ import annotations

import json
import shutil

from tests.support import TESTS
from tools.drafting_pages import drafting_markdown

SESSIONS = sorted((TESTS.parent / "docs" / "results").glob("*/drafting-*/"))
#: The first drafting session (H200, 2026-12-04: one run per point, routing as loaded).
FIRST = next(s for s in SESSIONS if s.as_posix().endswith("h200/drafting-2026-12-04"))
#: Every page tools.drafting_pages writes: the drafting sessions and the routing one.
PAGES = [*SESSIONS, *sorted((TESTS.parent / "docs" / "results").glob("*/routing-*/"))]


def test_each_committed_drafting_page_is_the_one_its_records_give():
    assert SESSIONS and len(PAGES) > len(SESSIONS), "no drafting or routing session is committed"
    for session in PAGES:
        assert (session / "README.md").read_text() == drafting_markdown(session), (
            f"{session} is stale: python -m tools.drafting_pages {session.relative_to(TESTS.parent)} --write"
        )


def test_ratios_are_to_the_same_session_baseline_and_a_small_one_is_a_tie(tmp_path):
    session = tmp_path / "drafting-x"
    shutil.copytree(FIRST, session)
    page = drafting_markdown(session)
    assert "455 (2.06x)" in page and "2,541 (1.05x, tie)" in page
    # the baseline row carries no ratio; each drafting row's source is named once
    row = next(line for line in page.splitlines() if line.startswith("| NVFP4 recipe"))
    assert "x" not in row.split("|")[2]
    assert page.count("(ai-dynamo/dynamo") == 1 and "an assumption" in page
    # a run without drafting has no break-even line
    manifest = json.loads((session / "runs.json").read_text())
    manifest["runs"] = [r for r in manifest["runs"] if not r.get("num_speculative_tokens")]
    (session / "runs.json").write_text(json.dumps(manifest))
    assert "Break-even" not in drafting_markdown(session)


def test_repeated_points_show_their_mean_and_range_and_one_k_at_several_lengths_is_one_line(
    tmp_path,
):
    """A session with repeats (2026-12-05): each cell is the mean of its runs with their range,
    a ratio whose two points' runs overlap is a tie, MTP K=7's three lengths are
    fitted as one line (not through the origin), and the agent table carries vLLM's hit rate."""
    session = next(s for s in SESSIONS if s.name == "drafting-2026-12-05")
    page = drafting_markdown(session)
    assert "| + MTP K=7 | 414 [373-449] (1.95x) | 2,090 [1,799-2,364] (0.87x, tie) |" in page
    assert "| + DSpark K=7 | 587 [553-618] (2.76x) | 3,290 [2,746-3,513] (1.36x) |" in page
    fitted = [line for line in page.splitlines() if line.startswith("- MTP K=7, at")]
    assert len(fitted) == 2 and all(
        "measured at L = 1.49-5.5" in s or "1.5-5.53" in s for s in fitted
    )
    assert not any("proportional to L" in s for s in fitted)
    assert "- DSpark K=7, at concurrency 1:" in page  # its own fit, not merged with MTP's K=7
    assert "| recipe (prefix caching on, align mode) | 4 | 70% | 200 |" in page
    assert "| `--no-enable-prefix-caching` | 16 | caching off | 1,004 |" in page
    # without the fit names each drafting run is its own estimate through the origin
    copy = tmp_path / "drafting-y"
    shutil.copytree(session, copy)
    manifest = json.loads((copy / "runs.json").read_text())
    for run in manifest["runs"]:
        run.pop("fit", None)
    (copy / "runs.json").write_text(json.dumps(manifest))
    apart = drafting_markdown(copy)
    assert apart.count("assuming speed proportional to L") == 2 * 5


def test_the_measured_page_gives_each_listed_target_the_newest_session():
    from tools.drafting_pages import measured_drafting

    h200, h100 = measured_drafting("h200"), measured_drafting("h100")
    first = h200.split("**The break-even line, measured again**")[0]
    assert "drafting-2026-12-05/README.md" in first and "not on this GPU" not in first
    assert "Measured on h200, not on this GPU" in h100
    assert "| + DSpark K=7 | 587 [553-618] (2.76x)" in h100
    assert measured_drafting("rtx_pro_6000") is None  # not listed under the session's targets
    # a session that lists the target under line_for follows: the line with uniform routing
    for text in (h100, h200):
        again = text[text.index("**The break-even line, measured again** ([drafting-2026-12-06]") :]
        assert ("Measured on h100, not on this GPU" in again) == (text is h200)
        assert "- MTP K=7, at concurrency 1: drafting pays above L = 2.30" in again
        assert "at concurrency 64: not fitted" in again
        # every session listing it follows, oldest first: the line with room for 64 comes next
        alone = again.index("**The break-even line, measured again** ([drafting-2026-12-06-alone]")
        assert "- MTP K=7, at concurrency 64: drafting pays above L = 3.11" in again[alone:]
        assert "- MTP K=7, at concurrency 64: drafting pays above L" not in again[:alone]
    measured = (TESTS.parent / "docs" / "results" / "measured.md").read_text()
    assert h200.replace("](../docs/results/", "](") in measured


def test_a_session_on_dummy_routing_says_so_and_one_with_uniform_routing_does_not(tmp_path):
    """vLLM 0.32.0's dummy weights send every token to the same experts: a page of such a
    session (every drafting one so far) says its drafting ratios are optimistic; a session
    whose servers all ran vLLM's uniform routing simulation (``"routing": "uniform"``) does not."""
    session = tmp_path / "drafting-x"
    shutil.copytree(FIRST, session)
    assert "**MoE routing on these dummy weights.**" in drafting_markdown(session)
    manifest = json.loads((session / "runs.json").read_text())
    (session / "runs.json").write_text(json.dumps({**manifest, "routing": "uniform"}))
    assert "MoE routing on these dummy weights" not in drafting_markdown(session)
    # per run: the note stays while one run routed as loaded, goes when each run says uniform
    runs = [{**r, "routing": "uniform"} for r in manifest["runs"]]
    (session / "runs.json").write_text(json.dumps({**manifest, "runs": runs[:-1] + manifest["runs"][-1:]}))  # fmt: skip
    assert "MoE routing on these dummy weights" in drafting_markdown(session)
    (session / "runs.json").write_text(json.dumps({**manifest, "runs": runs}))
    assert "MoE routing on these dummy weights" not in drafting_markdown(session)
    # a session comparing the two routings (the page the note cites) does not repeat it
    (session / "runs.json").write_text(json.dumps({**manifest, "routing": "compared"}))
    assert "MoE routing on these dummy weights" not in drafting_markdown(session)


def test_a_row_with_versus_is_compared_with_that_run_and_its_break_even_too(tmp_path):
    """A routing session pairs rows other than with the baseline (MTP with uniform routing
    against the recipe with uniform routing; a release against another at equal routing):
    ``versus`` names the run a row's ratios and its break-even fit are against."""
    session = tmp_path / "drafting-v"
    shutil.copytree(next(s for s in SESSIONS if s.name == "drafting-2026-12-05"), session)
    manifest = json.loads((session / "runs.json").read_text())
    runs = {r["folder"]: r for r in manifest["runs"]}
    before = drafting_markdown(session)
    row = next(ln for ln in before.splitlines() if ln.startswith("| + DSpark K=7 |"))
    assert "(2.76x)" in row  # against the recipe, no drafting
    runs["dspark"]["versus"] = "mtp"  # DSpark K=7 against MTP K=7 (587 vs 414 at c=1)
    (session / "runs.json").write_text(json.dumps({**manifest, "runs": list(runs.values())}))
    page = drafting_markdown(session, plot=True)
    row = next(ln for ln in page.splitlines() if ln.startswith("| + DSpark K=7 |"))
    assert "587 [553-618] (1.42x of + MTP K=7)" in row

    # its break-even is against MTP's speed now: a higher L than against no drafting
    def dspark_c1(text):
        line = next(
            ln for ln in text.splitlines() if ln.startswith("- DSpark K=7, at concurrency 1")
        )
        return float(line.split("L = ")[1].split()[0].rstrip(",;:"))

    assert dspark_c1(page) > dspark_c1(before)
    # the others keep the session's baseline; the plot shows the fits of one reference
    assert (
        "| + MTP K=7 | 414 [373-449] (1.95x) |" in page and (session / "break-even.png").is_file()
    )


def test_two_releases_at_equal_routing_tie_inside_their_spread_and_differ_beyond_it(tmp_path):
    """The H100 routing session: 0.34.0 against 0.32.0, each at its own routing; with uniform
    routing on both the ratios sit inside the runs' spread (a tie), as loaded 0.34.0 is 0.72x at
    16. Slowing 0.34.0's uniform runs by a fifth makes that pair a loss, not a tie."""
    from tools.drafting_pages import release_pairs
    from tools.results_pages import equal_routing_lines

    session = TESTS.parent / "docs" / "results" / "h100" / "routing-2026-12-05"
    pairs = {p["routing"]: p for p in release_pairs(session)}
    assert set(pairs) == {"uniform", "as loaded"}
    assert pairs["uniform"]["releases"] == "0.34.0 / 0.32.0"
    assert pairs["uniform"]["cells"] == {1: "1.03x, tie", 16: "0.99x, tie"}
    assert pairs["as loaded"]["cells"][16] == "0.72x"
    copy = tmp_path / "h100" / "routing-x"
    shutil.copytree(session, copy)
    for point in (copy / "0.34.0-none-uniform").rglob("*.json"):
        data = json.loads(point.read_text())
        data["output_throughput"] *= 0.8
        point.write_text(json.dumps(data))
    slower = {p["routing"]: p for p in release_pairs(copy)}["uniform"]["cells"]
    assert slower == {1: "0.82x", 16: "0.79x"}
    section = "\n".join(equal_routing_lines(tmp_path))
    assert (
        "| H100 | [h100/routing-x](../h100/routing-x/README.md) | 0.34.0 / 0.32.0 | uniform | 0.82x | 0.79x |"
        in section
    )


def test_a_point_whose_server_queued_most_requests_is_marked_and_left_out_of_the_fit(tmp_path):
    """The H100 session of 2026-12-06: the MTP servers' 4 GiB caches held 15 requests, so
    their c=16 cells say "15 in flight" and stay in the fit (said on its line), and their c=64
    points, a queue of 49, are shown but not fitted; without the manifest's ``in_flight`` the
    same records would give a "cannot pay" verdict at 64."""
    session = tmp_path / "drafting-q"
    shutil.copytree(
        next(s for s in SESSIONS if s.as_posix().endswith("h100/drafting-2026-12-06")), session
    )
    page = drafting_markdown(session)
    row = next(ln for ln in page.splitlines() if ln.startswith("| + MTP K=7 |"))
    assert "(0.96x, 15 in flight)" in row and "(0.45x, 15 in flight)" in row and "(1.51x)" in row
    lines = [ln for ln in page.splitlines() if ln.startswith("- MTP K=7, at concurrency")]
    assert lines[1].startswith("- MTP K=7, at concurrency 16: drafting pays above L = 3.80")
    assert lines[1].endswith("(the drafting servers ran at most 15 at once)")
    assert lines[2].startswith(
        "- MTP K=7, at concurrency 64: not fitted: the drafting servers ran at most 15"
    )
    assert "cannot pay" not in page
    manifest = json.loads((session / "runs.json").read_text())
    for run in manifest["runs"]:
        run.pop("in_flight", None)
    (session / "runs.json").write_text(json.dumps(manifest))
    unmarked = drafting_markdown(session)
    row = next(ln for ln in unmarked.splitlines() if ln.startswith("| + MTP K=7 |"))
    fitted = [ln for ln in unmarked.splitlines() if ln.startswith("- MTP K=7, at concurrency")]
    assert "in flight" not in row and not any("at once" in ln for ln in fitted)
    assert fitted[2].startswith("- MTP K=7, at concurrency 64: drafting cannot pay")


def test_points_that_carry_vllms_queue_share_are_marked_without_a_hand_written_in_flight(tmp_path):
    """Records with vLLM's queue share in their sidecars (every sweep point since 2026-12-06)
    need no ``in_flight`` in the manifest: the H100 session's MTP points annotated with the
    shares that 15 running of 16 and of 64 give (1/16 and 49/64) give the same page as its
    manifest's hand-read 15; the recipe's points, which did not wait, are not marked."""
    from helpers.bench.results import sidecar_path

    source = next(s for s in SESSIONS if s.as_posix().endswith("h100/drafting-2026-12-06"))
    session = tmp_path / "drafting-s"
    shutil.copytree(source, session)
    manifest = json.loads((session / "runs.json").read_text())
    for run in manifest["runs"]:
        waited = {16: 1 / 16, 64: 49 / 64} if run.pop("in_flight", None) else {}
        for point in (session / run["folder"]).rglob("*-c*.json"):
            c = json.loads(point.read_text())["max_concurrency"]
            side = sidecar_path(point)
            notes = json.loads(side.read_text()) if side.is_file() else {}
            side.write_text(json.dumps({**notes, "cookbook_queue_share": waited.get(c, 0.0)}))
    (session / "runs.json").write_text(json.dumps(manifest))
    assert drafting_markdown(session) == drafting_markdown(source)


def test_servers_alone_with_room_for_every_request_fit_the_line_at_16_and_64():
    """The H100 session of 2026-12-06 with each server alone and a 24 GiB KV cache: every
    request ran at once (queue share at most 0.019 in the sidecars), so no cell says "in
    flight", both concurrencies are fitted, and the TPOT column names the lowest concurrency
    measured (16), not 1."""
    session = next(s for s in SESSIONS if s.as_posix().endswith("h100/drafting-2026-12-06-alone"))
    page = drafting_markdown(session)
    rows = [ln for ln in page.splitlines() if ln.startswith("| + MTP")]
    lines = [ln for ln in page.splitlines() if ln.startswith("- MTP K=7, at concurrency")]
    assert len(rows) == 3 and not any("in flight" in ln for ln in rows)
    assert not any("at once" in ln or "not fitted" in ln for ln in lines)
    assert [ln.split(":")[0] for ln in lines] == ["- MTP K=7, at concurrency 16", "- MTP K=7, at concurrency 64"]  # fmt: skip
    assert lines[0].startswith("- MTP K=7, at concurrency 16: drafting pays above L = 3.03")
    assert "| configuration | c=16 | c=64 | TPOT c=16 (ms) |" in page
    row = next(ln for ln in page.splitlines() if ln.startswith("| + MTP K=7 |"))
    assert "(1.22x)" in row and "(1.19x)" in row  # every run beyond the recipe's: not a tie
