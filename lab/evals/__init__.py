"""Answer quality against a running server through lm-eval (``accuracy``, ``step``), with
intervals and paired tests (``stats``, ``compare``), the budget curve (``budget``) and the
lossless check of speculative decoding (``lossless``, ``speculative``).
"""
