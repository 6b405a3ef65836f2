"""The kind catalogue: every parameter of every kind declared with its range, the
declarations agreeing with the core classes, every limit checked before anything is built,
and a model created at any bound of any parameter usable (it predicts and learns)."""

from __future__ import annotations

import inspect
import math
import time

import numpy as np
import pytest

from service.exceptions import InvalidRequest
from service.model.kinds import KINDS, Limits, build, plan
from service.model.params import AnyOf, Boolean, Integer, IntegerList, Options, Real
from service.model.spec import CreateModel
from tests.service.conftest import create

LIMITS = Limits(max_floats=1 << 27, max_submodels=5000, averaging_interval=50_000)
#: create bodies that every kind takes (its classes, inputs)
BASE = {
    "ellipsoidal": {"classes": [-1, 1]},
    "mofm": {"classes": ["a", "b", "c"]},
}
NOT_PARAMS = {"n_features", "classes", "n_outputs"}


def spec(kind: str, n_features: int = 3, **extra) -> CreateModel:
    body = {"name": "m", "kind": kind, "input": {"n_features": n_features}, **BASE.get(kind, {})}
    return CreateModel.model_validate({**body, **extra})


def leaves(constraint):
    """The constraints inside ``AnyOf`` (None: null)."""
    if isinstance(constraint, AnyOf):
        return [c for option in constraint.options for c in leaves(option)]
    return [constraint]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_parameter_of_the_core_class_is_declared_with_its_default(kind):
    declared = KINDS[kind]
    signature = inspect.signature(declared.cls)
    core = {name for name in signature.parameters if name not in NOT_PARAMS}
    assert set(declared.params) - declared.own == core
    for name in core:
        assert declared.params[name].default == signature.parameters[name].default
        assert declared.params[name].description


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_declared_value_is_one_the_core_class_accepts(kind):
    """Each option and each bound of each parameter builds (the catalogue never promises
    what the class refuses)."""
    for name, param in KINDS[kind].params.items():
        for constraint in leaves(param.constraint):
            values = []
            if isinstance(constraint, Options):
                values = list(constraint.values)
            elif isinstance(constraint, Integer | Real):
                low = constraint.low
                if getattr(constraint, "low_open", False):
                    low = math.nextafter(low, math.inf) if low else 1e-12
                high = constraint.high
                if getattr(constraint, "high_open", False):
                    high = math.nextafter(high, -math.inf)
                values = [low, high]
            elif isinstance(constraint, Boolean):
                values = [False, True]
            elif isinstance(constraint, IntegerList):
                values = [[0, 1]]
            elif constraint is None:
                values = [None]
            for value in values:
                params = {name: value}
                if kind == "pqr" and name == "warmup" and value == 0:
                    params["separation"] = [0]  # (topk needs warmup >= 1)
                if kind == "pqr" and name == "separation" and value == [0, 1]:
                    params["k"] = 2
                checked = plan(spec(kind, n_features=4, params=params), LIMITS)
                build(checked)


@pytest.mark.parametrize(
    "kind,params,message",
    [
        ("dos", {"init_scale": 1e308}, "init_scale"),
        ("dos", {"rank": 0}, "rank"),
        ("dos", {"C": math.inf}, "C"),
        ("dos", {"rank": True}, "rank"),
        ("dos", {"dtype": "float16"}, "dtype"),
        ("linear-pa", {"C": "1"}, "C"),
        ("mofm", {"reservoir_size": 10**12}, "reservoir_size"),
        ("mofm", {"learning_rate": 1e300}, "learning_rate"),
        ("shor-perceptron", {"step_growth": 1e6}, "step_growth"),
        ("pqr", {"alpha": -1}, "alpha"),
        ("ellipsoid-perceptron", {"rho": 2}, "rho"),
    ],
)
def test_out_of_range_parameters_are_refused_by_name(kind, params, message):
    with pytest.raises(InvalidRequest) as refused:
        plan(spec(kind, params=params), LIMITS)
    assert refused.value.code == "invalid_params" and message in refused.value.message


@pytest.mark.parametrize(
    "extra,n_features,code",
    [
        ({"classes": list(range(1000))}, 3, "model_too_large"),  # 499,500 binary models
        ({"params": {"rank": 1024}}, 1 << 20, "model_too_large"),
    ],
)
def test_limits_are_checked_before_anything_is_built(extra, n_features, code):
    started = time.perf_counter()
    with pytest.raises(InvalidRequest) as refused:
        plan(spec("dos", n_features=n_features, **extra), LIMITS)
    assert refused.value.code == code
    assert time.perf_counter() - started < 0.5


