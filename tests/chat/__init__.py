"""helpers.chat: replies, streams, tool calls, structured answers, other APIs, the agent."""
