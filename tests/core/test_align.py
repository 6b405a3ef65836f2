"""Invariants of core/align.py: symmetries (eqs 11-16), Procrustes (26-27), averaging (28)."""

import math

import numpy as np
import pytest
import scipy.linalg

from core.align import (
    align,
    aligned_average,
    boost,
    min_norm_boost,
    procrustes,
    running_average,
)
from core.dos import DoSClassifier
from core.linear import LinearPA

RTOL = 1e-9


def random_model(rng, rank=3, n_columns=7, scale=1.0):
    U, V = rng.standard_normal((2, rank, n_columns)) * scale
    return U, V


def random_orthogonal(rng, d):
    """Haar-distributed orthogonal matrix (QR of a Gaussian with the sign of R's diagonal)."""
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    return Q * np.sign(np.diag(R))


def classifier(U, V):
    return U.T @ U - V.T @ V


def sq_norm(U, V):
    return float(np.sum(U * U) + np.sum(V * V))


def assert_same_classifier(first, second, scale=None):
    """U^T U - V^T V agree to RTOL relative to the parameters' squared norm."""
    if scale is None:
        scale = max(sq_norm(*first), sq_norm(*second), 1e-300)
    difference = np.abs(classifier(*first) - classifier(*second)).max()
    assert difference <= RTOL * scale, difference / scale


def dos_scores(U, V, X):
    Z = np.c_[X, np.ones(len(X))]
    return np.sum((Z @ U.T) ** 2, axis=1) - np.sum((Z @ V.T) ** 2, axis=1)


def dos_model(U, V):
    """A DoSClassifier holding (U, V) (shape (rank, n_features + 1))."""
    rank, n_columns = U.shape
    model = DoSClassifier(n_features=n_columns - 1, rank=rank)
    state = model.get_state()
    state["arrays"]["U_"], state["arrays"]["V_"] = np.array(U), np.array(V)
    model.set_state(state)
    return model


# -- boosts and rotations (eqs 11-14) ----------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_boosts_and_rotations_leave_the_classifier_unchanged(seed):
    rng = np.random.default_rng(seed)
    U, V = random_model(rng)
    X = rng.standard_normal((20, U.shape[1] - 1))
    scores = dos_model(U, V).score_many(X)
    assert np.allclose(scores, dos_scores(U, V, X), rtol=1e-12)
    for phi in (-2.0, -0.3, 0.0, 0.7, 2.0):
        boosted = boost(U, V, phi)
        assert_same_classifier((U, V), boosted)
        scale = sq_norm(*boosted)
        assert np.abs(dos_model(*boosted).score_many(X) - scores).max() <= RTOL * scale * (
            1 + np.abs(X).max() ** 2 * X.shape[1]
        )
    omega, lam = random_orthogonal(rng, 3), random_orthogonal(rng, 3)
    rotated = (omega @ U, lam @ V)
    assert_same_classifier((U, V), rotated)
    assert np.allclose(dos_model(*rotated).score_many(X), scores, rtol=RTOL, atol=RTOL)
    # a boost really moves the parameters (and changes their norm): the check is not vacuous
    assert not np.allclose(boost(U, V, 0.7)[0], U)
    assert not math.isclose(sq_norm(*boost(U, V, 0.7)), sq_norm(U, V))


def test_boosts_compose_additively():
    rng = np.random.default_rng(0)
    U, V = random_model(rng)
    twice = boost(*boost(U, V, 0.4), -1.1)
    once = boost(U, V, -0.7)
    assert np.allclose(twice[0], once[0], rtol=1e-12, atol=1e-12)
    assert np.allclose(twice[1], once[1], rtol=1e-12, atol=1e-12)


