"""helpers.weights.download on real huggingface_hub code, without the network.

- A cache written in the hub's on-disk layout (models--org--name/blobs, snapshots/<commit>,
  refs/main) serves the offline path.
- A local HTTP server on 127.0.0.1 answers like the hub (model info, tree listing, file
  resolve; 401/403/404 with the hub's ``X-Error-Code: GatedRepo`` / ``RepoNotFound`` /
  ``RevisionNotFound`` headers), so the hub's own ``hf_raise_for_status`` raises the real
  error classes and ``snapshot_download`` really downloads. ``HF_ENDPOINT`` points at it.
- Every outgoing connection other than loopback fails the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from pathlib import Path

import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

from helpers.config import load
from helpers.config import resolve as recipes
from helpers.errors import CookbookError, DiskSpaceError, HubAccessError, WeightsError
from helpers.weights import download as weights
from helpers.weights import hub as hub_mod
from tests.support import DATA as TEST_DATA
from tests.support.fake_hub import FakeHub

DATA = TEST_DATA / "hub"
REG = load.load_registry()
NVFP4 = REG.variants["nvfp4"].model_dump()
BF16 = REG.variants["bf16"].model_dump()
DFLASH = REG.speculative["dflash"].drafter.model_dump()


# ---- no network ------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_network(monkeypatch, tmp_path):
    """Only loopback connections; hub state isolated from the user's (token, cache, agent registry)."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if self.family == socket.AF_UNIX or host in ("127.0.0.1", "::1", "localhost"):
            return real_connect(self, address)
        raise AssertionError(f"test tried to reach the network: {address!r}")

    real_getaddrinfo = socket.getaddrinfo

    def guarded_dns(host, *a, **k):
        if host not in ("127.0.0.1", "::1", "localhost", None):
            raise AssertionError(f"test tried to resolve a network host: {host!r}")
        return real_getaddrinfo(host, *a, **k)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_dns)
    for var in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_CACHE",
        "HF_ENDPOINT",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))
    # The hub fetches an "agent harness" registry on its first request: answer it from memory.
    from huggingface_hub.utils import _detect_agent

    monkeypatch.setattr(_detect_agent, "_registry", {"standardEnvVars": [], "harnesses": {}})


# ---- a hub on disk ---------------------------------------------------------------------


def write_cached_repo(
    cache: Path, repo: str, commit: str, files: dict[str, bytes], *, ref: str | None = "main"
):
    """Write ``files`` into ``cache`` the way ``snapshot_download`` stores them."""
    folder = cache / ("models--" + repo.replace("/", "--"))
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    snap = folder / "snapshots" / commit
    for name, body in files.items():
        blob = hashlib.sha256(body).hexdigest()
        (folder / "blobs" / blob).write_bytes(body)
        target = snap / name
        target.parent.mkdir(parents=True, exist_ok=True)
        rel = os.path.relpath(folder / "blobs" / blob, target.parent)
        target.symlink_to(rel)
    if ref:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / ref).write_text(commit)
    return snap


