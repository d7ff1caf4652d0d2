"""helpers.evals: answer quality and its statistics."""
