"""The declared schema of what the service reads from outside (``service.durability.schema``):
byte extents and the parts of the service's state. The readers' tests
(``test_interchange``, ``test_store``) run it on whole files and snapshots."""

import json

import numpy as np
import pytest

from service.durability.capture import ANSWERS, PROGRESSIVE, RESERVOIR
from service.durability.constraints import SchemaError
from service.durability.schema import check_extents, check_state
from service.model.spec import CreateModel

SPEC = CreateModel.model_validate(
    {"name": "m", "kind": "mofm", "input": {"n_features": 2}, "classes": ["a", "b", "c"]}
)


@pytest.mark.parametrize(
    "extents,payload,message",
    [
        ([("a", 0, 8), ("b", 4, 8)], 12, "overlaps"),
        ([("a", 0, 8), ("b", 16, 8)], 24, "belong to no array"),
        ([("a", 0, 8)], 16, "cover 8 bytes"),
        ([("a", 0, 8)], 4, "cover 8 bytes"),
    ],
)
def test_arrays_lie_end_to_end_over_the_payload(extents, payload, message):
    check_extents([("a", 0, 8), ("empty", 8, 0), ("b", 8, 4)], 12)
    with pytest.raises(SchemaError, match=message):
        check_extents(extents, payload)


def service_state(**service) -> dict:
    return {"kind": "K", "params": {}, "arrays": {}, "scalars": {"n_seen_": 3}, "service": service}


def window(targets, arrival=(0, 1, -1)) -> dict:
    arrays = {
        "indptr": np.array([0, 1, 2, 2]),
        "indices": np.array([0, 1]),
        "values": np.array([1.0, 2.0]),
        "arrival": np.array(arrival),
        "targets": np.array(targets, dtype=float),
    }
    return {RESERVOIR + name: array for name, array in arrays.items()}


RNG = {"bit_generator": "PCG64", "state": {"state": 1, "inc": 3}, "has_uint32": 0, "uinteger": 0}
RECENT = np.zeros((3, 4))
TOTALS = {PROGRESSIVE + name: 1 for name in ("n", "correct", "loss_sum", "squared_sum")}


@pytest.mark.parametrize(
    "arrays,scalars,message",
    [
        ({}, {PROGRESSIVE + "n": 3}, "not service.progressive.recent_"),
        ({PROGRESSIVE + "recent_": RECENT}, {PROGRESSIVE + "n": 3}, "not service.progressive"),
        ({PROGRESSIVE + "recent_": np.full((3, 4), np.nan)}, {}, "not finite"),
        ({PROGRESSIVE + "recent_": np.full((3, 4), 2.0)}, TOTALS, "hits: 0 or 1"),
        ({ANSWERS + "table": np.frombuffer(b"\xff\xfe", np.uint8)}, {}, "not UTF-8"),
        ({ANSWERS + "table": np.frombuffer(b'{"key": "k"}', np.uint8)}, {}, "fingerprint"),
        (window([0, 3, np.nan]), {RESERVOIR + "n_seen": 2, RESERVOIR + "rng": RNG}, "indices"),
        (window([0, -1, np.nan]), {RESERVOIR + "n_seen": 2, RESERVOIR + "rng": RNG}, "indices"),
        (window([0, np.nan, 1]), {RESERVOIR + "n_seen": 2, RESERVOIR + "rng": RNG}, "no target"),
        (window([0, 1, 1]), {RESERVOIR + "n_seen": 1, RESERVOIR + "rng": RNG}, "n_seen"),
        (window([0, 1, 1]), {RESERVOIR + "n_seen": 2, RESERVOIR + "rng": {}}, "bit_generator"),
        ({RESERVOIR + "indptr": np.array([0.0])}, {}, "int64"),
    ],
)
def test_the_service_part_is_checked_whole(arrays, scalars, message):
    with pytest.raises(SchemaError, match=message):
        check_state(service_state(arrays=arrays, scalars=scalars), SPEC)


def test_a_whole_service_part_passes():
    answer = {"key": "k", "fingerprint": "0" * 32, "at": 1.0, "error": {"code": "invalid_input"}}
    answer["error"] |= {"message": "no", "details": None}
    arrays = window([0, 2, np.nan]) | {
        PROGRESSIVE + "recent_": np.array([[1.0, 0, 0, 0], [0, np.inf, 0, 0], [0, 0, 0, 0]]),
        ANSWERS + "table": np.frombuffer(json.dumps(answer).encode(), np.uint8),
    }
    scalars = {RESERVOIR + "n_seen": 7, RESERVOIR + "rng": RNG, PROGRESSIVE + "n": 2}
    scalars |= {PROGRESSIVE + "correct": 1, PROGRESSIVE + "loss_sum": float("inf")}
    scalars |= {PROGRESSIVE + "squared_sum": 0, PROGRESSIVE + "filled": 2}
    check_state(service_state(arrays=arrays, scalars=scalars), SPEC)
