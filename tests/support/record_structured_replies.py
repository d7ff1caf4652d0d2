"""Record the two schema replies ``tests/lab/agents/test_structured.py`` replays, from real launches of
the installed vLLM on the built stand-in: ``in_reasoning`` (``--structured-outputs-config
'{"enable_in_reasoning": true}'``: the JSON comes back in ``reasoning``) and ``no_parser`` (no
``--reasoning-parser``: the grammar applies from the first token). Each: one greedy,
thinking-on request with the compact grammar of ``Capital``. Usage, from the repository root
(about a minute each on 2 cores)::

    .venv/bin/python tests/support/record_structured_replies.py in_reasoning|no_parser
"""

import json
import sys
from pathlib import Path
from typing import Literal

import httpx
import pydantic

from helpers.config.resolve import resolve
from helpers.server.vllm_server import VLLMServer
from helpers.standin.build import build_standin_model
from lab.agents.structured import compact_grammar_for


class Capital(pydantic.BaseModel):
    city: Literal["Tokyo", "Paris", "Other"]
    sure: bool


OUT = Path(__file__).resolve().parents[1] / "data" / "responses"
which = sys.argv[1]
extra = {
    "in_reasoning": {"--structured-outputs-config": json.dumps({"enable_in_reasoning": True})},
    "no_parser": {"--reasoning-parser": None},
}[which]
cfg = resolve("cpu").with_model(build_standin_model()).with_args(extra)
print(cfg.args)
srv = VLLMServer(cfg)
srv.start()
try:
    body = {
        "model": srv.model_name,
        "messages": [{"role": "user", "content": "What is the capital of Japan?"}],
        "max_tokens": 256,
        "temperature": 0.0,
        "top_p": 1.0,
        "chat_template_kwargs": {"enable_thinking": True},
        "structured_outputs": {"grammar": compact_grammar_for(Capital)},
    }
    r = httpx.post(f"{srv.base_url}/chat/completions", json=body, timeout=120)
    print(r.status_code, r.text[:600])
    name = {
        "in_reasoning": "structured_json_in_reasoning",
        "no_parser": "structured_no_reasoning_parser",
    }[which]
    (OUT / f"{name}.json").write_text(json.dumps(r.json(), indent=1) + "\n")
finally:
    srv.stop()
