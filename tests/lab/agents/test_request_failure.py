"""A request the server failed (HTTP 5xx), said in the cookbook's words
(:mod:`lab.agents.request_failure`); the live cases (a real vLLM 500 with its log) are in
tests/notebooks/test_gpu_defaults.py."""

from __future__ import annotations

import httpx
import openai
import pytest

from helpers.paths import REPO_ROOT
from lab.agents.request_failure import _ERROR, KNOWN, describe_server_error, describe_with_log

H200_AGENTS_LOG = next(
    (REPO_ROOT / "docs/results/h200/notebooks-2026-12-02/agents-failed/logs").glob("*.log")
)  # fmt: skip


def _status_error(status: int, body: str) -> openai.APIStatusError:
    """The SDK's own error for a reply, made by the SDK's own client from a real response."""
    request = httpx.Request("POST", "http://10.0.0.9:8000/v1/chat/completions")
    response = httpx.Response(status, text=body, request=request)
    client = openai.OpenAI(base_url="http://10.0.0.9:8000/v1", api_key="x")
    return client._make_status_error_from_response(response)


def test_a_500_with_vllms_empty_message_from_another_host_says_where_the_cause_is():
    """Seen on an H200 (2026-12-01, agents notebook, weightless): vLLM 0.32.0 answers its
    ``EngineGenerateError()`` with an empty message and keeps the cause in its log."""
    e = _status_error(500, '{"error": {"message": "", "type": "InternalServerError", "code": 500}}')
    said = describe_server_error("http://10.0.0.9:8000/v1", "POST /v1/chat/completions", 500, e)
    assert (
        "failed POST /v1/chat/completions (HTTP 500, InternalServerError) with an empty message"
        in said
    )
    assert "read its last ERROR lines" in said  # not this machine's server: where to look
    assert "--log-error-stack --enable-log-requests" in said


def test_the_h200_500_names_the_missing_module_from_the_servers_log(tmp_path):
    """The H200's own log (2026-12-02, agents notebook, served with --log-error-stack
    --enable-log-requests): every schema request failed because the device bundle lacked
    lm-format-enforcer. The message names the module and the fix, quotes the log's error lines
    and does not ask for flags the server already runs with."""
    lines = H200_AGENTS_LOG.read_text().splitlines(keepends=True)
    upto = next(i for i, line in enumerate(lines) if '" 500 Internal Server Error' in line)
    log = tmp_path / H200_AGENTS_LOG.name  # the log as it stood when the 500 came
    log.write_text("".join(lines[: upto + 1]))
    said = describe_with_log(
        "http://127.0.0.1:59103/v1", "POST /v1/chat/completions", 500, "", "InternalServerError", log
    )  # fmt: skip
    assert "Cause: vLLM's Python environment lacks the module 'lmformatenforcer'" in said
    assert "`pip install vllm==<release>` brings it" in said
    assert "ModuleNotFoundError: No module named 'lmformatenforcer'" in said  # quoted from the log
    assert "restart the server with" not in said
    assert 'File "' not in said  # the exception lines, not the traceback's frames
    assert f"Log: {log}" in said


def test_a_log_without_a_cause_asks_for_the_flags_the_server_lacks(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(
        "# helpers.server.vllm_server launch: python -m vllm.entrypoints.launchers.api_server.entry "
        "--model m --log-error-stack\n"
        'INFO:     127.0.0.1:42928 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n'
    )  # fmt: skip
    said = describe_with_log(
        "http://127.0.0.1:1/v1", "POST /v1/chat/completions", 500, "", None, log
    )
    assert "The log has no error line for it." in said
    assert 'restart the server with extra_args={"--enable-log-requests": True}' in said


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
        "lacks the module": "(APIServer pid=3629) INFO 12-02 01:03:12 [async_llm.py:819] Request "
        "chatcmpl-83196cdcda8d9579 failed due to ModuleNotFoundError: No module named 'lmformatenforcer'.",
    }
    for known in KNOWN:
        matched = [k for k, line in lines.items() if known.wording.search(line)]
        assert len(matched) == 1 and matched[0] in known.cause, (known.cause, matched)
