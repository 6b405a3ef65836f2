"""core.separation: the thesis's learners against plain-numpy references, their mistake bounds,
the ellipsoid's invariants, the oracles and batch algorithms, the ellipsoidal classifier."""

import math

import numpy as np
import pytest

from core.checks import check_estimator
from core.registry import from_state, state_digest
from core.separation import (
    EllipsoidalClassifier,
    EllipsoidPerceptron,
    FiniteConstraints,
    GramSchmidtFeatures,
    Perceptron,
    SemidefiniteConstraints,
    ShorPerceptron,
    ellipsoid_factors,
    ellipsoid_method,
    maxcut_constraints,
    modified_perceptron,
    parametric_rescaling_perceptron,
    psd_counterexample,
    read_sdpa,
    rescaling_perceptron,
)


# -- plain-numpy references (written from the thesis, by another route than the kernels) ---
def unit_example(x, y, bias=1.0):
    z = np.append(np.asarray(x, float), bias) if bias else np.asarray(x, float)
    norm = np.linalg.norm(z)
    return None if norm == 0 else y * z / norm


def naive_perceptron(examples, n, bias=1.0):
    """Algorithm 1 over a stream: returns w and the update flags."""
    w, flags = np.zeros(n + int(bias != 0)), []
    for x, y in examples:
        a = unit_example(x, y, bias)
        flags.append(a is not None and w @ a <= 0)
        if flags[-1]:
            w = w + a
    return w, flags


def naive_shor(examples, n, lam, eta, growth, bias=1.0):
    """Eq (2.5) with the explicit rescaling operator: D^{-1} <- D^{-1}(I + (1/lam - 1) b b^T)."""
    d = n + 1
    w, D_inv = np.zeros(d), np.eye(d)
    for x, y in examples:
        a = unit_example(x, y, bias)
        if a is None or w @ a > 0:
            continue
        b = D_inv.T @ a  # the counterexample in the mapped space, eq (2.4)
        b = b / np.linalg.norm(b)
        w = w + eta * D_inv @ b
        D_inv = D_inv @ (np.eye(d) + (1.0 / lam - 1.0) * np.outer(b, b))
        eta *= growth
    return w, D_inv, eta


def naive_ellipsoid(examples, n, blow_up, bias=1.0):
    """The ellipsoid method in shape-matrix form: E = {v : (v - c)^T P^{-1} (v - c) <= 1},
    central cut along a: c <- c + P a / ((n+1) sqrt(a^T P a)),
    P <- blow_up (P - 2/(n+1) P a a^T P / a^T P a)."""
    d = n + 1
    c, P = np.zeros(d), np.eye(d)
    for x, y in examples:
        a = unit_example(x, y, bias)
        if a is None or c @ a > 0:
            continue
        Pa = P @ a
        c = c + Pa / ((d + 1) * math.sqrt(a @ Pa))
        P = blow_up * (P - 2.0 / (d + 1) * np.outer(Pa, Pa) / (a @ Pa))
    return c, P


def separable_stream(rng, n, margin, count):
    """Unit vectors a with u.a >= margin for a known unit u (no intercept: x = y a)."""
    u = rng.standard_normal(n)
    u /= np.linalg.norm(u)
    rows = []
    while len(rows) < count:
        a = rng.standard_normal(n)
        a /= np.linalg.norm(a)
        if a @ u >= margin:
            rows.append(a)
    A = np.array(rows)
    A[0] = margin * u + math.sqrt(1 - margin**2) * np.linalg.qr(np.c_[u, A[1]])[0][:, 1]
    y = rng.choice([-1, 1], count)
    return A * y[:, None], y, u, A


def cycle_until_no_mistake(model, X, y, max_passes=500):
    for _ in range(max_passes):
        steps = model.learn_many(X, y)
        if steps.n_aggressive == 0:
            return True
    return False


