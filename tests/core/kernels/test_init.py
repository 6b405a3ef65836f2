"""The public kernel entries of core.kernels run the models' own updates on their storage."""

import numpy as np

from core import kernels
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.validation import check_pa_params


def rows(n_features, n_rows=40, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n_rows):
        indices = np.sort(rng.choice(n_features, size=3, replace=False)).astype(np.int64)
        yield indices, rng.standard_normal(3), float(rng.choice([-1.0, 1.0]))


def test_dos_step_on_the_documented_layout_is_learn_one():
    model = DoSClassifier(n_features=9, rank=3, mode="pa1", C=0.5, seed=1)
    W = np.ascontiguousarray(np.hstack([model.U_.T, model.V_.T]))
    mode, C = check_pa_params(model.mode, model.C)
    h = np.empty(W.shape[1])
    for t, (indices, values, y) in enumerate(rows(9)):
        expected = model.learn_one((indices, values), y)
        assert kernels.dos_score(W, indices, values) == expected.score
        status, score, _ = kernels.dos_step(W, indices, values, y, mode, C, t, h)
        assert status == kernels.STEP_OK and score == expected.score
    np.testing.assert_array_equal(W, np.hstack([model.U_.T, model.V_.T]))


def test_linear_step_is_learn_one_and_batches_match():
    model = LinearPA(n_features=9, mode="pa2", C=0.3)
    w = np.zeros(10)
    mode, C = check_pa_params(model.mode, model.C)
    for indices, values, y in rows(9):
        expected = model.learn_one((indices, values), y)
        status, score, _ = kernels.linear_step(w, indices, values, 1.0, y, mode, C)
        assert status == kernels.STEP_OK and score == expected.score
    np.testing.assert_array_equal(w, model.w_)

    batch = list(rows(9, seed=1))
    indptr = np.arange(0, 3 * len(batch) + 1, 3)
    indices = np.concatenate([r[0] for r in batch])
    values = np.concatenate([r[1] for r in batch])
    labels = np.array([r[2] for r in batch])
    scores, taus = np.zeros(len(batch)), np.zeros(len(batch))
    failed, done = kernels.linear_learn_batch(
        w, indptr, indices, values, 1.0, labels, mode, C, scores, taus
    )
    steps = model.learn_many([(r[0], r[1]) for r in batch], labels)
    assert (failed, done) == (-1, len(batch))
    np.testing.assert_array_equal(scores, steps.scores)
    np.testing.assert_array_equal(w, model.w_)


def test_a_step_that_overflows_changes_nothing():
    W = np.ones((3, 2))
    status, _, nu = kernels.dos_step(
        W, np.array([0]), np.array([1e200]), 1.0, 0, 1.0, 0, np.empty(2)
    )
    assert status == kernels.STEP_NOT_FINITE and nu == 0.0
    np.testing.assert_array_equal(W, np.ones((3, 2)))
