"""Measure a running server: ``vllm bench serve`` sweeps, metrics, statistics, plots, tuning.

- ``sweep``      ``sweep(srv, ...)``: one point per concurrency, loaded into pandas
- ``point``      one ``vllm bench serve`` point
- ``metrics``    Prometheus ``/metrics`` counters and gauges
- ``results``    saved points -> DataFrame, sidecar annotations
- ``stats``      run-to-run spread, comparisons and rankings
- ``scenarios``  the request shapes of ``cookbook/scenarios.yaml``
- ``plots``      matplotlib figures of the results
- ``slo``        an SLO over points: the filter, vLLM's goodput, cost per million tokens, the choice
- ``tune``       the tuning step: candidates served and swept in turn, resumable
- ``tune_results`` a tuning run's saved form, its result and recommendation, ``tune.json``
"""
