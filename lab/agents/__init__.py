"""The other ways of talking to the served model, on top of :mod:`helpers.chat`.

- ``structured``   ``check_structured()`` / ``structured_chat()``: a JSON-schema answer, validated
  with pydantic
- ``apis``         ``check_responses_reply()`` / ``check_messages_reply()`` (and the senders
  ``responses_chat()`` / ``messages_chat()``): the same turn on /v1/responses, /v1/messages
  (and ``REPLY_READERS``: their reply readers, checked by ``python -m tools.drift``)
- ``agent``        a pydantic-ai agent over chat completions (``notebooks/agents.ipynb``)
- ``request_failure`` a request the server failed (HTTP 5xx) in the cookbook's words, with its log
- ``tool_loop``    the notebooks' tool loop in one call, stopping when the model repeats a call
- ``noise``        weightless mode: a cell on noise text reports instead of raising
"""
