import numpy as np
import pytest
from scipy.optimize import minimize

from core.linear import LinearPA
from core.registry import state_digest
from tests import naive


@pytest.mark.parametrize("mode", ["pa", "pa1", "pa2"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_matches_numpy_reference(mode, fit_intercept):
    rng = np.random.default_rng(0)
    model = LinearPA(n_features=6, mode=mode, C=0.3, fit_intercept=fit_intercept)
    w = np.zeros(7)
    for _ in range(300):
        x = rng.standard_normal(6) * (rng.random(6) < 0.7)
        y = float(rng.choice([-1, 1]))
        w, score, tau = naive.linear_pa_step(
            w, naive.augment(x, float(fit_intercept)), y, mode, 0.3
        )
        step = model.learn_one(x, y)
        assert step.score == pytest.approx(score, rel=1e-12, abs=1e-14)
        assert step.aggressive == (tau > 0)
    np.testing.assert_allclose(model.w_, w, rtol=1e-10, atol=1e-12)
    if not fit_intercept:
        assert model.w_[-1] == 0.0


def test_pa_step_meets_margin_and_is_minimal():
    rng = np.random.default_rng(1)
    for _ in range(50):
        model = LinearPA(n_features=4)
        model.w_[:] = rng.standard_normal(5)
        w0 = model.w_.copy()
        x, y = rng.standard_normal(4), float(rng.choice([-1, 1]))
        if model.learn_one(x, y).aggressive:
            z = naive.augment(x)
            assert y * model.w_ @ z == pytest.approx(1.0, abs=1e-12)
            best = minimize(
                lambda w, w0=w0: np.sum((w - w0) ** 2),
                w0,
                method="SLSQP",
                constraints=[{"type": "ineq", "fun": lambda w, z=z, y=y: y * w @ z - 1}],
            )
            # SLSQP may violate the constraint by ~1e-9, hence the relative slack
            assert np.sum((model.w_ - w0) ** 2) <= best.fun * (1 + 1e-7) + 1e-12


def test_soft_margin_steps_are_bounded():
    x = np.array([0.1, 0.0])
    pa1 = LinearPA(n_features=2, mode="pa1", C=0.05)
    step = pa1.learn_one(x, 1)
    assert step.aggressive
    np.testing.assert_allclose(pa1.w_, 0.05 * np.array([0.1, 0.0, 1.0]))  # tau clipped at C
    pa2 = LinearPA(n_features=2, mode="pa2", C=0.05)
    pa2.learn_one(x, 1)
    tau = 1.0 / (1.01 + 1.0 / 0.1)
    np.testing.assert_allclose(pa2.w_, tau * np.array([0.1, 0.0, 1.0]))


def test_zero_vector_without_intercept_is_passive():
    model = LinearPA(n_features=3, fit_intercept=False)
    step = model.learn_one(np.zeros(3), 1)
    assert step.loss == 1.0 and not step.aggressive
    assert not np.any(model.w_)
    steps = model.learn_many(np.zeros((2, 3)), [1, -1])
    assert steps.n_aggressive == 0


def test_learn_many_equals_learn_one():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 5))
    y = np.where(X[:, 0] + 0.1 * rng.standard_normal(200) > 0, 1, -1)
    one, many = LinearPA(n_features=5, mode="pa1"), LinearPA(n_features=5, mode="pa1")
    for x, label in zip(X, y, strict=True):
        one.learn_one(x, label)
    many.learn_many(X, y)
    assert state_digest(one.get_state()) == state_digest(many.get_state())


def test_huge_values_rejected_without_change():
    model = LinearPA(n_features=2)
    model.learn_one([1.0, 2.0], 1)
    reference = state_digest(model.get_state())
    with pytest.raises(ValueError, match="overflow"):
        model.learn_one([1e200, 0.0], 1)
    with pytest.raises(ValueError, match="overflow"):
        model.learn_many([[1.0, 0.0], [0.0, 1e300]], [1, 1])
    assert state_digest(model.get_state()) == reference


def test_a_step_size_that_overflows_is_refused_without_change():
    # |z|^2 = 1e-320 without intercept: PA's tau = l / |z|^2 is not a float64
    model = LinearPA(n_features=1, fit_intercept=False)
    with pytest.raises(ValueError, match="overflow"):
        model.learn_one([1e-160], 1)
    assert model.n_seen_ == 0 and np.all(model.w_ == 0.0)
    with pytest.raises(ValueError, match="row 1"):
        model.learn_many([[1.0], [1e-160]], [-1, 1])
    np.testing.assert_array_equal(model.w_, [-1.0, 0.0])
    assert LinearPA(n_features=1, fit_intercept=False, mode="pa1").learn_one([1e-160], 1).aggressive


def test_separable_stream_converges():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((2000, 10))
    w = rng.standard_normal(10)
    y = np.where(X @ w > 0, 1, -1)
    model = LinearPA(n_features=10)
    model.learn_many(X[:1500], y[:1500])
    assert np.mean(model.predict_many(X[1500:]) == y[1500:]) > 0.93
