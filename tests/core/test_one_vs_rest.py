"""OneVsRest (``core.one_vs_rest``): every binary model learns every example; the prediction
is the argmax, ties to the lowest class index."""

import numpy as np
import pytest

from core.checks import digest
from core.linear import LinearPA
from core.one_vs_rest import OneVsRest
from tests.core.test_reduction import BASES, multiclass_stream


@pytest.mark.parametrize("base", ["linear", "dos"])
def test_one_vs_rest_models_see_every_example(base):
    classes = ["x", "y", "z"]
    X, y = multiclass_stream(classes, n=90, seed=6)
    model = OneVsRest(base=BASES[base](), classes=classes)
    model.learn_many(X, y)
    for k, sub in enumerate(model.models_):
        alone = BASES[base]()
        alone.learn_many(X, [1 if label == classes[k] else -1 for label in y])
        assert digest(sub) == digest(alone)


def test_one_vs_rest_argmax_and_ties():
    model = OneVsRest(base=LinearPA(n_features=1, fit_intercept=False), classes=[7, 8, 9])
    for k, weight in enumerate([0.5, 2.0, 2.0]):
        model.models_[k].w_[0] = weight
    assert model.score_one([1.0]).tolist() == [0.5, 2.0, 2.0]
    assert model.predict_one([1.0]) == 8  # tie between 8 and 9 -> lowest index
    assert model.predict_one([-1.0]) == 7
    assert model.predict_many([[1.0], [-1.0]]).tolist() == [8, 7]
    assert model.predict_many([[1.0]]).dtype == np.int64
    fresh = OneVsRest(base=LinearPA(n_features=1), classes=["b", "a"])
    assert fresh.predict_one([3.0]) == "b" and fresh.predict_many([[3.0]]).dtype == object
