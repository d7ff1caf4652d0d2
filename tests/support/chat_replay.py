"""The recorded-reply layer of the chat tests: a real ``openai.OpenAI`` client talks HTTP to a
tiny recording server on 127.0.0.1 (:class:`RecordingServer`) that answers with recorded vLLM
0.32 responses from ``tests/data/responses/``, built by vLLM's own code: ``index.json`` holds,
per fixture, the server's parser flags, the request's ``chat_template_kwargs``/tools and the raw
model text; :func:`build_fixture` runs vLLM's parser over it and serialises the result the way
``OpenAIServingChat`` does. ``test_recorded_fixtures_match_vllm``
(tests/chat/test_chat_replies.py) re-runs it against the installed vLLM;
``python tests/support/chat_replay.py --write-fixtures`` rewrites the files. The demo tools are
shared by the ``tests/chat/test_chat_*.py`` files; the fixtures ``rec`` (the recording server)
and ``client`` (an SDK client on it) are in ``tests/chat/conftest.py``.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

from helpers.chat import types

DATA = Path(__file__).resolve().parents[1] / "data" / "responses"
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


def get_weather(city: str, days: int = 1) -> dict:
    """Weather forecast for a city."""
    return {"city": city, "days": days, "forecast": "sunny", "celsius": 21}


def get_time(city: str) -> str:
    """Local time in a city."""
    return f"09:30 in {city}"


WEATHER_TOOLS = {"get_weather": get_weather, "get_time": get_time}


# ─── requests as the notebook cells write them ────────────────────────────────────────

types.skip_in_warnings(__file__)  # a checker's warning points at the test that asked


def ask(
    client: Any,
    prompt: Any = "q",
    *,
    model: str = MODEL,
    stream: bool = False,
    thinking: bool = True,
    force_nonempty_content: bool = False,
    max_tokens: int | None = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    recover_tool_calls: bool = False,
    **create: Any,
) -> types.ChatResult:
    """One request as a notebook cell sends it (``client.chat.completions.create`` with the
    model card's fields in ``extra_body``), checked by the helpers' checker with what was sent."""
    from helpers.chat.parse import check_reply
    from helpers.chat.stream import check_stream

    template: dict[str, Any] = {}
    if not thinking:
        template["enable_thinking"] = False
    if force_nonempty_content:
        template["force_nonempty_content"] = True
    extra_body = {"chat_template_kwargs": template} if template else None
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    sent = {
        "max_tokens": max_tokens,
        "tools": tools,
        "tool_choice": tool_choice,
        "extra_body": extra_body,
    }
    kwargs = {"model": model, "messages": messages, **create}
    kwargs.update({k: v for k, v in sent.items() if v is not None})
    if stream:
        chunks = client.chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **kwargs
        )
        return check_stream(chunks, recover_tool_calls=recover_tool_calls, **sent)
    reply = client.chat.completions.create(**kwargs)
    return check_reply(reply, recover_tool_calls=recover_tool_calls, **sent)


def tool_loop(
    client: Any,
    prompt: str,
    tools: dict[str, Any],
    schemas: list[dict[str, Any]] | None = None,
    *,
    rounds: int = 3,
    **asked: Any,
) -> tuple[list[dict[str, Any]], list[types.ChatResult], list[str]]:
    """The notebooks' tool cell: ask, run each call (``call_tool``), send each result back as a
    ``tool`` message with its ``tool_call_id``, until a turn has no call or ``rounds`` ran out.
    Returns ``(messages, turns, tool message contents)``."""
    from helpers.chat.tools import call_tool

    schemas = schemas if schemas is not None else TOOLS
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    turns, outputs = [], []
    for _ in range(rounds):
        turn = ask(client, messages, tools=schemas, **asked)
        turns.append(turn)
        if not turn.tool_calls:
            break
        messages.append(turn.to_message())
        for call in turn.tool_calls:
            outputs.append(call_tool(tools, call))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": outputs[-1]})
    return messages, turns, outputs


if __name__ == "__main__" and "--write-fixtures" in sys.argv:
    write_fixtures()
