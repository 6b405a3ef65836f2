"""Hyperparameter checks shared by every model: one function per kind of value.

Each check returns the value in its canonical Python type or raises ``ValueError`` naming the
parameter and what it should be. Booleans are refused wherever a number is expected (``True``
is an ``int`` to Python, never a sensible count or rate here).

>>> check_positive("tau", 2)
2.0
>>> check_count("n_basis", 0)
Traceback (most recent call last):
...
ValueError: n_basis must be an integer >= 1, got 0
>>> check_choice("mode", "pa1", ("pa", "pa1", "pa2"))
'pa1'
>>> check_unit_interval("delta", 1.0)
Traceback (most recent call last):
...
ValueError: delta must be a number in (0, 1), got 1.0
>>> check_stream_values("values", [0, 1, 0.5])
array([0. , 1. , 0.5])
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np

__all__ = [
    "PA_MODES",
    "PAVariant",
    "check_choice",
    "check_count",
    "check_flag",
    "check_integer",
    "check_n_features",
    "check_non_negative",
    "check_pa_params",
    "check_positive",
    "check_stream_values",
    "check_unit_interval",
]

#: Passive-aggressive variants, dispatched to the kernels as small integers.
PA_MODES = {"pa": 0, "pa1": 1, "pa2": 2}


class PAVariant(NamedTuple):
    """A passive-aggressive variant as the kernels take it: ``mode`` (a code of
    :data:`PA_MODES`) and the aggressiveness ``C`` as a float."""

    mode: int
    C: float


def _is_real(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _is_integer(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_n_features(n_features) -> int:
    """A feature count: a positive integer."""
    if not _is_integer(n_features):
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
    if n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features}")
    return int(n_features)


def check_positive(name: str, value, *, upper: float | None = None) -> float:
    """A finite number ``> 0`` (and ``< upper`` when given)."""
    if not _is_real(value) or not math.isfinite(value):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if value <= 0 or (upper is not None and value >= upper):
        bound = f" below {upper}" if upper is not None else ""
        raise ValueError(f"{name} must be positive{bound}, got {value!r}")
    return float(value)


def check_non_negative(name: str, value) -> float:
    """A finite number ``>= 0``."""
    if not _is_real(value) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return float(value)


def check_count(name: str, value, minimum: int = 1) -> int:
    """An integer ``>= minimum``."""
    if not _is_integer(value) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_integer(name: str, value) -> int:
    """Any integer (a seed)."""
    if not _is_integer(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def check_flag(name: str, value) -> bool:
    """A real ``bool`` (``1`` or ``"yes"`` are refused)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def check_choice(name: str, value, choices) -> str:
    """One of the strings ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_pa_params(mode: str, C) -> PAVariant:
    """A passive-aggressive variant name and its aggressiveness ``C``; returns the kernels'
    mode code and ``C`` as a float.

    >>> check_pa_params("pa1", 1)
    PAVariant(mode=1, C=1.0)
    """
    if mode not in PA_MODES:
        raise ValueError(f"mode must be one of {sorted(PA_MODES)}, got {mode!r}")
    return PAVariant(PA_MODES[mode], check_positive("C", C))


def check_unit_interval(
    name: str, value, *, include_zero: bool = False, include_one: bool = False
) -> float:
    """A number in the open interval (0, 1), or with the flags [0, 1) / (0, 1] / [0, 1]: a
    significance level, a forgetting factor.

    >>> check_unit_interval("alpha", 1, include_one=True)
    1.0
    """
    low, high = "[" if include_zero else "(", "]" if include_one else ")"
    if not (
        _is_real(value)
        and math.isfinite(value)
        and (0 < value or (include_zero and value == 0))
        and (value < 1 or (include_one and value == 1))
    ):
        raise ValueError(f"{name} must be a number in {low}0, 1{high}, got {value!r}")
    return float(value)


def check_stream_values(name: str, values, *, max_abs: float | None = None) -> np.ndarray:
    """A 1-D stream of real values (booleans, integers or floats) as a contiguous float64
    array: finite, and at most ``max_abs`` in absolute value when given. Strings, objects,
    complex numbers and arrays of another dimension are refused.

    >>> check_stream_values("values", np.array([1.0, np.inf]))
    Traceback (most recent call last):
    ...
    ValueError: values must be finite, got inf at index 1
    """
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold real numbers, got dtype {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {array.shape}")
    array = np.ascontiguousarray(array, dtype=np.float64)
    finite = np.isfinite(array)
    if not finite.all():
        first = int(np.argmin(finite))
        raise ValueError(f"{name} must be finite, got {array[first]} at index {first}")
    if max_abs is not None and array.size and np.abs(array).max() > max_abs:
        first = int(np.argmax(np.abs(array) > max_abs))
        raise ValueError(
            f"{name} must be at most {max_abs:g} in absolute value, got {float(array[first])!r} at "
            f"index {first}"
        )
    return array
