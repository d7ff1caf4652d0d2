"""The registry's schema (helpers.config.schema, helpers.config.load): typed, unknown keys and values refused with the fix."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from helpers.config import load
from helpers.config import load as registry_load
from helpers.config import resolve as recipes
from helpers.config import schema as registry
from helpers.errors import RecipeError, RegistryError
from helpers.paths import REPO_ROOT

RAW = yaml.safe_load((REPO_ROOT / "cookbook" / "recipe.yaml").read_text())


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_real_registry_loads_typed():
    reg = load.load_registry()
    assert isinstance(reg, registry.Registry)
    assert reg.targets["h100"].gpu.arch == "hopper"
    assert reg.targets["h100"].overrides == ["hopper"]
    assert reg.speculative["dflash"].drafter.revision == "7fc1f1ff4b82b917efbd0710df0872c2bb89caa5"
    assert reg.model.architecture.hybrid_override_pattern.count("*") == 6
    assert reg.deployments["replicas"].layout == "replicas"
    assert set(reg.gpu_targets()) == set(reg.targets) - {"cpu"}
    assert len(load.flag_reasons()) > 20


def test_load_registry_returns_a_private_copy():
    reg = load.load_registry()
    reg.targets["h100"].args["--max-num-seqs"] = 1
    assert "--max-num-seqs" not in load.load_registry().targets["h100"].args


def test_misspelled_key_names_the_file_the_key_path_and_the_closest_key(tmp_path):
    data = copy.deepcopy(RAW)
    data["targets"]["h100"]["varaint"] = data["targets"]["h100"].pop("variant")
    path = _write(tmp_path, data)
    with pytest.raises(RegistryError) as err:
        load.load_registry(path)
    msg = str(err.value)
    assert str(path) in msg and err.value.source == str(path)
    assert "targets.h100.varaint: unknown key 'varaint' (did you mean 'variant'?)" in msg
    assert "targets.h100: required key missing" not in msg or "targets.h100.variant" in msg
    assert isinstance(err.value, RecipeError)  # one family: callers catching RecipeError still do


def test_misspelled_nested_key_is_refused(tmp_path):
    data = copy.deepcopy(RAW)
    data["speculative"]["mtp"]["config"]["num_speculative_tokenz"] = 3
    with pytest.raises(
        RegistryError,
        match=r"speculative\.mtp\.config\.num_speculative_tokenz: unknown key .*did you mean 'num_speculative_tokens'",
    ):
        load.load_registry(_write(tmp_path, data))


def test_out_of_vocabulary_value_lists_the_allowed_values(tmp_path):
    data = copy.deepcopy(RAW)
    data["targets"]["h100"]["gpu"]["arch"] = "hoper"
    data["targets"]["a100"]["overrides"] = ["ampre"]
    with pytest.raises(RegistryError) as err:
        load.load_registry(_write(tmp_path, data))
    msg = str(err.value)
    assert (
        "targets.h100.gpu.arch: value 'hoper' is not allowed (did you mean 'hopper'?); allowed values: ampere, ada, hopper, blackwell, cpu"
        in msg
    )
    assert "targets.a100.overrides.0: value 'ampre' is not allowed (did you mean 'ampere'?)" in msg
    assert len(err.value.problems) == 2


def test_unknown_hardware_override_key_lists_the_allowed_keys(tmp_path):
    data = copy.deepcopy(RAW)
    hw = data["variants"]["nvfp4"]["hardware_overrides"]
    hw["hoper"] = hw.pop("hopper")
    with pytest.raises(
        RegistryError,
        match=r"variants\.nvfp4\.hardware_overrides\.hoper: key 'hoper' is not allowed \(did you mean 'hopper'\?\); allowed values: hopper, ampere",
    ):
        load.load_registry(_write(tmp_path, data))


def test_names_the_registry_defines_are_checked_against_it():
    data = copy.deepcopy(RAW)
    data["targets"]["h100"]["features"] = ["reasoning", "tool_caling"]
    data["targets"]["h100"]["speculative_modes"] = ["none", "dspark", "eagle"]
    with pytest.raises(RegistryError) as err:
        registry_load.parse_registry(data, source="cookbook/recipe.yaml")
    msg = str(err.value)
    assert msg.startswith("cookbook/recipe.yaml: 2 problem(s)")
    assert (
        "targets.h100.features: unknown feature 'tool_caling' (did you mean 'tool_calling'?); allowed: reasoning, tool_calling, fast_ssm_cache, long_context"
        in msg
    )
    assert "targets.h100.speculative_modes: unknown speculative mode 'eagle'" in msg


def test_wrong_types_are_refused_with_the_key_path():
    data = copy.deepcopy(RAW)
    data["model"]["default_vllm_version"] = 0.32  # unquoted: a float, not a version
    data["features"]["long_context"]["env"]["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = 1
    data["targets"]["l4"]["args"]["--max-num-seqs"] = [4]
    with pytest.raises(RegistryError) as err:
        registry_load.parse_registry(data)
    problems = err.value.problems
    assert any(
        p.startswith("model.default_vllm_version: Input should be a valid string") for p in problems
    )
    assert any(
        p.startswith("features.long_context.env.VLLM_ALLOW_LONG_MAX_MODEL_LEN:") for p in problems
    )
    assert any(
        p.startswith("targets.l4.args.--max-num-seqs: Value error, a flag value must be")
        for p in problems
    )
    assert len(problems) == 3


def test_resolve_accepts_an_edited_mapping_and_validates_it():
    data = copy.deepcopy(RAW)
    data["targets"]["h100"]["args"] = {"--max-num-seqs": 64}
    assert recipes.resolve("h100", registry=data).args["--max-num-seqs"] == 64
    data["targets"]["h100"]["arg"] = {}
    with pytest.raises(
        RegistryError, match=r"targets\.h100\.arg: unknown key 'arg' \(did you mean 'args'\?\)"
    ):
        recipes.resolve("h100", registry=data)


def test_missing_file_and_bad_yaml_name_the_file(tmp_path):
    with pytest.raises(RegistryError, match="not found"):
        load.load_registry(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("targets: [unclosed\n")
    with pytest.raises(RegistryError, match="bad.yaml is not valid YAML"):
        load.load_registry(bad)


def test_flags_file_keys_must_be_flags(tmp_path):
    path = tmp_path / "flags.yaml"
    path.write_text('--max-num-seqs: "batch ceiling"\nmax-model-len: "no dashes"\n')
    with pytest.raises(
        RegistryError,
        match=r"(?s)flags.yaml: 1 problem.*max-model-len: String should match pattern",
    ):
        registry_load.read_flag_reasons(path)
