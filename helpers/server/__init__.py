"""One vLLM server process: launch, wait, stop, read its log, diagnose, review.

Its modules, one line each: docs/CONVENTIONS.md, "Where each kind of fact lives".
"""