# -- the generic suite ---------------------------------------------------------------------
FACTORIES = {
    "perceptron": lambda: Perceptron(n_features=3),
    "perceptron-no-intercept": lambda: Perceptron(n_features=3, fit_intercept=False),
    "ellipsoid-reset": lambda: EllipsoidPerceptron(n_features=3, rho=0.05),
    "ellipsoid-freeze": lambda: EllipsoidPerceptron(
        n_features=3, rho=0.05, on_unseparable="freeze"
    ),
    "shor-ellipsoid": lambda: ShorPerceptron(n_features=3),
    "shor-dv": lambda: ShorPerceptron(n_features=3, dilation="dunagan-vempala"),
    "shor-2": lambda: ShorPerceptron(n_features=3, dilation=2.0, step=0.5, step_growth=1.01),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_generic_suite(name):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 3))
    y = np.where(X @ [1.0, -2.0, 0.5] + 0.3 * rng.standard_normal(80) > 0, 1, -1)
    check_estimator(FACTORIES[name], X, y)


# -- updates against the references -----------------------------------------------------------
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_perceptron_matches_reference(fit_intercept):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 4)) * (rng.random((300, 4)) < 0.8)
    y = np.where(X[:, 0] - X[:, 1] > 0.2, 1, -1)
    model = Perceptron(n_features=4, fit_intercept=fit_intercept)
    steps = model.learn_many(X, y)
    w, flags = naive_perceptron(zip(X, y, strict=True), 4, float(fit_intercept))
    np.testing.assert_allclose(model.w_, w, rtol=1e-12, atol=1e-12)
    assert list(steps.aggressive) == flags
    assert model.n_updates_ == sum(flags)


@pytest.mark.parametrize(
    ("dilation", "lam", "eta", "growth"),
    [(2.0, 2.0, 0.5, 1.01), ("dunagan-vempala", 0.5, 1.0, 1.0), (1.0, 1.0, 1.0, 1.0)],
)
def test_shor_matches_eq_2_5(dilation, lam, eta, growth):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((150, 3))
    y = np.where(X @ [1.0, 0.5, -1.0] > 0.1, 1, -1)
    step = None if dilation == "dunagan-vempala" else eta
    step_growth = None if dilation == "dunagan-vempala" else growth
    model = ShorPerceptron(n_features=3, dilation=dilation, step=step, step_growth=step_growth)
    for x, label in zip(X, y, strict=True):
        model.learn_one(x, label)
    w, D_inv, eta_ref = naive_shor(zip(X, y, strict=True), 3, lam, eta, growth)
    np.testing.assert_allclose(model.w_, w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.eta_ * model.B_, eta_ref * D_inv, rtol=1e-9, atol=1e-9)


def test_shor_with_unit_dilation_is_the_perceptron():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 5))
    y = np.where(X[:, 2] > 0, 1, -1)
    shor, perceptron = ShorPerceptron(n_features=5, dilation=1.0), Perceptron(n_features=5)
    shor.learn_many(X, y)
    perceptron.learn_many(X, y)
    np.testing.assert_allclose(shor.w_, perceptron.w_, rtol=1e-12)
    np.testing.assert_array_equal(shor.B_, np.eye(6))


@pytest.mark.parametrize("safeguard", [False, True])
def test_ellipsoid_matches_shape_matrix_form(safeguard):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((250, 3))
    y = np.where(X @ [1.0, -1.0, 0.3] > 0.2, 1, -1)
    model = EllipsoidPerceptron(n_features=3, rho=1e-9, safeguard=safeguard)
    model.learn_many(X, y)
    n = 4
    blow_up = (2 * n * n + 3) / (2 * n * n) if safeguard else n * n / (n * n - 1.0)
    c, P = naive_ellipsoid(zip(X, y, strict=True), 3, blow_up)
    np.testing.assert_allclose(model.w_, c, rtol=1e-7, atol=1e-10)
    shape = model.radius_**2 * model.B_ @ model.B_.T
    np.testing.assert_allclose(shape, P, rtol=1e-6, atol=1e-10 * np.abs(P).max())
    # rho_t is the n-th root of the volume ratio: r |det B|^(1/n)
    sign, logdet = np.linalg.slogdet(model.B_)
    assert model.rho_t == pytest.approx(model.radius_ * math.exp(logdet / n), rel=1e-8)


def test_shor_ellipsoid_preset_is_algorithm_2():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((200, 3))
    y = np.where(X[:, 0] + X[:, 1] > 0.1, 1, -1)
    shor = ShorPerceptron(n_features=3, dilation="ellipsoid")
    ellipsoid = EllipsoidPerceptron(n_features=3, rho=1e-12, safeguard=False)
    shor.learn_many(X, y)
    ellipsoid.learn_many(X, y)
    assert np.array_equal(shor.w_, ellipsoid.w_) and np.array_equal(shor.B_, ellipsoid.B_)
    assert shor.eta_ == ellipsoid.eta_