# -- minimum-norm boost (eqs 15-16) -------------------------------------------------------------
@pytest.mark.parametrize("seed", range(10))
def test_min_norm_boost_is_the_minimum_over_a_dense_grid(seed):
    rng = np.random.default_rng(seed)
    U, V = random_model(rng, rank=2, n_columns=5)
    V = V + rng.uniform(-1.5, 1.5) * U  # correlated U and V: a large optimal boost
    U1, V1, phi = min_norm_boost(U, V)
    # eq (16), the paper's form
    ratio = 2 * np.sum(U * V) / sq_norm(U, V)
    assert phi == pytest.approx(0.5 * np.arctanh(ratio), rel=1e-10, abs=1e-12)
    # the returned arrays are the boost by phi*
    expected = boost(U, V, phi)
    assert np.allclose(U1, expected[0], rtol=1e-10, atol=1e-12)
    assert np.allclose(V1, expected[1], rtol=1e-10, atol=1e-12)
    assert_same_classifier((U, V), (U1, V1))
    assert abs(np.sum(U1 * V1)) <= 1e-12 * sq_norm(U, V)
    # never increases the norm; no boost on a grid does better
    best = sq_norm(U1, V1)
    assert best <= sq_norm(U, V) * (1 + 1e-12)
    grid = np.linspace(phi - 4.0, phi + 4.0, 8001)
    norms = np.array([sq_norm(*boost(U, V, p)) for p in grid])
    assert best <= norms.min() * (1 + 1e-12)
    assert abs(grid[np.argmin(norms)] - phi) <= 2e-3
    # closed form of the minimum: |U + V| |U - V|
    assert best == pytest.approx(np.linalg.norm(U + V) * np.linalg.norm(U - V), rel=1e-10)


def test_min_norm_boost_is_idempotent_and_boost_invariant():
    rng = np.random.default_rng(1)
    U, V = random_model(rng)
    U1, V1, _ = min_norm_boost(U, V)
    for phi in (-1.5, 0.2, 3.0):
        U2, V2, _ = min_norm_boost(*boost(U, V, phi))
        assert np.allclose(U2, U1, rtol=1e-9, atol=1e-9)
        assert np.allclose(V2, V1, rtol=1e-9, atol=1e-9)
    U3, V3, phi3 = min_norm_boost(U1, V1)
    assert abs(phi3) < 1e-12
    assert np.allclose(U3, U1, rtol=1e-12, atol=1e-14)


def test_min_norm_boost_degenerate_cases_are_finite():
    rng = np.random.default_rng(2)
    U, _ = random_model(rng)
    zero = np.zeros_like(U)
    # U = V = 0: already minimal
    U1, V1, phi = min_norm_boost(zero, zero)
    assert phi == 0.0 and not U1.any() and not V1.any()
    # U = V and U = -V: the zero classifier; the infimum (0) is reached as phi -> +-inf
    for V, sign in ((U, 1), (-U, -1)):
        U1, V1, phi = min_norm_boost(U, V)
        assert np.all(np.isfinite(U1)) and np.all(np.isfinite(V1))
        assert not U1.any() and not V1.any()
        assert phi == sign * math.inf
        # boosts shrink (U, V) towards zero in that direction: zero is the infimum
        assert sq_norm(*boost(U, V, sign * 10.0)) < 1e-6 * sq_norm(U, V)
    # almost degenerate: rounding would push the artanh argument beyond +-1
    V = U * (1 + 1e-16) + 1e-17 * rng.standard_normal(U.shape)
    U1, V1, phi = min_norm_boost(U, V)
    assert np.all(np.isfinite(U1)) and np.all(np.isfinite(V1))
    assert phi > 10.0  # large and positive, or +inf if U - V rounds to zero
    assert sq_norm(U1, V1) <= 1e-12 * sq_norm(U, V)
    # one matrix zero, the other not: a genuine classifier, finite boost
    U1, V1, phi = min_norm_boost(U, zero)
    assert phi == 0.0 and np.array_equal(U1, U) and not V1.any()


def test_validation():
    rng = np.random.default_rng(0)
    U, V = random_model(rng)
    with pytest.raises(ValueError, match="phi"):
        boost(U, V, math.nan)
    with pytest.raises(ValueError, match="phi"):
        boost(U, V, True)
    with pytest.raises(ValueError, match="same shape"):
        min_norm_boost(U, V[:, :-1])
    with pytest.raises(ValueError, match="same shape"):
        procrustes(U[0], V[0])
    bad = U.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="finite"):
        min_norm_boost(bad, V)
    for m in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="m "):
            aligned_average((U, V), (U, V), m)
    with pytest.raises(ValueError, match="average is required"):
        aligned_average(None, (U, V), 2)


