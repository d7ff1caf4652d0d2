"""The settings and the body of one chat request to vLLM, and the argument checks at the
boundary (a wrong argument gets one sentence naming it and the shape expected).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from helpers.config.run import GPU_MAX_TOKENS, GPU_TEMPERATURE, GPU_TOP_P, run_of
from helpers.errors import check_number

# Sampling and length defaults: seed 004 (helpers.config.run, where every mode's are).
DEFAULT_MAX_TOKENS = GPU_MAX_TOKENS

# The string values of `tool_choice` vLLM 0.32 accepts (besides a named function).
_TOOL_CHOICES = ("none", "auto", "required")


@dataclass(frozen=True)
class ChatOptions:
    """The sampling, reasoning and tool settings of chat requests, checked once, when made;
    ``chat``, ``stream_chat`` and ``run_tool_loop`` take one as ``options``, and their keywords
    override its fields: ``chat(llm, model, "prompt", opts, thinking=False)``.

    Attributes:
        thinking: reasoning on (default, as the model card) or off; sent as
            ``chat_template_kwargs.enable_thinking`` (seed 004).
        max_tokens: cap on reasoning + answer tokens together (tokens, >= 1). ``None``:
            ``chat`` fits seed 004's 16000 to the server's ``max_model_len``.
        reasoning_budget: cap on reasoning tokens (tokens, >= 0, below ``max_tokens``; None:
            none), sent as vLLM's ``thinking_token_budget`` (vLLM >= 0.32,
            ``--reasoning-parser``) or done in two requests (``budget_method="two_pass"``).
        temperature: sampling temperature, >= 0 (0 decodes greedily); seed 004's 1.0.
        top_p: the probability mass sampled from, in (0, 1] (1.0 keeps every token);
            seed 004's 0.95.
        tools: OpenAI function-tool schemas, ``[{"type": "function", "function": {...}}]``
            (:func:`~helpers.chat.tools.tool_schema` builds one), or ``None``.
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "function",
            "function": {"name": ...}}``; ``None`` sends none (the server's ``"auto"``).
        force_nonempty_content: sent as ``chat_template_kwargs.force_nonempty_content``;
            seed 004 advises it for coding agents.
        recover_tool_calls: a complete tool call at the end of unfinished reasoning
            becomes a tool call (off: a ``ToolCallInReasoningWarning`` only). Not sent.
        noise_tolerant: weightless mode: a turn that fails on noise text prints what failed
            and returns None (:func:`helpers.chat.noise.noise_tolerant`). Not sent.

    Raises:
        TypeError: a field of the wrong type (the message names it and the shape expected).
        ValueError: ``max_tokens`` < 1, ``reasoning_budget`` < 0 or not below
            ``max_tokens``, ``temperature`` < 0, ``top_p`` outside (0, 1], or a
            ``tool_choice`` string vLLM does not know.
    """

    thinking: bool = True
    max_tokens: int | None = None
    reasoning_budget: int | None = None
    temperature: float = GPU_TEMPERATURE
    top_p: float = GPU_TOP_P
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    force_nonempty_content: bool = False
    recover_tool_calls: bool = False
    noise_tolerant: bool = False

    def __post_init__(self) -> None:
        fn = "ChatOptions"
        for name in ("thinking", "force_nonempty_content", "recover_tool_calls", "noise_tolerant"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"{fn}: `{name}` must be True or False; got {value!r:.60}.")
        check_number(fn, "max_tokens", self.max_tokens, integer=True, minimum=1, optional=True)
        check_number(
            fn, "reasoning_budget", self.reasoning_budget, integer=True, minimum=0, optional=True
        )
        check_number(fn, "temperature", self.temperature, minimum=0)
        check_number(fn, "top_p", self.top_p, minimum=0, exclusive=True)
        if self.top_p > 1:
            raise ValueError(
                f"{fn}: `top_p`={self.top_p!r} must be <= 1 (the probability mass sampled "
                "from; 1.0 keeps every token)."
            )
        tools = self.tools
        if tools is not None and (
            isinstance(tools, Mapping)
            or not isinstance(tools, (list, tuple))
            or not all(isinstance(t, Mapping) and "function" in t for t in tools)
        ):
            raise TypeError(
                f"{fn}: `tools` must be a list of OpenAI function-tool schemas "
                '([{"type": "function", "function": {...}}], e.g. [tool_schema(fn)]); got '
                f"{tools!r:.100}. To let the model call Python functions, use "
                "run_tool_loop(client, model, prompt, {name: function})."
            )
        choice = self.tool_choice
        if choice is not None and not (
            choice in _TOOL_CHOICES if isinstance(choice, str) else isinstance(choice, Mapping)
        ):
            shape = ", ".join(repr(c) for c in _TOOL_CHOICES)
            problem = ValueError if isinstance(choice, str) else TypeError
            raise problem(
                f"{fn}: `tool_choice` must be None, {shape} or "
                '{"type": "function", "function": {"name": ...}}; got '
                f"{choice!r:.60}."
            )
        budget, cap = self.reasoning_budget, self.max_tokens
        if budget is not None and cap is not None and budget >= cap:
            raise ValueError(
                f"{fn}: reasoning_budget={budget} is not below max_tokens={cap}: reasoning "
                "tokens count against max_tokens, so leave room for the answer (raise "
                "max_tokens or lower the budget)."
            )

    @property
    def forces_tool_call(self) -> bool:
        """The request forces a tool call: tools offered with ``tool_choice="required"`` or a
        named tool."""
        return bool(self.tools) and (
            self.tool_choice == "required" or isinstance(self.tool_choice, Mapping)
        )

    def replace(self, **changes: Any) -> ChatOptions:
        """A copy with ``changes`` applied, checked as a new one is:
        ``opts.replace(thinking=False, max_tokens=256)``.

        Raises:
            TypeError: a name that is not a field (the message lists the fields), or a
                value of the wrong type.
            ValueError: a value out of range (see the class).
        """
        unknown = sorted(set(changes) - _FIELDS)
        if unknown:
            raise TypeError(
                f"ChatOptions.replace: {', '.join(map(repr, unknown))} "
                f"{'is not a field' if len(unknown) == 1 else 'are not fields'}; the fields "
                f"are {', '.join(f.name for f in dataclasses.fields(self))}."
            )
        return dataclasses.replace(self, **changes)

    @classmethod
    def for_run(
        cls,
        run: Any,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
    ) -> ChatOptions:
        """The notebooks' settings for this run; a value given (not ``None``) wins.

        - On a GPU: temperature 1.0, top_p 0.95 (seed 004: "Recommended sampling settings
          are a temperature of 1.0 and top_p of 0.95"), ``max_tokens`` 16000 (every example
          in seed 004; reasoning tokens count toward it, seed 001).
        - The CPU stand-in: greedy (temperature 0.0, top_p 1.0: its demo answers are stable
          only there), ``max_tokens`` 1024 (its ``max_model_len`` is 2048).
        - Weightless mode: ``max_tokens`` 256 (the text is noise: the time goes to the
          benchmark), GPU sampling, and ``noise_tolerant``.

        Args:
            run: the server (``srv``: its ``srv.run``), or a :class:`helpers.config.run.Run`
                (:func:`helpers.config.run.run_of`); its ``max_tokens`` is the default here.
            max_tokens, temperature, top_p: explicit values (e.g. notebook parameters),
                checked as in the class.

        Raises:
            TypeError: ``run`` is None; a value of the wrong type (see the class).
            ValueError: a value out of range (see the class).
        """
        r = run_of(run, "ChatOptions.for_run")
        d = r.defaults
        if max_tokens is None:
            max_tokens = r.max_tokens
        return cls(
            max_tokens=d.max_tokens if max_tokens is None else max_tokens,
            temperature=d.temperature if temperature is None else temperature,
            top_p=d.top_p if top_p is None else top_p,
            noise_tolerant=d.noise,
        )


_FIELDS = frozenset(f.name for f in dataclasses.fields(ChatOptions))
_DEFAULT_OPTIONS = ChatOptions()


def _options_from(
    fn: str, options: Any, overrides: Mapping[str, Any]
) -> tuple[ChatOptions, dict[str, Any]]:
    """``(options, None: the defaults, with the ChatOptions fields among overrides applied,
    the other keywords)``; a wrong value raises as :class:`ChatOptions` does, naming ``fn``."""
    if options is None:
        options = _DEFAULT_OPTIONS
    elif not isinstance(options, ChatOptions):
        hint = (
            " A dict of settings goes in as ChatOptions(**settings), or as keywords (**settings)."
            if isinstance(options, Mapping)
            else ""
        )
        raise TypeError(
            f"{fn}: `options` must be a ChatOptions (e.g. ChatOptions(max_tokens=1024, "
            f"temperature=0.0)) or None; got {type(options).__name__} {options!r:.60}.{hint}"
        )
    changes = {k: v for k, v in overrides.items() if k in _FIELDS}
    rest = {k: v for k, v in overrides.items() if k not in _FIELDS}
    if changes:
        try:
            options = options.replace(**changes)
        except (TypeError, ValueError) as e:
            text = str(e)
            if not text.startswith("ChatOptions: "):
                raise
            raise type(e)(f"{fn}: {text[len('ChatOptions: ') :]}") from None
    return options, rest


def as_messages(messages_or_prompt: str | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A prompt string becomes ``[{"role": "user", "content": prompt}]``; a list is copied.

    Raises:
        TypeError: neither a string nor a list of ``{"role": ..., "content": ...}`` dicts.
    """
    if isinstance(messages_or_prompt, str):
        return [{"role": "user", "content": messages_or_prompt}]
    shape = (
        "`messages_or_prompt` must be a prompt string or a list of message dicts like "
        '[{"role": "user", "content": "..."}]'
    )
    if isinstance(messages_or_prompt, (Mapping, bytes)) or not isinstance(
        messages_or_prompt, Iterable
    ):
        raise TypeError(f"{shape}; got {type(messages_or_prompt).__name__}.")
    out = []
    for i, m in enumerate(messages_or_prompt):
        if not isinstance(m, Mapping) or "role" not in m:
            raise TypeError(f"{shape}; item {i} is {m!r:.80}.")
        out.append(dict(m))
    return out


# ─── argument checks at the boundary (each names the argument and the shape) ─────────


def _check_client(fn: str, client: Any) -> None:
    if isinstance(client, str):
        raise TypeError(
            f"{fn}: `client` must be an OpenAI client, not the URL string {client!r}: pass "
            "helpers.server.endpoint.make_client(url)."
        )
    if not hasattr(getattr(client, "chat", None), "completions"):
        raise TypeError(
            f"{fn}: `client` must be an openai.OpenAI client (helpers.server.endpoint.make_client(url) "
            f"or srv.client()); got {type(client).__name__}."
        )


def _check_model(fn: str, model: Any) -> None:
    if not isinstance(model, str) or not model:
        raise TypeError(
            f"{fn}: `model` must be the served model name (a string, e.g. srv.models()[0]); got "
            f"{type(model).__name__} {model!r:.60}."
        )


def build_request(
    model: str,
    messages_or_prompt: str | Iterable[Mapping[str, Any]],
    options: ChatOptions,
    *,
    stream: bool = False,
    extra_body: Mapping[str, Any] | None = None,
    **create_kwargs: Any,
) -> dict[str, Any]:
    """The keyword arguments :func:`~helpers.chat.completions.chat` passes to
    ``client.chat.completions.create``.

    Args:
        model: the served model name.
        messages_or_prompt: a prompt string or OpenAI-format messages (:func:`as_messages`).
        options: the request's settings. ``thinking`` and ``force_nonempty_content`` go in
            ``extra_body.chat_template_kwargs``, ``reasoning_budget`` in
            ``extra_body.thinking_token_budget``; ``max_tokens`` (``None`` sends none),
            ``tools`` and ``tool_choice`` as they are, when set.
        stream: adds ``stream=True`` and ``stream_options.include_usage`` (usage arrives in
            a last chunk with no choices).
        extra_body: more vLLM request fields (``top_k``, ``min_p``...); its
            ``chat_template_kwargs`` are merged with the ones set here.
        **create_kwargs: other SDK arguments (``seed``, ``stop``, ``n``...), set last.

    Returns:
        ``{"model", "messages", "temperature", "top_p"[, "max_tokens"][, "tools"]
        [, "tool_choice"][, "stream", "stream_options"], **create_kwargs, "extra_body"}``.

    Raises:
        TypeError: ``options`` is not a :class:`ChatOptions`, one of its fields given as a
            keyword, or ``messages_or_prompt`` of the wrong shape.
    """
    if not isinstance(options, ChatOptions):
        raise TypeError(
            "build_request: `options` must be a ChatOptions (e.g. ChatOptions(max_tokens=1024)); "
            f"got {type(options).__name__} {options!r:.60}."
        )
    fields = sorted(set(create_kwargs) & _FIELDS)
    if fields:
        changes = ", ".join(f"{k}=..." for k in fields)
        raise TypeError(
            f"build_request: {', '.join(map(repr, fields))} belong in `options`: pass "
            f"options.replace({changes})."
        )
    body: dict[str, Any] = dict(extra_body or {})
    template_kwargs = dict(body.pop("chat_template_kwargs", None) or {})
    template_kwargs["enable_thinking"] = options.thinking
    if options.force_nonempty_content:
        template_kwargs["force_nonempty_content"] = True
    body["chat_template_kwargs"] = template_kwargs
    if options.reasoning_budget is not None:
        body["thinking_token_budget"] = options.reasoning_budget

    kwargs: dict[str, Any] = {
        "model": model,
        "messages": as_messages(messages_or_prompt),
        "temperature": options.temperature,
        "top_p": options.top_p,
    }
    if options.max_tokens is not None:
        kwargs["max_tokens"] = options.max_tokens
    if options.tools:
        kwargs["tools"] = options.tools
    if options.tool_choice is not None:
        kwargs["tool_choice"] = options.tool_choice
    if stream:
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
    kwargs.update(create_kwargs)
    kwargs["extra_body"] = body
    return kwargs
