import threading
import time

import numpy as np
import pytest

from service.errors import APIError
from service.registry import PredictionCache, Progressive, RWLock


def test_rwlock_readers_share_writers_exclude():
    lock = RWLock()
    inside = []
    events = []

    def reader():
        with lock.read():
            inside.append(1)
            time.sleep(0.05)
            events.append(("read", len(inside)))
            inside.pop()

    def writer():
        with lock.write():
            events.append(("write", len(inside)))

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.01)
    writer_thread = threading.Thread(target=writer)
    writer_thread.start()
    for thread in [*threads, writer_thread]:
        thread.join()
    assert max(n for kind, n in events if kind == "read") > 1  # readers overlapped
    assert all(n == 0 for kind, n in events if kind == "write")  # writer alone


def test_prediction_cache_bounds_memory_and_time():
    now = [0.0]
    row = (np.arange(10), np.ones(10))
    cache = PredictionCache(ttl=10.0, max_bytes=1000, clock=lambda: now[0])
    ids = cache.put("uid", [row] * 10)
    assert cache.nbytes <= 1000 and len(cache) < 10 and cache.evicted == 10 - len(cache)
    with pytest.raises(APIError) as error:
        cache.take([ids[0]], "uid")
    assert error.value.code == "unknown_prediction_id"
    kept = cache.take([ids[-1]], "uid")
    assert np.array_equal(kept[0][0], row[0])
    with pytest.raises(APIError):
        cache.take([ids[-1]], "uid")  # answered once
    ids = cache.put("uid", [row])
    now[0] = 11.0
    assert cache.sweep() >= 1 and len(cache) == 0 and cache.expired >= 1
    with pytest.raises(APIError) as error:
        cache.take(ids, "uid")


def test_prediction_cache_take_is_all_or_nothing():
    cache = PredictionCache(ttl=10.0, max_bytes=10**6)
    ids = cache.put("uid", [(np.arange(2), np.ones(2))] * 2)
    with pytest.raises(APIError):
        cache.take([ids[0], "missing"], "uid")
    assert len(cache.take(ids, "uid")) == 2


def test_dense_rows_are_kept_compact():
    cache = PredictionCache(ttl=10.0, max_bytes=10**6)
    dense = (np.arange(1000), np.r_[np.zeros(999), 5.0])
    [pid] = cache.put("uid", [dense])
    [(indices, values)] = cache.take([pid], "uid")
    assert indices.tolist() == [999] and values.tolist() == [5.0]


def test_progressive_metrics_windows():
    progressive = Progressive(window=3, loss="hinge")
    progressive.update(np.array([True, False, True, True]), np.array([0.0, 2.0, 0.0, 1.0]))
    summary = progressive.summary()
    assert summary["examples"] == 4 and summary["accuracy"] == 0.75
    assert summary["loss"] == 0.75 and summary["rmse"] is None
    assert summary["recent_examples"] == 3
    assert summary["recent_accuracy"] == pytest.approx(2 / 3)
    assert summary["recent_loss"] == pytest.approx(1.0)
    progressive.update(np.zeros(0, bool), np.zeros(0))
    assert progressive.summary()["examples"] == 4
    big = Progressive(window=2, loss="hinge")
    big.update(np.array([False, False, True, True, True]), np.zeros(5))
    assert big.summary()["recent_accuracy"] == 1.0
