"""Let the model call Python functions: :func:`tool_schema` (an OpenAI function-tool schema
from a signature) and :func:`run_tool_loop` (chat, run the calls, send the results back,
until the model answers).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from helpers.chat.completions import chat
from helpers.chat.request import ChatOptions, _check_client, _options_from, as_messages
from helpers.chat.types import TOOL_PARSER_FLAGS, ChatResult, ToolCall
from helpers.errors import ToolLoopError, check_number

_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def tool_schema(
    fn: Callable[..., Any], description: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """An OpenAI function-tool schema from a Python function's signature: types from the
    annotations (:data:`_JSON_TYPES`; others untyped), required = no default, the description
    the docstring's first line, a parameter's its line under ``Args:`` (Google style).
    qwen3_coder converts the model's values to these types; an untyped one stays a string.

    Args:
        fn: the function.
        description: overrides the docstring's first line.
        name: the tool's name (default ``fn.__name__``); :func:`run_tool_loop` passes the
            key the function is registered under, so a lambda is not ``<lambda>``.

    Raises:
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"tool_schema: `fn` must be a function; got {type(fn).__name__}.")
    tool_name = name or getattr(fn, "__name__", None) or type(fn).__name__
    props: dict[str, Any] = {}
    required: list[str] = []
    arg_docs = _arg_docs(inspect.getdoc(fn) or "")
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # annotations that do not resolve: the raw ones below
        hints = {}
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        t = _JSON_TYPES.get(hints.get(name, p.annotation))
        props[name] = {"type": t} if t else {}
        if name in arg_docs:
            props[name]["description"] = arg_docs[name]
        if p.default is p.empty:
            required.append(name)
    doc = (description or (inspect.getdoc(fn) or "").strip().split("\n")[0]) or tool_name
    return {
        "type": "function",
        "function": {
            "name": tool_name,
            "description": doc,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


def _arg_docs(doc: str) -> dict[str, str]:
    """``{name: description}`` from a Google-style ``Args:`` section (one line each)."""
    out: dict[str, str] = {}
    lines = doc.splitlines()
    stripped = [line.strip() for line in lines]
    if "Args:" not in stripped:
        return out
    for line in lines[stripped.index("Args:") + 1 :]:
        if not line.strip():
            break
        m = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.+)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
        elif not line.startswith((" ", "\t")):
            break
    return out


@dataclass
class ToolRun:
    """One tool call handled by :func:`run_tool_loop`: the call, what the function returned
    (``None`` when it failed), the ``role="tool"`` message sent back, and the error sent
    back instead of a result (``None`` when the call ran)."""

    call: ToolCall
    output: Any
    message: dict[str, Any]
    error: str | None = None


class ToolCallsFailedWarning(UserWarning):
    """Every tool call of a :func:`run_tool_loop` failed: its answer rests on no tool result."""


@dataclass
class ToolLoopResult:
    """Attributes:
    messages: the whole transcript, ready to continue the conversation.
    final: the last :class:`ChatResult` (the answer).
    turns: every model turn in order (the last one is ``final``).
    tool_runs: every executed call in order.
    """

    messages: list[dict[str, Any]]
    final: ChatResult
    turns: list[ChatResult]
    tool_runs: list[ToolRun]

    @property
    def failed_runs(self) -> list[ToolRun]:
        """The calls that could not run (their ``error`` went back to the model)."""
        return [r for r in self.tool_runs if r.error is not None]

    @property
    def all_calls_failed(self) -> bool:
        """True when the model called tools and not one call ran."""
        return bool(self.tool_runs) and len(self.failed_runs) == len(self.tool_runs)

    @property
    def warning(self) -> str | None:
        """``"every tool call failed (2 of 2): ..."`` naming each error, or None."""
        if not self.all_calls_failed:
            return None
        errors = "; ".join(dict.fromkeys(f"{r.call.name}: {r.error}" for r in self.tool_runs))
        return (
            f"every tool call failed ({len(self.tool_runs)} of {len(self.tool_runs)}): {errors}. "
            "The answer rests on those error messages, not on any tool's output: fix the tools "
            "(or their schemas) and run the loop again, or pass on_tool_error='raise'"
        )


def _tool_output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


def _check_tools_mapping(tools: Any) -> None:
    shape = "a dict {name: function}, e.g. {'get_weather': get_weather}"
    if isinstance(tools, Mapping):
        bad = [k for k, f in tools.items() if not isinstance(k, str) or not callable(f)]
        if bad:
            raise TypeError(
                f"run_tool_loop: `tools` must be {shape}; the entries {bad!r} are not "
                "name -> callable."
            )
        return
    hint = ""
    if isinstance(tools, (list, tuple)) and tools and all(callable(f) for f in tools):
        hint = " Wrap the list: {f.__name__: f for f in tools}."
    elif isinstance(tools, (list, tuple)) and tools and all(isinstance(t, Mapping) for t in tools):
        hint = " Schemas go in `tool_schemas`; `tools` maps each name to its Python function."
    raise TypeError(
        f"run_tool_loop: `tools` must be {shape}; got {type(tools).__name__} {tools!r:.80}.{hint}"
    )


def _attach_transcript(e: BaseException, messages, turns, runs) -> BaseException:
    """Give an error the conversation so far (``.messages``, ``.turns``, ``.tool_runs``)."""
    with contextlib.suppress(AttributeError, TypeError):  # a type without a __dict__
        e.messages = list(messages)  # type: ignore[attr-defined]
        e.turns = list(turns)  # type: ignore[attr-defined]
        e.tool_runs = list(runs)  # type: ignore[attr-defined]
    return e


class _ToolTimeout(TimeoutError):
    """A call that outran ``tool_timeout`` (not a TimeoutError the tool raised itself)."""


def _call_within(fn: Callable[..., Any], arguments: Mapping[str, Any], timeout: float | None):
    """``fn(**arguments)``; with ``timeout`` (seconds) in a worker thread that is stopped
    (:func:`helpers.loop_thread.stop_thread`) when it has not returned by then.

    Raises:
        _ToolTimeout: it had not returned (says whether the thread could be stopped).
        Whatever ``fn`` raised.
    """
    if timeout is None:
        return fn(**arguments)
    import threading

    from helpers.loop_thread import stop_thread

    outcome: dict[str, Any] = {}

    def target():
        try:
            outcome["result"] = fn(**arguments)
        except BaseException as e:  # noqa: BLE001 - handed back to the loop's thread
            outcome["error"] = e

    worker = threading.Thread(
        target=target, name=f"tool-{getattr(fn, '__name__', 'call')}", daemon=True
    )
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        ended = stop_thread(worker, timeout=5.0, every=0.5)
        raise _ToolTimeout(
            f"it did not return within tool_timeout={timeout:g} s; "
            + (
                "it was stopped"
                if ended
                else "it is still running in the background (it blocks outside Python code)"
            )
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


def _run_call(
    call: ToolCall,
    tools: Mapping[str, Callable[..., Any]],
    finish_reason: Any,
    timeout: float | None = None,
):
    """Run one call (within ``timeout`` seconds when given): ``(output, error text or None, fix
    for a raised error, cause)``."""

    def _failed(error: str, fix: str, cause: BaseException | None = None):
        return None, error, fix, cause

    fn = tools.get(call.name)
    if fn is None:
        return _failed(
            f"no tool named {call.name!r}; the tools are {sorted(tools)}",
            "Pass a function under that name in `tools`, or remove its schema from `tool_schemas`.",
        )
    if call.error is not None:
        return _failed(
            f"the arguments for {call.name} cannot be used: {call.error}; raw arguments: "
            f"{call.raw_arguments!r}",
            f"Retry, or raise max_tokens if the reply was cut off (finish_reason={finish_reason!r}).",
        )
    try:
        inspect.signature(fn).bind(**call.arguments)
    except TypeError as e:
        return _failed(
            f"{call.name}({call.raw_arguments}) does not fit the function's signature ({e})",
            "Make the tool schema's parameters match the function "
            "(helpers.chat.tools.tool_schema(fn) builds them from it).",
            e,
        )
    except ValueError:  # no signature (some builtins): just call it
        pass
    try:
        return _call_within(fn, call.arguments, timeout), None, "", None
    except _ToolTimeout as e:
        return _failed(
            f"{call.name} {e}",
            "Make the tool return sooner (its own timeout on what it waits for), or raise tool_timeout.",
            e,
        )
    except Exception as e:
        return _failed(
            f"{call.name} raised {type(e).__name__}: {e}",
            "Fix the tool, or leave on_tool_error='return' so the model gets the error as "
            "the tool's result.",
            e,
        )


def run_tool_loop(
    client: Any,
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    tools: Mapping[str, Callable[..., Any]],
    tool_schemas: list[dict[str, Any]] | None = None,
    options: ChatOptions | None = None,
    *,
    max_rounds: int = 5,
    on_tool_error: str = "return",
    tool_timeout: float | None = None,
    **overrides: Any,
) -> ToolLoopResult:
    """Let the model call Python functions until it answers.

    Each round: :func:`chat` with the tools; each call in the reply runs
    ``tools[name](**arguments)`` (arguments fitted to the schema, :mod:`helpers.chat.toolargs`)
    and its result goes back as a ``role="tool"`` message (non-strings as JSON). A call that
    cannot run goes back as ``"Error: ..."`` so the model can correct itself.

    Args:
        tools: ``{name: function}``; the model calls each function by its key.
        tool_schemas: OpenAI function-tool schemas; default :func:`tool_schema` of each
            function, named after its key.
        max_rounds: model turns allowed, the final answer included (>= 1).
        on_tool_error: ``"return"`` (default) or ``"raise"`` (:class:`ToolLoopError`,
            chained to the tool's exception).
        tool_timeout: seconds a call may take (None: no limit); a tool still running then is
            stopped (``KeyboardInterrupt`` in its thread) and the call fails like one that raised.
        options: a :class:`~helpers.chat.request.ChatOptions` for every turn; its ``tools``
            is replaced by the schemas above.
        **overrides: as :func:`chat`'s, for every turn.

    Returns:
        A :class:`ToolLoopResult`; when every call failed, its ``warning`` says so and a
        :class:`ToolCallsFailedWarning` is issued.

    Raises:
        TypeError / ValueError: an argument of the wrong type (the message names it and
            the shape expected).
        ToolLoopError: the last turn is not an answer (a tool call left in the reasoning
            without ``recover_tool_calls``, a reply cut inside a tool call,
            ``finish_reason="tool_calls"`` with no call), no answer within ``max_rounds``,
            or a failing call with ``on_tool_error="raise"``.
        Any error :func:`chat` raises. Every error raised carries the conversation so far
        as ``.messages``, ``.turns`` and ``.tool_runs``.
    """
    _check_client("run_tool_loop", client)
    _check_tools_mapping(tools)
    if tool_schemas is not None and (
        isinstance(tool_schemas, Mapping)
        or not isinstance(tool_schemas, (list, tuple))
        or not all(isinstance(t, Mapping) and "function" in t for t in tool_schemas)
    ):
        raise TypeError(
            "run_tool_loop: `tool_schemas` must be None or a list of OpenAI function-tool "
            'schemas [{"type": "function", "function": {...}}]; got '
            f"{tool_schemas!r:.100}."
        )
    check_number("run_tool_loop", "max_rounds", max_rounds, integer=True, minimum=1)
    check_number(
        "run_tool_loop", "tool_timeout", tool_timeout, minimum=0, exclusive=True, optional=True
    )
    if on_tool_error not in ("return", "raise"):
        raise ValueError(
            f"run_tool_loop: `on_tool_error`={on_tool_error!r}: use 'return' (send the error "
            "to the model as the tool's result) or 'raise'."
        )
    opts, chat_kwargs = _options_from("run_tool_loop", options, overrides)
    if opts.noise_tolerant:  # weightless mode: a failure on noise text is reported, not raised
        from helpers.chat.noise import noise_tolerant

        with noise_tolerant(True, "tool loop"):
            plain = opts.replace(noise_tolerant=False)
            return run_tool_loop(
                client, model, messages_or_prompt, tools, tool_schemas, plain,
                max_rounds=max_rounds, on_tool_error=on_tool_error, tool_timeout=tool_timeout,
                **chat_kwargs,
            )  # fmt: skip
        return None
    schemas = (
        list(tool_schemas)
        if tool_schemas is not None
        else [tool_schema(f, name=k) for k, f in tools.items()]
    )
    opts = opts.replace(tools=schemas)
    messages = as_messages(messages_or_prompt)
    turns: list[ChatResult] = []
    runs: list[ToolRun] = []

    def stop(text: str, cause: BaseException | None = None) -> ToolLoopError:
        err = ToolLoopError(text, messages, turns, runs)
        err.__cause__ = cause
        return err

    try:
        for _ in range(max_rounds):
            result = chat(client, model, messages, opts, **chat_kwargs)
            turns.append(result)
            messages.append(result.to_message())
            if not result.tool_calls:
                if result.tool_call_in_reasoning:
                    raise stop(
                        "The model's last turn has a tool call inside its unfinished "
                        "reasoning (no </think>), which the server did not return as a tool "
                        "call, so there is no answer. Pass recover_tool_calls=True to run it."
                    )
                if result.truncated_in_tool_call:
                    raise stop(
                        "Truncated inside a tool call: raise max_tokens (no call was run; the "
                        f"fragment: {result.tool_call_fragment[:120]!r})."
                    )
                if result.forced_call_ignored:
                    raise stop(
                        f"The request forced a tool call (tool_choice={opts.tool_choice!r}) and "
                        "the server answered with text instead (vllm-project/vllm #54808), so "
                        "the last turn is neither a call nor the loop's answer; use "
                        "tool_choice='auto'."
                    )
                if result.tool_calls_missing:
                    raise stop(
                        "The server reported finish_reason='tool_calls' but returned no tool "
                        "call, so the last turn is not an answer; retry, or check the "
                        f"server's tool parser (`{TOOL_PARSER_FLAGS}`)."
                    )
                done = ToolLoopResult(messages, result, turns, runs)
                if done.warning:
                    warnings.warn(done.warning, ToolCallsFailedWarning, stacklevel=2)
                return done
            for call in result.tool_calls:
                output, error, fix, cause = _run_call(
                    call, tools, result.finish_reason, tool_timeout
                )
                if error is not None and on_tool_error == "raise":
                    raise stop(f"Tool call failed: {error}. {fix}", cause)
                content = f"Error: {error}" if error is not None else _tool_output_text(output)
                reply = {"role": "tool", "tool_call_id": call.id, "content": content}
                messages.append(reply)
                runs.append(ToolRun(call, output, reply, error))
    except ToolLoopError:
        raise
    except BaseException as e:
        raise _attach_transcript(e, messages, turns, runs)  # noqa: B904 - the same exception, re-raised with the transcript
    raise stop(
        f"The model was still calling tools after max_rounds={max_rounds} turns. Raise "
        "max_rounds, or check the transcript (this error's .messages) for a tool whose "
        "output the model keeps retrying."
    )
