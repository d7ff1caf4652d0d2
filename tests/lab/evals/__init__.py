"""lab.evals: answer quality and its statistics."""
