"""Tests of ``helpers.chat``.

Unit layer: a real ``openai.OpenAI`` client talks HTTP to a tiny recording server on
127.0.0.1 (:class:`RecordingServer`) that answers with recorded vLLM 0.32 responses from
``tests/data/responses/``, built by vLLM's own code: ``index.json`` holds, per fixture, the
server's parser flags, the request's ``chat_template_kwargs``/tools and the raw model text;
:func:`build_fixture` runs vLLM's parser over it and serialises the result the way
``OpenAIServingChat`` does. ``test_recorded_fixtures_match_vllm`` re-runs it against the
installed vLLM; ``python tests/test_client.py --write-fixtures`` rewrites the files. Server
layer (``@pytest.mark.server``): the same calls against the session's real vLLM CPU stand-in
(``standin_server``), asserting structure, not text.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import sys
import threading
import warnings
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from helpers import errors as errors_mod
from helpers.chat import completions as hc
from helpers.chat import display, parse, types
from helpers.chat import request as request_mod
from helpers.chat import stream as stream_mod
from helpers.chat import tools as tools_mod
from helpers.errors import ResponseError
from helpers.server import endpoint

DATA = Path(__file__).parent / "data" / "responses"
MODEL = "nemotron-test"

# ─── fixture builder (vLLM's parser + protocol classes) ───────────────────────────────

_PIECE_RE = re.compile(r"<[^<>]*>|\s*[^\s<]+|\s+")


def _pieces(text: str) -> list[str]:
    """Split model text into token-like pieces: one piece per stream chunk / token."""
    return _PIECE_RE.findall(text)


class _VocabFreeTokenizer:
    """The parser only asks the tokenizer for its vocab (to match special tokens by id);
    an empty vocab makes it match the markup as text, which gives the same events.
    Parsers that insist on finding ``<think>``/``</think>`` in the vocab (``deepseek_r1``)
    get the ids an index entry gives as ``server.vocab``; the stream passes no token ids,
    so they still match by text."""

    def __init__(self, vocab: dict[str, int] | None = None) -> None:
        self.vocab = dict(vocab or {})

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)


def _deterministic_ids(seed: str, obj: Any) -> Any:
    """Replace the random ``chatcmpl-tool-*`` ids with stable ones: the n-th call of a
    model output gets the same id streamed or not."""
    text = json.dumps(obj)
    seen: dict[str, str] = {}
    for rid in re.findall(r"chatcmpl-tool-[0-9a-f]+", text):
        if rid not in seen:
            digest = hashlib.sha1(f"{seed}:{len(seen)}".encode()).hexdigest()[:16]
            seen[rid] = f"chatcmpl-tool-{digest}"
    for rid, new in seen.items():
        text = text.replace(rid, new)
    return json.loads(text)


def build_fixture(spec: dict[str, Any]) -> Any:
    """Build one recorded response from an ``index.json`` entry with vLLM's own code.

    Non-streaming: ``parser.parse`` + the ``tool_choice="auto"`` branch of
    ``OpenAIServingChat.chat_completion_full_generator``, ``model_dump()``.
    Streaming: ``parser.parse_delta`` per piece + the chunk logic of
    ``chat_completion_stream_generator`` (role chunk, deltas, finish chunk, usage
    chunk), each ``model_dump_json(exclude_unset=True)``.
    """
    from vllm.entrypoints.generate.base.protocol import DeltaMessage, ToolCall
    from vllm.entrypoints.openai.chat_completion.protocol import (
        ChatCompletionNamedToolChoiceParam,
        ChatCompletionRequest,
        ChatCompletionResponse,
        ChatCompletionResponseChoice,
        ChatCompletionResponseStreamChoice,
        ChatCompletionStreamResponse,
        ChatMessage,
    )
    from vllm.entrypoints.serve.engine.protocol import (
        CompletionTokenUsageInfo,
        ErrorInfo,
        ErrorResponse,
        UsageInfo,
    )
    from vllm.parser.parser_manager import ParserManager

    if "error" in spec:  # an HTTP error body, e.g. a request the server validates away
        e = spec["error"]
        return ErrorResponse(error=ErrorInfo(**e)).model_dump()
    if "models" in spec:  # GET /v1/models, as OpenAIServingModels.show_available_models
        from vllm.entrypoints.serve.engine.protocol import ModelCard, ModelList, ModelPermission

        return ModelList(
            data=[
                ModelCard(
                    **m,
                    created=1785000000,
                    permission=[ModelPermission(id="modelperm-0", created=1785000000)],
                )
                for m in spec["models"]
            ]
        ).model_dump(mode="json")

    server, req_spec = spec["server"], spec["request"]
    request = ChatCompletionRequest(
        model=MODEL,
        messages=[{"role": "user", "content": "…"}],
        tools=req_spec.get("tools"),
        chat_template_kwargs=req_spec["chat_template_kwargs"],
        **({"tool_choice": req_spec["tool_choice"]} if "tool_choice" in req_spec else {}),
    )
    auto_tools = bool(server.get("enable_auto_tool_choice"))
    parser_cls = ParserManager.get_parser(
        tool_parser_name=server.get("tool_call_parser"),
        reasoning_parser_name=server.get("reasoning_parser"),
        enable_auto_tools=auto_tools,
    )

    def new_parser():
        return parser_cls(
            _VocabFreeTokenizer(server.get("vocab")),
            request.tools,
            chat_template_kwargs=req_spec["chat_template_kwargs"],
        )

    text, finish = spec["model_output"], spec["finish_reason"]
    pieces = _pieces(text)
    think_end = text.find("</think>")
    n_reasoning = (
        len(_pieces(text[:think_end]))
        if think_end >= 0 and server.get("reasoning_parser")
        else None
    )
    if (
        server.get("reasoning_parser")
        and think_end < 0
        and req_spec["chat_template_kwargs"].get("enable_thinking", True)
    ):
        n_reasoning = len(pieces)
    prompt_tokens = spec.get("prompt_tokens", 24)
    details = (
        CompletionTokenUsageInfo(reasoning_tokens=n_reasoning or 0)
        if server.get("reasoning_parser")
        else None
    )
    usage = UsageInfo(
        prompt_tokens=prompt_tokens,
        completion_tokens=len(pieces),
        total_tokens=prompt_tokens + len(pieces),
        completion_tokens_details=details,
    )
    rid, created = (
        f"chatcmpl-{hashlib.sha1(spec['model_output'].encode()).hexdigest()[:32]}",
        1785000000,
    )

    if not req_spec.get("stream"):
        parser = new_parser() if parser_cls else None
        if parser is not None:
            reasoning, content, tool_calls = parser.parse(
                text, request, enable_auto_tools=auto_tools
            )
        else:
            reasoning, content, tool_calls = None, text, []
        # The branches of OpenAIServingChat.chat_completion_full_generator.
        tool_parser_cls = parser_cls.tool_parser_cls if parser_cls is not None else None
        named = isinstance(request.tool_choice, ChatCompletionNamedToolChoiceParam)
        required = request.tool_choice == "required"
        auto_called = False
        if (not auto_tools or not tool_parser_cls) and not named and not required:
            message = ChatMessage(role="assistant", reasoning=reasoning, content=content)
        elif named or required:
            message = ChatMessage(
                role="assistant",
                reasoning=reasoning,
                content=content or "",
                tool_calls=[ToolCall(id=tc.id, function=tc) for tc in (tool_calls or [])],
            )
        elif not request.tool_choice or request.tool_choice == "none":
            message = ChatMessage(role="assistant", reasoning=reasoning, content=content)
        else:  # tools, tool_choice auto, auto tools on, a tool parser
            auto_called = bool(tool_calls)
            message = ChatMessage(
                role="assistant",
                reasoning=reasoning,
                content=content,
                tool_calls=[ToolCall(id=tc.id, function=tc) for tc in (tool_calls or [])],
            )
        tools_finish = auto_called or (required and finish == "stop")
        response = ChatCompletionResponse(
            id=rid,
            created=created,
            model=MODEL,
            choices=[
                ChatCompletionResponseChoice(
                    index=0,
                    message=message,
                    logprobs=None,
                    finish_reason="tool_calls" if tools_finish else finish,
                    stop_reason=None,
                    token_ids=None,
                    routed_experts=None,
                )
            ],
            usage=usage,
            system_fingerprint=None,
            prompt_logprobs=None,
            prompt_token_ids=None,
            prompt_text=None,
            kv_transfer_params=None,
            ec_transfer_params=None,
            metrics=None,
        )
        return response.model_dump(mode="json")

    chunks: list[dict[str, Any]] = []

    def emit(choice):
        chunk = ChatCompletionStreamResponse(
            id=rid, object="chat.completion.chunk", created=created, choices=[choice], model=MODEL
        )
        chunks.append(json.loads(chunk.model_dump_json(exclude_unset=True)))

    emit(
        ChatCompletionResponseStreamChoice(
            index=0,
            delta=DeltaMessage(role="assistant", content=""),
            logprobs=None,
            finish_reason=None,
        )
    )
    parser = new_parser() if parser_cls else None
    tools_streamed = False
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        if parser is not None:
            delta = parser.parse_delta(
                delta_text=piece,
                delta_token_ids=[],
                request=request,
                prompt_token_ids=[],
                finished=last,
            )
            if delta is not None and delta.tool_calls:
                tools_streamed = True
        else:
            delta = DeltaMessage(content=piece)
        if delta is None:
            if not last:
                continue
            delta = DeltaMessage()
        if not last:
            emit(
                ChatCompletionResponseStreamChoice(
                    index=0, delta=delta, logprobs=None, finish_reason=None, token_ids=None
                )
            )
        else:
            reason = "tool_calls" if tools_streamed and finish == "stop" else finish
            emit(
                ChatCompletionResponseStreamChoice(
                    index=0,
                    delta=delta,
                    logprobs=None,
                    finish_reason=reason,
                    stop_reason=None,
                    token_ids=None,
                )
            )
    final = ChatCompletionStreamResponse(
        id=rid,
        object="chat.completion.chunk",
        created=created,
        choices=[],
        model=MODEL,
        usage=usage,
        system_fingerprint=None,
    )
    chunks.append(json.loads(final.model_dump_json(exclude_unset=True, exclude_none=True)))
    return chunks


def build_all_fixtures() -> dict[str, Any]:
    index = json.loads((DATA / "index.json").read_text())
    return {
        name: _deterministic_ids(spec["model_output"], build_fixture(spec))
        for name, spec in index.items()
    }


def write_fixtures() -> None:
    for name, obj in build_all_fixtures().items():
        if isinstance(obj, list):  # a stream: one chunk per line
            text = "[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in obj) + "\n]"
        else:
            text = json.dumps(obj, indent=1, ensure_ascii=False)
        (DATA / f"{name}.json").write_text(text + "\n")
        print("wrote", DATA / f"{name}.json")


if __name__ == "__main__" and "--write-fixtures" in sys.argv:
    write_fixtures()


# ─── recording server: real HTTP on 127.0.0.1 ─────────────────────────────────────────


def load(name: str) -> Any:
    """A recorded response (dict) or stream (list of chunk dicts), fresh copy."""
    return json.loads((DATA / f"{name}.json").read_text())


class RecordingServer:
    """``POST /v1/chat/completions``: records the JSON body, answers with the next queued
    reply: a dict (JSON, or an error body with its status) or a list of chunk dicts
    (sent as server-sent events ending in ``data: [DONE]``, as vLLM does)."""

    def __init__(self, models: str | None = "models_big") -> None:
        self.requests: list[dict[str, Any]] = []
        self.gets: list[str] = []
        self.replies: deque[tuple[int, Any]] = deque()
        self.models = load(models) if models else None
        # GET /metrics and /version texts (None: 404, as a server that is not vLLM answers)
        self.metrics: str | None = None
        self.version: str | None = None
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):  # GET /v1/models: the recorded model list (max_model_len)
                outer.gets.append(self.path)
                path = self.path.rstrip("/")
                extra = {"/metrics": outer.metrics, "/version": outer.version}
                if path in extra and extra[path] is not None:
                    data, kind = extra[path].encode(), "text/plain"
                elif path != "/v1/models" or outer.models is None:
                    self.send_error(404)
                    return
                else:
                    data, kind = json.dumps(outer.models).encode(), "application/json"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests.append({"path": self.path, "body": json.loads(body)})
                if not outer.replies:
                    status, payload = (
                        500,
                        {"error": {"message": "no reply queued", "type": "Test", "code": 500}},
                    )
                else:
                    status, payload = outer.replies.popleft()
                if isinstance(payload, list):
                    self.send_response(status)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for chunk in payload:
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def queue(self, *payloads: Any, status: int = 200) -> None:
        for p in payloads:
            self.replies.append((status, load(p) if isinstance(p, str) else p))

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def rec():
    server = RecordingServer()
    yield server
    server.close()


@pytest.fixture
def client(rec):
    return endpoint.make_client(rec.base_url, timeout=10)


TOOLS = json.loads((DATA / "index.json").read_text())["tool_calls_parallel"]["request"]["tools"]


def _shape(r: types.ChatResult) -> tuple:
    return (
        r.reasoning,
        r.content,
        [(tc.id, tc.name, tc.arguments) for tc in r.tool_calls],
        r.finish_reason,
        (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.reasoning_tokens),
        r.truncated_in_reasoning,
        r.reasoning_parser_missing,
    )


# ─── non-streaming ────────────────────────────────────────────────────────────────────


def test_make_client_adds_v1(rec):
    assert str(endpoint.make_client(rec.base_url).base_url).rstrip("/").endswith("/v1")
    assert (
        str(endpoint.make_client(rec.base_url + "/v1/").base_url)
        .rstrip("/")
        .endswith(f":{rec.httpd.server_address[1]}/v1")
    )


def test_reasoning_field_is_read(rec, client):
    rec.queue("thinking_on")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = hc.chat(client, MODEL, "What is the capital of France?")
    assert r.reasoning.startswith("The user asks for the capital of France")
    assert r.content.strip() == "The capital of France is Paris."
    assert r.finish_reason == "stop" and r.tool_calls == [] and r.warnings == []
    assert r.usage.reasoning_tokens and r.usage.completion_tokens > r.usage.reasoning_tokens
    assert not r.truncated_in_reasoning and not r.reasoning_parser_missing


def test_reasoning_content_is_read_from_older_servers(rec, client):
    old = load("thinking_on")  # vLLM < 0.10 named the field reasoning_content
    msg = old["choices"][0]["message"]
    msg["reasoning_content"] = msg.pop("reasoning")
    rec.queue(old)
    r = hc.chat(client, MODEL, "What is the capital of France?")
    assert r.reasoning == load("thinking_on")["choices"][0]["message"]["reasoning"]
    assert r.content.strip() == "The capital of France is Paris."


def test_request_body_carries_thinking_force_nonempty_and_budget(rec, client):
    rec.queue("thinking_on")
    hc.chat(
        client,
        MODEL,
        "hi",
        max_tokens=2048,
        reasoning_budget=256,
        force_nonempty_content=True,
        seed=7,
    )
    body = rec.bodies[0]
    assert rec.requests[0]["path"] == "/v1/chat/completions"
    assert body["chat_template_kwargs"] == {"enable_thinking": True, "force_nonempty_content": True}
    assert body["thinking_token_budget"] == 256
    assert body["max_tokens"] == 2048 and body["temperature"] == 1.0 and body["top_p"] == 0.95
    assert body["seed"] == 7 and body["model"] == MODEL
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "stream" not in body and "tools" not in body


def test_thinking_off_request_and_reply_without_tags_is_all_content(rec, client):
    rec.queue("thinking_off")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = hc.chat(
            client, MODEL, [{"role": "user", "content": "Capital of Japan?"}], thinking=False
        )
    assert rec.bodies[0]["chat_template_kwargs"] == {"enable_thinking": False}
    assert "force_nonempty_content" not in rec.bodies[0]["chat_template_kwargs"]
    assert (r.reasoning, r.content) == ("", "The capital of Japan is Tokyo.")
    assert r.warnings == []


def test_user_extra_body_is_merged(rec, client):
    rec.queue("thinking_on")
    hc.chat(
        client,
        MODEL,
        "hi",
        extra_body={"top_k": 20, "chat_template_kwargs": {"truncate_history_thinking": False}},
    )
    body = rec.bodies[0]
    assert body["top_k"] == 20
    assert body["chat_template_kwargs"] == {
        "truncate_history_thinking": False,
        "enable_thinking": True,
    }


def test_length_exhausted_in_reasoning_warns_with_fixes(rec, client):
    rec.queue("length_in_reasoning")
    with pytest.warns(types.ReasoningTruncatedWarning) as caught:
        r = hc.chat(client, MODEL, "Prove there are infinitely many primes", max_tokens=22)
    text = str(caught[0].message)
    for fix in ("raise max_tokens", "reasoning_budget", "thinking=False", "max_tokens=22"):
        assert fix in text
    assert r.truncated_in_reasoning and r.content == "" and r.reasoning
    assert r.finish_reason == "length" and r.warnings == [text]
    assert caught[0].filename == __file__  # points at the caller, not into helpers


def test_length_exhausted_with_force_nonempty_content_is_flagged(rec, client):
    rec.queue("length_in_reasoning_force_nonempty")
    with pytest.warns(types.ReasoningTruncatedWarning, match="unfinished reasoning"):
        r = hc.chat(client, MODEL, "Prove it", max_tokens=22, force_nonempty_content=True)
    # vLLM moved the reasoning into content; the flag says it is not an answer.
    assert (
        r.truncated_in_reasoning
        and r.reasoning == ""
        and r.content.startswith("The user wants a proof")
    )


def test_length_with_thinking_off_does_not_warn(rec, client):
    rec.queue("length_in_reasoning_force_nonempty")  # content set, finish_reason=length
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = hc.chat(client, MODEL, "Prove it", thinking=False, max_tokens=22)
    assert not r.truncated_in_reasoning and r.finish_reason == "length"


def test_lone_think_end_is_split_and_warns_about_parser(rec, client):
    rec.queue("no_reasoning_parser")
    with pytest.warns(types.ReasoningParserMissingWarning, match="--reasoning-parser nemotron_v3"):
        r = hc.chat(client, MODEL, "What is the capital of France?")
    assert (
        r.reasoning
        == "The user asks for the capital of France. It is Paris; answer in one sentence."
    )
    assert r.content == "The capital of France is Paris."
    assert r.reasoning_parser_missing
    # Same split as the server's nemotron_v3 parser (modulo its leading newline).
    on = load("thinking_on")["choices"][0]["message"]
    assert (r.reasoning, r.content) == (on["reasoning"], on["content"].lstrip("\n"))


@pytest.mark.parametrize(
    "content, reasoning, answer",
    [
        ("<think>\nstep one\n</think>\n\nAnswer.", "step one", "Answer."),
        ("</think>Answer.", "", "Answer."),
        ("<think>\nstill going", "still going", ""),
    ],
)
def test_think_tags_in_content_variants(content, reasoning, answer):
    resp = {
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
    }
    with pytest.warns(types.ReasoningParserMissingWarning):
        r = parse.parse_response(resp)
    assert (r.reasoning, r.content) == (reasoning, answer)


def test_cut_before_think_end_without_parser_is_reasoning():
    # As a server without --reasoning-parser answers with max_tokens=3 (measured on the
    # stand-in): no </think> yet, no completion_tokens_details in usage.
    resp = {
        "choices": [
            {"message": {"role": "assistant", "content": "The user "}, "finish_reason": "length"}
        ],
        "usage": {"prompt_tokens": 19, "completion_tokens": 3, "total_tokens": 22},
    }
    with (
        pytest.warns(types.ReasoningParserMissingWarning),
        pytest.warns(types.ReasoningTruncatedWarning),
    ):
        r = parse.parse_response(resp, max_tokens=3)
    assert (r.reasoning, r.content) == ("The user", "")
    assert r.reasoning_parser_missing and r.truncated_in_reasoning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = parse.parse_response(resp, thinking=False)  # thinking off: it is the answer
    assert off.content == "The user " and not off.truncated_in_reasoning


def test_tool_markup_with_the_wrong_tool_parser_raises(rec, client):
    rec.queue("wrong_tool_parser")
    with pytest.raises(
        ResponseError, match="--enable-auto-tool-choice --tool-call-parser qwen3_coder"
    ) as ei:
        hc.chat(client, MODEL, "Weather in Santa Clara and time in Tokyo?", tools=TOOLS)
    assert "<tool_call>" in ei.value.result.content
    assert rec.bodies[0]["tools"] == TOOLS


def test_weightless_options_report_a_reply_that_fails_on_noise_instead_of_raising(
    rec, client, capsys
):
    """ChatOptions.for_run of a weightless run: the same failure prints what failed and gives
    None (show and budget_report take it); the real model's options still raise."""
    from helpers.config.run import Run

    opts = request_mod.ChatOptions.for_run(Run("weightless"))
    assert (
        opts.noise_tolerant and not request_mod.ChatOptions.for_run(Run("download")).noise_tolerant
    )
    rec.queue("wrong_tool_parser")
    r = hc.chat(client, MODEL, "Weather in Santa Clara and time in Tokyo?", opts, tools=TOOLS)
    said = capsys.readouterr().out
    assert r is None and "weightless mode: the chat did not complete" in said
    assert "ResponseError" in said and "--tool-call-parser" in said
    display.show(r)
    assert capsys.readouterr().out == ""
    assert "no reply to judge" in display.budget_report(r, 8)
    rec.queue("wrong_tool_parser")
    with pytest.raises(ResponseError):
        hc.chat(client, MODEL, "q", opts.replace(noise_tolerant=False), tools=TOOLS)
    assert "noise_tolerant" not in rec.bodies[0] and "noise_tolerant" not in str(rec.bodies[0])


