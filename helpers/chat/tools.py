"""Tools for the model to call: :func:`tool_schema` (an OpenAI function-tool schema from a
Python signature) and :func:`call_tool` (run one call the model asked for and word what the
``tool`` message sends back, errors included). The loop itself (the request, the assistant
turn, one ``{"role": "tool", "tool_call_id": ...}`` message per call, the next request) is
the SDK's and stays in the notebook cell.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any

from helpers.chat.types import ToolCall
from helpers.errors import check_number

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
        name: the tool's name (default ``fn.__name__``; pass the key the function is
            registered under in the ``tools`` dict of :func:`call_tool` when they differ, e.g.
            for a lambda).

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


def _tool_output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


class _ToolTimeout(TimeoutError):
    """A call that outran ``timeout`` (not a TimeoutError the tool raised itself)."""


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
            f"did not return within timeout={timeout:g} s; "
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
    call: ToolCall, tools: Mapping[str, Callable[..., Any]], timeout: float | None = None
) -> tuple[Any, str | None]:
    """Run one call (within ``timeout`` seconds when given): ``(output, None)`` or
    ``(None, what failed)``."""
    fn = tools.get(call.name)
    if fn is None:
        return None, f"no tool named {call.name!r}; the tools are {sorted(tools)}"
    if call.error is not None:
        return None, (
            f"the arguments for {call.name} cannot be used: {call.error}; raw arguments: "
            f"{call.raw_arguments!r}"
        )
    try:
        inspect.signature(fn).bind(**call.arguments)
    except TypeError as e:
        return (
            None,
            f"{call.name}({call.raw_arguments}) does not fit the function's signature ({e})",
        )
    except ValueError:  # no signature (some builtins): just call it
        pass
    try:
        return _call_within(fn, call.arguments, timeout), None
    except _ToolTimeout as e:
        return None, f"{call.name} {e}"
    except Exception as e:
        return None, f"{call.name} raised {type(e).__name__}: {e}"


def call_tool(
    tools: Mapping[str, Callable[..., Any]], call: Any, *, timeout: float | None = None
) -> str:
    """Run one tool call the model asked for and return the ``content`` of the ``tool`` message
    that answers it: the function's result (a string as it is, anything else as JSON), or
    ``"Error: ..."`` saying what failed, so the model can correct itself (an unknown tool,
    arguments that are not a JSON object or do not fit the signature, the function raised, or
    it outran ``timeout``). It never raises for the call's sake.

    Args:
        tools: ``{name: function}``; the model calls each function by its key.
        call: a call of a checked reply (``show(reply, tools=...).tool_calls``: its arguments
            fitted to the schema, :mod:`helpers.chat.toolargs`), or the SDK's own
            ``message.tool_calls`` entry (arguments decoded as sent).
        timeout: seconds the function may take (None: no limit); one still running then is
            stopped (``KeyboardInterrupt`` in its thread) and the call fails like one that
            raised.

    Raises:
        TypeError: ``tools`` is not ``{name: callable}``, or ``call`` is not a tool call.
        ValueError: ``timeout`` is not above 0.
    """
    if not isinstance(tools, Mapping) or not all(
        isinstance(k, str) and callable(f) for k, f in tools.items()
    ):
        raise TypeError(
            "call_tool: `tools` must be a dict {name: function}, e.g. "
            f"{{'get_weather': get_weather}}; got {tools!r:.80}."
        )
    check_number("call_tool", "timeout", timeout, minimum=0, exclusive=True, optional=True)
    if not isinstance(call, ToolCall):
        fn = getattr(call, "function", None)
        if fn is None or not hasattr(fn, "name"):
            raise TypeError(
                "call_tool: `call` must be a tool call of the reply (turn.tool_calls[i], or the "
                f"SDK's message.tool_calls[i]); got {type(call).__name__}."
            )
        call = ToolCall.from_raw(getattr(call, "id", None), fn.name, fn.arguments)
    output, error = _run_call(call, tools, timeout)
    return f"Error: {error}" if error is not None else _tool_output_text(output)
