"""The learner's tracing cost benchmark runs (a few records): both sides learn every record,
and tracing is off again afterwards, its variables as they were."""

from __future__ import annotations

from benchmarks import tracing_links
from service.ops import tracing


def test_tracing_links_measures_both_sides(monkeypatch):
    for name in tracing.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    medians = tracing_links.main(["--records", "130", "--repeats", "1"])
    assert set(medians) == {"off", "on"} and all(v > 0 for v in medians.values())
    assert tracing.TRACER is None and not tracing.enabled_by()  # (the variables restored)
