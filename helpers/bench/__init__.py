"""Measure a running server: ``vllm bench serve`` sweeps (``sweep``), one point (``point``),
``/metrics`` (``metrics``), results in pandas (``results``), spread and rankings (``stats``),
request shapes (``scenarios``), figures (``plots``); the tuning step is :mod:`lab.tune`.
"""
