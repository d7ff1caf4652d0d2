"""A vLLM OpenAI-compatible server at an address: what it serves, asked over HTTP.

:class:`ServerEndpoint` is the part of a server handle that needs only ``host`` and ``port``,
the same for a server we launched (:class:`helpers.server.vllm_server.VLLMServer`) and one
someone else runs (:class:`lab.fleet.router.RouterServer` builds on it too).
"""

from __future__ import annotations

import json
import re
from typing import Any

from helpers.errors import CookbookError, check_number
from helpers.server import httpio
from helpers.server.processes import connect_host

#: The flags behind each feature a notebook step may need (seed 004: "launched with
#: appropriate parsers"; the registry's `features`).
_FEATURE_FLAGS = {
    "reasoning": "--reasoning-parser",
    "tool_calling": "--enable-auto-tool-choice --tool-call-parser",
}


class ServerEndpoint:
    """A server at ``host``:``port`` (``port`` None until known), spoken to over HTTP.

    Subclasses set :attr:`host` and :attr:`port`; :attr:`_scheme` is ``http`` unless an
    attached URL said ``https``.
    """

    host: str = "127.0.0.1"
    port: int | None = None
    _scheme: str = "http"
    _served_cache: dict[str, Any] | None = None  # GET /v1/models' first entry, asked once
    _probed: tuple[str, ...] | None = None  # probe_features(), asked once

    @property
    def url(self) -> str:
        """Server root, ``http://host:port`` (for ``/health``, ``/metrics``)."""
        if self.port is None:
            raise CookbookError("The server has no port yet: call start() first.")
        return f"{self._scheme}://{connect_host(self.host)}:{self.port}"

    @property
    def base_url(self) -> str:
        """OpenAI API base, ``http://host:port/v1``."""
        return f"{self.url}/v1"

    def client(self, **kwargs):
        """An ``openai.OpenAI`` client for this server (kwargs: ``helpers.server.endpoint.make_client``)."""
        return make_client(self.base_url, **kwargs)

    def models(self) -> list[str]:
        """Model ids the server serves (``GET /v1/models``), e.g. ``["nemotron-3.5-lightning"]``."""
        status, body = self._get("/v1/models", timeout=10)
        if status != 200:
            raise CookbookError(
                f"{self.url}/v1/models answered HTTP {status}: {body[:200]}; check the server log."
            )
        data = json.loads(body)
        return [m["id"] for m in data.get("data", [])]

    def served_model(self) -> dict[str, Any]:
        """The first entry of ``GET /v1/models`` (vLLM's ``ModelCard``): ``id`` (the served
        name), ``root`` (the hub id or folder vLLM loaded), ``max_model_len`` (tokens).

        Raises:
            CookbookError: the server answers no model.
        """
        status, body = self._get("/v1/models", timeout=10)
        data = json.loads(body).get("data", []) if status == 200 else []
        if not data:
            raise CookbookError(
                f"{self.url}/v1/models lists no model (HTTP {status}); check the server."
            )
        return dict(data[0])

    def probe_features(self, model: str | None = None, timeout: float = 60.0) -> tuple[str, ...]:
        """Which of the cookbook's features (``reasoning``, ``tool_calling``) this server
        runs with, asked with two 4-token chat requests (``timeout`` in seconds each).

        * ``tool_calling``: a tool with ``tool_choice="auto"``; without the flags vLLM answers
          HTTP 400 (vllm/entrypoints/openai/chat_completion).
        * ``reasoning``: thinking on; with ``--reasoning-parser`` the tokens come back in
          ``message.reasoning`` (``reasoning_content`` before vLLM 0.32).
        """
        model = model or self.served_model()["id"]
        base = {
            "model": model,
            "max_tokens": 4,
            "temperature": 0,
            "messages": [{"role": "user", "content": "Hi"}],
            "chat_template_kwargs": {"enable_thinking": True},
        }
        feats: list[str] = []
        chat = self.url + "/v1/chat/completions"
        status, body = httpio.request("POST", chat, timeout=timeout, json_body=base)
        if status == 200:
            msg = (json.loads(body).get("choices") or [{}])[0].get("message") or {}
            if msg.get("reasoning") or msg.get("reasoning_content"):
                feats.append("reasoning")
        empty = {"type": "object", "properties": {}}
        noop = {"name": "noop", "description": "no-op", "parameters": empty}
        tool = {"type": "function", "function": noop}
        with_tool = {**base, "tools": [tool], "tool_choice": "auto"}
        status, body = httpio.request("POST", chat, timeout=timeout, json_body=with_tool)
        if status == 200:
            feats.append("tool_calling")
        return tuple(feats)

    # ---- what is served: from the config we launched, else asked from the server ------
    @property
    def model_name(self) -> str:
        """The served model name requests use: the launched config's ``served_model_name``,
        or (a server we attached to) the first id of ``GET /v1/models``."""
        cfg = getattr(self, "config", None)
        name = getattr(cfg, "served_model_name", None) if cfg is not None else None
        return name or self._served()["id"]

    @property
    def features(self) -> tuple[str, ...]:
        """The cookbook features this server runs with (``reasoning``, ``tool_calling``):
        the launched config's, or :meth:`probe_features` once for a server we attached to."""
        cfg = getattr(self, "config", None)
        if cfg is not None and getattr(cfg, "features", None) is not None:
            return tuple(cfg.features)
        if self._probed is None:
            self._probed = self.probe_features(self.model_name)
        return self._probed

    def serves(self, feature: str, needed_by: str) -> bool:
        """True when the server runs with ``feature`` (and its config asks for it); else print
        which flags are missing and that ``needed_by`` (a step's name) skips, and return False.

        Raises:
            CookbookError: ``feature`` is not ``reasoning`` or ``tool_calling``.
        """
        if feature not in _FEATURE_FLAGS:
            raise CookbookError(
                f"Unknown feature {feature!r}: pass one of {', '.join(_FEATURE_FLAGS)}."
            )
        # the config the notebook resolved (an attached server's `intended`) decides too: a
        # target whose command lacks the flags skips the step even where a server has them
        cfg = getattr(self, "intended", None) or getattr(self, "config", None)
        wanted = cfg is None or getattr(cfg, "features", None) is None or feature in cfg.features
        if wanted and feature in self.features:
            return True
        flags, who = _FEATURE_FLAGS[feature], getattr(cfg, "label", None)  # wanted: attached
        fix = (f"restart it with {flags}" + (f" as in {who}'s command (step 1 prints it)" if who else "")
               if wanted else f"add the {feature!r} feature: resolve(target, features=[..., {feature!r}])")  # fmt: skip
        print(f"skipped: {f'the server at {self.url}' if wanted else who} serves without {flags}, "
              f"which {needed_by} needs ({fix})")  # fmt: skip
        return False

    def _served(self) -> dict[str, Any]:
        if self._served_cache is None:
            self._served_cache = self.served_model()
        return self._served_cache

    def _get(self, path: str, timeout: float = 2.0) -> tuple[int, str]:
        """``GET path`` -> (status, body) (:func:`helpers.server.httpio.request`).

        Raises:
            ConnectionError: nothing answered.
        """
        return httpio.get(self.url + path, timeout=timeout)

    def healthy(self) -> bool:
        """``GET /health`` answers 200 now."""
        if self.port is None:
            return False
        try:
            return self._get("/health")[0] == 200
        except OSError:
            return False


