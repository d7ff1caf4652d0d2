"""Checkpoint and drafter downloads with ``huggingface_hub``, before the server starts.

Notebook verb: :func:`download` (step 5 of every notebook)::

    serve_cfg = weights.download(cfg)     # local snapshot paths; prints a summary

It fetches the variant's checkpoint (``cfg.model`` at ``cfg.revision``, only the files
matching ``cfg.allow_patterns``) and the speculative mode's drafter(s) (``cfg.drafters``) with
``snapshot_download`` (the hub's own tqdm progress bars), and returns a config that serves the
local folders (``cfg.with_model(path)``, ``cfg.with_drafter_path(path)``) with
``HF_HUB_OFFLINE=1`` in the server's environment, so the server's readiness wait never
includes a download or a hub request.

Order of work, so a re-run needs no network and a doomed download never starts:
  1. the cache first (``local_files_only=True``): a complete snapshot at the pinned revision
     (or the cached ``refs/main`` for an unpinned one) is used as is;
  2. offline (``local_files_only=True`` or ``HF_HUB_OFFLINE=1``) and not cached: stop, naming
     the fix;
  3. for what is missing: ``HfApi().model_info(..., files_metadata=True)``, the sizes of the
     files matching ``allow_patterns`` minus what is already on disk, compared with the free
     space of the cache folder (plus :data:`HEADROOM_GB`): stop when it does not fit;
  4. ``snapshot_download`` at the pinned revision. An unpinned revision (the BF16 variant has
     none in any seed) resolves to a commit, which is printed so it can be pinned in
     ``cookbook/recipe.yaml``.

Hub failures become :mod:`helpers.errors` types whose one sentence names the fix: a gated
or unauthorised repo (``GatedRepoError``, ``RepositoryNotFoundError``, HTTP 401/403) says to
accept the licence on the model page and set ``HF_TOKEN``.

In stand-in mode (``cfg.stand_in``) nothing is downloaded: the tiny model is built locally by
``helpers.standin.build_standin_model()``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .errors import CookbookError, DiskSpaceError, HubAccessError, WeightsError
from .recipes import ServeConfig

# Space to keep free beyond the download itself (GB): the hub writes each file to
# ``blobs/<etag>.incomplete`` and renames it, so no file is stored twice, but a full disk
# breaks everything else.
HEADROOM_GB = 1.0
GB = 1e9


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Snapshot:
    """One repository made available locally.

    Attributes:
        role: ``"model"`` or ``"drafter (dflash)"`` style.
        repo: hub id; revision: the pin asked for (None: the default branch).
        commit: the resolved commit (the snapshot folder's name).
        path: local snapshot folder.
        size_bytes: bytes of the files matching ``allow_patterns`` (None when only the cache was read).
        downloaded_bytes: bytes this call fetched (0 on a cache hit).
        from_cache: True when nothing was fetched.
    """

    role: str
    repo: str
    revision: str | None
    commit: str
    path: str
    size_bytes: int | None = None
    downloaded_bytes: int = 0
    from_cache: bool = True

    @property
    def pinned(self) -> bool:
        return bool(self.revision) and self.revision == self.commit


@dataclasses.dataclass
class DownloadResult:
    """What :func:`fetch` did. ``config`` serves the local folders."""

    config: ServeConfig
    snapshots: list[Snapshot]
    cache_dir: str
    offline: bool = False

    @property
    def model(self) -> Snapshot | None:
        return next((s for s in self.snapshots if s.role == "model"), None)

    @property
    def drafters(self) -> list[Snapshot]:
        return [s for s in self.snapshots if s.role != "model"]

    def summary(self) -> str:
        lines = []
        for s in self.snapshots:
            how = "cached" if s.from_cache else f"downloaded {_human(s.downloaded_bytes)}"
            size = f" of {_human(s.size_bytes)}" if s.size_bytes is not None else ""
            lines.append(f"{s.role}: {s.repo}@{s.commit[:12]} ({how}{size})\n  -> {s.path}")
            if not s.revision:
                lines.append(
                    f"  unpinned: the default branch resolved to {s.commit}; pin it in "
                    "cookbook/recipe.yaml (revision:) so every run serves the same weights."
                )
        if not self.snapshots:
            lines.append(f"nothing to download; serving {self.config.model}")
        return "\n".join(lines)


def _human(n: float | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("GB", GB), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


# --------------------------------------------------------------------------------------
# Small helpers (pure)
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# fetch / download
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Item:
    role: str
    repo: str
    revision: str | None
    allow_patterns: list[str]


def _items(cfg: ServeConfig) -> list[_Item]:
    items = []
    if cfg.model and not Path(cfg.model).exists():
        items.append(_Item("model", cfg.model, cfg.revision, list(cfg.allow_patterns)))
    for d in cfg.drafters:
        if d.local_path and Path(d.local_path).exists():
            continue
        items.append(_Item(f"drafter ({d.mode})", d.repo, d.revision, list(d.allow_patterns)))
    return items


def _from_cache(item: _Item, cache_dir: Path) -> str | None:
    """The cached snapshot folder, or None; never touches the network."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = snapshot_download(
            item.repo,
            revision=item.revision,
            cache_dir=str(cache_dir),
            allow_patterns=item.allow_patterns or None,
            local_files_only=True,
        )
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None
    return path if _looks_complete(Path(path), item.allow_patterns) else None


