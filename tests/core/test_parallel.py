import numpy as np
import pytest

from core.align import boost
from core.dos import DoSClassifier
from core.one_vs_one import OneVsOne
from core.parallel import DataParallel, deal, merge


def scores(template, state, X):
    model = template.clone()
    model.set_state(state)
    return model.score_many(X)


def test_merging_copies_of_one_model_under_its_symmetries_gives_it_back():
    """U, V and (Q U, Q V) boosted are one classifier: their aligned average is too."""
    rng = np.random.default_rng(0)
    model = DoSClassifier(n_features=6, rank=3, seed=1)
    model.learn_many(rng.standard_normal((30, 6)), np.sign(rng.standard_normal(30)))
    state = model.get_state()
    copies = []
    for phi in (0.0, 0.8, -1.3):
        Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
        copy = model.get_state()
        copy["arrays"]["U_"], copy["arrays"]["V_"] = boost(Q @ model.U_, Q @ model.V_, phi)
        copies.append(copy)
    X = rng.standard_normal((20, 6))
    np.testing.assert_allclose(scores(model, merge(copies), X), model.score_many(X), atol=1e-9)
    np.testing.assert_allclose(scores(model, merge([state]), X), model.score_many(X), atol=1e-12)
    with pytest.raises(ValueError):
        merge([])


def test_one_worker_is_a_single_learner_bit_for_bit():
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((50, 5)), rng.integers(0, 3, 50)
    base = OneVsOne(base=DoSClassifier(n_features=5, rank=2), classes=[0, 1, 2])
    single = base.clone()
    single.learn_many(X, y)
    parallel = DataParallel(base, n_workers=1, interval=7)
    parallel.learn_many(X[:23], y[:23])
    parallel.learn_many(X[23:], y[23:])
    for (name, a), (_, b) in zip(single.arrays(), parallel.workers_[0].arrays(), strict=True):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert parallel.n_merges_ == 7


def test_workers_learn_their_share_and_restart_from_the_merge():
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((40, 5)), np.sign(rng.standard_normal(40))
    parallel = DataParallel(DoSClassifier(n_features=5, rank=2), n_workers=4, interval=10)
    parallel.learn_many(X, y)
    assert parallel.n_merges_ == 4 and parallel.n_seen_ == 40
    assert all(w.n_seen_ == parallel.model_.n_seen_ for w in parallel.workers_)
    for worker in parallel.workers_:
        np.testing.assert_array_equal(worker.U_, parallel.model_.U_)
    assert [r.tolist() for r in deal(0, 6, 4)] == [[0, 4], [1, 5], [2], [3]]
    # batches cut anywhere give the same result
    again = DataParallel(DoSClassifier(n_features=5, rank=2), n_workers=4, interval=10)
    for start in range(0, 40, 7):
        again.learn_many(X[start : start + 7], y[start : start + 7])
    np.testing.assert_array_equal(again.model_.U_, parallel.model_.U_)
    with pytest.raises(ValueError, match="n_workers"):
        DataParallel(DoSClassifier(n_features=5), n_workers=0, interval=1)
