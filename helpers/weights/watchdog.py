"""A download that stops making progress is ended, with the bytes done and the fix.

Xet-backed downloads of large files can stall with no error (public reports:
huggingface_hub #4085 and #4508, xet-core #883, #898 and #850; fixed from ``hf_xet`` 1.5.2):
the cell would wait forever. :func:`watched_snapshot_download` runs ``snapshot_download`` in
a child process of its own process group and watches the bytes landing in the repository's
cache folder (its ``blobs/``, the ``*.incomplete`` files there, and the Xet chunk cache);
when none arrive for ``stall_timeout`` seconds it ends the child and raises
:class:`helpers.errors.WeightsError` naming the bytes done and the fixes
(``HF_HUB_DISABLE_XET=1``: plain HTTP; a newer ``hf_xet``). A child process, not a thread,
because a download stuck inside ``hf_xet``'s Rust code cannot be cancelled from Python: only
ending its process frees it. Files already complete stay in the cache, so the next call
resumes. :func:`hf_xet_advice` warns about an ``hf_xet`` older than :data:`HF_XET_FLOOR`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from helpers import errors
from helpers.errors import CookbookError, WeightsError

#: Seconds without a byte landing in the cache after which a download counts as stalled. A
#: healthy download writes continuously; five minutes covers a slow start (the hub resolving
#: a large repository, Xet fetching its first chunks) without a cell that waits for ever.
DOWNLOAD_STALL_TIMEOUT_S = 300.0
#: Seconds between two looks at the cache folder.
DOWNLOAD_POLL_S = 2.0
#: The first ``hf_xet`` with the stall fixes (xet-core #883 / #898; huggingface_hub #4508).
HF_XET_FLOOR = "1.5.2"
#: What the stall error and the version warning tell the user to do.
XET_FIX = (
    "set HF_HUB_DISABLE_XET=1 (os.environ in a notebook, before the download: plain HTTP "
    "downloads, which time out and resume) or upgrade hf_xet (pip install -U "
    f"'hf_xet>={HF_XET_FLOOR}'), then run the download again: the files already complete "
    "stay in the cache"
)


class OldHfXetWarning(UserWarning):
    """``hf_xet`` is older than :data:`HF_XET_FLOOR`, whose downloads can stall silently."""


def installed_hf_xet() -> str | None:
    """The installed ``hf_xet`` version, or None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("hf_xet")
    except metadata.PackageNotFoundError:
        return None


def hf_xet_advice(version: str | None = None) -> str | None:
    """A sentence when downloads go through an ``hf_xet`` older than :data:`HF_XET_FLOOR`.

    Args:
        version: the ``hf_xet`` version (default: the installed one).

    Returns:
        The warning text, or None (``hf_xet`` missing, new enough, or turned off with
        ``HF_HUB_DISABLE_XET``).
    """
    from packaging.version import InvalidVersion, Version

    if os.environ.get("HF_HUB_DISABLE_XET", "").strip().upper() in ("1", "ON", "YES", "TRUE"):
        return None
    version = version if version is not None else installed_hf_xet()
    if not version:
        return None
    try:
        old = Version(version) < Version(HF_XET_FLOOR)
    except InvalidVersion:
        return None
    if not old:
        return None
    return (
        f"hf_xet {version} is older than {HF_XET_FLOOR}: its downloads of large files can "
        f"stall with no error (huggingface_hub #4085, xet-core #883); {XET_FIX}"
    )


def warn_old_hf_xet() -> str | None:
    """Issue :class:`OldHfXetWarning` when :func:`hf_xet_advice` has something to say."""
    advice = hf_xet_advice()
    if advice:
        warnings.warn(advice, OldHfXetWarning, stacklevel=3)
    return advice


# ---------------------------------------------------------------------------- progress


def _xet_cache() -> Path | None:
    try:
        from huggingface_hub import constants

        return Path(constants.HF_XET_CACHE)
    except (ImportError, AttributeError):  # pragma: no cover - an older huggingface_hub
        return None


def _written(path: Path) -> int:
    """Bytes really written to a file (a preallocated, sparse file counts what is on disk)."""
    try:
        st = path.stat()
    except OSError:
        return 0
    blocks = getattr(st, "st_blocks", None)
    return st.st_size if blocks is None else min(st.st_size, blocks * 512)


def cache_bytes(folders: list[Path]) -> int:
    """Bytes written under ``folders`` (recursively; missing folders count 0)."""
    total = 0
    for folder in folders:
        if not folder.is_dir():
            continue
        for root, _dirs, files in os.walk(folder):
            for name in files:
                total += _written(Path(root) / name)
    return total


def _incomplete(folder: Path) -> set[Path]:
    return set(folder.glob("*.incomplete")) if folder.is_dir() else set()


# ---------------------------------------------------------------------------- the child

_CHILD = "import helpers.weights.watchdog as w; w._child_main()"


def _child_main() -> None:  # pragma: no cover - runs in the child process
    """Read the arguments (JSON on stdin), download, write the outcome (JSON) to a file."""
    from huggingface_hub import snapshot_download

    from helpers.weights.hub import _call

    job = json.loads(sys.stdin.read())
    outcome: dict[str, Any]
    try:
        path = _call(snapshot_download, job["repo"], job["revision"], job["repo"], **job["kwargs"])
        outcome = {"path": str(path)}
    except CookbookError as e:
        outcome = {"error": type(e).__name__, "message": str(e)}
    except Exception as e:  # noqa: BLE001 - reported to the parent as one sentence
        outcome = {"error": "WeightsError", "message": f"{type(e).__name__}: {e}", "raw": True}
    Path(job["result"]).write_text(json.dumps(outcome))


