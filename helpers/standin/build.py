"""A tiny, locally trained Nemotron-H checkpoint that the CPU build of vLLM can serve.

In CI and on laptops the notebooks run "as a stand-in": same client code and vLLM parsers, the
CPU build serving this model. A real ``NemotronHForCausalLM`` (Mamba-2, attention and MLP; no
MoE: the CPU backend has no kernel for non-gated ReLU² experts, docs/DESIGN.md), trained for
about two minutes on ``cookbook/demo.yaml``: with the ``cpu`` target's flags and greedy
decoding it reasons, answers, calls tools and respects a thinking budget on those prompts; it
knows nothing else.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import filelock

from helpers.errors import CookbookError
from helpers.paths import out_dir
from helpers.standin.data import accuracy_items, build_samples, load_demo
from helpers.standin.template import CHAT_TEMPLATE, MARKER_TOKENS, SPECIAL_TOKENS
from helpers.standin.train import (
    RECIPE,
    RECIPE_VERSION,
    Recipe,
    _encode_samples,
    _make_config,
    _make_hf_tokenizer,
    _torch_settings,
    _train,
    _train_tokenizer,
    _versions,
)


def standin_hash(demo: dict[str, Any] | None = None, recipe: Recipe = RECIPE) -> str:
    """Cache key: sha256 (first 12 hex digits) of the training inputs: demo data, recipe,
    :data:`RECIPE_VERSION`, chat template, special tokens and the item-set items it learns.

    Not the torch / transformers / tokenizers versions (recorded in ``standin.json``): the
    checkpoint's formats (safetensors, ``config.json``, ``tokenizer.json``) do not change with
    them, so :data:`SHIPPED` serves under any release ``requirements-cpu.txt`` admits.
    """
    demo = load_demo() if demo is None else demo
    payload = {
        "recipe_version": RECIPE_VERSION,
        "recipe": dataclasses.asdict(recipe),
        "demo": demo,
        "template": CHAT_TEMPLATE,
        "special": SPECIAL_TOKENS + MARKER_TOKENS,
        "accuracy_items": accuracy_items(demo),
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _build(
    dest: Path, demo: dict[str, Any], recipe: Recipe, digest: str, log=None, progress: bool = False
) -> dict[str, Any]:
    import torch
    from transformers import GenerationConfig, NemotronHForCausalLM

    t0 = time.perf_counter()
    samples = build_samples(demo)
    tok = _train_tokenizer(samples, recipe)
    if tok.get_vocab_size() > recipe.vocab_size:
        raise CookbookError(
            f"stand-in tokenizer has {tok.get_vocab_size()} tokens, more than the model's "
            f"{recipe.vocab_size}; raise Recipe.vocab_size in helpers/standin/train.py."
        )
    hf_tok = _make_hf_tokenizer(tok)
    config = _make_config(recipe, tok)
    data = _encode_samples(tok, samples)
    with _torch_settings(recipe.threads):
        torch.manual_seed(recipe.seed)
        model = NemotronHForCausalLM(config).float()
        stats = _train(model, data, recipe, log=log, progress=progress) if recipe.steps > 0 else {}
        model.eval()
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=[config.eos_token_id, tok.token_to_id("</s>")],
        pad_token_id=config.pad_token_id,
    )
    # Saved in bfloat16: the CPU build of vLLM serves float32 checkpoints in bfloat16
    # anyway ("Downcasting torch.float32 to torch.bfloat16"), so this is what runs.
    model.to(torch.bfloat16)
    model.config.dtype = "bfloat16"
    model.save_pretrained(dest, safe_serialization=True)
    hf_tok.save_pretrained(dest)
    (dest / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    # vLLM reads `hybrid_override_pattern` through NemotronHConfig's property; write it too
    # so older readers of config.json see the familiar Nemotron-H key.
    cfg = json.loads((dest / "config.json").read_text())
    cfg["hybrid_override_pattern"] = recipe.pattern
    (dest / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
    meta = {
        "hash": digest,
        "recipe_version": RECIPE_VERSION,
        "recipe": dataclasses.asdict(recipe),
        "parameters": sum(p.numel() for p in model.parameters()),
        "samples": len(samples),
        "tokens": sum(len(ids) for ids, _ in data),
        "max_len": max(len(ids) for ids, _ in data),
        "build_seconds": time.perf_counter() - t0,
        "versions": _versions(),
        **stats,
    }
    meta["files"] = file_manifest(dest)
    (dest / "standin.json").write_text(json.dumps(meta, indent=2))
    return meta


# ---- is the checkpoint whole? (checked before every reuse and every launch) -----------

REBUILD = "rebuild with `build_standin_model(force=True)`"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """``{file name: {"size": bytes, "sha256": hex}}`` of a built stand-in's files
    (``standin.json`` itself excluded); recorded in ``standin.json`` at build."""
    folder = Path(folder)
    return {
        p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != "standin.json"
    }


def check_checkpoint(folder: str | Path, *, fix: str | None = None) -> None:
    """Check that a local checkpoint folder is whole before it is served.

    Checks: ``config.json`` is valid JSON; every ``*.safetensors`` opens with the safetensors
    library (header and size, the check vLLM's loader meets); for a stand-in whose
    ``standin.json`` records a manifest (:func:`file_manifest`), every file's size and SHA-256.

    Args:
        folder: the checkpoint folder.
        fix: the remedy the error names, instead of the default (the stand-in: :data:`REBUILD`;
            else download or copy the checkpoint again).

    Raises:
        CookbookError: one sentence naming the damaged file and the fix.
    """
    folder = Path(folder)
    meta_path = folder / "standin.json"
    is_standin = meta_path.is_file()
    fix = fix or (
        REBUILD
        if is_standin
        else "download it again (helpers.weights.download.download(..., force_download=True)) or copy it again"
    )
    what = "stand-in model" if is_standin else "checkpoint"
    problems: list[str] = []
    config = folder / "config.json"
    if not config.is_file():
        problems.append("config.json is missing" if folder.is_dir() else "no such folder")
    else:
        try:
            json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as e:
            problems.append(f"config.json is not valid JSON ({e})")
    from safetensors import SafetensorError, safe_open

    for st in sorted(folder.glob("*.safetensors")):
        try:  # the header parses and the file ends where its last tensor ends
            with safe_open(st, framework="numpy"):
                pass
        except (SafetensorError, OSError) as e:
            problems.append(f"{st.name} is not a whole safetensors file ({e})")
    if is_standin and not problems:
        try:
            files = json.loads(meta_path.read_text()).get("files") or {}
        except (OSError, ValueError) as e:
            problems.append(f"standin.json is not valid JSON ({e})")
            files = {}
        for name, rec in files.items():
            p = folder / name
            if not p.is_file():
                problems.append(f"{name} is missing")
            elif p.stat().st_size != rec.get("size"):
                problems.append(
                    f"{name} is {p.stat().st_size:,} bytes, the build recorded {rec.get('size'):,}"
                )
            elif rec.get("sha256") and _sha256(p) != rec["sha256"]:
                problems.append(f"{name} does not match the SHA-256 recorded at build")
    if problems:
        raise CookbookError(f"The {what} at {folder} is {'damaged' if folder.is_dir() else 'missing'} ({'; '.join(problems)}): {fix}.")  # fmt: skip


#: The trained stand-in shipped with the package (package data, about 1.8 MB): the files of
#: one :func:`build_standin_model` run and its ``standin.json`` (hash of the training inputs,
#: the versions it was trained with, the SHA-256 of every file). A first run copies it into
#: the cache instead of training (about 2 minutes on 2 cores); ``python -m
#: helpers.standin.build --ship`` retrains and replaces it (maintainers, after changing
#: ``cookbook/demo.yaml``, the recipe or the chat template: a test fails until they do).
SHIPPED = Path(__file__).resolve().parent / "shipped"

RESTORE = (
    "restore the shipped copy (`git checkout -- helpers/standin/shipped`, or reinstall the "
    "package) or rebuild with `build_standin_model(force=True)` "
    "(`python -m helpers.standin.build --force`)"
)


def shipped_hash(folder: Path = SHIPPED) -> str | None:
    """The training-input hash the shipped stand-in was built from (``standin.json``'s
    ``hash``), or None when the package carries no shipped copy or its record is unreadable."""
    try:
        return json.loads((Path(folder) / "standin.json").read_text())["hash"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _install_shipped(src: Path, final: Path, digest: str) -> Path:
    """Copy the shipped stand-in ``src`` (hash-checked first) into the cache folder ``final``.

    Raises:
        CookbookError: a shipped file is missing, truncated or differs from the SHA-256 its
            manifest records; the message names the file and :data:`RESTORE`.
    """
    check_checkpoint(src, fix=RESTORE)
    if not json.loads((src / "standin.json").read_text()).get("files"):
        raise CookbookError(
            f"The stand-in model at {src} is damaged (standin.json has no file manifest): {RESTORE}."
        )
    tmp = final.parent / f".tmp-standin-{digest}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(src, tmp)
        check_checkpoint(tmp)  # the copy, as it will be served
    except (OSError, CookbookError):
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _put(tmp, final)


def _put(tmp: Path, final: Path) -> Path:
    """Move the finished folder ``tmp`` to ``final`` (what was there goes); returns ``final``."""
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    return final


def ship_standin_model(dest: Path = SHIPPED, *, progress: bool = True) -> Path:
    """Retrain the stand-in and replace the shipped copy ``dest`` (:data:`SHIPPED`) with it;
    returns ``dest``. Commit ``helpers/standin/shipped`` afterwards.
    """
    built = build_standin_model(force=True, progress=progress, use_shipped=False)
    dest = Path(dest)
    tmp = dest.with_name(f".{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(built, tmp)
    return _put(tmp, dest)


def build_standin_model(
    force: bool = False,
    out: Path | None = None,
    *,
    recipe: Recipe | None = None,
    verbose: bool = False,
    progress: bool = True,
    use_shipped: bool = True,
) -> Path:
    """Build (or reuse) the stand-in checkpoint and return its folder ``<out>/standin-<hash>``.

    The hash is :func:`standin_hash`'s. A build takes about 2 minutes on 2 CPU cores, is
    deterministic, and is written to a temporary folder renamed into place under a file lock, so
    a crash or a concurrent caller never sees a half-written model. A cached copy is checked
    (:func:`check_checkpoint`) before reuse.

    Args:
        force: retrain even when a cached or shipped copy with the same hash exists.
        out: parent folder of the cache (default ``helpers.paths.out_dir("models")``).
        recipe: training recipe (default :data:`RECIPE`).
        verbose: print training progress (a line every 25 steps).
        progress: a tqdm bar (stderr) over the training steps when a build runs.
        use_shipped: with no cached copy, take :data:`SHIPPED` when built from the same hash,
            after checking every file's SHA-256 (milliseconds instead of training).

    Raises:
        CookbookError: demo.yaml is missing or malformed, the build failed, or the cached or
            shipped copy is damaged (the message says how to restore or rebuild).
    """
    demo = load_demo()
    recipe = recipe or RECIPE
    digest = standin_hash(demo, recipe)
    parent = Path(out) if out is not None else out_dir("models")
    parent.mkdir(parents=True, exist_ok=True)
    final = parent / f"standin-{digest}"
    if not force and (final / "standin.json").is_file():
        check_checkpoint(final)
        return final
    log = print if verbose else None
    lock_path = parent / f".standin-{digest}.lock"
    with filelock.FileLock(lock_path):  # one build per digest across processes
        if not force and (final / "standin.json").is_file():
            check_checkpoint(final)
            return final  # built by a concurrent caller while we waited
        shipped = shipped_hash() if not force and use_shipped and recipe == RECIPE else None
        if shipped == digest:
            return _install_shipped(SHIPPED, final, digest)
        if shipped is not None:
            print(
                f"The stand-in shipped with the package was trained on other inputs (hash "
                f"{shipped}, these are {digest}): training one (about 2 minutes). "
                "Maintainers: `python -m helpers.standin.build --ship` replaces the shipped copy.",
                file=sys.stderr,
            )
        tmp = parent / f".tmp-standin-{digest}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            _build(tmp, copy.deepcopy(demo), recipe, digest, log=log, progress=progress)
        except CookbookError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except Exception as e:  # noqa: BLE001 - wrap with a fix-naming message
            shutil.rmtree(tmp, ignore_errors=True)
            raise CookbookError(
                f"building the stand-in model failed ({type(e).__name__}: {e}); check that "
                "the .venv has torch, transformers and tokenizers (`make setup`) and that "
                "cookbook/demo.yaml is valid."
            ) from e
        return _put(tmp, final)


def standin_metadata(path: Path) -> dict[str, Any]:
    """Return the build metadata (``standin.json``) of a built stand-in folder."""
    return json.loads((Path(path) / "standin.json").read_text())


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.standin.build [--force | --ship]``: build (or reuse) the stand-in model
    and print its folder. ``make test`` runs it before the suite: a cached copy is checked and
    reused, else the shipped copy is checked and copied (milliseconds), else it trains (about
    2 minutes on 2 CPU cores)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m helpers.standin.build", description=main.__doc__)
    ap.add_argument(
        "--force", action="store_true", help="retrain even when a cached or shipped copy exists"
    )
    ap.add_argument(
        "--ship",
        action="store_true",
        help="retrain and replace the copy shipped with the package (helpers/standin/shipped)",
    )
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        if args.ship:
            path = ship_standin_model()
            print(f"shipped stand-in: {path} ({time.monotonic() - t0:.0f} s); commit it")
            return 0
        path = build_standin_model(force=args.force)
    except CookbookError as e:  # one message naming the fix, not a traceback
        print(f"stand-in model: {e}", file=sys.stderr)
        return 1
    print(f"stand-in model: {path} ({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
