import gc

import numpy as np
import pytest

from service.exceptions import InvalidRequest
from service.model.cache import GONE_ENTRY_BYTES, PredictionCache


def test_pending_predictions_are_not_tracked_by_the_garbage_collector():
    # ~800,000 of them at the default bound: tracked, every full collection scanned them all
    cache = PredictionCache(60.0, 1 << 20)
    row = (np.array([1, 5], dtype=np.int32), np.array([0.5, 2.0], dtype=np.float32))
    ids = cache.put("uid", [row] * 100)
    gc.collect()
    assert not any(gc.is_tracked(entry) for entry in cache._entries.values())
    (entry,) = cache.take([ids[0]], "uid")  # handed out with named fields
    assert entry.model_uid == "uid" and entry.row[0].tolist() == [1, 5] and entry.nbytes > 0
    cache.give_back([ids[0]], [entry])
    gc.collect()
    assert not gc.is_tracked(cache._entries[ids[0]])
    assert cache.peek(ids[0], "uid")[1].tolist() == [0.5, 2.0]


def test_prediction_cache_bounds_memory_and_time():
    now = [0.0]
    row = (np.arange(10), np.ones(10))
    cache = PredictionCache(ttl=10.0, max_bytes=1000, clock=lambda: now[0])
    ids = cache.put("uid", [row] * 10)
    assert cache.nbytes <= 1000 and len(cache) < 10 and cache.evicted == 10 - len(cache)
    with pytest.raises(InvalidRequest) as error:  # the last one dropped under memory pressure
        cache.take([ids[cache.evicted - 1]], "uid")
    assert error.value.code == "expired_prediction_id"
    kept = cache.take([ids[-1]], "uid")
    assert np.array_equal(kept[0].row[0], row[0])
    with pytest.raises(InvalidRequest):
        cache.take([ids[-1]], "uid")  # answered once
    ids = cache.put("uid", [row])
    now[0] = 11.0
    assert cache.sweep() >= 1 and len(cache) == 0 and cache.expired >= 1
    with pytest.raises(InvalidRequest) as error:
        cache.take(ids, "uid")


def test_prediction_cache_take_is_all_or_nothing():
    cache = PredictionCache(ttl=10.0, max_bytes=10**6)
    ids = cache.put("uid", [(np.arange(2), np.ones(2))] * 2)
    with pytest.raises(InvalidRequest):
        cache.take([ids[0], "missing"], "uid")
    assert len(cache.take(ids, "uid")) == 2


def test_prediction_cache_gives_back_taken_entries():
    now = [0.0]
    cache = PredictionCache(ttl=10.0, max_bytes=10**6, clock=lambda: now[0])
    ids = cache.put("uid", [(np.arange(2), np.ones(2))] * 3)
    size = cache.nbytes
    taken = cache.take(ids[:2], "uid")
    assert len(cache) == 1 and cache.nbytes < size
    cache.give_back(ids[:2], taken)
    assert len(cache) == 3 and cache.nbytes == size
    now[0] = 10.0  # their own expiry, not a new one
    with pytest.raises(InvalidRequest, match="expired"):
        cache.take(ids[:1], "uid")
    # the memory bound holds: giving back past it evicts the oldest
    small = PredictionCache(ttl=10.0, max_bytes=200)
    [a] = small.put("uid", [(np.arange(4), np.ones(4))])
    entries = small.take([a], "uid")
    [b] = small.put("uid", [(np.arange(4), np.ones(4))])
    small.give_back([a], entries)
    assert len(small) == 1 and small.evicted == 1 and small.take([a], "uid")


def test_dense_rows_are_kept_compact():
    cache = PredictionCache(ttl=10.0, max_bytes=10**6)
    dense = (np.arange(1000), np.r_[np.zeros(999), 5.0])
    [pid] = cache.put("uid", [dense])
    [(indices, values)] = [entry.row for entry in cache.take([pid], "uid")]
    assert indices.tolist() == [999] and values.tolist() == [5.0]


def test_expired_ids_answer_expired_for_a_ttl_after_expiry_then_unknown():
    """An expired id is told apart from one that never existed, whether the sweep has
    already dropped it or not, for ``ttl`` seconds after it expired."""
    now = [0.0]
    cache = PredictionCache(ttl=10.0, max_bytes=10**6, clock=lambda: now[0])
    swept, unswept = cache.put("uid", [(np.arange(2), np.ones(2))] * 2)
    now[0] = 10.5
    assert cache.sweep() == 2 and len(cache) == 0
    for prediction_id in (swept, unswept):
        with pytest.raises(InvalidRequest) as error:
            cache.take([prediction_id], "uid")
        assert error.value.code == "expired_prediction_id"
    with pytest.raises(InvalidRequest) as error:
        cache.take([swept], "other-model")
    assert error.value.code == "unknown_prediction_id"
    late = cache.put("uid", [(np.arange(2), np.ones(2))])[0]
    now[0] = 21.0  # expired 0.5 s ago, never swept
    with pytest.raises(InvalidRequest) as error:
        cache.take([late], "uid")
    assert error.value.code == "expired_prediction_id"
    now[0] = 20.6  # (the clock is the cache's; the window is measured from expiry)
    now[0] = 30.0
    cache.sweep()
    with pytest.raises(InvalidRequest) as error:
        cache.take([swept], "uid")
    assert error.value.code == "unknown_prediction_id"  # past its window: forgotten


def test_remembered_expired_ids_are_bounded_in_memory():
    now = [0.0]
    cache = PredictionCache(ttl=100.0, max_bytes=8 * GONE_ENTRY_BYTES * 5, clock=lambda: now[0])
    ids = []
    for _ in range(20):
        ids += cache.put("uid", [(np.arange(1), np.ones(1))])
    now[0] = 101.0
    cache.sweep()
    assert cache.gone_bytes <= cache.max_bytes // 8
    codes = []
    for prediction_id in ids:
        with pytest.raises(InvalidRequest) as error:
            cache.take([prediction_id], "uid")
        codes.append(error.value.code)
    assert codes[-5:] == ["expired_prediction_id"] * 5  # the newest are remembered
    assert codes[0] == "unknown_prediction_id"


def test_prediction_ids_are_128_random_bits_unique_across_entropy_refills():
    cache = PredictionCache(60.0, 1 << 30)
    row = (np.array([1], dtype=np.int32), np.array([1.0]))
    ids = [i for _ in range(300) for i in cache.put("uid", [row] * 7)]  # 2,100 ids, 33.6 kB
    ids += cache.put("uid", [row] * 1000)  # more than one read of entropy at once
    assert len(set(ids)) == len(ids) == 3100
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert len({i[0] for i in ids}) == 16  # random from the first digit on (not a counter)
    assert cache.peek(ids[-1], "uid")[1].tolist() == [1.0]
