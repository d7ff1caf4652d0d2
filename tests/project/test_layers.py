"""The layer contracts in ``pyproject.toml`` (import-linter), applied to small synthetic trees.

``make test`` runs ``lint-imports`` on the real package; these tests show that the same
contracts refuse a lower step importing a higher one, a cycle inside a step, the core
(``helpers``) importing the lab, and either importing the project's tooling, so a kept
contract means something.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import REPO_ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

STEPS = [
    "config",
    "machine",
    "memory",
    "weights",
    "standin",
    "server",
    "chat",
    "bench",
]
#: The lab's sub-packages (``lab``, the second import root, built on ``helpers``).
LAB_STEPS = ["tune", "evals", "fleet", "verify", "agents", "bench", "workshop", "adapters"]

#: helpers' modules outside the steps (``errors``, ``paths``, ``loop_thread``): layers too.
TOP_LEVEL_MODULES = sorted(
    p.stem for p in (REPO_ROOT / "helpers").glob("*.py") if p.stem != "__init__"
)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A copy of the packages' shape (every step, the package's own top-level modules such as
    ``errors`` and ``paths``, the lab's sub-packages, ``tools``) plus ``files``."""
    root = tmp_path / "src"
    core = ["helpers", *(f"helpers/{s}" for s in STEPS)]
    for pkg in [*core, "lab", *(f"lab/{s}" for s in LAB_STEPS), "tools"]:
        (root / pkg).mkdir(parents=True, exist_ok=True)
        (root / pkg / "__init__.py").write_text("")
    for mod in TOP_LEVEL_MODULES:
        (root / "helpers" / f"{mod}.py").write_text("")
    for rel, text in files.items():
        (root / rel).write_text(text)
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = ["[importlinter]\nroot_packages =\n    " + "\n    ".join(config["root_packages"])]
    lines.append(f"include_external_packages = {config['include_external_packages']}")
    for i, contract in enumerate(config["contracts"]):
        lines.append(f"\n[importlinter:contract:{i}]")
        for key, value in contract.items():
            if isinstance(value, list):
                value = "\n    " + "\n    ".join(value)
            lines.append(f"{key} = {value}")
    (tmp_path / ".importlinter").write_text("\n".join(lines) + "\n")
    return root


def _lint(tmp_path: Path, root: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--config", str(tmp_path / ".importlinter"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


def test_the_package_shape_with_imports_in_layer_order_is_kept(tmp_path):
    root = _tree(
        tmp_path,
        {
            "helpers/config/resolve.py": "import helpers.errors\n",
            "helpers/server/launch.py": "import helpers.config.resolve\nimport helpers.memory\n",
            "lab/fleet/fleet.py": "import helpers.server.launch\nimport helpers.bench\n",
            "lab/agents/structured.py": "import helpers.chat\nimport helpers.server\n",
            "lab/verify/check.py": "import lab.agents.structured\nimport helpers.bench\n",
            "tools/build.py": "import lab.fleet.fleet\n",
        },
    )
    out = _lint(tmp_path, root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "BROKEN" not in out.stdout


@pytest.mark.parametrize(
    ("files", "names"),
    [
        ({"helpers/config/resolve.py": "import helpers.server\n"}, "one layer per story step"),
        ({"helpers/chat/a.py": "import helpers.bench\n"}, "one layer per story step"),
        (
            {
                "helpers/chat/a.py": "import helpers.chat.b\n",
                "helpers/chat/b.py": "import helpers.chat.a\n",
            },
            "no import cycle",
        ),
        ({"helpers/chat/a.py": "import helpers.weights\n"}, "import neither weights nor standin"),
        ({"lab/evals/a.py": "import helpers.standin\n"}, "import neither weights nor standin"),
        ({"lab/agents/a.py": "import helpers.weights\n"}, "import neither weights nor standin"),
        ({"helpers/bench/plot.py": "import tools\n"}, "never imports the project's tooling"),
        (
            {"helpers/bench/plot.py": "from tests.support import shared_kernel\n"},
            "never imports the project's tooling",
        ),
        ({"helpers/chat/a.py": "import lab.agents\n"}, "the core (helpers) never imports the lab"),
        ({"helpers/config/a.py": "import lab.tune\n"}, "the core (helpers) never imports the lab"),
        ({"lab/agents/a.py": "import lab.verify\n"}, "lab: the topic steps over the agents"),
        (
            {"lab/tune/a.py": "import lab.tune.b\n", "lab/tune/b.py": "import lab.tune.a\n"},
            "no import cycle",
        ),
        ({"lab/agents/a.py": "import helpers.bench\n"}, "never import bench"),
        ({"lab/bench/a.py": "import lab.tune\n"}, "lab: the topic steps over the agents"),
        ({"lab/tune/a.py": "import tools\n"}, "lab never imports the project's tooling"),
    ],
    ids=[
        "config-imports-server",
        "chat-imports-bench",
        "cycle-in-chat",
        "chat-imports-weights",
        "evals-imports-standin",
        "agents-import-weights",
        "tools",
        "tests-module",
        "chat-imports-lab",
        "config-imports-lab",
        "agents-import-verify",
        "cycle-in-tune",
        "agents-import-bench",
        "lab-bench-imports-tune",
        "lab-imports-tools",
    ],  # fmt: skip
)
def test_a_contract_is_broken_by_an_import_against_it(tmp_path, files, names):
    root = _tree(tmp_path, files)
    if "tests.support" in str(files):  # the test suite's package, beside helpers as in the repo
        for pkg in ("tests", "tests/support"):
            (root / pkg).mkdir(exist_ok=True)
            (root / pkg / "__init__.py").write_text("")
        (root / "tests" / "support" / "shared_kernel.py").write_text("")
    out = _lint(tmp_path, root)
    assert out.returncode != 0, out.stdout
    broken = [line for line in out.stdout.splitlines() if line.endswith("BROKEN")]
    assert broken and all(names in line for line in broken), out.stdout