# -- orthogonal Procrustes (eqs 26-27) ---------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_procrustes_is_orthogonal_and_optimal(seed):
    rng = np.random.default_rng(seed)
    A, B = random_model(rng, rank=4, n_columns=9)
    Q = procrustes(A, B)
    assert np.allclose(Q.T @ Q, np.eye(4), atol=1e-12)
    best = np.linalg.norm(Q @ A - B)
    for _ in range(300):
        R = random_orthogonal(rng, 4)
        assert best <= np.linalg.norm(R @ A - B) + 1e-12
    # scipy solves min |A R - B| over R; ours is its transpose problem
    R, _ = scipy.linalg.orthogonal_procrustes(A.T, B.T)
    assert np.allclose(Q, R.T, atol=1e-10)
    # a known rotation is recovered exactly
    omega = random_orthogonal(rng, 4)
    assert np.allclose(procrustes(omega @ A, A), omega.T, atol=1e-10)


def test_procrustes_degenerate():
    Q = procrustes(np.zeros((3, 5)), np.zeros((3, 5)))
    assert np.allclose(Q.T @ Q, np.eye(3))


# -- alignment (section 3.4, steps 1-2) --------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_align_recovers_the_reference_from_a_rotated_boosted_copy(seed):
    rng = np.random.default_rng(seed)
    U, V = random_model(rng, rank=3, n_columns=8)
    omega = random_orthogonal(rng, 3)
    phi = rng.uniform(-2, 2)
    # one rotation for U and V: boosts and the rotation commute, alignment is exact
    (U2, V2), (U1, V1) = align_pair((U, V), boost(omega @ U, omega @ V, phi))
    reference = min_norm_boost(U, V)
    assert np.allclose(U1, reference[0], rtol=1e-9, atol=1e-9)
    assert np.allclose(V1, reference[1], rtol=1e-9, atol=1e-9)
    assert np.allclose(U2, reference[0], rtol=1e-9, atol=1e-9)
    assert np.allclose(V2, reference[1], rtol=1e-9, atol=1e-9)


def align_pair(reference, other):
    aligned, reference_min_norm = align(reference, other)
    # the aligned model is always the same classifier as `other`
    assert_same_classifier(aligned, other)
    return aligned, reference_min_norm


def test_align_with_independent_rotations():
    rng = np.random.default_rng(7)
    rank, n_columns = 3, 8
    omega, lam = random_orthogonal(rng, rank), random_orthogonal(rng, rank)
    # U V^T = 0 (orthogonal row spaces): <Omega U, Lambda V> = 0 too, alignment is exact
    basis = random_orthogonal(rng, n_columns)
    U = rng.standard_normal((rank, rank)) @ basis[:rank]
    V = rng.standard_normal((rank, rank)) @ basis[rank : 2 * rank]
    (U2, V2), (U1, V1) = align_pair((U, V), boost(omega @ U, lam @ V, 0.9))
    assert np.allclose(U2, U, atol=1e-9) and np.allclose(V2, V, atol=1e-9)
    assert np.allclose(U1, U, atol=1e-12) and np.allclose(V1, V, atol=1e-12)
    # general (U, V): the classifier is kept (checked in align_pair), the alignment is a
    # heuristic and the arrays need not match the reference
    U, V = random_model(rng, rank, n_columns)
    align_pair((U, V), boost(omega @ U, lam @ V, 0.9))


