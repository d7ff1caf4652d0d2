"""The lab: research and topic-notebook code beside the core, the second import root of the
``nemotron-lightning-cookbook`` distribution.

``tune`` (the tuning step: candidates against an SLO, ranked by goodput and cost), ``evals``
(answer quality, its statistics, the lossless check of speculative decoding), ``fleet``
(scale-out: replicas behind vLLM's router, DP+EP, the cluster renderings), ``verify``
(``python -m lab.verify URL``: the notebooks' checks against any endpoint), ``agents``
(structured outputs, the Responses and Messages APIs, the pydantic-ai agent) and ``bench``
(repeated points and their spread, acceptance on real prompts, the lab's figures).

It builds on :mod:`helpers` (the core: what the target notebooks need); ``helpers`` never
imports ``lab`` (``lint-imports`` checks it, contracts in ``pyproject.toml``).
"""
