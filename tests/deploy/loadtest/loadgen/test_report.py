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


def test_the_send_lag_row_says_what_it_measures():
    """Open loop: the "send lag" row (how late requests were started) is explained under it;
    a closed loop has no schedule, so no such row."""
    stats = Stats()
    stats.first_start = 10.0
    stats.sent["predict"] += 1
    stats.record("predict", 10.0, 10.5, None)
    stats.send_lags.append(0.002)
    text = format_summary(summarize(LoadConfig(rate=2.0), "m", stats, 0.1, 1.0))
    lines = text.splitlines()
    lag = next(i for i, line in enumerate(lines) if line.strip().startswith("send lag "))
    assert float(lines[lag].split()[3]) == pytest.approx(2.0)  # the p50, ms
    assert "how late the generator started requests after their scheduled time" in " ".join(
        lines[lag + 1 :]
    ).replace("\n    ", " ")
    closed = format_summary(summarize(LoadConfig(), "m", stats, 0.1, 1.0))
    assert "send lag" not in closed


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
