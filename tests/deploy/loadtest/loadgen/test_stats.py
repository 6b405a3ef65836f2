"""Percentiles are nearest-rank, in milliseconds of the seconds recorded."""

from __future__ import annotations

from deploy.loadtest.loadgen.stats import latency_summary, percentile
from tests.deploy.loadtest.loadgen.summaries import LATENCY_KEYS


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert latency_summary([]) == {"count": 0} | dict.fromkeys(LATENCY_KEYS - {"count"})
    summary = latency_summary([0.003, 0.001, 0.002])
    assert summary == {"count": 3, "mean": 2.0, "p50": 2.0, "p90": 3.0, "p99": 3.0, "max": 3.0}
