"""What is served: downloaded checkpoints, the weightless architecture, or the stand-in.

Its modules, one line each: docs/CONVENTIONS.md, "Where each kind of fact lives".
"""
