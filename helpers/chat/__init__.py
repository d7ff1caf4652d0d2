"""Talk to the served model through the ``openai`` SDK: reasoning, budgets, streams, tools.

- ``completions``  ``chat()``: one request, parsed into a :class:`ChatResult`
- ``stream``       ``stream_chat()``: typed events as they arrive
- ``tools``        ``tool_schema`` and ``run_tool_loop``; ``toolargs`` checks and coerces arguments
- ``display``      ``show``, ``print_stream``, ``budget_report``
- ``types``        the result types and the warnings a reply can raise
- ``parse``        a reply -> :class:`ChatResult`, with the truncation and parser checks
- ``request``      request bodies and the argument checks at the boundary

Schema answers, the Responses and Messages APIs and the agent build on it in :mod:`lab.agents`.
"""
