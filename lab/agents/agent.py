"""An agent from a maintained SDK, pydantic-ai, driving the served model through its tools.

pydantic-ai (``pydantic-ai-slim[openai]`` 2.68.0, the ``agents`` extra) runs the demo task
of ``cookbook/demo.yaml`` ``agent`` on a vLLM server: the weather in two cities by a tool,
the answer in a schema (:class:`WarmerCity`).

Why pydantic-ai: its structured answer is an *output tool*, so the schema rides on the
model's native tool calling. In vLLM 0.32.0 (``vllm/entrypoints/openai/chat_completion/
protocol.py``) ``openai-agents``' ``output_type`` sends ``response_format`` on every turn,
which constrains the whole answer so no tool call can be made; and pydantic-ai's own vLLM
default, ``tool_choice="required"`` (``pydantic_ai/providers/vllm.py``), makes vLLM's grammar
replace the model's tool-call format with a JSON array: :func:`agent_model` sends ``"auto"``
(pydantic-ai asks again when the model answers in text instead).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pydantic

from helpers.config.demo import load_demo, tool_result
from helpers.errors import AgentError, CookbookError, check_number
from helpers.loop_thread import run_on_own_loop
from helpers.machine.libraries import LIBRARIES
from helpers.server.endpoint import server_root

#: What ``pip`` needs for this module (the ``agents`` extra of the package): the one pin of
#: the libraries a step needs, :data:`helpers.machine.libraries.LIBRARIES`.
AGENTS_REQUIREMENT = LIBRARIES["pydantic_ai"].requirement


class WarmerCity(pydantic.BaseModel):
    """The warmer of two cities and by how many degrees: the agent's final answer."""

    # pydantic-ai sends this docstring as the output tool's description and the fields as its
    # parameters: cookbook/demo.yaml `agent.output_tool` holds what the model sees (the
    # stand-in is trained on it; tests/lab/agents/test_agent.py checks the two agree).

    warmer_city: str = pydantic.Field(description="The warmer of the two cities")
    difference_c: int = pydantic.Field(description="How much warmer it is, in degrees Celsius")


@dataclasses.dataclass
class AgentRun:
    """One finished agent run.

    Attributes:
        output: the validated answer (an instance of the agent's ``output_type``).
        trace: pandas DataFrame, one row per message part (:func:`trace_table`).
        requests: model requests the run made.
        input_tokens / output_tokens: summed over those requests (tokens).
        seconds: wall time of the run (seconds).
        messages: pydantic-ai's ``all_messages()``, to continue the conversation.
    """

    output: Any
    trace: Any
    requests: int
    input_tokens: int
    output_tokens: int
    seconds: float
    messages: list[Any]

    def summary(self) -> str:
        """One line: the answer, the requests, the tokens and the time."""
        return (
            f"answer {self.output!r} after {self.requests} model request(s), "
            f"{self.input_tokens} prompt + {self.output_tokens} completion tokens, "
            f"{self.seconds:.1f} s"
        )


def _import_sdk():
    try:
        import pydantic_ai  # noqa: F401
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.profiles import merge_profile
        from pydantic_ai.profiles.openai import OpenAIModelProfile
        from pydantic_ai.providers.vllm import VLLMProvider
    except ImportError as e:
        raise CookbookError(
            f"lab.agents.agent needs pydantic-ai: pip install '{AGENTS_REQUIREMENT}' "
            f"(or the cookbook's extra: pip install -e '.[agents]'). ({e})"
        ) from e
    return OpenAIChatModel, VLLMProvider, OpenAIModelProfile, merge_profile


