"""core.kernels.separation against plain numpy: norms, the dilation update (with its
power-of-two renormalisation) and Algorithm 7's pivoted Cholesky."""

import numpy as np
import pytest

from core.kernels.separation import (
    PASSIVE,
    UPDATED,
    _perceptron_step,
    _psd_counterexample,
    _sep_dilation_update,
    _sep_direction,
    _sep_scaled_norm,
    _sep_score,
)


def test_scaled_norm_and_direction():
    rng = np.random.default_rng(0)
    for _ in range(50):
        values = rng.standard_normal(5) * 10.0 ** rng.integers(-200, 200)
        indices = np.arange(5, dtype=np.int64)
        m, r = _sep_scaled_norm(indices, values, 1.0)
        z = np.append(values, 1.0)
        assert m == np.abs(z).max()
        assert r == pytest.approx(np.linalg.norm(z / m), rel=1e-14)
        a = np.empty(6)
        assert _sep_direction(indices, values, 1.0, -1.0, a)
        np.testing.assert_allclose(a, -(z / m) / np.linalg.norm(z / m), rtol=1e-13)
        w = rng.standard_normal(6)
        assert _sep_score(w, indices, values, 1.0) == pytest.approx(-(w @ a), rel=1e-12)
    assert _sep_scaled_norm(np.zeros(0, np.int64), np.zeros(0), 0.0) == (0.0, 0.0)


def test_perceptron_step_is_mistake_driven():
    w = np.array([1.0, 0.0])
    indices, values = np.array([0], dtype=np.int64), np.array([2.0])
    assert _perceptron_step(w, indices, values, 0.0, 1.0) == (1.0, PASSIVE)
    score, status = _perceptron_step(w, indices, values, 0.0, -1.0)
    assert (score, status) == (1.0, UPDATED) and np.array_equal(w, [0.0, 0.0])


def test_dilation_update_matches_numpy_and_renormalises():
    rng = np.random.default_rng(1)
    n = 5
    for beta in (0.5, 2.0, np.sqrt(4 / 6)):
        w, B, eta = rng.standard_normal(n), rng.standard_normal((n, n)), 0.3
        if beta == 2.0:
            B *= 2.0**255  # the update pushes max |B| past 2^256: B and eta trade a power of 2
        a = rng.standard_normal(n)
        b = B.T @ a
        b /= np.linalg.norm(b)
        w_ref = w + eta * B @ b
        product_ref = eta * (B @ (np.eye(n) + (beta - 1) * np.outer(b, b)))
        changed, eta_new = _sep_dilation_update(w, B, eta, a, beta, np.empty(n), np.empty(n))
        assert changed
        np.testing.assert_allclose(w, w_ref, rtol=1e-12)
        np.testing.assert_allclose(eta_new * B, product_ref, rtol=1e-12)
        assert np.abs(B).max() <= 2.0**256
        if beta == 2.0:
            assert eta_new != eta and np.log2(eta_new / eta) == np.round(np.log2(eta_new / eta))
    w, B = np.zeros(3), np.eye(3)
    assert _sep_dilation_update(w, B, 1.0, np.zeros(3), 0.5, np.empty(3), np.empty(3)) == (
        False,
        1.0,
    )


def reference_schur_check(A, v):
    return float(v @ A @ v)


def test_psd_kernel_factor_and_vector():
    rng = np.random.default_rng(2)
    for _ in range(100):
        n = int(rng.integers(2, 12))
        G = rng.standard_normal((n, n))
        A = G @ G.T - rng.uniform(0, 3) * np.eye(n)
        S, R, perm, v = A.copy(), np.zeros((n, n)), np.empty(n, np.int64), np.empty(n)
        found = _psd_counterexample(S, 1e-12, R, perm, v)
        assert found == (np.linalg.eigvalsh(A).min() < -1e-9)
        if found:
            assert reference_schur_check(A, v) < 0 and np.linalg.norm(v) == pytest.approx(1.0)
    # positive definite: the full pivoted factor reproduces A
    A = np.array([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 9.0]])
    S, R, perm, v = A.copy(), np.zeros((3, 3)), np.empty(3, np.int64), np.empty(3)
    assert not _psd_counterexample(S, 0.0, R, perm, v)
    P = np.eye(3)[perm]  # row k of P picks original index perm[k]
    np.testing.assert_allclose(R.T @ R, P @ A @ P.T, rtol=1e-12)
    assert list(perm) == [2, 1, 0]  # pivots on the largest residual diagonal entry
