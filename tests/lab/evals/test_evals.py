"""Answer quality (lab.evals): the statistics, and the accuracy step against the real
stand-in server through lm-eval.

The stand-in was trained on 8 GSM8K items of the shipped set and never saw 8 others
(cookbook/demo.yaml ``accuracy``): scored through lm-eval's ``local-chat-completions``, the
first must come out right and the second wrong, which shows the scorer reads the model.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from helpers.config.demo import load_demo
from helpers.config.evalsets import ITEM_SETS, items_by_id, load_items
from helpers.errors import CookbookError
from lab.evals import stats
from lab.evals.accuracy import EvalError, default_items, evaluate, evaluate_runs
from lab.evals.compare import compare
from lab.evals.lossless import match
from lab.evals.settings import RequestSettings

ACC = load_demo()["accuracy"]
GREEDY = RequestSettings(temperature=0.0, top_p=1.0, max_tokens=256)


# ------------------------------------------------------------------ statistics, no server


def test_wilson_interval_matches_the_textbook_values():
    p = stats.wilson(8, 8)
    assert (
        p.value == 1.0 and p.high == pytest.approx(1.0) and p.low == pytest.approx(0.6756, abs=1e-3)
    )
    q = stats.wilson(50, 100)
    assert (q.low, q.high) == pytest.approx((0.4038, 0.5962), abs=1e-3)
    assert "50.0% (50/100; 95 % Wilson interval 40.4%-59.6%)" == str(q)
    with pytest.raises(ValueError, match="at least one item"):
        stats.wilson(0, 0)


def test_mcnemar_counts_only_the_items_the_two_disagree_on():
    a = [True] * 5 + [False] * 5 + [True] * 10
    b = [False] * 5 + [False] * 5 + [True] * 10
    t = stats.mcnemar(a, b)
    assert (t.only_a, t.only_b) == (5, 0) and t.p_value == pytest.approx(0.0625)
    same = stats.mcnemar(a, a)
    assert (same.only_a, same.only_b, same.p_value) == (0, 0, 1.0)
    with pytest.raises(ValueError, match="same items"):
        stats.mcnemar([True], [True, False])


def test_paired_bootstrap_is_seeded_and_brackets_the_difference():
    a = [True, False] * 50
    b = [True, True] * 50
    d = stats.paired_bootstrap(a, b)
    assert d.difference == pytest.approx(0.5)
    assert d.low < 0.5 < d.high and d == stats.paired_bootstrap(a, b)
    zero = stats.paired_bootstrap(a, a)
    assert (zero.difference, zero.low, zero.high) == (0.0, 0.0, 0.0)


def test_greedy_match_finds_the_first_divergence():
    same = match([[1, 2, 3], [4, 5]], [[1, 2, 3], [4, 5]])
    assert same.lossless and same.rate == 1.0 and "lossless: 100.0%" in same.summary("x")
    m = match([[1, 2, 3, 4], [7, 8]], [[1, 2, 9, 4], [7, 8, 9]])
    assert not m.lossless and m.identical == 0
    assert list(m.per_prompt["first_divergence"]) == [2, 2]  # a changed token; a longer output
    assert m.rate == pytest.approx(5 / 6) and "NOT lossless" in m.summary("ngram")
    # bare token ids carry no top-5: the changed token's tie is unknown, the longer output not
    assert list(m.per_prompt["tie"]) == [None, False] and m.unknown == 1
    assert "(1 part beyond a tie; 1 more where the top-5 was not read)" in m.summary("ngram")
    with pytest.raises(ValueError, match="same prompts"):
        match([[1]], [])


def test_a_first_difference_within_each_runs_top_5_is_a_tie_as_in_vllms_own_test():
    """vLLM's CPU spec-decode test: at the first differing token each run's token must be
    among the other's top-5; then the runs match. Without top-5 nothing can be a tie."""
    from lab.evals.lossless import GreedyOutput

    top = [frozenset({1, 5}), frozenset({2, 9}), frozenset({3})]
    ref, tied = GreedyOutput([1, 2, 3], top), GreedyOutput([1, 9, 7], top)
    m = match([ref], [tied])
    assert m.lossless and m.ties == 1 and m.identical == 0 and bool(m.per_prompt["tie"][0])
    assert "lossless" in m.summary(
        "ngram"
    ) and "1 part first at a tie (top-5, vLLM's rule)" in m.summary("ngram")
    beyond = GreedyOutput([1, 8, 3], top)  # 8 is not in the reference's top-5 at position 1
    assert not match([ref], [beyond]).lossless
    unread = match([[1, 2, 3]], [[1, 9, 7]])  # no top-5 known: a tie neither shown nor ruled out
    assert not unread.lossless and unread.unknown == 1 and unread.ties == 0
    assert "greedy: not shown lossless: 1 of 1 outputs part where the top-5 was not read" in (
        unread.summary("ngram")
    )
    vacuous = match([ref], [beyond], accepted=0)
    said = vacuous.summary("ngram")
    assert said.startswith("ngram vs no drafting, greedy: proves nothing")
    assert "yet 1 of 1 outputs part beyond a tie: the drafting path changed the outputs" in said


