"""The reductions' shared behaviour (``core.reduction``), checked on one-vs-one and one-vs-rest
alike: the generic suite, states, constructor and label checks, learn_many against the
learn_one loop, and the checks made before any binary model learns."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from core.base import Step, Steps
from core.checks import check_estimator, digest
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.registry import from_state, state_digest

INT_CLASSES = [3, 0, 7, 1]
STR_CLASSES = ["cat", "dog", "emu", "ant"]


def multiclass_stream(classes, n=80, d=5, seed=0):
    """Gaussian blobs, one centre per class, labels drawn uniformly from ``classes``."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(classes), d)) * 2.0
    k = rng.integers(len(classes), size=n)
    X = centres[k] + rng.standard_normal((n, d))
    return X, [classes[i] for i in k]


BASES = {
    "linear": lambda: LinearPA(n_features=5),
    "linear-pa1": lambda: LinearPA(n_features=5, mode="pa1", C=0.1),
    "dos": lambda: DoSClassifier(n_features=5, rank=2, seed=3),
    "dos-pa2": lambda: DoSClassifier(n_features=5, rank=3, mode="pa2", C=0.5, seed=1),
}


@pytest.mark.parametrize("reduction", [OneVsOne, OneVsRest])
@pytest.mark.parametrize("base", sorted(BASES))
@pytest.mark.parametrize("classes", [INT_CLASSES, STR_CLASSES], ids=["int", "str"])
def test_generic_suite(reduction, base, classes):
    X, y = multiclass_stream(classes)
    if classes is INT_CLASSES:
        bad_labels = (99, "zzz", None, True, 1.5, "3", -1)
    else:
        bad_labels = (99, "zzz", None, True, 0, "Cat", b"cat")
    check_estimator(
        lambda: reduction(base=BASES[base](), classes=classes), X, y, bad_labels=bad_labels
    )


@pytest.mark.parametrize("reduction", [OneVsOne, OneVsRest])
@pytest.mark.parametrize("classes", [[5, 2, 9], ("x", "y"), [np.int64(4), np.int64(1)]])
def test_state_params_are_json_and_round_trip(reduction, classes):
    model = reduction(base=DoSClassifier(n_features=4, rank=2, mode="pa1", C=0.3), classes=classes)
    X, y = multiclass_stream(list(classes), n=30, d=4)
    model.learn_many(X, y)
    state = model.get_state()
    text = json.dumps(state["params"])
    assert json.loads(text)["base"] == {
        "kind": "DoSClassifier",
        "params": {
            "n_features": 4,
            "rank": 2,
            "mode": "pa1",
            "C": 0.3,
            "init_scale": None,
            "seed": 0,
            "classes": None,
            "dtype": "float64",
        },
    }
    state["params"] = json.loads(text)
    rebuilt = from_state(state)
    assert type(rebuilt) is reduction and digest(rebuilt) == digest(model)
    assert rebuilt.classes_ == model.classes_
    assert [type(c) for c in rebuilt.predict_many(X)] == [type(c) for c in model.predict_many(X)]
    assert list(rebuilt.predict_many(X)) == list(model.predict_many(X))


def test_constructor_validation():
    base = LinearPA(n_features=2)
    bad = [
        ([1], "at least 2"),
        ([], "at least 2"),
        ([1, 2, 1], "distinct"),
        (["a", "a"], "distinct"),
        ([1, 1.0], "distinct"),  # 1 == 1.0: one class, twice
        ([[1], [2]], "hashable"),
        ([0.0, float("nan")], "NaN"),
        (np.array([1, 2]), "list or tuple"),
        ("ab", "list or tuple"),
    ]
    for reduction in (OneVsOne, OneVsRest):
        for classes, message in bad:
            with pytest.raises(ValueError, match=message):
                reduction(base=base, classes=classes)
        for not_binary in (None, "LinearPA", OneVsRest(base=base, classes=[0, 1])):
            with pytest.raises(ValueError, match="binary classifier"):
                reduction(base=not_binary, classes=[0, 1])
    # any hashable labels: mixed kinds, booleans, None, big integers
    for reduction in (OneVsOne, OneVsRest):
        for classes in ([1, "a"], [True, False], [1.0, 2.0], [None, 1], [0, 2**64], [(1, 2), "x"]):
            assert reduction(base=base, classes=classes).classes_ == tuple(classes)
    # stored as given
    classes = (2, 1)
    assert OneVsOne(base=base, classes=classes).classes is classes


