"""core.labels: the one label rule (``tests/labels_table.py``, which the service's tests run
through HTTP too), its vectorised look-ups, and boolean classes in states."""

import json

import numpy as np
import pytest

from core.checks import digest
from core.labels import LabelMap, UnknownLabelError
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.registry import from_state, state_digest
from tests.labels_table import LABEL_RULE_CASES, case_id


def fresh_model(classes):
    """A model of these classes that predicts the class it learned from one example at
    ``x = [1.0]`` (binary: a zero linear model; more: one-vs-rest, argmax)."""
    if len(classes) == 2:
        return LinearPA(n_features=1, classes=classes)
    return OneVsRest(base=LinearPA(n_features=1), classes=classes)


@pytest.mark.parametrize("case", LABEL_RULE_CASES, ids=case_id)
def test_the_label_rule_table(case):
    classes, label, expected = case
    labels = LabelMap(classes)
    as_array = np.array([label])  # float64, bool or unicode: the vectorised look-ups
    model = fresh_model(classes)
    before = digest(model)
    if expected is None:
        for lookup in (
            lambda: labels.index(label),
            lambda: labels.indices([label], 1),
            lambda: labels.indices(as_array, 1),
            lambda: model.learn_one([1.0], label),
            lambda: model.learn_many([[1.0]], [label]),
        ):
            with pytest.raises(UnknownLabelError, match="unknown label"):
                lookup()
        assert digest(model) == before  # nothing learned
        return
    assert labels.index(label) == expected
    assert labels.indices([label], 1).tolist() == [expected]
    assert labels.indices(as_array, 1).tolist() == [expected]
    model.learn_one([1.0], label)
    predicted = model.predict_one([1.0])
    assert predicted == classes[expected] and type(predicted) is type(classes[expected])


def test_numpy_scalars_are_the_values_they_hold():
    numbers, flags = LabelMap([0, 1, 2]), LabelMap([False, True])
    assert numbers.index(np.int64(2)) == numbers.index(np.float64(2.0)) == 2
    assert numbers.index(np.float32(1.0)) == 1
    assert flags.index(np.bool_(True)) == 1
    with pytest.raises(UnknownLabelError, match="a boolean is never a number class"):
        numbers.index(np.bool_(True))
    with pytest.raises(UnknownLabelError, match="a number is never a boolean class"):
        flags.index(np.int64(1))


def test_the_vectorised_look_ups_agree_with_the_one_by_one_rule():
    rng = np.random.default_rng(0)
    classes = [7, -3, 0, 2**40, 5]
    labels = LabelMap(classes)
    values = rng.choice(np.array(classes + [1, 6], dtype=float), size=200)
    values[[17, 90]] = [np.nan, 2.5]
    for y in (values[:17], values[:17].astype(np.int64), values):
        expected = []
        for row, value in enumerate(y.tolist()):
            try:
                expected.append(labels.index(value))
            except UnknownLabelError:
                expected.append(("refused", row))
                break
        try:
            got = labels.indices(y, y.shape[0]).tolist()
        except UnknownLabelError as error:
            got = [*labels.indices(y[: error.row], error.row).tolist(), ("refused", error.row)]
        assert got == expected
    # int64 classes beyond float64's exact integers: only the exact value matches
    big = LabelMap([0, 2**53 + 1])
    with pytest.raises(UnknownLabelError):
        big.indices(np.array([float(2**53 + 1)]), 1)  # that float is 2**53
    assert big.indices(np.array([2**53 + 1]), 1).tolist() == [1]


def test_an_unknown_label_says_where_and_why():
    with pytest.raises(UnknownLabelError) as caught:
        LabelMap(["a", "b"]).indices(["a", "b", 3], 3)
    error = caught.value
    assert (error.row, error.label, error.reason) == (2, 3, "a number is never a string class")
    assert str(error) == (
        "label at row 2: unknown label 3: the known classes are ['a', 'b'] "
        "(a number is never a string class)"
    )
    with pytest.raises(UnknownLabelError) as caught:
        LabelMap([0, 1]).index(0.5)
    assert caught.value.row is None and caught.value.reason == ""  # a number, just not one


def test_classes_that_python_holds_equal_are_refused():
    for classes in ([1, 1.0], [True, 1], [0, False]):
        with pytest.raises(ValueError, match="distinct"):
            LabelMap(classes)


@pytest.mark.parametrize("reduction", [OneVsOne, OneVsRest])
def test_boolean_classes_round_trip_through_a_state(reduction):
    model = reduction(base=LinearPA(n_features=2), classes=[False, True, "maybe"])
    binary = LinearPA(n_features=2, classes=[False, True])
    for each in (model, binary):
        each.learn_many([[1.0, 0.0], [0.0, 1.0]], [True, False])
        state = each.get_state()
        state["params"] = json.loads(json.dumps(state["params"]))  # as a snapshot holds it
        rebuilt = from_state(state)
        assert state_digest(rebuilt.get_state()) == state_digest(each.get_state())
        assert rebuilt.classes_[:2] == (False, True)
        assert rebuilt.predict_one([1.0, 0.0]) is True
