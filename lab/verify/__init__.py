"""Check that any OpenAI-compatible endpoint serves this model the way the notebooks need it.

``python -m lab.verify URL`` (or :func:`verify`) runs, against a server it did not start,
the checks the notebooks make of their own server, one line per check with the fix:

- ``model``: ``/v1/models`` lists a model and vLLM's ``max_model_len`` for it;
- ``reasoning on`` / ``reasoning off``: with thinking the reasoning comes back apart from the
  answer (``--reasoning-parser nemotron_v3``), without it none does;
- ``tool call``: a weather question comes back as a parsed ``get_weather`` call
  (``--enable-auto-tool-choice --tool-call-parser qwen3_coder``);
- ``stream``: a streamed greedy answer equals the non-streamed one;
- ``schema``: a JSON-schema answer validates (structured outputs);
- ``budget``: ``thinking_token_budget`` caps the reasoning;
- ``metrics``: ``/metrics`` answers with vLLM's counters;
- ``prefix reuse``: a prompt sent twice, longer than twice the server's reuse unit (its
  ``vllm:cache_config_info``; an MTP, DFlash or DSpark drafter recomputes the last unit of a
  hit), is served from the prefix cache the second time
  (``vllm:prefix_cache_hits_total`` grows); skipped, said so, on a server without prefix caching.

The prompts are ``cookbook/demo.yaml``'s (the stand-in was trained on them); greedy, thinking
off except where a check needs it, ``max_tokens`` 256 per request.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Literal

import pydantic

from helpers.bench.metrics import (
    PREFIX_CACHE_HITS,
    SPEC_DECODE_DRAFTS,
    info_labels,
    parse_prometheus,
    scrape_metrics,
)
from helpers.bench.prefix_floor import prefix_floor
from helpers.chat.display import budget_report
from helpers.chat.parse import check_reply
from helpers.chat.stream import check_stream
from helpers.chat.types import REASONING_PARSER_FLAGS, TOOL_PARSER_FLAGS, ChatResult, _get
from helpers.config.demo import load_demo
from helpers.errors import CookbookError
from helpers.server.endpoint import make_client
from lab.agents.structured import structured_chat

#: The checks, in the order they run (each is described in the module docstring).
CHECKS = (
    "model",
    "reasoning on",
    "reasoning off",
    "tool call",
    "stream",
    "schema",
    "budget",
    "metrics",
    "prefix reuse",
)

#: Tokens per request: room for the stand-in's answers and a real model's short ones.
VERIFY_MAX_TOKENS = 256
#: Seconds the model check waits for ``GET /v1/models``: a live vLLM server answers it from
#: memory (``vllm/entrypoints/openai/models/serving.py``, 0.32.0), so a longer wait is a host
#: that drops packets or a server still starting, never a slow answer.
MODELS_TIMEOUT = 10.0


class Capital(pydantic.BaseModel):
    """The schema check's answer (the agents notebook's)."""

    city: Literal["Tokyo", "Paris", "Other"]
    sure: bool


@dataclasses.dataclass(frozen=True)
class Check:
    """One check's outcome: ``ok`` True (passed), False (failed: ``fix`` says what to change)
    or None (not run: an earlier failure makes it meaningless)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""

    def line(self) -> str:
        """``PASS  name: detail``, ``FAIL  name: detail; fix: ...`` or ``SKIP  name: why``."""
        mark = {True: "PASS", False: "FAIL", None: "SKIP"}[self.ok]
        detail = self.detail.rstrip(".") if self.fix else self.detail
        return f"{mark}  {self.name}: {detail}" + (f"; fix: {self.fix}" if self.fix else "")


class _Skipped(Exception):
    """A check that cannot apply to this server: its reason (the message)."""


class _Failed(Exception):
    """A check that failed: its detail (the message) and the ``fix``."""

    def __init__(self, detail: str, fix: str = ""):
        super().__init__(detail)
        self.fix = fix


def _said(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400]


