"""helpers.standin: the CPU stand-in model."""