def test_a_reply_vllm_cannot_write_for_a_nan_logprob_is_asked_again_without_logprobs(monkeypatch):
    """vLLM 0.32.0 clamps a -inf logprob to -9999 but not NaN, and refuses the reply with HTTP
    400 (its ErrorResponse for a ValueError; the message CI's stand-in run got with n-gram
    drafting). The prompt is asked again without logprobs: its ids kept, its top-5 unknown, so
    a difference there is never a tie."""
    import json

    import httpx
    import openai

    from lab.evals import lossless

    asked = []

    def vllm(request):
        body = json.loads(request.content)
        asked.append(body.get("top_logprobs"))
        if body.get("logprobs"):
            error = {"message": lossless.NAN_LOGPROB_ERROR, "type": "BadRequestError",
                     "param": None, "code": 400}  # fmt: skip
            return httpx.Response(400, json={"error": error})
        choice = {"index": 0, "finish_reason": "length", "token_ids": [4, 5, 6],
                  "message": {"role": "assistant", "content": "abc"}}  # fmt: skip
        return httpx.Response(200, json={"id": "c", "object": "chat.completion", "created": 0,
                                         "model": "m", "choices": [choice]})  # fmt: skip

    client = openai.OpenAI(base_url="http://vllm/v1", api_key="x",
                           http_client=httpx.Client(transport=httpx.MockTransport(vllm)))  # fmt: skip
    monkeypatch.setattr(lossless, "make_client", lambda url: client)
    server = type("S", (), {"base_url": "http://vllm", "model_name": "m"})()
    with pytest.warns(lossless.TopLogprobsUnreadableWarning, match="prompt 0: .*NaN logprob"):
        (out,) = lossless.greedy_tokens(server, ["hi"])
    assert asked == [5, None] and out == [4, 5, 6] and out.top == [frozenset()] * 3
    assert not lossless.match([out], [lossless.GreedyOutput([4, 9, 6], out.top)]).lossless


def test_the_shipped_item_set_and_the_stand_ins_items():
    items = load_items()
    assert len(items) == 200 and len({i["id"] for i in items}) == 200
    assert all(
        i["answer"].rstrip().endswith(f"#### {i['target']}") or "," in i["answer"] for i in items
    )
    assert "MIT" in ITEM_SETS["gsm8k"].source
    assert not set(ACC["trained"]) & set(ACC["held_out"])
    from helpers.config.run import Run

    assert [i["id"] for i in default_items(Run("stand_in"))] == ACC["trained"] + ACC["held_out"]
    assert len(default_items(Run("download"))) == 200 and len(default_items(Run(), 5)) == 5
    with pytest.raises(CookbookError, match="no item gsm8k-test-99999"):
        items_by_id(["gsm8k-test-99999"])
    with pytest.raises(CookbookError, match="Unknown item set 'mmlu'"):
        load_items("mmlu")


# --------------------------------------------------------------- the real stand-in server


