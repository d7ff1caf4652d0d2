"""helpers.tune: the tuning step."""
