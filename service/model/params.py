"""Declarative parameter constraints (in the style of scikit-learn's
``_parameter_constraints``): one declaration per parameter checks a value and describes it
as JSON Schema, so the kind catalogue's checks and the OpenAPI description cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class Constraint:
    """A set of valid values: ``check`` returns the value or raises ``ValueError``; ``schema``
    is the same set as JSON Schema."""

    def accepts(self, value: Any) -> bool:  # pragma: no cover
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover
        raise NotImplementedError

    def schema(self) -> dict:  # pragma: no cover
        raise NotImplementedError

    def check(self, name: str, value: Any) -> Any:
        if not self.accepts(value):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
        return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Integer(Constraint):
    """Integers in [low, high]."""

    low: int
    high: int

    def accepts(self, value) -> bool:
        return _is_int(value) and self.low <= value <= self.high

    def describe(self) -> str:
        return f"an integer in [{self.low}, {self.high}]"

    def schema(self) -> dict:
        return {"type": "integer", "minimum": self.low, "maximum": self.high}


@dataclass(frozen=True)
class Real(Constraint):
    """Finite numbers between ``low`` and ``high``; ``low_open`` / ``high_open`` exclude
    the bound."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def accepts(self, value) -> bool:
        if not _is_real(value) or not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self) -> str:
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"a number in {left}{self.low:g}, {self.high:g}{right}"

    def schema(self) -> dict:
        low = "exclusiveMinimum" if self.low_open else "minimum"
        high = "exclusiveMaximum" if self.high_open else "maximum"
        return {"type": "number", low: self.low, high: self.high}


@dataclass(frozen=True)
class Options(Constraint):
    """One of the listed strings."""

    values: tuple[str, ...]

    def accepts(self, value) -> bool:
        return isinstance(value, str) and value in self.values

    def describe(self) -> str:
        return f"one of {list(self.values)}"

    def schema(self) -> dict:
        return {"type": "string", "enum": list(self.values)}


@dataclass(frozen=True)
class Boolean(Constraint):
    """true or false."""

    def accepts(self, value) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "true or false"

    def schema(self) -> dict:
        return {"type": "boolean"}


@dataclass(frozen=True)
class IntegerList(Constraint):
    """A list of distinct integers in [low, high], at most ``max_length`` of them."""

    low: int
    high: int
    max_length: int

    def accepts(self, value) -> bool:
        return (
            isinstance(value, list)
            and len(value) <= self.max_length
            and all(_is_int(v) and self.low <= v <= self.high for v in value)
            and len(set(value)) == len(value)
        )

    def describe(self) -> str:
        return f"a list of at most {self.max_length} distinct integers in [{self.low}, {self.high}]"

    def schema(self) -> dict:
        return {
            "type": "array",
            "items": Integer(self.low, self.high).schema(),
            "maxItems": self.max_length,
            "uniqueItems": True,
        }


@dataclass(frozen=True)
class AnyOf(Constraint):
    """A value accepted by one of the constraints (``None`` in them: null)."""

    options: tuple[Constraint | None, ...]

    def accepts(self, value) -> bool:
        return any(value is None if c is None else c.accepts(value) for c in self.options)

    def describe(self) -> str:
        return " or ".join("null" if c is None else c.describe() for c in self.options)

    def schema(self) -> dict:
        return {"anyOf": [{"type": "null"} if c is None else c.schema() for c in self.options]}


def nullable(constraint: Constraint) -> AnyOf:
    """``constraint`` or null (the core class then picks its own default)."""
    return AnyOf((constraint, None))


@dataclass(frozen=True)
class Param:
    """One parameter of a kind: its constraint, default and one-line description."""

    constraint: Constraint
    default: Any
    description: str

    def schema(self) -> dict:
        return {
            **self.constraint.schema(),
            "default": self.default,
            "description": self.description,
        }