@pytest.fixture(scope="module")
def scored_runs(standin_server):
    """The stand-in's 16 items scored in one lm-eval process, three ways: reasoning on
    (``ci-trained``), reasoning off with a ``max_tokens`` above the server's max_model_len
    (``ci-held-out``), and ``max_tokens=8`` (``ci-cut``); with what ``evaluate_runs`` printed.
    Two tests read them: what the stand-in learned, and the paired comparison of two runs."""
    with contextlib.redirect_stdout(io.StringIO()) as said:
        runs = evaluate_runs(
            standin_server,
            [("ci-trained", GREEDY), ("ci-held-out", GREEDY.replace(thinking=False, max_tokens=4096)),
             ("ci-cut", GREEDY.replace(max_tokens=8))],
            items_by_id(ACC["trained"] + ACC["held_out"]),
        )  # fmt: skip
    return (*runs, said.getvalue())


@pytest.fixture(scope="module")
def two_pass_curve(standin_server):
    """A budget of 4 reasoning tokens on 3 trained items, in two passes (one lm-eval process):
    the two-pass test reads it, the paired comparison scores it against 16 items."""
    items = items_by_id(ACC["trained"][:3])
    opts = GREEDY.replace(thinking=True, reasoning_budget=4)
    return evaluate_runs(standin_server, [("ci-two-pass-4", opts)], items, budget_method="two_pass")


@pytest.mark.server
def test_accuracy_follows_what_the_stand_in_learned(scored_runs):
    """Also: a run whose reasoning uses every one of its 8 tokens gets replies with
    ``content: null``, which lm-eval scores as empty wrong answers; the result counts them,
    names their ids, says why from the server's own counter, and keeps lm-eval's accuracy."""
    trained, held, cut, said_first = scored_runs
    # above the stand-in's max_model_len: fitted before lm-eval starts, and said
    assert "ci-held-out: max_tokens=4096 is above the server's max_model_len=2048" in said_first
    assert held.settings["max_tokens"] == 2048
    empty = cut.unanswered()
    assert len(empty) >= 12, cut.items  # the stand-in reasons for tens of tokens
    assert set(empty) <= set(cut.items["id"].astype(str))
    assert not cut.items[cut.items["id"].astype(str).isin(empty)]["correct"].any()
    assert cut.length_finished is not None and cut.length_finished >= len(empty)
    said = cut.summary()
    assert f"{len(empty)} of 16 items got no answer (ids {empty[0]}, " in said
    assert "at max_tokens=8 (reasoning counts against max_tokens)" in said
    assert "Fix: raise max_tokens, set a reasoning budget" in said and "turn thinking off" in said
    assert said.startswith(f"ci-cut: gsm8k accuracy {cut.accuracy}")  # lm-eval's, unchanged
    assert json.loads((cut.path / "result.json").read_text())["unanswered"] == empty
    assert "got no answer" not in held.summary() or held.unanswered()
    for run in (trained, held):
        t = run.items
        assert len(t) == 16 and run.generated_tokens and run.generated_tokens > 0
        on_trained = t[t["id"].isin(ACC["trained"])]["correct"].sum()
        on_held = t[t["id"].isin(ACC["held_out"])]["correct"].sum()
        assert on_trained >= 7, t  # learned (reasoning on and off)
        assert on_held <= 1, t  # never seen
        assert run.accuracy.low < run.accuracy.value < run.accuracy.high
        saved = json.loads((run.path / "result.json").read_text())
        assert saved["n"] == 16 and saved["wilson_95"] == [run.accuracy.low, run.accuracy.high]
        assert (run.path / "items.csv").is_file()
    assert trained.settings["thinking"] and not held.settings["thinking"]


