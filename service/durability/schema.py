"""What the service reads from outside, declared once: model files (``PUT /v1/models/{name}``,
``service.durability.interchange``) and snapshots from the store (``service.durability.store``).

Both hold a model's state (``service.durability.capture``) in a container (a safetensors
file; a snapshot blob) with JSON metadata. Declared here, in tables of names and constraints
(``service.durability.constraints``, ``service.model.params``): the containers' entries
(dtypes, shapes, byte extents), the metadata's fields, and the service's part of the state
(counters, progressive metrics, idempotency answers, refit window). The estimator's own
arrays and scalars are checked against the model by core's ``set_state``; here only that
they are what a state can hold (numbers of int64's range or finite floats, arrays of the
allowed dtypes).

Readers parse every JSON text with ``constraints.parse_json`` and check what they read with
the tables and ``check_*`` functions below before they build anything; ``SchemaError`` names
the field and what it must be, and each reader turns it into its own error
(``InterchangeError``, ``SnapshotError``). Fields a table does not declare are not read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from service.durability.capture import (
    ANSWERS,
    AVERAGED,
    GROUP,
    MEMBERS,
    MODEL,
    PROGRESSIVE,
    RESERVOIR,
    SERVICE,
)
from service.durability.constraints import (
    COUNT,
    INT64_MAX,
    Anything,
    Array,
    Fields,
    JsonObject,
    ListOf,
    Number,
    Offsets,
    Rule,
    SchemaError,
    Shape,
    Sum,
    Text,
    check,
    parse_json,
    shown,
)
from service.exceptions import CODES
from service.model.kinds import KINDS
from service.model.params import AnyOf, Boolean, Constraint, Integer, Options, Real
from service.model.spec import NAME_PATTERN, CreateModel, spec_from_json

#: the largest header read (safetensors' own limit)
MAX_HEADER_BYTES = 100_000_000

#: safetensors dtype codes and the numpy dtypes they are read as (little endian)
TENSOR_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "|i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "|u1",
    "BOOL": "|b1",
}
#: the dtypes of a snapshot's arrays (numpy's names of the same types)
ARRAY_DTYPES = tuple(TENSOR_DTYPES.values())


@dataclass(frozen=True)
class Spec(Rule):
    """A model's create request (``CreateModel``); ``snapshot``: as snapshots keep it
    (``spec_from_json``: older ones wrote absent fields as null). ``check`` returns the
    ``CreateModel``."""

    snapshot: bool

    def check(self, name: str, value: Any) -> CreateModel:
        if not isinstance(value, dict):
            raise SchemaError(f"{name} must be an object (a create request), got {shown(value)}")
        try:
            return spec_from_json(value) if self.snapshot else CreateModel.model_validate(value)
        except ValidationError as error:
            raise SchemaError(f"{name} is not a valid create request: {error}") from None

    def describe(self) -> str:
        return "a create request"

    def schema(self) -> dict:
        return {"type": "object"}


VERSION = Integer(0, INT64_MAX)
#: seconds since the epoch
TIME = Real(0.0, math.inf, high_open=True)
NAME = Text(NAME_PATTERN, "a model name (1 to 64 letters, digits, '_', '.', '-')")
STRING = Text(r"(?s).*", "a string")
OBJECT = JsonObject()
#: a position in the feedback log: a file log's record number, a Redis stream id, or none
POSITION = AnyOf((None, COUNT, Text(r"\d{1,20}-\d{1,20}", "a Redis stream id")))
#: a row digest of published versions (``service.scale.deltas``): an unsigned 64-bit integer
DIGEST = Text(r"\d{1,20}", "a decimal integer")
#: the estimator's class name (``core.base``: a state's ``kind``)
KIND = Text(r"[A-Za-z_][A-Za-z0-9_]{0,99}", "a model class name")


# -- the containers --------------------------------------------------------------------------
#: one tensor of a safetensors header
TENSOR = Fields(
    {"dtype": Options(tuple(TENSOR_DTYPES)), "shape": Shape(), "data_offsets": Offsets()}
)
#: one array of a snapshot's header (``"part": "service"``: the service's part of the state)
DESCRIPTOR = Fields(
    {
        "name": Text(r"[^\x00-\x1f]{1,200}", "a name of 1 to 200 characters"),
        "dtype": Options(ARRAY_DTYPES),
        "shape": Shape(),
        "offset": COUNT,
        "nbytes": COUNT,
        "part": Options(("service",)),
    },
    optional=frozenset({"part"}),
)


def nbytes(shape: list[int], dtype: str) -> int:
    """The bytes of an array of ``shape`` (a checked ``Shape``) and ``dtype`` (exact: no
    int64 overflow)."""
    return math.prod(shape) * np.dtype(dtype).itemsize


def check_extents(extents: list[tuple[str, int, int]], payload: int) -> None:
    """Arrays ``(name, offset, nbytes)`` laid end to end over a payload of ``payload`` bytes:
    no overlap, no gap, nothing after the last (as both containers are written)."""
    position = 0
    for name, offset, size in sorted(extents, key=lambda extent: (extent[1], extent[2])):
        if offset < position:
            raise SchemaError(f"array {name!r} overlaps another one")
        if offset > position:
            raise SchemaError(f"bytes {position} to {offset} of the payload belong to no array")
        position = offset + size
    if position != payload:
        raise SchemaError(f"the arrays cover {position} bytes, the payload has {payload}")


def check_tensors(header: Any, payload: int) -> tuple[dict[str, str], dict[str, tuple]]:
    """The ``__metadata__`` of a safetensors header (parsed JSON) and its tensors, each
    ``(numpy dtype, shape, begin, end)``, checked against a payload of ``payload`` bytes."""
    if not isinstance(header, dict):
        raise SchemaError(f"the header must be an object, got {shown(header)}")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SchemaError(f"__metadata__ must map strings to strings, got {shown(metadata)}")
    tensors, extents = {}, []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        checked = TENSOR.check(f"tensor {name!r}", entry)
        dtype = TENSOR_DTYPES[checked["dtype"]]
        begin, end = checked["data_offsets"]
        size = nbytes(checked["shape"], dtype)
        if end - begin != size:
            raise SchemaError(
                f"tensor {name!r}: its shape and dtype need {size} bytes, its data_offsets "
                f"cover {end - begin}"
            )
        tensors[name] = (dtype, checked["shape"], begin, end)
        extents.append((name, begin, size))
    check_extents(extents, payload)
    return metadata, tensors


def check_descriptors(descriptors: list[dict], payload: int) -> None:
    """A snapshot's array descriptors (checked by ``SNAPSHOT``) against a payload of
    ``payload`` bytes: their sizes and extents, and one name per part."""
    seen = set()
    for d in descriptors:
        where = (d.get("part", "model"), d["name"])
        if where in seen:
            raise SchemaError(f"array {d['name']!r} appears twice")
        seen.add(where)
        if d["nbytes"] != nbytes(d["shape"], d["dtype"]):
            raise SchemaError(f"array {d['name']!r}: its nbytes do not match its shape and dtype")
    check_extents([(d["name"], d["offset"], d["nbytes"]) for d in descriptors], payload)


# -- the metadata ------------------------------------------------------------------------------
#: the estimator's part of a state, as both containers describe it
_ESTIMATOR = {"kind": KIND, "params": OBJECT, "scalars": OBJECT}

#: the JSON of a model file's ``__metadata__["model"]`` (``service.durability.interchange``)
MODEL_FILE = Fields(
    {
        "name": NAME,
        "version": VERSION,
        "spec": Spec(snapshot=False),
        **_ESTIMATOR,
        "service_scalars": OBJECT,
    }
)

#: a snapshot's header (``service.durability.store``) beside its ``format``
SNAPSHOT = Fields(
    {
        "model": NAME,
        "version": VERSION,
        "created_at": TIME,
        "spec": Spec(snapshot=True),
        "log_position": POSITION,
        **_ESTIMATOR,
        "service_scalars": OBJECT,
        "arrays": ListOf(DESCRIPTOR),
        "payload_sha256": Text(r"[0-9a-f]{64}", "64 hexadecimal digits"),
        # a publication's (``service.durability.snapshots``, ``service.scale.deltas``)
        "previous": AnyOf((None, VERSION)),
        "first_new": POSITION,
        "digest": DIGEST,
        "delta": Fields({"base": VERSION, "digest": DIGEST}),
    },
    optional=frozenset(
        {"log_position", "service_scalars", "previous", "first_new", "digest", "delta"}
    ),
)


# -- the service's part of a state -----------------------------------------------------------
#: the service's scalars, by name (``service.durability.capture``); each optional (older
#: snapshots lack some), but a part present is whole (``PARTS``)
SERVICE_SCALARS: dict[str, Constraint] = {
    MODEL + "created_at": TIME,
    MODEL + "incarnation": Text(r"[\x21-\x7e]{1,64}", "1 to 64 printable ASCII characters"),
    MODEL + "examples_learned": COUNT,
    MODEL + "aggressive_updates": COUNT,
    MODEL + "predictions": COUNT,
    MODEL + "refits": COUNT,
    MODEL + "examples_since_refit": COUNT,
    **{
        prefix + name: constraint
        for prefix in (PROGRESSIVE, AVERAGED)
        for name, constraint in (
            ("n", COUNT),
            ("filled", COUNT),
            ("correct", COUNT),
            ("loss_sum", Sum()),
            ("squared_sum", Sum()),
        )
    },
    RESERVOIR + "n_seen": COUNT,
    # numpy's state of the window's generator (``np.random.default_rng``)
    RESERVOIR + "rng": Fields(
        {
            "bit_generator": Options(("PCG64",)),
            "state": Fields({"state": Integer(0, 2**128 - 1), "inc": Integer(0, 2**128 - 1)}),
            "has_uint32": Integer(0, 1),
            "uinteger": Integer(0, 2**32 - 1),
        }
    ),
}

#: the service's arrays, by name
SERVICE_ARRAYS: dict[str, Array] = {
    # rows of the recent window: hit (0 or 1), loss, squared error (as ``Sum``'s terms)
    PROGRESSIVE + "recent_": Array("<f8", 2, rows=3, inf=True),
    AVERAGED + "recent_": Array("<f8", 2, rows=3, inf=True),
    # the group of members (``service.model.group``): UTF-8 JSON (``GROUP_STATE``)
    GROUP + "state": Array("|u1", 1),
    # UTF-8 JSON lines, one per answer (``ANSWER``)
    ANSWERS + "table": Array("|u1", 1),
    # the refit window (``core.mofm.reservoir``): CSR rows by slot, arrival (-1: empty)
    # and the target of each slot (a class index or a value; NaN in an empty slot)
    RESERVOIR + "indptr": Array("<i8", 1, low=0),
    RESERVOIR + "indices": Array("<i8", 1, low=0),
    RESERVOIR + "values": Array("<f8", 1),
    RESERVOIR + "arrival": Array("<i8", 1, low=-1),
    RESERVOIR + "targets": Array("<f8", 1, nan=True),
}

#: one kept answer (``service.durability.idempotency``): its body, or the refusal it got
ANSWER = Fields(
    {
        "key": Text(r"[\x21-\x7e]{1,255}", "an Idempotency-Key"),
        "fingerprint": Text(r"[0-9a-f]{32}", "32 hexadecimal digits"),
        "at": TIME,
        "body": OBJECT,
        "error": Fields({"code": Options(tuple(CODES)), "message": STRING, "details": Anything()}),
    },
    optional=frozenset({"body", "error"}),
)


def _progressive(scalars: dict, arrays: dict, spec: CreateModel) -> None:
    """The running totals agree with each other and with the window."""
    recent, n = arrays["recent_"], scalars["n"]
    window = recent.shape[1]
    filled = scalars.get("filled", min(n, window))
    if window < 1 or filled > min(n, window):
        raise SchemaError(
            f"{PROGRESSIVE}filled ({filled}) must be at most n ({n}) and the window ({window})"
        )
    if scalars["correct"] > n:
        raise SchemaError(f"{PROGRESSIVE}correct ({scalars['correct']}) exceeds n ({n})")
    if not np.isin(recent[0], (0.0, 1.0)).all():
        raise SchemaError(f"{PROGRESSIVE}recent_'s first row holds hits: 0 or 1")


#: a core state written as JSON by the group (``service.model.group``): scalars, and arrays
#: as their dtype, shape and values
CORE_STATE = Fields({"scalars": OBJECT, "arrays": OBJECT})
#: the group's own state (``service.model.group.Group.get_state``)
GROUP_STATE = Fields(
    {
        "serving": NAME,
        "variant": Options(("live", "averaged")),
        "members": OBJECT,
        "policy": Fields(
            {
                "promotion": Fields(
                    {
                        "auto": Boolean(),
                        "confidence": Real(0.5, 1.0, low_open=True, high_open=True),
                        "min_examples": Integer(1, INT64_MAX),
                    }
                ),
                "serve": Options(("fixed", "best")),
                "drift": Fields(
                    {
                        "detector": AnyOf((None, Options(("adwin", "page_hinkley")))),
                        "params": OBJECT,
                        "on_drift": Options(("none", "challenger")),
                    }
                ),
                "parallel": AnyOf(
                    (
                        None,
                        Fields({"learners": Integer(1, 64), "interval": Integer(1, 1 << 30)}),
                    )
                ),
            },
            optional=frozenset({"parallel"}),
        ),
        "comparisons": OBJECT,
        "detector": AnyOf((None, CORE_STATE)),
        "detections": COUNT,
        "last_detection": AnyOf((None, COUNT)),
        "promotions": COUNT,
        "examples": COUNT,
        "paused": Boolean(),
    }
)


def _group(scalars: dict, arrays: dict, spec: CreateModel) -> None:
    """The group's state is ``GROUP_STATE``: its members' specs are create requests of the
    model's input and classes, the serving member among them, each comparison and the
    detector a core state."""
    name = f"{GROUP}state"
    try:
        text = arrays["state"].tobytes().decode()
    except UnicodeDecodeError:
        raise SchemaError(f"{name} is not UTF-8") from None
    group = GROUP_STATE.check(name, parse_json(text, name))
    members = {}
    for member, member_spec in group["members"].items():
        check(NAME, f"{name}.members key", member)
        members[member] = Spec(snapshot=True).check(f"{name}.members.{member}", member_spec)
    if group["serving"] not in members:
        raise SchemaError(f"{name}.serving {group['serving']!r} is not among its members")
    for member, member_spec in members.items():
        if (member_spec.input, member_spec.classes) != (spec.input, spec.classes):
            raise SchemaError(f"{name}.members.{member}: another input or classes")
    for key, saved in group["comparisons"].items():
        member, _, variant = key.rpartition("/")
        if member not in members or variant not in ("live", "averaged"):
            raise SchemaError(f"{name}.comparisons: {key!r} names no member's variant")
        CORE_STATE.check(f"{name}.comparisons.{key}", saved)


def _answers(scalars: dict, arrays: dict, spec: CreateModel) -> None:
    """Each line of the table is one answer."""
    try:
        text = arrays["table"].tobytes().decode()
    except UnicodeDecodeError:
        raise SchemaError(f"{ANSWERS}table is not UTF-8") from None
    for i, line in enumerate(text.splitlines()):
        name = f"{ANSWERS}table line {i + 1}"
        answer = ANSWER.check(name, parse_json(line, name))
        if ("body" in answer) == ("error" in answer):
            raise SchemaError(f"{name} must hold a body or an error")


def _reservoir(scalars: dict, arrays: dict, spec: CreateModel) -> None:
    """The window's arrays describe one window: rows in CSR order, a finite target per
    filled slot (a class index of the model's unless it is a regression)."""
    indptr, indices, arrival, targets = (
        arrays[k] for k in ("indptr", "indices", "arrival", "targets")
    )
    size = arrival.shape[0]
    if indptr.shape != (size + 1,) or targets.shape != (size,):
        raise SchemaError(f"{RESERVOIR}* disagree on the window's size ({size} slots)")
    if indptr[0] != 0 or (np.diff(indptr) < 0).any() or indptr[-1] != indices.shape[0]:
        raise SchemaError(f"{RESERVOIR}indptr must rise from 0 to the number of indices")
    if arrays["values"].shape != indices.shape:
        raise SchemaError(f"{RESERVOIR}values and indices must be as long")
    filled = targets[arrival >= 0]
    if scalars["n_seen"] < filled.size:
        raise SchemaError(f"{RESERVOIR}n_seen is below the examples the window holds")
    if np.isnan(filled).any():
        raise SchemaError(f"{RESERVOIR}targets: a filled slot has no target")
    if KINDS[spec.kind].family == "batch":  # (a batch kind keeps its labels, -1 and 1)
        if ((filled != -1.0) & (filled != 1.0)).any():
            raise SchemaError(f"{RESERVOIR}targets of a batch kind must be -1 or 1")
        return
    regression = spec.kind == "pqr" and spec.params.get("task") == "regression"
    classes = None if regression else len(spec.classes or (-1, 1))
    if (
        classes is not None
        and ((filled != np.floor(filled)) | (filled < 0) | (filled >= classes)).any()
    ):
        raise SchemaError(f"{RESERVOIR}targets must be class indices in [0, {classes})")


#: the parts of the service's state: the entries each needs once it has any, and the
#: checks across them
PARTS = {
    MODEL: ((), None),
    PROGRESSIVE: (("recent_", "n", "correct", "loss_sum", "squared_sum"), _progressive),
    AVERAGED: (("recent_", "n", "correct", "loss_sum", "squared_sum"), _progressive),
    GROUP: (("state",), _group),
    ANSWERS: (("table",), _answers),
    RESERVOIR: (
        ("indptr", "indices", "values", "arrival", "targets", "n_seen", "rng"),
        _reservoir,
    ),
}


#: a challenger's snapshot blob (``service.members.<name>``)
MEMBER_BLOB = Array("|u1", 1)


def _check_members(arrays: dict, members: dict, spec: CreateModel) -> None:
    """Each challenger's blob is a snapshot (its whole state, checked as any snapshot is) of
    the spec the group names for it; the group names no challenger without a blob."""
    if not members and GROUP + "state" not in arrays:
        return
    from service.durability.store import SnapshotError, decode  # (store reads through this)

    named = json_group(arrays.get(GROUP + "state"))
    expected = {m for m in named["members"] if m != named["serving"]} if named else set()
    if set(members) != expected:
        raise SchemaError(
            f"{MEMBERS}*: the blobs {sorted(members)} are not the group's challengers "
            f"{sorted(expected)}"
        )
    for member, blob in members.items():
        try:
            header, _ = decode(blob)
        except SnapshotError as error:
            raise SchemaError(f"{MEMBERS}{member}: {error}") from None
        if spec_from_json(header["spec"]) != spec_from_json(named["members"][member]):
            raise SchemaError(f"{MEMBERS}{member}: not the spec the group names")


def json_group(array) -> dict | None:
    """The group state of a snapshot's ``service.group.state`` (None: none), parsed."""
    if array is None:
        return None
    return parse_json(np.asarray(array).tobytes().decode(), f"{GROUP}state")


def check_state(state: dict, spec: CreateModel) -> None:
    """A snapshot state read from outside (``capture``'s layout) before it is loaded: the
    estimator's scalars are numbers, its arrays of the allowed dtypes (the readers' check),
    and the service's part (also the ``service.*`` entries that older snapshots kept among
    the estimator's) is what ``SERVICE_SCALARS``, ``SERVICE_ARRAYS`` and ``PARTS`` declare."""
    service = state.get("service", {"arrays": {}, "scalars": {}})
    scalars, arrays = dict(service["scalars"]), dict(service["arrays"])
    for name, value in state["scalars"].items():
        if name.startswith(SERVICE):
            scalars[name] = value
        else:
            check(Number(), f"scalar {name!r}", value)
    arrays.update({k: v for k, v in state["arrays"].items() if k.startswith(SERVICE)})
    for name, value in scalars.items():
        if name not in SERVICE_SCALARS:
            raise SchemaError(f"unknown service scalar {name!r}")
        check(SERVICE_SCALARS[name], name, value)
    members = {}
    for name, array in arrays.items():
        if name.startswith(MEMBERS):  # a challenger's whole state: a snapshot blob
            check(NAME, f"{name} (a member's name)", name[len(MEMBERS) :])
            MEMBER_BLOB.check(name, array)
            members[name[len(MEMBERS) :]] = array
            continue
        if name not in SERVICE_ARRAYS:
            raise SchemaError(f"unknown service array {name!r}")
        SERVICE_ARRAYS[name].check(name, array)
    _check_members(arrays, members, spec)
    for prefix, (required, relation) in PARTS.items():
        part_scalars = {k[len(prefix) :]: v for k, v in scalars.items() if k.startswith(prefix)}
        part_arrays = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
        if not part_scalars and not part_arrays:
            continue
        missing = [k for k in required if k not in part_scalars and k not in part_arrays]
        if missing:
            raise SchemaError(f"the state has {prefix}* but not {prefix}{missing[0]}")
        if relation is not None:
            relation(part_scalars, part_arrays, spec)