def agent_model(
    base_url: str,
    model: str,
    *,
    api_key: str = "EMPTY",
    timeout: float = 120.0,
    forced_tool_choice: bool = False,
    strict_tools: bool = False,
    on_request: Callable[[dict[str, Any]], None] | None = None,
) -> Any:
    """pydantic-ai's chat-completions model for ``model`` served at ``base_url``.

    Args:
        base_url: the server's URL, with or without ``/v1`` (``http://127.0.0.1:8000``).
        model: the served model name (``--served-model-name``; ``server.models()[0]``).
        api_key: the server's ``--api-key`` (any string when it was launched without one).
        timeout: seconds per HTTP request.
        forced_tool_choice: True lets pydantic-ai send ``"required"`` when only tools may
            answer (the JSON-array grammar of the module docstring); False sends ``"auto"``.
        strict_tools: False (default) drops pydantic-ai's ``"strict": true`` on the tools, so
            an answer out of its schema's bounds reaches pydantic's validation and is sent
            back: with strict tools vLLM 0.32.0's grammar bent one into range
            (``Field(ge=100)`` came back 444 while the reasoning said 4).
        on_request: called with each request's JSON body before it is sent.

    Returns:
        ``pydantic_ai.models.openai.OpenAIChatModel`` (through ``VLLMProvider``).

    Raises:
        CookbookError: pydantic-ai is not installed (the message gives the pip line).
        TypeError, ValueError: an empty ``base_url`` or ``model``, a ``timeout`` not above 0.
    """
    _check_text("agent_model", "base_url", base_url, "the server's URL, e.g. srv.base_url")
    _check_url(base_url)
    _check_text("agent_model", "model", model, "the served model name, e.g. srv.model_name")
    check_number("agent_model", "timeout", timeout, minimum=0, exclusive=True)
    OpenAIChatModel, VLLMProvider, OpenAIModelProfile, merge_profile = _import_sdk()
    import httpx2

    hooks = {}
    if on_request is not None:

        async def hook(request):
            if request.content:
                on_request(json.loads(request.content))

        hooks["request"] = [hook]
    # No kept-alive connections: each run_agent call runs on its own event loop, and a pooled
    # connection of an earlier (closed) loop would fail the next run ("Event loop is closed").
    http = httpx2.AsyncClient(
        timeout=timeout, event_hooks=hooks, limits=httpx2.Limits(max_keepalive_connections=0)
    )
    provider = VLLMProvider(
        base_url=f"{server_root(base_url)}/v1", api_key=api_key, http_client=http
    )
    profile = merge_profile(
        VLLMProvider.model_profile(model),
        OpenAIModelProfile(
            supports_forced_tool_choice=forced_tool_choice,
            openai_supports_strict_tool_definition=strict_tools,
        ),
    )
    return OpenAIChatModel(model, provider=provider, profile=profile)


def model_settings(
    *,
    thinking: bool = True,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = 1024,
) -> dict[str, Any]:
    """pydantic-ai ``ModelSettings``: sampling, ``max_tokens`` (tokens per model request) and
    thinking (``chat_template_kwargs.enable_thinking``). ``None`` leaves a field to the
    server's defaults (the checkpoint's ``generation_config.json``).

    Raises:
        TypeError, ValueError: ``thinking`` not a bool; ``temperature`` below 0, ``top_p`` not
            above 0, ``max_tokens`` not an int of 1 or more.
    """
    if not isinstance(thinking, bool):
        raise TypeError(f"model_settings: `thinking` must be True or False; got {thinking!r:.60}.")
    check_number("model_settings", "temperature", temperature, minimum=0, optional=True)
    check_number("model_settings", "top_p", top_p, minimum=0, exclusive=True, optional=True)
    if top_p is not None and top_p > 1:
        raise ValueError(
            f"model_settings: `top_p`={top_p!r} must be in (0, 1] (1 keeps every token)."
        )
    check_number("model_settings", "max_tokens", max_tokens, integer=True, minimum=1, optional=True)
    s: dict[str, Any] = {"extra_body": {"chat_template_kwargs": {"enable_thinking": thinking}}}
    for k, v in (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens)):
        if v is not None:
            s[k] = v
    return s


