"""No server, or not a vLLM server, at the URL; ``ChatOptions``, the settings ``chat``,
``stream_chat`` and ``run_tool_loop`` share (recorded replies: tests/support/chat_replay.py).
"""

from __future__ import annotations

import http.server
import threading

import pytest

from helpers import errors as errors_mod
from helpers.chat import completions as hc
from helpers.chat import request as request_mod
from helpers.chat import stream as stream_mod
from helpers.chat import tools as tools_mod
from helpers.errors import ResponseError
from helpers.server import endpoint
from tests.support.chat_replay import (
    MODEL,
    TOOLS,
    WEATHER_TOOLS,
)

# ─── no server, or not a vLLM server, at the URL ────────────────────────────────────────


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("max_tokens", [None, 64])
def test_chat_against_a_closed_port_names_the_url(max_tokens):
    url = f"http://127.0.0.1:{_closed_port()}"
    client = endpoint.make_client(url, timeout=5)
    with pytest.raises(errors_mod.ServerConnectionError) as ei:
        hc.chat(client, MODEL, "hi", max_tokens=max_tokens)
    text = str(ei.value)
    assert f"No vLLM server answers {url}/v1" in text
    assert "start one (launch_server(cfg)) or check the URL" in text
    with pytest.raises(errors_mod.ServerConnectionError, match="No vLLM server answers"):
        stream_mod.stream_chat(client, MODEL, "hi", max_tokens=64)


@pytest.mark.parametrize("max_tokens", [None, 64])
def test_chat_against_a_http_server_that_is_not_vllm(tmp_path, max_tokens):
    import functools

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        client = endpoint.make_client(url, timeout=5)
        with pytest.raises(errors_mod.ServerConnectionError) as ei:
            hc.chat(client, MODEL, "hi", max_tokens=max_tokens)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
    text = str(ei.value)
    status = "404" if max_tokens is None else "501"  # GET /v1/models first when unset
    assert f"The server at {url} answered" in text and f"HTTP {status}" in text
    assert "not a vLLM OpenAI-compatible server" in text and "Check the URL and port" in text


def test_unknown_model_names_the_served_ones(rec, client):
    rec.queue("error_model_not_found", status=404)
    with pytest.raises(
        ResponseError, match=r"does not serve model 'nemotron-typo'; it serves \['nemotron-test'\]"
    ):
        hc.chat(client, "nemotron-typo", "hi", max_tokens=64)


# ─── ChatOptions: the shared settings of chat / stream_chat / run_tool_loop ─────────────