def test_ellipsoid_factors_follow_algorithm_2_and_footnote_9():
    for n in (2, 3, 10, 100):
        beta, growth, shrink = ellipsoid_factors(n, safeguard=False)
        assert beta == pytest.approx(math.sqrt(n * n - 1) / (n + 1))
        assert growth == pytest.approx(n / math.sqrt(n * n - 1))
        recursion = (n / math.sqrt(n * n - 1)) ** ((n - 1) / n) * (n / (n + 1)) ** (1 / n)
        assert math.exp(shrink) == pytest.approx(recursion)  # Algorithm 2's rho_{t+1} / rho_t
        _, safe_growth, safe_shrink = ellipsoid_factors(n)
        assert growth < safe_growth and shrink < safe_shrink < 0  # larger, still shrinking
    with pytest.raises(ValueError):
        ellipsoid_factors(1)


# -- mistake bounds and the ellipsoid's invariants ---------------------------------------------
@pytest.mark.parametrize("margin", [0.3, 0.1, 0.03])
def test_perceptron_mistake_bound(margin):
    rng = np.random.default_rng(6)
    X, y, u, _ = separable_stream(rng, 5, margin, 400)
    model = Perceptron(n_features=5, fit_intercept=False)
    assert cycle_until_no_mistake(model, X, y)
    assert model.n_updates_ <= 1.0 / margin**2  # Theorem 2.7
    assert np.all(model.predict_many(X) == y)


@pytest.mark.parametrize("margin", [0.3, 0.05, 0.01])
def test_ellipsoid_mistake_bound(margin):
    rng = np.random.default_rng(7)
    X, y, u, _ = separable_stream(rng, 4, margin, 400)
    model = EllipsoidPerceptron(n_features=4, rho=margin, fit_intercept=False)
    assert cycle_until_no_mistake(model, X, y)
    # every update shrinks rho_t by exp(log_shrink); rho_t stays above rho / (1 + rho)
    _, _, shrink = ellipsoid_factors(4)
    assert model.n_updates_ <= math.log((1 + margin) / margin) / -shrink
    assert model.n_updates_ <= 2 * 4**2 * math.log(1 / margin) + 4 * 4**2  # Theorem 2.9's order
    assert not model.status()["unseparable"] and model.n_restarts_ == 0
    assert np.all(model.predict_many(X) == y)


@pytest.mark.parametrize("safeguard", [False, True])
def test_ellipsoid_contains_the_feasible_set(safeguard):
    rng = np.random.default_rng(8)
    X, y, u, A = separable_stream(rng, 3, 0.05, 300)
    model = EllipsoidPerceptron(n_features=3, rho=1e-6, safeguard=safeguard, fit_intercept=False)
    samples = rng.standard_normal((20000, 3))
    samples *= (rng.random((20000, 1)) ** (1 / 3)) / np.linalg.norm(samples, axis=1, keepdims=True)
    learned = []
    for _ in range(3):
        for x, label, a in zip(X, y, A, strict=True):
            if model.learn_one(x, label).aggressive:
                learned.append(a)
                inside = samples[np.all(samples @ np.array(learned).T >= 0, axis=1)]
                inside = np.vstack([inside, u, 0.5 * u, np.zeros(3)])
                distance = np.linalg.norm(np.linalg.solve(model.B_, (inside - model.w_).T), axis=0)
                assert np.all(distance <= model.radius_ * (1 + 1e-9))
    assert len(learned) > 5


