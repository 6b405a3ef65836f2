"""The sweep: open loops at rising rates, up to the first past the p99 bound."""

from __future__ import annotations

from deploy.loadtest.loadgen.sweep import sweep
from tests.deploy.loadtest.loadgen.summaries import no_loadgen_models, small


def test_sweep_reports_the_highest_rate_within_the_bound(server_url):
    config = small(server_url, mode="predict", rate=20.0, duration=0.4, warmup=0.0)
    result = sweep(config, factor=2.0, max_rate=80.0, p99_max_ms=60_000.0)
    assert [step["rate"] for step in result["steps"]] == [20.0, 40.0, 80.0]
    assert result["knee_rate"] == 80.0 and all(step["within"] for step in result["steps"])
    impossible = sweep(config, factor=2.0, max_rate=80.0, p99_max_ms=0.0)
    assert impossible["knee_rate"] is None and len(impossible["steps"]) == 1
    assert no_loadgen_models(server_url)
