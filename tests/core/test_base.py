import numpy as np
import pytest
import scipy.sparse as sp

from core.averaging import Averaged
from core.calibration import Calibrated
from core.checks import check_estimator
from core.dos import DoSClassifier
from core.features import as_batch
from core.labels import LabelMap, check_binary_label
from core.linear import LinearPA
from core.mofm import MultiOutputPN
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.ordinal import OrdinalMcRank
from core.pqr import PQR
from core.registry import state_digest
from core.separation import EllipsoidPerceptron, Perceptron, ShorPerceptron
from core.validation import check_pa_params


def binary_stream(n=60, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1, -1)
    return X, y


@pytest.mark.parametrize(
    "factory",
    [
        lambda: LinearPA(n_features=5),
        lambda: LinearPA(n_features=5, mode="pa1", C=0.1, fit_intercept=False),
        lambda: LinearPA(n_features=5, mode="pa2", C=0.5),
        lambda: DoSClassifier(n_features=5, rank=3, seed=1),
        lambda: DoSClassifier(n_features=5, rank=1, mode="pa1", C=0.05),
        lambda: DoSClassifier(n_features=5, rank=2, mode="pa2", C=0.2, init_scale=0.0),
        lambda: DoSClassifier(n_features=5, rank=3, mode="pa1", seed=2, dtype="float32"),
    ],
)
def test_generic_suite(factory):
    X, y = binary_stream()
    check_estimator(factory, X, y)


def test_labels():
    assert check_binary_label(1) == 1.0
    assert check_binary_label(-1.0) == -1.0
    for bad in (0, 2, True, "1", None, float("nan")):
        with pytest.raises(ValueError, match="-1 or \\+1"):
            check_binary_label(bad)


def test_pa_params():
    assert check_pa_params("pa1", 2) == (1, 2.0)
    for mode, C in (("pa3", 1.0), ("pa", 0.0), ("pa", -1.0), ("pa", float("inf")), ("pa", True)):
        with pytest.raises(ValueError):
            check_pa_params(mode, C)


def test_constructor_validation():
    for kwargs in ({"n_features": 0}, {"n_features": 2.5}, {"n_features": True}):
        with pytest.raises(ValueError, match="n_features"):
            LinearPA(**kwargs)
    with pytest.raises(ValueError, match="rank"):
        DoSClassifier(n_features=3, rank=0)
    with pytest.raises(ValueError, match="init_scale"):
        DoSClassifier(n_features=3, init_scale=-1.0)
    with pytest.raises(ValueError, match="fit_intercept"):
        LinearPA(n_features=3, fit_intercept=1)


def test_get_state_in_memory_order_and_meta():
    """``order="K"`` copies in each array's own layout (same values), ``get_state_meta`` is
    the state without its arrays; both agree with the default state."""
    from core.averaging import Averaged
    from core.dos import DoSClassifier

    model = Averaged(model=DoSClassifier(n_features=4, rank=2, seed=1), interval=2)
    rng = np.random.default_rng(0)
    model.learn_many(rng.standard_normal((5, 4)), np.where(rng.random(5) > 0.5, 1, -1))
    default, in_place = model.get_state(), model.get_state(order="K")
    assert all(a.flags.c_contiguous for a in default["arrays"].values())
    assert not all(a.flags.c_contiguous for a in in_place["arrays"].values())  # U_ is a view
    for name, array in default["arrays"].items():
        assert np.array_equal(array, in_place["arrays"][name])
    meta = model.get_state_meta()
    assert meta == {k: v for k, v in default.items() if k != "arrays"}
    assert meta["scalars"]["n_seen_"] == 5 and "live.n_seen_" in meta["scalars"]
    with pytest.raises(ValueError, match="order"):
        model.get_state(order="F")


