import numpy as np
import pytest

from core.base import from_spec, params_spec
from core.checks import check_estimator
from core.dos import DoSClassifier
from core.labels import check_binary_label
from core.linear import LinearPA
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


def test_spec_round_trip():
    model = DoSClassifier(n_features=4, rank=2, mode="pa2", C=0.3, seed=7)
    spec = {"kind": "DoSClassifier", "params": params_spec(model)}
    assert from_spec(spec).get_params() == model.get_params()
    with pytest.raises(ValueError, match="unknown model kind"):
        from_spec({"kind": "Nope", "params": {}})


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
