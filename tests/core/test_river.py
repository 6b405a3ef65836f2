import pickle

import numpy as np
import pytest
from river import checks, compose, evaluate, metrics, preprocessing

from core.calibration import Calibrated
from core.checks import digest
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.mofm import MultiOutputPN
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.pqr import PQR
from core.river import RiverClassifier, RiverRegressor
from core.separation import Perceptron

MODELS = {
    "linear-pa": lambda: RiverClassifier(LinearPA(n_features=64, mode="pa1", C=0.1)),
    "dos-isotonic": lambda: RiverClassifier(
        DoSClassifier(n_features=64, rank=2, seed=1), calibration="isotonic"
    ),
    "perceptron": lambda: RiverClassifier(Perceptron(n_features=64)),
    "pqr": lambda: RiverClassifier(PQR(n_features=64, k=2, warmup=20)),
    "one-vs-rest": lambda: RiverClassifier(OneVsRest(base=LinearPA(n_features=64), classes=[0, 1])),
    "one-vs-one": lambda: RiverClassifier(
        OneVsOne(base=Calibrated(model=DoSClassifier(n_features=64, rank=2)), classes=[0, 1])
    ),
    "pqr-regression": lambda: RiverRegressor(
        PQR(n_features=64, k=2, task="regression", warmup=20, alpha=0.05)
    ),
}


@pytest.mark.parametrize("name", MODELS)
def test_river_estimator_checks(name):
    """River's own checks (river.checks.check_estimator runs the same list)."""
    model = MODELS[name]()
    ran = 0
    for check in checks.yield_checks(model):
        if check.__name__ in model._unit_test_skips():
            continue
        check(model.clone())
        ran += 1
    assert ran > 20


def test_progressive_validation_in_a_pipeline_matches_the_core_loop():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    y = X[:, 0] - X[:, 1] > 0
    dataset = [
        ({"a": a, "b": b, "c": c}, bool(label)) for (a, b, c), label in zip(X, y, strict=True)
    ]
    adapter = RiverClassifier(LinearPA(n_features=32, mode="pa1", C=0.5))
    accuracy = evaluate.progressive_val_score(dataset, adapter, metrics.Accuracy())
    # the same stream through the core model, features hashed the same way
    core_model = LinearPA(n_features=32, mode="pa1", C=0.5, classes=[False, True])
    hasher = adapter._hasher
    correct = 0
    for x, label in dataset:
        row = hasher.transform_one(x)
        correct += core_model.predict_one(row) == label
        core_model.learn_one(row, label)
    assert accuracy.get() == correct / len(dataset)
    assert digest(adapter.model_.model_) == digest(core_model)
    pipeline = compose.Pipeline(preprocessing.StandardScaler(), adapter.clone())
    assert evaluate.progressive_val_score(dataset, pipeline, metrics.LogLoss()).get() < 0.3


def test_reductions_grow_with_the_labels():
    adapter = RiverClassifier(OneVsOne(base=LinearPA(n_features=16), classes=[0, 1]))
    assert adapter.predict_proba_one({"a": 1.0}) == {} and adapter.predict_one({"a": 1.0}) is None
    adapter.learn_one({"a": 1.0}, "x")
    assert adapter.predict_proba_one({"a": 1.0}) == {"x": 1.0}
    for label, a in [("y", -1.0), ("x", 1.0), ("z", 0.0)] * 20:
        adapter.learn_one({"a": a, "b": 1.0}, label)
    assert adapter.classes_ == ("x", "y", "z")
    kept = adapter.model_.models_[0]
    adapter.learn_one({"a": 3.0}, "w")
    assert adapter.classes_ == ("x", "y", "z", "w") and adapter.model_.models_[0] is kept
    p = adapter.predict_proba_one({"a": 1.0, "b": 1.0})
    assert set(p) == {"x", "y", "z", "w"} and abs(sum(p.values()) - 1.0) < 1e-12


def test_fixed_classes_and_refusals():
    adapter = RiverClassifier(MultiOutputPN(n_features=8, classes=["a", "b"], n_basis=2))
    adapter.learn_one({"u": 1.0}, "a")
    assert set(adapter.predict_proba_one({"u": 1.0})) == {"a", "b"}
    with pytest.raises(ValueError, match="unknown label"):
        adapter.learn_one({"u": 1.0}, "c")
    with pytest.raises(ValueError, match="classifier"):
        RiverClassifier(PQR(n_features=4, task="regression"))
    with pytest.raises(ValueError, match="regression"):
        RiverRegressor(LinearPA(n_features=4))


def test_pickling_keeps_the_views_of_a_dos_model():
    model = DoSClassifier(n_features=3, rank=2, seed=0)
    copy = pickle.loads(pickle.dumps(model))
    copy.learn_one([1.0, 0.0, 0.0], 1)
    assert np.shares_memory(copy.U_, copy.W_) and copy.score_one([1.0, 0.0, 0.0]) > 0.99