def test_unseparable_is_reported_and_policies_apply():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((400, 2))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)  # XOR: no linear separator at all
    freeze = EllipsoidPerceptron(n_features=2, rho=0.01, on_unseparable="freeze")
    freeze.learn_many(X, y)
    status = freeze.status()
    assert status["unseparable"] and status["frozen"] and status["n_unseparable"] == 1
    assert status["rho_t"] < status["rho_threshold"] and status["updates_until_stop"] == 0
    reference = state_digest(freeze.get_state())
    steps = freeze.learn_many(X, y)  # frozen: nothing changes but the counter of examples
    assert steps.n_aggressive == 0
    assert np.array_equal(freeze.w_, from_state(freeze.get_state()).w_)
    assert state_digest(freeze.get_state()) != reference  # n_seen_ grew
    freeze.restart()
    assert not freeze.status()["frozen"] and freeze.rho_t == 1.0 and freeze.n_restarts_ == 1
    assert freeze.learn_one(X[0], y[0]).aggressive

    reset = EllipsoidPerceptron(n_features=2, rho=0.01)
    reset.learn_many(X, y)
    status = reset.status()
    assert status["unseparable"] and not status["frozen"]
    assert status["n_restarts"] == status["n_unseparable"] >= 1
    assert reset.n_updates_ > reset.t_  # kept learning after restarts


def test_score_interval_holds_every_separator():
    rng = np.random.default_rng(10)
    X, y, u, _ = separable_stream(rng, 3, 0.1, 200)
    model = EllipsoidPerceptron(n_features=3, rho=1e-6, fit_intercept=False)
    queries = rng.standard_normal((50, 3))
    widths = []
    for chunk in np.array_split(np.arange(200), 4):
        model.learn_many(X[chunk], y[chunk])
        intervals = model.score_interval_many(queries)
        cosine = queries @ u / np.linalg.norm(queries, axis=1)  # the unit separator's scores
        assert np.all(intervals[:, 0] <= cosine + 1e-12)
        assert np.all(cosine <= intervals[:, 1] + 1e-12)
        centre = model.score_many(queries)
        np.testing.assert_allclose(intervals.mean(axis=1), centre, atol=1e-12)
        low, high = model.score_interval_one(queries[0])
        assert (low, high) == pytest.approx(tuple(intervals[0]))
        widths.append(np.mean(intervals[:, 1] - intervals[:, 0]))
    assert widths[-1] < widths[0]  # the ellipsoid only shrinks


# -- degenerate inputs ----------------------------------------------------------------------
@pytest.mark.parametrize("factory", [Perceptron, EllipsoidPerceptron, ShorPerceptron])
def test_zero_example_is_passive(factory):
    model = factory(n_features=3, fit_intercept=False)
    step = model.learn_one(np.zeros(3), 1)
    assert step[:3] == (0.0, 0.0, False) and model.n_seen_ == 1 and model.n_updates_ == 0
    assert model.score_one(np.zeros(3)) == 0.0 and model.predict_one(np.zeros(3)) == -1
    steps = model.learn_many(np.zeros((2, 3)), [1, -1])
    assert steps.n_aggressive == 0 and not np.any(model.w_)


@pytest.mark.parametrize("factory", [Perceptron, EllipsoidPerceptron, ShorPerceptron])
def test_huge_values_only_count_by_direction(factory):
    rng = np.random.default_rng(11)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    small, huge = (
        factory(n_features=3, fit_intercept=False),
        factory(n_features=3, fit_intercept=False),
    )
    small.learn_many(X, y)
    huge.learn_many(X * 2.0**1000, y)  # an exact power of two: the same directions, bit for bit
    assert state_digest(small.get_state()) == state_digest(huge.get_state())
    big = factory(n_features=3)
    big.learn_one([1e308, -1e308, 1e308], 1)  # |z| overflows float64, z / |z| does not
    assert np.all(np.isfinite(big.w_)) and np.isfinite(big.score_one([1e308, 1e308, 1e308]))
    assert abs(big.score_one([1e-300, 0.0, 0.0])) <= np.linalg.norm(big.w_)


def test_bad_parameters_raise():
    for bad in (
        lambda: EllipsoidPerceptron(n_features=1, fit_intercept=False),
        lambda: EllipsoidPerceptron(n_features=2, rho=1.0),
        lambda: EllipsoidPerceptron(n_features=2, on_unseparable="ignore"),
        lambda: EllipsoidPerceptron(n_features=5000),
        lambda: ShorPerceptron(n_features=2, dilation="fast"),
        lambda: ShorPerceptron(n_features=2, dilation=0.0),
        lambda: ShorPerceptron(n_features=2, step=-1.0),
        lambda: Perceptron(n_features=2, fit_intercept=1),
        lambda: EllipsoidalClassifier(n_features=2, solver="MOSEK"),
    ):
        with pytest.raises(ValueError):
            bad()