def test_tool_markup_without_tools_offered_is_left_in_content(rec, client):
    rec.queue("wrong_tool_parser", "wrong_tool_parser")
    r = hc.chat(client, MODEL, "q")  # no tools: vLLM parses no calls, by design
    assert "<tool_call>" in r.content and r.tool_calls == []
    r = hc.chat(client, MODEL, "q", tools=TOOLS, tool_choice="none")
    assert "<tool_call>" in r.content and rec.bodies[1]["tool_choice"] == "none"


def test_tools_refused_by_a_server_without_tool_calling_names_flags(rec, client):
    rec.queue("error_auto_tool_choice_without_parser", status=400)
    with pytest.raises(
        ResponseError, match="--enable-auto-tool-choice --tool-call-parser qwen3_coder"
    ):
        hc.chat(client, MODEL, "q", tools=TOOLS)


def test_parallel_tool_calls_are_parsed(rec, client):
    rec.queue("tool_calls_parallel")
    r = hc.chat(client, MODEL, "Weather in Santa Clara and time in Tokyo?", tools=TOOLS)
    assert r.finish_reason == "tool_calls" and r.content == ""
    assert [(tc.name, tc.arguments) for tc in r.tool_calls] == [
        ("get_weather", {"city": "Santa Clara", "days": 2}),  # qwen3_coder: int by schema
        ("get_time", {"city": "Tokyo"}),
    ]
    assert all(tc.id.startswith("chatcmpl-tool-") and tc.error is None for tc in r.tool_calls)
    msg = r.to_message()
    assert msg["role"] == "assistant" and msg["content"] is None and msg["reasoning"] == r.reasoning
    assert [t["function"]["arguments"] for t in msg["tool_calls"]] == [
        tc.raw_arguments for tc in r.tool_calls
    ]


