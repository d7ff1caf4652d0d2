"""The two-pass reasoning budget behind lm-eval: a local chat endpoint that answers each request
with :func:`helpers.chat.drafting.two_pass_budget` (a plain request when no budget is asked).

Where the server drafts, vLLM may not enforce ``thinking_token_budget`` (vllm-project/vllm
#39573, #54906; :mod:`helpers.chat.drafting`), so the accuracy step points lm-eval at this
endpoint: each request becomes a first pass that reasons up to the budget and, when cut, a
second from the closed think block; lm-eval still scores the final ``content``. It runs in the
lm-eval child, on 127.0.0.1, for the run only.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any


def _answer(client: Any, model: str, body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completion JSON of one lm-eval request: the two-pass budget when the body asks
    for ``thinking_token_budget`` with thinking on, else the body sent as it is."""
    from helpers.chat.drafting import two_pass_budget
    from helpers.chat.parse import check_reply

    thinking = bool((body.get("chat_template_kwargs") or {}).get("enable_thinking", True))
    budget = body.get("thinking_token_budget")
    create: dict[str, Any] = {
        "temperature": float(body.get("temperature", 1.0)),
        "top_p": float(body.get("top_p", 1.0)),
        "extra_body": {"chat_template_kwargs": {"enable_thinking": thinking}},
    }
    stop = [s for s in (body.get("stop") or []) if s]
    if stop:
        create["stop"] = stop
    if body.get("seed") is not None:
        create["seed"] = body["seed"]
    max_tokens = body.get("max_tokens")
    if budget is not None and thinking:
        r = two_pass_budget(
            client, model, body["messages"], budget, max_tokens=max_tokens, **create
        )
    else:
        reply = client.chat.completions.create(
            model=model, messages=body["messages"], max_tokens=max_tokens, **create
        )
        r = check_reply(reply, max_tokens=max_tokens, extra_body=create["extra_body"])
    return {
        "id": f"two-pass-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": r.content, "reasoning": r.reasoning},
                "finish_reason": r.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": r.usage.prompt_tokens,
            "completion_tokens": r.usage.completion_tokens,
        },
    }


@contextlib.contextmanager
def two_pass_endpoint(base_url: str, model: str) -> Iterator[str]:
    """A local ``POST /chat/completions`` that applies the two-pass budget against ``base_url``.

    Args:
        base_url: the vLLM server's OpenAI base (``http://host:port/v1``).
        model: the served model name.

    Yields:
        The endpoint's base URL (``http://127.0.0.1:PORT``): lm-eval's ``base_url`` is it plus
        ``/chat/completions``. A request that fails answers HTTP 502 with the error's text
        (lm-eval then reports it); the server thread ends when the block does.
    """
    from helpers.server.endpoint import make_client

    client = make_client(base_url, timeout=3600)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # lm-eval's own log is the record
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                status, payload = 200, _answer(client, model, body)
            except Exception as e:  # noqa: BLE001 - reported to lm-eval, which names it
                status, payload = 502, {"error": {"message": f"{type(e).__name__}: {e}"[:2000]}}
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.1,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