# -- Algorithm 7 ---------------------------------------------------------------------------
def test_psd_oracle_finds_a_violation_for_every_indefinite_matrix():
    rng = np.random.default_rng(12)
    for trial in range(300):
        n = int(rng.integers(2, 25))
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        eigenvalues = rng.uniform(0.0, 10.0, n) * (rng.random(n) < 0.7)
        k = int(rng.integers(1, n + 1))
        eigenvalues[rng.choice(n, k, replace=False)[:1]] = -rng.uniform(0.01, 10.0)
        if trial % 3 == 0:  # zero diagonal, as in [[0, 1], [1, 0]]
            A = rng.standard_normal((n, n))
            A = A + A.T
            np.fill_diagonal(A, 0.0)
        else:
            A = (Q * eigenvalues) @ Q.T
            A = (A + A.T) / 2
        if np.linalg.eigvalsh(A).min() > -1e-8 * np.abs(A).max():
            continue
        v = psd_counterexample(A)
        assert v is not None, (trial, np.linalg.eigvalsh(A).min())
        assert v @ A @ v < 0 and np.linalg.norm(v) == pytest.approx(1.0)


def test_psd_oracle_certifies_psd_matrices():
    rng = np.random.default_rng(13)
    for trial in range(300):
        n = int(rng.integers(1, 25))
        rank = int(rng.integers(0, n + 1))
        G = rng.standard_normal((n, rank)) * rng.uniform(0.1, 100.0)
        A = G @ G.T
        if trial % 5 == 0:
            A += np.diag(rng.uniform(0, 1, n) * (rng.random(n) < 0.5))
        assert psd_counterexample(A) is None, (trial, n, rank)
    assert psd_counterexample(np.zeros((4, 4))) is None
    assert psd_counterexample(np.eye(3)) is None


def test_psd_oracle_examples_and_errors():
    v = psd_counterexample(np.array([[0.0, 1.0], [1.0, 0.0]]))  # the printed algorithm's miss
    assert v is not None and v @ [[0.0, 1.0], [1.0, 0.0]] @ v == pytest.approx(-1.0)
    A = np.diag([4.0, 1.0, -1e-3])
    assert psd_counterexample(A) @ A @ psd_counterexample(A) < 0
    assert psd_counterexample(A, tol=1e-2) is None  # within the tolerance
    with pytest.raises(ValueError):
        psd_counterexample(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError):
        psd_counterexample(np.array([[np.nan]]))


# -- oracles and the batch algorithms ------------------------------------------------------
def test_semidefinite_constraint_vectors():
    rng = np.random.default_rng(14)
    n, m = 5, 3
    sym = [(lambda B: B + B.T)(rng.standard_normal((n, n))) for _ in range(m + 1)]
    oracle = SemidefiniteConstraints(sym[0], sym[1:])
    for _ in range(20):
        u, y = rng.standard_normal(n + 1), rng.standard_normal(m + 1)
        assert oracle.constraint(u) @ y == pytest.approx(u @ oracle.matrix(y) @ u)
        a = oracle.counterexample(y)
        if a is not None:
            assert a @ y < 1e-6
    laplacian = np.array([[1.0, -1.0], [-1.0, 1.0]])
    maxcut = maxcut_constraints(laplacian)
    assert maxcut.diagonals is not None and maxcut.dim == 3


@pytest.mark.parametrize("solver", ["ellipsoid", "parametric", "dunagan-vempala"])
def test_semidefinite_feasibility(solver):
    rng = np.random.default_rng(15)
    n = 12
    C = (rng.random((n, n)) < 0.3).astype(float)
    C = np.triu(C, 1)
    C = C + C.T
    L = np.diag(C.sum(1)) - C
    oracle = maxcut_constraints(L)
    run = {
        "ellipsoid": lambda: ellipsoid_method(oracle),
        "parametric": lambda: parametric_rescaling_perceptron(oracle, seed=1),
        "dunagan-vempala": lambda: rescaling_perceptron(oracle, seed=1),
    }[solver]
    result = run()
    assert result.status == "feasible"
    x = oracle.solution(result.x)
    assert np.linalg.eigvalsh(np.diag(x) - L / 4).min() > 0


