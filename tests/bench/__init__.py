"""helpers.bench: benchmark points and sweeps, their records, plots, scenarios and sizes."""