@pytest.mark.server
def test_paired_comparison_of_two_runs_on_the_same_items(scored_runs, two_pass_curve):
    """Two runs scored on the same items, paired: same items in the same order, the pair
    counted from the per-item tables. The runs are the reasoning-on and reasoning-off runs of
    the 16 items (``scored_runs``: one lm-eval process scored both); serving a second
    configuration for the comparison runs in the h200 notebook's step 12 in CI
    (tests/notebooks/test_notebooks.py), so no second server starts here, and a run of 3 other
    items (``two_pass_curve``) cannot be paired with them."""
    first, again = scored_runs[:2]
    items = items_by_id(ACC["trained"] + ACC["held_out"])
    c = compare(first, again)
    assert list(c.a.items["id"]) == list(c.b.items["id"]) == [i["id"] for i in items]
    disagree = int((c.a.items["correct"] != c.b.items["correct"]).sum())
    assert c.test.only_a + c.test.only_b == disagree
    assert c.difference.low <= c.difference.difference <= c.difference.high
    assert c.a.accuracy.value >= 3 / 8 and c.b.accuracy.value >= 3 / 8  # the trained half
    said = c.summary()
    assert "McNemar exact p = " in said and "ci-trained" in said and "ci-held-out" in said
    # the verdict follows the interval: a tie unless it excludes 0
    tie = c.difference.low <= 0 <= c.difference.high
    assert said.splitlines()[-1].startswith("verdict: a tie" if tie else "verdict: ci-")
    assert set(c.table().columns) >= {"id", "ci-trained right", "ci-held-out right"}
    (three,) = two_pass_curve
    assert len(three.items) == 3
    with pytest.raises(EvalError, match="different items"):
        compare(c.a, three)


@pytest.mark.server
def test_a_budget_that_cannot_fit_is_refused_and_a_400_is_said_in_vllms_words(standin_server):
    """A reasoning budget at or above the server's ``max_model_len`` (the stand-in's 2048) is
    refused before lm-eval starts, naming both numbers; a 400 that still reaches lm-eval (its
    task written with ``max_tokens`` 4096, past the fit that ``evaluate`` does: see
    test_accuracy_follows_what_the_stand_in_learned) is quoted in vLLM 0.32.0's words with
    the cookbook's fix, not as aiohttp's "Bad Request"."""
    from lab.evals import accuracy

    items = items_by_id(ACC["trained"][:1])
    opts = GREEDY.replace(max_tokens=4096, thinking=False)
    with pytest.raises(
        EvalError, match="reasoning_budget=3000 does not fit the server's max_model_len=2048"
    ):
        evaluate(standin_server, items, options=opts.replace(reasoning_budget=3000, max_tokens=4000),
                 label="ci-budget", progress=False)  # fmt: skip
    run = accuracy._prepare("ci-400", items, opts, "gsm8k")  # unfitted: 4096 reaches vLLM
    base = standin_server.base_url.rstrip("/")
    with pytest.raises(EvalError) as err:
        accuracy._run_lm_eval(base, standin_server.model_name, [run], 1, False)
    said = str(err.value)
    assert (
        "failed with HTTP 400: max_tokens=4096 does not fit this server: its max_model_len is 2048"
        in said
    )
    assert "cannot be greater than max_model_len=2048" in said  # vLLM's own words, quoted
    assert "Bad Request" not in said.split(" (lm-eval's whole output")[0]


@pytest.mark.server
def test_every_request_refused_is_said_in_vllms_words_however_long_lm_evals_log(standin_server):
    """Every one of 16 requests refused (max_tokens 4096 past the stand-in's max_model_len of
    2048, sent unfitted at concurrency 4): lm-eval 0.4.13 logs vLLM's body near the top of its
    output and then tens of KB of aiohttp tracebacks ("Session is closed"); the user still gets
    vLLM's own words with the fix, never the traceback's last lines (main read only the last
    8,000 bytes, where no body is left)."""
    from lab.evals import accuracy

    items = load_items("gsm8k")[:16]
    run = accuracy._prepare("ci-400-long", items, GREEDY.replace(max_tokens=4096), "gsm8k")
    base = standin_server.base_url.rstrip("/")
    with pytest.raises(EvalError) as err:
        accuracy._run_lm_eval(base, standin_server.model_name, [run], 4, False)
    said = str(err.value)
    log = (run.folder / "lm_eval.log").read_text(errors="replace")
    last = log.rfind("API request failed")
    assert last != -1 and len(log.encode()) - last > 8000  # the body is out of the last 8 KB
    assert said.startswith(
        f"lm-eval's requests to {base} failed with HTTP 400: max_tokens=4096 does not fit this "
        "server: its max_model_len is 2048 tokens (prompt + output). Pass max_tokens below 2048"
    )
    assert "Server said: max_tokens=4096 cannot be greater than max_model_len=2048" in said
    shown = said.split(" (lm-eval's whole output")[0]
    assert not any(w in shown for w in ("Bad Request", "Traceback", "Session is closed", "File "))


