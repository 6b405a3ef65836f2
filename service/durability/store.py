"""Snapshots: the format of a snapshot blob and what a snapshot store does.

**Format.** A snapshot is a self-describing, non-pickle blob::

    b"LZTSNAP1\\n" | header length (8 bytes, little endian) | header (JSON, UTF-8) | payload

The header holds the model name, version, creation time, the model's create request, the
position of the last feedback-log record the state includes (``log_position``), the
estimator's ``kind``/``params``/``scalars``, the service's own scalars (``service_scalars``:
counters, progressive metrics, the model's creation time and incarnation;
``service.durability.capture``) and one descriptor per array (name, dtype, shape, offset
and length in the payload; ``"part": "service"`` for the service's arrays), plus the SHA-256 of the
payload. The payload is the raw
little-endian bytes of the arrays. ``decode`` checks the magic, the header and every
descriptor against ``service.durability.schema`` and the checksum before it builds
anything, then the service's part of the state.

**Stores** (``SnapshotStore``): a local directory (``service.durability.local_store``, the
embedded default) or Redis (``service.durability.redis_store``). A crash never leaves half a
snapshot, and the latest pointer names the newest version written.

**Deletion** is made durable before anything is removed: ``mark_deleting`` writes a
tombstone, then the snapshots and the log go, then ``clear_deleting``. A crash in between
leaves the tombstone, and the next start finishes the deletion before restoring anything.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from service.durability import schema
from service.durability.constraints import SchemaError, parse_json, shown

MAGIC = b"LZTSNAP1\n"
FORMAT_VERSION = 1
#: the bytes before a snapshot's header: the magic and the header's length
PREFIX = len(MAGIC) + 8
#: the bytes copied or hashed at a time by an ``encode`` given a rate
PIECE = 4 << 20


class SnapshotError(Exception):
    """A snapshot could not be read or written."""


class IncarnationGone(SnapshotError):
    """The snapshot of a model incarnation that no longer exists was refused."""


@dataclass(frozen=True)
class SnapshotMeta:
    model: str
    version: int
    created_at: float
    size_bytes: int


def encode(
    model: str,
    version: int,
    spec: dict,
    state: dict,
    created_at: float | None = None,
    log_position: int | str | None = None,
    extra: dict | None = None,
    rate: float | None = None,
) -> memoryview:
    """Serialise an estimator state (``get_state()``) with its model spec and the position of
    the last feedback-log record it includes (None: none); ``extra`` adds entries to the
    header (a delta's base and digest, ``service.scale.deltas``). With a ``rate`` (bytes/s),
    the copies and the hash go ``PIECE`` bytes at a time, paused to keep to it: a large
    model's encoding (a learner's full snapshot in the background) then takes a little of a
    core for seconds instead of a whole core at once (the same blob).

    The blob is built in one buffer, each array copied into it once, and hashed from it:
    numpy's copies and hashlib's SHA-256 of large buffers release the GIL, so encoding a
    large model (the worker's snapshots) leaves the request threads running."""
    arrays = []
    service = state.get("service", {"arrays": {}, "scalars": {}})
    for part, named in (("model", state["arrays"]), ("service", service["arrays"])):
        for name in sorted(named):
            array = np.asarray(named[name])
            arrays.append((part, name, array, array.dtype.newbyteorder("<")))
    descriptors, offset = [], 0
    for part, name, array, dtype in arrays:
        descriptor = {
            "name": name,
            "dtype": dtype.str,
            "shape": list(array.shape),
            "offset": offset,
            "nbytes": array.size * dtype.itemsize,
        }
        if part == "service":
            descriptor["part"] = part
        descriptors.append(descriptor)
        offset += array.size * dtype.itemsize
    header = {
        "format": FORMAT_VERSION,
        "model": model,
        "version": version,
        "created_at": time.time() if created_at is None else created_at,
        "spec": spec,
        "log_position": log_position,
        "kind": state["kind"],
        "params": state["params"],
        "scalars": state["scalars"],
        "service_scalars": service["scalars"],
        "arrays": descriptors,
        "payload_sha256": "0" * 64,  # (the same length as the digest written below)
        **(extra or {}),
    }
    head = json.dumps(header, sort_keys=True).encode()
    start = len(MAGIC) + 8 + len(head)
    blob = np.empty(start + offset, dtype=np.uint8)
    pace = _Pace(rate)
    for (_, _, array, dtype), d in zip(arrays, descriptors, strict=True):
        target = blob[start + d["offset"] : start + d["offset"] + d["nbytes"]]
        target = target.view(dtype).reshape(array.shape)
        if rate is None or not array.flags.c_contiguous or array.nbytes <= PIECE:
            np.copyto(target, array, casting="equiv")
            pace.done(array.nbytes)
            continue
        flat, into = array.reshape(-1), target.reshape(-1)
        step = max(1, PIECE // array.itemsize)
        for first in range(0, flat.size, step):
            np.copyto(into[first : first + step], flat[first : first + step], casting="equiv")
            pace.done(min(step, flat.size - first) * array.itemsize)
    if rate is None:
        digest = hashlib.sha256(blob[start:]).hexdigest()
    else:
        hashed = hashlib.sha256()
        for first in range(start, len(blob), PIECE):
            hashed.update(blob[first : first + PIECE])
            pace.done(min(PIECE, len(blob) - first))
        digest = hashed.hexdigest()
    header["payload_sha256"] = digest
    head = json.dumps(header, sort_keys=True).encode()
    if len(MAGIC) + 8 + len(head) != start:  # (json.dumps is deterministic)
        raise SnapshotError("snapshot header changed length")
    blob[: len(MAGIC)] = np.frombuffer(MAGIC, dtype=np.uint8)
    blob[len(MAGIC) : len(MAGIC) + 8] = np.frombuffer(struct.pack("<Q", len(head)), np.uint8)
    blob[len(MAGIC) + 8 : start] = np.frombuffer(head, dtype=np.uint8)
    return memoryview(blob)


def decode(blob: bytes | memoryview) -> tuple[dict, dict]:
    """(header, state) of a blob; SnapshotError if anything is off. The header, the array
    descriptors and the service's part of the state are checked against
    ``service.durability.schema`` before the state is returned (the estimator's part is
    checked against the model by its ``set_state``)."""
    header, checked, start = _parse(blob)
    payload = memoryview(blob)[start:]
    if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
        raise SnapshotError("snapshot checksum mismatch")
    try:
        schema.check_descriptors(header["arrays"], len(payload))
    except SchemaError as error:
        raise SnapshotError(f"bad snapshot arrays: {error}") from None
    arrays: dict[str, dict] = {"model": {}, "service": {}}
    for d in header["arrays"]:
        dtype = np.dtype(d["dtype"])
        array = np.frombuffer(
            payload, dtype=dtype, count=math.prod(d["shape"]), offset=d["offset"]
        ).reshape(d["shape"])
        arrays[d.get("part", "model")][d["name"]] = array.astype(dtype.newbyteorder("="), copy=True)
    state = {
        "kind": header["kind"],
        "params": header["params"],
        "arrays": arrays["model"],
        "scalars": header["scalars"],
        "service": {"arrays": arrays["service"], "scalars": header.get("service_scalars", {})},
    }
    try:
        schema.check_state(state, checked["spec"])
    except SchemaError as error:
        raise SnapshotError(f"bad snapshot state: {error}") from None
    return header, state


class _Pace:
    """Pauses that keep work to ``rate`` bytes/s (None: never pauses)."""

    def __init__(self, rate: float | None):
        self.rate, self.started, self.bytes = rate, time.monotonic(), 0

    def done(self, nbytes: int) -> None:
        """``nbytes`` more were processed: wait until the rate allows them."""
        if self.rate:
            self.bytes += nbytes
            time.sleep(max(0.0, self.started + self.bytes / self.rate - time.monotonic()))


class SnapshotStore(Protocol):
    """Where snapshots live. Every method may raise SnapshotError or OSError/Redis errors."""

    def save(
        self,
        model: str,
        version: int,
        blob: bytes | memoryview,
        retention: int,
        incarnation: str | None = None,
        create: bool = False,
        fence: str | None = None,
        rate: float | None = None,
    ) -> None: ...
    def load(self, model: str, version: int | None = None) -> bytes: ...
    def versions(self, model: str) -> list[SnapshotMeta]: ...
    def models(self) -> list[str]: ...
    def incarnation(self, model: str) -> str | None: ...
    def delete(self, model: str) -> None: ...
    def mark_deleting(self, model: str) -> None: ...
    def deleting(self) -> list[str]: ...
    def clear_deleting(self, model: str) -> None: ...
    def ping(self) -> None: ...
    def close(self) -> None: ...


def header_length(prefix: bytes | memoryview) -> int:
    """The length of the header that a blob's first ``PREFIX`` bytes announce;
    SnapshotError if they are not a snapshot's."""
    if len(prefix) < PREFIX or bytes(prefix[: len(MAGIC)]) != MAGIC:
        raise SnapshotError("not a lorentztron snapshot (bad magic)")
    (length,) = struct.unpack_from("<Q", prefix, len(MAGIC))
    if length > schema.MAX_HEADER_BYTES:
        raise SnapshotError(f"a snapshot header of {length} bytes")
    return length


def _parse(blob: bytes | memoryview) -> tuple[dict, dict, int]:
    """The header of a blob, its fields checked (``schema.SNAPSHOT``: their values by field,
    the spec as a ``CreateModel``), and where the payload starts; SnapshotError otherwise."""
    end = PREFIX + header_length(blob)
    if end > len(blob):
        raise SnapshotError("truncated snapshot header")
    try:
        header = parse_json(bytes(blob[PREFIX:end]), "the header")
    except SchemaError as error:
        raise SnapshotError(f"unreadable snapshot header: {error}") from None
    found = header.get("format") if isinstance(header, dict) else None
    if type(found) is not int or found != FORMAT_VERSION:
        raise SnapshotError(f"unsupported snapshot format {shown(found)}")
    try:
        checked = schema.SNAPSHOT.check("snapshot header", header)
    except SchemaError as error:
        raise SnapshotError(f"bad snapshot header: {error}") from None
    return header, checked, end


def read_header(blob: bytes | memoryview) -> dict:
    """The header of a blob (or of its first bytes, up to the payload), checked, without
    reading the payload."""
    return _parse(blob)[0]
