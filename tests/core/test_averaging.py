"""Averaged: the generic suite, learn_one == learn_many, and the averages it keeps (eq 28)."""

import numpy as np
import pytest

from core.align import aligned_average, running_average
from core.averaging import Averaged
from core.base import Estimator, PartialBatchError, Step, Steps
from core.checks import check_estimator, digest
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.registry import from_state, params_spec


def binary_stream(n=60, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1, -1)
    return X, y


class _TwoHeads(Estimator):
    """A composite test model (children "0" and "1"): the sum of a linear and a DoS score."""

    def __init__(self, *, n_features: int, seed: int = 0):
        self.n_features = n_features
        self.seed = seed
        self.heads_ = [
            LinearPA(n_features=n_features),
            DoSClassifier(n_features=n_features, rank=2, seed=seed),
        ]

    def _children(self):
        return [(str(i), head) for i, head in enumerate(self.heads_)]

    def learn_one(self, x, y):
        return [head.learn_one(x, y) for head in self.heads_]

    def learn_many(self, X, y):
        return [head.learn_many(X, y) for head in self.heads_]

    def score_one(self, x):
        return sum(head.score_one(x) for head in self.heads_)

    def score_many(self, X):
        return sum(np.asarray(head.score_many(X)) for head in self.heads_)

    def predict_one(self, x):
        return 1 if self.score_one(x) > 0 else -1

    def predict_many(self, X):
        return np.where(self.score_many(X) > 0, 1, -1)