ChatOptions = request_mod.ChatOptions
_SCHEMA_F = {
    "type": "function",
    "function": {
        "name": "f",
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
}


# Each expected body is what build_request(MODEL, "hi", **settings) returned before
# ChatOptions existed (its keyword signature then), printed and pasted here unchanged.
@pytest.mark.parametrize(
    "options, request_kwargs, expected",
    [
        (
            ChatOptions(max_tokens=16000),
            {},
            {
                "model": "nemotron-test",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 1.0,
                "top_p": 0.95,
                "max_tokens": 16000,
                "extra_body": {"chat_template_kwargs": {"enable_thinking": True}},
            },
        ),
        (
            ChatOptions(thinking=False, max_tokens=1024, temperature=0.0, top_p=1.0),
            {},
            {
                "model": "nemotron-test",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 0.0,
                "top_p": 1.0,
                "max_tokens": 1024,
                "extra_body": {"chat_template_kwargs": {"enable_thinking": False}},
            },
        ),
        (
            ChatOptions(max_tokens=2048, reasoning_budget=256, force_nonempty_content=True),
            {},
            {
                "model": "nemotron-test",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 1.0,
                "top_p": 0.95,
                "max_tokens": 2048,
                "extra_body": {
                    "chat_template_kwargs": {
                        "enable_thinking": True,
                        "force_nonempty_content": True,
                    },
                    "thinking_token_budget": 256,
                },
            },
        ),
        (
            ChatOptions(max_tokens=None, tools=[_SCHEMA_F], tool_choice="auto"),
            {},
            {
                "model": "nemotron-test",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 1.0,
                "top_p": 0.95,
                "tools": [_SCHEMA_F],
                "tool_choice": "auto",
                "extra_body": {"chat_template_kwargs": {"enable_thinking": True}},
            },
        ),
        (
            ChatOptions(max_tokens=64),
            {
                "stream": True,
                "extra_body": {
                    "top_k": 20,
                    "chat_template_kwargs": {"truncate_history_thinking": False},
                },
                "seed": 7,
            },
            {
                "model": "nemotron-test",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 1.0,
                "top_p": 0.95,
                "max_tokens": 64,
                "stream": True,
                "stream_options": {"include_usage": True},
                "seed": 7,
                "extra_body": {
                    "top_k": 20,
                    "chat_template_kwargs": {
                        "truncate_history_thinking": False,
                        "enable_thinking": True,
                    },
                },
            },
        ),
    ],
    ids=["seed-defaults", "greedy-thinking-off", "budget-force-nonempty", "tools", "stream-extra"],
)
def test_build_request_from_options_gives_the_same_body_as_before(
    options, request_kwargs, expected
):
    assert request_mod.build_request(MODEL, "hi", options, **request_kwargs) == expected


def test_build_request_refuses_settings_outside_the_options():
    with pytest.raises(TypeError, match=r"'temperature' belong in `options`.*replace"):
        request_mod.build_request(MODEL, "hi", ChatOptions(), temperature=0.0)
    with pytest.raises(TypeError, match="build_request: `options` must be a ChatOptions"):
        request_mod.build_request(MODEL, "hi", {"max_tokens": 64})


@pytest.mark.parametrize(
    "settings, error, match",
    [
        ({"max_tokens": "100"}, TypeError, r"ChatOptions: `max_tokens` must be an integer"),
        ({"max_tokens": True}, TypeError, r"`max_tokens` must be an integer"),
        ({"max_tokens": 0}, ValueError, r"`max_tokens`=0 must be >= 1"),
        ({"reasoning_budget": -1}, ValueError, r"`reasoning_budget`=-1 must be >= 0"),
        (
            {"max_tokens": 100, "reasoning_budget": 100},
            ValueError,
            r"reasoning_budget=100 is not below max_tokens=100.*leave room for the answer",
        ),
        ({"temperature": "hot"}, TypeError, r"`temperature` must be a number"),
        ({"temperature": -0.5}, ValueError, r"`temperature`=-0.5 must be >= 0"),
        ({"top_p": 0}, ValueError, r"`top_p`=0 must be > 0"),
        ({"top_p": 1.5}, ValueError, r"`top_p`=1.5 must be <= 1"),
        ({"thinking": "yes"}, TypeError, r"`thinking` must be True or False"),
        ({"force_nonempty_content": 1}, TypeError, r"`force_nonempty_content` must be True"),
        ({"recover_tool_calls": None}, TypeError, r"`recover_tool_calls` must be True"),
        (
            {"tools": WEATHER_TOOLS},
            TypeError,
            r"`tools` must be a list of OpenAI function-tool schemas.*run_tool_loop",
        ),
        ({"tool_choice": "sometimes"}, ValueError, r"`tool_choice` must be None, 'none', 'auto'"),
        ({"tool_choice": 3}, TypeError, r"`tool_choice` must be None"),
    ],
)
def test_chat_options_errors_name_the_argument(settings, error, match):
    with pytest.raises(error, match=match):
        ChatOptions(**settings)
    with pytest.raises(error, match=match):  # replace() checks as construction does
        ChatOptions().replace(**settings)


def test_chat_options_are_frozen_and_replace_derives_one():
    import dataclasses

    base = ChatOptions(max_tokens=1024, temperature=0.0, top_p=1.0)
    derived = base.replace(thinking=False, max_tokens=256)
    assert (derived.thinking, derived.max_tokens, derived.temperature, derived.top_p) == (
        False,
        256,
        0.0,
        1.0,
    )
    assert base.max_tokens == 1024 and base.thinking is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.max_tokens = 5  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"'max_token' is not a field; the fields are thinking"):
        base.replace(max_token=5)
    # The defaults: reasoning on, seed 004's sampling, max_tokens fitted to the server.
    d = ChatOptions()
    assert (d.thinking, d.max_tokens, d.temperature, d.top_p) == (True, None, 1.0, 0.95)
    assert (d.reasoning_budget, d.tools, d.tool_choice) == (None, None, None)
    assert not d.force_nonempty_content and not d.recover_tool_calls


def test_keywords_override_options_in_chat_stream_and_tool_loop(rec, client):
    opts = ChatOptions(max_tokens=1024, temperature=0.0, top_p=1.0, force_nonempty_content=True)
    rec.queue("thinking_off", "thinking_off", "stream_thinking_on")
    hc.chat(client, MODEL, "hi", opts, thinking=False, max_tokens=512, seed=3)
    hc.chat(
        client,
        MODEL,
        "hi",
        thinking=False,
        max_tokens=512,
        temperature=0.0,
        top_p=1.0,
        force_nonempty_content=True,
        seed=3,
    )
    with_opts, keywords_only = rec.bodies
    assert with_opts == keywords_only
    assert with_opts["max_tokens"] == 512 and with_opts["temperature"] == 0.0
    assert with_opts["top_p"] == 1.0 and with_opts["seed"] == 3
    assert with_opts["chat_template_kwargs"] == {
        "enable_thinking": False,
        "force_nonempty_content": True,
    }
    assert opts.max_tokens == 1024 and opts.thinking is True  # the base is unchanged
    _ = stream_mod.stream_chat(client, MODEL, "hi", options=opts, top_p=0.5).result
    streamed = rec.bodies[2]
    assert (streamed["max_tokens"], streamed["temperature"], streamed["top_p"]) == (1024, 0.0, 0.5)
    assert streamed["stream"] is True

    rec.queue("tool_calls_parallel", "tool_final_answer")
    loop = tools_mod.run_tool_loop(
        client, MODEL, "q", WEATHER_TOOLS, TOOLS, opts.replace(tools=[_SCHEMA_F]), max_tokens=900
    )
    assert loop.final.content.strip().startswith("Santa Clara will be sunny")
    for body in rec.bodies[3:]:
        assert body["tools"] == TOOLS  # the loop's schemas, not the options' tools
        assert (body["max_tokens"], body["temperature"], body["top_p"]) == (900, 0.0, 1.0)


