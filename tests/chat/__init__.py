"""helpers.chat: replies, streams, tool calls (schema answers, other APIs, the agent:
``tests/lab/agents/``)."""
