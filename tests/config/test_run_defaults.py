"""Each mode's defaults in one table (helpers.config.run): consistent with each other, and
what the notebooks and the evals read; the run object that carries the mode from the
notebook's parameters to every step, and the rule that nothing else takes the mode flags."""

from __future__ import annotations

import pytest

from helpers.config.run import MODES, Run, run_defaults, run_of
from lab.evals.budget import budget_plan
from lab.evals.settings import RequestSettings


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("max_tokens", [None, 1, 2, 31, 256, 512, 16000])
def test_every_budget_of_every_mode_fits_its_max_tokens(mode, max_tokens):
    """The step-10 failure of 2026-12-01 (a budget of 1024 against the weightless 256) cannot
    come back: each mode's curve builds under its own ``max_tokens`` or the user's."""
    d = run_defaults(mode, max_tokens)
    tokens = max_tokens or d.max_tokens
    plan = budget_plan(d.budgets, RequestSettings(max_tokens=tokens))  # raises on a bad budget
    if tokens < 4:  # no room for a cap: off and no cap only
        assert [name for name, _ in plan] == ["off", "no cap"]
    else:
        assert [name for name, _ in plan] == ["off", str(d.budgets[1]), "no cap"]
        assert 1 <= d.budgets[1] <= tokens // 4
    assert d.budget_items <= d.eval_items


def test_the_modes_defaults_are_the_seeds_and_the_notebooks():
    gpu, weightless, standin = (run_defaults(m) for m in ("download", "weightless", "stand_in"))
    assert (gpu.max_tokens, gpu.temperature, gpu.top_p, gpu.budgets) == (
        16000,
        1.0,
        0.95,
        ("off", 1024, None),
    )
    assert (weightless.max_tokens, weightless.budgets, weightless.eval_items) == (
        256,
        ("off", 64, None),
        50,
    )
    assert weightless.bench_concurrencies == gpu.bench_concurrencies == (1, 16, 64, 256)
    assert (standin.temperature, standin.budgets, standin.bench_concurrencies) == (
        0.0,
        ("off", 8, None),
        (1, 2, 4),
    )
    assert weightless.noise and not gpu.noise and not standin.noise
    opts = RequestSettings.for_run(Run("weightless"))
    assert (opts.max_tokens, opts.temperature, Run("weightless").noise) == (256, 1.0, True)


def test_prepare_reads_the_notebooks_parameters_into_one_run():
    """The stand-in wins over weightless; server_url attaches; each parameter is passed by
    name; the run carries the defaults every step reads."""
    from helpers.config.resolve import resolve
    from helpers.weights.prepare import prepare

    cfg = resolve("h100")
    assert prepare(cfg).mode == "download" and prepare(cfg).target is cfg
    both = prepare(cfg, stand_in=True, weightless=True)
    assert (both.mode, both.stand_in, both.weightless, both.tag) == (
        "stand_in",
        True,
        False,
        "-standin",
    )
    attached = prepare(cfg, weightless=True, server_url="http://10.0.0.5:8000")
    assert (attached.mode, attached.weights, attached.attached) == ("attach", "weightless", True)
    assert attached.defaults == run_defaults("weightless") and attached.noise
    sized = prepare(cfg, max_tokens=64)
    assert (
        sized.defaults.budgets == ("off", 16, None)
        and RequestSettings.for_run(sized).max_tokens == 64
    )
    other = sized.for_target(resolve("h100-bf16"))
    assert (other.weights, other.max_tokens, other.served, other.server_url) == (
        "download",
        64,
        None,
        None,
    )
    assert "random weights" in prepare(cfg, weightless=True).describe()
    with pytest.raises(ValueError, match=r"max_tokens=0: pass a whole number of tokens >= 1"):
        prepare(cfg, max_tokens=0)


def test_max_tokens_at_or_above_the_served_context_is_refused_when_the_run_is_fetched():
    """The stand-in serves --max-model-len 2048: max_tokens=5000 used to reach vLLM and come
    back as the SDK's BadRequestError (400) after the launch; fetch() names it with the fix."""
    from helpers.config.resolve import resolve
    from helpers.weights.prepare import fetch, prepare

    ask = lambda n: fetch(prepare(resolve("h200"), stand_in=True, max_tokens=n))  # noqa: E731
    with pytest.raises(
        ValueError,
        match=r"max_tokens=5000 is not below the served --max-model-len 2048 .*pass max_tokens below 2048",
    ):
        ask(5000)
    with pytest.raises(ValueError, match="--max-model-len 2048"):
        ask(2048)
    assert ask(1024).max_tokens == 1024


