"""Kernels of the stacked reductions against plain numpy (``tests/naive.py``)."""

import numpy as np
import pytest

from core.kernels.multiclass import (
    _ovo_dos_learn_block,
    _ovo_linear_learn_block,
    _stack_densify,
    _stack_dos_scores,
)
from tests import naive

PAIRS = [(0, 1), (0, 2), (1, 2)]
PAIRS_OF = np.array([[0, 1], [0, 2], [1, 2]])  # the pairs of class 0, 1, 2
FIRST = np.array([i for i, _ in PAIRS])
MODES = {"pa": 0, "pa1": 1, "pa2": 2}


def csr(X):
    indptr = np.concatenate([[0], np.cumsum((X != 0).sum(axis=1))]).astype(np.int64)
    indices = np.nonzero(X)[1].astype(np.int64)
    return indptr, indices, X[X != 0]


def test_dos_scores_are_eq_10_per_block():
    rng = np.random.default_rng(0)
    rank, n_models = 3, 4
    P = rng.standard_normal((5, n_models * 2 * rank))
    scores = np.empty((5, n_models))
    _stack_dos_scores(P, 5, rank, scores)
    blocks = P.reshape(5, n_models, 2, rank)
    expected = np.sum(blocks[:, :, 0] ** 2, axis=2) - np.sum(blocks[:, :, 1] ** 2, axis=2)
    np.testing.assert_allclose(scores, expected, rtol=1e-13)


def test_densify_fills_only_the_block_rows():
    X = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0], [0.0, 0.0, 0.0], [4.0, 0.0, 0.0]])
    out = np.full((2, 3), np.nan)
    _stack_densify(*csr(X), 1, 3, out)
    assert np.array_equal(out, X[1:3])


@pytest.mark.parametrize("mode,C", [("pa", 1.0), ("pa1", 0.02), ("pa2", 0.3)])
@pytest.mark.parametrize("init", [0.5, 0.0], ids=["random", "zero"])
def test_learn_block_is_the_dos_step_of_each_pair_in_order(mode, C, init):
    """Scores of every pair before each row, then each learning pair's DoS step (eqs 17-20,
    footnote 1 from a zero start), all against the dense plain-numpy step."""
    rng = np.random.default_rng(1)
    d, rank, n = 4, 2, 9
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.7)
    targets = rng.integers(3, size=n)
    W = rng.standard_normal((d + 1, len(PAIRS) * 2 * rank)) * init
    U = [W[:, 2 * rank * p : 2 * rank * p + rank].T.copy() for p in range(3)]
    V = [W[:, 2 * rank * p + rank : 2 * rank * (p + 1)].T.copy() for p in range(3)]
    Z = np.hstack([X, np.ones((n, 1))])
    P, G = Z @ W, Z @ Z.T  # the block's start: projections and Gram matrix
    seen = np.array([0, 5, 2])
    updates = np.zeros(3, dtype=np.int64)
    scores = np.zeros((n, 3))
    losses = np.zeros(n)
    counts = np.zeros(n, dtype=np.int64)
    failed = _ovo_dos_learn_block(
        W, rank, *csr(X), 0, n, targets, PAIRS_OF, FIRST, MODES[mode], C, seen.copy(),
        P, G, np.empty(2 * rank), scores, losses, counts, updates,
    )  # fmt: skip
    assert failed == -1
    t = seen.copy()
    for i in range(n):
        z = Z[i]
        expected = [naive.dos_score(U[p], V[p], z) for p in range(3)]
        np.testing.assert_allclose(scores[i], expected, rtol=1e-10, atol=1e-12)
        loss, count = 0.0, 0
        for p in PAIRS_OF[targets[i]]:
            y = 1.0 if FIRST[p] == targets[i] else -1.0
            U[p], V[p], score, nu = naive.dos_pa_step(U[p], V[p], z, y, mode, C, t[p])
            t[p] += 1
            loss += max(0.0, 1.0 - y * score)
            count += nu > 0
        assert losses[i] == pytest.approx(loss, rel=1e-9, abs=1e-12)
        assert counts[i] == count
    for p in range(3):
        np.testing.assert_allclose(W[:, 2 * rank * p : 2 * rank * p + rank].T, U[p], atol=1e-9)
        np.testing.assert_allclose(
            W[:, 2 * rank * p + rank : 2 * rank * (p + 1)].T, V[p], atol=1e-9
        )
    assert updates.sum() == counts.sum()


def test_learn_block_stops_before_a_row_whose_scores_overflow():
    """Row 0 (x = 0) scores from the bias row only and is learned; row 1's projection is
    ~1e200, its squared norm overflows: nothing of it is learned."""
    W = np.empty((2, 3 * 2))  # d = 1, rank 1, three pairs
    W[0], W[1] = 1e200, 0.1
    X = np.array([[0.0], [1.0]])
    Z = np.hstack([X, np.ones((2, 1))])
    P, G = Z @ W, Z @ Z.T
    scores, losses, counts = np.zeros((2, 3)), np.zeros(2), np.zeros(2, dtype=np.int64)
    failed = _ovo_dos_learn_block(
        W, 1, *csr(X), 0, 2, np.array([0, 1]), PAIRS_OF, FIRST, 0, 1.0, np.zeros(3, np.int64),
        P, G, np.empty(2), scores, losses, counts, np.zeros(3, np.int64),
    )  # fmt: skip
    assert failed == 1 and counts[0] == 2 and counts[1] == 0
    assert np.all(np.isfinite(scores[0])) and not np.isfinite(scores[1, 0])
    assert np.array_equal(W[0], np.full(6, 1e200))  # x = 0 moved only the bias row


@pytest.mark.parametrize("mode,C", [("pa", 1.0), ("pa1", 0.05), ("pa2", 0.3)])
@pytest.mark.parametrize("bias", [1.0, 0.0], ids=["intercept", "no-intercept"])
def test_linear_learn_block_is_the_pa_step_of_each_pair_in_order(mode, C, bias):
    rng = np.random.default_rng(2)
    d, n = 4, 10
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.7)
    X[3] = 0.0  # no intercept: |z|^2 = 0, no step
    targets = rng.integers(3, size=n)
    W = rng.standard_normal((d + 1, 3)) * 0.3
    w = [W[:, p].copy() for p in range(3)]
    Z = np.hstack([X, np.full((n, 1), bias)])
    P, G = Z @ W, Z @ Z.T
    seen, updates = np.zeros(3, np.int64), np.zeros(3, np.int64)
    scores, losses, counts = np.zeros((n, 3)), np.zeros(n), np.zeros(n, dtype=np.int64)
    failed = _ovo_linear_learn_block(
        W, bias, *csr(X), 0, n, targets, PAIRS_OF, FIRST, MODES[mode], C, seen, P, G,
        scores, losses, counts, updates,
    )  # fmt: skip
    assert failed == -1
    for i in range(n):
        np.testing.assert_allclose(scores[i], [w[p] @ Z[i] for p in range(3)], atol=1e-12)
        loss, count = 0.0, 0
        for p in PAIRS_OF[targets[i]]:
            y = 1.0 if FIRST[p] == targets[i] else -1.0
            w[p], score, tau = naive.linear_pa_step(w[p], Z[i], y, mode, C)
            loss += max(0.0, 1.0 - y * score)
            count += tau > 0
        assert losses[i] == pytest.approx(loss, rel=1e-10, abs=1e-12)
        assert counts[i] == count
    np.testing.assert_allclose(W, np.column_stack(w), atol=1e-12)
    assert seen.tolist() == [np.sum((targets == i) | (targets == j)) for i, j in PAIRS]