def weather(city: str) -> str:
    """The demo's ``get_weather`` backend: the JSON ``cookbook/demo.yaml`` gives for ``city``
    (e.g. ``{"city": "Tokyo", "temperature_c": 18, ...}``), or ``{"error": ...}`` for a city it
    does not know, which the model reads like any tool result. Never raises."""
    try:
        return tool_result(load_demo(), "get_weather", city)
    except CookbookError:
        return f'{{"error": "no weather known for {city}"}}'


def demo_agent(
    model: Any,
    *,
    retries: int = 1,
    settings: dict[str, Any] | None = None,
    on_tool: Callable[[str, dict[str, Any]], None] | None = None,
) -> Any:
    """The demo agent: instructions and tool from ``cookbook/demo.yaml`` ``agent``, answer
    :class:`WarmerCity`; its tool ``get_weather(city)`` answers from demo.yaml (or says it
    knows no such city).

    Args:
        model: :func:`agent_model`'s result (or any pydantic-ai model).
        retries: how often the agent may send the model's invalid answer or failed tool call
            back for another try (pydantic-ai's ``retries``, tools and output alike).
        settings: :func:`model_settings` (default: thinking on, server sampling).
        on_tool: called as ``on_tool(name, arguments)`` before each tool runs (progress).

    Raises:
        CookbookError: pydantic-ai is not installed.
        TypeError, ValueError: ``model`` not a pydantic-ai model; ``retries`` not an int of 0
            or more.
    """
    check_number("demo_agent", "retries", retries, integer=True, minimum=0)
    _import_sdk()
    from pydantic_ai import Agent
    from pydantic_ai.models import Model

    if not isinstance(model, Model):
        raise TypeError(
            f"demo_agent: `model` must be a pydantic-ai model: agents.agent_model(srv.base_url, "
            f"srv.model_name); got {type(model).__name__} {model!r:.60}."
        )
    from pydantic_ai.output import ToolOutput

    demo = load_demo()
    ag = demo["agent"]
    tool = demo["tools"][0]["function"]
    agent = Agent(
        model,
        output_type=ToolOutput(WarmerCity, name=ag["output_tool"]["name"]),
        instructions=ag["instructions"],
        retries=retries,
        model_settings=settings or model_settings(),
    )

    def get_weather(city: str) -> str:
        if on_tool is not None:
            on_tool("get_weather", {"city": city})
        return weather(city)

    get_weather.__doc__ = (
        f"{tool['description']}\n\nArgs:\n"
        f"    city: {tool['parameters']['properties']['city']['description']}\n"
    )
    agent.tool_plain(get_weather)
    return agent


def trace_table(messages: Sequence[Any]):
    """pydantic-ai messages as a DataFrame, one row per part: ``request`` (1-based), ``side``
    (``model`` / ``agent``), ``part`` (``reasoning``, ``text``, ``tool call``, ``tool result``,
    ``retry``, ``system``, ``user``), ``tool``, ``content``. The instructions appear once."""
    import pandas as pd

    readers = {
        "thinking": ("reasoning", lambda p: p.content),
        "text": ("text", lambda p: p.content),
        "tool-call": ("tool call", lambda p: p.args_as_json_str()),
        "tool-return": ("tool result", lambda p: p.model_response_str()),
        "retry-prompt": ("retry", lambda p: p.model_response()),
        "retry-feedback": ("retry", lambda p: p.model_response()),
        "system-prompt": ("system", lambda p: p.content),
        "user-prompt": ("user", lambda p: str(p.content)),
    }
    rows: list[list[Any]] = []  # [request, side, part, tool, content]
    responses = 0
    for m in messages:
        is_response = getattr(m, "kind", "") == "response"
        responses += is_response
        request = responses if is_response else responses + 1
        side = "model" if is_response else "agent"
        if not is_response and responses == 0 and getattr(m, "instructions", None):
            rows.append([1, side, "system", None, m.instructions])
        for p in getattr(m, "parts", []):
            kind = getattr(p, "part_kind", type(p).__name__)
            part, read = readers.get(kind, (kind, str))
            rows.append([request, side, part, getattr(p, "tool_name", None), read(p)])
    for row in rows:  # the output tool's return, after the last response: no request of its own
        if row[2] == "tool result" and row[0] > responses >= 1:
            row[0] = responses
    return pd.DataFrame(rows, columns=["request", "side", "part", "tool", "content"])


