"""This machine: its GPUs and the right vLLM for it (the Colab-style runtime a workshop lands on
is :mod:`lab.workshop`).

Its modules, one line each: docs/CONVENTIONS.md, "Where each kind of fact lives".
"""
