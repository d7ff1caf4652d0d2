"""The H200 drafting session's plan (tools/device/drafting_h200.py): every command it would
start is checked against vLLM 0.32.0's flag table, every drafting server names its synthetic
acceptance and where that number comes from, and a wave-1 drafter that failed comes back first
in wave 2 with the attention backend of ai-dynamo/dynamo's Lightning recipes."""

from __future__ import annotations

import importlib.util
import time

from tests.support import TESTS

REPO_ROOT = TESTS.parent


def _plan():
    spec = importlib.util.spec_from_file_location(
        "drafting_h200", REPO_ROOT / "tools" / "device" / "drafting_h200.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dry_run_commands(plan, capsys) -> dict[str, str]:
    """``{"<wave> <server>": command}`` of the plan's dry run."""
    assert plan.main(["--dry-run"]) == 0
    commands = {}
    for block in capsys.readouterr().out.split("\nwave ")[1:]:
        head, _, command = block.partition("\n")
        commands[head.split(":")[0]] = command
    return commands


def test_the_dry_run_checks_every_command_and_names_each_acceptance(capsys):
    plan = _plan()
    assert plan.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "wave 1 mtp: synthetic acceptance 3.687 at K=7 (ai-dynamo/dynamo" in out
    assert "wave 1 dflash: synthetic acceptance 3.18 at K=5 (ai-dynamo/dynamo" in out
    assert "wave 2 mtp-L1.5: synthetic acceptance 1.5 at K=7 (a chosen length" in out
    assert out.count("--kv-cache-memory-bytes 4294967296") == len(plan.WAVE1) + len(
        plan.wave2({"dspark"})
    ) + sum(
        len(w) for w in (plan.WAVE3, plan.WAVE4, plan.WAVE5, plan.WAVE6, plan.WAVE7, plan.WAVE8)
    )


def test_the_dry_run_prints_only_the_waves_asked_for(capsys):
    """--dry-run --waves 7,8 prints the break-even line's four servers, no other wave's; without
    --waves, every wave (as above)."""
    plan = _plan()
    assert plan.main(["--dry-run", "--waves", "7,8"]) == 0
    heads = [
        ln.split(":")[0] for ln in capsys.readouterr().out.splitlines() if ln.startswith("wave ")
    ]
    assert heads == [f"wave 7 {n}" for n in plan.WAVE7] + [f"wave 8 {n}" for n in plan.WAVE8]
    assert len(heads) == 4


def test_wave_three_prices_the_correctness_switch_on_both_model_runners(capsys):
    """The cost of --no-async-scheduling (the registry's drafting notes name it for vllm
    #53912) is planned, not invented: MTP with and without async scheduling, on vLLM's default
    V2 runner and on the V1 runner where the race is, each measured at the break-even points."""
    plan = _plan()
    commands = _dry_run_commands(plan, capsys)
    assert set(plan.WAVE3) <= set(plan.BREAK_EVEN_ON)
    for name in plan.WAVE3:
        command = commands[f"3 {name}"]
        assert "--speculative-config" in command and '"method":"mtp"' in command, name
        assert ("--no-async-scheduling" in command) is ("no-async" in name), name
        assert ("--async-scheduling " in command) is ("no-async" not in name), (
            name
        )  # one or the other
        assert ("VLLM_USE_V2_MODEL_RUNNER=0" in command) is ("-v1-" in name), name


def test_wave_two_retries_a_failed_drafter_beside_the_baseline_then_fills_its_slots():
    plan = _plan()
    assert list(plan.wave2(set())) == list(plan.WAVE2)
    retry = plan.wave2({"dspark", "dflash"})
    assert list(retry)[:3] == ["none", "dflash", "dspark"] and len(retry) == plan.SLOTS
    cfg = plan.server_config(*retry["dspark"], weightless=False)
    assert cfg.speculative_config["attention_backend"] == "TRITON_ATTN"
    assert cfg.speculative_config["num_speculative_tokens"] == 7
    nocache = plan.server_config(*plan.WAVE2["none-nocache"], weightless=False)
    assert (
        "--enable-prefix-caching" not in nocache.args and nocache.args["--no-enable-prefix-caching"]
    )


def test_wave_four_times_dflash_with_vllms_own_attention_backend(capsys):
    """The recipe's DFlash ``attention_backend: FLASHINFER`` dropped spec decode to piecewise CUDA
    graphs on the H200; wave 4 lets vLLM choose (no key) beside the baseline and DSpark."""
    plan = _plan()
    assert list(plan.WAVE4)[:3] == ["none", "dflash", "dspark"]
    for name in ("dflash", "dflash-k3"):
        cfg = plan.server_config(*plan.WAVE4[name], weightless=False)
        assert "attention_backend" not in cfg.speculative_config, name
        assert cfg.speculative_config["method"] == "dflash", name
    assert (
        plan.server_config(*plan.WAVE4["dflash-k3"], weightless=False).speculative_config[
            "num_speculative_tokens"
        ]
        == 3
    )
    assert "dflash-k3" in plan.BREAK_EVEN_ON
    assert plan.main(["--dry-run"]) == 0
    assert "wave 4 dflash-k3: synthetic acceptance" in capsys.readouterr().out


def test_wave_five_holds_moe_routing_equal_and_wave_six_on_another_release(capsys):
    """Weightless speed depends on where the router sends tokens (vLLM 0.32.0's dummy norms
    shrink activations; 0.33.0 and 0.34.0 set them to 1.0): wave 5 sets vLLM's own uniform
    routing simulation beside the recipe as loaded, MTP included; wave 6 repeats the baseline
    pair for ``--release``, each command checked against that release's flag table."""
    plan = _plan()
    commands = _dry_run_commands(plan, capsys)
    for wave, names in ((5, plan.WAVE5), (6, plan.WAVE6)):
        for name in names:
            uniform = (
                "export VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random"
                in commands[f"{wave} {name}"]
            )
            assert uniform is name.endswith("-uniform"), name
            assert name in plan.BREAK_EVEN_ON, name
    assert '"method":"mtp","num_speculative_tokens":7' in commands["5 mtp-uniform"].replace(" ", "")
    assert plan.main(["--dry-run", "--release", "0.34.0"]) == 0
    assert plan.RELEASE == "0.34.0"
    assert (
        plan.server_config(*plan.WAVE6["none-uniform"], weightless=False).vllm_version == "0.34.0"
    )
    # (each test loads its own copy of the script: the RELEASE set here goes with it)


def test_waves_seven_and_eight_fit_the_break_even_line_at_64_requests_with_uniform_routing(capsys):
    """The break-even line at 1, 16 and 64 requests, every server routing uniformly: the recipe
    and MTP K=7 at the registry's 3.687, then at 1.5 and 5.5 (two co-tenants a wave: an H100
    holds two), each server's points at the three concurrencies."""
    plan = _plan()
    commands = _dry_run_commands(plan, capsys)
    for wave, names in ((7, plan.WAVE7), (8, plan.WAVE8)):
        assert len(names) == 2
        for name in names:
            assert (
                "VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random" in commands[f"{wave} {name}"]
            )
            assert name in plan.BREAK_EVEN_ON
    lengths = [plan.WAVE8[n][2] for n in plan.WAVE8]
    assert lengths == [1.5, 5.5] and plan.WAVE7["mtp-uniform"][2] is None  # None: the registry's
    assert plan.WIDE_CONCURRENCIES == (1, 16, 64)


def test_a_waves_break_even_points_alternate_between_its_servers_so_a_cut_keeps_pairs():
    """Wave 7's two servers take the break-even points by concurrency, in turn (recipe at 1,
    MTP at 1, recipe at 16, ...), so a deadline after any point leaves the two with the same
    concurrencies measured, or one more on the first; the agent sweep runs once per server
    first; wave 2 and later measure no baseline of wave 1."""
    plan = _plan()
    order = plan.measure_order(list(plan.WAVE7), 7, plan.WIDE_CONCURRENCIES)
    assert order == [(n, "break-even", c) for c in (1, 16, 64) for n in plan.WAVE7]
    for cut in range(len(order) + 1):
        done = [sum(1 for n, _, _ in order[:cut] if n == name) for name in plan.WAVE7]
        assert max(done) - min(done) <= 1
    wave1 = plan.measure_order(["none", "mtp", "mtp-L1.5"], 1, (1, 16))
    assert wave1 == [("none", "agent", None), ("mtp-L1.5", "break-even", 1),
                     ("mtp-L1.5", "break-even", 16)]  # fmt: skip
    assert plan.measure_order(["none", "mtp-L5.5"], 2, (1,)) == [("mtp-L5.5", "break-even", 1)]


def test_only_keeps_the_named_servers_of_each_wave_and_rejects_an_unknown_name():
    """``--only`` (``DRAFT_ONLY`` in h200_drafting.sh) fits a wave to a GPU that holds fewer
    co-tenants; a misspelled name stops the run instead of skipping every wave."""
    import pytest

    plan = _plan()
    pair = plan.only(plan.WAVE5, "none-as-loaded,none-uniform")
    assert list(pair) == ["none-as-loaded", "none-uniform"]
    assert plan.only(plan.WAVE6, "none-as-loaded,none-uniform") == plan.WAVE6
    assert plan.only(plan.WAVE1, "none-as-loaded,none-uniform") == {}
    assert plan.only(plan.WAVE5, None) == plan.WAVE5
    with pytest.raises(SystemExit, match="none-unifrom"):
        plan.only(plan.WAVE5, "none-unifrom")


def test_wave_nine_runs_each_server_alone_with_room_for_64_requests(capsys, monkeypatch, tmp_path):
    """Waves 7 and 8's MTP servers ran 15 requests at once in a 4 GiB cache; wave 9 has the same
    four servers (uniform routing, MTP K=7 at 3.687, 5.5 and 1.5) each with a 24 GiB cache, runs
    them one at a time in that order (a cut keeps the recipe and the registry's length) and
    measures 16 and 64 requests."""
    plan = _plan()
    commands = _dry_run_commands(plan, capsys)
    assert list(plan.WAVE9) == ["none-solo", "mtp-solo", "mtp-L5.5-solo", "mtp-L1.5-solo"]
    for name in plan.WAVE9:
        command = commands[f"9 {name}"]
        assert "--kv-cache-memory-bytes 25769803776" in command
        assert "--kv-cache-memory-bytes 4294967296" not in command
        assert "VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random" in command
    assert [plan.WAVE9[n][2] for n in plan.WAVE9] == [None, None, 5.5, 1.5]
    assert plan.measure_order(["none-solo"], 9, plan.SOLO_CONCURRENCIES) == [
        ("none-solo", "break-even", 16),
        ("none-solo", "break-even", 64),
    ]
    started = []  # the servers each run_wave call gets: one at a time
    monkeypatch.setattr(plan, "run_wave", lambda i, wave, *a: started.append((i, list(wave))))
    monkeypatch.setattr(plan, "STAND_IN", True)  # no host-memory watcher thread
    deadline = str(time.time() + 3600)
    assert plan.main(["--out", str(tmp_path), "--deadline", deadline, "--waves", "9"]) == 0
    assert started == [(9, [n]) for n in plan.WAVE9]