def small_margin_set(rng, n=6, count=300, margin=0.004):
    """Unit vectors on the cone u.a = margin (+ a little): the margin is about ``margin``."""
    u = rng.standard_normal(n)
    u /= np.linalg.norm(u)
    V = rng.standard_normal((count, n))
    V -= np.outer(V @ u, u)
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    heights = margin * (1 + rng.random((count, 1)))
    return heights * u + np.sqrt(1 - heights**2) * V, u


class _BlindRescaling(FiniteConstraints):
    """Its rescaled sets find no violated constraint at all: the extreme case of the rescaled
    check rounding differently from the original one ((A H^T) x against A (H^T x))."""

    def rescale(self, H):
        rescaled = FiniteConstraints(self.A @ H.T)
        rescaled.counterexample = lambda x, threshold=0.0: None
        return rescaled


@pytest.mark.parametrize("algorithm", [parametric_rescaling_perceptron, rescaling_perceptron])
def test_rescaling_perceptrons_check_their_separator_on_the_original_set(algorithm):
    # a "feasible" answer is checked on the constraints as given, with the vector returned:
    # before, a separator of the rescaled set was trusted, and on one machine a constraint of
    # test_batch_algorithms_separate_finite_sets ended at -1.1e-16 with status "feasible"
    rng = np.random.default_rng(3)
    A = rng.standard_normal((200, 4))
    A[:, 0] = np.abs(A[:, 0]) + 0.5
    result = algorithm(_BlindRescaling(A), seed=1)
    assert result.status == "feasible"
    assert np.all(A @ result.x > 0) and np.linalg.norm(result.x) == pytest.approx(1.0)


@pytest.mark.parametrize("algorithm", ["parametric", "dunagan-vempala", "ellipsoid"])
def test_batch_algorithms_separate_finite_sets(algorithm):
    rng = np.random.default_rng(16)
    A, _ = small_margin_set(rng)
    oracle = FiniteConstraints(A)
    if algorithm == "parametric":  # a short perceptron phase forces rescalings
        result = parametric_rescaling_perceptron(oracle, rho=0.3, seed=2)
        assert result.rescalings >= 1 and result.modified_updates > 0
    elif algorithm == "dunagan-vempala":
        result = rescaling_perceptron(oracle, seed=2)
    else:
        result = ellipsoid_method(oracle, rho=1e-3)
    assert result.status == "feasible"
    assert np.all(A @ result.x >= 0) and oracle.margin(result.x) >= 0


def test_modified_perceptron_output_meets_sigma():
    rng = np.random.default_rng(17)
    A, u = small_margin_set(rng, n=5, margin=0.01)
    oracle = FiniteConstraints(A)
    x, updates, _ = modified_perceptron(oracle, sigma=0.05, theta=0.3, rng=rng)
    assert x is not None and np.linalg.norm(x) == pytest.approx(1.0)
    assert np.min(oracle.A @ x) >= -0.05  # Theorem 4.2 (1)


def test_ellipsoid_method_reports_unseparable_sets():
    A = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    result = ellipsoid_method(FiniteConstraints(A), rho=1e-3)
    assert result.status == "unseparable"
    result = parametric_rescaling_perceptron(FiniteConstraints(A), max_updates=500)
    assert result.status == "max_updates"


def test_read_sdpa(tmp_path):
    path = tmp_path / "tiny.dat-s"
    path.write_text(
        '"a comment"\n2\n1\n2\n{1.0, 2.0}\n0 1 1 1 3.0\n0 1 1 2 -1.0\n1 1 1 1 1.0\n2 1 2 2 1.0\n'
    )
    c, F0, Fs = read_sdpa(path)
    np.testing.assert_array_equal(c, [1.0, 2.0])
    np.testing.assert_array_equal(F0, [[3.0, -1.0], [-1.0, 0.0]])
    np.testing.assert_array_equal(Fs[1].toarray(), [[0.0, 0.0], [0.0, 1.0]])


# -- the ellipsoidal classifier -------------------------------------------------------------
def ring_data(rng, count):
    X = rng.standard_normal((count, 2))
    radius = np.linalg.norm(X, axis=1)
    keep = (radius < 0.9) | (radius > 1.3)
    X = X[keep] * [2.0, 0.5] + [1.0, -1.0]
    return X, np.where(radius[keep] < 0.9, 1, -1)