def test_budget_rejected_by_server_names_reasoning_parser(rec, client):
    rec.queue("error_budget_without_reasoning_parser", status=400)
    with pytest.raises(ResponseError, match="--reasoning-parser nemotron_v3"):
        hc.chat(client, MODEL, "hi", max_tokens=1024, reasoning_budget=128)


def test_budget_must_leave_room_for_the_answer(rec, client):
    with pytest.raises(
        ValueError, match="ChatOptions: reasoning_budget=100 is not below max_tokens"
    ):
        request_mod.ChatOptions(max_tokens=100, reasoning_budget=100)
    with pytest.raises(ValueError, match="chat: reasoning_budget=100 is not below max_tokens"):
        hc.chat(client, MODEL, "hi", max_tokens=100, reasoning_budget=100)
    # max_tokens=None is fitted to the server (16000 here), then checked against the budget.
    with pytest.raises(ValueError, match="stream_chat: reasoning_budget=16000 is not below"):
        stream_mod.stream_chat(client, MODEL, "hi", reasoning_budget=16000)
    assert rec.requests == []


def test_two_pass_budget_for_older_servers(rec, client):
    second = load("thinking_off")  # the continuation: the answer only
    rec.queue("length_in_reasoning", second)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = hc.chat(
            client,
            MODEL,
            "Prove it",
            max_tokens=1000,
            reasoning_budget=22,
            budget_method="two_pass",
        )
    first_body, second_body = rec.bodies
    assert first_body["max_tokens"] == 22 and "thinking_token_budget" not in first_body
    first_usage = load("length_in_reasoning")["usage"]
    assert second_body["max_tokens"] == 1000 - first_usage["completion_tokens"]
    assert (
        second_body["continue_final_message"] is True
        and second_body["add_generation_prompt"] is False
    )
    last = second_body["messages"][-1]
    reasoning = load("length_in_reasoning")["choices"][0]["message"]["reasoning"]
    assert last == {"role": "assistant", "content": f"<think>\n{reasoning}\n</think>\n\n"}
    assert second_body["messages"][:-1] == first_body["messages"]
    assert r.reasoning == reasoning and r.content == "The capital of Japan is Tokyo."
    assert (
        r.usage.completion_tokens
        == first_usage["completion_tokens"] + second["usage"]["completion_tokens"]
    )
    assert not r.truncated_in_reasoning and len(r.raw) == 2


def test_two_pass_budget_stops_after_one_pass_when_reasoning_fits(rec, client):
    rec.queue("thinking_on")
    r = hc.chat(
        client, MODEL, "hi", max_tokens=1000, reasoning_budget=500, budget_method="two_pass"
    )
    assert len(rec.requests) == 1 and r.content.strip() == "The capital of France is Paris."


