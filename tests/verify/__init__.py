"""helpers.verify: checking a served endpoint."""
