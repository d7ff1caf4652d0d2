"""The recipe registry resolves, obeys the seeds' rules, renders, and passes vLLM's parser."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from helpers.config import flagcheck, load, serveconfig
from helpers.config import resolve as recipes
from helpers.config import schema as registry
from helpers.errors import FlagError, RecipeError

# Every deployment target the seeds name, by registry key.
SEED_TARGETS = {
    "h100": "1x H100 NVFP4 throughput (recipe hopper override, launch post)",
    "h100-bf16": "1x H100 BF16 (launch post command)",
    "h200": "1x H200 (recipe recommended command)",
    "h100-baseten-throughput": "Baseten H100 throughput preset",
    "a100": "A100 / Ampere W4A16",
    "l40s": "L40S",
    "rtx-pro-6000": "RTX PRO 6000",
    "rtx-50xx": "GeForce RTX 50xx",
    "dgx-spark": "DGX Spark GB10",
    "dgx-station-gb300": "DGX Station GB300",
    "jetson": "Jetson",
    "b200": "B200 / GB200",
    "b300": "B300 / GB300",
    "h100x8-bf16": "8x H100 BF16 TP+EP+MTP",
}


def _argv_pairs(cfg):
    return dict(serveconfig._pairs(cfg.cli_flags()))


def _all_combinations():
    reg = load.load_registry()
    for name in reg.targets:
        for variant in reg.target_variants(name):
            for mode in reg.target_modes(name):
                yield name, variant, mode


def _resolve_or_rule(target, variant, mode):
    """Resolve, or return the RecipeError a seed rule raises for this combination."""
    try:
        cfg = recipes.resolve(target, variant, mode)
    except RecipeError as exc:
        return None, exc
    if cfg.stand_in:
        cfg = cfg.with_model("/tmp/standin-model")
    return cfg, None


def test_every_seed_target_is_in_the_registry():
    assert set(SEED_TARGETS) <= set(list(load.load_registry().targets))
    assert "cpu" in list(load.load_registry().targets)


@pytest.mark.parametrize("target", sorted(SEED_TARGETS))
def test_seed_target_resolves_and_renders_three_ways(target):
    cfg = recipes.resolve(target)
    shell = cfg.shell_command()
    assert f"vllm serve {cfg.model}" in shell
    docker = cfg.docker_command()
    assert cfg.docker_image in docker and "--gpus all" in docker
    truss = yaml.safe_load(cfg.truss_config())
    assert truss["base_image"]["image"] == cfg.docker_image
    assert truss["weights"][0]["source"].startswith(f"hf://{cfg.model}")
    # The rendered shell command round-trips to the same argv.
    cmd_line = shell.splitlines()[len(cfg.env) :]
    assert shlex.split(" ".join(cmd_line).replace("\\\n", " ").replace(" \\ ", " "))[:3] == [
        "vllm",
        "serve",
        cfg.model,
    ]
    rows = cfg.reference_table()
    assert {r["flag"] for r in rows} >= {"--served-model-name"}
    assert all(r["why"] for r in rows if not r["flag"].startswith("env "))


# The only (target, variant, speculative mode) combinations the registry offers that a rule
# refuses, with the rule's words. DFlash and DSpark drafts exist for the NVFP4 checkpoint
# only (recipe), so every target that allows BF16 and lists those modes refuses that pair.
_NVFP4_ONLY_DRAFT = "drafts are published for nvfp4 only, not bf16: use variant='nvfp4'"
EXPECTED_REFUSALS = {
    ("h100", "bf16", "dflash"): _NVFP4_ONLY_DRAFT,
    ("h100", "bf16", "dspark"): _NVFP4_ONLY_DRAFT,
    ("h200", "bf16", "dflash"): _NVFP4_ONLY_DRAFT,
    ("h200", "bf16", "dspark"): _NVFP4_ONLY_DRAFT,
    ("a100", "bf16", "dflash"): _NVFP4_ONLY_DRAFT,
    ("a100", "bf16", "dspark"): _NVFP4_ONLY_DRAFT,
    ("dgx-station-gb300", "bf16", "dflash"): _NVFP4_ONLY_DRAFT,
    ("dgx-station-gb300", "bf16", "dspark"): _NVFP4_ONLY_DRAFT,
    ("b200", "bf16", "dflash"): _NVFP4_ONLY_DRAFT,
    ("b200", "bf16", "dspark"): _NVFP4_ONLY_DRAFT,
    ("b300", "bf16", "dflash"): _NVFP4_ONLY_DRAFT,
    ("b300", "bf16", "dspark"): _NVFP4_ONLY_DRAFT,
    ("rtx-pro-6000", "bf16", "dflash"): _NVFP4_ONLY_DRAFT,
    ("rtx-pro-6000", "bf16", "dspark"): _NVFP4_ONLY_DRAFT,
    ("dgx-spark", "bf16", "dflash"): _NVFP4_ONLY_DRAFT,
    ("dgx-spark", "bf16", "dspark"): _NVFP4_ONLY_DRAFT,
}


def test_expected_refusals_are_combinations_the_registry_offers():
    assert set(EXPECTED_REFUSALS) <= set(_all_combinations())


@pytest.mark.parametrize("target,variant,mode", list(_all_combinations()))
def test_every_combination_is_accepted_by_vllm_parser_or_refused_by_a_rule(target, variant, mode):
    cfg, rule = _resolve_or_rule(target, variant, mode)
    expected = EXPECTED_REFUSALS.get((target, variant, mode))
    if expected is not None:
        assert rule is not None, f"{target}/{variant}/{mode} should be refused: {expected}"
        assert expected in str(rule)
        return
    assert rule is None, f"{target}/{variant}/{mode} is a valid combination but was refused: {rule}"
    cfg.validate()
    json_args = [v for f, v in _argv_pairs(cfg).items() if f == "--speculative-config"]
    for value in json_args:
        assert json.loads(value)["method"] == mode


def test_h200_matches_the_recipe_recommended_command():
    """Seed 001's recommended_command argv, flag for flag (plus our pinned revision/name)."""
    recipe_argv = [
        "--mamba-backend", "flashinfer", "--mamba-cache-mode", "align", "--enable-prefix-caching",
        "--kv-cache-dtype", "fp8", "--tensor-parallel-size", "1", "--quantization", "modelopt_fp4",
        "--moe-backend", "humming", "--linear-backend", "humming", "--mamba-ssu-algorithm",
        "horizontal", "--async-scheduling", "--max-num-seqs", "256", "--max-num-batched-tokens",
        "32768", "--reasoning-parser", "nemotron_v3", "--enable-auto-tool-choice",
        "--tool-call-parser", "qwen3_coder", "--mamba-ssm-cache-dtype", "float16",
        "--enable-mamba-cache-stochastic-rounding", "--mamba-cache-philox-rounds", "5",
    ]  # fmt: skip
    cfg = recipes.resolve("h200", vllm_version="0.28.0")  # the recipe's own release and image
    ours = _argv_pairs(cfg)
    theirs = dict(serveconfig._pairs(recipe_argv))
    assert {k: ours[k] for k in theirs} == theirs
    assert set(ours) - set(theirs) == {"--served-model-name", "--revision"}
    assert cfg.model == "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"
    assert cfg.docker_image == "vllm/vllm-openai:v0.28.0"


