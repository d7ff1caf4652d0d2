"""lab.tune: the tuning step."""
