"""The tiny, locally trained Nemotron-H that the CPU build of vLLM serves in place of the model.

Its modules, one line each: docs/CONVENTIONS.md, "Where each kind of fact lives".
"""
