"""The feedback log: every accepted feedback batch is appended here before it is learned and
before the request is acknowledged, so that a crash loses nothing that was acknowledged.
This module holds the record format, the errors and what a log does (``FeedbackLog``);
the logs are ``service.durability.file_log`` (segment files, the embedded default) and
``service.durability.redis_log`` (a Redis stream per model).

One **record** is one learned batch (one request): the validated rows in CSR form and the
targets (class indices or regression values), exactly what ``LiveModel.learn_batch`` learns.
Replaying the records after a snapshot's position through ``learn_batch`` rebuilds, array for
array, the model of an uninterrupted run: the updates are deterministic and a batch is learned
the same way live and in replay.

Record encoding (little endian), shared by both logs::

    b"LZTB" | n_rows u32 | nnz u32 | target kind u8 (0: int64 class index, 1: float64 value)
    | time f64 (seconds since the epoch, when appended)
    | indptr int64[n_rows + 1] | indices int64[nnz] | values float64[nnz] | targets [n_rows]

A record of a request that carried an ``Idempotency-Key``
(``service.durability.idempotency``) starts with ``b"LZTK"`` instead and ends with
``key length u16 | key (ASCII) | fingerprint (16 bytes) | flags u8`` (bit 0: the answer
lists per-example results): replaying it rebuilds the request's answer.

Positions are opaque and ordered: consecutive integers from 1 in the file log, stream ids
(``"<ms>-<seq>"``) in Redis.

A failed append raises :class:`LogUnavailable`; the caller refuses the feedback (503) and
learns nothing. When the outcome of a failed append is unknown (a Redis reply lost to a
timeout), ``LiveModel`` reads the log after its position before its next append and learns
what it finds, so the live model and the log never diverge.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

import numpy as np

from core.features import CSRBatch

RECORD_MAGIC = b"LZTB"
KEYED_MAGIC = b"LZTK"
_KEY = struct.Struct("<H")
_RECORD = struct.Struct("<4sIIBd")
_TARGET_KINDS = {0: np.dtype("<i8"), 1: np.dtype("<f8")}

Position = Any  # int (file log) or str (Redis stream id); None = before the first record


class LogUnavailable(Exception):
    """The log could not be written or read; nothing was acknowledged. ``maybe_written``:
    a failed append whose record may have landed all the same (a Redis reply lost)."""

    def __init__(self, message: str, maybe_written: bool = False):
        super().__init__(message)
        self.maybe_written = maybe_written


class LogCorrupt(Exception):
    """A record could not be decoded."""


class ModelGone(Exception):
    """The log refused an append for an incarnation of the model that no longer exists (it
    was deleted, or deleted and created again, by another process); nothing was written."""


class RecordKey(NamedTuple):
    """The idempotency key a record carries (module docstring)."""

    key: str
    fingerprint: str  # 32 hexadecimal digits
    with_results: bool


def encode_record(
    batch: CSRBatch, targets: np.ndarray, at: float | None = None, key: RecordKey | None = None
) -> bytes:
    """The bytes of one record (module docstring), with ``key`` when the request had one."""
    kind = 1 if targets.dtype.kind == "f" else 0
    head = _RECORD.pack(
        RECORD_MAGIC if key is None else KEYED_MAGIC,
        batch.n_rows,
        batch.indices.shape[0],
        kind,
        time.time() if at is None else at,
    )
    parts = [
        head,
        batch.indptr.astype("<i8", copy=False).tobytes(),
        batch.indices.astype("<i8", copy=False).tobytes(),
        batch.values.astype("<f8", copy=False).tobytes(),
        targets.astype(_TARGET_KINDS[kind], copy=False).tobytes(),
    ]
    if key is not None:
        name = key.key.encode("ascii")
        parts += (_KEY.pack(len(name)), name, bytes.fromhex(key.fingerprint))
        parts.append(bytes([1 if key.with_results else 0]))
    return b"".join(parts)


def decode_record(data: bytes | memoryview) -> tuple[CSRBatch, np.ndarray, float]:
    """(batch, targets, append time) of a record; LogCorrupt if it does not parse."""
    return decode_keyed(data)[:3]


def decode_keyed(
    data: bytes | memoryview,
) -> tuple[CSRBatch, np.ndarray, float, RecordKey | None]:
    """(batch, targets, append time, idempotency key or None) of a record."""
    if len(data) < _RECORD.size:
        raise LogCorrupt("record shorter than its header")
    magic, n_rows, nnz, kind, at = _RECORD.unpack_from(data, 0)
    if magic not in (RECORD_MAGIC, KEYED_MAGIC) or kind not in _TARGET_KINDS:
        raise LogCorrupt("not a feedback record")
    sizes = (8 * (n_rows + 1), 8 * nnz, 8 * nnz, 8 * n_rows)
    end = _RECORD.size + sum(sizes)
    key = None
    if magic == KEYED_MAGIC:
        key, trailer = _record_key(data, end)
        end += trailer
    if end != len(data):
        raise LogCorrupt("record length does not match its header")
    arrays, offset = [], _RECORD.size
    for dtype, size in zip(("<i8", "<i8", "<f8", _TARGET_KINDS[kind]), sizes, strict=True):
        arrays.append(np.frombuffer(data, dtype=dtype, count=size // 8, offset=offset).copy())
        offset += size
    indptr, indices, values, targets = (a.astype(a.dtype.newbyteorder("=")) for a in arrays)
    return CSRBatch(indptr, indices, values), targets, at, key


def _record_key(data, offset: int) -> tuple[RecordKey, int]:
    """The key trailer at ``offset`` and its length in bytes."""
    if len(data) < offset + _KEY.size:
        raise LogCorrupt("record shorter than its key")
    (length,) = _KEY.unpack_from(data, offset)
    start = offset + _KEY.size
    if len(data) < start + length + 17:
        raise LogCorrupt("record shorter than its key")
    name = bytes(data[start : start + length]).decode("ascii", errors="replace")
    fingerprint = bytes(data[start + length : start + length + 16]).hex()
    flags = data[start + length + 16]
    return RecordKey(name, fingerprint, bool(flags & 1)), _KEY.size + length + 17


class FeedbackLog(Protocol):
    """Where accepted feedback goes before it is learned. Positions are opaque and ordered."""

    #: whether ``sync`` does anything (False: an append is as durable as it will be)
    syncs: bool
    #: whether ``append_many`` takes ``traces`` (a W3C traceparent per record, kept beside
    #: it for the process that learns it: ``service.ops.tracing``)
    carries_traces: bool

    def append_many(
        self, model: str, records: list[bytes], incarnation: str | None = None
    ) -> list[Position]: ...
    def try_append(self, model: str, records: list[bytes]) -> list[Position] | None: ...
    def sync(self, model: str, position: Position) -> None: ...
    def read_after(self, model: str, position: Position) -> Iterator[tuple[Position, bytes]]: ...
    def trim(self, model: str, position: Position, fence: str | None = None) -> None: ...
    def delete(self, model: str) -> None: ...
    def length(self, model: str) -> int: ...
    def ping(self) -> None: ...
    def close(self) -> None: ...


def after(position: Position, reference: Position) -> bool:
    """Whether log ``position`` comes after ``reference`` (None: before everything): file
    log record numbers, or Redis stream ids compared as (milliseconds, sequence)."""
    if reference is None:
        return True
    if isinstance(position, str):
        return tuple(map(int, position.split("-"))) > tuple(map(int, reference.split("-")))
    return position > reference


def position_time(position: Position) -> float | None:
    """Append time of a Redis position (the stream id's milliseconds); None for the file log."""
    if isinstance(position, str):
        return int(position.split("-")[0]) / 1000.0
    return None