@pytest.mark.parametrize("reduction", [OneVsOne, OneVsRest])
def test_unknown_label_names_label_and_classes(reduction):
    model = reduction(base=LinearPA(n_features=2), classes=[0, 1, 2])
    with pytest.raises(ValueError, match=r"unknown label 'zzz'.*\[0, 1, 2\]"):
        model.learn_one([1.0, 2.0], "zzz")
    with pytest.raises(ValueError, match=r"row 2: unknown label 7.*\[0, 1, 2\]"):
        model.learn_many(np.ones((3, 2)), np.array([0, 1, 7]))
    with pytest.raises(ValueError, match=r"row 1: unknown label 2.5"):
        model.learn_many(np.ones((3, 2)), [0, 2.5, 1])
    with pytest.raises(ValueError, match="1-D"):
        model.learn_many(np.ones((3, 2)), np.zeros((3, 1), dtype=int))
    with pytest.raises(ValueError, match="sequence"):
        model.learn_many(np.ones((3, 2)), "012")
    named = reduction(base=LinearPA(n_features=2), classes=["a", "b"])
    with pytest.raises(ValueError, match=r"unknown label 0.*\['a', 'b'\]"):
        named.learn_one([1.0, 2.0], 0)
    # a string array of labels is read by the vectorised path, and must not coerce 0 -> "0"
    with pytest.raises(ValueError, match=r"row 1: unknown label 'c'"):
        named.learn_many(np.ones((2, 2)), np.array(["a", "c"]))
    with pytest.raises(ValueError, match=r"row 0: unknown label 0"):
        named.learn_many(np.ones((2, 2)), [0, "a"])
    assert digest(model) == digest(model.clone()) and digest(named) == digest(named.clone())


@pytest.mark.parametrize("reduction", [OneVsOne, OneVsRest])
@pytest.mark.parametrize("classes", [INT_CLASSES, STR_CLASSES], ids=["int", "str"])
def test_learn_many_is_the_learn_one_loop(reduction, classes):
    X, y = multiclass_stream(classes, n=120, seed=5)
    X[np.abs(X) < 0.5] = 0.0  # zeros are dropped in batches, kept in rows: same model
    one = reduction(base=DoSClassifier(n_features=5, rank=3, seed=2), classes=classes)
    steps = [one.learn_one(x, label) for x, label in zip(X, y, strict=True)]
    assert all(isinstance(s, Step) for s in steps)

    many = reduction(base=DoSClassifier(n_features=5, rank=3, seed=2), classes=classes)
    labels = np.array(y)  # int64 / <U3: the vectorised label path
    results = [many.learn_many(sp.csr_matrix(X[a : a + 17]), labels[a : a + 17]) for a in (0, 17)]
    results.append(many.learn_many(list(X[34:]), list(y[34:])))
    assert all(isinstance(r, Steps) for r in results)
    assert state_digest(many.get_state()) == state_digest(one.get_state())
    assert many.n_seen_ == one.n_seen_ == 120

    losses = np.concatenate([r.losses for r in results])
    n_aggressive = np.concatenate([r.aggressive_counts for r in results])
    assert np.array_equal(losses, [s.loss for s in steps])  # bit-identical sums
    assert np.array_equal(n_aggressive, [s.n_aggressive for s in steps])
    assert n_aggressive.dtype.kind == "i" and n_aggressive.max() <= len(one.models_)


def test_learn_one_step_meaning():
    classes = ["a", "b", "c", "d"]
    X, y = multiclass_stream(classes, n=60, seed=1)
    for reduction in (OneVsOne, OneVsRest):
        model = reduction(base=LinearPA(n_features=5, mode="pa1", C=0.2), classes=classes)
        for x, label in zip(X, y, strict=True):
            predicted = model.predict_one(x)
            k = classes.index(label)
            if reduction is OneVsOne:
                learners = [p for p, pair in enumerate(model.pairs_) if k in pair]
                signs = [1.0 if model.pairs_[p][0] == k else -1.0 for p in learners]
            else:
                learners = list(range(len(classes)))
                signs = [1.0 if p == k else -1.0 for p in learners]
            scores = [model.models_[p].score_one(x) for p in learners]
            expected_loss = sum(max(0.0, 1.0 - s * f) for s, f in zip(signs, scores, strict=True))
            weights = [m.w_.copy() for m in model.models_]
            seen = [m.n_seen_ for m in model.models_]
            step = model.learn_one(x, label)
            assert step.predicted == predicted and type(step.predicted) is str
            assert step.loss == pytest.approx(expected_loss, rel=1e-12, abs=1e-12)
            moved = [p for p, m in enumerate(model.models_) if not np.array_equal(m.w_, weights[p])]
            assert set(moved) <= set(learners)
            assert step.n_aggressive == len(moved)  # an aggressive update moves the weights
            assert [m.n_seen_ - seen[p] for p, m in enumerate(model.models_)] == [
                int(p in learners) for p in range(len(model.models_))
            ]