def _run(name: str, fn) -> Check:
    """``fn() -> detail`` as a passed check; :class:`_Failed` or any error raised (in the
    helpers' words), or a warning the helpers issued, as a failed one."""
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            detail = fn()
    except _Failed as f:
        return Check(name, False, str(f), f.fix)
    except _Skipped as s:
        return Check(name, None, str(s))
    except (CookbookError, ValueError) as exc:
        return Check(name, False, _said(exc), _fix_in(str(exc)))
    except Exception as exc:  # noqa: BLE001 - the SDK's errors: named, never a traceback
        fix = _fix_in(str(exc)) or _status_fix(exc)
        return Check(name, False, f"{type(exc).__name__}: {_said(exc)}", fix)
    if seen:  # passed, yet the helpers warned: say what
        return Check(name, False, _said(seen[0].message), _fix_in(str(seen[0].message)))
    return Check(name, True, detail)


def _status_fix(exc: BaseException) -> str:
    """The fix an HTTP error status points at (the SDK's ``APIStatusError.status_code``)."""
    code = getattr(exc, "status_code", None)
    if code == 401:
        return (f"the server was started with --api-key: pass --api-key KEY (or set "
                f"{API_KEY_ENV}) with that key")  # fmt: skip
    if isinstance(code, int) and code >= 500:
        return ("the server failed on this request: its own log says why (vLLM's \"stack trace "
                "above\" is in the server's log, not here)")  # fmt: skip
    return ""


def _fix_in(text: str) -> str:
    """The flags a failure's words point at (the helpers name them in their sentences)."""
    if "reasoning parser" in text or "reasoning_config" in text or "reasoning-parser" in text:
        return f"serve with {REASONING_PARSER_FLAGS}"
    if "tool" in text and ("parser" in text or "auto-tool-choice" in text or "auto" in text):
        return f"serve with {TOOL_PARSER_FLAGS}"
    return ""


def _cut_short(r: ChatResult, tokens: int) -> str | None:
    """Why reply ``r`` says nothing about the server's flags: it used every one of its
    ``tokens`` (``max_tokens``), so a missing answer, call or reasoning is the budget's, not a
    parser's; None when it ended on its own."""
    if r.finish_reason != "length" and not r.truncated_in_tool_call:
        if r.usage.completion_tokens < tokens:
            return None
    return f"the reply used all max_tokens={tokens} (finish_reason {r.finish_reason!r})"


def _more_tokens(tokens: int) -> str:
    return f"raise --max-tokens (this run: {tokens}; the default, {VERIFY_MAX_TOKENS}, fits the checks)"


def served_max_model_len(listed: Any, model: str) -> int | None:
    """``max_model_len`` (tokens) of ``model`` in a ``GET /v1/models`` answer (the SDK's
    ``client.models.list()``; vLLM's ``ModelCard.max_model_len``,
    ``vllm/entrypoints/openai/models/serving.py``, 0.32.0), or None when it says none."""
    for card in _get(listed, "data") or []:
        if _get(card, "id") == model:
            value = _get(card, "max_model_len")
            return int(value) if isinstance(value, (int, float)) else None
    return None


#: Where the CLI reads a key when ``--api-key`` is not passed (vLLM's ``--api-key`` reads the same).
API_KEY_ENV = "VLLM_API_KEY"


