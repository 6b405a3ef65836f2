"""A scenario's row: every closed-loop single-request figure carries its ratio to the bare
app, the median of the repeats' ratios, and the verdict on its targets."""

from __future__ import annotations

import argparse

import pytest

from deploy.loadtest.run_benchmarks.aggregate import aggregate
from deploy.loadtest.run_benchmarks.scenarios import targets_of


def run(**values) -> dict:
    """One run's summary as loadgen reports it (the fields the report reads)."""
    summary = {
        "mode": "predict",
        "throughput_rps": 100.0,
        "examples_per_s": 0.0,
        "latency_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0},
        "errors": 0,
        "requests": 1000,
        "server_cpu_us_per_request": 300.0,
        "server_cpu_share": 0.5,
        "client_cpu_share": 0.1,
        "other_cpu_share": 0.0,
        "loadavg_before": [1.0, 1.0, 1.0],
        "send_lag_ms": None,
        "operations": {"predict": {}},
    }
    return summary | values


def test_the_ratio_to_the_bare_app_is_the_median_of_the_repeats_ratios():
    args = argparse.Namespace(predict_rate=500.0, baseline=True)
    service = [run(throughput_rps=r) for r in (800.0, 300.0, 900.0)]
    bare = [run(throughput_rps=r, server_cpu_us_per_request=200.0) for r in (1000.0, 1000.0, 0.0)]
    row = aggregate("predict_closed", service, targets_of("predict_closed", args), bare)
    assert row["ratios_per_repeat"] == [0.8, 0.3]  # (a repeat whose baseline served nothing)
    assert row["ratio_to_bare"] == pytest.approx(0.55)
    assert row["ratio_of_medians"] == pytest.approx(0.8)
    assert row["bare"]["throughput_rps"] == 1000.0 and row["bare"]["errors"] == 0
    [target] = row["targets"]
    assert target["metric"] == "ratio_to_bare" and target["value"] == 0.8 and not target["met"]
    feedback = targets_of("feedback_closed", args)
    assert [t["metric"] for t in feedback] == ["throughput_rps", "ratio_to_bare"]
    assert feedback[1]["value"] == 0.65
    args.baseline = False
    assert targets_of("predict_closed", args) == []
