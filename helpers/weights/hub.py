"""The Hugging Face hub, the parts a download needs: cache, offline mode, sizes, errors.

Settings are read at call time (a notebook's ``os.environ`` change counts); ``_call`` turns a
hub error into a :mod:`helpers.errors` type whose one sentence names the fix.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helpers.errors import CookbookError, HubAccessError, WeightsError


def resolve_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The hub cache folder: ``cache_dir``, else ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``,
    else the hub's default (read now, so a notebook's ``os.environ`` change counts)."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def offline_requested(local_files_only: bool | None = None) -> bool:
    """``local_files_only`` when given, else ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) now."""
    if local_files_only is not None:
        return bool(local_files_only)
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    if env is not None:
        return env.strip().upper() in ("1", "ON", "YES", "TRUE")
    return bool(constants.HF_HUB_OFFLINE)


def _endpoint() -> str | None:
    return (os.environ.get("HF_ENDPOINT") or "").rstrip("/") or None


def _page(repo: str) -> str:
    from huggingface_hub import constants

    return f"{_endpoint() or constants.ENDPOINT}/{repo}"


def matching_files(info: Any, allow_patterns: Sequence[str] | None) -> dict[str, int]:
    """``{filename: bytes}`` of a ``model_info(..., files_metadata=True)`` answer, filtered
    by ``allow_patterns`` the way ``snapshot_download`` filters (``filter_repo_objects``).

    LFS files count their LFS size (the real file), others their git size.
    """
    from huggingface_hub.utils import filter_repo_objects

    sizes = {}
    for s in getattr(info, "siblings", None) or []:
        size = s.lfs.size if getattr(s, "lfs", None) else s.size
        sizes[s.rfilename] = int(size or 0)
    keep = set(
        filter_repo_objects(sizes, allow_patterns=list(allow_patterns) if allow_patterns else None)
    )
    return {k: v for k, v in sizes.items() if k in keep}


def free_bytes(path: str | os.PathLike) -> int:
    """Free bytes on the filesystem holding ``path`` (its nearest existing parent)."""
    p = Path(path).expanduser().absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def _storage_folder(cache_dir: Path, repo: str) -> Path:
    from huggingface_hub.file_download import repo_folder_name

    return cache_dir / repo_folder_name(repo_id=repo, repo_type="model")


def _present_bytes(cache_dir: Path, repo: str, commit: str, files: dict[str, int]) -> int:
    """Bytes of ``files`` already in the cache's snapshot for ``commit`` (a resumed download)."""
    snap = _storage_folder(cache_dir, repo) / "snapshots" / commit
    return sum(size for name, size in files.items() if (snap / name).exists())


def _looks_complete(folder: Path, allow_patterns: Sequence[str] | None) -> bool:
    """Our own check on a cached snapshot (the hub checks against its cached tree listing when
    it has one): a ``config.json``, the safetensors index's shards all present, and at least one
    ``.safetensors`` when the patterns ask for them."""
    if not (folder / "config.json").exists():
        return False
    index = folder / "model.safetensors.index.json"
    if index.exists():
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (ValueError, KeyError, OSError):
            return False
        if not all((folder / s).exists() for s in shards):
            return False
    wants_st = not allow_patterns or any("safetensors" in p for p in allow_patterns)
    return not wants_st or any(folder.glob("*.safetensors"))


# ---- Hub errors -> one sentence naming the fix ----------------------------------------

#: The hub's token page (huggingface_hub's docs, "User access tokens").
TOKENS_PAGE = "https://huggingface.co/settings/tokens"


def registry_repos(registry: Any = None) -> list[str]:
    """Every hub repo the registry names: each variant's ``model_id`` and each drafter's ``repo``."""
    from helpers.config.load import as_registry

    reg = as_registry(registry)
    ids = [v.model_id for v in reg.variants.values() if v.model_id]
    ids += [m.drafter.repo for m in reg.speculative.values() if m.drafter and m.drafter.repo]
    return list(dict.fromkeys(ids))