@pytest.mark.parametrize("reduction", [OneVsOne, OneVsRest])
def test_bad_input_leaves_every_sub_model_unchanged(reduction):
    classes = [0, 1, 2, 3]
    X, y = multiclass_stream(classes, n=40, d=3, seed=2)
    model = reduction(base=DoSClassifier(n_features=3, rank=2, seed=0), classes=classes)
    model.learn_many(X, y)
    # make the score of the last model that learns from class 0 overflow for large inputs;
    # the others, learned first, would update if the reduction did not check first
    last = max(
        p for p in range(len(model.models_)) if reduction is OneVsRest or 0 in model.pairs_[p]
    )
    model.models_[last].U_[...] *= 1e10
    before = [digest(m) for m in model.models_]
    huge = np.full(3, 1e150)  # squared norm 3e300 is finite; |U z|^2 is not
    assert np.isfinite(model.models_[0].score_one(huge))
    with pytest.raises(ValueError, match="score overflows"):
        model.learn_one(huge, 0)
    assert [digest(m) for m in model.models_] == before
    with pytest.raises(ValueError, match="squared norm overflows"):
        model.learn_one(np.full(3, 1e155), 0)
    # a batch whose row 3 (class 3) overflows its squared norm: pairs without class 3 come first
    batch = X[:6].copy()
    batch[3] = 1e160
    with pytest.raises(ValueError, match="row 3: the example's squared norm overflows"):
        model.learn_many(batch, [0, 1, 2, 3, 0, 1])
    for bad_x, bad_y in [
        (X[:3], [0, 1, 5]),
        (X[:3], [0, 1]),
        (np.r_[X[:2], [[0.0, np.nan, 1.0]]], [0, 1, 2]),
        ([X[0], X[1], ([5], [1.0])], [0, 1, 2]),
    ]:
        with pytest.raises(ValueError):
            model.learn_many(bad_x, bad_y)
    for bad_x, bad_y in [(X[0], 4), (X[0], None), (X[0], np.float64(1.5)), ([1.0, 2.0], 0)]:
        with pytest.raises(ValueError):
            model.learn_one(bad_x, bad_y)
    assert [digest(m) for m in model.models_] == before
    assert model.n_seen_ == 40


def test_squared_norm_check_matches_the_kernels():
    # values just below the overflow threshold are accepted by the binary models: the
    # reduction must accept them too, not refuse them by a conservative bound
    big = np.sqrt(np.finfo(np.float64).max / 2.5)
    x = np.array([big, big, 0.0])
    alone = LinearPA(n_features=3)
    alone.learn_one(x, 1)
    model = OneVsOne(base=LinearPA(n_features=3), classes=[0, 1])
    model.learn_one(x, 0)
    model.learn_many(x[None, :], [0])
    assert digest(model.models_[0]) != digest(LinearPA(n_features=3))
    too_big = np.array([big, big, big])
    with pytest.raises(ValueError):
        alone.learn_one(too_big, 1)
    with pytest.raises(ValueError, match="squared norm"):
        model.learn_one(too_big, 0)


def test_regression_bases_are_refused():
    from core.pqr import PQR

    for reduction in (OneVsOne, OneVsRest):
        with pytest.raises(ValueError, match="task='regression'"):
            reduction(base=PQR(n_features=3, k=1, task="regression"), classes=[0, 1, 2])


@pytest.mark.parametrize("reduction", ["ovo", "ovr"])
@pytest.mark.parametrize(
    "base",
    ["linear", "dos", "perceptron", "calibrated"],
)
def test_losses_from_scores_are_what_learning_reports(reduction, base):
    """The loss of an example computed from scores without learning
    (``losses_from_model_scores``, ``losses_from_scores``) is the loss learning it reports:
    how a time average is scored progressively beside the live model."""
    from core.calibration import Calibrated
    from core.dos import DoSClassifier
    from core.features import as_batch
    from core.linear import LinearPA
    from core.one_vs_one import OneVsOne
    from core.one_vs_rest import OneVsRest
    from core.separation import Perceptron

    bases = {
        "linear": LinearPA(n_features=4),
        "dos": DoSClassifier(n_features=4, rank=2, seed=1),
        "perceptron": Perceptron(n_features=4),
        "calibrated": Calibrated(model=DoSClassifier(n_features=4, rank=2, seed=2)),
    }
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((60, 4)), rng.integers(0, 3, 60)
    model = (OneVsOne if reduction == "ovo" else OneVsRest)(base=bases[base], classes=[0, 1, 2])
    binary = bases[base].clone()
    for x_i, y_i in zip(X, y, strict=True):
        batch = as_batch(x_i[None, :], 4)
        _, _, model_scores = model.decide_batch(batch)
        expected = model.losses_from_model_scores(model_scores, np.array([y_i]))
        assert model.learn_one(x_i, y_i).loss == pytest.approx(expected[0], rel=1e-12, abs=1e-15)
        label = 1.0 if y_i == 1 else -1.0
        loss = binary.losses_from_scores(binary.score_batch(batch), np.array([label]))
        assert binary.learn_one(x_i, label).loss == pytest.approx(loss[0], rel=1e-12, abs=1e-15)
