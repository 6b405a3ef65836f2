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
little-endian bytes of the arrays. ``decode`` checks the magic, the checksum and every
descriptor before building anything.

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
import struct
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

MAGIC = b"LZTSNAP1\n"
FORMAT_VERSION = 1


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
) -> memoryview:
    """Serialise an estimator state (``get_state()``) with its model spec and the position of
    the last feedback-log record it includes (None: none); ``extra`` adds entries to the
    header (a delta's base and digest, ``service.scale.deltas``).

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
    for (_, _, array, dtype), d in zip(arrays, descriptors, strict=True):
        target = blob[start + d["offset"] : start + d["offset"] + d["nbytes"]]
        np.copyto(target.view(dtype).reshape(array.shape), array, casting="equiv")
    digest = hashlib.sha256(blob[start:]).hexdigest()
    header["payload_sha256"] = digest
    head = json.dumps(header, sort_keys=True).encode()
    if len(MAGIC) + 8 + len(head) != start:  # (json.dumps is deterministic)
        raise SnapshotError("snapshot header changed length")
    blob[: len(MAGIC)] = np.frombuffer(MAGIC, dtype=np.uint8)
    blob[len(MAGIC) : len(MAGIC) + 8] = np.frombuffer(struct.pack("<Q", len(head)), np.uint8)
    blob[len(MAGIC) + 8 : start] = np.frombuffer(head, dtype=np.uint8)
    return memoryview(blob)


def decode(blob: bytes | memoryview) -> tuple[dict, dict]:
    """(header, state) of a blob; SnapshotError if anything is off."""
    if bytes(blob[: len(MAGIC)]) != MAGIC or len(blob) < len(MAGIC) + 8:
        raise SnapshotError("not a lorentztron snapshot (bad magic)")
    (head_length,) = struct.unpack_from("<Q", blob, len(MAGIC))
    start = len(MAGIC) + 8
    if start + head_length > len(blob):
        raise SnapshotError("truncated snapshot header")
    try:
        header = json.loads(bytes(blob[start : start + head_length]))
    except ValueError as error:
        raise SnapshotError(f"unreadable snapshot header: {error}") from None
    if header.get("format") != FORMAT_VERSION:
        raise SnapshotError(f"unsupported snapshot format {header.get('format')!r}")
    payload = memoryview(blob)[start + head_length :]
    if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
        raise SnapshotError("snapshot checksum mismatch")
    arrays: dict[str, dict] = {"model": {}, "service": {}}
    for d in header["arrays"]:
        dtype = np.dtype(d["dtype"])
        if dtype.kind not in "fiub" or d["offset"] + d["nbytes"] > len(payload):
            raise SnapshotError(f"bad array descriptor {d['name']!r}")
        array = np.frombuffer(
            payload, dtype=dtype, count=int(np.prod(d["shape"], dtype=int)), offset=d["offset"]
        ).reshape(d["shape"])
        arrays[d.get("part", "model")][d["name"]] = array.astype(dtype.newbyteorder("="), copy=True)
    state = {
        "kind": header["kind"],
        "params": header["params"],
        "arrays": arrays["model"],
        "scalars": header["scalars"],
        "service": {"arrays": arrays["service"], "scalars": header.get("service_scalars", {})},
    }
    return header, state


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


def _header(blob: bytes | memoryview) -> tuple[dict, int]:
    (head_length,) = struct.unpack_from("<Q", blob, len(MAGIC))
    start = len(MAGIC) + 8
    return json.loads(bytes(blob[start : start + head_length])), start + head_length


def read_header(blob: bytes | memoryview) -> dict:
    """The header of a blob without checking or copying the payload."""
    if bytes(blob[: len(MAGIC)]) != MAGIC:
        raise SnapshotError("not a lorentztron snapshot (bad magic)")
    return _header(blob)[0]
