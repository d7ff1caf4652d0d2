"""Checkpoint and drafter downloads with ``huggingface_hub``, before the server starts.

Notebook verb: ``serve_cfg = weights.download(cfg)`` (:func:`download`; :func:`fetch` also
returns what was done). The hub's cache, offline mode, sizes and errors:
:mod:`helpers.weights.hub`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from helpers.config.serveconfig import ServeConfig
from helpers.errors import DiskSpaceError, WeightsError
from helpers.weights.hub import (
    _call,
    _endpoint,
    _looks_complete,
    _present_bytes,
    free_bytes,
    matching_files,
    offline_requested,
    resolve_cache_dir,
)

# Space to keep free beyond the download itself (GB): the hub writes each file to
# ``blobs/<etag>.incomplete`` and renames it, so no file is stored twice, but a full disk
# breaks everything else.
HEADROOM_GB = 1.0
GB = 1e9


# ---- Results --------------------------------------------------------------------------


@dataclasses.dataclass
class Snapshot:
    """One repository made available locally: ``revision`` is the pin asked for (None: the
    default branch), ``commit`` the resolved one (the snapshot folder's name); ``size_bytes`` the
    matching files (None when only the cache was read), ``downloaded_bytes`` what this call fetched.
    """

    role: str
    repo: str
    revision: str | None
    commit: str
    path: str
    size_bytes: int | None = None
    downloaded_bytes: int = 0
    from_cache: bool = True


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


# ---- fetch / download -----------------------------------------------------------------


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
    quiet: bool = False,
    force_download: bool = False,
) -> DownloadResult:
    """Make ``cfg``'s checkpoint and drafters local; return what was done and the new config.

    Order, so a re-run needs no network and a doomed download never starts: (1) a complete cached
    snapshot at the pin (or the cached ``refs/main``) is used as is; (2) offline and not cached:
    stop; (3) the missing files' sizes (``model_info(..., files_metadata=True)``) against the free
    space plus ``headroom_gb``; (4) ``snapshot_download`` at the pin (the package requires
    ``hf_xet>=1.5.2``, which fixed Xet downloads stalling silently). An unpinned revision's commit
    is printed so it can be pinned in ``cookbook/recipe.yaml``.

    Args:
        cfg: a resolved :class:`~helpers.config.serveconfig.ServeConfig`.
        cache_dir: hub cache folder (default: :func:`resolve_cache_dir`).
        local_files_only: True: cache only, never the network; default ``HF_HUB_OFFLINE``.
        token: hub token (default: ``HF_TOKEN`` / the saved login).
        headroom_gb: free space (GB) to leave beyond the download.
        quiet: print nothing (the hub's bars follow ``HF_HUB_DISABLE_PROGRESS_BARS``).
        force_download: fetch every file again (a damaged checkpoint); needs the network.

    Returns:
        :class:`DownloadResult`; ``.config`` serves the local folders with ``HF_HUB_OFFLINE=1``.

    Raises:
        HubAccessError: gated / unauthorised / private repo (accept the licence, set HF_TOKEN).
        DiskSpaceError: the missing files do not fit (free N GB, or another cache_dir).
        WeightsError: offline and not cached, hub unreachable, or unknown revision.
    """
    if cfg.stand_in:
        from helpers.standin import build as standin  # lazy: building the stand-in imports torch

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

    # 1. The cache first: no network for what is already there (unless asked to fetch again).
    for item in _items(cfg):
        path = None if force_download else _from_cache(item, cache)
        if path:
            snaps.append(Snapshot(item.role, item.repo, item.revision, Path(path).name, path))
        else:
            missing.append(item)

    # 2. Offline and missing: stop.
    if missing and offline and force_download:
        raise WeightsError(
            "force_download=True fetches the checkpoint again, but downloads are off "
            "(local_files_only / HF_HUB_OFFLINE=1): run it with network access (HF_HUB_OFFLINE=0)."
        )
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
            todo = (
                size if force_download else size - _present_bytes(cache, item.repo, info.sha, files)
            )
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
                force_download=force_download,
            )
            snap = Snapshot(item.role, item.repo, item.revision, Path(path).name, path, size, todo)
            snaps.append(dataclasses.replace(snap, from_cache=False))

    # Keep the model first, then drafters, as in the config.
    order = {it.repo: i for i, it in enumerate(_items(cfg))}
    snaps.sort(key=lambda s: order.get(s.repo, 0))
    result = DownloadResult(_apply(cfg, snaps), snaps, str(cache), offline)
    if not quiet:
        print(result.summary())
    return result


def download(cfg: ServeConfig, **options: Any) -> ServeConfig:
    """``fetch(cfg, **options).config``: the config serving the local folders (``options``: see
    :func:`fetch`).

    Example::

        serve_cfg = weights.download(recipes.resolve("h100", speculative="dflash"))
        serve_cfg.model                                   # .../snapshots/0dcd680e.../
    """
    return fetch(cfg, **options).config
