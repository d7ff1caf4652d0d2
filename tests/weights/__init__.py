"""helpers.weights: downloads, the weightless mode, preparing a run."""