def test_baseten_preset_pins_verifier_and_drafter_revisions():
    cfg = recipes.resolve("h100-baseten-throughput")
    spec = cfg.speculative_config
    assert spec == {
        "method": "dflash",
        "model": "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4-DFlash",
        "num_speculative_tokens": 3,
        "revision": "7fc1f1ff4b82b917efbd0710df0872c2bb89caa5",
    }
    assert cfg.revision == "0dcd680e5585c791728c83342b311d0a0026dbeb"
    pairs = _argv_pairs(cfg)
    assert pairs["--max-num-seqs"] == "512" and pairs["--max-model-len"] == "1048576"
    assert cfg.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
    truss = yaml.safe_load(cfg.truss_config())
    assert [w["source"].split("@")[1] for w in truss["weights"]] == [
        "0dcd680e5585c791728c83342b311d0a0026dbeb",
        "7fc1f1ff4b82b917efbd0710df0872c2bb89caa5",
    ]
    assert "/models/nemotron-3.5-lightning-dflash" in truss["docker_server"]["start_command"]


def test_overrides_layer_in_order():
    # hopper override replaces the variant's marlin MoE backend with humming
    assert recipes.resolve("h100").args["--moe-backend"] == "humming"
    assert recipes.resolve("l40s").args["--moe-backend"] == "marlin"
    # DSpark on Spark drafts 7 tokens (recipe hardware override)
    assert recipes.resolve("dgx-spark").speculative_config["num_speculative_tokens"] == 7
    # MTP on Blackwell uses the triton MoE backend for the draft (recipe override)
    assert recipes.resolve("b200", speculative="mtp").speculative_config["moe_backend"] == "triton"
    # BF16 adds the fast tokenizer env and its pip extra
    bf16 = recipes.resolve("h100-bf16")
    assert bf16.env["VLLM_USE_FASTOKENS"] == "1" and bf16.pip_extras == ["fastokens>=0.2.0"]
    # extra args override and remove
    cfg = recipes.resolve("h100", extra_args={"--max-num-seqs": 64, "--async-scheduling": None})
    assert cfg.args["--max-num-seqs"] == 64 and "--async-scheduling" not in cfg.args


