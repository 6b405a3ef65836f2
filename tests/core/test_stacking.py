"""The stacked paths of the reductions (``core.stacking.Stack``): batch scoring by one
product against all binary models, and one-vs-one learning with progressive scores by block
products and Gram corrections, or pair by pair (``learn_pair_by_pair``). Each is compared with
the per-model / ``learn_one`` path it replaces, at rounding tolerance (pair by pair: bit for
bit)."""

import numpy as np
import pytest
import scipy.sparse as sp

import core.stacking as stacking
from core.averaging import Averaged
from core.base import PartialBatchError
from core.calibration import Calibrated
from core.dos import DoSClassifier
from core.features import as_batch
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.registry import state_digest

CLASSES = [3, 0, 7, 1, 5]


def stream(n=200, d=6, seed=0, density=1.0, classes=CLASSES):
    """Gaussian blobs (one centre per class), labels drawn uniformly; entries kept with
    probability ``density`` (a CSR matrix when below 1)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(classes), d)) * 2.0
    k = rng.integers(len(classes), size=n)
    X = centres[k] + rng.standard_normal((n, d))
    if density < 1.0:
        X = sp.csr_matrix(X * (rng.random((n, d)) < density))
    return X, np.array(classes)[k] if not isinstance(classes[0], str) else [classes[i] for i in k]


BASES = {
    "dos": lambda d: DoSClassifier(n_features=d, rank=3, seed=2),
    "dos-pa1": lambda d: DoSClassifier(n_features=d, rank=2, mode="pa1", C=0.05, seed=1),
    "dos-pa2": lambda d: DoSClassifier(n_features=d, rank=4, mode="pa2", C=0.5, seed=3),
    "dos-zero": lambda d: DoSClassifier(n_features=d, rank=3, init_scale=0.0),  # footnote 1
    # float32 parameters are not stacked: they learn through their own step (overflow check)
    "dos-float32": lambda d: DoSClassifier(n_features=d, rank=3, dtype="float32", seed=5),
    "dos-calibrated": lambda d: Calibrated(model=DoSClassifier(n_features=d, rank=3, seed=4)),
    "linear": lambda d: LinearPA(n_features=d),
    "linear-no-intercept": lambda d: LinearPA(n_features=d, mode="pa1", fit_intercept=False),
    "linear-calibrated": lambda d: Calibrated(model=LinearPA(n_features=d, mode="pa2")),
}


def per_model_scores(model, X):
    """The binary models' scores, model by model (the path the stack replaces)."""
    batch = as_batch(X, model.n_features)
    return np.column_stack([m.score_batch(batch) for m in model.models_])


def assert_close(new, old, rtol=1e-9):
    """Equal to rounding: relative to the largest magnitude of the scores compared."""
    scale = max(float(np.max(np.abs(old), initial=0.0)), 1e-300)
    np.testing.assert_allclose(new, old, rtol=rtol, atol=rtol * scale)


def assert_states_close(a, b, rtol=1e-9):
    sa, sb = a.get_state(), b.get_state()
    assert sa["scalars"] == sb["scalars"]
    assert sa["arrays"].keys() == sb["arrays"].keys()
    for name, array in sa["arrays"].items():
        assert_close(np.asarray(sb["arrays"][name], float), np.asarray(array, float), rtol)


@pytest.mark.parametrize("reduction", [OneVsOne, OneVsRest])
@pytest.mark.parametrize("base", sorted(BASES))
@pytest.mark.parametrize("density", [1.0, 0.3], ids=["dense", "csr"])
def test_stacked_scores_match_the_per_model_path(reduction, base, density, product):
    X, y = stream(n=300, density=density)
    model = reduction(base=BASES[base](6), classes=CLASSES)
    model.learn_many(X[:150], y[:150])
    stacked = stacking.Stack.of(model.models_, as_batch(X, 6), 6)
    assert (stacked is None) == (base == "dos-float32")
    old = per_model_scores(model, X)
    new = model.decide_batch(as_batch(X, 6))[2]
    assert_close(new, old)
    winners, scores, model_scores = model.decide_batch(as_batch(X, 6))
    assert np.array_equal(model.predict_many(X), np.array(CLASSES)[winners])
    assert_close(scores, model.score_many(X))
    assert np.array_equal(model_scores, new)
    if "calibrated" in base:
        assert_close(model.proba_from_model_scores(model_scores), model.predict_proba_many(X))