def test_ellipsoidal_classifier_is_affine_invariant():
    rng = np.random.default_rng(18)
    X, y = ring_data(rng, 200)
    Xt, yt = ring_data(rng, 400)
    base = EllipsoidalClassifier(n_features=2).fit(X, y)
    assert base.separable_ == 1 and base.t_ > 0.3 and np.mean(base.predict_many(X) == y) == 1.0
    for scale in (1e-3, 1.0, 1e3):
        M = rng.standard_normal((2, 2)) * scale + np.diag([scale, scale])
        shift = rng.normal(0, 100, 2)
        mapped = EllipsoidalClassifier(n_features=2).fit(X @ M.T + shift, y)
        assert mapped.t_ == pytest.approx(base.t_, rel=1e-4)  # Theorem 7.5
        scores = base.score_many(Xt)
        mapped_scores = mapped.score_many(Xt @ M.T + shift)
        np.testing.assert_allclose(mapped_scores, scores, atol=1e-4 * np.abs(scores).max())
        clear = np.abs(scores) > 1e-3
        assert np.array_equal(
            base.predict_many(Xt)[clear], mapped.predict_many(Xt @ M.T + shift)[clear]
        )


def test_ellipsoidal_classifier_inseparable_gives_t_zero():
    rng = np.random.default_rng(19)
    X = rng.standard_normal((60, 2))
    y = np.where(rng.random(60) < 0.5, 1, -1)
    X[0], y[0] = 0.0, -1  # a negative at the centre of positives all around it
    X[1:5], y[1:5] = [[1, 0], [-1, 0], [0, 1], [0, -1]], 1
    model = EllipsoidalClassifier(n_features=2).fit(X, y)
    assert model.t_ == 0.0 and model.separable_ == 0
    assert np.all(model.score_many(X) == 0.0) and np.all(model.predict_many(X) == -1)
    expected = np.zeros((3, 3))
    expected[2, 2] = 1.0
    np.testing.assert_array_equal(model.E_hat_, expected)  # eq (7.10)


def test_ellipsoidal_classifier_state_geometry_and_errors():
    rng = np.random.default_rng(20)
    X, y = ring_data(rng, 150)
    model = EllipsoidalClassifier(n_features=2)
    assert np.all(model.predict_many(X) == -1)  # unfitted: scores 0
    model.fit(X, y)
    copy = from_state(model.get_state())
    np.testing.assert_array_equal(copy.score_many(X), model.score_many(X))
    E, centre = model.ellipsoid()
    inner = np.einsum("ij,jk,ik->i", X - centre, E, X - centre)
    assert np.all(inner[y > 0] <= 1 + 1e-5) and np.all(inner[y < 0] >= 1 + model.t_ - 1e-5)
    assert model.predict_one(X[0]) == model.predict_many(X[:1])[0]
    with pytest.raises(ValueError):
        model.fit(X, np.ones(len(y)))
    with pytest.raises(ValueError):
        model.fit(X[:3], [1, -1, 2])
    assert not hasattr(model, "learn_one") and not hasattr(model, "learn_many")  # batch model


def test_gsk_features_and_reduced_classifier():
    rng = np.random.default_rng(21)
    basis = rng.standard_normal((3, 20))
    X = rng.standard_normal((80, 3)) @ basis  # rank 3 in 20 dimensions
    y = np.where(np.linalg.norm(X @ np.linalg.pinv(basis), axis=1) < 1.5, 1, -1)
    gsk = GramSchmidtFeatures(n_components=5).fit(X, y)
    assert gsk.n_used_ == 3  # stops when the span is exhausted
    features = gsk.transform(X)
    np.testing.assert_allclose(features, gsk.training_features_, atol=1e-9)
    np.testing.assert_allclose(features @ features.T, X @ X.T, rtol=1e-8, atol=1e-8)  # isometry
    first = int(np.argmax(np.where(y > 0, min(80 / max(np.sum(y > 0), 1), 10), 1) * (X**2).sum(1)))
    np.testing.assert_array_equal(gsk.pivots_[0], X[first])  # biased pivot choice
    model = EllipsoidalClassifier(n_features=20, n_components=3).fit(X, y)
    assert model.E_hat_.shape == (4, 4) and np.mean(model.predict_many(X) == y) > 0.95
    copy = from_state(model.get_state())
    np.testing.assert_allclose(copy.score_many(X), model.score_many(X))