@pytest.mark.parametrize(
    "factory",
    [
        lambda classes: LinearPA(n_features=5, classes=classes),
        lambda classes: DoSClassifier(n_features=5, rank=2, seed=3, classes=classes),
        lambda classes: PQR(n_features=5, k=2, warmup=10, classes=classes),
        lambda classes: Perceptron(n_features=5, classes=classes),
        lambda classes: EllipsoidPerceptron(n_features=5, classes=classes),
        lambda classes: ShorPerceptron(n_features=5, classes=classes),
    ],
)
@pytest.mark.parametrize("classes", [["ham", "spam"], [False, True], [0, 1], [3.5, None]])
def test_any_two_labels_learn_the_model_of_minus_one_plus_one(factory, classes):
    """classes[0] is learned as -1 and classes[1] as +1: the same model, steps and scores as
    the -1 / +1 labels, and predictions in the given labels."""
    X, y = binary_stream()
    labels = [classes[1] if v > 0 else classes[0] for v in y]
    plain, named = factory(None), factory(classes)
    plain_steps = [plain.learn_one(x, v) for x, v in zip(X, y, strict=True)]
    named_steps = [named.learn_one(x, v) for x, v in zip(X, labels, strict=True)]
    assert [s[:3] for s in plain_steps] == [s[:3] for s in named_steps]
    assert [s.predicted for s in named_steps] == [
        classes[1] if s.predicted == 1 else classes[0] for s in plain_steps
    ]
    assert named.classes_ == tuple(classes)
    for (name, a), (other, b) in zip(plain.arrays(), named.arrays(), strict=True):
        assert name == other and np.array_equal(a, b)
    expected = [classes[1] if v == 1 else classes[0] for v in plain.predict_many(X)]
    assert list(named.predict_many(X)) == expected
    assert named.predict_one(X[0]) == expected[0]
    batch = factory(classes)
    batch.learn_many(X, np.asarray(labels, dtype=object))
    assert state_digest(batch.get_state()) == state_digest(named.get_state())
    check_estimator(
        lambda: factory(classes), X, labels, bad_labels=("eggs", 2, -1 if 0 in classes else 0)
    )


def test_binary_classes_are_checked():
    with pytest.raises(ValueError, match="2 classes"):
        LinearPA(n_features=2, classes=["a", "b", "c"])
    with pytest.raises(ValueError, match="distinct"):
        LinearPA(n_features=2, classes=[1, True])
    with pytest.raises(ValueError, match="task='binary'"):
        PQR(n_features=2, task="regression", classes=[0, 1])
    model = LinearPA(n_features=1, classes=[False, True])
    with pytest.raises(ValueError, match="unknown label 1"):
        model.learn_one([1.0], 1)  # True is the class, not 1
    tuple_labels = LinearPA(n_features=1, classes=[(0, 1), (1, 0)])
    tuple_labels.learn_one([1.0], (1, 0))
    with pytest.raises(ValueError, match="cannot be written into a state"):
        tuple_labels.get_state()


def _local_models():
    from core.averaging import Averaged
    from core.calibration import Calibrated
    from core.dos import DoSClassifier
    from core.linear import LinearPA
    from core.one_vs_one import OneVsOne
    from core.one_vs_rest import OneVsRest

    dos = DoSClassifier(n_features=12, rank=3, seed=1)
    return [
        (dos, [-1, 1]),
        (LinearPA(n_features=12, mode="pa1"), [-1, 1]),
        (Calibrated(model=dos), [-1, 1]),
        (OneVsOne(base=dos, classes=[0, 1, 2]), [0, 1, 2]),
        (OneVsRest(base=LinearPA(n_features=12), classes=[0, 1, 2]), [0, 1, 2]),
        (Averaged(model=OneVsOne(base=dos, classes=[0, 1, 2]), interval=3), [0, 1, 2]),
    ]


@pytest.mark.parametrize("model, labels", _local_models())
def test_learning_changes_only_the_rows_of_an_examples_features(model, labels):
    """``feature_axes``: a sparse example changes the declared arrays only in the rows of
    its non-zeros and of the bias, bit for bit elsewhere; and it does change them."""
    rng = np.random.default_rng(0)
    model = model.clone()
    axes = model.feature_axes()
    assert axes, type(model).__name__
    moved = set()
    for step in range(12):
        indices = np.sort(rng.choice(12, size=3, replace=False))
        values = rng.standard_normal(3)
        before = {name: np.array(array) for name, array in model.arrays()}
        model.learn_one((indices, values), labels[step % len(labels)])
        after = dict(model.arrays())
        touched = np.append(indices, 12)
        for name, axis in axes.items():
            assert after[name].shape[axis] == 13, name
            outside = np.setdiff1d(np.arange(13), touched)
            np.testing.assert_array_equal(
                np.take(after[name], outside, axis=axis),
                np.take(before[name], outside, axis=axis),
                err_msg=name,
            )
            if not np.array_equal(after[name], before[name]):
                moved.add(name)
    assert moved  # (the test is not vacuous)