def test_an_unreachable_server_is_named_and_nothing_is_left(tmp_path):
    class Gone:
        base_url, model_name = "http://127.0.0.1:9/v1", "m"

    with pytest.raises(EvalError, match=r"could not score http://127\.0\.0\.1:9/v1") as err:
        evaluate(Gone(), 1, options=GREEDY, label="ci-unreachable", progress=False)
    assert "lm_eval.log" in str(err.value)
    # a server that stops answering is said so, not as aiohttp's "Session is closed"
    assert "the server does not answer (connection refused" in str(err.value)


@pytest.mark.server
def test_budget_curve_in_two_passes_keeps_the_trained_answers(standin_server, two_pass_curve):
    """The two-pass budget behind lm-eval (what the curve uses where the server drafts): each
    item's request became a first pass capped at the budget and, when cut, a second from the
    closed think block; lm-eval still scored the final content, so the trained answers stay
    right. The stand-in's server does not draft: "auto" picks the server's own budget there."""
    from helpers.chat.drafting import budget_method_for
    from helpers.server.endpoint import make_client

    items = items_by_id(ACC["trained"][:3])
    runs = two_pass_curve
    assert runs[0].settings["budget_method"] == "two_pass"
    assert runs[0].items["correct"].sum() >= 2, runs[0].items  # the answers survive the cut
    assert runs[0].generated_tokens and runs[0].generated_tokens > 0  # counted at the server
    assert budget_method_for(make_client(standin_server.base_url)) == "server"
    with pytest.raises(EvalError, match="budget_method='nope'"):
        evaluate_runs(standin_server, [("x", GREEDY)], items, budget_method="nope")


def test_a_real_checkpoint_wholly_below_the_familys_floor_is_named_with_the_paired_check():
    """A collapsed checkpoint (vllm #36094, #33560) scores far below vLLM's CI floor for the
    family: the step says so, with the causes and the paired comparison to run; a score whose
    interval reaches the floor, the stand-in and random weights say nothing."""
    import pandas as pd

    from helpers.config.run import Run
    from lab.evals.accuracy import AccuracyResult
    from lab.evals.stats import wilson
    from lab.evals.step import below_the_floor

    def scored(k, n=200):
        return AccuracyResult("nvfp4", "gsm8k", wilson(k, n), pd.DataFrame(), None, 1.0)

    said = below_the_floor(scored(20), Run("download"))
    assert said.startswith(
        "WARNING: 10.0% (20/200; 95 % Wilson interval 6.6%-14.9%) lies wholly below 69%"
    )
    assert "--moe-backend" in said and '{"compare": {"variant": "bf16"}}' in said
    assert "notebooks/quality.ipynb" in said  # where the paired comparison runs
    assert below_the_floor(scored(130), Run("download")) is None  # 65 %: its interval reaches 69 %
    assert below_the_floor(scored(180), Run("download")) is None
    assert below_the_floor(scored(0, 16), Run("stand_in")) is None
    assert below_the_floor(scored(0, 50), Run("weightless")) is None


def test_budget_plots_of_runs_whose_titles_differ_only_at_the_end_get_their_own_files(
    tmp_path, monkeypatch
):
    """The stand-in's and the weightless run's budget plots were one file (their titles differ
    past the 60 characters a file name kept), so two notebooks running at once overwrote each
    other's figure (CI, 2026-12-02: the weightless notebook read back the stand-in's title)."""
    import pandas as pd
    from PIL import Image

    from helpers.paths import slug
    from lab.evals.budget import plot_budget_curve

    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "out"))
    base = "1x H200 141GB (recipe's recommended command): accuracy against reasoning budget"
    titles = [base, base + " (CPU stand-in)", base + " (weightless)"]
    curve = pd.DataFrame({"budget": ["off", "no cap"], "accuracy": [0.5, 0.75], "low": [0.3, 0.5],
                          "high": [0.7, 0.9], "mean_tokens": [10.0, 40.0]})  # fmt: skip
    paths = [plot_budget_curve(curve, t) for t in titles]
    assert len(set(paths)) == 3 and all(len(p.stem) <= 67 for p in paths)
    for path, title in zip(paths, titles, strict=True):
        with Image.open(path) as im:
            assert im.text.get("Title") == title  # each file keeps its own figure
    assert slug("h200 nvfp4") == "h200-nvfp4" and slug("") == "out"  # short names as before


