"""helpers.config: the registry, recipes, flag tables and each mode's run defaults."""
