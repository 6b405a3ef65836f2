"""The label rule of ``core.labels`` as one table, run by the library's tests
(``tests/core/test_labels.py``) and through HTTP by the service's
(``tests/service/model/test_families.py``): a label is accepted as the same class, or refused,
at both layers."""

#: (classes, label, the index of the class the label is, or None: refused)
LABEL_RULE_CASES = [
    ([-1, 1], 1, 1),
    ([-1, 1], 1.0, 1),  # what JSON and JavaScript clients send for 1
    ([-1, 1], -1.0, 0),
    ([-1, 1], True, None),  # a boolean never matches a number
    ([-1, 1], 0.5, None),
    ([-1, 1], "1", None),  # a string never matches a number
    ([-1, 1], float("nan"), None),
    ([0, 1, 2], 2.0, 2),
    ([0, 1, 2], 0, 0),
    ([0, 1, 2], 2.5, None),
    ([0, 1, 2], False, None),
    ([0, 1, 2], 1e300, None),
    (["no", "yes"], "yes", 1),
    (["no", "yes"], 1, None),
    (["0", "1"], "0", 0),
    (["0", "1"], 0, None),
    ([False, True], True, 1),
    ([False, True], False, 0),
    ([False, True], 1, None),  # a number never matches a boolean
    ([False, True], 0.0, None),
    ([False, True], "true", None),
]


def case_id(case) -> str:
    """A readable test id of a case."""
    classes, label, expected = case
    return f"{classes}-{label!r}-{'refused' if expected is None else expected}"
