"""Delta publication (``service.scale.deltas``): a replica that applies the learner's deltas holds
the learner's model bit for bit, through averaging steps; the row digest maintained delta
by delta equals the digest of the whole state; a missed delta is detected; deltas are
stored, fenced and deleted like snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from core.averaging import Averaged
from core.dos import DoSClassifier
from core.features import as_batch
from core.one_vs_one import OneVsOne
from service.durability.redis_store import RedisStore
from service.durability.store import encode
from service.scale import deltas
from service.scale.leases import LeaseLost

N_FEATURES = 40


def model():
    base = DoSClassifier(n_features=N_FEATURES, rank=3, seed=2)
    return Averaged(model=OneVsOne(base=base, classes=[0, 1, 2]), interval=7)


def sparse_batch(rng, n_rows: int):
    X = np.zeros((n_rows, N_FEATURES))
    for row in X:
        row[rng.choice(N_FEATURES, size=4, replace=False)] = rng.standard_normal(4)
    return X, rng.integers(0, 3, size=n_rows)


def state_arrays(estimator) -> dict:
    return {name: np.array(array) for name, array in estimator.arrays()}


def test_a_replica_applying_deltas_holds_the_learners_model():
    rng = np.random.default_rng(0)
    learner, replica = model(), model()
    axes = deltas.local_axes(learner, N_FEATURES)
    assert axes and deltas.worthwhile(learner, axes)
    changes = deltas.RowChanges(N_FEATURES + 1)
    assert changes.take() is None  # a chain starts with everything
    ours, theirs = deltas.RowDigest(axes), deltas.RowDigest(axes)
    ours.reset(state_arrays(learner))
    theirs.reset(state_arrays(replica))
    averaged = deltas.averaging_count(learner)
    sizes = []
    for _ in range(12):
        X, y = sparse_batch(rng, 3)
        changes.mark(as_batch(X, N_FEATURES).indices)
        learner.learn_many(X, y)
        rows = changes.take()
        arrays = deltas.gather(learner, axes, rows, averaged)
        averaged = deltas.averaging_count(learner)
        total, updates = ours.preview(arrays)
        ours.commit(total, updates)
        # the replica checks the digest before it applies anything
        their_total, their_updates = theirs.preview(arrays)
        assert their_total == total
        deltas.apply(replica, axes, arrays)
        replica.set_scalars(learner.get_state_meta()["scalars"])
        theirs.commit(their_total, their_updates)
        for name, array in learner.arrays():
            np.testing.assert_array_equal(dict(replica.arrays())[name], array, err_msg=name)
        # the digest kept row by row is the digest of the whole state
        assert deltas.RowDigest(axes).reset(state_arrays(learner)) == total
        sizes.append(sum(a.nbytes for a in arrays.values()))
    full = sum(a.nbytes for _, a in learner.arrays())
    assert min(sizes) < full / 4  # between averaging steps, a fraction of the state


def test_a_missed_delta_is_detected():
    rng = np.random.default_rng(1)
    learner, replica = model(), model()
    axes = deltas.local_axes(learner, N_FEATURES)
    changes = deltas.RowChanges(N_FEATURES + 1)
    changes.take()
    ours, theirs = deltas.RowDigest(axes), deltas.RowDigest(axes)
    ours.reset(state_arrays(learner))
    theirs.reset(state_arrays(replica))
    published = []
    for _ in range(2):
        X, y = sparse_batch(rng, 2)
        changes.mark(as_batch(X, N_FEATURES).indices)
        learner.learn_many(X, y)
        arrays = deltas.gather(learner, axes, changes.take(), None)
        total, updates = ours.preview(arrays)
        ours.commit(total, updates)
        published.append((arrays, total))
    arrays, total = published[1]  # the first one never reached the replica
    assert theirs.preview(arrays)[0] != total


def test_deltas_are_stored_fenced_and_deleted(redis_server):
    store = RedisStore(redis_server.url, prefix="t")
    state = DoSClassifier(n_features=2, rank=1).get_state()
    store.save("m", 0, bytes(encode("m", 0, {}, state)), retention=2, incarnation="i", create=True)
    store.client.set(store.keys.lease("m"), "A 1")
    for version in range(1, 6):
        blob = bytes(encode("m", version, {}, state, extra={"delta": {"base": version - 1}}))
        store.save_delta("m", version, blob, retention=3, incarnation="i", fence="A 1")
    assert store.deltas_after("m", 1) == [3, 4, 5]  # the newest three kept
    assert store.head("m") == 5 and store.latest("m") == 0
    with pytest.raises(LeaseLost):
        store.save_delta("m", 6, blob, retention=3, incarnation="i", fence="B 2")
    store.delete("m")
    assert store.client.keys("t:model:{m}:*") == [b"t:model:{m}:deleted"]


@pytest.mark.parametrize(
    "layout", ["feature-major view", "C", "F", "one-dimensional", "three-dimensional"]
)
def test_rows_are_taken_as_np_take_does(layout):
    """``take_rows`` gathers rows through the feature-major view (DoS keeps ``U_`` as a
    transposed view of feature-major storage): the same values and shape as ``np.take``."""
    rng = np.random.default_rng(3)
    n = N_FEATURES + 1
    array, axis = {
        "feature-major view": (rng.standard_normal((n, 6))[:, :3].T, 1),
        "C": (rng.standard_normal((3, n)), 1),
        "F": (np.asfortranarray(rng.standard_normal((3, n))), 1),
        "one-dimensional": (rng.standard_normal(n), 0),
        "three-dimensional": (rng.standard_normal((2, n, 3)), 1),
    }[layout]
    for rows in (np.array([], dtype=np.int64), np.array([n - 1]), np.sort(rng.choice(n, 9))):
        taken = deltas.take_rows(array, rows, axis)
        expected = np.take(array, rows, axis=axis)
        assert taken.shape == expected.shape
        np.testing.assert_array_equal(taken, expected)


def test_a_dos_delta_holds_the_rows_of_u_and_v():
    learner = DoSClassifier(n_features=N_FEATURES, rank=3, seed=4)
    axes = deltas.local_axes(learner, N_FEATURES)
    rows = np.array([0, 5, N_FEATURES])
    arrays = deltas.gather(learner, axes, rows, None)
    for name in ("U_", "V_"):
        np.testing.assert_array_equal(arrays[name + deltas.ROWS], rows)
        np.testing.assert_array_equal(arrays[name + deltas.VALUES], getattr(learner, name)[:, rows])


def numpy_row_hashes(name: str, rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The row hash written with numpy (what the kernel computes in one pass): the row's
    64-bit words, zero-padded, weighted by odd constants and summed modulo 2^64, mixed
    with the row's id and the array's salt."""
    raw = np.ascontiguousarray(rows).reshape(rows.shape[0], -1).view(np.uint8)
    pad = -raw.shape[1] % 8
    if pad:
        raw = np.pad(raw, ((0, 0), (0, pad)))
    words = raw.view(np.uint64)
    h = (words * deltas._constants(words.shape[1])).sum(axis=1, dtype=np.uint64)
    return deltas._mix(h ^ deltas._mix(ids.astype(np.uint64) ^ deltas._salt(name)))


