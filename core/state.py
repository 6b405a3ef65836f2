"""Checks of a state's entries before anything of it is loaded: what ``set_state`` and
``set_scalars`` of every model (``core.base``) and the progressive metrics (``core.metrics``)
accept.

A state comes from outside the process (a snapshot, a model file). Every entry is checked
before any is written; a bad one raises ``ValueError`` naming it, so a bad state changes
nothing:

- a count (an integer scalar) is a non-negative integer that fits int64, below ``2**63``; a
  float that holds an integer is read as one; a boolean is refused (``True`` is an ``int`` to
  Python, never a count here);
- a float scalar is a finite number; a running sum (of losses, of squared errors) may have
  overflowed to ``+inf`` and may be a rounding below zero, but is never NaN or ``-inf``;
- an array is a numpy array of the expected dtype (never a byte, string or object array read
  as numbers) and shape, and a float array is finite (or, holding terms of such sums, free of
  NaN and ``-inf``).

>>> state_count("n_seen_", 3.0)
3
>>> state_count("n_seen_", 2**63)
Traceback (most recent call last):
...
ValueError: state scalar 'n_seen_' must be a count in [0, 2**63), got 9223372036854775808
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "INT64_LIMIT",
    "state_array",
    "state_count",
    "state_float",
    "state_scalar",
    "state_sum",
]

#: counts are below this: they fit int64 (the kernels' and numpy's counters)
INT64_LIMIT = 2**63


def _is_number(value) -> bool:
    return not isinstance(value, bool | np.bool_) and isinstance(
        value, int | float | np.integer | np.floating
    )


def state_count(name: str, value) -> int:
    """A count of a state as an ``int``: a non-negative integer below ``2**63`` (or a float
    holding one); ValueError otherwise."""
    if not _is_number(value):
        raise ValueError(f"state scalar {name!r} must be a count, got {value!r:.60}")
    if isinstance(value, float | np.floating) and not (
        math.isfinite(value) and float(value).is_integer()
    ):
        raise ValueError(f"state scalar {name!r} must be a count, got {value!r:.60}")
    count = int(value)
    if not 0 <= count < INT64_LIMIT:
        raise ValueError(f"state scalar {name!r} must be a count in [0, 2**63), got {count!r:.60}")
    return count


def state_float(name: str, value) -> float:
    """A float scalar of a state as a ``float``: a finite number; ValueError otherwise.

    >>> state_float("loss_sum", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: state scalar 'loss_sum' must be a finite number, got nan
    """
    if not _is_number(value):
        raise ValueError(f"state scalar {name!r} must be a number, got {value!r:.60}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float64
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"state scalar {name!r} must be a finite number, got {value!r:.60}")
    return number


def state_sum(name: str, value) -> float:
    """A running sum of a state as a ``float``: a number, ``+inf`` included (the sum of many
    large terms overflows), never NaN or ``-inf``; ValueError otherwise.

    >>> state_sum("squared_sum", float("inf"))
    inf
    """
    if not _is_number(value):
        raise ValueError(f"state scalar {name!r} must be a number, got {value!r:.60}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf if value > 0 else -math.inf
    if math.isnan(number) or number == -math.inf:
        raise ValueError(f"state scalar {name!r} must be a sum, not NaN or -inf, got {value!r:.60}")
    return number


def state_scalar(name: str, value, current):
    """A state's scalar checked against the model's current value of it: a count where the
    model holds an ``int``, a finite float where it holds a ``float``."""
    if isinstance(current, int):
        return state_count(name, value)
    return type(current)(state_float(name, value))


def state_array(
    name: str, value, dtype, shape: tuple | None = None, sums: bool = False
) -> np.ndarray:
    """An array of a state: a numpy array of exactly ``dtype`` and, if given, ``shape``; a
    float array finite, or with ``sums`` free of NaN and ``-inf`` (``+inf`` allowed: terms of
    running sums, see :func:`state_sum`). ValueError otherwise.

    >>> state_array("recent_", np.zeros((3, 2), dtype=np.uint8), np.float64)
    Traceback (most recent call last):
    ...
    ValueError: state array 'recent_' has dtype uint8, expected float64
    """
    if not isinstance(value, np.ndarray):
        raise ValueError(f"state array {name!r} is not a numpy array")
    dtype = np.dtype(dtype)
    if shape is not None and (value.shape != tuple(shape) or value.dtype != dtype):
        raise ValueError(
            f"state array {name!r} has shape {value.shape} and dtype {value.dtype}, "
            f"expected {tuple(shape)} and {dtype}"
        )
    if value.dtype != dtype:
        raise ValueError(f"state array {name!r} has dtype {value.dtype}, expected {dtype}")
    if value.dtype.kind == "f":
        bad = (np.isnan(value) | (value == -np.inf)) if sums else ~np.isfinite(value)
        if bad.any():
            raise ValueError(f"state array {name!r} holds non-finite values")
    return value