@pytest.mark.parametrize(
    "run, expected",
    [
        ({"stand_in": True}, (1024, 0.0, 1.0)),
        ({"stand_in": True, "weightless": True}, (1024, 0.0, 1.0)),
        ({"stand_in": False}, (16000, 1.0, 0.95)),
        ({"stand_in": False, "weightless": True}, (256, 1.0, 0.95)),
        # A value given wins over the run's default, a falsy one too.
        ({"stand_in": True, "max_tokens": 64, "temperature": 0.7, "top_p": 0.9}, (64, 0.7, 0.9)),
        ({"stand_in": False, "temperature": 0.0}, (16000, 0.0, 0.95)),
        ({"stand_in": False, "weightless": True, "run_max_tokens": 2000}, (2000, 1.0, 0.95)),
    ],
)
def test_request_settings_take_the_runs_defaults_and_a_value_given_wins(run, expected):
    """An eval's settings are the run's (``srv.run.defaults``: the seeds' sampling on a GPU,
    greedy on the stand-in); the run's own max_tokens next; a value given wins."""
    from helpers.config.run import Run

    weights = (
        "stand_in" if run["stand_in"] else "weightless" if run.get("weightless") else "download"
    )
    the_run = Run(weights, None, run.get("run_max_tokens"))
    given = {k: v for k, v in run.items() if k in ("max_tokens", "temperature", "top_p")}
    settings = RequestSettings.for_run(the_run, **given)
    assert (settings.max_tokens, settings.temperature, settings.top_p) == expected
    srv = type("Srv", (), {"base_url": "http://127.0.0.1:1", "run": the_run})()
    assert RequestSettings.for_run(srv, **given) == settings  # a server handle carries its run
    with pytest.raises(TypeError, match=r"RequestSettings.for_run: pass the server"):
        RequestSettings.for_run("h100")
    with pytest.raises(ValueError, match="reasoning_budget=100 is not below max_tokens=100"):
        settings.replace(max_tokens=100, reasoning_budget=100)
    with pytest.raises(TypeError, match="`thinking` must be True or False"):
        RequestSettings(thinking="no")


# ------------------------------------------------------------------------------ the notebook


@pytest.mark.notebook
@pytest.mark.server
def test_the_quality_notebook_on_the_standin(standin_server, shared_kernel, tmp_path, monkeypatch):
    """notebooks/quality.ipynb attached to the session's stand-in (left running): accuracy with
    its interval on the stand-in's 16 items (8 trained, 8 never shown), the published reference,
    the budget curve (off / 8 / no cap) with its plot; then the same stand-in in float32,
    launched, scored on the same items, paired with the first run, and stopped."""
    import re
    import time

    from helpers.paths import REPO_ROOT
    from tests.support.notebook_checks import assert_clean_outputs, real_out_notebooks
    from tests.support.proctools import group_left
    from tools import notebook_run

    out = tmp_path / "out"
    out.mkdir()
    (out / "models").symlink_to(REPO_ROOT / "out" / "models", target_is_directory=True)
    monkeypatch.setenv("COOKBOOK_OUT", str(out))
    book = REPO_ROOT / "notebooks" / "quality.ipynb"
    started = time.time()
    executed = notebook_run.run_notebook(
        book,
        {"install": False, "server_url": standin_server.url,
         "quality": {"compare": {"extra_args": {"--dtype": "float32"}}}},
        output=real_out_notebooks() / book.name, progress=False, kernel=shared_kernel,
    )  # fmt: skip
    print(f"\nquality notebook: {time.time() - started:.0f} s")
    text = executed.read_text()
    assert "Traceback" not in text and '"output_type": "error"' not in text
    assert "each item: max_tokens=1024 temperature=0.0 top_p=1.0" in text  # the stand-in's
    # the request each item is sent as, in the cell as the SDK call, its reply checked by show
    nb = json.loads(text)
    sdk = next(c for c in nb["cells"] if "llm.chat.completions.create(" in "".join(c["source"]))
    said = "".join("".join(o.get("text", "")) for o in sdk["outputs"])
    assert "reference answer: 70000" in said and "show(reply, max_tokens=" in "".join(sdk["source"])
    assert "items the stand-in was trained on: 100.0% (8/8" in text
    assert "items the stand-in was never shown: 0.0% (0/8" in text
    assert "Published reference: vLLM's CI floor" in text
    assert "Reasoning-budget curve on 16 items" in text and "no cap" in text
    assert list((out / "evals").glob("h200-*-standin/items.csv"))
    assert "McNemar exact p = " in text and "-vs-flags" in text, "step 4 did not compare"
    # --dtype float32 is played on the CPU: two commands, so no "same command" note (a variant
    # is not played there: both sides would be one command, and the note says so)
    outputs = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert "McNemar exact p = " in outputs and "Both sides served the same command" not in outputs
    assert '"Step 4 skipped' not in text  # an output line (the source has print('Step 4 ...)
    assert text.count("[vllm] launched pid") == 1
    pid = int(re.search(r"\[vllm\] launched pid (\d+)", text).group(1))
    assert not group_left(pid)  # the comparison's server stopped with its block
    assert standin_server.is_running()  # attached, left alone
    assert_clean_outputs(executed, stand_in=True, benchmarks=False)


