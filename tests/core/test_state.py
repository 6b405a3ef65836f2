"""core.state: the checks of a state's counts, float scalars and arrays."""

import numpy as np
import pytest

from core.state import state_array, state_count, state_float, state_scalar


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