def verify(
    base_url: str,
    model: str | None = None,
    *,
    max_tokens: int = VERIFY_MAX_TOKENS,
    timeout: float = 120,
    api_key: str = "EMPTY",
) -> list[Check]:
    """Run every check against the server at ``base_url`` (``http://host:port``).

    Args:
        base_url: the server's root or ``.../v1``.
        model: the served model name (None: the first ``/v1/models`` lists).
        max_tokens: tokens per request (reasoning included).
        timeout: seconds per request; the model check, first, waits at most
            :data:`MODELS_TIMEOUT` (nothing answering is said then, not after ``timeout``).
        api_key: the key of a server started with ``--api-key`` (any other takes any key).

    Returns:
        One :class:`Check` per name of :data:`CHECKS`, in that order; when ``model``
        fails, the others are skipped.

    Raises:
        ValueError / TypeError: ``base_url`` is not an ``http(s)://`` URL string.
    """
    client = make_client(base_url, api_key=api_key, timeout=timeout)
    demo = load_demo()
    found: dict[str, Any] = {}

    def served() -> str:
        import openai

        wait = min(timeout, MODELS_TIMEOUT)
        try:
            listed = client.with_options(timeout=wait).models.list()
            names = [m.id for m in listed.data]
        except openai.APITimeoutError:
            raise _Failed(f"nothing answered at {client.base_url} within {wait:g} s",
                          "check that the server finished starting (GET /health answers 200), "
                          "the host and the port") from None  # fmt: skip
        except openai.APIConnectionError:
            raise _Failed(f"nothing answers at {client.base_url}",
                          "start the server, or check the host, the port and that it is reachable from here") from None  # fmt: skip
        except openai.NotFoundError:
            raise _Failed(f"{client.base_url}models is not found (HTTP 404): no OpenAI-compatible "
                          "server answers there", "pass the root URL of a vLLM server, http://host:port "
                          "(or .../v1); is something else listening on that port?") from None  # fmt: skip
        except openai.APIStatusError as exc:
            raise _Failed(f"{client.base_url}models answered HTTP {exc.status_code}: {_said(exc)}",
                          _status_fix(exc) or "check the server's log") from None  # fmt: skip
        except (AttributeError, TypeError, ValueError) as exc:  # a page, not the SDK's JSON
            raise _Failed(f"{client.base_url}models did not answer with a model list ({type(exc).__name__}): "
                          "no OpenAI-compatible server answers there (a proxy or login page?)",
                          "pass the root URL of a vLLM server, http://host:port (or .../v1)") from None  # fmt: skip
        if not names:
            raise _Failed("/v1/models lists no model", "start vLLM with the model")
        found["model"] = model or names[0]
        if found["model"] not in names:
            raise _Failed(f"{model!r} is not served (served: {names})", f"pass one of {names}")
        limit = served_max_model_len(listed, found["model"])
        if limit is None:
            raise _Failed(
                f"{found['model']}: /v1/models gives no max_model_len",
                "this is not a vLLM server, or not one the helpers know",
            )
        found["limit"] = limit
        return f"{found['model']}, max_model_len {limit:,} tokens"

    checks = [_run("model", served)]
    if not checks[0].ok:
        return checks + [Check(n, None, "the model check failed") for n in CHECKS[1:]]
    if max_tokens >= found["limit"]:  # every request would get the same 400: said once
        said = (f"--max-tokens {max_tokens:,} leaves no room for a prompt in max_model_len "
                f"{found['limit']:,}")  # fmt: skip
        checks[0] = Check("model", False, said, f"pass --max-tokens below {found['limit']:,} "
                          f"(the default, {VERIFY_MAX_TOKENS}, fits the checks)")  # fmt: skip
        return checks + [Check(n, None, "the model check failed") for n in CHECKS[1:]]
    name = found["model"]
    off = {"chat_template_kwargs": {"enable_thinking": False}}

    def ask(prompt: str, *, stream: bool = False, **create: Any) -> ChatResult:
        """One greedy request, checked: the SDK's call, then the helpers' reply checker."""
        reply = client.chat.completions.create(
            model=name, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
            temperature=0.0, top_p=1.0, **create,
            **({"stream": True, "stream_options": {"include_usage": True}} if stream else {}),
        )  # fmt: skip
        asked = {k: create[k] for k in ("tools", "extra_body") if k in create}
        if stream:
            return check_stream(reply, max_tokens=max_tokens, **asked)
        return check_reply(reply, max_tokens=max_tokens, **asked)

    def reasoning_on() -> str:
        r = ask(demo["reasoning"]["prompt"])
        if not r.reasoning and (cut := _cut_short(r, max_tokens)):
            raise _Failed(f"no reasoning came back: {cut}", _more_tokens(max_tokens))
        if not r.reasoning:
            raise _Failed(
                "no reasoning came back apart from the answer",
                f"serve with {REASONING_PARSER_FLAGS}",
            )
        return f"{len(r.reasoning)} characters of reasoning, then {len(r.content)} of answer"

    def reasoning_off() -> str:
        r = ask(demo["reasoning"]["prompt"], extra_body=off)
        if r.reasoning:
            raise _Failed(
                "reasoning came back with thinking off",
                "the chat template must honour enable_thinking=False",
            )
        return f"an answer of {len(r.content)} characters, no reasoning"

    def tool_call() -> str:
        prompt = demo["weather"]["prompt"].format(city="Santa Clara")
        r = ask(prompt, tools=demo["tools"][:1], extra_body=off)
        calls = [c for c in r.tool_calls if c.name == "get_weather"]
        if not calls and (cut := _cut_short(r, max_tokens)):
            raise _Failed(f"no get_weather call came back whole: {cut}", _more_tokens(max_tokens))
        if not calls:
            raise _Failed(
                f"no get_weather call parsed (finish_reason {r.finish_reason!r})",
                f"serve with {TOOL_PARSER_FLAGS}",
            )
        return f"get_weather({calls[0].arguments})"

    def streamed() -> str:
        prompt = demo["streaming"]["prompt"]
        whole = ask(prompt, extra_body=off)
        parts = ask(prompt, extra_body=off, stream=True)
        if (whole.content, whole.reasoning) != (parts.content, parts.reasoning):
            raise _Failed(
                "the streamed greedy answer differs from the non-streamed one",
                "compare the two with the same seed; a router or proxy may rewrite streams",
            )
        return (
            f"streamed and non-streamed greedy answers equal ({len(whole.content)} characters, "
            f"{parts.usage.completion_tokens} tokens of max_tokens {max_tokens})"
        )

    def schema() -> str:
        prompt = demo["structured"]["prompt"]
        return repr(
            structured_chat(client, name, prompt, Capital, thinking=False, max_tokens=max_tokens,
                            temperature=0.0, top_p=1.0).value
        )  # fmt: skip

    def budget() -> str:
        n = int(demo["budget"]["thinking_token_budget"])
        r = ask(demo["budget"]["prompt"], extra_body={"thinking_token_budget": n})
        said = budget_report(r, n)
        if said.startswith("UNEXPECTED") and _cut_short(r, max_tokens):
            raise _Failed(said, f"{_more_tokens(max_tokens)}: the budget, {n}, leaves no room")
        if said.startswith("UNEXPECTED"):
            raise _Failed(said, _fix_in(said) or "see the line above")
        return said

    def metrics() -> str:
        text = scrape_metrics(base_url)
        if "vllm:" not in text:
            raise _Failed(
                "/metrics answers without vLLM's counters",
                "expose vLLM's /metrics (a router in front may hide it)",
            )
        return (
            f"/metrics: {sum(line.startswith('vllm:') for line in text.splitlines())} vLLM samples"
        )

    def prefix_reuse() -> str:
        text = scrape_metrics(base_url)
        drafts = SPEC_DECODE_DRAFTS in text  # /metrics does not name the drafter
        floor = prefix_floor(info_labels(text), drafter=drafts)
        if not floor.enabled or not floor.floor:
            raise _Skipped(floor.sentence)
        said = floor.sentence + (
            f" (this server drafts, {SPEC_DECODE_DRAFTS}: counted as MTP, DFlash or DSpark; "
            f"an n-gram drafter's hits need {floor.unit:,} tokens)" if drafts else ""
        )  # fmt: skip

        def hits() -> float:
            return parse_prometheus(scrape_metrics(base_url)).get(PREFIX_CACHE_HITS, 0.0)

        # past two units: a hit with or without an MTP / DFlash / DSpark drafter
        words = 2 * floor.unit  # at least a token each
        for _ in range(3):
            prompt = "Repeat nothing. " + " ".join(f"part {i}," for i in range(words))
            first = client.chat.completions.create(
                model=name,
                messages=[{"role": "user", "content": prompt}],
                max_tokens=1,
                temperature=0.0,
            )
            tokens = int(first.usage.prompt_tokens) if first.usage else 0
            if tokens > 2 * floor.unit:
                break
            words *= 2
        before = hits()
        client.chat.completions.create(
            model=name,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=1,
            temperature=0.0,
        )
        reused = hits() - before
        if reused <= 0:
            raise _Failed(
                f"a {tokens:,}-token prompt sent twice reused nothing ({said})",
                "check --enable-prefix-caching, and for this hybrid model --mamba-cache-mode align",
            )
        return f"a {tokens:,}-token prompt sent twice reused {reused:,.0f} tokens ({said})"

    later = (
        reasoning_on,
        reasoning_off,
        tool_call,
        streamed,
        schema,
        budget,
        metrics,
        prefix_reuse,
    )
    checks += [_run(n, fn) for n, fn in zip(CHECKS[1:], later, strict=True)]
    return checks
