"""lab.verify: checking a served endpoint."""