def test_stacked_predictions_equal_the_per_model_ones_on_a_large_sparse_space():
    """2^14 hashed features: only the batch's active features are stacked (renumbered)."""
    d = 1 << 14
    rng = np.random.default_rng(5)
    rows = rng.integers(0, d, size=(400, 12))
    X = sp.csr_matrix(
        (rng.standard_normal(rows.size), rows.ravel(), np.arange(0, rows.size + 1, 12)),
        shape=(400, d),
    )
    X.sum_duplicates()
    y = np.array(CLASSES)[rng.integers(len(CLASSES), size=400)]
    model = OneVsOne(base=DoSClassifier(n_features=d, rank=2, seed=0), classes=CLASSES)
    model.learn_many(X, y)
    assert (d + 1) * 4 * 10 > stacking.FULL_STACK_FLOATS or X.nnz < d
    stack = stacking.Stack.of(model.models_, as_batch(X, d), d)
    assert stack.W.shape[0] < d  # compacted
    assert_close(model.decide_batch(as_batch(X, d))[2], per_model_scores(model, X))


def multiply_by(monkeypatch, product: str) -> None:
    """Blocks multiplied densely by BLAS (``"blas"``), or as CSR by scipy (``"scipy"``)."""
    monkeypatch.setattr(stacking, "DENSE_SHARE", 0.0 if product == "blas" else 2.0)


@pytest.fixture(params=["blas", "scipy"])
def product(request, monkeypatch):
    """Blocks multiplied densely by BLAS, or as CSR by scipy."""
    multiply_by(monkeypatch, request.param)
    return request.param


@pytest.fixture(params=["pairs", "blas", "scipy"])
def path(request, monkeypatch):
    """One-vs-one progressive learning pair by pair (small DoS pairs), or by block products
    multiplied densely by BLAS or as CSR by scipy (every pair)."""
    if request.param != "pairs":
        monkeypatch.setattr(stacking, "PAIR_BY_PAIR_BYTES", -1)
        multiply_by(monkeypatch, request.param)
    return request.param


def learn_one_loop(model, X, y):
    rows = X if isinstance(X, np.ndarray) else [X[i] for i in range(X.shape[0])]
    return [model.learn_one(x, label) for x, label in zip(rows, y, strict=True)]


@pytest.mark.parametrize("base", sorted(BASES))
@pytest.mark.parametrize("density", [1.0, 0.4], ids=["dense", "csr"])
def test_progressive_learn_many_is_the_learn_one_loop(base, density, path):
    """Scores before each update (every pair), predictions, losses, aggressive counts, final
    parameters, counters and calibrators: as learn_one, to rounding; several blocks."""
    X, y = stream(n=3 * stacking.PROGRESSIVE_BLOCK_ROWS + 17, density=density)
    reference = OneVsOne(base=BASES[base](6), classes=CLASSES)
    model = reference.clone()
    reference.learn_many(X[:20], y[:20])
    model.learn_many(X[:20], y[:20])
    expected = learn_one_loop(reference, X[20:], y[20:])
    steps = model.learn_many(X[20:], y[20:], progressive=True)
    assert np.array_equal(steps.predicted, [s.predicted for s in expected])
    assert_close(steps.scores, np.array([s.score for s in expected]))
    assert_close(steps.losses, np.array([s.loss for s in expected]))
    assert np.array_equal(steps.aggressive_counts, [s.n_aggressive for s in expected])
    assert np.array_equal(steps.aggressive, [s.aggressive for s in expected])
    assert_states_close(model, reference)


