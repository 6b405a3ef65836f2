"""Constraints over what the service reads from outside (JSON texts, their values, arrays),
beside ``service.model.params``'s over a model's parameters: each ``check`` names the field
that fails and says what it must be (``SchemaError``). ``service.durability.schema``
declares with them what model files and snapshots hold.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service.model.params import Constraint, Integer

#: the deepest nesting of a JSON text read (a model's state nests five deep)
MAX_DEPTH = 32
#: the most commas a JSON text read may hold, a bound on its items counted before it is
#: parsed: the parser holds the interpreter (and the event loop) while it runs, and a
#: header of millions of tiny items would hold it for long (a one-vs-one model at the
#: 5,000 sub-model limit writes ~300,000)
MAX_ITEMS = 1_000_000
INT64_MAX = 2**63 - 1


class SchemaError(ValueError):
    """What was read breaks its declared schema (the message says where and how)."""


def parse_json(text: bytes | str, what: str) -> Any:
    """The value of a JSON text nested at most ``MAX_DEPTH`` deep and of at most
    ``MAX_ITEMS`` items; SchemaError otherwise."""
    if text.count(b"," if isinstance(text, bytes) else ",") > MAX_ITEMS:
        raise SchemaError(f"{what} holds more than {MAX_ITEMS} JSON items")
    try:
        value = json.loads(text)
    except RecursionError:
        raise SchemaError(f"{what} is nested deeper than {MAX_DEPTH}") from None
    except ValueError as error:  # (a JSON or UTF-8 error)
        raise SchemaError(f"{what} is not JSON: {error}") from None
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth == MAX_DEPTH:
                raise SchemaError(f"{what} is nested deeper than {MAX_DEPTH}")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


def shown(value: Any) -> str:
    """A short form of a value read from outside, for a message."""
    if isinstance(value, dict | list):
        items = value.values() if isinstance(value, dict) else value
        if len(value) > 4 or any(isinstance(item, dict | list) for item in items):
            kind = "object" if isinstance(value, dict) else "array"
            return f"a JSON {kind} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check(constraint: Constraint, name: str, value: Any) -> Any:
    """``value`` checked against ``constraint`` (a ``Rule``: what its ``check`` returns);
    SchemaError naming ``name`` otherwise."""
    if isinstance(constraint, Rule):
        return constraint.check(name, value)
    if not constraint.accepts(value):
        raise SchemaError(f"{name} must be {constraint.describe()}, got {shown(value)}")
    return value


@dataclass(frozen=True)
class Text(Constraint):
    """Strings that ``pattern`` matches whole."""

    pattern: str
    description: str

    def accepts(self, value) -> bool:
        return isinstance(value, str) and re.fullmatch(self.pattern, value) is not None

    def describe(self) -> str:
        return self.description

    def schema(self) -> dict:
        return {"type": "string", "pattern": self.pattern}


@dataclass(frozen=True)
class Number(Constraint):
    """A state's scalar: an integer of int64's range or a finite float."""

    def accepts(self, value) -> bool:
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return -INT64_MAX - 1 <= value <= INT64_MAX
        return isinstance(value, float) and math.isfinite(value)

    def describe(self) -> str:
        return "an integer of int64's range or a finite number"

    def schema(self) -> dict:
        return {"type": "number"}


@dataclass(frozen=True)
class Sum(Constraint):
    """A running sum of losses: a float, +inf included (a sum of squared errors may
    overflow), never NaN or -inf; or an integer of int64's range. (Not bounded below by 0:
    a loss computed as a difference may round to a tiny negative number.)"""

    def accepts(self, value) -> bool:
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return -INT64_MAX - 1 <= value <= INT64_MAX
        return isinstance(value, float) and not math.isnan(value) and value != -math.inf

    def describe(self) -> str:
        return "a number (not NaN)"

    def schema(self) -> dict:
        return {"type": "number"}


@dataclass(frozen=True)
class JsonObject(Constraint):
    """Any JSON object (checked further by its reader, such as core's ``set_state``)."""

    def accepts(self, value) -> bool:
        return isinstance(value, dict)

    def describe(self) -> str:
        return "an object"

    def schema(self) -> dict:
        return {"type": "object"}


@dataclass(frozen=True)
class Anything(Constraint):
    """Any JSON value."""

    def accepts(self, value) -> bool:
        return True

    def describe(self) -> str:
        return "any value"

    def schema(self) -> dict:
        return {}


class Rule(Constraint):
    """A constraint over a composite value whose ``check`` names the part that fails, and
    returns the value as read (a ``Spec``: the create request)."""

    def check(self, name: str, value: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def accepts(self, value) -> bool:
        try:
            self.check("value", value)
        except ValueError:
            return False
        return True


@dataclass(frozen=True)
class Fields(Rule):
    """A JSON object with the declared ``fields`` (all required but the ``optional`` ones);
    ``check`` returns the checked values by field."""

    fields: dict[str, Constraint]
    optional: frozenset[str] = field(default_factory=frozenset)

    def check(self, name: str, value: Any) -> dict:
        if not isinstance(value, dict):
            raise SchemaError(f"{name} must be an object, got {shown(value)}")
        checked = {}
        for key, constraint in self.fields.items():
            if key in value:
                checked[key] = check(constraint, f"{name}.{key}", value[key])
            elif key not in self.optional:
                raise SchemaError(f"{name} has no {key!r}")
        return checked

    def describe(self) -> str:
        return f"an object with {sorted(self.fields)}"

    def schema(self) -> dict:
        return {
            "type": "object",
            "properties": {k: c.schema() for k, c in self.fields.items()},
            "required": [k for k in self.fields if k not in self.optional],
        }


@dataclass(frozen=True)
class ListOf(Rule):
    """A JSON array of items that meet ``item``."""

    item: Constraint

    def check(self, name: str, value: Any) -> list:
        if not isinstance(value, list):
            raise SchemaError(f"{name} must be an array, got {shown(value)}")
        return [check(self.item, f"{name}[{i}]", item) for i, item in enumerate(value)]

    def describe(self) -> str:
        return f"an array of {self.item.describe()}"

    def schema(self) -> dict:
        return {"type": "array", "items": self.item.schema()}


@dataclass(frozen=True)
class Shape(Rule):
    """An array's shape: at most 32 non-negative integers (their product is checked against
    the bytes the array covers)."""

    def check(self, name: str, value: Any) -> list:
        if not isinstance(value, list) or len(value) > 32:
            raise SchemaError(f"{name} must be a list of at most 32 sizes, got {shown(value)}")
        for size in value:
            check(COUNT, f"{name} (a size)", size)
        return value

    def describe(self) -> str:
        return "a list of at most 32 non-negative integers"

    def schema(self) -> dict:
        return {"type": "array", "items": COUNT.schema(), "maxItems": 32}


@dataclass(frozen=True)
class Offsets(Rule):
    """A safetensors entry's ``data_offsets``: two integers, begin <= end."""

    def check(self, name: str, value: Any) -> list:
        if not (
            isinstance(value, list) and len(value) == 2 and all(COUNT.accepts(v) for v in value)
        ):
            raise SchemaError(f"{name} must be two non-negative integers, got {shown(value)}")
        if value[0] > value[1]:
            raise SchemaError(f"{name} must be in order (begin <= end), got {value}")
        return value

    def describe(self) -> str:
        return "two non-negative integers in order"

    def schema(self) -> dict:
        return {"type": "array", "items": COUNT.schema(), "minItems": 2, "maxItems": 2}


@dataclass(frozen=True)
class Array:
    """Arrays of one ``dtype`` and number of dimensions (``rows``: the first dimension's
    length, when fixed) whose values are at least ``low`` and finite, but where ``nan``
    (NaN) or ``inf`` (+inf) are allowed."""

    dtype: str
    ndim: int
    rows: int | None = None
    low: float | None = None
    nan: bool = False
    inf: bool = False

    def check(self, name: str, array: np.ndarray) -> None:
        if array.dtype != np.dtype(self.dtype) or array.ndim != self.ndim:
            raise SchemaError(
                f"{name} must be a {self.ndim}-dimensional array of {np.dtype(self.dtype)}, "
                f"got {array.ndim} dimensions of {array.dtype}"
            )
        if self.rows is not None and array.shape[0] != self.rows:
            raise SchemaError(f"{name} must have {self.rows} rows, got {array.shape[0]}")
        if array.dtype.kind == "f":
            bad = np.isneginf(array) if self.inf else np.isinf(array)
            if bad.any() or (not self.nan and np.isnan(array).any()):
                raise SchemaError(f"{name} holds values that are not finite")
        if self.low is not None and (array < self.low).any():  # (False for NaN)
            raise SchemaError(f"{name} holds values below {self.low:g}")


#: a count, a size or an offset
COUNT = Integer(0, INT64_MAX)
