"""The helpers' one HTTP stack for talking to vLLM's own endpoints: ``httpx``, proxies off.

Never through ``$http_proxy`` (``trust_env=False``): a proxy that cannot reach ``127.0.0.1``
would turn a running server into "no answer". One connection per call, closed from our side,
so TIME_WAIT lands on this process, not on the server's port. The chat API goes through the
``openai`` SDK.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One SSL context for every call, with httpx's own default CA bundle (``certifi``):
    building one per client, as httpx does by default, costs ~65 ms of CPU holding the
    GIL on the CPU box (measured here)."""
    import certifi  # httpx's dependency

    return ssl.create_default_context(cafile=certifi.where())


def request(method: str, url: str, *, timeout: float, json_body: Any = None) -> tuple[int, str]:
    """``method url`` -> ``(HTTP status, body text)``; any status comes back, none raises.

    Args:
        method: ``"GET"`` or ``"POST"``.
        url: the full URL, e.g. ``http://127.0.0.1:8000/health``.
        timeout: seconds for connect and for each read.
        json_body: sent as a JSON body (``Content-Type: application/json``) when not None.

    Raises:
        ConnectionError: nothing answered (refused, reset, timed out, bad host); the
            message names the URL and the cause.
    """
    try:
        with httpx.Client(trust_env=False, timeout=timeout, verify=_ssl_context()) as client:
            resp = client.request(method, url, json=json_body)
            return resp.status_code, resp.content.decode("utf-8", errors="replace")
    except httpx.HTTPError as e:
        raise ConnectionError(f"{method} {url} failed: {type(e).__name__}: {e}") from e


def get(url: str, timeout: float = 10.0) -> tuple[int, str]:
    """``GET url`` -> ``(status, body)``; see :func:`request`."""
    return request("GET", url, timeout=timeout)
