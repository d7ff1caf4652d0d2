"""Measure a running server: ``vllm bench serve`` sweeps (``sweep``), one point (``point``),
``/metrics`` (``metrics``), results in pandas (``results``), request shapes (``scenarios``),
figures (``plots``); repeats, their spread and real-prompt acceptance are :mod:`lab.bench`, the
tuning step :mod:`lab.tune`.
"""
