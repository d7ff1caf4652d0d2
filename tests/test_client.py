"""Tests of ``helpers.client``.

Unit layer: a real ``openai.OpenAI`` client talks HTTP to a tiny recording server on
127.0.0.1 (:class:`RecordingServer`), which stores each request body and answers with a
recorded vLLM 0.32 response from ``tests/data/responses/``. Those responses are built by
vLLM's own code: ``index.json`` holds, per fixture, the server's parser flags, the
request's ``chat_template_kwargs``/tools and the raw model text; :func:`build_fixture`
runs vLLM's parser (``ParserManager.get_parser``, as ``vllm serve`` composes it) over
that text and serialises the result with vLLM's protocol classes, the way
``OpenAIServingChat`` does. ``test_recorded_fixtures_match_vllm`` re-runs it against the
installed vLLM; ``python tests/test_client.py --write-fixtures`` rewrites the files.

Server layer (``@pytest.mark.server``): the same calls against the real vLLM CPU
stand-in server from the ``standin_server`` fixture, asserting structure, not text.
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

from helpers import client as hc
from helpers.errors import ResponseError

DATA = Path(__file__).parent / "data" / "responses"
MODEL = "nemotron-test"

# ─── fixture builder (vLLM's parser + protocol classes) ───────────────────────────────

_PIECE_RE = re.compile(r"<[^<>]*>|\s*[^\s<]+|\s+")


def _pieces(text: str) -> list[str]:
    """Split model text into token-like pieces: one piece per stream chunk / token."""
    return _PIECE_RE.findall(text)


class _VocabFreeTokenizer:
    """The parser only asks the tokenizer for its vocab (to match special tokens by id);
    an empty vocab makes it match the markup as text, which gives the same events."""

    def get_vocab(self) -> dict[str, int]:
        return {}


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
            _VocabFreeTokenizer(),
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

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.replies: deque[tuple[int, Any]] = deque()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

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
    return hc.make_client(rec.base_url, timeout=10)


TOOLS = json.loads((DATA / "index.json").read_text())["tool_calls_parallel"]["request"]["tools"]


def _shape(r: hc.ChatResult) -> tuple:
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
    assert str(hc.make_client(rec.base_url).base_url).rstrip("/").endswith("/v1")
    assert (
        str(hc.make_client(rec.base_url + "/v1/").base_url)
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
    with pytest.warns(hc.ReasoningTruncatedWarning) as caught:
        r = hc.chat(client, MODEL, "Prove there are infinitely many primes", max_tokens=22)
    text = str(caught[0].message)
    for fix in ("raise max_tokens", "reasoning_budget", "thinking=False", "max_tokens=22"):
        assert fix in text
    assert r.truncated_in_reasoning and r.content == "" and r.reasoning
    assert r.finish_reason == "length" and r.warnings == [text]
    assert caught[0].filename == __file__  # points at the caller, not into helpers


def test_length_exhausted_with_force_nonempty_content_is_flagged(rec, client):
    rec.queue("length_in_reasoning_force_nonempty")
    with pytest.warns(hc.ReasoningTruncatedWarning, match="unfinished reasoning"):
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
    with pytest.warns(hc.ReasoningParserMissingWarning, match="--reasoning-parser nemotron_v3"):
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
    with pytest.warns(hc.ReasoningParserMissingWarning):
        r = hc.parse_response(resp)
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
    with pytest.warns(hc.ReasoningParserMissingWarning), pytest.warns(hc.ReasoningTruncatedWarning):
        r = hc.parse_response(resp, max_tokens=3)
    assert (r.reasoning, r.content) == ("The user", "")
    assert r.reasoning_parser_missing and r.truncated_in_reasoning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = hc.parse_response(resp, thinking=False)  # thinking off: it is the answer
    assert off.content == "The user " and not off.truncated_in_reasoning


def test_tool_markup_with_the_wrong_tool_parser_raises(rec, client):
    rec.queue("wrong_tool_parser")
    with pytest.raises(
        ResponseError, match="--enable-auto-tool-choice --tool-call-parser qwen3_coder"
    ) as ei:
        hc.chat(client, MODEL, "Weather in Santa Clara and time in Tokyo?", tools=TOOLS)
    assert "<tool_call>" in ei.value.result.content
    assert rec.bodies[0]["tools"] == TOOLS


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


def test_budget_must_leave_room_for_the_answer():
    with pytest.raises(ValueError, match="below max_tokens"):
        hc.build_request(MODEL, "hi", max_tokens=100, reasoning_budget=100)


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
        stream = hc.stream_chat(client, MODEL, "q", **kwargs)
        events = list(stream)
        streamed = hc.collect_stream(stream)
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
    r = hc.collect_stream(load("stream_thinking_on"))
    assert (
        r.reasoning.startswith("The user asks")
        and r.content.strip() == "The capital of France is Paris."
    )
    assert r.usage.prompt_tokens == 24 and r.finish_reason == "stop"


def test_print_stream_labels_parts(rec, client, capsys):
    rec.queue("stream_thinking_on")
    r = hc.print_stream(hc.stream_chat(client, MODEL, "q"))
    out = capsys.readouterr().out
    assert out.index("── reasoning ──") < out.index("── answer ──")
    assert "The capital of France is Paris." in out and r.finish_reason == "stop"
    assert out.rstrip().endswith("── finish_reason=stop ──")


def test_print_stream_tool_calls(rec, client, capsys):
    rec.queue("stream_tool_calls_parallel")
    hc.print_stream(hc.stream_chat(client, MODEL, "q", tools=TOOLS))
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
    s = hc.tool_schema(get_weather)
    assert s == TOOLS[0]


def test_tool_loop_runs_two_parallel_calls(rec, client):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    calls = []

    def weather(**kw):
        calls.append(("get_weather", kw))
        return get_weather(**kw)

    def time_(**kw):
        calls.append(("get_time", kw))
        return get_time(**kw)

    loop = hc.run_tool_loop(
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
    loop = hc.run_tool_loop(client, MODEL, "q", {"get_weather": get_weather, "get_time": get_time})
    assert rec.bodies[0]["tools"] == TOOLS
    assert [run.output for run in loop.tool_runs] == [
        get_weather("Santa Clara", 2),
        "09:30 in Tokyo",
    ]


def test_tool_loop_unknown_tool_is_a_clear_error(rec, client):
    rec.queue("tool_calls_parallel")
    with pytest.raises(ResponseError, match="'get_time', which is not in tools"):
        hc.run_tool_loop(client, MODEL, "q", {"get_weather": get_weather}, TOOLS)


def test_tool_loop_bad_json_arguments_is_a_clear_error(rec, client):
    bad = load("tool_calls_parallel")
    bad["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"city": "Santa'
    rec.queue(bad)
    with pytest.raises(ResponseError, match="not valid JSON"):
        hc.run_tool_loop(
            client, MODEL, "q", {"get_weather": get_weather, "get_time": get_time}, TOOLS
        )


def test_tool_loop_arguments_that_do_not_fit_the_function(rec, client):
    rec.queue("tool_calls_parallel")

    def weather_city_only(city: str) -> str:
        return "sunny"

    with pytest.raises(ResponseError, match="does not fit the function's signature"):
        hc.run_tool_loop(
            client, MODEL, "q", {"get_weather": weather_city_only, "get_time": get_time}, TOOLS
        )


def test_tool_loop_gives_up_after_max_rounds(rec, client):
    rec.queue("tool_calls_parallel", "tool_calls_parallel")
    with pytest.raises(ResponseError, match="max_rounds=2"):
        hc.run_tool_loop(
            client,
            MODEL,
            "q",
            {"get_weather": get_weather, "get_time": get_time},
            TOOLS,
            max_rounds=2,
        )


# ─── printing ─────────────────────────────────────────────────────────────────────────


def test_show_labels_reasoning_and_answer(capsys):
    r = hc.parse_response(load("thinking_on"))
    hc.show(r)
    out = capsys.readouterr().out
    assert "── reasoning (" in out and "── answer ──\nThe capital of France is Paris." in out
    assert "finish_reason=stop" in out


def test_show_tool_loop(rec, client, capsys):
    rec.queue("tool_calls_parallel", "tool_final_answer")
    hc.show(
        hc.run_tool_loop(
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
    from helpers.standin import load_demo

    return (
        hc.make_client(standin_server.base_url, timeout=120),
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
        warnings.simplefilter("error", hc.ReasoningParserMissingWarning)
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
    with pytest.warns(hc.ReasoningTruncatedWarning, match="raise max_tokens"):
        r = hc.chat(client, model, demo["reasoning"]["prompt"], max_tokens=4, temperature=0)
    assert r.truncated_in_reasoning and r.finish_reason == "length" and r.content == ""
    assert r.reasoning.strip()


@pytest.mark.server
def test_live_stream_matches_chat(live):
    client, model, demo = live
    prompt = demo["streaming"]["prompt"]
    plain = hc.chat(client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0)
    stream = hc.stream_chat(client, model, prompt, max_tokens=LIVE_MAX_TOKENS, temperature=0)
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
    loop = hc.run_tool_loop(
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
    stream = hc.stream_chat(
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
    loop = hc.run_tool_loop(
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
    from helpers.client import ChatResult, Usage, budget_report

    ok = ChatResult(reasoning="short", content="vLLM serves it.", finish_reason="stop",
                    usage=Usage(prompt_tokens=20, completion_tokens=30, reasoning_tokens=17))  # fmt: skip
    assert budget_report(ok, 16) == (
        "thinking_token_budget=16: 17 reasoning tokens (budget 16), then an answer of 15 characters"
    )
    over = ChatResult(reasoning="long", content="x", usage=Usage(reasoning_tokens=40))
    assert budget_report(over, 16).startswith("UNEXPECTED") and "40 reasoning tokens exceed" in budget_report(over, 16)
    empty = ChatResult(reasoning="cut", content="", finish_reason="length", usage=Usage(reasoning_tokens=16))
    assert "no answer followed" in budget_report(empty, 16) and "'length'" in budget_report(empty, 16)
    unparsed = ChatResult(reasoning="", content="<think>a</think>b", usage=Usage())
    assert "no reasoning_tokens" in budget_report(unparsed, 16)
