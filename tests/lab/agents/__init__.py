"""lab.agents: structured answers, the Responses and Messages APIs, the agent."""
