"""Check what the served model sent back. The requests are the ``openai`` SDK's own
(``client.chat.completions.create``); these modules read the replies and say what a cell
cannot say in a line.

- ``parse``    ``check_reply``: a reply -> :class:`ChatResult`, with the truncation, parser
  and tool-call checks (``FINISH_CHECKS``)
- ``stream``   ``check_stream``: the same for a stream, piece by piece
- ``display``  ``show`` (check and print a reply or a stream), ``budget_report``
- ``tools``    ``tool_schema`` and ``call_tool``; ``toolargs`` checks and coerces arguments
- ``drafting`` whether a server drafts, and ``two_pass_budget`` for one that does
- ``types``    the result types and the warnings a reply can raise

Schema answers, the Responses and Messages APIs and the agent build on it in :mod:`lab.agents`.
"""