def checkpoint_files(n_shards: int = 2, *, drop: int | None = None) -> dict[str, bytes]:
    shards = [f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors" for i in range(n_shards)]
    files = {
        "config.json": b'{"architectures": ["NemotronHForCausalLM"]}',
        "model.safetensors.index.json": json.dumps(
            {"weight_map": {f"w{i}": s for i, s in enumerate(shards)}}
        ).encode(),
        "tokenizer.json": b"{}",
        "chat_template.jinja": b"{{ messages }}",
        **{s: f"shard {s}".encode() * 10 for s in shards},
    }
    if drop is not None:
        files.pop(shards[drop])
    return files


def drafter_files() -> dict[str, bytes]:
    return {
        "config.json": b'{"architectures": ["DFlashDraftModel"]}',
        "model.safetensors": b"draft" * 10,
    }


# ---- a hub on 127.0.0.1 ----------------------------------------------------------------


@pytest.fixture
def hub(monkeypatch):
    h = FakeHub()
    # Read by helpers.weights.download at call time and passed to the hub as `endpoint=`, the way a
    # notebook that sets os.environ["HF_ENDPOINT"] after importing huggingface_hub works.
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    yield h
    h.close()


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "hub-cache"


def hub_requests(h: FakeHub) -> list[tuple[str, str]]:
    return [r for r in h.requests if not r[1].startswith("/api/agent-harnesses")]


# ---- offline: the cache on disk --------------------------------------------------------


def test_offline_cached_checkpoint_and_drafter(cache, capsys):
    model_snap = write_cached_repo(cache, NVFP4["model_id"], NVFP4["revision"], checkpoint_files())
    draft_snap = write_cached_repo(cache, DFLASH["repo"], DFLASH["revision"], drafter_files())
    cfg = recipes.resolve("h100", speculative="dflash")
    result = weights.fetch(cfg, cache_dir=cache, local_files_only=True)
    served = result.config
    assert served.model == str(model_snap)
    assert served.speculative_config["model"] == str(draft_snap)
    assert "revision" not in served.speculative_config
    assert served.revision is None and "--revision" not in served.cli_flags()
    assert served.env["HF_HUB_OFFLINE"] == "1"  # the server never asks the hub
    assert [s.from_cache for s in result.snapshots] == [True, True]
    assert all(s.commit == s.revision for s in result.snapshots)
    out = capsys.readouterr().out
    assert "cached" in out and str(model_snap) in out
    assert cfg.model == NVFP4["model_id"]  # the input config is unchanged


def test_hf_hub_offline_env_uses_the_cache(cache, monkeypatch):
    snap = write_cached_repo(cache, NVFP4["model_id"], NVFP4["revision"], checkpoint_files())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert weights.download(recipes.resolve("h200"), cache_dir=cache).model == str(snap)


def test_cache_first_needs_no_hub(cache, monkeypatch):
    # Hub unreachable (nothing listens there) and not offline: a cached pin is still served.
    snap = write_cached_repo(cache, NVFP4["model_id"], NVFP4["revision"], checkpoint_files())
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert weights.download(recipes.resolve("h100"), cache_dir=cache, quiet=True).model == str(snap)


def test_hf_hub_cache_env_is_read_at_call_time(cache, monkeypatch):
    snap = write_cached_repo(cache, NVFP4["model_id"], NVFP4["revision"], checkpoint_files())
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    assert weights.download(
        recipes.resolve("h100"), local_files_only=True, quiet=True
    ).model == str(snap)


def test_unpinned_bf16_from_cache_prints_commit_to_pin(cache, capsys):
    commit = "1234567890abcdef1234567890abcdef12345678"
    snap = write_cached_repo(cache, BF16["model_id"], commit, checkpoint_files())
    cfg = recipes.resolve("h100-bf16")
    assert cfg.revision is None
    result = weights.fetch(cfg, cache_dir=cache, local_files_only=True)
    assert result.config.model == str(snap) and result.model.commit == commit
    out = capsys.readouterr().out
    assert commit in out and "pin it in cookbook/recipe.yaml" in out


def test_offline_and_not_cached_names_the_fix(cache):
    with pytest.raises(WeightsError) as exc:
        weights.download(recipes.resolve("h100"), cache_dir=cache, local_files_only=True)
    msg = str(exc.value)
    assert NVFP4["model_id"] in msg and "once with network access" in msg and "cache_dir=" in msg
    assert isinstance(exc.value, CookbookError)


def test_partial_snapshot_is_not_used_offline(cache):
    write_cached_repo(cache, NVFP4["model_id"], NVFP4["revision"], checkpoint_files(drop=1))
    with pytest.raises(WeightsError, match="network access"):
        weights.download(recipes.resolve("h100"), cache_dir=cache, local_files_only=True)


def test_local_model_path_is_left_alone(tmp_path):
    cfg = recipes.resolve("h100").with_model(tmp_path)
    out = weights.download(cfg, cache_dir=tmp_path / "c", local_files_only=True, quiet=True)
    assert out.model == str(tmp_path)


def test_stand_in_builds_the_tiny_model(monkeypatch, tmp_path):
    from helpers.standin import build as standin

    built = tmp_path / "standin-model"
    built.mkdir()
    calls = []
    monkeypatch.setattr(standin, "build_standin_model", lambda *a, **k: calls.append(1) or built)
    out = weights.download(recipes.resolve("cpu"), quiet=True)
    assert out.model == str(built) and calls == [1]


# ---- online: the fake hub --------------------------------------------------------------


def test_download_pinned_checkpoint_and_drafter_then_reuse(hub, cache, capsys):
    files = {
        **checkpoint_files(),
        "README.md": b"# card",
        "figure.png": b"\x89PNG",
        "extra.bin": b"x" * 50,
    }
    hub.add(NVFP4["model_id"], files, commit=NVFP4["revision"])
    hub.add(
        DFLASH["repo"],
        {**drafter_files(), "notes.txt": b"not in allow_patterns"},
        commit=DFLASH["revision"],
    )
    cfg = recipes.resolve("h100", speculative="dflash")

    result = weights.fetch(cfg, cache_dir=cache)
    model, drafter = result.snapshots
    assert not model.from_cache and model.commit == NVFP4["revision"]
    snap = Path(model.path)
    assert (
        snap
        == cache
        / ("models--" + NVFP4["model_id"].replace("/", "--"))
        / "snapshots"
        / NVFP4["revision"]
    )
    assert (snap / "config.json").read_bytes() == files["config.json"]
    assert (snap / "README.md").exists()  # *.md is in allow_patterns
    assert not (snap / "figure.png").exists() and not (snap / "extra.bin").exists()
    assert not (Path(drafter.path) / "notes.txt").exists()
    expected = sum(len(b) for n, b in files.items() if n not in ("figure.png", "extra.bin"))
    assert model.size_bytes == expected == model.downloaded_bytes
    assert result.config.speculative_config["model"] == drafter.path
    assert any(p.startswith(f"/{NVFP4['model_id']}/resolve/") for _, p in hub_requests(hub))

    # A re-run is served from the cache without a single hub request.
    hub.requests.clear()
    again = weights.fetch(cfg, cache_dir=cache, quiet=True)
    assert hub_requests(hub) == []
    assert [s.path for s in again.snapshots] == [model.path, drafter.path]
    assert all(s.from_cache for s in again.snapshots)


def test_download_unpinned_resolves_and_prints_commit(hub, cache, capsys):
    commit = "abcdefabcdefabcdefabcdefabcdefabcdefabcd"
    hub.add(BF16["model_id"], checkpoint_files(), commit=commit)
    served = weights.download(recipes.resolve("h100-bf16"), cache_dir=cache)
    assert Path(served.model).name == commit
    out = capsys.readouterr().out
    assert f"resolved to {commit}" in out and "pin it" in out
    refs = cache / ("models--" + BF16["model_id"].replace("/", "--")) / "refs" / "main"
    assert refs.read_text() == commit
    # Offline afterwards: refs/main leads to the same snapshot.
    assert (
        weights.download(
            recipes.resolve("h100-bf16"), cache_dir=cache, local_files_only=True, quiet=True
        ).model
        == served.model
    )


def test_partial_snapshot_is_completed_online(hub, cache):
    write_cached_repo(cache, NVFP4["model_id"], NVFP4["revision"], checkpoint_files(drop=1))
    hub.add(NVFP4["model_id"], checkpoint_files(), commit=NVFP4["revision"])
    result = weights.fetch(recipes.resolve("h100"), cache_dir=cache, quiet=True)
    (snap,) = result.snapshots
    assert not snap.from_cache
    assert 0 < snap.downloaded_bytes < snap.size_bytes  # only the missing shard was counted
    assert len(list(Path(snap.path).glob("*.safetensors"))) == 2


def test_a_damaged_cached_file_is_fetched_again_with_force_download(hub, cache):
    """The fix the start-up diagnosis gives for a damaged checkpoint (download it again with
    force_download=True) works: the cache-first path keeps the damaged file, the forced one
    replaces it from the hub; offline, forcing is refused with the fix."""
    hub.add(NVFP4["model_id"], checkpoint_files(), commit=NVFP4["revision"])
    cfg = recipes.resolve("h100")
    (snap,) = weights.fetch(cfg, cache_dir=cache, quiet=True).snapshots
    shard = sorted(Path(snap.path).glob("*.safetensors"))[0]
    good = shard.read_bytes()
    target = shard.resolve()  # the blob the snapshot links to
    target.write_bytes(good[: len(good) // 2])  # truncated, as a cut copy leaves it
    (again,) = weights.fetch(cfg, cache_dir=cache, quiet=True).snapshots
    assert again.from_cache and shard.read_bytes() != good
    (forced,) = weights.fetch(cfg, cache_dir=cache, quiet=True, force_download=True).snapshots
    assert not forced.from_cache and shard.read_bytes() == good
    with pytest.raises(WeightsError, match="HF_HUB_OFFLINE=0"):
        weights.fetch(cfg, cache_dir=cache, quiet=True, force_download=True, local_files_only=True)


def _fix_names_licence_and_token(msg: str):
    assert "accept the licence" in msg and "HF_TOKEN" in msg
    assert ". " not in msg and msg.endswith(".")  # one sentence


def test_gated_without_token(hub, cache):
    hub.add(NVFP4["model_id"], checkpoint_files(), commit=NVFP4["revision"], gated=True)
    with pytest.raises(HubAccessError) as exc:
        weights.download(recipes.resolve("h100"), cache_dir=cache, token=False, quiet=True)
    assert isinstance(exc.value.__cause__, GatedRepoError)
    assert exc.value.__cause__.response.status_code == 401
    _fix_names_licence_and_token(str(exc.value))
    assert f"{hub.url}/{NVFP4['model_id']}" in str(exc.value)  # the model page to visit


def test_gated_licence_not_accepted(hub, cache, monkeypatch):
    hub.add(
        NVFP4["model_id"],
        checkpoint_files(),
        commit=NVFP4["revision"],
        gated=True,
        accepted_tokens=("hf_accepted",),
    )
    monkeypatch.setenv("HF_TOKEN", "hf_someone_else")
    with pytest.raises(HubAccessError) as exc:
        weights.download(recipes.resolve("h100"), cache_dir=cache, quiet=True)
    assert isinstance(exc.value.__cause__, GatedRepoError)
    assert exc.value.__cause__.response.status_code == 403
    _fix_names_licence_and_token(str(exc.value))
    # With the token of the account that accepted the licence, it downloads.
    monkeypatch.setenv("HF_TOKEN", "hf_accepted")
    assert Path(
        weights.download(recipes.resolve("h100"), cache_dir=cache, quiet=True).model
    ).is_dir()


def test_repo_not_found_or_private_is_not_called_gated(hub, cache):
    # the registry's id, absent from the hub: RepositoryNotFoundError (401, no token), whose
    # text always carries the hub's "private or gated repo" sentence; it is not a gated repo
    with pytest.raises(HubAccessError) as exc:
        weights.download(recipes.resolve("h100"), cache_dir=cache, token=False, quiet=True)
    cause = exc.value.__cause__
    assert isinstance(cause, RepositoryNotFoundError) and not isinstance(cause, GatedRepoError)
    assert "private or gated repo" in str(cause)
    msg = str(exc.value)
    assert "missing or private" in msg and "not gated" in msg and "accept the licence" not in msg
    assert f"https://huggingface.co/{NVFP4['model_id']} exists" in msg and "HF_TOKEN" in msg


def test_misspelled_repo_id_names_the_closest_registry_id(hub, cache):
    typo = "nvidia/NVIDIA-Nemotron-3.5-Lightning-NVFP4"  # no "-30B-A3B"
    cfg = recipes.resolve("h100").with_model(typo)
    with pytest.raises(HubAccessError) as exc:
        weights.download(cfg, cache_dir=cache, token="hf_valid", quiet=True)
    assert exc.value.__cause__.response.status_code == 404  # with a token: 404
    msg = str(exc.value)
    assert "not an id the registry names" in msg and "accept the licence" not in msg
    assert f"the closest it names is {NVFP4['model_id']}" in msg


def test_invalid_token_401(hub, cache):
    hub.add(NVFP4["model_id"], checkpoint_files(), commit=NVFP4["revision"])
    with pytest.raises(HubAccessError) as exc:
        weights.download(recipes.resolve("h100"), cache_dir=cache, token="hf_invalid", quiet=True)
    cause = exc.value.__cause__
    assert isinstance(cause, HfHubHTTPError) and not isinstance(cause, RepositoryNotFoundError)
    assert cause.response.status_code == 401
    msg = str(exc.value)
    assert "invalid or expired" in msg and "https://huggingface.co/settings/tokens" in msg
    assert "HF_TOKEN" in msg and "accept the licence" not in msg


def test_unknown_pinned_revision(hub, cache):
    hub.add(NVFP4["model_id"], checkpoint_files(), commit="f" * 40)
    with pytest.raises(WeightsError, match="fix the pinned revision in cookbook/recipe.yaml"):
        weights.download(recipes.resolve("h100"), cache_dir=cache, quiet=True)


def test_hub_unreachable_and_not_cached(cache, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(WeightsError) as exc:
        weights.download(recipes.resolve("h100"), cache_dir=cache, quiet=True)
    assert "Cannot reach the hub" in str(exc.value) and "HF_HUB_OFFLINE=1" in str(exc.value)


# ---- disk space ------------------------------------------------------------------------


def recorded_info() -> dict:
    return json.loads((DATA / "model_info_nvfp4.json").read_text())


def test_sizes_filtered_by_allow_patterns():
    from huggingface_hub.hf_api import ModelInfo

    info = ModelInfo(**recorded_info())
    files = hub_mod.matching_files(info, NVFP4["allow_patterns"])
    assert "accuracy_chart.png" not in files and ".gitattributes" not in files
    assert "nemo/model_config.yaml" not in files
    assert "modeling_nemotron_h.py" in files and "chat_template.jinja" in files
    assert len([f for f in files if f.endswith(".safetensors")]) == 4
    assert sum(files.values()) == 18_621_773_804  # ~ the recipe's 18 GB
    assert sum(hub_mod.matching_files(info, None).values()) > sum(files.values())


def test_disk_space_refusal_before_downloading(hub, cache):
    info = recorded_info()
    free = hub_mod.free_bytes(cache)
    # One shard larger than this disk's free space, as the hub would report it.
    shard = next(
        s for s in info["siblings"] if s["rfilename"].endswith("00001-of-00004.safetensors")
    )
    shard["size"] = shard["lfs"]["size"] = free + 50 * 10**9
    hub.add(NVFP4["model_id"], checkpoint_files(), commit=NVFP4["revision"], info=info)
    with pytest.raises(DiskSpaceError) as exc:
        weights.download(recipes.resolve("h100"), cache_dir=cache, quiet=True)
    msg = str(exc.value)
    assert re.search(r"free \d+\.\d GB there, or choose another cache dir", msg), msg
    assert "cache_dir=" in msg and "HF_HUB_CACHE" in msg
    assert exc.value.need_bytes > free
    # Nothing was fetched: only the model_info call reached the hub.
    assert all("/resolve/" not in p for _, p in hub_requests(hub))
    assert not (cache / ("models--" + NVFP4["model_id"].replace("/", "--")) / "blobs").exists()


def test_disk_space_counts_model_and_drafter_together(hub, cache):
    hub.add(NVFP4["model_id"], checkpoint_files(), commit=NVFP4["revision"])
    hub.add(DFLASH["repo"], drafter_files(), commit=DFLASH["revision"])
    free_gb = hub_mod.free_bytes(cache) / 1e9
    with pytest.raises(DiskSpaceError) as exc:
        # Headroom chosen so the two tiny repos do not fit; 0.5 GB of margin because other
        # processes (the parallel test worker) free disk space between the two readings.
        weights.download(
            recipes.resolve("h100", speculative="dflash"),
            cache_dir=cache,
            headroom_gb=free_gb + 0.5,
            quiet=True,
        )
    assert NVFP4["model_id"] in str(exc.value) and DFLASH["repo"] in str(exc.value)


def test_weightless_mode_with_the_real_drafter_fetches_only_the_drafter(cache, tmp_path):
    """Weightless (``--load-format dummy``) with the real DFlash drafter (allow_hub_drafter):
    the architecture folder is local, so weights.download fetches only the drafter; the server
    then needs no hub at all. (By default the drafter is weightless too: test_drafters.py.)"""
    from helpers.weights import weightless

    arch = weightless.build_arch_model("nvfp4", tmp_path / "arch")
    cfg = recipes.resolve("h100", speculative="dflash")
    # by default the drafter is a local weightless folder: nothing to fetch
    local = weightless.arch_config(cfg, arch)
    assert local.speculative_config["model"] == str(tmp_path / "arch-dflash")
    assert weights.fetch(local, cache_dir=cache, local_files_only=True).snapshots == []
    draft_snap = write_cached_repo(cache, DFLASH["repo"], DFLASH["revision"], drafter_files())
    result = weights.fetch(
        weightless.arch_config(cfg, arch, allow_hub_drafter=True),
        cache_dir=cache,
        local_files_only=True,
    )
    assert [s.repo for s in result.snapshots] == [DFLASH["repo"]]  # not the 18 GB checkpoint
    served = result.config
    assert served.model == str(arch) and served.args["--load-format"] == "dummy"
    assert served.speculative_config["model"] == str(draft_snap)
    assert served.env["HF_HUB_OFFLINE"] == "1"
    # without a separate drafter, the weightless config is offline as it stands
    assert weightless.arch_config(recipes.resolve("h100"), arch).env["HF_HUB_OFFLINE"] == "1"