def missing_repo_words(repo: str | None, status: int | None) -> tuple[str, str]:
    """``(cause, fix)`` for the hub's "Repository Not Found" (``RepositoryNotFoundError``): the
    hub answers 401 without a token and 404 with one, alike for a missing repo and a private one
    (a gated repo gets ``GatedRepoError``; huggingface_hub 2.4.0 ``utils/_http.py``
    ``hf_raise_for_status``). An id the registry does not name (:func:`registry_repos`) is called
    a misspelled or foreign id, with the closest registry id.

    Args:
        repo: the repo id (``owner/name``), or None when unknown.
        status: the HTTP status (401: no token was sent, 404: one was), or None.
    """
    import difflib

    what = repo or "the model"
    asked = f" (HTTP {status}{', no token sent' if status == 401 else ''})" if status else ""
    try:
        known = registry_repos()
    except Exception:  # noqa: BLE001 - a broken registry must not hide the hub's error
        known = []
    if repo and known and repo not in known:
        close = difflib.get_close_matches(repo, known, n=1, cutoff=0.5)
        hint = (
            f"; the closest it names is {close[0]}" if close else f"; it names {', '.join(known)}"
        )
        return (
            f"the hub has no repo {what} that this request may see{asked}, and it is not an id "
            "the registry names: a misspelled or foreign model id, not a gated repo",
            f"fix the model id (cookbook/recipe.yaml, or the model you passed){hint}",
        )
    token = (
        "set HF_TOKEN (or `hf auth login`) to a read token of an account that can see it"
        if status != 404
        else "check that HF_TOKEN belongs to an account that can see it"
    )
    return (
        f"the hub has no repo {what} that this request may see{asked}: it is missing or private "
        "(the hub answers the same for both), not gated",
        f"check that https://huggingface.co/{what} exists (renamed or removed?) and {token}",
    )


def _translate(exc: BaseException, repo: str, revision: str | None) -> CookbookError | None:
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    licence = (
        f"accept the licence on {_page(repo)} (logged in) and set HF_TOKEN to a read token of "
        "that account (or pass token=...)"
    )
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, GatedRepoError):
        return HubAccessError(
            f"{repo} is gated and the hub refused this request (HTTP {status}): {licence}."
        )
    if isinstance(exc, RevisionNotFoundError):
        return WeightsError(
            f"{repo} has no revision {revision!r}: fix the pinned revision in cookbook/recipe.yaml "
            "(a commit hash from the model page's 'Files and versions' history)."
        )
    if isinstance(exc, RepositoryNotFoundError):
        cause, fix = missing_repo_words(repo, status)
        return HubAccessError(f"{cause[0].upper()}{cause[1:]}: {fix}.")
    if isinstance(exc, HfHubHTTPError) and status == 401:
        return HubAccessError(
            f"The hub refused the token for {repo} (HTTP 401: invalid or expired): create a read "
            f"token at {TOKENS_PAGE} and set HF_TOKEN to it (or pass token=...), or unset HF_TOKEN "
            "if the repo is public."
        )
    if isinstance(exc, HfHubHTTPError) and status == 403:
        return HubAccessError(
            f"The hub refused the token for {repo} (HTTP 403: without read access): {licence}."
        )
    if isinstance(exc, (OfflineModeIsEnabled, LocalEntryNotFoundError)) or _is_connection_error(
        exc
    ):
        return WeightsError(
            f"Cannot reach the hub for {repo} and it is not in the cache ({type(exc).__name__}): check "
            "the network (or HF_ENDPOINT / proxy settings), or copy the cache from a machine that "
            "has it and set HF_HUB_OFFLINE=1."
        )
    return None


def _is_connection_error(exc: BaseException) -> bool:
    """A connection failure or timeout: the standard library's, or that of an HTTP stack a hub
    call raised through (``httpx2``, huggingface_hub >= 1.x's transport; ``httpx``); an
    exception of a stack is only raised once that stack is imported."""
    kinds: list[type] = [ConnectionError, TimeoutError]
    for stack in filter(None, map(sys.modules.get, ("httpx2", "httpx"))):
        kinds += [stack.ConnectError, stack.TimeoutException]
    return isinstance(exc, tuple(kinds))


def _call(fn, repo: str, revision: str | None, /, *args, **kwargs):
    """``fn(*args, **kwargs)`` with hub errors about ``repo`` turned into cookbook errors."""
    try:
        return fn(*args, **kwargs)
    except CookbookError:
        raise
    except Exception as exc:
        mapped = _translate(exc, repo, revision)
        if mapped is None:
            raise
        raise mapped from exc