def test_progressive_learn_many_under_time_averaging_is_the_learn_one_loop(path):
    """Averaged cuts the batch at its averaging steps and passes ``progressive`` on."""
    X, y = stream(n=260, d=8)
    reference = Averaged(
        model=OneVsOne(base=Calibrated(model=DoSClassifier(n_features=8, rank=2)), classes=CLASSES),
        interval=70,
    )
    model = reference.clone()
    expected = learn_one_loop(reference, X, y)
    steps = model.learn_many(X, y, progressive=True)
    assert np.array_equal(steps.predicted, [s.predicted for s in expected])
    assert_close(steps.losses, np.array([s.loss for s in expected]))
    assert model.n_averaged_ == reference.n_averaged_ == 3
    assert_states_close(model, reference)
    assert np.array_equal(model.predict_many(X), reference.predict_many(X))


def test_progressive_is_exact_not_the_batch_start_state():
    """Each example is scored by the state just before it: a stream that repeats one example
    is predicted differently once the model has learned it (scoring every row by the batch's
    starting state would repeat the first prediction)."""
    x = np.array([[1.0, -2.0, 0.5]])
    X = np.repeat(x, 20, axis=0)
    y = np.array([7] * 20)
    model = OneVsOne(base=DoSClassifier(n_features=3, rank=2, seed=0), classes=CLASSES)
    start = model.predict_many(x)[0]
    steps = model.learn_many(X, y, progressive=True)
    assert start != 7 and steps.predicted[0] == start and steps.predicted[-1] == 7


def test_progressive_degenerate_batches(path):
    model = OneVsOne(base=DoSClassifier(n_features=4, rank=2, seed=1), classes=CLASSES)
    reference = model.clone()
    empty = model.learn_many(np.zeros((0, 4)), [], progressive=True)
    assert empty.scores.shape == (0, len(CLASSES)) and len(empty) == 0 and empty.predicted.size == 0
    # zero vectors (z = [0, 1]) and a row of huge but finite values, over several blocks
    X = np.zeros((70, 4))
    X[::3] = [1.0, 2.0, 0.0, -1.0]
    X[5] = [1e60, 0.0, -1e60, 0.0]
    y = np.array(CLASSES * 14)
    expected = learn_one_loop(reference, X, y)
    steps = model.learn_many(X, y, progressive=True)
    assert np.array_equal(steps.predicted, [s.predicted for s in expected])
    assert_close(steps.losses, np.array([s.loss for s in expected]))
    assert_states_close(model, reference)


def overflowing_at(row: int):
    """A one-vs-one model, its clone, and 40 rows of which ``row`` has a finite squared norm
    but a score that overflows float64."""
    model = OneVsOne(
        base=DoSClassifier(n_features=2, rank=1, init_scale=1e3, seed=0), classes=CLASSES
    )
    X = np.tile([[1.0, -1.0], [2.0, 0.5]], (20, 1))
    X[row] = [1e153, 0.0]
    return model, model.clone(), X, np.array(CLASSES * 8)


def test_progressive_overflow_refuses_the_row_and_keeps_the_rows_before(path):
    """A score that overflows float64 mid-batch: the rows before it are learned (all their
    pairs), that row and the rest are not, as in the learn_one loop (pair by pair: the pairs
    that learned past the row are put back and the batch goes by blocks)."""
    model, reference, X, y = overflowing_at(25)
    expected = learn_one_loop(reference, X[:25], y[:25])
    with pytest.raises(ValueError, match="overflows"):
        reference.learn_one(X[25], y[25])
    with pytest.raises(PartialBatchError, match="row 25") as error:
        model.learn_many(X, y, progressive=True)
    assert len(error.value.learned) == 25
    assert np.array_equal(error.value.learned.predicted, [s.predicted for s in expected])
    assert_states_close(model, reference)
    # a squared norm that overflows is refused before anything is learned
    before = state_digest(model.get_state())
    with pytest.raises(ValueError, match="squared norm"):
        model.learn_many(np.array([[1.0, 0.0]] * 9 + [[1e200, 0.0]]), y[:10], progressive=True)
    assert state_digest(model.get_state()) == before


