"""The cost breakdown script runs every step against today's service (a quick run)."""

from __future__ import annotations

import json

from deploy.loadtest import cost_breakdown


def test_a_quick_run_times_every_step(tmp_path):
    out = tmp_path / "costs.json"
    argv = ["--kind", "dos", "--rank", "2", "--n-features", "8", "--nnz", "8"]
    argv += ["--n", "5", "--repeats", "1", "--batch", "50", "--json", str(out)]
    assert cost_breakdown.main(argv) == 0
    costs = json.loads(out.read_text())
    assert costs and all(isinstance(v, int | float) and v >= 0 for v in _numbers(costs))


def _numbers(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield value