def test_a_server_without_a_prepared_run_gets_one_from_what_it_serves():
    """A server launched from a plain config (tests, tools) still has srv.run: the stand-in
    from the config's own flag, weightless from --load-format dummy, else the checkpoint."""
    from types import SimpleNamespace

    from helpers.config.resolve import resolve
    from helpers.server.vllm_server import VLLMServer

    assert run_of(resolve("cpu")).stand_in
    assert run_of(resolve("h100").with_args({"--load-format": "dummy"})).weightless
    assert run_of(VLLMServer(resolve("h100"))).weights == "download"
    assert run_of(SimpleNamespace(base_url="http://x", config=None)).weights == "download"
    given = Run("stand_in")
    assert run_of(SimpleNamespace(base_url="http://x", run=given)) is given
    with pytest.raises(TypeError, match="pass the server"):
        run_of(None)


def test_launch_server_refuses_a_run_with_nothing_fetched():
    from helpers.config.resolve import resolve
    from helpers.errors import CookbookError
    from helpers.server.launch import launch_server
    from helpers.weights.prepare import prepare

    with pytest.raises(CookbookError, match=r"run = fetch\(run\)"):
        launch_server(prepare(resolve("h100")))


def _public_functions():
    """(module, qualified name, parameter names) of every public function and method of
    ``helpers`` and ``lab`` (a class's methods when the class is public)."""
    import ast

    from helpers.paths import REPO_ROOT

    paths = [p for root in ("helpers", "lab") for p in sorted((REPO_ROOT / root).rglob("*.py"))]
    for path in paths:
        module = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        scopes = [("", tree)] + [
            (n.name + ".", n) for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")
        ]  # fmt: skip
        for prefix, scope in scopes:
            for node in scope.body:
                if isinstance(
                    node, (ast.FunctionDef, ast.AsyncFunctionDef)
                ) and not node.name.startswith("_"):
                    a = node.args
                    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                    yield module, prefix + node.name, names


def test_no_public_signature_but_prepare_takes_the_mode_flags():
    """The mode travels as one run object (srv.run), not as stand_in= / weightless= flags."""
    seen = list(_public_functions())
    assert any(name == "RequestSettings.for_run" for _, name, _ in seen)  # methods are scanned
    takers = [
        f"{m}.{name}" for m, name, params in seen
        if {"stand_in", "weightless"} & set(params) and f"{m}.{name}" != "helpers.weights.prepare.prepare"
    ]  # fmt: skip
    assert takers == [], f"these take the mode flags; read the run instead (run_of): {takers}"


def _names_outside_attributes(source: str) -> set[str]:
    """The names a code cell uses, attribute names (``run.stand_in``) left out."""
    import io
    import tokenize

    out, prev = set(), None
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
        if tok.type == tokenize.NAME and not (
            prev and prev.type == tokenize.OP and prev.string == "."
        ):
            out.add(tok.string)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT):
            prev = tok
    return out


def test_no_notebook_cell_but_the_parameters_cell_names_the_mode_flags():
    """Every committed notebook: the parameters cell declares stand_in / weightless; after it,
    the cell that calls prepare(cfg, stand_in=stand_in, ...) passes them on (and may check
    their types) and every other cell reads the run."""
    import nbformat

    from helpers.paths import REPO_ROOT

    offenders = []
    for path in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or "parameters" in cell.metadata.get("tags", []):
                continue
            named = {"stand_in", "weightless"} & _names_outside_attributes(cell.source)
            if named and "prepare(" not in cell.source:
                offenders.append(f"{path.name} cell {i}: {sorted(named)}")
    assert offenders == []
    assert _names_outside_attributes("x = run.stand_in\n%pip install y\n") == {"x", "run"}
    assert "stand_in" in _names_outside_attributes("if stand_in:\n    pass\n")


def test_a_budget_at_max_tokens_is_refused_by_name_with_the_fix():
    with pytest.raises(
        ValueError, match=r"budget 256 is not below max_tokens=256.*'budgets': \['off', 64, None\]"
    ):
        budget_plan(["off", 256, None], RequestSettings(max_tokens=256))
    with pytest.raises(ValueError, match="is not one of download, weightless, stand_in"):
        run_defaults("gpu")


def test_a_sweep_on_dummy_weights_knows_it_from_the_served_command(tmp_path):
    """The sweep says "expected on dummy weights" instead of ERROR for a drafter that accepts
    nothing when the server serves ``--load-format dummy`` (seen as ERROR lines on an H200,
    2026-12-02); a real checkpoint or an attached URL keeps the ERROR."""
    from types import SimpleNamespace

    from helpers.bench.sweep import serves_dummy_weights
    from helpers.config.resolve import resolve
    from helpers.weights.weightless import arch_config, build_arch_model

    weightless = arch_config(resolve("h200"), build_arch_model("nvfp4", tmp_path / "arch"))
    assert serves_dummy_weights(SimpleNamespace(config=weightless))
    assert not serves_dummy_weights(SimpleNamespace(config=resolve("h200")))
    assert not serves_dummy_weights(SimpleNamespace(base_url="http://10.0.0.9:8000"))
