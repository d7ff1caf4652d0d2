"""Chat cells on noise text (weightless mode): report what failed instead of raising."""

from __future__ import annotations

import contextlib

from helpers.errors import CookbookError, ServerConnectionError, ServerRequestError

#: What a chat cell may raise when the model's text is noise (weightless mode): the checker's
#: ResponseError (tool-call markup the parser did not take), a schema answer that does not
#: validate (the lab's StructuredOutputError), a parsed value of the wrong type.
NOISE_ERRORS = (CookbookError, TypeError, ValueError, KeyError)


@contextlib.contextmanager
def noise_tolerant(noise: bool, what: str):
    """Run a chat / tool cell; when the text is noise (``noise``: weightless mode, random
    weights) print what failed instead of raising :data:`NOISE_ERRORS`. A server that failed
    (HTTP 5xx) or is gone raises whatever the weights; ``noise=False`` changes nothing.

    Example::

        with noise_tolerant(srv.run.noise, "schema answer"):
            structured_chat(llm, model, prompt, Answer, max_tokens=256)
    """
    if not noise:
        yield
        return
    try:
        yield
    except (ServerRequestError, ServerConnectionError):
        raise  # the server failed or is gone: not noise, whatever the weights
    except NOISE_ERRORS as exc:
        print(
            f"weightless mode: the {what} did not complete because the text is noise "
            f"(random weights): {type(exc).__name__}: {str(exc)[:300].rstrip('.')}. The request, the server's "
            "parsers and this cell's code ran; with the real checkpoint this would be an error."
        )