# ─── streaming ────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "stream_name, plain_name, kwargs",
    [
        ("stream_thinking_on", "thinking_on", {}),
        ("stream_tool_calls_parallel", "tool_calls_parallel", {"tools": TOOLS}),
        (
            "stream_length_force_nonempty",
            "length_in_reasoning_force_nonempty",
            {"force_nonempty_content": True, "max_tokens": 22},
        ),
    ],
)
def test_stream_reassembles_to_the_non_stream_shape(rec, client, stream_name, plain_name, kwargs):
    rec.queue(plain_name, stream_name)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        plain = hc.chat(client, MODEL, "q", **kwargs)
        stream = stream_mod.stream_chat(client, MODEL, "q", **kwargs)
        events = list(stream)
        streamed = stream_mod.collect_stream(stream)
    assert _shape(streamed) == _shape(plain)
    assert streamed.warnings == plain.warnings
    body = rec.bodies[1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    kinds = [k for k, _ in events]
    assert kinds[0] == "reasoning"
    assert all(k in ("reasoning", "content", "tool_call") for k in kinds)
    if plain.tool_calls:
        deltas = [d for k, d in events if k == "tool_call"]
        assert {d.index for d in deltas} == {0, 1}
        assert [d.name for d in deltas if d.name] == ["get_weather", "get_time"]
    else:
        assert "".join(t for k, t in events if k == "reasoning").strip() in (
            plain.reasoning,
            plain.content,
        )


def test_collect_stream_accepts_raw_chunk_dicts():
    r = stream_mod.collect_stream(load("stream_thinking_on"))
    assert (
        r.reasoning.startswith("The user asks")
        and r.content.strip() == "The capital of France is Paris."
    )
    assert r.usage.prompt_tokens == 24 and r.finish_reason == "stop"


def test_print_stream_labels_parts(rec, client, capsys):
    rec.queue("stream_thinking_on")
    r = display.print_stream(stream_mod.stream_chat(client, MODEL, "q"))
    out = capsys.readouterr().out
    assert out.index("── reasoning ──") < out.index("── answer ──")
    assert "The capital of France is Paris." in out and r.finish_reason == "stop"
    assert out.rstrip().endswith("── finish_reason=stop ──")


def test_print_stream_tool_calls(rec, client, capsys):
    rec.queue("stream_tool_calls_parallel")
    display.print_stream(stream_mod.stream_chat(client, MODEL, "q", tools=TOOLS))
    out = capsys.readouterr().out
    assert (
        '── tool calls ──\n[0] get_weather {"city": "Santa Clara", "days": 2}\n[1] get_time {"city": "Tokyo"}'
        in out
    )


# ─── tool loop ────────────────────────────────────────────────────────────────────────


def get_weather(city: str, days: int = 1) -> dict:
    """Weather forecast for a city."""
    return {"city": city, "days": days, "forecast": "sunny", "celsius": 21}


def get_time(city: str) -> str:
    """Local time in a city."""
    return f"09:30 in {city}"


def test_tool_schema_from_signature():
    s = tools_mod.tool_schema(get_weather)
    assert s == TOOLS[0]


def test_tool_schema_reads_parameter_descriptions_from_the_docstring():
    def lookup(city: str, days: int = 1, units=None) -> dict:
        """Look up a forecast.

        Args:
            city: City name, e.g. Santa Clara
            days (int): how many days ahead
        Returns:
            the forecast
        """

    params = tools_mod.tool_schema(lookup)["function"]["parameters"]
    assert params["properties"] == {
        "city": {"type": "string", "description": "City name, e.g. Santa Clara"},
        "days": {"type": "integer", "description": "how many days ahead"},
        "units": {},
    }
    assert params["required"] == ["city"]
    assert tools_mod.tool_schema(get_time)["function"]["parameters"]["properties"] == {
        "city": {"type": "string"}
    }


def test_tool_loop_runs_two_parallel_calls(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    calls = []

    def weather(**kw):
        calls.append(("get_weather", kw))
        return get_weather(**kw)

    def time_(**kw):
        calls.append(("get_time", kw))
        return get_time(**kw)

    loop = tools_mod.run_tool_loop(
        client,
        MODEL,
        "Weather in Santa Clara for 2 days, and the time in Tokyo?",
        {"get_weather": weather, "get_time": time_},
        TOOLS,
        max_tokens=4096,
    )
    assert calls == [
        ("get_weather", {"city": "Santa Clara", "days": 2}),
        ("get_time", {"city": "Tokyo"}),
    ]
    assert loop.final.content.strip().startswith("Santa Clara will be sunny")
    assert len(loop.turns) == 2 and len(loop.tool_runs) == 2
    # The second request carries the whole transcript.
    second = rec.bodies[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    ids = [tc["id"] for tc in second[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in second[2:]] == ids
    assert json.loads(second[2]["content"]) == get_weather("Santa Clara", 2)
    assert second[3]["content"] == "09:30 in Tokyo"
    assert second[1]["reasoning"].startswith("The user wants the weather")
    assert rec.bodies[1]["tools"] == TOOLS and rec.bodies[1]["max_tokens"] == 4096
    assert [m["role"] for m in loop.messages] == ["user", "assistant", "tool", "tool", "assistant"]


def test_tool_loop_builds_schemas_from_functions(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    loop = tools_mod.run_tool_loop(
        client, MODEL, "q", {"get_weather": get_weather, "get_time": get_time}
    )
    assert rec.bodies[0]["tools"] == TOOLS
    assert [run.output for run in loop.tool_runs] == [
        get_weather("Santa Clara", 2),
        "09:30 in Tokyo",
    ]


def test_tool_loop_unknown_tool_is_a_clear_error(rec, client):
    rec.queue("tool_calls_parallel")
    with pytest.raises(ResponseError, match="no tool named 'get_time'") as ei:
        tools_mod.run_tool_loop(
            client, MODEL, "q", {"get_weather": get_weather}, TOOLS, on_tool_error="raise"
        )
    assert "Pass a function under that name in `tools`" in str(ei.value)
    # The conversation so far travels with the error: the turn and the call that ran.
    assert [m["role"] for m in ei.value.messages] == ["user", "assistant", "tool"]
    assert len(ei.value.turns) == 1 and ei.value.tool_runs[0].output == get_weather(
        "Santa Clara", 2
    )


def test_tool_loop_invented_tool_goes_back_to_the_model(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    loop = tools_mod.run_tool_loop(client, MODEL, "q", {"get_weather": get_weather}, TOOLS)
    sent = rec.bodies[1]["messages"]
    assert sent[3]["role"] == "tool" and sent[3]["content"] == (
        "Error: no tool named 'get_time'; the tools are ['get_weather']"
    )
    assert loop.tool_runs[1].error and loop.tool_runs[1].output is None
    assert loop.final.content.strip().startswith("Santa Clara will be sunny")


def test_tool_loop_bad_json_arguments_is_a_clear_error(rec, client):
    bad = load("tool_calls_parallel")
    bad["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"city": "Santa'
    rec.queue(bad)
    with pytest.raises(ResponseError, match="not valid JSON"):
        tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": get_weather, "get_time": get_time},
            TOOLS,
            on_tool_error="raise",
        )
    rec.queue(bad, "tool_final_answer")
    loop = tools_mod.run_tool_loop(
        client, MODEL, "q", {"get_weather": get_weather, "get_time": get_time}, TOOLS
    )
    assert (
        loop.tool_runs[0]
        .message["content"]
        .startswith(
            "Error: the arguments for get_weather cannot be used: arguments are not valid JSON"
        )
    )
    assert loop.tool_runs[1].message["content"] == "09:30 in Tokyo"


def test_tool_loop_arguments_that_do_not_fit_the_function(rec, client):
    rec.queue("tool_calls_parallel")

    def weather_city_only(city: str) -> str:
        return "sunny"

    with pytest.raises(ResponseError, match="does not fit the function's signature"):
        tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": weather_city_only, "get_time": get_time},
            TOOLS,
            on_tool_error="raise",
        )


def test_tool_loop_gives_up_after_max_rounds(rec, client):
    rec.queue("tool_calls_parallel", "tool_calls_parallel")
    with pytest.raises(ResponseError, match="max_rounds=2"):
        tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": get_weather, "get_time": get_time},
            TOOLS,
            max_rounds=2,
        )


# ─── printing ─────────────────────────────────────────────────────────────────────────


def test_show_labels_reasoning_and_answer(capsys):
    r = parse.parse_response(load("thinking_on"))
    display.show(r)
    out = capsys.readouterr().out
    assert "── reasoning (" in out and "── answer ──\nThe capital of France is Paris." in out
    assert "finish_reason=stop" in out


def test_show_tool_loop(rec, client, capsys):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    display.show(
        tools_mod.run_tool_loop(
            client, MODEL, "q", {"get_weather": get_weather, "get_time": get_time}, TOOLS
        )
    )
    out = capsys.readouterr().out
    assert (
        "turn 1" in out
        and "turn 2" in out
        and "── tool get_time returned ──\n09:30 in Tokyo" in out
    )
    assert 'get_weather({"city": "Santa Clara", "days": 2})' in out


# ─── the recordings are what vLLM produces ────────────────────────────────────────────


def test_recorded_fixtures_match_vllm():
    """Rebuild every recording with the installed vLLM's parser and protocol classes."""
    pytest.importorskip("vllm")
    built = build_all_fixtures()
    index = json.loads((DATA / "index.json").read_text())
    assert set(built) == set(index)
    for name, obj in built.items():
        assert obj == load(name), (
            f"{name}.json differs from vLLM's output: rerun `python tests/test_client.py --write-fixtures`"
        )


# ─── against the real vLLM CPU server (stand-in model) ────────────────────────────────
#
# Structure, not text: the stand-in is a tiny model trained on cookbook/demo.yaml, so
# these use its demo prompts with greedy decoding, and check fields, flags and types.

LIVE_MAX_TOKENS = 256


@pytest.fixture(scope="module")
def live(standin_server):
    """(client, model name, demo data) for the session's stand-in server."""
    from helpers.config.demo import load_demo

    return (
        endpoint.make_client(standin_server.base_url, timeout=120),
        standin_server.models()[0],
        load_demo(),
    )


def _live_tools(demo: dict[str, Any]) -> dict[str, Any]:
    def get_weather(city: str) -> dict:
        return demo["weather"]["results"].get(
            city, {"city": city, "temperature_c": 20, "condition": "unknown"}
        )

    def get_time(city: str) -> dict:
        return demo["time"]["results"].get(city, {"city": city, "local_time": "12:00"})

    return {"get_weather": get_weather, "get_time": get_time}


@pytest.mark.server
def test_live_chat_thinking_on_and_off(live):
    client, model, demo = live
    prompt = demo["reasoning"]["prompt"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", types.ReasoningParserMissingWarning)
        on = hc.chat(client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0)
        off = hc.chat(
            client, model, prompt, thinking=False, max_tokens=LIVE_MAX_TOKENS, temperature=0
        )
    assert on.reasoning.strip() and on.content.strip() and on.finish_reason == "stop"
    assert on.usage.reasoning_tokens and 0 < on.usage.reasoning_tokens < on.usage.completion_tokens
    assert not on.reasoning_parser_missing and not on.truncated_in_reasoning
    assert off.reasoning == "" and off.content.strip() and off.finish_reason == "stop"
    assert off.usage.completion_tokens < on.usage.completion_tokens


@pytest.mark.server
def test_live_force_nonempty_content_is_accepted(live):
    client, model, demo = live
    r = hc.chat(
        client,
        model,
        demo["reasoning"]["prompt"],
        max_tokens=LIVE_MAX_TOKENS,
        temperature=0,
        force_nonempty_content=True,
    )
    assert r.content.strip() and r.finish_reason == "stop"


@pytest.mark.server
def test_live_reasoning_budget_caps_reasoning(live):
    client, model, demo = live
    prompt = demo["budget"]["prompt"]
    free = hc.chat(client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0)
    # A budget below what the model thinks unbudgeted (the stand-in's BPE packs its
    # reasoning into few tokens, so demo.yaml's budget may not bite).
    budget = min(demo["budget"]["thinking_token_budget"], max(2, free.usage.reasoning_tokens // 2))
    capped = hc.chat(
        client, model, prompt, reasoning_budget=budget, max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    assert capped.content.strip() and capped.finish_reason == "stop"
    assert capped.usage.reasoning_tokens is not None
    assert capped.usage.reasoning_tokens <= budget < free.usage.reasoning_tokens
    assert len(capped.reasoning) < len(free.reasoning)


def test_a_server_budget_asked_of_a_drafting_server_warns_and_names_two_pass(rec, client):
    """A server that exports vLLM's speculative-decoding counters drafts (the recorded
    /metrics of the n-gram stand-in server): a server budget warns, and budget_method_for
    picks the two-pass budget; without them (or without /metrics) it stays quiet."""
    from helpers.chat import drafting

    rec.metrics = (DATA.parent / "bench" / "metrics_after.prom").read_text()
    rec.version = json.dumps({"version": "0.32.0"})
    assert drafting.server_facts(client) == {
        "url": rec.base_url,
        "version": "0.32.0",
        "drafting": True,
    }
    assert drafting.budget_method_for(client) == "two_pass"
    rec.replies.append((200, load("thinking_on")))
    with pytest.warns(drafting.ReasoningBudgetUnenforcedWarning, match=r"#39573, #54906.*two_pass"):
        hc.chat(client, "m", "hi", reasoning_budget=8)
    assert rec.requests[-1]["body"]["thinking_token_budget"] == 8  # still sent, as asked
    # the two-pass budget does not warn (it does not rely on the server)
    rec.replies.append((200, load("thinking_on")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", drafting.ReasoningBudgetUnenforcedWarning)
        hc.chat(client, "m", "hi", reasoning_budget=8, budget_method="two_pass", max_tokens=64)
    # a report of an overrun on a drafting server names the cause
    over = types.ChatResult(reasoning="long", content="x", usage=types.Usage(reasoning_tokens=40))
    line = display.budget_report(over, 8, drafting=True)
    assert line.startswith("UNEXPECTED") and "#39573, #54906" in line and "two_pass" in line
    assert "#39573" not in display.budget_report(over, 8)


def test_a_server_without_metrics_is_not_taken_for_a_drafting_one(rec, client):
    from helpers.chat import drafting

    assert drafting.server_facts(client)["drafting"] is None  # /metrics answers 404
    assert drafting.budget_method_for(client) == "server"
    rec.replies.append((200, load("thinking_on")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", drafting.ReasoningBudgetUnenforcedWarning)
        hc.chat(client, "m", "hi", reasoning_budget=8)


@pytest.mark.server
def test_live_server_without_drafting_keeps_the_server_budget(live):
    from helpers.chat import drafting

    client, model, _ = live
    facts = drafting.server_facts(client)
    assert facts["drafting"] is False and facts["version"] == "0.32.0"
    assert drafting.budget_method_for(client) == "server"


@pytest.mark.server
def test_live_two_pass_budget(live):
    client, model, demo = live
    budget = demo["budget"]["thinking_token_budget"]
    r = hc.chat(
        client,
        model,
        demo["budget"]["prompt"],
        reasoning_budget=budget,
        budget_method="two_pass",
        max_tokens=LIVE_MAX_TOKENS,
        temperature=0,
    )
    assert r.reasoning.strip() and r.content.strip()
    assert isinstance(r.raw, list) and len(r.raw) == 2  # the reasoning was cut: two passes
    assert "</think>" not in r.content and not r.truncated_in_reasoning


@pytest.mark.server
def test_live_length_exhausted_in_reasoning_warns(live):
    client, model, demo = live
    with pytest.warns(types.ReasoningTruncatedWarning, match="raise max_tokens"):
        r = hc.chat(client, model, demo["reasoning"]["prompt"], max_tokens=4, temperature=0)
    assert r.truncated_in_reasoning and r.finish_reason == "length" and r.content == ""
    assert r.reasoning.strip()


@pytest.mark.server
def test_live_stream_matches_chat(live):
    client, model, demo = live
    prompt = demo["streaming"]["prompt"]
    plain = hc.chat(client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0)
    stream = stream_mod.stream_chat(
        client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    kinds = [kind for kind, _ in stream]
    streamed = stream.result
    assert kinds[0] == "reasoning" and "content" in kinds
    assert kinds.index("content") > max(i for i, k in enumerate(kinds) if k == "reasoning")
    assert streamed.reasoning.strip() and streamed.content.strip()
    # Greedy decoding: the streamed turn is the same turn.
    assert (streamed.reasoning, streamed.content, streamed.finish_reason) == (
        plain.reasoning,
        plain.content,
        plain.finish_reason,
    )
    assert streamed.usage.completion_tokens == plain.usage.completion_tokens


@pytest.mark.server
def test_live_tool_loop(live):
    client, model, demo = live
    loop = tools_mod.run_tool_loop(
        client,
        model,
        demo["weather"]["prompt"].format(city="Santa Clara"),
        _live_tools(demo),
        demo["tools"],
        max_tokens=LIVE_MAX_TOKENS,
        temperature=0,
    )
    assert loop.tool_runs, "the model made no tool call"
    for run in loop.tool_runs:
        assert run.call.name in ("get_weather", "get_time") and isinstance(run.call.arguments, dict)
        assert isinstance(run.call.arguments.get("city"), str) and run.call.id
    assert loop.turns[0].finish_reason == "tool_calls"
    assert loop.final.content.strip() and not loop.final.tool_calls
    assert [m["role"] for m in loop.messages][:2] == ["user", "assistant"] and loop.messages[-1][
        "role"
    ] == "assistant"


@pytest.mark.server
def test_live_parallel_tool_calls_streamed_and_not(live):
    client, model, demo = live
    prompt = demo["parallel"]["pairs"][0]["prompt"]
    plain = hc.chat(
        client, model, prompt, tools=demo["tools"], max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    stream = stream_mod.stream_chat(
        client, model, prompt, tools=demo["tools"], max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    deltas = [d for kind, d in stream if kind == "tool_call"]
    streamed = stream.result
    assert len(plain.tool_calls) == 2 and plain.finish_reason == "tool_calls"
    assert all(isinstance(tc.arguments, dict) and tc.arguments for tc in plain.tool_calls)
    assert {d.index for d in deltas} == {0, 1}
    assert [(tc.name, tc.arguments) for tc in streamed.tool_calls] == [
        (tc.name, tc.arguments) for tc in plain.tool_calls
    ]
    loop = tools_mod.run_tool_loop(
        client,
        model,
        prompt,
        _live_tools(demo),
        demo["tools"],
        max_tokens=LIVE_MAX_TOKENS,
        temperature=0,
    )
    assert len(loop.tool_runs) >= 2 and loop.final.content.strip()


def test_budget_report_says_what_happened():
    """The notebook's budget line comes from the reply, not from a fixed sentence."""
    from helpers.chat.display import budget_report
    from helpers.chat.types import ChatResult, Usage

    ok = ChatResult(reasoning="short", content="vLLM serves it.", finish_reason="stop",
                    usage=Usage(prompt_tokens=20, completion_tokens=30, reasoning_tokens=17))  # fmt: skip
    assert budget_report(ok, 16) == (
        "thinking_token_budget=16: 17 reasoning tokens (budget 16), then an answer of 15 characters"
    )
    over = ChatResult(reasoning="long", content="x", usage=Usage(reasoning_tokens=40))
    assert budget_report(over, 16).startswith(
        "UNEXPECTED"
    ) and "40 reasoning tokens exceed" in budget_report(over, 16)
    empty = ChatResult(
        reasoning="cut", content="", finish_reason="length", usage=Usage(reasoning_tokens=16)
    )
    assert budget_report(empty, 16) == (
        "UNEXPECTED thinking_token_budget=16: 16 reasoning tokens (budget 16), but no answer "
        "followed the reasoning (finish_reason='length')"
    )
    unparsed = ChatResult(reasoning="", content="<think>a</think>b", usage=Usage())
    assert "no reasoning_tokens" in budget_report(unparsed, 16)


# ─── tool calls the server left in the reasoning, cut, or reported wrongly ────────────

WEATHER_TOOLS = {"get_weather": get_weather, "get_time": get_time}
IN_REASONING_TAIL = "The user wants the weather in Santa Clara. I will call the tool."


def _with_reasoning(text: str) -> dict:
    """The recorded tool_call_in_reasoning reply with another reasoning text (same shape)."""
    r = load("tool_call_in_reasoning")
    r["choices"][0]["message"]["reasoning"] = text
    return r


@pytest.mark.parametrize("name", ["tool_call_in_reasoning", "stream_tool_call_in_reasoning"])
def test_tool_call_in_reasoning_warns_without_opt_in(rec, client, name):
    rec.queue(name)
    call = stream_mod.stream_chat if name.startswith("stream") else hc.chat
    with pytest.warns(types.ToolCallInReasoningWarning) as caught:
        r = call(client, MODEL, "Weather in Santa Clara?", tools=TOOLS)
        if name.startswith("stream"):
            r = r.result
    text = str(caught[0].message)
    assert 'get_weather({"city": "Santa Clara"})' in text
    assert "without closing </think>" in text and "recover_tool_calls=True" in text
    assert r.tool_call_in_reasoning and r.tool_calls == [] and r.content == ""
    assert r.finish_reason == "stop"


@pytest.mark.parametrize("name", ["tool_call_in_reasoning", "stream_tool_call_in_reasoning"])
def test_tool_call_in_reasoning_recovered_on_opt_in(rec, client, name):
    rec.queue(name)
    with pytest.warns(types.ToolCallInReasoningWarning, match="Recovered"):
        if name.startswith("stream"):
            r = stream_mod.stream_chat(
                client, MODEL, "q", tools=TOOLS, recover_tool_calls=True
            ).result
        else:
            r = hc.chat(client, MODEL, "q", tools=TOOLS, recover_tool_calls=True)
    assert [(tc.name, tc.arguments) for tc in r.tool_calls] == [
        ("get_weather", {"city": "Santa Clara"})
    ]
    assert r.reasoning == IN_REASONING_TAIL and r.tool_call_in_reasoning
    assert r.tool_calls[0].id and r.to_message()["tool_calls"][0]["function"]["arguments"] == (
        '{"city": "Santa Clara"}'
    )


def test_tool_call_in_reasoning_compact_two_calls(rec, client):
    rec.queue("tool_call_in_reasoning_compact")
    with pytest.warns(types.ToolCallInReasoningWarning):
        r = hc.chat(client, MODEL, "q", tools=TOOLS, recover_tool_calls=True)
    assert [(tc.name, tc.arguments) for tc in r.tool_calls] == [
        ("get_weather", {"city": "Santa Clara", "days": 2}),  # "2" fitted to the integer schema
        ("get_time", {"city": "Tokyo"}),
    ]
    assert r.reasoning == "Both lookups."


@pytest.mark.parametrize(
    "reasoning, calls",
    [
        # no <tool_call> wrapper (qwen3_coder parses bare <function=...> blocks too)
        (
            "ok\n<function=get_time>\n<parameter=city>\nTokyo\n</parameter>\n</function>",
            [("get_time", {"city": "Tokyo"})],
        ),
        # blank lines and spaces between the tags, trailing whitespace
        (
            "ok<tool_call>\n\n  <function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
            "  <parameter=days>\n3\n</parameter>\n</function>\n\n</tool_call>\n\n",
            [("get_weather", {"city": "Oslo", "days": 3})],
        ),
        # a parameter value over several lines keeps its inner newline
        (
            "<tool_call><function=get_time><parameter=city>\nNew\nYork\n</parameter></function></tool_call>",
            [("get_time", {"city": "New\nYork"})],
        ),
    ],
)
def test_tool_call_in_reasoning_wordings(reasoning, calls):
    with pytest.warns(types.ToolCallInReasoningWarning):
        r = parse.parse_response(
            _with_reasoning(reasoning), tool_schemas=TOOLS, recover_tool_calls=True
        )
    assert [(tc.name, tc.arguments) for tc in r.tool_calls] == calls


def test_reasoning_that_goes_on_after_a_tool_call_is_left_alone():
    text = (
        "<tool_call><function=get_time><parameter=city>Tokyo</parameter></function></tool_call>"
        " On second thought, no tool is needed"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", types.ToolCallInReasoningWarning)
        r = parse.parse_response(_with_reasoning(text), tool_schemas=TOOLS, recover_tool_calls=True)
    assert r.tool_calls == [] and not r.tool_call_in_reasoning


def test_tool_loop_does_not_end_silently_on_a_tool_call_in_reasoning(rec, client):
    rec.queue("tool_call_in_reasoning")
    with (
        pytest.warns(types.ToolCallInReasoningWarning),
        pytest.raises(errors_mod.ToolLoopError, match="recover_tool_calls=True") as ei,
    ):
        tools_mod.run_tool_loop(client, MODEL, "q", WEATHER_TOOLS, TOOLS)
    assert [m["role"] for m in ei.value.messages] == ["user", "assistant"]
    calls = []
    rec.queue("tool_call_in_reasoning", "tool_final_answer")
    with pytest.warns(types.ToolCallInReasoningWarning):
        loop = tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": lambda **kw: calls.append(kw) or "sunny", "get_time": get_time},
            TOOLS,
            recover_tool_calls=True,
        )
    assert calls == [{"city": "Santa Clara"}]
    assert loop.final.content.strip().startswith("Santa Clara will be sunny")
    sent = rec.bodies[-1]["messages"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent[2] == {
        "role": "tool",
        "tool_call_id": sent[1]["tool_calls"][0]["id"],
        "content": "sunny",
    }


TRUNCATED = r"(?i)truncated inside a tool call: raise max_tokens"


def test_cut_inside_a_tool_call_with_markup_in_content(rec, client):
    """The issue's shape: finish_reason=length, no tool_calls, content ends '<function=...'."""
    rec.queue("length_in_tool_call")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = hc.chat(client, MODEL, "q", tools=TOOLS, max_tokens=20)
    texts = [str(w.message) for w in caught]
    assert len(texts) == 1 and re.match(TRUNCATED, texts[0]) and "max_tokens=20" in texts[0]
    assert r.truncated_in_tool_call and r.tool_calls == []
    assert r.content == "" and r.tool_call_fragment == "<tool_call>\n<function=get_wea"
    assert not r.truncated_in_reasoning


def test_cut_inside_a_tool_call_that_vllm_reports_as_a_call(rec, client):
    """vLLM 0.32 parses the fragment and says finish_reason=tool_calls; all max_tokens used."""
    resp = load("length_in_tool_call_reported_as_call")
    assert resp["choices"][0]["finish_reason"] == "tool_calls"  # as the server sends it
    rec.queue(resp)
    used = resp["usage"]["completion_tokens"]
    with pytest.warns(types.ToolCallTruncatedWarning, match=TRUNCATED):
        r = hc.chat(client, MODEL, "q", tools=TOOLS, max_tokens=used)
    assert r.truncated_in_tool_call and r.tool_calls == [] and "get_weather" in r.tool_call_fragment
    rec.queue(resp)  # the same reply under a larger max_tokens is a call, not a cut
    r = hc.chat(client, MODEL, "q", tools=TOOLS, max_tokens=used + 100)
    assert not r.truncated_in_tool_call and r.tool_calls[0].name == "get_weather"


@pytest.mark.parametrize("name", ["stream_length_in_tool_call", "stream_length_in_tool_call_name"])
def test_cut_inside_a_tool_call_streamed(rec, client, name):
    rec.queue(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = stream_mod.stream_chat(client, MODEL, "q", tools=TOOLS, max_tokens=30).result
    kinds = [w.category for w in caught]
    assert kinds == [types.ToolCallTruncatedWarning], [str(w.message) for w in caught]
    assert re.match(TRUNCATED, str(caught[0].message))
    assert r.finish_reason == "length" and r.truncated_in_tool_call and r.tool_calls == []
    assert r.content.strip() == "" and not r.truncated_in_reasoning


def test_tool_loop_runs_nothing_when_cut_inside_a_tool_call(rec, client):
    rec.queue("length_in_tool_call")
    ran = []
    with (
        pytest.warns(types.ToolCallTruncatedWarning),
        pytest.raises(errors_mod.ToolLoopError, match=TRUNCATED) as ei,
    ):
        tools_mod.run_tool_loop(
            client, MODEL, "q", {"get_weather": lambda **kw: ran.append(kw)}, TOOLS, max_tokens=20
        )
    assert ran == [] and ei.value.tool_runs == [] and len(ei.value.turns) == 1


def test_finish_reason_tool_calls_without_a_call_is_flagged(rec, client):
    resp = load("tool_calls_finish_without_call")
    assert resp["choices"][0]["finish_reason"] == "tool_calls"
    assert not resp["choices"][0]["message"].get("tool_calls")
    stream = load("stream_tool_calls_finish_without_call")
    last = [c for c in stream if c.get("choices")][-1]
    last["choices"][0]["finish_reason"] = "tool_calls"  # the streamed form of the report
    rec.queue(resp, stream)
    with pytest.warns(types.ToolCallsMissingWarning, match="no tool call"):
        r = hc.chat(client, MODEL, "q", tools=TOOLS, tool_choice="required")
    with pytest.warns(types.ToolCallsMissingWarning, match="not a final answer"):
        s = stream_mod.stream_chat(client, MODEL, "q", tools=TOOLS, tool_choice="required").result
    for x in (r, s):
        assert x.tool_calls_missing and x.tool_calls == [] and x.finish_reason == "tool_calls"


def test_tool_loop_does_not_take_tool_calls_without_a_call_as_the_answer(rec, client):
    rec.queue("tool_calls_finish_without_call")
    with (
        pytest.warns(types.ToolCallsMissingWarning),
        pytest.raises(errors_mod.ToolLoopError, match="not an answer") as ei,
    ):
        tools_mod.run_tool_loop(client, MODEL, "q", WEATHER_TOOLS, TOOLS, tool_choice="required")
    assert ei.value.turns[0].content.strip() == "It is sunny."


# ─── arguments fitted to the tool's JSON schema ─────────────────────────────────────────

SEARCH_TOOLS = json.loads((DATA / "index.json").read_text())["integer_as_float"]["request"]["tools"]


def _as_string_limit(name: str, value: str) -> dict:
    """The recorded reply as older qwen3_coder releases send it: the value that failed the
    integer conversion passed through as a string."""
    r = load(name)
    r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"query": "GPUs", "limit": value}
    )
    return r


@pytest.mark.parametrize("reply", ["integer_as_float", "stream_integer_as_float", "string_140.0"])
def test_integer_written_as_a_float_is_coerced_before_the_tool_runs(rec, client, reply):
    seen = []

    def search(query: str, limit: int) -> str:
        seen.append(limit)
        return "ok"

    payload = _as_string_limit("integer_as_float", "140.0") if reply == "string_140.0" else reply
    rec.queue(payload, "tool_final_answer")
    with warnings.catch_warnings():
        warnings.simplefilter("error", types.ToolArgumentWarning)
        loop = (
            tools_mod.run_tool_loop(
                client, MODEL, "q", {"search": search}, SEARCH_TOOLS, stream=False
            )
            if not reply.startswith("stream")
            else None
        )
    if reply.startswith("stream"):  # the streamed turn assembles to the same fitted call
        r = stream_mod.stream_chat(client, MODEL, "q", tools=SEARCH_TOOLS).result
        assert r.tool_calls[0].arguments == {"query": "GPUs", "limit": 140}
        assert type(r.tool_calls[0].arguments["limit"]) is int
        return
    assert seen == [140] and type(seen[0]) is int and len(loop.tool_runs) == 1


@pytest.mark.parametrize(
    "payload, value",
    [
        ("integer_as_fraction", 140.5),
        ("stream_integer_as_fraction", 140.5),
        ("integer_as_word", "abc"),
        ("stream_integer_as_word", "abc"),
        ("string_140.5", "140.5"),
    ],
)
def test_integer_that_cannot_be_coerced_stays_and_warns(rec, client, payload, value):
    if payload == "string_140.5":
        payload = _as_string_limit("integer_as_fraction", "140.5")
    rec.queue(payload)
    with pytest.warns(types.ToolArgumentWarning, match=r"limit=.* is not of type 'integer'"):
        if isinstance(payload, str) and payload.startswith("stream"):
            r = stream_mod.stream_chat(client, MODEL, "q", tools=SEARCH_TOOLS).result
        else:
            r = hc.chat(client, MODEL, "q", tools=SEARCH_TOOLS)
    assert r.tool_calls[0].arguments == {"query": "GPUs", "limit": value}  # never dropped


def test_tool_loop_runs_a_call_whose_argument_does_not_fit(rec, client):
    seen = []
    rec.queue("integer_as_word", "tool_final_answer")
    with pytest.warns(types.ToolArgumentWarning):
        tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"search": lambda query, limit: seen.append(limit) or "ok"},
            SEARCH_TOOLS,
        )
    assert seen == ["abc"]


# Recorded with vLLM 0.32.0's qwen3_coder parser (index.json "optional_arguments_empty"): the
# model wrote an empty parameter, None and null for optional ones, and the parser passed on
# {"query": "GPUs", "limit": "", "tags": "None", "filters": null, "order": "", "note": "null"}.
CATALOGUE_TOOLS = json.loads((DATA / "index.json").read_text())["optional_arguments_empty"][
    "request"
]["tools"]


@pytest.mark.parametrize("reply", ["optional_arguments_empty", "stream_optional_arguments_empty"])
def test_optional_arguments_written_empty_are_left_out_so_defaults_apply(
    rec, client, reply, caplog
):
    received = []

    def search_catalogue(
        query: str,
        limit: int = 10,
        tags: list | None = None,
        filters: dict | None = None,
        order: str = "asc",
        note: str = "",
    ) -> str:
        received.append(
            {"query": query, "limit": limit, "tags": tags, "filters": filters, "order": order,
             "note": note}
        )  # fmt: skip
        return "ok"

    raw = load(reply)
    raw_args = (
        raw["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        if isinstance(raw, dict)
        else "".join(
            tc["function"].get("arguments", "")
            for c in raw
            for ch in c.get("choices", [])
            for tc in (ch.get("delta", {}).get("tool_calls") or [])
        )
    )
    assert json.loads(raw_args) == {  # what vLLM 0.32.0 hands on
        "query": "GPUs", "limit": "", "tags": "None", "filters": None, "order": "", "note": "null"
    }  # fmt: skip
    rec.queue(reply, "tool_final_answer")
    caplog.set_level("INFO", logger="helpers.chat")
    with warnings.catch_warnings():
        warnings.simplefilter("error", types.ToolArgumentWarning)
        if reply.startswith("stream"):  # the streamed turn assembles to the same call
            turn = stream_mod.stream_chat(client, MODEL, "q", tools=CATALOGUE_TOOLS).result
        else:
            loop = tools_mod.run_tool_loop(
                client, MODEL, "q", {"search_catalogue": search_catalogue}, CATALOGUE_TOOLS
            )
            turn = loop.turns[0]
            # the function got only what the model filled in, plus the plain string's "null"
            assert received == [
                {"query": "GPUs", "limit": 10, "tags": None, "filters": None, "order": "asc",
                 "note": "null"}
            ]  # fmt: skip
    assert turn.tool_calls[0].arguments == {"query": "GPUs", "note": "null"}
    (note,) = turn.notes
    assert note.startswith(
        "Tool 'search_catalogue': left out limit='', tags='None', filters=None, order=''"
    )
    assert "the function's defaults apply" in note
    assert [r.getMessage() for r in caplog.records if r.name == "helpers.chat"] == [note]


def test_required_argument_written_empty_stays_and_warns(rec, client):
    rec.queue("required_argument_empty")  # {"query": "GPUs", "limit": ""} from vLLM 0.32.0
    with pytest.warns(
        types.ToolArgumentWarning, match=r"limit='' is required but was written empty"
    ):
        r = hc.chat(client, MODEL, "q", tools=SEARCH_TOOLS)
    assert r.tool_calls[0].arguments == {"query": "GPUs", "limit": ""} and r.notes == []
    assert len(r.warnings) == 1  # one line for the argument, not a second for its type


def test_drop_empty_optionals_keeps_plain_strings_and_listed_enum_values():
    from helpers.chat.toolargs import drop_empty_optionals

    schema = {
        "type": "object",
        "properties": {
            "note": {"type": "string"},
            "mode": {"type": "string", "enum": ["none", "fast"]},
            "level": {"type": ["integer", "null"]},
            "free": {},
        },
        "required": [],
    }
    args = {"note": "None", "mode": "none", "level": None, "free": " NULL ", "extra": ""}
    kept, dropped, problems = drop_empty_optionals(args, schema)
    assert kept == {"note": "None", "mode": "none", "extra": ""}  # "extra": not in the schema
    assert dropped == ["level=None", "free=' NULL '"] and problems == []
    assert drop_empty_optionals({"mode": ""}, schema)[0] == {}  # not a listed enum value
    assert drop_empty_optionals({"a": ""}, None) == ({"a": ""}, [], [])


def test_coerce_arguments_against_json_schema():
    from helpers.chat.toolargs import coerce_arguments

    schema = {
        "type": "object",
        "properties": {
            "limit": {"type": "integer"},
            "ratio": {"type": "number"},
            "exact": {"type": "boolean"},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "name": {"type": "string"},
        },
        "required": ["limit"],
    }
    args, problems = coerce_arguments(
        {"limit": "140.0", "ratio": "0.5", "exact": "true", "ids": '[1, "2.0"]', "name": "x"},
        schema,
    )
    assert args == {"limit": 140, "ratio": 0.5, "exact": True, "ids": [1, 2], "name": "x"}
    assert problems == []
    assert coerce_arguments({"limit": 140.0}, schema) == ({"limit": 140}, [])
    args, problems = coerce_arguments({"limit": "140.5", "name": 7}, schema)
    assert args == {"limit": "140.5", "name": 7} and len(problems) == 2
    args, problems = coerce_arguments({}, schema)
    assert args == {} and "'limit' is a required property" in problems[0]


# ─── max_tokens defaults that fit the server ─────────────────────────────────────────────


def test_default_max_tokens_on_a_server_with_a_small_context():
    server = RecordingServer(models="models_small")  # max_model_len 2048, as the stand-in
    try:
        client = endpoint.make_client(server.base_url, timeout=10)
        server.queue("thinking_on", "thinking_on", "stream_thinking_on")
        r = hc.chat(client, MODEL, "hi")
        hc.chat(client, MODEL, "hi again")
        _ = stream_mod.stream_chat(client, MODEL, "hi").result  # the property runs the stream
        assert r.content.strip() == "The capital of France is Paris."
        # Nothing above 2048 is sent: vLLM then generates up to the end of the context.
        assert all("max_tokens" not in b for b in server.bodies)
        assert server.gets == ["/v1/models"]  # read once per client
        assert hc.server_max_model_len(client, MODEL) == 2048
    finally:
        server.close()


def test_default_max_tokens_on_a_big_server_is_the_seed_value(rec, client):
    rec.queue("thinking_on")
    hc.chat(client, MODEL, "hi")
    assert rec.bodies[0]["max_tokens"] == 16000 and rec.gets == ["/v1/models"]


def test_max_tokens_above_the_servers_limit_names_the_limit(rec, client):
    rec.queue("error_max_tokens_over_max_model_len", status=400)
    with pytest.raises(ResponseError, match="max_model_len is 2048 tokens") as ei:
        hc.chat(client, MODEL, "hi", max_tokens=16000)
    assert "Pass max_tokens below 2048" in str(ei.value)


# ─── a failing tool does not lose the conversation ───────────────────────────────────────


def test_failing_tool_goes_back_to_the_model_by_default(rec, client):
    def get_weather(city: str, days: int = 1) -> dict:
        raise ValueError(f"no station near {city}")

    rec.queue("tool_calls_parallel", "tool_final_answer")
    loop = tools_mod.run_tool_loop(
        client, MODEL, "q", {"get_weather": get_weather, "get_time": get_time}, TOOLS
    )
    sent = rec.bodies[1]["messages"]
    assert sent[2]["content"] == "Error: get_weather raised ValueError: no station near Santa Clara"
    assert sent[3]["content"] == "09:30 in Tokyo"
    assert loop.final.content.strip().startswith("Santa Clara will be sunny")
    assert loop.tool_runs[0].error and loop.tool_runs[0].output is None


def test_failing_tool_raises_with_the_transcript_when_asked(rec, client):
    def get_weather(city: str, days: int = 1) -> dict:
        raise ValueError("station offline")

    rec.queue("tool_calls_parallel")
    with pytest.raises(
        errors_mod.ToolLoopError, match="get_weather raised ValueError: station offline"
    ) as ei:
        tools_mod.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": get_weather, "get_time": get_time},
            TOOLS,
            on_tool_error="raise",
        )
    assert isinstance(ei.value.__cause__, ValueError)
    assert [m["role"] for m in ei.value.messages] == ["user", "assistant"]
    assert ei.value.turns[0].tool_calls[0].name == "get_weather"


def test_server_error_mid_loop_carries_the_transcript(rec, client):
    from helpers.errors import ServerRequestError

    rec.queue("tool_calls_parallel")  # the second request gets the recording server's 500
    with pytest.raises(
        ServerRequestError, match=r"failed POST /v1/chat/completions \(HTTP 500\)"
    ) as ei:
        tools_mod.run_tool_loop(client, MODEL, "q", WEATHER_TOOLS, TOOLS)
    assert "The reason is in the server's log" in str(ei.value)  # not a server of this machine's
    assert [m["role"] for m in ei.value.messages] == ["user", "assistant", "tool", "tool"]
    assert len(ei.value.tool_runs) == 2


def test_schema_is_named_after_its_key_not_the_function(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    tools_mod.run_tool_loop(
        client,
        MODEL,
        "q",
        {"get_weather": lambda city, days=1: "sunny", "get_time": get_time},
    )
    assert [t["function"]["name"] for t in rec.bodies[0]["tools"]] == ["get_weather", "get_time"]
    assert tools_mod.tool_schema(lambda x: x, name="echo")["function"]["name"] == "echo"


# ─── wrong types are named at the boundary ──────────────────────────────────────────────


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda c: tools_mod.run_tool_loop(c, MODEL, "q", [get_weather]),
            r"`tools` must be a dict \{name: function\}.*\{f.__name__: f for f in tools\}",
        ),
        (
            lambda c: tools_mod.run_tool_loop(c, MODEL, "q", TOOLS),
            r"`tools` must be a dict.*Schemas go in `tool_schemas`",
        ),
        (
            lambda c: tools_mod.run_tool_loop(c, MODEL, "q", WEATHER_TOOLS, WEATHER_TOOLS),
            r"`tool_schemas` must be None or a list",
        ),
        (
            lambda c: tools_mod.run_tool_loop(c, MODEL, "q", WEATHER_TOOLS, max_rounds="3"),
            r"`max_rounds` must be an integer",
        ),
        (
            lambda c: hc.chat(c, MODEL, "q", max_tokens="100"),
            r"chat: `max_tokens` must be an integer",
        ),
        (lambda c: hc.chat(c, MODEL, "q", max_tokens=True), r"`max_tokens` must be an integer"),
        (lambda c: hc.chat(c, MODEL, "q", thinking="yes"), r"`thinking` must be True or False"),
        (
            lambda c: hc.chat(c, MODEL, "q", tools=WEATHER_TOOLS),
            r"`tools` must be a list of OpenAI function-tool schemas.*run_tool_loop",
        ),
        (lambda c: hc.chat(c, MODEL, 42), r"`messages_or_prompt` must be a prompt string"),
        (lambda c: hc.chat(c, MODEL, [{"content": "no role"}]), r"`messages_or_prompt`.*item 0"),
        (lambda c: hc.chat(c, 7, "q"), r"`model` must be the served model name"),
        (
            lambda c: hc.chat("http://127.0.0.1:8000", MODEL, "q"),
            r"`client` must be an OpenAI client.*make_client",
        ),
        (
            lambda c: stream_mod.stream_chat(c, MODEL, "q", temperature="hot"),
            r"stream_chat: `temperature` must be a number",
        ),
        (lambda c: endpoint.make_client(8000), r"make_client: `base_url` must be a URL string"),
    ],
)
def test_wrong_argument_types_name_the_argument(rec, client, call, match):
    with pytest.raises(TypeError, match=match):
        call(client)
    assert rec.requests == []  # nothing was sent


def test_value_errors_at_the_boundary(rec, client):
    with pytest.raises(ValueError, match="`max_tokens`=0 must be >= 1"):
        hc.chat(client, MODEL, "q", max_tokens=0)
    with pytest.raises(ValueError, match="on_tool_error"):
        tools_mod.run_tool_loop(client, MODEL, "q", WEATHER_TOOLS, on_tool_error="ignore")
    with pytest.raises(ValueError, match="is not a server URL"):
        endpoint.make_client("localhost:8000")
    assert rec.requests == []


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
    with pytest.raises(TypeError, match="run_of: pass the server"):
        ChatOptions.for_run(None)
    with pytest.raises(ValueError, match=r"`top_p`=2 must be <= 1"):
        ChatOptions.for_run(prepare(None), top_p=2)


# ─── tool calls, defaults and failures against the real vLLM CPU stand-in ──────────────


@pytest.mark.server
def test_live_default_max_tokens_fits_the_standin(standin_server):
    """`chat(llm, model, "hi")` with no max_tokens fits the 2048-token stand-in."""
    client = endpoint.make_client(standin_server.base_url, timeout=120)
    model = standin_server.models()[0]
    assert hc.server_max_model_len(client, model) == 2048  # cookbook/recipe.yaml, cpu target
    r = hc.chat(client, model, "hi", temperature=0)
    assert r.finish_reason in ("stop", "length") and r.usage.completion_tokens > 0
    s = stream_mod.stream_chat(client, model, "hi", temperature=0).result
    assert s.usage.completion_tokens > 0
    with pytest.raises(ResponseError, match="max_model_len is 2048 tokens"):
        hc.chat(client, model, "hi", max_tokens=16000)


@pytest.mark.server
def test_live_failing_tool_goes_back_to_the_model(live):
    """A failing tool on the real server: the tool's error is the tool result; nothing is lost."""
    client, model, demo = live

    def get_weather(city: str) -> dict:
        raise RuntimeError(f"weather service down for {city}")

    tools = {**_live_tools(demo), "get_weather": get_weather}
    prompt = demo["weather"]["prompt"].format(city="Santa Clara")
    try:
        loop = tools_mod.run_tool_loop(
            client,
            model,
            prompt,
            tools,
            demo["tools"],
            max_tokens=LIVE_MAX_TOKENS,
            temperature=0,
            max_rounds=3,
        )
        messages = loop.messages
    except errors_mod.ToolLoopError as e:  # the model may keep retrying: the transcript is kept
        messages = e.messages
    errors = [m for m in messages if m["role"] == "tool" and m["content"].startswith("Error: ")]
    assert (
        errors and "get_weather raised RuntimeError: weather service down" in errors[0]["content"]
    )
    with pytest.raises(errors_mod.ToolLoopError, match="get_weather raised RuntimeError") as ei:
        tools_mod.run_tool_loop(
            client,
            model,
            prompt,
            tools,
            demo["tools"],
            max_tokens=LIVE_MAX_TOKENS,
            temperature=0,
            on_tool_error="raise",
        )
    assert [m["role"] for m in ei.value.messages] == ["user", "assistant"]
    assert isinstance(ei.value.__cause__, RuntimeError)


@pytest.mark.server
def test_live_cut_inside_a_tool_call(live):
    """A reply cut inside a tool call on the real server: max_tokens ends inside the first call."""
    client, model, demo = live
    prompt = demo["weather"]["prompt"].format(city="Santa Clara")
    full = hc.chat(
        client, model, prompt, tools=demo["tools"], max_tokens=LIVE_MAX_TOKENS, temperature=0
    )
    assert full.tool_calls, "the stand-in made no tool call"
    reasoning = full.usage.reasoning_tokens or 0
    cut_at = reasoning + max(3, (full.usage.completion_tokens - reasoning) // 2)
    for r in (
        hc.chat(client, model, prompt, tools=demo["tools"], max_tokens=cut_at, temperature=0),
        stream_mod.stream_chat(
            client, model, prompt, tools=demo["tools"], max_tokens=cut_at, temperature=0
        ).result,
    ):
        assert r.truncated_in_tool_call, (r.finish_reason, r.content, r.tool_calls, r.usage)
        assert r.tool_calls == [] and not r.content.strip().startswith("<tool_call>")
        assert any(
            "truncated inside a tool call: raise max_tokens" in w.lower() for w in r.warnings
        )
    calls = []
    with pytest.raises(errors_mod.ToolLoopError, match="(?i)truncated inside a tool call"):
        tools_mod.run_tool_loop(
            client,
            model,
            prompt,
            {"get_weather": lambda **kw: calls.append(kw)},
            demo["tools"],
            max_tokens=cut_at,
            temperature=0,
        )
    assert calls == []