def test_options_with_max_tokens_none_are_fitted_to_the_server(rec, client):
    rec.queue("thinking_on")
    hc.chat(client, MODEL, "hi", ChatOptions(temperature=0.0))
    assert rec.bodies[0]["max_tokens"] == 16000 and rec.bodies[0]["temperature"] == 0.0


def test_wrong_options_and_unknown_keywords_with_options(rec, client):
    opts = ChatOptions(max_tokens=64)
    with pytest.raises(TypeError, match=r"chat: `options` must be a ChatOptions.*\*\*settings"):
        hc.chat(client, MODEL, "hi", {"max_tokens": 64})
    with pytest.raises(TypeError, match=r"stream_chat: `top_p` must be a number"):
        stream_mod.stream_chat(client, MODEL, "hi", opts, top_p="high")
    with pytest.raises(TypeError, match=r"run_tool_loop: `max_tokens` must be an integer"):
        tools_mod.run_tool_loop(client, MODEL, "q", WEATHER_TOOLS, None, opts, max_tokens="x")
    with pytest.raises(ValueError, match=r"chat: reasoning_budget=64 is not below max_tokens=64"):
        hc.chat(client, MODEL, "hi", opts, reasoning_budget=64)
    with pytest.raises(ValueError, match=r"reasoning_budget=0 with budget_method='two_pass'"):
        hc.chat(client, MODEL, "hi", opts, reasoning_budget=0, budget_method="two_pass")
    # Keywords that are not ChatOptions fields go to the SDK's create, as before.
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_token'"):
        hc.chat(client, MODEL, "hi", opts, max_token=5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'budget_method'"):
        stream_mod.stream_chat(client, MODEL, "hi", opts, budget_method="server")
    assert rec.requests == []


@pytest.mark.parametrize(
    "run, expected",
    [
        ({"stand_in": True}, (1024, 0.0, 1.0)),
        ({"stand_in": True, "weightless": True}, (1024, 0.0, 1.0)),
        ({"stand_in": False}, (16000, 1.0, 0.95)),
        ({"stand_in": False, "weightless": True}, (256, 1.0, 0.95)),
        # A value given wins over the run's default, a falsy one too.
        ({"stand_in": True, "max_tokens": 64, "temperature": 0.7, "top_p": 0.9}, (64, 0.7, 0.9)),
        ({"stand_in": False, "temperature": 0.0}, (16000, 0.0, 0.95)),
        ({"stand_in": False, "weightless": True, "max_tokens": 2000}, (2000, 1.0, 0.95)),
    ],
)
def test_for_run_defaults_and_explicit_values(run, expected):
    """The run (prepare's, from a notebook's parameters) picks the defaults; its max_tokens
    and the sampling values given to for_run win."""
    from helpers.weights.prepare import RUN_PARAMETERS, prepare

    the_run = prepare(None, **{k: v for k, v in run.items() if k in RUN_PARAMETERS})
    sampling = {k: v for k, v in run.items() if k in ("temperature", "top_p")}
    opts = ChatOptions.for_run(the_run, **sampling)
    assert (opts.max_tokens, opts.temperature, opts.top_p) == expected
    # only weightless mode on a GPU tolerates noise text (the stand-in's text is not noise)
    assert opts.noise_tolerant == (run.get("weightless", False) and not run["stand_in"])
    plain = opts.replace(max_tokens=None, temperature=1.0, top_p=0.95, noise_tolerant=False)
    assert plain == ChatOptions()
    # a server handle carries its run: for_run reads it there
    srv = type("Srv", (), {"base_url": "http://127.0.0.1:1", "run": the_run})()
    assert ChatOptions.for_run(srv, **sampling) == opts


def test_for_run_checks_its_arguments():
    from helpers.weights.prepare import prepare

    with pytest.raises(TypeError, match="prepare: `stand_in` must be True or False"):
        prepare(None, stand_in="yes")
    with pytest.raises(TypeError, match="prepare: standin is not a run parameter"):
        prepare(None, standin=True)
    for wrong in (None, "h100", 42, {}):  # nothing silently means "a GPU"
        with pytest.raises(
            TypeError, match=r"ChatOptions.for_run: pass the server \(srv = launch_server"
        ):
            ChatOptions.for_run(wrong)
    with pytest.raises(ValueError, match=r"`top_p`=2 must be <= 1"):
        ChatOptions.for_run(prepare(None), top_p=2)
