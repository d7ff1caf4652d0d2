"""One request through an SDK (``openai`` or ``anthropic``) with its errors said in one
sentence naming the URL and the fix: the lab's API helpers (:mod:`lab.agents.apis`,
:mod:`lab.agents.structured`) send through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helpers.chat.types import _client_url
from helpers.errors import ResponseError, ServerConnectionError, ServerRequestError
from lab.agents.request_failure import describe_server_error, error_words


def send(
    sdk: Any,
    client: Any,
    create: Any,
    path: str,
    kwargs: dict[str, Any],
    *,
    refused: Callable[[Exception], Exception | None] | None = None,
) -> Any:
    """``create(**kwargs)``, with the SDK's errors (``openai`` or ``anthropic``) said in one
    sentence naming the URL and the fix.

    Raises:
        ServerConnectionError: nothing answers ``client.base_url`` (or not in time).
        ServerRequestError: the server failed ``POST path`` (HTTP 5xx: its words and log).
        ResponseError: the server refused ``POST path`` (its status and words), unless
            ``refused`` (called with the SDK's 4xx error) returns the error to raise instead.
    """
    try:
        return create(**kwargs)
    except sdk.APITimeoutError:
        raise ServerConnectionError(
            f"The server at {_client_url(client)} did not answer POST {path} within the "
            "client's timeout: it may be overloaded or stalled; check its log, or pass a larger "
            "timeout to the client."
        ) from None
    except sdk.APIConnectionError as e:
        raise ServerConnectionError(
            f"No vLLM server answers {_client_url(client)} (POST {path} failed: "
            f"{e.__cause__ or e}): start one (launch_server(cfg)) or check the URL and port."
        ) from None
    except sdk.APIStatusError as e:
        own = refused(e) if refused is not None else None
        if own is not None:
            raise own from None
        if e.status_code >= 500 and e.status_code != 501:
            said = describe_server_error(_client_url(client), f"POST {path}", e.status_code, e)
            raise ServerRequestError(said) from None
        raise ResponseError(
            f"The server refused POST {path} (HTTP {e.status_code}): {error_words(e)}"
        ) from None