def _check_url(base_url: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(base_url.strip())
    path = parts.path.rstrip("/")
    if parts.scheme not in ("http", "https") or not parts.netloc or path not in ("", "/v1"):
        raise ValueError(
            f"agent_model: `base_url`={base_url!r}: give the server's root, "
            "http://host:port or http://host:port/v1 (e.g. srv.base_url), with no endpoint path."
        )


def _check_text(fn: str, name: str, value: Any, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{fn}: `{name}` must be a non-empty string ({what}); got {value!r:.60}.")


def _run_in_own_loop(coro_fn: Callable[[], Any]) -> Any:
    """Run ``coro_fn()`` to its end: here, or (an event loop runs: a notebook) in a worker
    thread with its own loop, cancelled and joined on an interrupt."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_fn())
    box: dict[str, Any] = {}
    t = threading.Thread(
        target=run_on_own_loop, args=(coro_fn, box), name="helpers-agent-run", daemon=True
    )
    t.start()
    try:
        while t.is_alive():
            t.join(0.1)
    except KeyboardInterrupt:
        if "cancel" in box:
            box["cancel"]()
        t.join(30)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]


def run_agent(
    agent: Any,
    prompt: str | None = None,
    *,
    message_history: Sequence[Any] | None = None,
    usage_limits: Any = None,
    deps: Any = None,
) -> AgentRun:
    """Run ``agent`` on ``prompt`` (default: demo.yaml ``agent.prompt``) to its answer, in a
    script or a notebook (where an event loop already runs).

    Args:
        agent: a pydantic-ai ``Agent`` (:func:`demo_agent`, or your own on :func:`agent_model`).
        prompt: the task as text.
        message_history: an earlier run's ``AgentRun.messages``, to continue that conversation.
        usage_limits: ``pydantic_ai.usage.UsageLimits`` (e.g. ``request_limit``), passed on.
        deps: your agent's dependencies (``RunContext.deps``), passed on.

    Returns:
        :class:`AgentRun`.

    Raises:
        AgentError: the run stopped (no valid answer within the retries, a refused request,
            a usage limit); the message says what to change; ``messages`` and ``trace`` hold
            the run so far. Your own tool's exception ends the run unchanged.
        CookbookError: pydantic-ai refused the agent's set-up (its ``UserError``), or
            pydantic-ai is not installed.
        TypeError: ``prompt`` not a non-empty string, ``agent`` not a pydantic-ai Agent.
    """
    _import_sdk()
    from pydantic_ai import capture_run_messages
    from pydantic_ai.exceptions import AgentRunError, UserError

    if prompt is None:
        prompt = load_demo()["agent"]["prompt"]
    _check_text("run_agent", "prompt", prompt, "the task for the agent, as text")
    if not hasattr(agent, "run") or not hasattr(agent, "iter"):
        raise TypeError(
            f"run_agent: `agent` must be a pydantic-ai Agent (demo_agent's result); got "
            f"{type(agent).__name__}."
        )
    t0 = time.perf_counter()

    async def go():
        with capture_run_messages() as captured:
            try:
                history = list(message_history) if message_history else None
                run = agent.run(
                    prompt, message_history=history, usage_limits=usage_limits, deps=deps
                )
                return await run, captured
            except AgentRunError as e:
                e.__cookbook_messages__ = list(captured)
                raise

    try:
        result, _ = _run_in_own_loop(go)
    except UserError as e:
        raise CookbookError(f"run_agent: pydantic-ai refused the agent as set up: {e}") from e
    except AgentRunError as e:
        messages = getattr(e, "__cookbook_messages__", [])
        trace = trace_table(messages)
        raise AgentError(_explain(e, trace), messages=messages, trace=trace, cause=e) from e
    usage = result.usage
    messages = result.all_messages()
    return AgentRun(
        output=result.output,
        trace=trace_table(messages),
        requests=usage.requests,
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        seconds=time.perf_counter() - t0,
        messages=messages,
    )


def _refusal_hint(e: Any) -> str:
    """What to change for a request the server refused, read from its status and words."""
    status = getattr(e, "status_code", None)
    words = f"{getattr(e, 'body', '')} {e}".lower()
    if "enable-auto-tool-choice" in words or "tool-call-parser" in words:
        return (
            "serve with --enable-auto-tool-choice and a --tool-call-parser (the registry's "
            "target flags carry them)"
        )
    if status == 404 and "does not exist" in words:
        return "use the served model name (srv.model_name, or GET /v1/models)"
    if status == 404:
        return "give agent_model the server's root URL (http://host:port, or .../v1), no more path"
    if "max_model_len" in words or "max_tokens" in words:
        return "lower max_tokens in model_settings (prompt + max_tokens must fit max_model_len)"
    if status == 400:
        return "fix the request parameter the server names (model_settings, or the tools)"
    return "read the server's words below and its log (srv.log_path)"


def _explain(e: Exception, trace) -> str:
    """The stopped run in words: what to change first, then the SDK's error and what the
    model last said."""
    from pydantic_ai.exceptions import (
        ModelAPIError,
        ModelConnectionError,
        ModelTimeoutError,
        OutputTokenLimitExceeded,
        UnexpectedModelBehavior,
        UsageLimitExceeded,
    )

    said = trace[trace["side"] == "model"].tail(2)
    last = (
        "; ".join(
            f"{r.part}{f' {r.tool}' if isinstance(r.tool, str) else ''}: {str(r.content)[:160]!r}"
            for r in said.itertuples()
        )
        or "nothing"
    )
    sdk = f"({type(e).__name__}: {e})"
    if isinstance(e, ModelTimeoutError):
        return (
            f"no reply within agent_model's timeout: raise agent_model(timeout=...) in seconds, "
            f"or check the server's load {sdk}."
        )
    if isinstance(e, ModelConnectionError):
        return (
            "no server answered the agent: start it (helpers.server.launch.launch_server) or "
            f"check the URL given to agent_model {sdk}."
        )
    if isinstance(e, ModelAPIError):
        return f"the server refused the agent's request: {_refusal_hint(e)} {sdk}."
    if isinstance(e, UsageLimitExceeded):
        return f"the agent hit a usage limit: raise it with run_agent(..., usage_limits=...) {sdk}."
    if isinstance(e, OutputTokenLimitExceeded):
        return (
            "the model ran out of max_tokens before it answered: a reasoning model spends "
            "max_tokens on thinking first, so raise max_tokens in model_settings, or turn "
            f"thinking off. It last gave {last} {sdk}."
        )
    if isinstance(e, UnexpectedModelBehavior):
        tool_retries = str(e).startswith("Tool ")
        # pydantic-ai 2.68.0 (pydantic_ai/tool_manager.py, _resolve_tool): a call of a tool the
        # agent lacks is retried with "Unknown tool name: 'x'. Available tools: ...", the cause
        # of the "exceeded max retries" error
        unknown = str(e.__cause__ or "").startswith("Unknown tool name:")
        fix = (
            f"it kept calling a tool this agent does not have ({e.__cause__}): give the agent "
            "that tool, or instructions that name the tools it has (a model tuned on other "
            "tools keeps calling those)"
            if unknown
            else "its calls of that tool kept failing validation or raising ModelRetry: check "
            "the tool's parameters and description, or give it more retries"
            if tool_retries
            else "it answered in text or with an invalid answer instead of calling the output "
            "tool: give more retries (demo_agent(retries=...)) or clearer instructions"
        )
        return (
            f"the model gave no valid answer within the agent's retries: {fix}. It last gave "
            f"{last} {sdk}."
        )
    return f"the agent's run stopped: {type(e).__name__}: {e}. The model last gave {last}."
