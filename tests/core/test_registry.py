"""core.registry: models rebuilt from their specs and states by the name of their kind."""

import importlib

import numpy as np
import pytest

from core.dos import DoSClassifier
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.registry import (
    MODEL_KINDS,
    MODEL_MODULES,
    from_spec,
    from_state,
    is_model,
    params_spec,
    plain_value,
    state_digest,
)


def test_spec_round_trip():
    model = DoSClassifier(n_features=4, rank=2, mode="pa2", C=0.3, seed=7)
    spec = {"kind": "DoSClassifier", "params": params_spec(model)}
    assert from_spec(spec).get_params() == model.get_params()
    with pytest.raises(ValueError, match="unknown model kind"):
        from_spec({"kind": "Nope", "params": {}})


def test_a_state_written_before_classes_existed_still_loads():
    model = OneVsOne(base=DoSClassifier(n_features=3, rank=2), classes=["a", "b", "c"])
    model.learn_one([1.0, 0.0, 0.0], "a")
    state = model.get_state()
    old = {**state, "params": {**state["params"], "base": {**state["params"]["base"]}}}
    old["params"]["base"]["params"] = {
        k: v for k, v in state["params"]["base"]["params"].items() if k != "classes"
    }
    assert "classes" not in old["params"]["base"]["params"]
    assert state_digest(from_state(old).get_state()) == state_digest(state)
    changed = {**old, "params": {**old["params"], "classes": ["a", "b", "d"]}}
    with pytest.raises(ValueError, match="different hyperparameters"):
        model.set_state(changed)


def test_every_model_module_registers_its_kinds():
    for module in MODEL_MODULES:
        importlib.import_module(module)
    for name in ("LinearPA", "DoSClassifier", "PQR", "MultiOutputPN", "OneVsOne", "OneVsRest",
                 "OrdinalMcRank", "Averaged", "Calibrated", "Perceptron"):  # fmt: skip
        assert MODEL_KINDS[name].__name__ == name
    assert is_model(LinearPA(n_features=1)) and not is_model(LinearPA)
    assert not is_model({"kind": "LinearPA", "params": {}})
    assert plain_value({"a": np.int64(1)}) == {"a": np.int64(1)}  # dicts are left as they are
    assert plain_value(np.array([[1, 2]])) == [[1, 2]]
