"""The pending-predictions GC measurement: its numbers, and no full collection from the cache."""

from benchmarks.pending_cache_gc import measure


def test_a_filling_cache_triggers_no_full_collection():
    # 300,000 kept entries: as tracked objects (before 2026-11-26) they accumulated in the
    # oldest generation and triggered full collections that scanned them all
    result = measure(300_000, max_bytes=1 << 30)
    assert result["kept"] == 300_000
    assert result["full_collections"] == 0 and result["total_pause_ms"] == 0.0
