"""The tuning step (optional): candidate commands measured against an SLO, ranked by goodput
and cost, resumable (``tune``; its inputs, points, noise, results and SLO: docs/CONVENTIONS.md).
"""
