"""This machine: its GPUs, the right vLLM for it, and the Colab-style runtime a workshop lands on.

Its modules, one line each: docs/CONVENTIONS.md, "Where each kind of fact lives".
"""
