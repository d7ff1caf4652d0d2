"""Measure a running server: ``vllm bench serve`` sweeps, metrics, statistics, plots.

- ``sweep``      ``sweep(srv, ...)``: one point per concurrency, loaded into pandas
- ``point``      one ``vllm bench serve`` point
- ``metrics``    Prometheus ``/metrics`` counters and gauges
- ``results``    saved points -> DataFrame, sidecar annotations
- ``stats``      run-to-run spread, comparisons and rankings
- ``scenarios``  the request shapes of ``cookbook/scenarios.yaml``
- ``plots``      matplotlib figures of the results

The tuning step that sweeps candidate commands against an SLO is :mod:`helpers.tune`.
"""
