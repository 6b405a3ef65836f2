"""core.state: the checks of a state's counts, float scalars and arrays."""

import numpy as np
import pytest

from core.state import state_array, state_count, state_float, state_scalar, state_sum


def test_a_count_is_an_integer_that_fits_int64():
    for value, count in ((0, 0), (3, 3), (3.0, 3), (np.int64(7), 7), (2**63 - 1, 2**63 - 1)):
        assert state_count("n", value) == count and type(state_count("n", value)) is int
    for bad in (-1, 0.5, 2**63, 10**40, 10**400, 1e300, float("nan"), float("inf"), True,
                np.bool_(False), "3", None, [1]):  # fmt: skip
        with pytest.raises(ValueError, match="'n' must be a count"):
            state_count("n", bad)


def test_a_float_scalar_is_finite():
    assert state_float("x", 2) == 2.0 and state_float("x", np.float32(0.5)) == 0.5
    for bad in (float("nan"), -float("inf"), 10**400, np.float64("nan"), True, "1", None):
        with pytest.raises(ValueError, match="'x' must be a"):
            state_float("x", bad)
    assert state_scalar("t_", 4.0, 0) == 4 and state_scalar("eta_", 4, 0.5) == 4.0


def test_an_array_has_its_dtype_and_shape_and_is_finite():
    ok = np.zeros((2, 3))
    assert state_array("a", ok, np.float64, (2, 3)) is ok
    for bad, message in (
        (ok.astype(np.uint8), "dtype uint8"),
        (ok.astype(object), "dtype object"),
        (ok.astype(">f8"), "dtype >f8"),
        (np.array([["1", "2", "3"]] * 2), "dtype <U1"),
        (ok[:, :2], "shape"),
        (np.full((2, 3), np.nan), "non-finite"),
        (ok.tolist(), "not a numpy array"),
    ):
        with pytest.raises(ValueError, match=message):
            state_array("a", bad, np.float64, (2, 3))
    assert state_array("i", np.zeros(2, dtype=np.int64), np.int64).shape == (2,)


def test_running_sums_may_have_overflowed_but_are_never_nan():
    assert state_sum("s", float("inf")) == np.inf and state_sum("s", -1e-17) == -1e-17
    assert state_sum("s", 10**400) == np.inf  # an integer beyond float64: overflowed
    for bad in (float("nan"), -float("inf"), -(10**400), True, None):
        with pytest.raises(ValueError, match="'s' must be a"):
            state_sum("s", bad)
    terms = np.array([[0.0, np.inf], [-1e-17, 2.0]])
    assert state_array("t", terms, np.float64, sums=True) is terms
    for bad in (np.nan, -np.inf):
        with pytest.raises(ValueError, match="non-finite"):
            state_array("t", np.array([1.0, bad]), np.float64, sums=True)
    with pytest.raises(ValueError, match="non-finite"):
        state_array("t", terms, np.float64)  # +inf: only as a sum's terms
