"""A download that stalls is ended with the bytes done and the fix, instead of a cell that
waits for ever; an old ``hf_xet`` is warned about.

Real ``huggingface_hub`` code (``snapshot_download`` in the watchdog's child process) against
the local fake hub of ``tests/test_weights.py`` (``HF_ENDPOINT``), whose file answer for one
shard sends its headers and half its bytes, then nothing: what a stalled Xet download looks
like from the cache (no error, no progress). ``HF_HUB_DOWNLOAD_TIMEOUT`` is raised so the
hub's own read timeout (10 s, which plain HTTP has and Xet lacks) does not end it first.
"""

from __future__ import annotations

import re
import threading
import time
import warnings

import psutil
import pytest
from test_weights import FakeHub, checkpoint_files, no_network  # noqa: F401 - autouse fixture

from helpers.config import load
from helpers.config import resolve as recipes
from helpers.errors import WeightsError
from helpers.weights import download as weights
from helpers.weights import watchdog

NVFP4 = load.load_registry().variants["nvfp4"].model_dump()
SHARD = "model-00002-of-00002.safetensors"
#: big enough that the hub's 10 MB download chunks (constants.DOWNLOAD_CHUNK_SIZE) reach the
#: disk before the stall: the watch counts bytes written
SHARD_BYTES = 24_000_000


class StallingHub(FakeHub):
    """Serves one file's first half, then holds the connection open without a byte more."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def handle(self, h, head):
        if not head and h.path.endswith("/" + SHARD):
            body = self.repos[NVFP4["model_id"]].files[SHARD]
            h.send_response(200)
            h.send_header("Content-Length", str(len(body)))
            h.send_header("X-Repo-Commit", NVFP4["revision"])
            h.end_headers()
            h.wfile.write(body[: len(body) // 2])
            h.wfile.flush()
            self.release.wait(120)
            return
        return super().handle(h, head)


@pytest.fixture
def stalling_hub(monkeypatch):
    h = StallingHub()
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "120")
    yield h
    h.release.set()
    h.close()


def test_a_stalled_download_is_ended_with_the_bytes_done_and_the_fix(stalling_hub, tmp_path):
    files = {**checkpoint_files(), SHARD: b"s" * SHARD_BYTES}
    stalling_hub.add(NVFP4["model_id"], files, commit=NVFP4["revision"])
    cache = tmp_path / "hub-cache"
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    t0 = time.monotonic()
    with pytest.raises(WeightsError) as err:
        weights.fetch(recipes.resolve("h100"), cache_dir=cache, stall_timeout=3.0, quiet=True)
    took = time.monotonic() - t0
    msg = str(err.value)
    assert msg.startswith(f"The download of {NVFP4['model_id']}@{NVFP4['revision']} stalled: ")
    done = int(
        re.search(r"stalled: ([\d,]+) of ([\d,]+) bytes done", msg).group(1).replace(",", "")
    )
    assert 10_000_000 <= done < SHARD_BYTES // 2 + 1000, msg
    assert f"of {sum(len(b) for b in files.values()):,} bytes" in msg
    assert 3 <= int(re.search(r"no progress for (\d+) s", msg).group(1)) <= 15, msg
    assert "HF_HUB_DISABLE_XET=1" in msg and "hf_xet>=1.5.2" in msg
    assert took < 60, f"ended after {took:.0f} s"
    # the download's process is gone, and no partial temporary file is left in the cache
    new = {p.pid for p in psutil.Process().children(recursive=True)} - children_before
    assert not [p for p in new if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    blobs = cache / ("models--" + NVFP4["model_id"].replace("/", "--")) / "blobs"
    assert not list(blobs.glob("*.incomplete"))
    assert not [t for t in threading.enumerate() if t.name == "download-progress"]


def test_an_hf_xet_older_than_1_5_2_is_warned_about(monkeypatch):
    monkeypatch.delenv("HF_HUB_DISABLE_XET", raising=False)
    advice = watchdog.hf_xet_advice("1.5.1")
    assert advice.startswith(
        "hf_xet 1.5.1 is older than 1.5.2: its downloads of large files can stall"
    )
    assert "HF_HUB_DISABLE_XET=1" in advice and "pip install -U 'hf_xet>=1.5.2'" in advice
    assert watchdog.hf_xet_advice("1.5.2") is None and watchdog.hf_xet_advice("1.8.0") is None
    # the installed one (1.8.0 here) is new enough; Xet turned off: nothing to warn about
    assert watchdog.hf_xet_advice() is None
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    assert watchdog.hf_xet_advice("1.4.0") is None
    monkeypatch.delenv("HF_HUB_DISABLE_XET")
    monkeypatch.setattr(watchdog, "installed_hf_xet", lambda: "1.4.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        watchdog.warn_old_hf_xet()
    assert [w.category for w in caught] == [watchdog.OldHfXetWarning]