def _apply(cfg: ServeConfig, snaps: Iterable[Snapshot]) -> ServeConfig:
    out = cfg
    for s in snaps:
        if s.role == "model":
            out = out.with_model(s.path)
        else:
            out = out.with_drafter_path(s.path)
            out = dataclasses.replace(
                out,
                drafters=[
                    dataclasses.replace(d, local_path=s.path) if d.repo == s.repo else d
                    for d in out.drafters
                ],
            )
    # The server loads local folders: keep it off the network during the readiness wait.
    return out.with_args(HF_HUB_OFFLINE="1")


def fetch(
    cfg: ServeConfig,
    *,
    cache_dir: str | os.PathLike | None = None,
    local_files_only: bool | None = None,
    token: str | bool | None = None,
    headroom_gb: float = HEADROOM_GB,
    max_workers: int = 8,
    quiet: bool = False,
) -> DownloadResult:
    """Make ``cfg``'s checkpoint and drafters local; return what was done and the new config.

    Args:
        cfg: a resolved :class:`~helpers.recipes.ServeConfig`.
        cache_dir: hub cache folder (default: :func:`resolve_cache_dir`).
        local_files_only: True: cache only, never the network; default ``HF_HUB_OFFLINE``.
        token: hub token (default: ``HF_TOKEN`` / the saved login).
        headroom_gb: free space (GB) to leave beyond the download.
        max_workers: parallel file downloads (``snapshot_download``).
        quiet: print nothing (the hub's progress bars follow ``HF_HUB_DISABLE_PROGRESS_BARS``).

    Returns:
        :class:`DownloadResult`; ``.config`` serves the local folders with ``HF_HUB_OFFLINE=1``.

    Raises:
        HubAccessError: gated / unauthorised / private repo (accept the licence, set HF_TOKEN).
        DiskSpaceError: the missing files do not fit (free N GB, or another cache_dir).
        WeightsError: offline and not cached, hub unreachable, or unknown revision.
    """
    if cfg.stand_in:
        from . import standin  # lazy: building the stand-in imports torch

        path = standin.build_standin_model()
        out = cfg.with_model(path)
        if not quiet:
            print(f"stand-in: serving the locally built tiny model at {path} (no download)")
        return DownloadResult(out, [], str(path))
    if not cfg.model:
        raise WeightsError(
            f"Target {cfg.target!r} has no model id: resolve a GPU target, or use stand-in mode."
        )

    cache = resolve_cache_dir(cache_dir)
    offline = offline_requested(local_files_only)
    snaps: list[Snapshot] = []
    missing: list[_Item] = []

    # 1. The cache first: no network for what is already there.
    for item in _items(cfg):
        path = _from_cache(item, cache)
        if path:
            snaps.append(Snapshot(item.role, item.repo, item.revision, Path(path).name, path))
        else:
            missing.append(item)

    # 2. Offline and missing: stop.
    if missing and offline:
        names = ", ".join(f"{m.repo}@{m.revision or 'main'}" for m in missing)
        raise WeightsError(
            f"{names} is not in the hub cache at {cache} and downloads are off (local_files_only / "
            "HF_HUB_OFFLINE=1): run weights.download(cfg) once with network access (HF_HUB_OFFLINE=0), "
            "or pass cache_dir= the folder that holds it."
        )

    # 3. Sizes before anything is fetched.
    if missing:
        from huggingface_hub import HfApi

        api = HfApi(endpoint=_endpoint(), token=token)
        plans = []
        need = 0
        for item in missing:
            info = _call(
                api.model_info,
                item.repo,
                item.revision,
                item.repo,
                revision=item.revision,
                files_metadata=True,
            )
            files = matching_files(info, item.allow_patterns)
            size = sum(files.values())
            todo = size - _present_bytes(cache, item.repo, info.sha, files)
            plans.append((item, info.sha, size, todo))
            need += todo
        free = free_bytes(cache)
        if need + headroom_gb * GB > free:
            short = (need + headroom_gb * GB - free) / GB
            what = " + ".join(f"{p[0].repo} ({p[3] / GB:.1f} GB)" for p in plans)
            raise DiskSpaceError(
                f"Downloading {what} needs {need / GB:.1f} GB plus {headroom_gb:g} GB headroom, but only "
                f"{free / GB:.1f} GB is free at {cache}: free {short:.1f} GB there, or choose another "
                "cache dir (weights.download(cfg, cache_dir=...) or HF_HUB_CACHE=/big/disk).",
                need_bytes=need,
                free_bytes=free,
                cache_dir=str(cache),
            )

        # 4. Download at the pinned revision (the hub's progress bars).
        from huggingface_hub import snapshot_download

        for item, _commit, size, todo in plans:
            if not quiet:
                print(
                    f"{item.role}: {item.repo}@{item.revision or 'main'}: {_human(todo)} to fetch"
                )
            path = _call(
                snapshot_download,
                item.repo,
                item.revision,
                item.repo,
                revision=item.revision,  # unpinned: the hub resolves it and writes refs/main
                cache_dir=str(cache),
                allow_patterns=item.allow_patterns or None,
                token=token,
                endpoint=_endpoint(),
                max_workers=max_workers,
            )
            snaps.append(
                Snapshot(
                    item.role,
                    item.repo,
                    item.revision,
                    Path(path).name,
                    path,
                    size,
                    todo,
                    from_cache=False,
                )
            )

    # Keep the model first, then drafters, as in the config.
    order = {it.repo: i for i, it in enumerate(_items(cfg))}
    snaps.sort(key=lambda s: order.get(s.repo, 0))
    result = DownloadResult(_apply(cfg, snaps), snaps, str(cache), offline)
    if not quiet:
        print(result.summary())
    return result