@pytest.mark.parametrize(
    ("shape", "dtype", "axis"),
    [((30, 16), np.float64, 0), ((16, 30), np.float64, 1), ((12, 3), np.float32, 0),
     ((9,), np.float64, 0), ((4, 5, 3), np.int64, 1), ((6, 0), np.float64, 0)],
)  # fmt: skip
def test_row_hashes_are_those_of_the_numpy_formula(shape, dtype, axis):
    rng = np.random.default_rng(3)
    array = (100 * rng.standard_normal(shape)).astype(dtype)
    rows = deltas._as_rows(array, axis)
    for ids in (np.arange(rows.shape[0]), rng.integers(0, 1 << 40, size=rows.shape[0])):
        expected = numpy_row_hashes("U_", rows, ids)
        assert np.array_equal(deltas.row_hashes("U_", rows, ids), expected)
    if rows.shape[0]:  # the array's name is in the hash
        ids = np.arange(rows.shape[0])
        assert not np.array_equal(
            deltas.row_hashes("V_", rows, ids), deltas.row_hashes("U_", rows, ids)
        )


def test_rows_are_scattered_as_a_fancy_assignment_does():
    rng = np.random.default_rng(4)
    for n, width, dtype in ((1000, 16, np.float64), (50, 1, np.float32), (30, 3, np.int64)):
        target = (100 * rng.standard_normal((n, width))).astype(dtype)
        expected = target.copy()
        rows = np.sort(rng.choice(n, 20, replace=False))
        values = (100 * rng.standard_normal((20, width))).astype(dtype)
        expected[rows] = values
        # rows given in the decoded delta's layout: feature-minor, read transposed
        deltas.scatter_rows(target, rows, np.moveaxis(np.ascontiguousarray(values.T), 1, 0))
        assert np.array_equal(target, expected)
    vector = np.zeros(10)
    deltas.scatter_rows(vector, np.array([3, 7]), np.array([2.0, -1.0]))
    assert vector.tolist() == [0, 0, 0, 2.0, 0, 0, 0, -1.0, 0, 0]


def test_a_row_out_of_bounds_is_refused_before_anything_is_written():
    target = np.zeros((5, 2))
    with pytest.raises(IndexError, match="row 5"):
        deltas.scatter_rows(target, np.array([1, 5]), np.ones((2, 2)))
    assert not target.any()
