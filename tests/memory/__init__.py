"""helpers.memory: the memory planner."""
