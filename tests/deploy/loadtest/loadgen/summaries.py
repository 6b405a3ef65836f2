"""A small load for the tests, and what every summary of a run must hold (no timing
assertions: speed is measured by ``python -m deploy.loadtest.run_benchmarks``)."""

from __future__ import annotations

import json

import httpx

from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.report import format_summary

LATENCY_KEYS = {"count", "mean", "p50", "p90", "p99", "max"}
SUMMARY_KEYS = {
    "mode",
    "loop",
    "target_rate",
    "concurrency",
    "duration_s",
    "url",
    "client",
    "model",
    "batch",
    "requests",
    "ok",
    "errors",
    "error_kinds",
    "elapsed_s",
    "throughput_rps",
    "examples_learned",
    "examples_per_s",
    "latency_ms",
    "operations",
    "feedback_by_prediction_id",
    "send_lag_ms",
    "client_cpu_s",
    "client_cpu_share",
}


def small(url: str, **options) -> LoadConfig:
    """Under a second of load on a small model."""
    base = dict(
        url=url,
        duration=0.8,
        warmup=0.1,
        concurrency=2,
        rank=4,
        n_features=1024,
        nnz=10,
        pool=64,
        batch=200,
    )
    return LoadConfig(**(base | options))


def check_summary(summary: dict, config: LoadConfig) -> None:
    """The documented shape, no errors, and consistent counts and percentiles."""
    assert set(summary) == SUMMARY_KEYS
    assert summary["mode"] == config.mode
    assert summary["loop"] == ("open" if config.rate else "closed")
    assert summary["errors"] == 0, summary["error_kinds"]
    assert summary["ok"] > 0 and summary["ok"] == summary["requests"]
    assert set(summary["latency_ms"]) == LATENCY_KEYS
    assert summary["latency_ms"]["count"] == summary["ok"]
    lat = summary["latency_ms"]
    assert 0 <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    for values in summary["operations"].values():
        assert {"requests", "ok", "throughput_rps", "latency_ms"} <= set(values)
    assert summary["throughput_rps"] > 0
    assert summary["model"]["n_features"] == config.n_features
    json.dumps(summary)  # the --json output
    assert format_summary(summary)


def no_loadgen_models(url: str) -> bool:
    """Every model the generator created is deleted."""
    names = [m["name"] for m in httpx.get(f"{url}/v1/models").json()["models"]]
    return not [name for name in names if name.startswith("loadgen-")]
