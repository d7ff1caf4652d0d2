"""The device session's carries: ``h200_drafting.sh wheels`` (``.whl``, alone) then
``wheels-b`` (``.whl-b``) install the kit in two calls and keep the first call's ``/tmp/t0``,
and ``h200_drafting.sh sizes`` finds a carry the lender would refuse (tree and carry over
64 MiB as a tar) before the session."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support import TESTS

SCRIPT = TESTS.parent / "tools" / "device" / "h200_drafting.sh"


def _checkout(tmp_path: Path) -> Path:
    """A tiny git checkout holding the device scripts, their /tmp paths moved under tmp_path."""
    root = tmp_path / "repo"
    (root / "tools" / "device").mkdir(parents=True)
    for name in ("h200_drafting.sh", "wheels.sh"):
        text = (SCRIPT.parent / name).read_text().replace("/tmp/t0", str(tmp_path / "t0"))
        (root / "tools" / "device" / name).write_text(
            text.replace("/tmp/wheels", str(tmp_path / "wheels"))
        )
    (root / ".gitignore").write_text("/.whl/\n/.whl-b/\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    return root


@pytest.mark.skipif(os.name != "posix", reason="bash and a fake python3 on PATH")
def test_the_kit_installs_in_two_calls_the_second_keeping_t0_and_the_first_folder(tmp_path):
    """``wheels`` writes t0 and installs ``.whl``; ``wheels-b`` installs ``.whl-b`` alone,
    without --upgrade (which would replace the bin/ both share), once: a repeat installs
    nothing; on a fresh machine (no t0) ``wheels-b`` exits 9 and installs nothing."""
    root = _checkout(tmp_path)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "pip.log"
    (bin_ / "python3").write_text(
        f'#!/bin/sh\necho "$*" >> {log}\nmkdir -p {tmp_path / "wheels"}\n'
    )
    (bin_ / "python3").chmod(0o755)
    (bin_ / "nvidia-smi").write_text("#!/bin/sh\n")
    (bin_ / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}
    for folder, wheel in ((".whl", "a-1-py3-none-any.whl"), (".whl-b", "b-1-py3-none-any.whl")):
        (root / folder).mkdir()
        (root / folder / wheel).write_text("")

    def call(what):
        return subprocess.run(["bash", "tools/device/h200_drafting.sh", what], cwd=root,
                              env=env, capture_output=True, text=True)  # fmt: skip

    fresh = call("wheels-b")
    assert fresh.returncode == 9 and "no /tmp/t0" in fresh.stdout.replace(
        str(tmp_path / "t0"), "/tmp/t0"
    )
    assert not log.exists()
    assert call("wheels").returncode == 0
    assert (tmp_path / "t0").read_text().strip().isdigit()
    (tmp_path / "t0").write_text("1000\n")  # the first call's time
    assert call("wheels-b").returncode == 0 and call("wheels-b").returncode == 0
    assert (tmp_path / "t0").read_text() == "1000\n"
    first, second = log.read_text().splitlines()  # the repeat installed nothing
    assert first.endswith(" .whl/a-1-py3-none-any.whl") and "--upgrade" not in first
    assert second.endswith(" .whl-b/b-1-py3-none-any.whl") and "--upgrade" not in second
    assert {p.name for p in (tmp_path / "wheels").iterdir()} == {".done-whl", ".done-whl-b"}


@pytest.mark.skipif(os.name != "posix", reason="bash, git and tar")
def test_sizes_names_a_carry_that_would_not_fit_beside_the_tree(tmp_path):
    root = _checkout(tmp_path)
    (root / ".whl").mkdir()
    (root / ".whl" / "small.whl").write_bytes(b"x" * 1024)
    chunks = root / ".gpu2" / "chunks-0.32.0"
    chunks.mkdir(parents=True)
    (chunks / "c00").write_bytes(b"\0" * (10 << 20))

    def sizes():
        return subprocess.run(["bash", "tools/device/h200_drafting.sh", "sizes"], cwd=root,
                              capture_output=True, text=True)  # fmt: skip

    fits = sizes()
    assert fits.returncode == 0 and "over 64 MiB" not in fits.stdout
    assert ".gpu2/chunks-0.32.0/c00" in fits.stdout and " 10 MiB" in fits.stdout
    (chunks / "c01").write_bytes(b"\0" * (64 << 20))  # 64 MiB and the tree's headers: over
    over = sizes()
    assert over.returncode == 1
    assert [line.split()[0] for line in over.stdout.splitlines() if "over 64 MiB" in line] == [
        ".gpu2/chunks-0.32.0/c01"
    ]
