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
