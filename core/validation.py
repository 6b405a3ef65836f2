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
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import NamedTuple

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
