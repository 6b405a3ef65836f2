"""DoSClassifier and its kernels: the update solves eq (17), matches the plain-numpy
reference, handles the degenerate cases, and touches only the active features."""

import numpy as np
import pytest
from scipy.optimize import minimize

from core.dos import DoSClassifier
from core.kernels.dos import _dos_residual, _dos_root
from core.registry import state_digest
from tests import naive


def random_model(n_features, rank, seed, mode="pa", C=1.0, scale=1.0):
    return DoSClassifier(
        n_features=n_features, rank=rank, mode=mode, C=C, seed=seed, init_scale=scale
    )


def margin(U, V, z, y):
    return y * naive.dos_score(U, V, z)


@pytest.mark.parametrize("mode", ["pa", "pa1", "pa2"])
def test_step_matches_numpy_reference(mode):
    rng = np.random.default_rng(0)
    for trial in range(200):
        n, rank = int(rng.integers(1, 8)), int(rng.integers(1, 5))
        C = float(10 ** rng.uniform(-3, 1))
        model = random_model(n, rank, trial, mode, C, scale=float(10 ** rng.uniform(-2, 1)))
        x = rng.standard_normal(n) * 10 ** rng.uniform(-2, 1)
        y = float(rng.choice([-1, 1]))
        U, V = model.U_.copy(), model.V_.copy()
        U_ref, V_ref, score_ref, nu_ref = naive.dos_pa_step(U, V, naive.augment(x), y, mode, C)
        step = model.learn_one(x, y)
        assert step.score == pytest.approx(score_ref, rel=1e-12, abs=1e-14)
        assert step.aggressive == (nu_ref > 0)
        np.testing.assert_allclose(model.U_, U_ref, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(model.V_, V_ref, rtol=1e-9, atol=1e-12)


def test_aggressive_step_meets_margin_with_equality():
    """To 1e-9; when the squared projections a, b are huge (1e7), the score a - b itself can
    only be evaluated to a few ulps of a + b, so the bound is relative to that."""
    rng = np.random.default_rng(1)
    worst = 0.0
    for trial in range(500):
        n, rank = int(rng.integers(1, 30)), int(rng.integers(1, 17))
        model = random_model(n, rank, trial, scale=float(10 ** rng.uniform(-4, 2)))
        x = rng.standard_normal(n) * 10 ** rng.uniform(-3, 2)
        y = float(rng.choice([-1, 1]))
        step = model.learn_one(x, y)
        if step.aggressive:
            z = naive.augment(x)
            scale = np.sum((model.U_ @ z) ** 2) + np.sum((model.V_ @ z) ** 2)
            error = abs(margin(model.U_, model.V_, z, y) - 1.0)
            worst = max(worst, error / max(1e-9, 64 * np.finfo(float).eps * scale))
    assert worst <= 1.0


def qcqp_best_cost(U0, V0, z, y, starts, seed):
    """Eq (17) by SLSQP from several starts: the best feasible cost found."""
    rank, m = U0.shape
    rng = np.random.default_rng(seed)

    def unpack(p):
        return p[: rank * m].reshape(rank, m), p[rank * m :].reshape(rank, m)

    def cost(p):
        U, V = unpack(p)
        return np.sum((U - U0) ** 2) + np.sum((V - V0) ** 2)

    def constraint(p):
        U, V = unpack(p)
        return y * (np.sum((U @ z) ** 2) - np.sum((V @ z) ** 2)) - 1.0

    best = np.inf
    p0 = np.concatenate([U0.ravel(), V0.ravel()])
    for k in range(starts):
        start = p0 + (0 if k == 0 else rng.standard_normal(p0.shape) * 10 ** rng.uniform(-2, 0))
        result = minimize(
            cost,
            start,
            method="SLSQP",
            constraints=[{"type": "ineq", "fun": constraint}],
            options={"maxiter": 500, "ftol": 1e-14},
        )
        if constraint(result.x) > -1e-7:
            best = min(best, cost(result.x))
    return best


def test_update_is_the_global_minimiser_of_eq17():
    rng = np.random.default_rng(2)
    for trial in range(25):
        n, rank = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        model = random_model(n, rank, 100 + trial)
        x = rng.standard_normal(n)
        y = float(rng.choice([-1, 1]))
        U0, V0 = model.U_.copy(), model.V_.copy()
        step = model.learn_one(x, y)
        if not step.aggressive:
            continue
        ours = np.sum((model.U_ - U0) ** 2) + np.sum((model.V_ - V0) ** 2)
        slsqp = qcqp_best_cost(U0, V0, naive.augment(x), y, starts=8, seed=trial)
        assert ours <= slsqp * (1 + 1e-6) + 1e-12


@pytest.mark.parametrize("mode", ["pa1", "pa2"])
def test_soft_margin_update_solves_its_problem(mode):
    """PA-I: min 1/2 |dU|^2 + 1/2 |dV|^2 + C xi; PA-II: ... + C xi^2, s.t. margin >= 1 - xi,
    xi >= 0: compared with SLSQP from several starts on the smooth form with xi a variable."""
    rng = np.random.default_rng(3)
    checked = 0
    for trial in range(30):
        n, rank = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        C = float(10 ** rng.uniform(-2, 0))
        model = random_model(n, rank, 200 + trial, mode, C)
        x = rng.standard_normal(n)
        y = float(rng.choice([-1, 1]))
        z = naive.augment(x)
        U0, V0 = model.U_.copy(), model.V_.copy()
        step = model.learn_one(x, y)
        if not step.aggressive:
            continue
        checked += 1
        size = U0.size

        def unpack(p, size=size, shape=U0.shape):
            return p[:size].reshape(shape), p[size : 2 * size].reshape(shape), p[-1]

        def objective(p, U0=U0, V0=V0, C=C):
            U, V, xi = unpack(p)
            penalty = C * xi if mode == "pa1" else C * xi**2
            return 0.5 * np.sum((U - U0) ** 2) + 0.5 * np.sum((V - V0) ** 2) + penalty

        def objective_gradient(p, U0=U0, V0=V0, C=C):
            U, V, xi = unpack(p)
            dxi = C if mode == "pa1" else 2 * C * xi
            return np.concatenate([(U - U0).ravel(), (V - V0).ravel(), [dxi]])

        def margin_constraint(p, z=z, y=y):
            U, V, xi = unpack(p)
            return y * (np.sum((U @ z) ** 2) - np.sum((V @ z) ** 2)) - 1.0 + xi

        def margin_gradient(p, z=z, y=y):
            U, V, xi = unpack(p)
            dU, dV = 2 * y * np.outer(U @ z, z), -2 * y * np.outer(V @ z, z)
            return np.concatenate([dU.ravel(), dV.ravel(), [1.0]])

        U1, V1 = model.U_, model.V_
        xi_ours = max(0.0, 1.0 - y * naive.dos_score(U1, V1, z))
        ours = objective(np.concatenate([U1.ravel(), V1.ravel(), [xi_ours]]))
        p0 = np.concatenate([U0.ravel(), V0.ravel(), [max(0.0, 1.0 - step.score * y)]])
        best = np.inf
        for k in range(6):
            start = p0 + (0 if k == 0 else rng.standard_normal(p0.shape) * 0.3)
            start[-1] = abs(start[-1])
            result = minimize(
                objective,
                start,
                jac=objective_gradient,
                method="SLSQP",
                options={"maxiter": 1000, "ftol": 1e-15},
                bounds=[(None, None)] * (2 * size) + [(0, None)],
                constraints=[{"type": "ineq", "fun": margin_constraint, "jac": margin_gradient}],
            )
            if margin_constraint(result.x) > -1e-8:
                best = min(best, result.fun)
        assert ours <= best * (1 + 1e-6) + 1e-10
    assert checked >= 10


def test_pa1_bounds_the_step_and_pa2_shrinks_it():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(5) * 3
    steps = {}
    for mode, C in (("pa", 1.0), ("pa1", 1e-3), ("pa2", 1e-3)):
        model = random_model(5, 3, 0, mode, C)
        U0 = model.U_.copy()
        model.learn_one(x, -1)
        steps[mode] = np.linalg.norm(model.U_ - U0)
    assert steps["pa1"] < steps["pa"] and steps["pa2"] < steps["pa"]


def test_noisy_stream_soft_margin_is_more_accurate():
    """On a stream with 20% flipped labels, soft margins with small C over-react less than PA
    (measured: PA about 0.33 test error against the clean labels, PA-I 0.10, PA-II 0.20)."""
    rng = np.random.default_rng(5)
    n, d = 20000, 6
    X = rng.standard_normal((n, d))
    clean = np.where(X[:, 0] ** 2 - X[:, 1] ** 2 + 0.5 * X[:, 2] > 0, 1, -1)
    y = np.where(rng.random(n) < 0.2, -clean, clean)
    errors = {}
    for mode, C in (("pa", 1.0), ("pa1", 0.001), ("pa2", 0.001)):
        model = random_model(d, 4, 0, mode, C)
        model.learn_many(X[:15000], y[:15000])
        errors[mode] = np.mean(model.predict_many(X[15000:]) != clean[15000:])
    assert errors["pa1"] < errors["pa"] - 0.1
    assert errors["pa2"] < errors["pa"] - 0.05


@pytest.mark.parametrize("y", [1, -1])
@pytest.mark.parametrize("mode", ["pa", "pa2"])
def test_degenerate_zero_initialisation(y, mode):
    """Footnote 1: U z = 0 (or V z = 0) gives a finite update meeting the margin exactly,
    whose cost is the minimum of eq (17) (1 + h/2 over s for PA)."""
    model = DoSClassifier(n_features=3, rank=4, init_scale=0.0, mode=mode, C=10.0)
    x = np.array([1.0, -2.0, 0.5])
    z = naive.augment(x)
    step = model.learn_one(x, y)
    assert step.aggressive and step.score == 0.0
    assert np.all(np.isfinite(model.U_)) and np.all(np.isfinite(model.V_))
    kappa = 0.0 if mode == "pa" else 1.0 / (4 * 10.0 * (z @ z))
    assert margin(model.U_, model.V_, z, y) == pytest.approx(1.0 - kappa, abs=1e-12)
    grown = model.U_ if y > 0 else model.V_
    assert np.count_nonzero(np.abs(grown).sum(axis=1)) == 1  # one hidden unit, row 0
    assert np.any(grown[0])
    # the next degenerate update (a direction orthogonal in z) goes to the next hidden unit
    x2 = np.array([2.0, 1.0, 0.0]) - z[:3] @ np.array([2.0, 1.0, 0.0]) / (z @ z) * z[:3]
    x2 = x2 - (x2 @ z[:3] + 0) / (z @ z) * z[:3]
    model2 = DoSClassifier(n_features=3, rank=4, init_scale=0.0)
    model2.learn_one(x, 1)
    model2.learn_one(np.zeros(3), -1)  # V z = 0 for z = [0, 0, 0, 1]: degenerate on V
    assert np.any(model2.V_[1]) and not np.any(model2.V_[[0, 2, 3]])


def test_degenerate_matches_reference_with_shrink_side():
    rng = np.random.default_rng(6)
    for y in (1.0, -1.0):
        model = random_model(4, 3, 9)
        grow = model.U_ if y > 0 else model.V_
        grow[...] = 0.0
        x = rng.standard_normal(4)
        U0, V0 = model.U_.copy(), model.V_.copy()
        U_ref, V_ref, _, nu = naive.dos_pa_step(U0, V0, naive.augment(x), y)
        assert nu == 1.0
        model.learn_one(x, y)
        np.testing.assert_allclose(model.U_, U_ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(model.V_, V_ref, rtol=1e-12, atol=1e-14)
        cost = np.sum((model.U_ - U0) ** 2) + np.sum((model.V_ - V0) ** 2)
        h = np.sum(((V0 if y > 0 else U0) @ naive.augment(x)) ** 2)
        s = 1 + x @ x
        assert cost == pytest.approx((1 + h / 2) / s, rel=1e-12)


def test_near_degenerate_is_continuous_and_exact():
    """A tiny but non-zero projection: q = 1 - nu is resolved to full relative precision."""
    for tiny in (1e-6, 1e-12, 1e-30, 1e-150):
        model = DoSClassifier(n_features=2, rank=2, init_scale=0.0)
        model.U_[0, 0] = tiny
        x = np.array([1.0, 0.0])
        model.learn_one(x, 1)
        z = naive.augment(x)
        assert margin(model.U_, model.V_, z, 1) == pytest.approx(1.0, abs=1e-12)
        assert np.all(np.isfinite(model.U_))


def test_root_finder_precision_and_bracket():
    rng = np.random.default_rng(7)
    for _ in range(2000):
        g = 10 ** rng.uniform(-200, 3)
        h = 10 ** rng.uniform(-5, 3) * rng.integers(0, 2)
        kappa = 10 ** rng.uniform(-6, 2) * rng.integers(0, 2)
        if g - h - 1.0 >= 0:
            continue
        q = _dos_root(g, h, kappa)
        assert 0.0 < q <= 1.0
        # the root brackets a sign change at adjacent floats
        up = np.nextafter(q, 2.0)
        down = np.nextafter(q, 0.0)
        assert _dos_residual(up, g, h, kappa) <= 0.0 or up - q <= 4e-16 * q
        assert _dos_residual(down, g, h, kappa) >= 0.0 or q - down <= 4e-16 * q
        residual = _dos_residual(q, g, h, kappa)
        assert abs(residual) <= 1e-10 * (1 + h + g / q**2)


def test_sparse_rows_touch_only_active_features():
    model = random_model(1000, 8, 3)
    before_U, before_V = model.U_.copy(), model.V_.copy()
    indices = np.array([3, 17, 999])
    model.learn_one((indices, np.array([1.0, -2.0, 0.5])), -1)
    changed = np.flatnonzero(
        np.any(model.U_ != before_U, axis=0) | np.any(model.V_ != before_V, axis=0)
    )
    assert set(changed) <= {3, 17, 999, 1000}
    assert 1000 in changed  # the bias column


def test_sparse_dense_and_named_inputs_agree():
    rng = np.random.default_rng(8)
    n = 20
    dense_model, sparse_model = random_model(n, 3, 1), random_model(n, 3, 1)
    for _ in range(50):
        x = rng.standard_normal(n) * (rng.random(n) < 0.3)
        y = int(rng.choice([-1, 1]))
        dense_model.learn_one(x, y)
        nz = np.flatnonzero(x)
        sparse_model.learn_one((nz, x[nz]), y)
    assert state_digest(dense_model.get_state()) == state_digest(sparse_model.get_state())
    named = random_model(2**12, 2, 0)
    assert np.isfinite(named.score_one({"country": "fr", "age": 31.0}))
    named.learn_one({"country": "fr", "age": 31.0}, 1)
    assert named.score_one({"country": "fr", "age": 31.0}) == pytest.approx(1.0, abs=1e-9)


def test_learn_many_equals_learn_one_and_reports_progressive_scores():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((300, 7)) * (rng.random((300, 7)) < 0.5)
    y = np.where(rng.random(300) < 0.5, 1, -1)
    one, many = random_model(7, 4, 2), random_model(7, 4, 2)
    scores = [one.learn_one(x, label).score for x, label in zip(X, y, strict=True)]
    steps = many.learn_many(X, y)
    np.testing.assert_array_equal(steps.scores, scores)
    assert state_digest(one.get_state()) == state_digest(many.get_state())
    assert many.n_seen_ == 300 and many.n_updates_ == steps.n_aggressive
    np.testing.assert_array_equal(steps.losses, np.maximum(0, 1 - y * steps.scores))


def test_initialisation_variance_is_inverse_to_the_number_of_entries():
    model = DoSClassifier(n_features=999, rank=10, seed=0)
    variance = np.var(np.concatenate([model.U_.ravel(), model.V_.ravel()]))
    assert variance == pytest.approx(1.0 / (10 * 1000), rel=0.05)
    assert model.U_.shape == (10, 1000) and model.U_.base is not None  # transposed view
    model.U_[0, 0] = 5.0
    assert model.score_one(np.eye(999)[0]) != DoSClassifier(
        n_features=999, rank=10, seed=0
    ).score_one(np.eye(999)[0])


def test_huge_and_tiny_values():
    model = random_model(3, 2, 0)
    reference = state_digest(model.get_state())
    with pytest.raises(ValueError, match="overflow"):
        model.learn_one(np.array([1e200, 0.0, 0.0]), 1)
    with pytest.raises(ValueError, match="overflow"):
        model.learn_many(np.array([[1.0, 0.0, 0.0], [1e200, 0.0, 0.0]]), [1, -1])
    assert state_digest(model.get_state()) == reference
    step = model.learn_one(np.array([1e-300, 0.0, 0.0]), 1)
    assert step.aggressive and np.all(np.isfinite(model.U_))


def test_passive_when_margin_already_met():
    model = random_model(2, 2, 0)
    model.learn_one([1.0, 1.0], 1)
    model.U_[...] *= 2.0  # margin now about 4
    U0, V0 = model.U_.copy(), model.V_.copy()
    step = model.learn_one([1.0, 1.0], 1)
    assert not step.aggressive and step.loss == 0.0 and step.score > 1.0
    np.testing.assert_array_equal(model.U_, U0)
    np.testing.assert_array_equal(model.V_, V0)
    assert model.n_seen_ == 2 and model.n_updates_ == 1


# --- float32 storage (dtype="float32") ------------------------------------------------------
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def test_float32_step_is_the_float64_step_rounded():
    """From the same (float32-representable) parameters, the float32 model's step computes the
    same projections, score and step size as the float64 model (both accumulate in float64)
    and stores the float64 update rounded to float32: bit for bit, step after step."""
    rng = np.random.default_rng(20)
    for trial, mode in enumerate(["pa", "pa1", "pa2", "pa", "pa1", "pa2"]):
        n, rank = int(rng.integers(1, 40)), int(rng.integers(1, 17))
        kwargs = dict(n_features=n, rank=rank, mode=mode, C=0.3, seed=trial)
        scale = 0.0 if trial >= 3 else 1.0  # the degenerate zero start too (footnote 1)
        single = DoSClassifier(**kwargs, init_scale=scale, dtype="float32")
        double = DoSClassifier(**kwargs, init_scale=scale)
        X = rng.standard_normal((60, n)) * (rng.random((60, n)) < 0.4) * 10 ** rng.uniform(-1, 1)
        y = np.where(rng.random(60) < 0.5, 1, -1)
        for x, label in zip(X, y, strict=True):
            double.U_[...] = single.U_
            double.V_[...] = single.V_
            expected, step = double.learn_one(x, label), single.learn_one(x, label)
            assert step == expected
            np.testing.assert_array_equal(single.U_, double.U_.astype(np.float32))
            np.testing.assert_array_equal(single.V_, double.V_.astype(np.float32))
        assert single.U_.dtype == single.V_.dtype == np.float32
        assert single.n_updates_ == double.n_updates_ > 0


@pytest.mark.parametrize("mode", ["pa", "pa1", "pa2"])
def test_float32_step_matches_numpy_reference(mode):
    """Against the plain-numpy float64 step from the same parameters: equal up to the final
    rounding to float32 (half an ulp) and the reference's own root tolerance."""
    rng = np.random.default_rng(21)
    for trial in range(200):
        n, rank = int(rng.integers(1, 8)), int(rng.integers(1, 5))
        C = float(10 ** rng.uniform(-3, 1))
        model = DoSClassifier(
            n_features=n,
            rank=rank,
            mode=mode,
            C=C,
            seed=trial,
            init_scale=float(10 ** rng.uniform(-2, 1)),
            dtype="float32",
        )
        x = rng.standard_normal(n) * 10 ** rng.uniform(-2, 1)
        y = float(rng.choice([-1, 1]))
        U, V = model.U_.astype(np.float64), model.V_.astype(np.float64)
        U_ref, V_ref, score_ref, nu_ref = naive.dos_pa_step(U, V, naive.augment(x), y, mode, C)
        step = model.learn_one(x, y)
        assert step.score == pytest.approx(score_ref, rel=1e-12, abs=1e-14)
        assert step.aggressive == (nu_ref > 0)
        for got, want in ((model.U_, U_ref), (model.V_, V_ref)):
            atol = 1e-9 * np.abs(want).max()
            np.testing.assert_allclose(got, want, rtol=FLOAT32_EPS, atol=atol)


def test_float32_aggressive_step_meets_margin_to_float32_precision():
    """The margin after an update is 1 up to the rounding of the stored parameters: each entry
    moves by at most half a float32 ulp, which moves |U z|^2 by at most eps32 (|U| |z|)^2."""
    rng = np.random.default_rng(22)
    worst, aggressive = 0.0, 0
    for trial in range(500):
        n, rank = int(rng.integers(1, 30)), int(rng.integers(1, 17))
        model = DoSClassifier(
            n_features=n,
            rank=rank,
            seed=trial,
            init_scale=float(10 ** rng.uniform(-4, 2)),
            dtype="float32",
        )
        x = rng.standard_normal(n) * 10 ** rng.uniform(-3, 2)
        y = float(rng.choice([-1, 1]))
        step = model.learn_one(x, y)
        if step.aggressive:
            aggressive += 1
            z = naive.augment(x)
            U, V = model.U_.astype(np.float64), model.V_.astype(np.float64)
            scale = np.sum((np.abs(U) @ np.abs(z)) ** 2) + np.sum((np.abs(V) @ np.abs(z)) ** 2)
            error = abs(margin(U, V, z, y) - 1.0)
            worst = max(worst, error / (FLOAT32_EPS * scale + 1e-12))
            assert model.score_one(x) * y == pytest.approx(1.0, rel=64 * FLOAT32_EPS * scale)
    assert aggressive > 100 and worst <= 1.0


def test_float32_learn_many_equals_learn_one_over_a_large_sparse_model():
    """The batch kernels learn and score as the per-example kernels do, over 2^16 features
    (``test_prefetch_is_only_a_hint``: with any prefetch distance)."""
    rng = np.random.default_rng(23)
    n = 1 << 16
    rows = [np.unique(rng.integers(0, n, rng.integers(0, 40))) for _ in range(200)]
    rows[7] = np.zeros(0, dtype=np.int64)  # an empty row: only the bias is learned
    rows[8] = np.array([n - 1])  # the last feature, next to the bias row
    X = [(r, rng.standard_normal(r.size)) for r in rows]
    y = np.where(rng.random(200) < 0.5, 1, -1)
    for dtype in ("float32", "float64"):
        one = DoSClassifier(n_features=n, rank=16, mode="pa1", seed=4, dtype=dtype)
        many = one.clone()
        scores = [one.learn_one(x, label).score for x, label in zip(X, y, strict=True)]
        steps = many.learn_many(X, y)
        np.testing.assert_array_equal(steps.scores, scores)
        assert state_digest(one.get_state()) == state_digest(many.get_state())
        np.testing.assert_array_equal(many.score_many(X), [many.score_one(x) for x in X])


def test_parameters_are_aligned_to_two_cache_lines():
    for dtype in ("float64", "float32"):
        for n in (1, 5, 1000):
            model = DoSClassifier(n_features=n, rank=16, dtype=dtype)
            assert model.U_.ctypes.data % 128 == 0  # U_[0, 0] is the first entry of W
            assert model.U_.dtype == np.dtype(dtype) and model.U_.shape == (16, n + 1)


def test_prefetch_is_only_a_hint():
    from core.features import as_batch
    from core.kernels.dos import _dos_learn_rows, _dos_prefetch_rows, _dos_score_rows

    for dtype, rank in ((np.float64, 16), (np.float32, 16), (np.float32, 3), (np.float64, 1)):
        W = np.arange(7 * 2 * rank, dtype=dtype).reshape(7, 2 * rank)
        before = W.copy()
        _dos_prefetch_rows(W, np.array([0, 3, 6], dtype=np.int64))
        _dos_prefetch_rows(W, np.zeros(0, dtype=np.int64))
        np.testing.assert_array_equal(W, before)
    # any prefetch distance learns and scores the same, bit for bit
    rng = np.random.default_rng(24)
    X = [(np.unique(rng.integers(0, 500, 9)), rng.standard_normal(9)) for _ in range(50)]
    batch = as_batch([(i, v[: i.size]) for i, v in X], 500)
    y = np.where(rng.random(50) < 0.5, 1.0, -1.0)
    results = []
    for ahead in (0, 1, 3, 100):
        W = DoSClassifier(n_features=500, rank=4, seed=1, dtype="float32").W_
        scores, nus, after = np.zeros(50), np.zeros(50), np.zeros(50)
        args = (batch.indptr, batch.indices, batch.values)
        assert _dos_learn_rows(W, *args, y, 1, 1.0, 0, scores, nus, ahead) == (-1, 50)
        _dos_score_rows(W, *args, after, ahead)
        results.append((W, scores, nus, after))
    for result in results[1:]:
        for got, want in zip(result, results[0], strict=True):
            np.testing.assert_array_equal(got, want)


def test_parameters_are_prefetched_only_when_they_outgrow_the_caches():
    from core.kernels.dos import PREFETCH_AHEAD, PREFETCH_MIN_BYTES, prefetch_distance

    rows = PREFETCH_MIN_BYTES // (32 * 8)  # float64 rows of rank 16
    assert prefetch_distance(np.empty((rows - 1, 32))) == 0
    assert prefetch_distance(np.empty((rows, 32))) == PREFETCH_AHEAD > 0
    assert prefetch_distance(np.empty((rows, 32), dtype=np.float32)) == 0
    assert prefetch_distance(np.empty((2 * rows, 32), dtype=np.float32)) == PREFETCH_AHEAD


def test_float32_state_round_trip_and_dtype_checks():
    model = DoSClassifier(n_features=6, rank=3, seed=5, dtype="float32")
    model.learn_many(np.eye(6), [1, -1, 1, -1, 1, -1])
    state = model.get_state()
    assert state["params"]["dtype"] == "float32"
    assert state["arrays"]["U_"].dtype == np.float32
    loaded = DoSClassifier(n_features=6, rank=3, seed=5, dtype="float32")
    loaded.set_state(state)
    assert state_digest(loaded.get_state()) == state_digest(state)
    with pytest.raises(ValueError, match="hyperparameters"):
        DoSClassifier(n_features=6, rank=3, seed=5).set_state(state)
    with pytest.raises(ValueError, match="dtype"):
        DoSClassifier(n_features=6, rank=3, dtype="float16")
    # a state written before the option existed is a float64 model's
    old = DoSClassifier(n_features=6, rank=3, seed=5).get_state()
    del old["params"]["dtype"]
    DoSClassifier(n_features=6, rank=3, seed=5).set_state(old)


def test_float32_overflow_is_refused_without_change():
    """init_scale beyond float32 is refused; an update that would round a stored float32 entry
    to infinity is refused and changes nothing (float64 stores the same update)."""
    with pytest.raises(ValueError, match="float32"):
        DoSClassifier(n_features=2, rank=1, init_scale=1e40, dtype="float32")
    results = {}
    for dtype in ("float32", "float64"):
        model = DoSClassifier(n_features=1, rank=1, dtype=dtype)
        # V z = 0 for z = [1, 1]: degenerate step, V grows by sqrt(1 + |U z|^2 / 4) / |z|^2
        model.U_[...] = [[2e38, 0.0]]
        model.V_[...] = [[3e38, -3e38]]
        before = model.get_state()
        if dtype == "float32":
            with pytest.raises(ValueError, match="overflows float64, or its update float32"):
                model.learn_one([1.0], -1)
            with pytest.raises(ValueError, match="row 0: .* update float32"):
                model.learn_many([[1.0]], [-1])
            assert state_digest(model.get_state()) == state_digest(before)
            assert model.n_seen_ == 0
        else:
            assert model.learn_one([1.0], -1).aggressive
        results[dtype] = model.V_[0, 0]
    assert results["float64"] == pytest.approx(3.5e38)
    # huge inputs overflow float64's squared norm in either dtype
    small = DoSClassifier(n_features=3, rank=2, dtype="float32")
    with pytest.raises(ValueError, match="overflow"):
        small.learn_one(np.array([1e200, 0.0, 0.0]), 1)
    step = small.learn_one(np.array([1e-300, 0.0, 0.0]), 1)
    assert step.aggressive and np.all(np.isfinite(small.U_))
