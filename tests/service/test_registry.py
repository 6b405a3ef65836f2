import gc
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
    with pytest.raises(APIError) as error:
        cache.take([ids[0]], "uid")
    assert error.value.code == "unknown_prediction_id"
    kept = cache.take([ids[-1]], "uid")
    assert np.array_equal(kept[0].row[0], row[0])
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
    with pytest.raises(APIError, match="expired"):
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


def test_progressive_single_examples_equal_one_batch():
    """The one-example path (plain Python) keeps what a batch update of the same examples
    keeps, window wrap-around included."""
    rng = np.random.default_rng(0)
    correct, losses, squared = rng.random(7) < 0.5, rng.random(7), rng.random(7)
    for sq in (None, squared):
        one_by_one = Progressive(window=3, loss="squared", regression=sq is not None)
        batched = Progressive(window=3, loss="squared", regression=sq is not None)
        for i in range(7):
            one_by_one.update(
                correct[i : i + 1], losses[i : i + 1], None if sq is None else sq[i : i + 1]
            )
        batched.update(correct, losses, sq)
        assert one_by_one.summary() == pytest.approx(batched.summary())
        assert np.array_equal(one_by_one._recent, batched._recent)


def _live_with_log(tmp_path, **spec):
    from service.feedback_log import FileLog
    from service.registry import LiveModel, build_estimator
    from service.schemas import CreateModel

    spec = CreateModel.model_validate(
        {"name": "m", "kind": "dos", "params": {"rank": 1}, "input": {"n_features": 2}, **spec}
    )
    journal = FileLog(tmp_path, fsync="none")
    estimator = build_estimator(spec, 50_000, 1 << 20)
    return LiveModel(name="m", spec=spec, estimator=estimator, metrics_window=10, journal=journal)


def test_values_whose_norm_overflows_are_refused_before_the_log(tmp_path):
    from core.base import state_digest
    from core.features import batch_from_rows
    from service.errors import APIError

    live = _live_with_log(tmp_path)
    before = state_digest(live.estimator.get_state())
    rows = [(np.array([0, 1]), np.array([1.0, 2.0])), (np.array([0]), np.array([1e200]))]
    with pytest.raises(APIError) as refused:
        live.learn_batch(batch_from_rows(rows), np.array([1, 0]))
    assert refused.value.status == 422 and "row 1" in refused.value.message
    assert list(live.journal.read_after("m", None)) == []
    assert state_digest(live.estimator.get_state()) == before and live.version == 0


def test_a_refused_update_is_replayed_the_same_way(tmp_path):
    """A score that overflows float64 is refused by the model after the record is logged: the
    request gets a 422, and replaying the log reproduces the same state and version."""
    from core.base import state_digest
    from core.features import batch_from_rows
    from service.errors import APIError

    live = _live_with_log(tmp_path)
    state = live.estimator.get_state()
    for name in ("live.U_", "live.V_"):
        state["arrays"][name] = np.array([[1e160, 0.0, 0.0]]) * (name == "live.U_")
    live.estimator.set_state(state)
    rows = [(np.array([0, 1]), np.array([1.0, 1.0]))]
    with pytest.raises(APIError) as refused:
        live.learn_batch(batch_from_rows(rows), np.array([0]))
    assert refused.value.status == 422 and refused.value.code == "unlearnable_example"
    live.learn_batch(batch_from_rows([(np.array([1]), np.array([0.5]))]), np.array([1]))
    replayed = _live_with_log(tmp_path)
    replayed.estimator.set_state(state)
    assert replayed.replay(replayed.journal.read_after("m", None)) == 2
    assert replayed.version == live.version == 2
    assert state_digest(replayed.estimator.get_state()) == state_digest(live.estimator.get_state())


def test_learn_group_appends_together_and_answers_each(tmp_path, monkeypatch):
    """``LiveModel.learn_group``: the records of the valid items go to the log in one append
    before any is learned; each item gets its own outcome (an overflowing one its 422, the
    others their consecutive versions), and the model ends as if they were learned one by
    one. A refused group append answers 503 to each valid item and learns nothing."""
    from core.base import state_digest
    from core.features import batch_from_rows
    from service.errors import APIError
    from service.feedback_log import LogUnavailable

    live = _live_with_log(tmp_path / "a")
    ok = batch_from_rows([(np.array([0]), np.array([1.0]))]), np.array([1])
    other = batch_from_rows([(np.array([1]), np.array([-2.0]))]), np.array([0])
    huge = batch_from_rows([(np.array([0, 1]), np.array([1e200, 1.0]))]), np.array([0])
    appends = []
    original = live.journal.append_many

    def counted(model, records):
        appends.append(len(records))
        return original(model, records)

    monkeypatch.setattr(live.journal, "append_many", counted)
    outcomes, position = live.learn_group([ok, huge, other])
    assert appends == [2] and position == 2 and live.log_position == 2
    assert isinstance(outcomes[1], APIError) and outcomes[1].status == 422
    assert not outcomes[1].applied
    assert [outcomes[0]["version"], outcomes[2]["version"]] == [1, 2]
    assert live.n_learned == 2 and live.records_since_snapshot == 2
    reference = _live_with_log(tmp_path / "b")
    for item in (ok, other):
        reference.learn_batch(*item)
    assert state_digest(live.estimator.get_state()) == state_digest(reference.estimator.get_state())
    from service.feedback_log import decode_record

    logged = [decode_record(r)[:2] for _, r in live.journal.read_after("m", 0)]
    assert [(b.values.tolist(), t.tolist()) for b, t in logged] == [
        (item[0].values.tolist(), item[1].tolist()) for item in (ok, other)
    ]

    def broken(model, records):
        raise LogUnavailable("disk gone")

    monkeypatch.setattr(live.journal, "append_many", broken)
    refused, position = live.learn_group([ok, other])
    assert position is None  # nothing to make durable
    assert [(e.status, e.code, e.applied) for e in refused] == [(503, "log_unavailable", False)] * 2
    assert live.n_learned == 2 and live.version == 2
