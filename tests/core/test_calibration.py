import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.isotonic import IsotonicRegression

from core.averaging import Averaged
from core.base import PartialBatchError
from core.calibration import Calibrated, IsotonicCalibrator, PlattCalibrator, sigmoid
from core.checks import check_estimator, digest
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.pqr import PQR
from core.registry import from_state, state_digest
from core.separation import EllipsoidalClassifier, Perceptron
from tests import naive


def logistic_stream(n=3000, seed=0, a=2.0, b=-0.5):
    rng = np.random.default_rng(seed)
    s = rng.standard_normal(n)
    return s, rng.random(n) < sigmoid(a * s + b)


def binary_stream(n=60, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.where(X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.standard_normal(n) > 0, 1, -1)


# -- Platt -------------------------------------------------------------------------------------
@pytest.mark.parametrize("memory", [50, 100_000])
def test_platt_kernel_matches_the_matrix_reference(memory):
    s, positive = logistic_stream(n=400, seed=1)
    s = s * 30.0  # a score scale far from 1: the ridge follows it
    platt = PlattCalibrator(memory=memory)
    platt.learn_many(s, positive)
    assert np.allclose(platt.coef_, naive.platt_online(s, positive, memory), rtol=1e-10)
    one = PlattCalibrator(memory=memory)
    for score, label in zip(s, positive, strict=True):
        one.learn_one(score, label)
    assert state_digest(one.get_state()) == state_digest(platt.get_state())


def test_platt_reaches_the_maximum_likelihood_fit():
    """With an unbounded memory the recursion solves Platt's problem: the logistic regression
    of the smoothed targets on the score, which scipy finds by batch minimisation."""
    s, positive = logistic_stream(n=20_000, seed=2)
    platt = PlattCalibrator(memory=10**9, ridge=1e-9)
    platt.learn_many(s, positive)
    n_pos, n_neg = positive.sum(), (~positive).sum()
    t = np.where(positive, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def loss(theta):
        p = np.clip(sigmoid(theta[0] * s + theta[1]), 1e-300, 1.0)
        q = np.clip(1.0 - sigmoid(theta[0] * s + theta[1]), 1e-300, 1.0)
        return -np.sum(t * np.log(p) + (1 - t) * np.log(q))

    best = minimize(loss, np.zeros(2), method="BFGS").x
    assert np.allclose(platt.coef_, best, atol=0.02)
    assert np.allclose(best, [2.0, -0.5], atol=0.1)


def test_platt_one_score_is_the_batch_bit_for_bit():
    s, positive = logistic_stream(n=500, seed=5)
    platt = PlattCalibrator()
    platt.learn_many(s, positive)
    queries = np.r_[s, 0.0, -0.0, 1e-300, 40.0, -40.0, 800.0, -800.0, 1e308, -1e308, np.inf]
    queries = np.r_[queries, -np.inf, np.nan]
    batch = platt.predict_proba(queries)  # through sigmoid, eight numpy calls
    one = np.array([platt.predict_proba([q])[0] for q in queries])
    assert np.array_equal(one, batch, equal_nan=True)
    assert one.shape == (len(queries),) and np.isnan(one[-1])
    assert one[-3] == 1.0 and one[-2] == 0.0  # the ends without overflow


def test_platt_is_scale_free_and_handles_degenerate_streams():
    s, positive = logistic_stream(n=2000, seed=3)
    small, large = PlattCalibrator(), PlattCalibrator()
    small.learn_many(s * 1e-4, positive)
    large.learn_many(s * 1e4, positive)
    assert np.allclose(small.predict_proba(s * 1e-4), large.predict_proba(s * 1e4), rtol=1e-6)
    fresh = PlattCalibrator()
    assert np.array_equal(fresh.predict_proba([-5.0, 0.0, 5.0]), [0.5, 0.5, 0.5])
    zeros = PlattCalibrator()  # every score 0: only the base rate is learned
    zeros.learn_many(np.zeros(1000), np.random.default_rng(0).permutation(1000) < 250)
    assert abs(zeros.predict_proba([0.0])[0] - 0.25) < 0.01 and zeros.coef_[0] == 0.0
    separable = PlattCalibrator()  # smoothed targets keep a finite
    separable.learn_many(np.r_[-np.ones(500), np.ones(500)], np.r_[np.zeros(500), np.ones(500)])
    assert np.all(np.isfinite(separable.coef_)) and separable.predict_proba([1.0])[0] < 1.0
    skipped = PlattCalibrator()
    skipped.learn_many([1e200, 1.0], [True, False])
    assert skipped.n_seen_ == 1


def test_platt_parameters_are_checked():
    for kwargs in ({"memory": 0}, {"memory": 2.5}, {"ridge": 0.0}, {"ridge": float("nan")}):
        with pytest.raises(ValueError):
            PlattCalibrator(**kwargs)


# -- isotonic ----------------------------------------------------------------------------------
def test_isotonic_matches_scikit_learn_on_the_window():
    rng = np.random.default_rng(4)
    s = np.round(rng.standard_normal(700), 2)  # ties
    positive = rng.random(700) < sigmoid(3 * s)
    iso = IsotonicCalibrator(memory=500)
    iso.learn_many(s[:300], positive[:300])
    for score, label in zip(s[300:], positive[300:], strict=True):
        iso.learn_one(score, label)
    window_s, window_y = s[-500:], positive[-500:].astype(float)
    reference = IsotonicRegression(out_of_bounds="clip").fit(window_s, window_y)
    queries = np.linspace(-3.5, 3.5, 301)
    expected = np.clip(reference.predict(queries), 1 / 502, 501 / 502)
    assert np.allclose(iso.predict_proba(queries), expected, atol=1e-12)
    assert np.all(np.diff(iso.predict_proba(queries)) >= 0)


def test_isotonic_state_round_trip_refits():
    s, positive = logistic_stream(n=300, seed=5)
    iso = IsotonicCalibrator(memory=100)
    iso.learn_many(s, positive)
    before = iso.predict_proba(s)
    other = IsotonicCalibrator(memory=100)
    other.predict_proba(s)  # a cached fit of the empty window must not survive set_state
    other.learn_one(0.3, True)
    other.predict_proba(s)
    other.set_state(iso.get_state())
    assert np.array_equal(other.predict_proba(s), before)


# -- the wrapper -------------------------------------------------------------------------------
FACTORIES = {
    "linear-platt": lambda: Calibrated(model=LinearPA(n_features=5)),
    "dos-isotonic": lambda: Calibrated(
        model=DoSClassifier(n_features=5, rank=2, seed=1), method="isotonic", memory=40
    ),
    "perceptron-strings": lambda: Calibrated(
        model=Perceptron(n_features=5, classes=["ham", "spam"]), memory=30
    ),
    "pqr": lambda: Calibrated(model=PQR(n_features=5, k=2, warmup=10)),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_generic_suite(name):
    X, y = binary_stream()
    if name == "perceptron-strings":
        check_estimator(
            FACTORIES[name], X, np.where(y > 0, "spam", "ham"), bad_labels=("eggs", 1, None, True)
        )
    else:
        check_estimator(FACTORIES[name], X, y)


def test_the_model_learns_exactly_as_without_calibrator():
    X, y = binary_stream(n=200)
    bare = DoSClassifier(n_features=5, rank=3, seed=4)
    wrapped = Calibrated(model=DoSClassifier(n_features=5, rank=3, seed=4))
    bare_steps = [bare.learn_one(x, label) for x, label in zip(X, y, strict=True)]
    wrapped_steps = [wrapped.learn_one(x, label) for x, label in zip(X, y, strict=True)]
    assert bare_steps == wrapped_steps
    assert state_digest(bare.get_state()) == state_digest(wrapped.model_.get_state())
    assert np.array_equal(wrapped.score_many(X), bare.score_many(X))
    # the calibrator learned the progressive scores, the same ones as a separate calibrator
    platt = PlattCalibrator()
    platt.learn_many([step.score for step in bare_steps], y > 0)
    assert np.array_equal(wrapped.calibrator_.coef_, platt.coef_)
    assert np.array_equal(wrapped.predict_proba_many(X), platt.predict_proba(bare.score_many(X)))


@pytest.mark.parametrize("method", ["platt", "isotonic"])
def test_a_batch_refused_part_way_calibrates_exactly_the_rows_learned(method):
    # scores ~1e6 x^2: the third row's score overflows float64 after two rows were learned
    X = np.array([[1.0], [2.0], [1e153], [1.0]])
    y = np.array([1, -1, 1, 1])
    wrapped = Calibrated(
        model=DoSClassifier(n_features=1, rank=1, init_scale=1e3), method=method, memory=8
    )
    with pytest.raises(PartialBatchError, match="2 earlier rows were learned") as refused:
        wrapped.learn_many(X, y)
    assert len(refused.value.learned) == 2 and wrapped.model_.n_seen_ == 2
    # the same model and calibrator as learning the two rows alone
    reference = Calibrated(
        model=DoSClassifier(n_features=1, rank=1, init_scale=1e3), method=method, memory=8
    )
    steps = reference.learn_many(X[:2], y[:2])
    np.testing.assert_array_equal(refused.value.learned.scores, steps.scores)
    assert wrapped.calibrator_.n_seen_ == 2
    assert digest(wrapped) == digest(reference)


def test_probabilities_are_calibrated_on_a_logistic_stream():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((6000, 3))
    y = np.where(rng.random(6000) < sigmoid(2.0 * X[:, 0] - X[:, 1]), 1, -1)
    model = Calibrated(model=LinearPA(n_features=3, mode="pa1", C=0.001))
    model.learn_many(X[:5000], y[:5000])
    p = model.predict_proba_many(X[5000:])
    truth = sigmoid(2.0 * X[5000:, 0] - X[5000:, 1])
    assert np.mean(np.abs(p - truth)) < 0.05
    log_loss = -np.mean(np.log(np.where(y[5000:] > 0, p, 1 - p)))
    best = -np.mean(np.log(np.where(y[5000:] > 0, truth, 1 - truth)))
    assert log_loss < best + 0.02


def test_wrapper_validation_and_margins_are_not_probabilities():
    with pytest.raises(ValueError, match="online binary classifier"):
        Calibrated(model=EllipsoidalClassifier(n_features=2))
    with pytest.raises(ValueError, match="task"):
        Calibrated(model=PQR(n_features=2, task="regression"))
    with pytest.raises(ValueError, match="method"):
        Calibrated(model=LinearPA(n_features=2), method="beta")
    with pytest.raises(ValueError, match="margins, not probabilities"):
        LinearPA(n_features=2).predict_proba_one([1.0, 0.0])
    model = Calibrated(model=Perceptron(n_features=2))
    assert model.status() == Perceptron(n_features=2).status()


# -- reductions and averaging --------------------------------------------------------------
def blobs(n=600, seed=7, classes=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    centres = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    k = rng.integers(0, len(classes), n)
    return centres[k] + rng.standard_normal((n, 2)), [classes[i] for i in k]


@pytest.mark.parametrize("reduction", [OneVsOne, OneVsRest])
def test_reductions_give_class_probabilities(reduction):
    X, y = blobs()
    model = reduction(
        base=Calibrated(model=LinearPA(n_features=2, mode="pa1", C=0.1)), classes=["a", "b", "c"]
    )
    model.learn_many(X[:500], y[:500])
    p = model.predict_proba_many(X[500:])
    assert p.shape == (100, 3) and np.allclose(p.sum(axis=1), 1.0) and np.all(p >= 0)
    assert np.mean(np.array(model.classes_)[p.argmax(axis=1)] == np.array(y[500:])) > 0.85
    assert np.allclose(model.predict_proba_one(X[500]), p[0], rtol=1e-12)
    log_loss = -np.mean(np.log(p[np.arange(100), [model.classes_.index(c) for c in y[500:]]]))
    assert log_loss < 0.35
    bare = reduction(base=LinearPA(n_features=2), classes=["a", "b", "c"])
    with pytest.raises(ValueError, match="Calibrated"):
        bare.predict_proba_many(X[:3])


def test_one_vs_one_coupling_solves_its_problem():
    model = OneVsOne(base=Calibrated(model=LinearPA(n_features=2)), classes=[0, 1, 2, 3])
    rng = np.random.default_rng(8)
    for p_scores in rng.standard_normal((5, 6)):
        for k, sub in enumerate(model.models_):  # a calibrator per pair: P(+1) = sigmoid(a s)
            sub.calibrator_.coef_[:] = [1.0 + k / 6, 0.0]
        p = model._probabilities(p_scores[None, :])[0]
        r = np.zeros((4, 4))
        for k, (i, j) in enumerate(model.pairs_):
            r[i, j] = sigmoid(model.models_[k].calibrator_.coef_[0] * p_scores[k])
            r[j, i] = 1.0 - r[i, j]
        assert np.allclose(p, naive.coupling_by_optimisation(r), atol=1e-6)
    # consistent pairwise probabilities r_ij = p_i / (p_i + p_j) give p back
    truth = np.array([0.1, 0.2, 0.3, 0.4])
    first = np.array([truth[i] / (truth[i] + truth[j]) for i, j in model.pairs_])
    for sub in model.models_:
        sub.calibrator_.coef_[:] = [1.0, 0.0]
    scores = np.log(first / (1.0 - first))  # sigmoid(score) = r_ij
    assert np.allclose(model._probabilities(scores[None, :])[0], truth, atol=1e-12)


def test_averaged_passes_probabilities_through_and_round_trips():
    X, y = binary_stream(n=120)
    model = Averaged(model=Calibrated(model=DoSClassifier(n_features=5, rank=2)), interval=10)
    model.learn_many(X, y)
    live = model.predict_proba_many(X, variant="live")
    averaged = model.predict_proba_many(X)
    assert live.shape == averaged.shape == (120,) and not np.array_equal(live, averaged)
    assert np.array_equal(averaged, model.average_.predict_proba_many(X))
    assert np.array_equal(model.proba_from_scores(model.score_many(X)), averaged)
    rebuilt = from_state(model.get_state())
    assert digest(rebuilt) == digest(model)
    assert np.array_equal(rebuilt.predict_proba_many(X), averaged)
    with pytest.raises(ValueError, match="time-averaged"):
        Averaged(model=Calibrated(model=LinearPA(n_features=2), method="isotonic"))
    with pytest.raises(ValueError, match="not probabilities"):
        Averaged(model=LinearPA(n_features=2)).predict_proba_one([1.0, 0.0])
