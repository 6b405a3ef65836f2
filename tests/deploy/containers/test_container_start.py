"""benchmarks/container_start.py in quick mode (one run): what it measures and writes (no
timing asserted: the numbers in docs/deployment.md come from the script)."""

from __future__ import annotations

import pytest

from benchmarks.container_start import measure, section

pytestmark = pytest.mark.container


def test_one_cold_and_one_warm_start(engine, images):
    result = measure(engine, images.service, runs=1)
    assert len(result["cold_seconds"]) == len(result["warm_seconds"]) == 1
    assert result["cold_median_seconds"] > 0 and result["warm_median_seconds"] > 0
    assert 0 < result["venv_bytes"] < result["image_bytes"]
    result |= {"date": "today", "machine": "this one", "docker": "20.10"}
    text = section(result, images.base, images.service)
    assert images.service in text and "cold start" in text and "| image size |" in text
    assert not engine.text("ps", "--all", "--quiet", "--filter", "name=lorentztron-bench-")
