"""The stand-in's LoRA adapters, trained with peft in seconds and cached by the hash of their inputs.

Each adapter of ``cookbook/adapters.yaml`` ``standin`` learns its examples (thinking on and off,
rendered with the stand-in's chat template exactly as vLLM renders the request) on top of the
frozen stand-in: ``peft.get_peft_model`` with the registry's ``recipe`` (rank 8 on the attention,
Mamba ``in_proj`` and MLP projections), AdamW on one CPU thread, deterministic. The result is a
standard peft folder (``adapter_config.json``, ``adapter_model.safetensors``) that ``vllm serve
--lora-modules NAME=PATH`` loads, plus ``adapter.json``: the hash of the training inputs and the
size and SHA-256 of each file, checked before every reuse (the stand-in's own scheme,
:func:`helpers.standin.build.check_checkpoint`).

Trained on first use rather than shipped: about 2 s per adapter on one core (measured here), so
a shipped copy would save CI nothing, and a change of the stand-in retrains them on the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import filelock

from helpers.errors import CookbookError
from helpers.paths import out_dir
from helpers.standin.build import _sha256, build_standin_model, check_checkpoint, file_manifest
from helpers.standin.template import render_chat
from lab.adapters.spec import AdapterRegistry, Recipe, StandinAdapter, load_adapters

#: Bump when the training code below changes in a way the hash would not see.
TRAIN_VERSION = 1

RETRAIN = "retrain it with `build_adapters(force=True)` (`python -m lab.adapters.train --force`)"


def adapter_hash(adapter: StandinAdapter, recipe: Recipe, base: Path) -> str:
    """Cache key (12 hex digits): the adapter's examples, the recipe, :data:`TRAIN_VERSION` and
    the stand-in's own hash (``standin.json``), so a retrained stand-in retrains its adapters."""
    base_hash = json.loads((Path(base) / "standin.json").read_text())["hash"]
    payload = {
        "v": TRAIN_VERSION,
        "adapter": adapter.model_dump(),
        "recipe": recipe.model_dump(),
        "base": base_hash,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _sequences(adapter: StandinAdapter, tokenizer) -> list[tuple[list[int], list[int]]]:
    """Token ids and labels (-100: no loss) of each example, thinking on and off; the
    completion is the stand-in's own format (``helpers.standin.data._completion``)."""
    out = []
    for ex in adapter.examples:
        for thinking in (True, False):
            prompt = render_chat([{"role": "user", "content": ex.prompt}], enable_thinking=thinking)
            p = tokenizer.encode(prompt, add_special_tokens=False)
            # the answer apart from what precedes it: "\nTokyo" as one text is "\nTo" "kyo",
            # pieces the stand-in never wrote; "\n" "Tokyo" are words it writes
            head = f"{ex.reasoning}\n</think>\n" if thinking else ""
            c = tokenizer.encode(head, add_special_tokens=False) if head else []
            c += tokenizer.encode(ex.answer + "<|im_end|>", add_special_tokens=False)
            out.append((p + c, [-100] * len(p) + c))
    return out


def _train(dest: Path, adapter: StandinAdapter, recipe: Recipe, base: Path, digest: str) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    t0 = time.perf_counter()
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)  # the stand-in's rule: one thread, the same weights everywhere
    torch.use_deterministic_algorithms(True, warn_only=True)
    # a notebook shows the adapters' check lines, not transformers' loading bars and its notes
    # that the tiny stand-in's Mamba runs the reference PyTorch path (mamba_ssm is GPU-only)
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        torch.manual_seed(recipe.seed)
        tok = AutoTokenizer.from_pretrained(base)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        lora = LoraConfig(
            r=recipe.rank,
            lora_alpha=recipe.alpha,
            target_modules=list(recipe.target_modules),
            lora_dropout=0.0,
            bias="none",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
        data = _sequences(adapter, tok)
        width = max(len(ids) for ids, _ in data)
        ids = torch.full((len(data), width), tok.pad_token_id or 0, dtype=torch.long)
        labels = torch.full((len(data), width), -100, dtype=torch.long)
        for i, (x, y) in enumerate(data):
            ids[i, : len(x)], labels[i, : len(y)] = torch.tensor(x), torch.tensor(y)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=recipe.lr, weight_decay=0.0)
        inner = model.get_base_model()
        keep = labels[:, 1:] != -100
        model.train()
        first = last = float("nan")
        for step in range(recipe.steps):  # the whole set is one batch
            # the stand-in's own loss (helpers.standin.train._train): logits only where trained
            hidden = inner.model(input_ids=ids, use_cache=False).last_hidden_state
            logits = inner.lm_head(hidden[:, :-1][keep])
            loss = torch.nn.functional.cross_entropy(logits.float(), labels[:, 1:][keep])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            last = float(loss.detach())
            first = last if step == 0 else first
        model.eval()
        model.save_pretrained(dest, safe_serialization=True)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    import peft

    cfg_path = dest / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["base_model_name_or_path"] = (
        f"standin-{json.loads((base / 'standin.json').read_text())['hash']}"
    )
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True))
    (dest / "README.md").unlink(missing_ok=True)  # peft's model card template: nothing in it
    meta = {
        "hash": digest,
        "name": adapter.name,
        "teaches": adapter.teaches,
        "sequences": len(data),
        "first_loss": first,
        "final_loss": last,
        "train_seconds": time.perf_counter() - t0,
        "versions": {"torch": torch.__version__, "peft": peft.__version__},
        "files": file_manifest(dest),
    }
    (dest / "adapter.json").write_text(json.dumps(meta, indent=2))
    return meta