def test_set_scalars_loads_every_scalar_checked():
    from core.averaging import Averaged
    from core.dos import DoSClassifier

    source = Averaged(model=DoSClassifier(n_features=3, rank=1), interval=2)
    source.learn_many(np.eye(3), [1, -1, 1])
    target = Averaged(model=DoSClassifier(n_features=3, rank=1), interval=2)
    scalars = source.get_state_meta()["scalars"]
    target.set_scalars(scalars)
    assert target.get_state_meta()["scalars"] == scalars
    with pytest.raises(ValueError, match="misses scalar"):
        target.set_scalars({k: v for k, v in scalars.items() if k != "live.n_seen_"})
    with pytest.raises(ValueError, match="unknown"):
        target.set_scalars({**scalars, "extra": 1})
    with pytest.raises(ValueError, match="count"):
        target.set_scalars({**scalars, "n_seen_": -1})


# -- learn_batch: validated batches with labels converted once ---------------------------------
def blobs(classes, n=90, d=4, seed=0):
    """Gaussian blobs, one centre per class, some zeros (sparse rows)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(classes), d)) * 2.0
    k = rng.integers(len(classes), size=n)
    X = centres[k] + rng.standard_normal((n, d))
    X[np.abs(X) < 0.3] = 0.0
    return X, [classes[i] for i in k]


def _calibrated_average(model, interval=25):
    return Averaged(model=Calibrated(model=model), interval=interval)


BINARY = [-1, 1]
MULTI = [4, 0, 9, 2]
#: every kind of estimator the service builds (service.model.kinds.build): name ->
#: (factory, classes (None: regression; "levels": ordinal), learn options)
SERVICE_KINDS = {
    "linear-pa": (lambda: _calibrated_average(LinearPA(n_features=4, mode="pa1")), BINARY, {}),
    "dos": (lambda: _calibrated_average(DoSClassifier(n_features=4, rank=2, seed=1)), BINARY, {}),
    "dos-float32": (
        lambda: DoSClassifier(n_features=4, rank=2, dtype="float32", classes=["no", "yes"]),
        ["no", "yes"],
        {},
    ),
    "perceptron": (lambda: _calibrated_average(Perceptron(n_features=4)), BINARY, {}),
    "ellipsoid-perceptron": (
        lambda: _calibrated_average(EllipsoidPerceptron(n_features=4, classes=[False, True])),
        [False, True],
        {},
    ),
    "shor-perceptron": (lambda: Calibrated(model=ShorPerceptron(n_features=4)), BINARY, {}),
    "pqr": (lambda: PQR(n_features=4, k=2, warmup=10), BINARY, {}),
    "pqr-regression": (lambda: PQR(n_features=4, k=2, task="regression"), None, {}),
    "one-vs-one": (
        lambda: Averaged(
            model=OneVsOne(base=Calibrated(model=DoSClassifier(n_features=4)), classes=MULTI),
            interval=25,
        ),
        MULTI,
        {"progressive": True},
    ),
    "one-vs-one-pairwise": (
        lambda: OneVsOne(base=LinearPA(n_features=4), classes=MULTI),
        MULTI,
        {},
    ),
    "one-vs-rest": (
        lambda: Averaged(
            model=OneVsRest(base=Calibrated(model=LinearPA(n_features=4)), classes=MULTI),
            interval=25,
        ),
        MULTI,
        {},
    ),
    "mofm": (
        lambda: MultiOutputPN(n_features=4, classes=["a", "b", "c"], n_basis=3),
        ["a", "b", "c"],
        {},
    ),
    "ordinal": (
        lambda: OrdinalMcRank(
            base=MultiOutputPN(n_features=4, n_outputs=3, loss="logistic", n_basis=3),
            levels=[1, 2, 3, 4],
        ),
        "levels",
        {},
    ),
}


@pytest.mark.parametrize("kind", sorted(SERVICE_KINDS))
def test_learn_batch_is_learn_many_bit_for_bit(kind):
    """``learn_batch`` over a validated batch with targets converted once (class indices,
    level indices, values) gives the model and steps of ``learn_many(csr_matrix, labels)``,
    bit for bit, in chunks that cross averaging steps; its ``predicted`` are class indices."""
    factory, classes, options = SERVICE_KINDS[kind]
    if classes is None:
        X, _ = blobs([0])
        y = list(X[:, 0] - 2.0 * X[:, 1])
        labels, targets = y, np.array(y)
    else:
        levels = [1, 2, 3, 4] if classes == "levels" else classes
        X, labels = blobs(levels)
        targets = LabelMap(levels).indices(labels, len(labels))
    many, batch = factory(), factory()
    for start, stop in ((0, 7), (7, 8), (8, 60), (60, 90)):
        expected = many.learn_many(sp.csr_matrix(X[start:stop]), labels[start:stop], **options)
        got = batch.learn_batch(as_batch(X[start:stop], 4), targets[start:stop], **options)
        assert state_digest(batch.get_state()) == state_digest(many.get_state()), start
        for name in ("scores", "losses", "aggressive", "aggressive_counts"):
            assert np.array_equal(getattr(got, name), getattr(expected, name)), name
        if classes in (None, "levels") or expected.predicted is None:
            assert np.array_equal(got.predicted, expected.predicted, equal_nan=False)
        else:
            assert got.predicted.dtype == np.int64
            assert [classes[k] for k in got.predicted] == list(expected.predicted)


@pytest.mark.parametrize("kind", sorted(SERVICE_KINDS))
def test_learn_batch_refuses_bad_targets_and_learns_nothing(kind):
    factory, classes, options = SERVICE_KINDS[kind]
    model = factory()
    before = state_digest(model.get_state())
    batch = as_batch(np.ones((2, 4)), 4)
    n_classes = 4 if classes == "levels" else None if classes is None else len(classes)
    bad = [np.array([0]), np.zeros((2, 1), dtype=np.int64)]
    if n_classes is None:
        bad += [np.array([1.0, np.nan]), np.array([True, False])]
    else:
        bad += [np.array([0, n_classes]), np.array([-1, 0]), np.array([0.0, 1.0])]
        bad += [np.array([True, False])]
    for targets in bad:
        with pytest.raises(ValueError):
            model.learn_batch(batch, targets, **options)
        assert state_digest(model.get_state()) == before, targets


# -- states from outside: checked before anything is loaded ------------------------------------
def test_a_state_with_counts_beyond_int64_or_missing_parts_is_refused():
    """A model file's counts are integers that fit int64 (``n_seen_`` 10^40 was loaded; 10^400
    raised OverflowError, not ValueError); a state without its arrays or scalars is a
    ValueError too (was a KeyError); nothing is loaded."""
    model = LinearPA(n_features=2)
    model.learn_many([[1.0, 0.0], [0.0, 1.0]], [1, -1])
    good = model.get_state()
    before = state_digest(good)
    bad = [
        {**good, "scalars": {**good["scalars"], "n_seen_": 10**40}},
        {**good, "scalars": {**good["scalars"], "n_seen_": 10**400}},
        {**good, "scalars": {**good["scalars"], "n_updates_": 2**63}},
        {k: v for k, v in good.items() if k != "arrays"},
        {**good, "scalars": None},
        [("kind", "LinearPA")],
    ]
    for state in bad:
        with pytest.raises(ValueError):
            model.set_state(state)
        assert state_digest(model.get_state()) == before
    for scalars in ({"n_seen_": 10**40, "n_updates_": 1}, [("n_seen_", 1)]):
        with pytest.raises(ValueError):
            model.set_scalars(scalars)
        assert state_digest(model.get_state()) == before
    largest = {**good, "scalars": {**good["scalars"], "n_seen_": 2**63 - 1}}
    model.set_state(largest)
    assert model.n_seen_ == 2**63 - 1