def _relay(stream, sink) -> None:
    """Copy the child's stderr (the hub's progress bars, ``\\r`` updates included) to ``sink``."""
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        with contextlib.suppress(Exception):
            sink.write(chunk.decode(errors="replace"))
            sink.flush()


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM the child's process group, SIGKILL after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)


def _raise_outcome(outcome: dict[str, Any], repo: str) -> None:
    kind = getattr(errors, str(outcome.get("error")), None)
    if not (isinstance(kind, type) and issubclass(kind, CookbookError)):
        kind = WeightsError
    message = str(outcome.get("message", ""))
    if outcome.get("raw"):
        message = f"snapshot_download of {repo} failed: {message}"
    try:
        err = kind(message)
    except TypeError:  # an error type with required arguments beyond the message
        err = WeightsError(message)
    raise err


def watched_snapshot_download(
    repo: str,
    revision: str | None,
    *,
    cache_dir: Path,
    expected_bytes: int | None = None,
    stall_timeout: float | None = DOWNLOAD_STALL_TIMEOUT_S,
    poll: float = DOWNLOAD_POLL_S,
    **kwargs: Any,
) -> str:
    """``snapshot_download(repo, revision=..., cache_dir=..., **kwargs)``, ended when it stalls.

    Args:
        repo, revision: hub id and revision (None: the default branch).
        cache_dir: the hub cache folder (the download's bytes are watched under it).
        expected_bytes: bytes the download should fetch (for the error's "N of M bytes").
        stall_timeout: seconds without a new byte in the cache before the download is ended
            (:data:`DOWNLOAD_STALL_TIMEOUT_S`); None runs ``snapshot_download`` in this
            process with no watch.
        poll: seconds between two looks at the cache.
        **kwargs: more ``snapshot_download`` arguments (``allow_patterns``, ``token``,
            ``endpoint``, ``max_workers``; JSON values).

    Returns:
        The local snapshot folder.

    Raises:
        WeightsError: the download stalled (names the bytes done, the seconds without
            progress and :data:`XET_FIX`), or it failed (the hub's errors as
            :mod:`helpers.errors` types, e.g. :class:`helpers.errors.HubAccessError`).
        KeyboardInterrupt: interrupted; the child was ended first.
    """
    from helpers.weights.hub import _call, _storage_folder

    if stall_timeout is None:
        from huggingface_hub import snapshot_download

        return _call(
            snapshot_download, repo, revision, repo, revision=revision,
            cache_dir=str(cache_dir), **kwargs,
        )  # fmt: skip
    blobs = _storage_folder(Path(cache_dir), repo) / "blobs"
    watched = [blobs] + [p for p in (_xet_cache(),) if p is not None]
    start_bytes = cache_bytes(watched)
    incomplete_before = _incomplete(blobs)
    with tempfile.TemporaryDirectory(prefix="cookbook-download-") as tmp:
        result = Path(tmp) / "result.json"
        job = {
            "repo": repo,
            "revision": revision,
            "result": str(result),
            "kwargs": {"revision": revision, "cache_dir": str(cache_dir), **kwargs},
        }
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own group: ending it ends hf_xet's threads too
        )
        relay = threading.Thread(
            target=_relay, args=(proc.stderr, sys.stderr), name="download-progress", daemon=True
        )
        relay.start()
        stalled_for = 0.0
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
            last_bytes, last_change = start_bytes, time.monotonic()
            while proc.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=poll)
                now_bytes = cache_bytes(watched)
                now = time.monotonic()
                if now_bytes != last_bytes:
                    last_bytes, last_change = now_bytes, now
                elif now - last_change >= stall_timeout and proc.poll() is None:
                    stalled_for = now - last_change
                    break
        except BaseException:
            _end(proc)
            relay.join(10)
            raise
        if stalled_for:
            _end(proc)
        relay.join(10)
        if stalled_for:
            for leftover in _incomplete(blobs) - incomplete_before:
                # a process-unique temporary file (huggingface_hub 2.4.0
                # _download_to_tmp_and_move): it can never be resumed, only clutter the cache
                with contextlib.suppress(OSError):
                    leftover.unlink()
            done = max(last_bytes - start_bytes, 0)
            of = f" of {expected_bytes:,}" if expected_bytes else ""
            raise WeightsError(
                f"The download of {repo}@{revision or 'main'} stalled: {done:,}{of} bytes done, "
                f"then no progress for {stalled_for:.0f} s, so it was ended instead of waiting "
                f"for ever (a known hf_xet stall; hf_xet {installed_hf_xet() or 'not installed'}"
                f"): {XET_FIX}."
            )
        if not result.is_file():
            raise WeightsError(
                f"The download of {repo} ended (exit code {proc.returncode}) without a result: "
                "run it again; if it repeats, run huggingface_hub.snapshot_download in a terminal "
                "to see its error."
            )
        outcome = json.loads(result.read_text())
    if "path" in outcome:
        return outcome["path"]
    _raise_outcome(outcome, repo)
    raise AssertionError("unreachable")  # pragma: no cover