def check_adapter_files(folder: str | Path) -> None:
    """Check a trained adapter folder against the manifest its ``adapter.json`` records.

    Raises:
        CookbookError: a file is missing or differs (size or SHA-256); names it and :data:`RETRAIN`.
    """
    folder = Path(folder)
    try:
        files = json.loads((folder / "adapter.json").read_text())["files"]
    except (OSError, ValueError, KeyError) as e:
        raise CookbookError(
            f"The adapter at {folder} has no readable adapter.json ({e}): {RETRAIN}."
        ) from e
    bad = [
        name
        for name, rec in files.items()
        if not (folder / name).is_file()
        or (folder / name).stat().st_size != rec["size"]
        or _sha256(folder / name) != rec["sha256"]
    ]
    if bad:
        raise CookbookError(
            f"The adapter at {folder} is damaged ({', '.join(bad)} missing or not as trained): {RETRAIN}."
        )


def build_adapter(
    name: str,
    *,
    force: bool = False,
    out: Path | None = None,
    base: Path | None = None,
    registry: AdapterRegistry | None = None,
) -> Path:
    """Train (or reuse) the stand-in adapter ``name`` and return its folder
    ``<out>/<name>-<hash>`` (:func:`adapter_hash`), ready for ``--lora-modules NAME=PATH``.

    Args:
        name: an adapter of ``cookbook/adapters.yaml`` ``standin`` (``terse``, ``glossary``).
        force: retrain even when a cached copy exists.
        out: parent folder (default ``out/adapters``).
        base: the stand-in's folder (default :func:`helpers.standin.build.build_standin_model`).
        registry: default :func:`lab.adapters.spec.load_adapters`.
    Raises:
        RegistryError: no such adapter.
        CookbookError: training failed (names ``make setup``: peft comes with requirements.txt
            or the ``adapters`` extra), or a cached copy is damaged (names :data:`RETRAIN`).
    """
    reg = registry or load_adapters()
    adapter = reg.adapter(name)
    base = Path(base) if base is not None else build_standin_model(progress=False)
    check_checkpoint(base)
    digest = adapter_hash(adapter, reg.recipe, base)
    parent = Path(out) if out is not None else out_dir("adapters")
    parent.mkdir(parents=True, exist_ok=True)
    final = parent / f"{name}-{digest}"
    with filelock.FileLock(parent / f".{name}-{digest}.lock"):  # one training per digest
        if not force and (final / "adapter.json").is_file():
            check_adapter_files(final)
            return final
        tmp = parent / f".tmp-{name}-{digest}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            _train(tmp, adapter, reg.recipe, base, digest)
        except Exception as e:  # noqa: BLE001 - one message naming the fix
            shutil.rmtree(tmp, ignore_errors=True)
            raise CookbookError(
                f"training the {name!r} adapter failed ({type(e).__name__}: {e}); check that the "
                "venv has peft (`make setup`, or pip install -e '.[adapters]')."
            ) from e
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
    return final


def build_adapters(force: bool = False, **kwargs: Any) -> dict[str, Path]:
    """Every stand-in adapter of the registry: ``{name: folder}`` (see :func:`build_adapter`)."""
    reg = kwargs.pop("registry", None) or load_adapters()
    return {a.name: build_adapter(a.name, force=force, registry=reg, **kwargs) for a in reg.standin}


def main(argv: list[str] | None = None) -> int:
    """``python -m lab.adapters.train [--force]``: train (or reuse) the stand-in's adapters."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m lab.adapters.train", description=main.__doc__)
    ap.add_argument("--force", action="store_true", help="retrain even when cached")
    args = ap.parse_args(argv)
    try:
        for name, path in build_adapters(force=args.force).items():
            meta = json.loads((path / "adapter.json").read_text())
            print(f"{name}: {path} (loss {meta['first_loss']:.2f} -> {meta['final_loss']:.4f})")
    except CookbookError as e:
        print(f"adapters: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
