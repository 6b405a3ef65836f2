"""The pending-predictions GC measurement: its numbers, and no full collection from the cache."""

from benchmarks.pending_cache_gc import measure


def test_a_filling_cache_triggers_no_full_collection():
    # 300,000 kept entries: were they objects the collector tracks, they would pile up in the
    # oldest generation and trigger full collections that scan them all
    result = measure(300_000, max_bytes=1 << 30)
    assert result["kept"] == 300_000
    assert result["full_collections"] == 0 and result["total_pause_ms"] == 0.0