@pytest.mark.parametrize(
    "kwargs,words",
    [
        (dict(target="h100-bf16", variant="bf16", speculative="dflash"), "published for nvfp4"),
        (dict(target="h100", variant="bf16", speculative="dspark"), "use variant='nvfp4'"),
        (
            dict(
                target="h100x8-bf16", variant="nvfp4", extra_args={"--enable-expert-parallel": None}
            ),
            "add --enable-expert-parallel",
        ),
        (dict(target="l40s", variant="bf16"), "Valid variants: nvfp4"),
        # vLLM 0.32.0 refuses it at start-up (heads % tp, config/model.py); the stand-in,
        # which serves no tensor parallelism, ran it and the plan said FITS
        (
            dict(target="l4", extra_args={"--tensor-parallel-size": 3}),
            "--tensor-parallel-size 3 does not divide the model's 32 attention heads",
        ),
        (dict(target="rtx-50xx", variant="bf16"), "Valid variants: nvfp4"),
        (
            dict(target="b200", extra_args={"--quantization": "modelopt_fp4"}),
            "on Blackwell remove it",
        ),
        (
            dict(target="h100-bf16", extra_args={"--quantization": "modelopt_fp4"}),
            "drop the flag (extra_args={'--quantization': None}), or use variant='nvfp4'",
        ),
        (
            dict(target="h100x8-bf16", extra_args={"--quantization": "modelopt"}),
            "--quantization modelopt is for the ModelOpt NVFP4 checkpoint, but variant 'bf16'",
        ),
        (
            dict(target="h200", extra_args={"--mamba-backend": None}),
            "keep --mamba-backend flashinfer, or drop the fast_ssm_cache feature",
        ),
        (
            dict(target="h100", speculative="nonsense"),
            "Unknown speculative mode 'nonsense'. Did you mean 'none'? Valid speculative modes: none, mtp",
        ),
        (dict(target="h1000"), "Valid targets: h100"),
        (dict(target="h100", features=["turbo"]), "Valid features: reasoning"),
        (dict(target="h100", variant="standin"), "Valid variants"),
    ],
)
def test_rules_refuse_with_the_fix(kwargs, words):
    with pytest.raises(RecipeError) as err:
        recipes.resolve(**kwargs)
    assert words in str(err.value)


def test_bf16_memory_minimum_per_replica():
    reg = load.load_registry()
    reg.targets["small"] = reg.targets["l40s"].model_copy(update={"variants": ["bf16", "nvfp4"]})
    with pytest.raises(
        RecipeError, match=r"needs at least 72 GB .* has 48 GB: use the NVFP4 variant"
    ):
        recipes.resolve("small", "bf16", registry=reg)
    # two L40S in tensor parallel hold one BF16 replica
    cfg = recipes.resolve("small", "bf16", extra_args={"--tensor-parallel-size": 2}, registry=reg)
    assert cfg.gpu_count == 2


def test_dspark_drafts_fewer_tokens_than_its_block():
    """vLLM 0.32.0 reads the DSpark drafter's block_size only when num_speculative_tokens is
    unset (vllm/config/speculative.py), and published configurations draft 1, 3 and 7 tokens
    with a block of 8 (ai-dynamo/dynamo's Lightning recipes): no rule refuses them."""
    reg = load.load_registry()
    assert reg.speculative["dspark"].drafter.block_size == 8
    reg.targets["h100"].speculative_overrides = {
        "dspark": registry.SpeculativeOverride(
            config=registry.SpeculativeConfigLayer(num_speculative_tokens=1)
        )
    }
    cfg = recipes.resolve("h100", speculative="dspark", registry=reg)
    assert cfg.speculative_config["num_speculative_tokens"] == 1


def test_misspelled_flag_is_reported_by_name_before_launch():
    cfg = recipes.resolve(
        "h100", extra_args={"--mamba-ssu-algorythm": "horizontal"}, vllm_version="0.28.0"
    )
    with pytest.raises(FlagError) as err:
        cfg.validate()
    assert err.value.flags == ["--mamba-ssu-algorythm"]
    assert "--mamba-ssu-algorythm" in str(err.value) and "0.28.0" in str(err.value)


