"""Every multi-GPU command the registry renders carries NCCL_NVLS_ENABLE=0 and says why:
NCCL's NVLS (NVLink SHARP multicast) path can hang a start at weight load with no error
(NVIDIA/nccl #2167). The fleet deployments set it through lab.fleet.deployment.NO_MULTICAST_ENV
(tests/lab/fleet/test_fleet.py); this covers the registry's own targets (the TP8 one included)."""

from __future__ import annotations

from helpers import errors
from helpers.config import load
from helpers.config import resolve as recipes
from helpers.config.flagtable import renderings

REG = load.load_registry()


def _gpus(cfg) -> int:
    sizes = [int(cfg.args.get(f"--{k}-parallel-size") or 1) for k in ("tensor", "data", "pipeline")]
    return max(sizes[0] * sizes[1] * sizes[2], int((cfg.gpu or {}).get("count") or 1))


def test_every_multi_gpu_command_turns_nvls_off_and_says_why():
    checked = []
    for name, t in REG.targets.items():
        for variant in t.variants or ["nvfp4", "bf16"]:
            for spec in t.speculative_modes or ["none"]:
                try:
                    cfg = recipes.resolve(name, variant, spec)
                except errors.RecipeError:
                    continue  # a combination the registry refuses
                if _gpus(cfg) < 2:
                    continue
                assert cfg.env.get("NCCL_NVLS_ENABLE") == "0", (name, variant, spec)
                assert any("NVIDIA/nccl #2167" in n for n in cfg.notes), name
                shown = renderings(cfg)
                assert "export NCCL_NVLS_ENABLE=0" in shown["shell"]
                assert "-e NCCL_NVLS_ENABLE=0" in shown["docker"]
                checked.append((name, variant, spec))
    assert ("h100x8-bf16", "bf16", "mtp") in checked  # the TP8 target