def test_quadratic_kinds_count_their_matrices():
    """The ellipsoid and Shor perceptrons hold (n+1) x (n+1) matrices: counted, and bounded."""
    small = plan(spec("ellipsoid-perceptron", n_features=100), LIMITS)
    assert small.floats >= 101 * 101
    for kind in ("ellipsoid-perceptron", "shor-perceptron"):
        with pytest.raises(InvalidRequest) as refused:
            plan(spec(kind, n_features=3000), LIMITS)
        assert refused.value.code == "model_too_large"
    tight = Limits(max_floats=50_000, max_submodels=5000, averaging_interval=10)
    with pytest.raises(InvalidRequest):
        plan(spec("ellipsoid-perceptron", n_features=300), tight)


def bound_cases():
    """(kind, params) at the low and high bound of every numeric parameter."""
    cases = []
    for kind, declared in sorted(KINDS.items()):
        for name, param in declared.params.items():
            for constraint in leaves(param.constraint):
                if not isinstance(constraint, Integer | Real):
                    continue
                low = constraint.low
                if getattr(constraint, "low_open", False):
                    low = 1e-12 if not low else math.nextafter(low, math.inf)
                high = constraint.high
                if getattr(constraint, "high_open", False):
                    high = math.nextafter(high, -math.inf)
                for value in (low, high):
                    params = {name: value}
                    if kind == "pqr" and name == "warmup" and value == 0:
                        params["separation"] = [0]
                    cases.append(pytest.param(kind, params, id=f"{kind}-{name}={value:g}"))
    return cases


@pytest.mark.parametrize("kind,params", bound_cases())
def test_a_model_at_any_bound_predicts_and_learns(client, kind, params):
    """Create answers 201 only for a model that works: at every bound of every parameter
    it scores and learns a short stream with finite numbers."""
    body = {"params": params, **BASE.get(kind, {})}
    create(client, kind=kind, n_features=4, **body)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 4))
    classes = BASE.get(kind, {}).get("classes", [-1, 1])
    labels = [classes[i % len(classes)] for i in range(30)]
    if kind == "pqr" and params.get("task") == "regression":
        labels = X[:, 0].tolist()
    examples = [{"x": x.tolist(), "label": y} for x, y in zip(X, labels, strict=True)]
    learned = client.post("/v1/models/m/feedback", json={"examples": examples})
    assert learned.status_code == 200, learned.text
    predicted = client.post(
        "/v1/models/m/predict", json={"instances": [{"x": x.tolist()} for x in X[:5]]}
    )
    assert predicted.status_code == 200, predicted.text
    scores = np.asarray([p["score"] for p in predicted.json()["predictions"]], dtype=float)
    assert np.all(np.isfinite(scores))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_mergeable_kinds_are_those_whose_copies_average(kind):
    """``parallel`` learning merges copies array by array (``core.parallel``): a mergeable
    kind's state is fixed-shape floats only (nothing taken from one copy alone), and the
    merge of copies that learned apart is a state of the kind; the others hold integers or
    states whose shapes change as they learn."""
    from core.parallel import merge_to_reference

    body = {"name": "m", "kind": kind, "input": {"n_features": 4}, **BASE.get(kind, {})}
    checked = plan(CreateModel(**body), LIMITS)
    start = build(checked)
    initial = start.get_state()
    floats = all(np.asarray(a).dtype.kind == "f" for a in initial["arrays"].values())
    assert checked.kind.mergeable == (floats and kind in ("linear-pa", "dos", "perceptron"))
    if not checked.kind.mergeable:
        return
    rng = np.random.default_rng(0)
    copies = []
    for _ in range(2):
        copy = start.clone()
        copy.set_state(initial)
        X = rng.standard_normal((20, 4))
        copy.learn_many(X, np.where(X[:, 0] > 0, 1, -1))
        copies.append(copy)
    merged = start.clone()
    merged.set_state(merge_to_reference([c.get_state() for c in copies], initial))
    assert np.all(np.isfinite(merged.decision_function(rng.standard_normal((5, 4)))))
    if kind != "dos":  # (no symmetry to align: the plain mean of the copies)
        for name, array in merged.get_state()["arrays"].items():
            mean = (
                copies[0].get_state()["arrays"][name] + copies[1].get_state()["arrays"][name]
            ) / 2
            np.testing.assert_allclose(array, mean, rtol=1e-12, err_msg=name)