def test_bad_choice_and_bad_speculative_key_are_reported():
    with pytest.raises(FlagError) as err:
        recipes.resolve("h100", extra_args={"--moe-backend": "hummingbird"}).validate()
    assert err.value.flags == ["--moe-backend"] and "hummingbird" in str(err.value)
    bad_spec = {"--speculative-config": {"method": "mtp", "num_speculative_tokenz": 3}}
    with pytest.raises(FlagError, match="num_speculative_tokenz"):
        recipes.resolve("h100", extra_args=bad_spec).validate()


def test_every_registry_flag_has_a_why():
    reasons = load.flag_reasons()
    reg = load.load_registry()
    flags = set(reg.model.base_args)
    for v in reg.variants.values():
        flags |= set(v.args)
        for ov in v.hardware_overrides.values():
            flags |= set(ov.args)
    for f in reg.features.values():
        flags |= set(f.args)
    for t in reg.targets.values():
        flags |= set(t.args)
    assert flags - set(reasons) == set()


def test_standin_config_keeps_parsers_and_maps_speculation_to_ngram_on_request(tmp_path):
    real = recipes.resolve("h100", speculative="dspark")
    sim = recipes.standin_config(real, tmp_path)
    assert sim.target == "cpu" and sim.model == str(tmp_path) and sim.revision is None
    pairs = _argv_pairs(sim)
    assert (
        pairs["--reasoning-parser"] == "nemotron_v3"
        and pairs["--tool-call-parser"] == "qwen3_coder"
    )
    assert "--mamba-backend" not in pairs  # GPU-only base args do not reach the CPU build
    # no drafting by default: on the CPU build n-gram drafting is not lossless with Mamba-2
    assert sim.speculative == "none" and sim.speculative_config is None
    sim.validate()
    drafted = recipes.standin_config(real, tmp_path, drafting=True)
    assert drafted.speculative_config["method"] == "ngram"
    drafted.validate()
    assert (
        recipes.standin_config(recipes.resolve("h100"), tmp_path, drafting=True).speculative_config
        is None
    )


def test_nvfp4_only_flags_stay_off_the_bf16_checkpoint():
    """a100's W4A16 flags belong to the NVFP4 checkpoint (overview's Ampere command)."""
    nvfp4 = _argv_pairs(recipes.resolve("a100", "nvfp4"))
    assert nvfp4["--quantization"] == "modelopt_fp4"
    assert nvfp4["--moe-backend"] == "humming" and nvfp4["--linear-backend"] == "humming"
    bf16 = recipes.resolve("a100", "bf16")
    assert bf16.model == "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16"
    assert "--quantization" not in bf16.args and "--linear-backend" not in bf16.args
    # the BF16 variant's FlashInfer CUTLASS MoE needs SM90+: on the A100 (SM80) vLLM's default
    assert "--moe-backend" not in bf16.args
    # Hopper: Triton, vLLM's own SM90 choice (model.choices.bf16_moe_backend_hopper); the
    # recipe's flashinfer_cutlass on Blackwell; a target's own seed flags win over both
    assert recipes.resolve("h100", "bf16").args["--moe-backend"] == "triton"
    assert recipes.resolve("h200", "bf16").args["--moe-backend"] == "triton"
    assert recipes.resolve("b200", "bf16").args["--moe-backend"] == "flashinfer_cutlass"
    assert recipes.resolve("h100-bf16").args["--moe-backend"] == "humming"  # launch post
    assert recipes.resolve("h100x8-bf16").args["--moe-backend"] == "flashinfer_cutlass"  # vendor
    for target, variant, mode in _all_combinations():
        cfg, rule = _resolve_or_rule(target, variant, mode)
        if rule is None and variant != "nvfp4":
            quant = str(cfg.args.get("--quantization", ""))
            assert not quant.startswith("modelopt"), (target, variant, mode, quant)


def test_modelopt_quantization_on_bf16_is_refused_by_check_rules():
    cfg = recipes.resolve("a100", "bf16").with_args({"--quantization": "modelopt_fp4"})
    with pytest.raises(RecipeError, match=r"drop the flag .*or use variant='nvfp4'"):
        recipes.check_rules(cfg)
    recipes.check_rules(recipes.resolve("a100", "nvfp4"))  # the NVFP4 checkpoint keeps it