def server_root(base_url: str) -> str:
    """The server root for ``/metrics``, ``/health``, ``/version`` and ``vllm bench serve --base-url``.

    Args:
        base_url: ``http://host:port`` or the OpenAI base ``http://host:port/v1``.
    """
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def make_client(base_url: str, api_key: str = "EMPTY", timeout: float = 600, max_retries: int = 0):
    """An ``openai.OpenAI`` client for a vLLM server.

    Args:
        base_url: ``http://host:port`` or ``http://host:port/v1`` (``/v1`` is added if
            missing).
        api_key: vLLM accepts any key unless launched with ``--api-key`` (seed 004 uses
            ``"EMPTY"``).
        timeout: seconds per HTTP request; reasoning at 16k tokens on a slow box is long.
        max_retries: SDK retries; 0 so a failing server shows its error at once.

    Raises:
        TypeError: ``base_url`` is not a string (e.g. a server object: pass
            ``srv.base_url``).
        ValueError: ``base_url`` is not an ``http(s)://`` URL.
    """
    import openai

    if not isinstance(base_url, str):
        hint = " (pass srv.base_url)" if hasattr(base_url, "base_url") else ""
        raise TypeError(
            f"make_client: `base_url` must be a URL string like 'http://127.0.0.1:8000'; got "
            f"{type(base_url).__name__}{hint}."
        )
    if not re.match(r"^https?://[^/\s]+", base_url.strip()):
        raise ValueError(
            f"make_client: `base_url`={base_url!r} is not a server URL: pass http://host:port "
            "(or http://host:port/v1)."
        )
    check_number("make_client", "timeout", timeout, minimum=0, exclusive=True)
    url = base_url.strip().rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    return openai.OpenAI(base_url=url, api_key=api_key, timeout=timeout, max_retries=max_retries)
