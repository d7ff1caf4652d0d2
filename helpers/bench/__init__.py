"""Measure a running server: ``vllm bench serve`` sweeps (``sweep``), one point (``point``),
``/metrics`` (``metrics``), results in pandas (``results``), figures (``plots``); the named
request shapes and the agent workload, repeats, their spread and real-prompt acceptance are
:mod:`lab.bench`, the tuning step :mod:`lab.tune`.
"""
