"""Measurements beyond a target notebook's sweep, built on :mod:`helpers.bench`: the request
shapes of ``cookbook/scenarios.yaml`` (``scenarios``) and the multi-turn agent workload
(``agent_workload``, ``agent_text``), repeated points (``repeats``) and their spread and
rankings (``stats``), acceptance on real prompts (``acceptance``), speculative decoding's log
line on a running server (``spec_log``), and the speculative-decoding and tuning figures
(``plots``).
"""
