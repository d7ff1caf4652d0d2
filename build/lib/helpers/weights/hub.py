"""The Hugging Face hub, the parts a download needs: cache, offline mode, sizes, errors.

:func:`resolve_cache_dir` and :func:`offline_requested` read the hub's settings now (so a
notebook's ``os.environ`` change counts); :func:`matching_files` / :func:`repo_size` size a
``model_info(..., files_metadata=True)`` answer the way ``snapshot_download`` filters it;
:func:`free_bytes` is the room on the cache's filesystem; ``_looks_complete`` checks a cached
snapshot. ``_call`` runs a hub call and turns its errors into :mod:`helpers.errors` types
whose one sentence names the fix (``_translate``). :mod:`helpers.weights.download` downloads
with them.
"""

from __future__ import annotations

import json
import os
import shutil
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


def repo_size(info: Any, allow_patterns: Sequence[str] | None) -> int:
    """Bytes ``snapshot_download(allow_patterns=...)`` would fetch for a fresh cache."""
    return sum(matching_files(info, allow_patterns).values())


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


# --------------------------------------------------------------------------------------
# Hub errors -> one sentence naming the fix
# --------------------------------------------------------------------------------------


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
        return HubAccessError(
            f"The hub did not grant access to {repo} (HTTP {status}: gated, private or misspelled): "
            f"{licence}; if it persists, check the repo id in cookbook/recipe.yaml."
        )
    if isinstance(exc, HfHubHTTPError) and status in (401, 403):
        return HubAccessError(
            f"The hub refused the token for {repo} (HTTP {status}: invalid, expired or without read "
            f"access): {licence}."
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
    try:
        import httpx2  # huggingface_hub >= 1.x transport

        if isinstance(exc, (httpx2.ConnectError, httpx2.TimeoutException)):
            return True
    except ImportError:  # pragma: no cover
        pass
    try:
        import httpx

        if isinstance(exc, (httpx.ConnectError, httpx.TimeoutException)):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(exc, (ConnectionError, TimeoutError))


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
