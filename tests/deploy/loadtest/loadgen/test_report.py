"""A run's summary counts what its statistics recorded, and reads as text."""

from __future__ import annotations

import pytest

from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.report import format_summary, format_sweep, summarize
from deploy.loadtest.loadgen.stats import Stats


def test_the_summary_of_recorded_outcomes():
    stats = Stats()
    stats.first_start = 10.0
    for op, due, end, error in [
        ("predict", 10.0, 10.5, None),
        ("predict", 10.5, 11.0, "HTTP 503"),
        ("feedback", 11.0, 12.0, None),
    ]:
        stats.sent[op] += 1
        stats.record(op, due, end, error)
    stats.examples = 1
    config = LoadConfig(mode="mixed", rate=2.0)
    summary = summarize(config, "m", stats, client_cpu=0.5, wall=2.0)
    assert (summary["requests"], summary["ok"], summary["errors"]) == (3, 2, 1)
    assert summary["error_kinds"] == {"predict: HTTP 503": 1}
    assert summary["elapsed_s"] == 2.0 and summary["throughput_rps"] == 1.0
    assert summary["operations"]["predict"]["latency_ms"]["max"] == 500.0
    assert summary["operations"]["feedback"]["throughput_rps"] == 0.5
    assert summary["client_cpu_share"] == 0.25 and summary["model"]["name"] == "m"
    text = format_summary(summary)
    assert "mixed (open loop at 2 req/s)" in text and "error predict: HTTP 503: 1" in text


def test_the_text_of_a_sweep():
    step = {"rate": 10.0, "throughput_rps": 9.9, "p50_ms": 1.0, "p99_ms": 2.0, "errors": 0}
    result = {
        "mode": "predict",
        "p99_max_ms": 5.0,
        "knee_rate": 10.0,
        "steps": [step | {"within": True}, step | {"rate": 20.0, "p99_ms": 9.0, "within": False}],
    }
    lines = format_sweep(result).splitlines()
    assert lines[0].endswith("no errors: 10.0 req/s")
    assert lines[-1].endswith("<- past the bound") and not lines[-2].endswith("bound")
    assert pytest.approx(9.0) == float(lines[-1].split()[3])