@pytest.mark.parametrize(
    "low, high, verdict",
    [
        (-0.05, 0.20, "verdict: a tie (the interval includes 0"),
        (0.02, 0.30, "verdict: nvfp4 is more accurate"),
        (-0.30, -0.02, "verdict: bf16 is more accurate"),
    ],
)
def test_a_paired_comparison_names_a_winner_only_when_its_interval_excludes_zero(
    low, high, verdict
):
    from types import SimpleNamespace

    from lab.evals.compare import Comparison
    from lab.evals.stats import McNemar, PairedDifference

    side = lambda label: SimpleNamespace(label=label, summary=lambda: f"{label}: ...")  # noqa: E731
    c = Comparison(side("bf16"), side("nvfp4"), McNemar(3, 5, 0.73),
                   PairedDifference((low + high) / 2, low, high, 1000))  # fmt: skip
    assert c.summary().splitlines()[-1].startswith(verdict)


def test_a_reasoning_cap_that_leaves_no_answer_room_is_refused_before_the_launch():
    """quality.ipynb step 1 checks ``quality["budgets"]`` against the run's ``max_tokens``
    (before a download and a start of minutes), with the message budget_plan gives later."""
    from helpers.paths import REPO_ROOT
    from lab.evals.budget import check_budgets

    check_budgets(None, 1024)
    check_budgets(["off", 8, None], 1024)
    check_budgets([4096], None)
    with pytest.raises(
        ValueError, match=r"budget 4096 is not below max_tokens=1024: .*'off', 256, None"
    ):
        check_budgets(["off", 4096], 1024)
    source = (REPO_ROOT / "cookbook" / "topics" / "quality.py").read_text()
    assert source.index("check_budgets(") < source.index("launch_server(")


def test_more_items_than_the_shipped_set_holds_are_refused_before_the_launch():
    """quality={'items': 500} used to be cut to the 200 shipped GSM8K items without a word:
    step 1 refuses it, naming the set's size and source; the GPU item list refuses it too."""
    from helpers.config.resolve import resolve
    from helpers.paths import REPO_ROOT
    from lab.evals.accuracy import check_items, default_items

    check_items(None)
    check_items(200)
    with pytest.raises(
        ValueError, match=r"items=500: the shipped gsm8k set holds 200 items \(GSM8K"
    ):
        check_items(500)
    gpu = resolve("h200", "nvfp4")  # a GPU target's command: no stand-in
    assert len(default_items(gpu, 200)) == 200
    with pytest.raises(ValueError, match="quality=\\{'items': 200\\}"):
        default_items(gpu, 201)
    source = (REPO_ROOT / "cookbook" / "topics" / "quality.py").read_text()
    assert source.index("check_items(") < source.index("launch_server(")