FACTORIES = {
    "linear-7": lambda: Averaged(model=LinearPA(n_features=5), interval=7),
    "dos-5": lambda: Averaged(model=DoSClassifier(n_features=5, rank=3, seed=1), interval=5),
    "dos-pa2-1": lambda: Averaged(
        model=DoSClassifier(n_features=5, rank=2, mode="pa2", C=0.2, init_scale=0.0), interval=1
    ),
    "dos-float32-3": lambda: Averaged(
        model=DoSClassifier(n_features=5, rank=3, seed=1, dtype="float32"), interval=3
    ),
    "linear-never": lambda: Averaged(model=LinearPA(n_features=5, mode="pa1"), interval=1000),
    "composite-4": lambda: Averaged(model=_TwoHeads(n_features=5, seed=2), interval=4),
    "nested": lambda: Averaged(
        model=Averaged(model=DoSClassifier(n_features=5, rank=2), interval=3), interval=8
    ),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_generic_suite(name):
    X, y = binary_stream()
    check_estimator(FACTORIES[name], X, y)


@pytest.mark.parametrize("name", FACTORIES)
def test_learn_one_and_learn_many_are_identical(name):
    factory = FACTORIES[name]
    X, y = binary_stream(n=83, seed=1)
    one = factory()
    results = [one.learn_one(x_i, y_i) for x_i, y_i in zip(X, y, strict=True)]
    rng = np.random.default_rng(0)
    for _ in range(3):
        many = factory()
        cuts = np.sort(rng.choice(np.arange(1, len(X)), size=6, replace=False))
        bounds = [0, *cuts, len(X)]
        batch_results = []
        for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
            batch_results.append(many.learn_many(X[start:stop], y[start:stop]))
            assert many.n_seen_ == stop
        assert digest(many) == digest(one)
        assert many.n_averaged_ == len(X) // many.interval
        if isinstance(results[0], Step):
            scores = np.concatenate([r.scores for r in batch_results])
            assert np.array_equal(scores, [r.score for r in results])
    # one big batch, also as a list of rows
    whole = factory()
    steps = whole.learn_many(list(X), list(y))
    assert digest(whole) == digest(one)
    if isinstance(steps, Steps):
        assert len(steps.scores) == len(X)
        assert np.array_equal(steps.aggressive, [r.aggressive for r in results])


def test_averaged_linear_model_is_the_mean_of_snapshots():
    X, y = binary_stream(n=100, seed=3)
    interval = 7
    model = Averaged(model=LinearPA(n_features=5, mode="pa2", C=0.3), interval=interval)
    by_hand = LinearPA(n_features=5, mode="pa2", C=0.3)
    snapshots = []
    for i, (x_i, y_i) in enumerate(zip(X, y, strict=True)):
        step = model.learn_one(x_i, y_i)
        assert step == by_hand.learn_one(x_i, y_i)  # returns what the live model returns
        if (i + 1) % interval == 0:
            snapshots.append(by_hand.w_.copy())
    assert model.n_averaged_ == len(snapshots) == 14
    mean = np.mean(snapshots, axis=0)
    assert np.allclose(model.average_.w_, mean, rtol=1e-12, atol=1e-15)
    assert np.array_equal(model.live_.w_, by_hand.w_)
    assert not np.allclose(mean, by_hand.w_)
    assert np.allclose(model.score_many(X), X @ mean[:-1] + mean[-1], rtol=1e-12, atol=1e-12)
    assert np.array_equal(model.score_many(X, variant="live"), by_hand.score_many(X))
    assert model.score_one(X[0]) == pytest.approx(X[0] @ mean[:-1] + mean[-1], rel=1e-12)
    # the same through learn_many
    batched = Averaged(model=LinearPA(n_features=5, mode="pa2", C=0.3), interval=interval)
    batched.learn_many(X, y)
    assert np.array_equal(batched.average_.w_, model.average_.w_)


def test_averaged_dos_model_differs_from_live_and_is_the_aligned_average():
    X, y = binary_stream(n=120, seed=4)
    interval = 5
    model = Averaged(model=DoSClassifier(n_features=5, rank=3, seed=1), interval=interval)
    live = DoSClassifier(n_features=5, rank=3, seed=1)
    average = None
    for i, (x_i, y_i) in enumerate(zip(X, y, strict=True)):
        model.learn_one(x_i, y_i)
        live.learn_one(x_i, y_i)
        if (i + 1) % interval == 0:
            m = (i + 1) // interval
            average = aligned_average(average, (live.U_.copy(), live.V_.copy()), m)
    assert model.n_averaged_ == 24
    assert np.allclose(model.average_.U_, average[0], rtol=1e-12, atol=1e-12)
    assert np.allclose(model.average_.V_, average[1], rtol=1e-12, atol=1e-12)
    averaged_scores = model.score_many(X)
    live_scores = model.score_many(X, variant="live")
    assert np.array_equal(live_scores, live.score_many(X))
    assert np.all(np.isfinite(averaged_scores))
    assert not np.allclose(averaged_scores, live_scores, rtol=1e-3)
    assert np.array_equal(model.predict_many(X), np.where(averaged_scores > 0, 1, -1))
    assert model.predict_one(X[0]) == (1 if averaged_scores[0] > 0 else -1)
    assert model.predict_one(X[0], variant="live") == live.predict_one(X[0])


def test_before_the_first_averaging_step_the_averaged_variant_is_the_live_model():
    X, y = binary_stream()
    model = Averaged(model=DoSClassifier(n_features=5, rank=2, seed=5), interval=50)
    fresh = model.clone()
    model.learn_many(X[:49], y[:49])
    assert model.n_averaged_ == 0
    assert digest(model.average_) == digest(fresh.average_)  # untouched
    assert np.array_equal(model.score_many(X), model.score_many(X, variant="live"))
    assert np.array_equal(model.predict_many(X), model.live_.predict_many(X))
    model.learn_one(X[49], y[49])
    assert model.n_averaged_ == 1
    # m = 1: the average is the live model in min-norm form, the same classifier
    assert np.allclose(model.score_many(X), model.score_many(X, variant="live"), atol=1e-9)
    assert not np.allclose(model.average_.U_, model.live_.U_)


def test_variant_validation():
    X, _ = binary_stream()
    model = Averaged(model=LinearPA(n_features=5), interval=3)
    for bad in ("average", "LIVE", None, 1):
        for method in (model.score_one, model.predict_one):
            with pytest.raises(ValueError, match="variant"):
                method(X[0], variant=bad)
        for method in (model.score_many, model.predict_many):
            with pytest.raises(ValueError, match="variant"):
                method(X, variant=bad)


def test_constructor_validation_and_params():
    for interval in (0, -3, 2.5, True, "10", None):
        with pytest.raises(ValueError, match="interval"):
            Averaged(model=LinearPA(n_features=2), interval=interval)
    with pytest.raises(ValueError, match="Estimator"):
        Averaged(model="LinearPA", interval=2)
    inner = LinearPA(n_features=2, mode="pa1", C=0.5)
    model = Averaged(model=inner, interval=3)
    assert model.get_params() == {"model": inner, "interval": 3, "alignment": "paper"}
    assert params_spec(model) == {
        "model": {"kind": "LinearPA", "params": params_spec(inner)},
        "interval": 3,
        "alignment": "paper",
    }
    assert model.n_features == 2 and model.classes_ == (-1, 1)
    # the template passed in is never learned from
    before = digest(inner)
    model.learn_many(np.ones((10, 2)), [1] * 10)
    assert digest(inner) == before
    assert model.live_ is not inner and model.average_ is not model.live_


def test_state_round_trip_holds_both_models():
    X, y = binary_stream()
    model = Averaged(model=DoSClassifier(n_features=5, rank=2, seed=3), interval=6)
    model.learn_many(X, y)
    state = model.get_state()
    assert set(state["arrays"]) == {"live.U_", "live.V_", "average.U_", "average.V_"}
    assert state["scalars"]["n_seen_"] == 60 and state["scalars"]["n_averaged_"] == 10
    rebuilt = from_state(state)
    assert digest(rebuilt) == digest(model)
    assert np.array_equal(rebuilt.score_many(X), model.score_many(X))
    assert np.array_equal(rebuilt.score_many(X, variant="live"), model.score_many(X, "live"))
    # learning continues identically after a reload
    model.learn_many(X[:20], y[:20])
    rebuilt.learn_many(X[:20], y[:20])
    assert digest(rebuilt) == digest(model)


def test_a_refused_batch_across_averaging_boundaries_changes_nothing():
    X, y = binary_stream()
    model = Averaged(model=DoSClassifier(n_features=5, rank=2, seed=3), interval=4)
    model.learn_many(X[:10], y[:10])
    reference = digest(model)
    bad = X[10:30].copy()
    bad[-1, 2] = np.nan  # refused in the last chunk, after several averaging steps
    with pytest.raises(ValueError):
        model.learn_many(bad, y[10:30])
    assert digest(model) == reference
    bad_labels = np.array(y[10:30])
    bad_labels[15] = 0
    with pytest.raises(ValueError):
        model.learn_many(X[10:30], bad_labels)
    assert digest(model) == reference
    with pytest.raises(ValueError, match="labels"):
        model.learn_many(X[10:30], y[10:29])
    with pytest.raises(ValueError, match="2-D"):
        model.learn_many(X[10], y[10:11])
    assert digest(model) == reference
    model.learn_many(X[10:30], y[10:30])
    assert model.n_seen_ == 30 and model.n_averaged_ == 7


def test_a_batch_refused_part_way_in_one_chunk_counts_the_rows_learned():
    # scores ~1e6 x^2: the third row's score overflows float64 after two rows were learned
    X = np.array([[1.0], [2.0], [1e153], [1.0]])
    y = np.array([1, -1, 1, 1])
    model = Averaged(model=DoSClassifier(n_features=1, rank=1, init_scale=1e3), interval=5)
    with pytest.raises(PartialBatchError):
        model.learn_many(X, y)
    assert model.n_seen_ == model.live_.n_seen_ == 2
    model.learn_many(X[3:], y[3:])
    model.learn_many(X[:2], y[:2])  # the fifth example: the first averaging step
    assert model.n_seen_ == 5 and model.n_averaged_ == 1


def test_spectral_alignment_option():
    X, y = binary_stream(n=40)
    model = Averaged(
        model=DoSClassifier(n_features=5, rank=2, seed=1), interval=5, alignment="spectral"
    )
    model.learn_many(X, y)
    assert model.n_averaged_ == 8
    assert np.all(np.isfinite(model.score_many(X)))
    paper = Averaged(model=DoSClassifier(n_features=5, rank=2, seed=1), interval=5)
    paper.learn_many(X, y)
    np.testing.assert_array_equal(
        model.score_many(X, variant="live"), paper.score_many(X, variant="live")
    )
    assert digest(model.clone()) == digest(
        Averaged(
            model=DoSClassifier(n_features=5, rank=2, seed=1), interval=5, alignment="spectral"
        )
    )
    with pytest.raises(ValueError, match="alignment"):
        Averaged(model=LinearPA(n_features=2), alignment="best")


def test_models_whose_state_is_not_a_weight_vector_are_refused():
    from core.one_vs_rest import OneVsRest
    from core.pqr import PQR

    with pytest.raises(ValueError, match="cannot be time-averaged"):
        Averaged(model=PQR(n_features=3, k=1))
    with pytest.raises(ValueError, match="cannot be time-averaged"):
        Averaged(model=OneVsRest(base=PQR(n_features=3, k=1), classes=[0, 1, 2]))


@pytest.mark.parametrize("name", [*FACTORIES, "dos-wide"])
def test_fast_state_copies_are_get_state(name):
    """The fold's copies (C order, a block of columns at a time) and the rollback's (each
    array's own layout) hold exactly what get_state gives."""
    from core.averaging import _state

    if name == "dos-wide":  # more columns than one copy block, U_ and V_ transposed views
        model = Averaged(model=DoSClassifier(n_features=2500, rank=3, seed=4), interval=5)
        X = np.random.default_rng(0).standard_normal((12, 2500))
        y = np.where(X[:, 0] > 0, 1, -1)
    else:
        model = FACTORIES[name]()
        X, y = binary_stream()
    model.learn_many(X, y)
    for estimator in (model, model.live_, model.average_):
        expected, before = estimator.get_state(), digest(estimator)
        for order in ("C", "K"):
            state = _state(estimator, order)
            assert {k: state[k] for k in ("kind", "params", "scalars")} == {
                k: expected[k] for k in ("kind", "params", "scalars")
            }
            assert state["arrays"].keys() == expected["arrays"].keys()
            for key, array in expected["arrays"].items():
                copy = state["arrays"][key]
                assert copy.dtype == array.dtype and copy.shape == array.shape
                assert np.array_equal(copy, array) and not np.shares_memory(copy, array)
                if order == "C":
                    assert copy.flags.c_contiguous and copy.tobytes() == array.tobytes()
            estimator.set_state(state)
            assert digest(estimator) == before


def test_the_fold_is_written_in_place_without_copies_of_the_model():
    """Once the average exists, a fold reads both models where they are and writes the
    average's own arrays: nothing of the model's size is allocated (for a large model,
    fresh memory was most of the fold's time, under the service's writer lock)."""
    import tracemalloc

    rng = np.random.default_rng(0)
    X = rng.standard_normal((90, 1 << 12))
    y = np.where(X[:, 0] > 0, 1, -1)
    model = Averaged(model=DoSClassifier(n_features=X.shape[1], rank=16, seed=1), interval=30)
    for start, stop in ((0, 30), (30, 60), (60, 88)):  # two folds, the second in place
        model.learn_many(X[start:stop], y[start:stop])  # (its kernels compiled)
    model.learn_one(X[88], y[88])
    storage = model.average_.U_
    copy = from_state(model.get_state())
    tracemalloc.start()
    try:
        model.learn_one(X[89], y[89])  # the third fold, in place
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert model.n_averaged_ == 3 and np.shares_memory(model.average_.U_, storage)
    assert peak < storage.nbytes / 4, (peak, storage.nbytes)  # (the row itself: 64 KB)
    # the same values as the fold of copies (learn_many's path across an averaging step)
    reference = from_state(copy.get_state())
    reference.average_.set_state(
        running_average(
            reference.average_.get_state(),
            _learned(reference.live_, X[89], y[89]).get_state(),
            3,
        )
    )
    assert digest(reference.average_) == digest(model.average_)


def _learned(model, x, y):
    model.learn_one(x, y)
    return model


def test_averages_within_says_whether_an_interval_ends():
    model = Averaged(model=LinearPA(n_features=2), interval=3)
    assert not model.averages_within(0)
    assert not model.averages_within(2) and model.averages_within(3)
    model.learn_one(np.array([1.0, 0.0]), 1.0)
    assert not model.averages_within(1) and model.averages_within(2)
    model.learn_many(np.array([[0.0, 1.0], [1.0, 1.0]]), np.array([1.0, -1.0]))
    assert model.n_averaged_ == 1  # it said so: the interval ended
    assert model.averages_within(100) and not model.averages_within(2)


def test_a_state_with_more_averages_than_intervals_is_refused():
    """``n_averaged_`` counts the intervals ended: a state claiming more would fold the next
    snapshot with a wrong weight 1/m (eq 28); refused, nothing loaded."""
    model = Averaged(model=LinearPA(n_features=3), interval=3)
    X, y = binary_stream(n=7, d=3)
    model.learn_many(X, y)
    state = model.get_state()
    assert state["scalars"]["n_averaged_"] == 2
    before = digest(model)
    for seen, averaged in ((7, 3), (5, 2), (0, 1)):
        broken = {
            **state,
            "scalars": {**state["scalars"], "n_seen_": seen, "n_averaged_": averaged},
        }
        with pytest.raises(ValueError, match="n_averaged_"):
            model.set_state(broken)
        assert digest(model) == before
    model.set_state({**state, "scalars": {**state["scalars"], "n_seen_": 9}})  # 3 intervals