def test_misspelled_speculative_method_is_reported_with_the_valid_ones():
    bad_spec = {"--speculative-config": {"method": "dsprak", "num_speculative_tokens": 3}}
    with pytest.raises(FlagError) as err:
        recipes.resolve("h100", extra_args=bad_spec).validate()
    assert err.value.flags == ["--speculative-config"]
    msg = str(err.value)
    assert "'dsprak'" in msg
    valid = flagcheck.speculative_methods()
    assert {"mtp", "dflash", "dspark", "ngram"} <= set(valid)
    assert f"valid methods: {', '.join(valid)}" in msg
    # every method the registry uses is one the installed vLLM knows
    for mode in load.load_registry().speculative.values():
        if mode.config is not None:
            assert mode.config.method in valid


def _serve_flags(tokens: list[str], cfg) -> list[str]:
    """``[MODEL, *flags]`` out of a rendered command: after ``serve``, else after the image."""
    start = tokens.index("serve") + 1 if "serve" in tokens else tokens.index(cfg.docker_image) + 1
    return tokens[start:]


def _split_rendered(text: str) -> list[str]:
    # A shell drops backslash-newline (line continuation) before splitting words.
    return shlex.split(text.replace("\\\n", " "))


def _without_host_port(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("--host", "--port"):
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


@pytest.mark.parametrize("target", list(load.load_registry().targets))
def test_every_rendered_command_is_accepted_by_vllm_parser(target):
    cfg = recipes.resolve(target)
    if cfg.stand_in:
        cfg = cfg.with_model("/tmp/standin-model")
    rendered = {"shell": cfg.shell_command()}
    if cfg.docker_image:
        rendered["docker"] = cfg.docker_command()
        rendered["truss"] = yaml.safe_load(cfg.truss_config())["docker_server"]["start_command"]
    for name, text in rendered.items():
        argv = _serve_flags(_split_rendered(text), cfg)
        flagcheck.validate_argv(argv, target_version=cfg.vllm_version)
        if name == "truss":  # weights are served from their mounts
            assert argv[0] == f"/models/{cfg.served_model_name}", name
        else:  # the rendering carries exactly the config's flags
            assert _without_host_port(argv) == [cfg.model, *cfg.cli_flags()], name


@pytest.mark.parametrize("target", ["h100", "h200"])
def test_drafting_on_hopper_leaves_the_ssu_algorithm_to_flashinfer(target):
    """The Hopper recipe's --mamba-ssu-algorithm horizontal is for one token per step; drafting
    verifies several, and FlashInfer's multi-token kernel has horizontal only on SM100+ (the
    H200 start-up that failed: tests/data/logs/ssu_mtp_sm90.log). Drafting modes drop the flag
    (FlashInfer's auto picks simple); no drafting keeps the recipe's."""
    assert recipes.resolve(target).args["--mamba-ssu-algorithm"] == "horizontal"
    for mode in ("mtp", "dflash", "dspark"):
        cfg = recipes.resolve(target, speculative=mode)
        assert "--mamba-ssu-algorithm" not in cfg.cli_flags(), mode
        assert cfg.args["--mamba-backend"] == "flashinfer"
    # an explicit choice still wins (extra_args are layered last)
    cfg = recipes.resolve(target, speculative="mtp", extra_args={"--mamba-ssu-algorithm": "simple"})
    assert cfg.args["--mamba-ssu-algorithm"] == "simple"


def test_a_served_name_or_revision_given_as_a_flag_replaces_the_registrys_once():
    """extra_args={"--served-model-name": ...} rendered a second flag after the registry's."""
    cfg = recipes.resolve(
        "h200", extra_args={"--served-model-name": "lightning", "--revision": "abc123"}
    )
    argv = cfg.serve_argv()
    assert argv.count("--served-model-name") == 1 and argv.count("--revision") == 1
    assert (cfg.served_model_name, cfg.revision) == ("lightning", "abc123")
    assert argv[argv.index("--served-model-name") + 1] == "lightning"
    assert recipes.resolve("h200").with_args({"--served-model-name": "x"}).cli_flags()[:2] == [
        "--served-model-name",
        "x",
    ]


def test_a_flag_of_several_values_renders_each_as_its_own_argument():
    """``--lora-modules a=P b=Q`` (nargs='+' in vLLM's parser): a list value is several argv
    items after one flag, in the argv and the shell command (vLLM's parser takes them:
    tests/lab/adapters/test_check.py)."""
    cfg = recipes.resolve("cpu").with_args({"--lora-modules": ["a=/p/a", "b=/p b"]})
    argv = cfg.serve_argv()
    i = argv.index("--lora-modules")
    assert argv[i + 1 : i + 3] == ["a=/p/a", "b=/p b"]
    assert "--lora-modules a=/p/a 'b=/p b'" in cfg.shell_command()