def download(
    cfg: ServeConfig,
    *,
    cache_dir: str | os.PathLike | None = None,
    local_files_only: bool | None = None,
    token: str | bool | None = None,
    headroom_gb: float = HEADROOM_GB,
    quiet: bool = False,
) -> ServeConfig:
    """Download (or reuse from the cache) ``cfg``'s checkpoint and drafters; return the config
    that serves the local folders. See :func:`fetch` for arguments, order of work and errors.

    Example::

        serve_cfg = weights.download(recipes.resolve("h100", speculative="dflash"))
        serve_cfg.model                                   # .../snapshots/0dcd680e.../
        serve_cfg.speculative_config["model"]             # .../snapshots/7fc1f1ff.../
    """
    return fetch(
        cfg,
        cache_dir=cache_dir,
        local_files_only=local_files_only,
        token=token,
        headroom_gb=headroom_gb,
        quiet=quiet,
    ).config


#: The tokenizer's files in a checkpoint (what ``transformers.AutoTokenizer`` reads).
TOKENIZER_PATTERNS = [
    "tokenizer*",
    "special_tokens_map.json",
    "*.jinja",
    "config.json",
    "generation_config.json",
    "vocab*",
    "merges.txt",
]


def tokenizer_for(
    root: str,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    local_files_only: bool | None = None,
) -> str:
    """A local folder with the tokenizer of the model a server serves (attach mode).

    Args:
        root: the ``root`` of the server's ``/v1/models`` entry: a folder (used as is when it
            exists here, e.g. a server on this machine) or a hub id.
        revision: hub revision (None: the default branch).

    Returns:
        The folder: ``root`` itself, or the hub snapshot holding only
        :data:`TOKENIZER_PATTERNS` (a few MB, never the weights).

    Raises:
        WeightsError / HubAccessError: the hub id cannot be fetched (offline and not cached,
            gated, unknown).
    """
    if Path(root).is_dir():
        return str(root)
    from huggingface_hub import snapshot_download

    cache = resolve_cache_dir(cache_dir)
    return str(
        _call(
            snapshot_download,
            root,
            revision,
            repo_id=root,
            revision=revision,
            allow_patterns=TOKENIZER_PATTERNS,
            cache_dir=str(cache),
            local_files_only=offline_requested(local_files_only),
        )
    )