# -- aligned averages (eq 28) ------------------------------------------------------------------
@pytest.mark.parametrize("m", [2, 3, 10])
def test_aligned_average_of_a_model_with_a_symmetric_copy_scores_like_the_model(m):
    rng = np.random.default_rng(m)
    U, V = random_model(rng)
    X = rng.standard_normal((30, U.shape[1] - 1))
    scores = dos_scores(U, V, X)
    omega = random_orthogonal(rng, 3)
    copy = boost(omega @ U, omega @ V, -1.3)
    Ua, Va = aligned_average(boost(U, V, 0.5), copy, m)
    assert_same_classifier((Ua, Va), (U, V))
    assert np.allclose(dos_model(Ua, Va).score_many(X), scores, rtol=1e-9, atol=1e-9)


def test_aligned_average_of_opposite_models_is_not_zero():
    rng = np.random.default_rng(4)
    U, V = random_model(rng)
    X = rng.standard_normal((30, U.shape[1] - 1))
    scores = dos_scores(U, V, X)
    # the paper's example: (U, V) and (-U, -V) are the same classifier...
    assert np.allclose(dos_scores(-U, -V, X), scores)
    # ...whose plain average is the zero model, which scores 0 everywhere
    plain = (0.5 * (U + -U), 0.5 * (V + -V))
    assert not plain[0].any() and not plain[1].any()
    assert not dos_model(*plain).score_many(X).any()
    # the aligned average is the min-norm form of (U, V): same scores
    Ua, Va = aligned_average((U, V), (-U, -V), 2)
    assert sq_norm(Ua, Va) == pytest.approx(sq_norm(*min_norm_boost(U, V)[:2]), rel=1e-12)
    assert np.allclose(dos_model(Ua, Va).score_many(X), scores, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("m", [1, 2, 5])
def test_averaging_identical_models_is_the_identity_up_to_the_boost(m):
    rng = np.random.default_rng(m)
    U, V = random_model(rng)
    U1, V1, _ = min_norm_boost(U, V)
    Ua, Va = aligned_average((U, V), (U, V), m)
    assert np.allclose(Ua, U1, rtol=1e-12, atol=1e-12)
    assert np.allclose(Va, V1, rtol=1e-12, atol=1e-12)
    # an average already in min-norm form is kept as is
    Ub, Vb = aligned_average((U1, V1), (U, V), m)
    assert np.allclose(Ub, U1, rtol=1e-12, atol=1e-12)


def test_aligned_average_of_degenerate_models_is_finite():
    rng = np.random.default_rng(5)
    U, V = random_model(rng)
    zero = np.zeros_like(U)
    for average, new in [
        ((zero, zero), (zero, zero)),
        ((U, U), (U, V)),
        ((U, V), (U, U)),
        ((U, V), (-V, -V)),
        ((zero, zero), (U, V)),
    ]:
        Ua, Va = aligned_average(average, new, 2)
        assert np.all(np.isfinite(Ua)) and np.all(np.isfinite(Va))
    # a zero classifier in the average weighs the other model by 1/2
    Ua, Va = aligned_average((U, U), (U, V), 2)
    U1, V1, _ = min_norm_boost(U, V)
    assert np.allclose(Ua, U1 / 2) and np.allclose(Va, V1 / 2)


# -- running averages of whole states ----------------------------------------------------------
def binary_stream(n=70, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1, -1)
    return X, y


def test_running_average_of_linear_states_is_the_mean_of_snapshots():
    X, y = binary_stream()
    model = LinearPA(n_features=4, mode="pa1", C=0.5)
    average, snapshots = None, []
    for i, (x_i, y_i) in enumerate(zip(X, y, strict=True)):
        model.learn_one(x_i, y_i)
        if (i + 1) % 10 == 0:
            state = model.get_state()
            snapshots.append(state["arrays"]["w_"].copy())
            average = running_average(average, state, len(snapshots))
    assert len(snapshots) == 7
    mean = np.mean(snapshots, axis=0)
    assert np.allclose(average["arrays"]["w_"], mean, rtol=1e-12, atol=1e-15)
    assert not np.allclose(mean, model.w_)  # the average really differs from the live model
    # scalars and hyperparameters come from the newest state; the result loads
    assert average["scalars"] == model.get_state()["scalars"]
    target = LinearPA(n_features=4, mode="pa1", C=0.5)
    target.set_state(average)
    assert np.allclose(target.score_many(X), X @ mean[:-1] + mean[-1])


def test_running_average_of_identical_states_is_the_identity():
    X, y = binary_stream()
    linear = LinearPA(n_features=4)
    dos = DoSClassifier(n_features=4, rank=2, seed=3)
    linear.learn_many(X, y)
    dos.learn_many(X, y)
    state = linear.get_state()
    average = running_average(None, state, 1)
    for m in range(2, 5):
        average = running_average(average, state, m)
    assert np.array_equal(average["arrays"]["w_"], linear.w_)
    state = dos.get_state()
    U1, V1, _ = min_norm_boost(dos.U_, dos.V_)
    average = running_average(None, state, 1)
    assert np.allclose(average["arrays"]["U_"], U1, rtol=1e-12, atol=1e-14)
    for m in range(2, 5):
        average = running_average(average, state, m)
    assert np.allclose(average["arrays"]["U_"], U1, rtol=1e-10, atol=1e-12)
    assert np.allclose(average["arrays"]["V_"], V1, rtol=1e-10, atol=1e-12)
    loaded = DoSClassifier(n_features=4, rank=2, seed=3)
    loaded.set_state(average)
    assert np.allclose(loaded.score_many(X), dos.score_many(X), rtol=1e-9, atol=1e-9)


def test_running_average_aligns_dos_pairs_of_composite_states():
    rng = np.random.default_rng(6)
    U, V = random_model(rng, rank=2, n_columns=5)
    w_old, w_new = rng.standard_normal((2, 5))

    def state(U, V, w, counts, n_seen):
        return {
            "kind": "Composite",
            "params": {"members": [{"kind": "DoSClassifier", "params": {"rank": 2}}]},
            "arrays": {
                "0.U_": U,
                "0.V_": V,
                "3.w_": w,
                "counts_": counts,
                "aU_": U[0],
                "aV_": V[0],
            },
            "scalars": {"n_seen_": n_seen, "0.n_seen_": n_seen},
        }

    first = state(U, V, w_old, np.array([1, 2]), 10)
    second = state(-U, -V, w_new, np.array([3, 4]), 20)
    average = running_average(running_average(None, first, 1), second, 2)
    arrays = average["arrays"]
    # the DoS pair is aligned: (U, V) and (-U, -V) average to (U, V)'s min-norm form
    U1, V1, _ = min_norm_boost(U, V)
    assert np.allclose(arrays["0.U_"], U1, atol=1e-12)
    assert np.allclose(arrays["0.V_"], V1, atol=1e-12)
    # other float arrays are plain means, also "aU_"/"aV_" (not named U_ / V_)
    assert np.allclose(arrays["3.w_"], (w_old + w_new) / 2, rtol=1e-15)
    assert np.allclose(arrays["aU_"], 0.0) and np.allclose(arrays["aV_"], 0.0)
    # integer arrays and scalars come from the newest state
    assert np.array_equal(arrays["counts_"], [3, 4])
    assert average["scalars"] == {"n_seen_": 20, "0.n_seen_": 20}
    assert list(arrays) == list(second["arrays"])
    assert all(a.flags.c_contiguous for a in arrays.values())
    # the result shares nothing with its inputs
    assert not any(np.shares_memory(arrays[k], second["arrays"][k]) for k in arrays)
    average["params"]["members"][0]["params"]["rank"] = 99
    assert second["params"]["members"][0]["params"]["rank"] == 2


def test_running_average_refuses_mismatched_states():
    X, y = binary_stream()
    a = LinearPA(n_features=4).get_state()
    b = LinearPA(n_features=4, mode="pa1").get_state()
    c = LinearPA(n_features=3).get_state()
    d = DoSClassifier(n_features=4).get_state()
    with pytest.raises(ValueError, match="different models"):
        running_average(a, b, 2)
    with pytest.raises(ValueError, match="different models"):
        running_average(a, d, 2)
    c["params"] = a["params"]
    with pytest.raises(ValueError, match="shape"):
        running_average(a, c, 2)
    with pytest.raises(ValueError, match="average_state is required"):
        running_average(None, a, 3)
    with pytest.raises(ValueError, match="get_state"):
        running_average(None, {"arrays": {}}, 1)
    odd = {"kind": "K", "params": {}, "arrays": {"U_": np.zeros((2, 3)), "V_": np.zeros((3, 3))}}
    odd["scalars"] = {}
    with pytest.raises(ValueError, match="one shape"):
        running_average(None, odd, 1)


def test_running_average_of_degenerate_dos_states_is_finite():
    model = DoSClassifier(n_features=3, rank=2, seed=2)
    zero = model.get_state()
    zero["arrays"]["U_"][...] = 0.0
    zero["arrays"]["V_"][...] = 0.0
    same = model.get_state()
    same["arrays"]["V_"] = same["arrays"]["U_"].copy()  # U = V: the zero classifier
    for first, second in ((zero, same), (same, zero), (same, model.get_state())):
        average = running_average(running_average(None, first, 1), second, 2)
        for array in average["arrays"].values():
            assert np.all(np.isfinite(array))
        model.set_state(average)
    # the zero model and U = V average to the zero model
    model.set_state(running_average(running_average(None, zero, 1), same, 2))
    assert not model.U_.any() and not model.V_.any()


# -- spectral canonical form (exact symmetry breaking) ----------------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_canonical_keeps_the_classifier_and_reaches_the_nuclear_norm(seed):
    from core.align import canonical

    rng = np.random.default_rng(100 + seed)
    U, V = random_model(rng, rank=3, n_columns=9)
    A, B = canonical(U, V)
    assert_same_classifier((A, B), (U, V))
    M = U.T @ U - V.T @ V
    nuclear = np.sum(np.abs(np.linalg.eigvalsh(M)))
    assert sq_norm(A, B) == pytest.approx(nuclear, rel=1e-10)
    Ub, Vb, _ = min_norm_boost(U, V)
    assert sq_norm(A, B) <= sq_norm(Ub, Vb) * (1 + 1e-12)
    # rows are orthogonal (eigenvectors) and sorted by decreasing length
    gram = A @ A.T
    assert np.allclose(gram, np.diag(np.diag(gram)), atol=1e-9)
    assert np.all(np.diff(np.diag(gram)) <= 1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_spectral_alignment_is_exact_under_independent_rotations_and_boosts(seed):
    """The paper's alignment is only a heuristic for independent rotations (see
    test_align_with_independent_rotations); the spectral one recovers the reference and the
    aligned average of a model with such a copy scores exactly like the model."""
    from core.align import canonical

    rng = np.random.default_rng(200 + seed)
    U, V = random_model(rng, rank=3, n_columns=8)
    omega, lam = random_orthogonal(rng, 3), random_orthogonal(rng, 3)
    copy = boost(omega @ U, lam @ V, rng.uniform(-2, 2))
    (U2, V2), (U1, V1) = align((U, V), copy, method="spectral")
    A, B = canonical(U, V)
    assert np.allclose(U1, A, atol=1e-9) and np.allclose(V1, B, atol=1e-9)
    assert np.allclose(U2, A, atol=1e-8) and np.allclose(V2, B, atol=1e-8)
    X = rng.standard_normal((20, 7))
    for m in (2, 5):
        Ua, Va = aligned_average((U, V), copy, m, method="spectral")
        np.testing.assert_allclose(dos_scores(Ua, Va, X), dos_scores(U, V, X), rtol=1e-8, atol=1e-8)
    # the paper's alignment is close but not exact for the same copy
    Up, Vp = aligned_average((U, V), copy, 2, method="paper")
    scores = dos_scores(U, V, X)
    assert np.max(np.abs(dos_scores(Up, Vp, X) - scores)) > 1e-6 * np.max(np.abs(scores))


def test_canonical_degenerate_inputs():
    from core.align import canonical

    zero = np.zeros((2, 4))
    A, B = canonical(zero, zero)
    assert not np.any(A) and not np.any(B)
    U = np.arange(8.0).reshape(2, 4)
    A, B = canonical(U, U)  # the zero classifier
    assert np.allclose(A, 0, atol=1e-7) and np.allclose(B, 0, atol=1e-7)
    wide = np.random.default_rng(0).standard_normal((4, 3))  # rank > columns
    A, B = canonical(wide, wide[::-1] * 0.5)
    assert_same_classifier((A, B), (wide, wide[::-1] * 0.5))
    with pytest.raises(ValueError, match="method"):
        align((U, U), (U, U), method="magic")


def _wide_range_pair(rng, scale: float, layout: str):
    W = rng.standard_normal((3001, 8)) * scale
    W[::7] *= 1e-12  # a wide dynamic range
    U, V = W[:, :4].T, W[:, 4:].T  # DoS's storage: transposed views of (n_features, 2 rank)
    if layout == "contiguous":
        U, V = np.ascontiguousarray(U), np.ascontiguousarray(V)
    return U, V


@pytest.mark.parametrize("layout", ["contiguous", "views"])
def test_fused_kernels_give_numpy_values_bit_for_bit(layout):
    from tests import naive

    rng = np.random.default_rng(5)
    for scale in (1e-140, 1e-3, 1.0, 1e140):
        U, V = _wide_range_pair(rng, scale, layout)
        U1, V1, _ = min_norm_boost(U, V)
        U0, V0 = naive.min_norm_boost(U, V)
        assert U1.tobytes() == U0.tobytes() and V1.tobytes() == V0.tobytes()
        assert U1.strides == U0.strides


def test_streamed_fold_is_section_3_4_step_by_step_and_independent_of_layout():
    """The fold streams over the columns: its values are the naive step-by-step fold's up to
    rounding, bit for bit the same for every memory layout of its inputs, in place or not."""
    from tests import naive

    for scale in (1e-140, 1e-3, 1.0, 1e140):
        for m in (2, 3, 7, 50_000):
            rng = np.random.default_rng(m)
            new = _wide_range_pair(rng, scale, "views")
            previous = _wide_range_pair(rng, scale, "views")
            expected = naive.aligned_average(previous, new, m)
            got = aligned_average(previous, new, m)
            for a, b in zip(got, expected, strict=True):
                assert np.allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())
            contiguous = [tuple(np.ascontiguousarray(a) for a in p) for p in (previous, new)]
            again = aligned_average(*contiguous, m)
            assert all(a.tobytes() == b.tobytes() for a, b in zip(again, got, strict=True))
            # in place, into the average's own storage (feature-major views)
            in_place = aligned_average(previous, new, m, out=previous)
            assert in_place[0] is previous[0]
            assert all(
                np.ascontiguousarray(a).tobytes() == b.tobytes()
                for a, b in zip(previous, got, strict=True)
            )
        first = aligned_average(None, new, 1)
        for a, b in zip(first, naive.min_norm_boost(*new), strict=True):
            assert np.allclose(a, b, rtol=1e-13, atol=1e-13 * np.abs(b).max())


def test_streamed_fold_degenerate_and_refused_inputs():
    rng = np.random.default_rng(3)
    U, V = rng.standard_normal((2, 3, 50))
    zero = np.zeros_like(U)
    # the zero classifier (U = V, or U = V = 0) folds in as zeros (min_norm_boost's limit)
    for pair in ((U, U), (zero, zero), (U, -U)):
        A, B = aligned_average(None, pair, 1)
        assert not A.any() and not B.any() and not np.signbit(A).any()
        A, B = aligned_average((U, V), pair, 4)
        U1, V1, _ = min_norm_boost(U, V)
        assert np.allclose(A, 0.75 * U1) and np.allclose(B, 0.75 * V1)
    # an average that is the zero classifier takes the new model's share only
    A, B = aligned_average((zero, zero), (U, V), 4)
    U2, V2, _ = min_norm_boost(U, V)
    assert np.allclose(np.abs(A).sum(), 0.25 * np.abs(U2).sum())
    for bad in (np.inf, np.nan):
        broken = U.copy()
        broken[1, 7] = bad
        with pytest.raises(ValueError, match="finite"):
            aligned_average((U, V), (broken, V), 2)
        with pytest.raises(ValueError, match="finite"):
            aligned_average((broken, V), (U, V), 2)
    with pytest.raises(ValueError, match="too large"):
        aligned_average((U, V), (U * 1e160, V), 2)
    with pytest.raises(ValueError, match="out must be"):
        aligned_average((U, V), (U, V), 2, out=(np.empty((3, 49)), np.empty((3, 49))))
    with pytest.raises(ValueError, match="shapes"):
        aligned_average((U[:, :10], V[:, :10]), (U, V), 2)
    with pytest.raises(ValueError, match="required"):
        aligned_average(None, (U, V), 2)
    empty = np.zeros((3, 0))
    A, B = aligned_average((empty, empty), (empty, empty), 2)
    assert A.shape == (3, 0)


def test_running_average_of_float32_dos_states_stays_float32():
    """Aligned in float64, written back as float32: the average of identical float32 states is
    the min-norm boost of the model, rounded to float32, and loads into a float32 model."""
    X, y = binary_stream()
    dos = DoSClassifier(n_features=4, rank=2, seed=3, dtype="float32")
    dos.learn_many(X, y)
    state = dos.get_state()
    average = running_average(None, state, 1)
    for m in range(2, 5):
        average = running_average(average, state, m)
    assert average["arrays"]["U_"].dtype == average["arrays"]["V_"].dtype == np.float32
    U1, V1, _ = min_norm_boost(dos.U_.astype(np.float64), dos.V_.astype(np.float64))
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(average["arrays"]["U_"], U1, rtol=4 * eps, atol=4 * eps)
    np.testing.assert_allclose(average["arrays"]["V_"], V1, rtol=4 * eps, atol=4 * eps)
    loaded = DoSClassifier(n_features=4, rank=2, seed=3, dtype="float32")
    loaded.set_state(average)
    np.testing.assert_allclose(loaded.score_many(X), dos.score_many(X), rtol=1e-4, atol=1e-4)


def test_running_average_into_place_refuses_before_writing_anything():
    """With ``into`` the average's own arrays, a state that cannot be folded (here its
    second DoS pair) leaves every array as it was: checks come before the first write."""
    rng = np.random.default_rng(8)
    arrays = {f"{k}.{name}": rng.standard_normal((2, 6)) for k in (0, 1) for name in ("U_", "V_")}
    arrays["2.w_"] = rng.standard_normal(6)
    average = {"kind": "K", "params": {}, "arrays": arrays, "scalars": {"n": 1}}
    new = {**average, "arrays": {k: v + 1.0 for k, v in arrays.items()}, "scalars": {"n": 2}}
    before = {k: v.copy() for k, v in arrays.items()}
    broken = {**new, "arrays": {**new["arrays"], "1.V_": np.full((2, 6), np.inf)}}
    with pytest.raises(ValueError, match="finite"):
        running_average(average, broken, 2, into=arrays)
    huge = {**new, "arrays": {**new["arrays"], "2.w_": np.full(6, -1.7e308)}}
    arrays["2.w_"][:] = 1.7e308
    before["2.w_"] = arrays["2.w_"].copy()
    with pytest.raises(ValueError, match="overflows"):
        running_average(average, huge, 2, into=arrays)
    assert all(np.array_equal(arrays[k], before[k]) for k in arrays)
    with pytest.raises(ValueError, match="into"):
        running_average(average, new, 2, into={"0.U_": arrays["0.U_"]})
    # and in place it is the fold of copies, bit for bit
    arrays["2.w_"][:] = before["2.w_"] = rng.standard_normal(6)
    expected = running_average(average, new, 3)
    result = running_average(average, new, 3, into=arrays)
    assert result["scalars"] == {"n": 2}
    assert all(result["arrays"][k] is arrays[k] for k in arrays)
    assert all(arrays[k].tobytes() == expected["arrays"][k].tobytes() for k in arrays)
