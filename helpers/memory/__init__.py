"""Will it fit: the architecture's byte model and the memory planner, before any download.

Its modules, one line each: docs/CONVENTIONS.md, "Where each kind of fact lives".
"""
