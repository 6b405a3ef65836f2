"""The constraints over what the service reads from outside (``service.durability.constraints``):
JSON depth, messages that name the field, numbers of a state."""

import json
import math

import pytest

from service.durability.constraints import (
    MAX_DEPTH,
    MAX_ITEMS,
    Fields,
    Number,
    SchemaError,
    Sum,
    Text,
    check,
    parse_json,
)


def test_json_is_read_up_to_its_depth_limit():
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "text") is not None
    for text in ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "[" * 100_000 + "]" * 100_000):
        with pytest.raises(SchemaError, match="nested deeper"):
            parse_json(text, "text")
    for text in (b"\xff", "{", ""):
        with pytest.raises(SchemaError, match="not JSON"):
            parse_json(text, "text")


def test_json_of_too_many_items_is_refused_before_it_is_parsed(monkeypatch):
    """A header of millions of tiny items would hold the interpreter (and the event loop)
    while ``json.loads`` runs: counted first, refused unparsed."""
    assert parse_json(b"[" + b"1," * MAX_ITEMS + b"1]", "text")[-1] == 1

    def never(text):
        raise AssertionError("parsed")

    monkeypatch.setattr(json, "loads", never)
    for text in (b"[" + b"1," * (MAX_ITEMS + 1) + b"1]", "[" + "1," * (MAX_ITEMS + 1) + "1]"):
        with pytest.raises(SchemaError, match=f"more than {MAX_ITEMS} JSON items"):
            parse_json(text, "text")


def test_a_refusal_names_the_field_and_shortens_the_value():
    table = Fields({"name": Text(r"[a-z]{1,8}", "1 to 8 letters")})
    shortened = r"^model\.name must be 1 to 8 letters, got 'x{56}\.\.\.$"
    with pytest.raises(SchemaError, match=shortened):
        check(table, "model", {"name": "x" * 10_000})
    with pytest.raises(SchemaError, match="model has no 'name'"):
        check(table, "model", {})
    with pytest.raises(SchemaError, match="a JSON array of 5 items"):
        check(table, "model", [1, 2, 3, 4, 5])


@pytest.mark.parametrize(
    "constraint,accepted,refused",
    [
        (Number(), [0, -(2**63), 2**63 - 1, 1.5], [2**63, 10**40, math.nan, math.inf, True, "1"]),
        (Sum(), [0, -1e-17, math.inf, 2.5], [math.nan, -math.inf, False, None, 2**63]),
    ],
)
def test_the_numbers_of_a_state(constraint, accepted, refused):
    assert all(constraint.accepts(value) for value in accepted)
    assert not any(constraint.accepts(value) for value in refused)
