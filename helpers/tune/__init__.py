"""The tuning step (optional): candidate commands measured against an SLO, ranked by goodput
and cost, resumable.

- ``tune``     ``tune(target, workload, slo, candidates, mode=run)``: launch, measure, record
- ``inputs``   candidates (a spec per variant / MoE backend / flags) and workloads
- ``results``  what a run's folder holds (``TuneResult``: points, goodput, cost, the pick)
- ``slo``      the bounds (``SLO``), vLLM's ``--goodput``, and the pick rule (``choose``)
"""
