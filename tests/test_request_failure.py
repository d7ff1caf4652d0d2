"""A request the server failed (HTTP 5xx), said in the cookbook's words
(:mod:`helpers.server.request_failure`); the live cases (a real vLLM 500 with its log) are in
tests/test_gpu_defaults.py."""

from __future__ import annotations

import httpx
import openai
import pytest

from helpers.server.request_failure import _ERROR, KNOWN, describe_server_error


def _status_error(status: int, body: str) -> openai.APIStatusError:
    """The SDK's own error for a reply, made by the SDK's own client from a real response."""
    request = httpx.Request("POST", "http://10.0.0.9:8000/v1/chat/completions")
    response = httpx.Response(status, text=body, request=request)
    client = openai.OpenAI(base_url="http://10.0.0.9:8000/v1", api_key="x")
    return client._make_status_error_from_response(response)


def test_a_500_with_vllms_empty_message_says_to_restart_with_log_error_stack():
    """Seen on an H200 (2026-12-01, agents notebook, weightless): vLLM 0.32.0's handler puts
    ``str(exc)`` in the body, so an exception without words gives an empty message, and it
    logs the stack only with --log-error-stack."""
    e = _status_error(500, '{"error": {"message": "", "type": "InternalServerError", "code": 500}}')
    said = describe_server_error("http://10.0.0.9:8000/v1", "POST /v1/chat/completions", 500, e)
    assert (
        "failed POST /v1/chat/completions (HTTP 500, InternalServerError) with an empty message"
        in said
    )
    assert 'extra_args={"--log-error-stack": True}' in said
    assert "read its last ERROR lines" in said  # not this machine's server: where to look


def test_a_500_with_words_quotes_them():
    e = _status_error(
        500, '{"error": {"message": "Internal server error", "type": "InternalServerError"}}'
    )
    said = describe_server_error("http://10.0.0.9:8000", "POST /v1/responses", 500, e)
    assert said.startswith(
        "The server at http://10.0.0.9:8000 failed POST /v1/responses (HTTP 500): Internal server error."
    )


@pytest.mark.parametrize(
    "line, error",
    [
        ("(EngineCore pid=7) ERROR 12-01 20:40:47 [scheduler.py:2189] Unexpected: grammar rejected", True),
        ("Traceback (most recent call last):", True),
        ("torch.OutOfMemoryError: CUDA out of memory.", True),
        ("(APIServer pid=2326) WARNING 12-01 22:17:01 [system_utils.py:255] Found ulimit of 20000 "
         "... fd limit errors like `OSError: [Errno 24] Too many open files`", False),
        ("INFO:     127.0.0.1:42928 - \"POST /v1/chat/completions HTTP/1.1\" 500 Internal Server Error", False),
    ],
)  # fmt: skip
def test_only_error_lines_are_quoted(line, error):
    assert bool(_ERROR.search(line)) is error


def test_each_known_cause_matches_the_line_vllm_writes():
    lines = {
        "guided decoding": "ERROR 12-01 21:39:30 [scheduler.py:2189] Unexpected: grammar rejected "
        "tokens [0] for request chatcmpl-b7f2-a672. Terminating request.",
        "engine process died": "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered "
        "an issue. See stack trace (above) for the root cause.",
        "out of memory": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    }
    for known in KNOWN:
        matched = [k for k, line in lines.items() if known.wording.search(line)]
        assert len(matched) == 1 and matched[0] in known.cause, (known.cause, matched)