@pytest.mark.parametrize("base", ["dos", "dos-pa1", "dos-pa2", "dos-zero", "dos-float32"])
@pytest.mark.parametrize("density", [1.0, 0.4], ids=["dense", "csr"])
def test_pair_by_pair_is_the_learn_one_loop_bit_for_bit(base, density):
    """Each pair takes the learn_one loop's steps in its order, by the same kernel: scores,
    losses and parameters are equal, not only close; the pairs' counters too."""
    X, y = stream(n=150, density=density)
    reference = OneVsOne(base=BASES[base](6), classes=CLASSES)
    model = reference.clone()
    expected = learn_one_loop(reference, X, y)
    assert model.models_[0].W_.nbytes <= stacking.PAIR_BY_PAIR_BYTES
    steps = model.learn_many(X, y, progressive=True)
    assert np.array_equal(steps.scores, np.array([s.score for s in expected]))
    assert np.array_equal(steps.losses, [s.loss for s in expected])
    assert np.array_equal(steps.aggressive_counts, [s.n_aggressive for s in expected])
    assert state_digest(model.get_state()) == state_digest(reference.get_state())


def test_pair_by_pair_puts_every_pair_back_when_one_cannot_learn(monkeypatch):
    """Row 29 (class 5, learned by pairs 3, 6, 8 and 9 only) overflows its score: pairs 0-2
    have learned the whole batch by then. They are put back, and the batch is learned by
    blocks, as the learn_one loop learns it (the rows before, then the refusal)."""
    model, reference, X, y = overflowing_at(29)
    assert y[29] == 5 and min(model._pairs_of[4]) == 3
    expected = learn_one_loop(reference, X[:29], y[:29])
    calls = []
    original = stacking.learn_pair_by_pair
    monkeypatch.setattr(
        stacking, "learn_pair_by_pair", lambda *a: calls.append(original(*a)) or calls[-1]
    )
    with pytest.raises(PartialBatchError, match="row 29") as error:
        model.learn_many(X, y, progressive=True)
    assert calls == [None]  # tried pair by pair, then learned by blocks
    assert np.array_equal(error.value.learned.predicted, [s.predicted for s in expected])
    assert_states_close(model, reference)


def test_one_vs_rest_learn_many_carries_progressive_predictions():
    """One-vs-rest needs no option: every model learns every row, so learn_many's steps
    already hold the scores and predictions before each update."""
    X, y = stream(n=120)
    reference = OneVsRest(base=DoSClassifier(n_features=6, rank=2), classes=CLASSES)
    model = reference.clone()
    expected = learn_one_loop(reference, X, y)
    steps = model.learn_many(X, y)
    assert np.array_equal(steps.predicted, [s.predicted for s in expected])


@pytest.mark.parametrize("reduction", [OneVsOne, OneVsRest])
def test_dense_rows_are_scored_without_the_csr_form_and_still_validated(reduction):
    """A dense float array goes to the stack as it is (zero columns skipped per block);
    anything it cannot take (non-finite values, ints, few rows) goes through as_batch."""
    X, y = stream(n=300, d=8)
    X[:, [1, 5]] = 0.0  # features no row of a block uses
    X[::7] = 0.0  # zero rows
    model = reduction(base=BASES["dos-calibrated"](8), classes=CLASSES)
    model.learn_many(X, y)
    assert_close(model._model_scores_many(X), per_model_scores(model, X))
    assert np.array_equal(model.predict_many(X), model.predict_many(sp.csr_matrix(X)))
    assert_close(model.predict_proba_many(X), model.predict_proba_many(sp.csr_matrix(X)))
    assert_close(model.score_many(X[:5]), model.score_many(sp.csr_matrix(X[:5])))
    bad = X.copy()
    bad[20, 3] = np.nan
    with pytest.raises(ValueError, match="finite"):
        model.predict_many(bad)
    with pytest.raises(ValueError):
        model.predict_many(X[:, :7])
    integers = np.rint(X).astype(np.int64)
    assert np.array_equal(model.predict_many(integers), model.predict_many(integers.astype(float)))
