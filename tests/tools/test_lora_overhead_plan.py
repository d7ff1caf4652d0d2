"""The H200 LoRA-overhead plan (tools/device/lora_overhead_h200.py): every command checked
against vLLM 0.32.0's flag table, the base without LoRA beside one server per rank, the points
with 0, 1 and 4 adapters active, and adapters of the real architecture's shapes."""

from __future__ import annotations

import importlib.util
import json

from lab.adapters.check import check_adapter
from lab.adapters.synthetic import random_adapter
from tests.support import TESTS

REPO_ROOT = TESTS.parent


def _plan():
    spec = importlib.util.spec_from_file_location(
        "lora_overhead_h200", REPO_ROOT / "tools" / "device" / "lora_overhead_h200.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_dry_run_checks_every_command_and_lists_each_point(capsys):
    plan = _plan()
    assert plan.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    blocks = {b.split(":")[0]: b for b in out.split("server ")[1:]}
    assert set(blocks) == {"base", "base-marlin", "lora-r8", "lora-r32"}
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
        assert block.count("point: ") == len(plan.ACTIVE) * len(plan.CONCURRENCIES)
        assert (
            "4 adapters active, c=64, model=a1 --lora-modules a1 a2 a3 a4 --lora-assignment round-robin"
            in block
        )
    assert blocks["base"].count("point: 0 adapters active") == len(plan.CONCURRENCIES)
    assert blocks["base-marlin"].count("point: 0 adapters active") == len(plan.CONCURRENCIES)


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
