"""Measurements beyond a target notebook's sweep, built on :mod:`helpers.bench`: acceptance on
real prompts (``acceptance``), the run-to-run spread and rankings of repeated points
(``stats``), and the speculative-decoding and tuning figures (``plots``).
"""
