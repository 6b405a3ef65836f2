"""The feedback log: every accepted feedback batch is appended here before it is learned and
before the request is acknowledged, so that a crash loses nothing that was acknowledged.

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

**File log** (the embedded default, ``<log_dir>/<model>/``): segment files
``<first position:016d>.log`` of frames ``length u32 | crc32 u32 | position u64 | record``.
Positions are consecutive integers from 1. Appends are written under the model's writer
lock and, with the default ``fsync="batch"``, made durable by ``sync`` before the request is
acknowledged; ``sync`` runs outside that lock, so the requests waiting together share one
fsync (group commit: ``service.http.grouping`` syncs once per group of requests). The event loop
appends with ``try_append``, which never waits for a lock or a new segment. A frame cut
short by a crash (or with a
bad checksum) ends the log: it was never acknowledged, and it is cut off when the log is
opened. ``trim(position)`` starts a new segment and deletes the segments wholly at or before
``position`` (called after a snapshot that includes it), or moves them to an archive
directory when one is configured (``LORENTZTRON_LOG_ARCHIVE_DIR``: the whole labelled
history, e.g. for offline retraining).

**Redis log** (when ``LORENTZTRON_REDIS_URL`` is set): one stream per model,
``{prefix}:model:{<name>}:log``, one entry per record (field ``r``), appended with ``XADD``;
positions are stream ids (``"<ms>-<seq>"``), whose time part also dates the entry. ``trim``
is ``XTRIM MINID``: entries newer than the latest snapshot are never trimmed. Durability is
Redis's: run it with ``appendonly yes`` and ``appendfsync always`` for the promise to hold
across a Redis crash (``everysec`` may lose the last second). With replicas (a Redis
Cluster's, or one server's), ``wait_replicas`` = n makes every append wait (``WAIT``) until n
replicas have it before it is acknowledged: a replica promoted after its master is lost
then holds every acknowledged record (an append that n replicas did not confirm in time is
refused, maybe written), and a learner learns a record only once n replicas have it
(``replicated``), so no model holds a record that a promotion took out of its log. A
learner's trim is fenced by its lease (``service.scale.leases``).

A failed append raises :class:`LogUnavailable`; the caller refuses the feedback (503) and
learns nothing. When the outcome of a failed append is unknown (a Redis reply lost to a
timeout), ``LiveModel`` reads the log after its position before its next append and learns
what it finds, so the live model and the log never diverge.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np

from core.features import CSRBatch
from service.ops import failpoints
from service.scale.keys import RedisKeys
from service.scale.leases import LeaseLost
from service.scale.redis_client import refresh_topology

log = logging.getLogger("lorentztron.log")

RECORD_MAGIC = b"LZTB"
KEYED_MAGIC = b"LZTK"
_KEY = struct.Struct("<H")
_RECORD = struct.Struct("<4sIIBd")
_FRAME = struct.Struct("<IIQ")  # payload length (record), crc32 of position + record, position
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


def position_time(position: Position) -> float | None:
    """Append time of a Redis position (the stream id's milliseconds); None for the file log."""
    if isinstance(position, str):
        return int(position.split("-")[0]) / 1000.0
    return None


class _Segmented:
    """The open state of one model's file log: its segments and the next position."""

    def __init__(self, folder: Path):
        self.folder = folder
        #: appends (a request's thread) and trims (the worker's) of one model take turns
        self.lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)
        self.next_position = 1
        self.handle = None
        segments = self.segments()
        if segments:
            # the last segment may end with a torn frame: keep its valid prefix only
            last = segments[-1]
            good, end = _scan(last)
            if end != last.stat().st_size:
                log.warning(
                    "log %s: cutting off %d bytes after the last whole record",
                    last,
                    last.stat().st_size - end,
                )
                with open(last, "r+b") as handle:
                    handle.truncate(end)
                    handle.flush()
                    os.fsync(handle.fileno())
            self.next_position = (good[-1] + 1) if good else int(last.stem)
            self.handle = open(last, "ab")
        #: the last position known to be on disk (group commit: ``FileLog.sync``)
        self.synced = self.next_position - 1
        self.sync_lock = threading.Lock()

    def segments(self) -> list[Path]:
        return sorted(self.folder.glob("*.log"))

    def open_segment(self) -> None:
        if self.handle is not None:
            # everything written so far goes to disk with the segment it is in
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.synced = max(self.synced, self.next_position - 1)
            self.handle.close()
        path = self.folder / f"{self.next_position:016d}.log"
        self.handle = open(path, "ab")
        _fsync_dir(self.folder)


def _scan(path: Path) -> tuple[list[int], int]:
    """Positions of the whole, valid frames of a segment, and the byte offset after them."""
    positions, offset = [], 0
    data = path.read_bytes()
    while offset + _FRAME.size <= len(data):
        length, crc, position = _FRAME.unpack_from(data, offset)
        end = offset + _FRAME.size + length
        if end > len(data):
            break
        body = memoryview(data)[offset + 8 : end]
        if zlib.crc32(body) != crc:
            break
        positions.append(position)
        offset = end
    return positions, offset


def _frames(path: Path) -> Iterator[tuple[int, memoryview]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:  # trimmed meanwhile: its records were all snapshotted
        return
    offset = 0
    while offset + _FRAME.size <= len(data):
        length, crc, position = _FRAME.unpack_from(data, offset)
        end = offset + _FRAME.size + length
        if end > len(data) or zlib.crc32(memoryview(data)[offset + 8 : end]) != crc:
            return
        yield position, memoryview(data)[offset + _FRAME.size : end]
        offset = end


def _missing_ok(function, path, excinfo) -> None:
    """``shutil.rmtree``'s error hook: what is already gone is deleted."""
    if not issubclass(excinfo[0], FileNotFoundError):
        raise excinfo[1]


def _fsync_dir(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class FileLog:
    """Append-only segment files per model (module docstring). ``fsync``: ``"batch"``
    (fsync every append, the default: acknowledged means on disk) or ``"none"`` (the OS
    writes back; survives a process crash, not a power loss)."""

    def __init__(
        self,
        directory: str | os.PathLike,
        fsync: str = "batch",
        archive: str | os.PathLike | None = None,
    ):
        if fsync not in ("batch", "none"):
            raise ValueError(f"fsync must be 'batch' or 'none', got {fsync!r}")
        self.directory = Path(directory)
        self.fsync = fsync
        self.syncs = fsync == "batch"
        #: where trimmed segments go instead of being deleted (the full labelled history,
        #: e.g. for offline retraining); None: deleted
        self.archive = None if archive is None else Path(archive)
        self._open: dict[str, _Segmented] = {}
        self._lock = threading.Lock()

    def _state(self, model: str) -> _Segmented:
        with self._lock:
            state = self._open.get(model)
            if state is None:
                state = self._open[model] = _Segmented(self.directory / model)
            return state

    def append_many(
        self, model: str, records: list[bytes], incarnation: str | None = None
    ) -> list[int]:
        """Append records in order, with one write: all of them or none (a failed write is
        truncated away). ``incarnation`` is not checked: one process owns a file log, and
        its lifecycle keeps writers out of a deleted model."""
        try:
            state = self._state(model)
        except OSError as error:
            raise LogUnavailable(f"the feedback log could not be written: {error}") from None
        return self._append_locked(state, records, blocking=True)

    def try_append(self, model: str, records: list[bytes]) -> list[int] | None:
        """``append_many`` if it need not wait (the event loop appends so): None, nothing
        written, if another thread holds the model's log (a trim, a sync's start) or a new
        segment must be opened first (a file created and fsync'd)."""
        state = self._open.get(model)
        if state is None or state.handle is None:
            return None
        return self._append_locked(state, records, blocking=False)

    def _append_locked(
        self, state: _Segmented, records: list[bytes], blocking: bool
    ) -> list[int] | None:
        if not state.lock.acquire(blocking):
            return None
        try:
            return self._append(state, records)
        except OSError as error:
            raise LogUnavailable(f"the feedback log could not be written: {error}") from None
        finally:
            state.lock.release()

    def _append(self, state: _Segmented, records: list[bytes]) -> list[int]:
        if state.handle is None:
            state.open_segment()
        first = state.next_position
        frames = []
        for position, record in enumerate(records, start=first):
            head = struct.pack("<Q", position)
            crc = zlib.crc32(record, zlib.crc32(head))  # of position + record, as read back
            frames += (struct.pack("<II", len(record), crc), head, record)
        handle = state.handle
        start = handle.tell()
        try:
            handle.write(b"".join(frames))
            handle.flush()
        except OSError:
            # leave no partial frame behind: the next append must follow a whole record
            handle.truncate(start)
            raise
        state.next_position = first + len(records)
        return list(range(first, first + len(records)))

    def sync(self, model: str, position: int) -> None:
        """Make every record up to ``position`` durable (``fsync="batch"``): one fsync covers
        every record written before it, so requests that wait here together share one
        (group commit). Called after ``append``, outside the model's writer lock, before
        the request is acknowledged. ``LogUnavailable`` if the fsync fails."""
        if not self.syncs:
            return
        state = self._state(model)
        if state.synced >= position:
            return
        with state.sync_lock:
            if state.synced >= position:  # another request's fsync covered it
                return
            try:
                with state.lock:  # a duplicate descriptor survives a segment rotation
                    target = state.next_position - 1
                    descriptor = os.dup(state.handle.fileno())
                try:
                    os.fsync(descriptor)
                finally:
                    os.close(descriptor)
            except OSError as error:
                raise LogUnavailable(f"the feedback log could not be synced: {error}") from None
            state.synced = max(state.synced, target)

    def read_after(self, model: str, position: int | None) -> Iterator[tuple[int, bytes]]:
        after = position or 0
        state = self._state(model)
        with state.lock:
            if state.handle is not None:
                state.handle.flush()
            segments = state.segments()
        for i, segment in enumerate(segments):
            following = segments[i + 1] if i + 1 < len(segments) else None
            if following is not None and int(following.stem) <= after + 1:
                continue  # every record of this segment is at or before `after`
            for at, record in _frames(segment):
                if at > after:
                    yield at, bytes(record)

    def trim(self, model: str, position: int | None, fence: str | None = None) -> None:
        """Drop the segments whose records are all at or before ``position`` (``fence`` is
        not checked: one process owns a file log)."""
        if position is None:
            return
        state = self._state(model)
        with state.lock:
            handle = state.handle
            if handle is not None and state.next_position > int(Path(handle.name).stem):
                state.open_segment()  # close off the current segment: it can go when covered
            segments = state.segments()
            for segment, following in zip(segments, segments[1:], strict=False):
                if int(following.stem) <= position + 1:
                    if self.archive is None:
                        segment.unlink(missing_ok=True)
                    else:
                        folder = self.archive / model
                        folder.mkdir(parents=True, exist_ok=True)
                        segment.replace(folder / segment.name)

    def delete(self, model: str) -> None:
        with self._lock:
            state = self._open.pop(model, None)
        if state is not None and state.handle is not None:
            with state.lock:
                state.handle.close()
        shutil.rmtree(self.directory / model, onerror=_missing_ok)

    def length(self, model: str) -> int:
        """Records kept (all segments)."""
        return sum(len(_scan(s)[0]) for s in self._state(model).segments())

    def ping(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if not os.access(self.directory, os.W_OK):
            raise LogUnavailable(f"{self.directory} is not writable")

    def close(self) -> None:
        for state in self._open.values():
            if state.handle is not None:
                state.handle.close()
        self._open.clear()


#: KEYS: the model's incarnation key, its stream, its deleted incarnations; ARGV: the
#: incarnation, then the records (service.scale.keys: a missing key no deletion explains is set)
_CURRENT = """
local current = redis.call('GET', KEYS[1])
if current == false then
  if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return 'GONE' end
  redis.call('SET', KEYS[1], ARGV[1])
elseif current ~= ARGV[1] then
  return 'GONE'
end
"""
_APPEND = (
    _CURRENT
    + """
local ids = {}
for i = 2, #ARGV do ids[#ids + 1] = redis.call('XADD', KEYS[2], '*', 'r', ARGV[i]) end
return ids
"""
)
#: the same checks, KEYS[4] the key's answer; ARGV: the incarnation, the record, the answer,
#: its lifetime in ms. Appends unless the key has an answer: {"NEW", id} or {"DONE", answer}
_APPEND_ONCE = (
    _CURRENT
    + """
local stored = redis.call('GET', KEYS[4])
if stored then return {'DONE', stored} end
local id = redis.call('XADD', KEYS[2], '*', 'r', ARGV[2])
redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[4])
return {'NEW', id}
"""
)

#: KEYS: the stream, the model's lease; ARGV: the lease value ('' unfenced), the position
_TRIM = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return 'FENCED' end
redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2])
return 'OK'
"""


class RedisLog:
    """A Redis stream per model (module docstring), on one server or a Redis Cluster.
    Short timeouts: an outage fails the request fast (503) instead of holding the model's
    writer."""

    def __init__(
        self,
        client,
        prefix: str = "lorentztron",
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
    ):
        self.client = client
        self.keys = RedisKeys(prefix)
        #: an entry is as durable as Redis makes it when XADD answers
        self.syncs = False
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = max(1, int(wait_timeout * 1000))
        self._append_script = client.register_script(_APPEND)
        self._append_once_script = client.register_script(_APPEND_ONCE)
        self._trim_script = client.register_script(_TRIM)

    def key(self, model: str) -> str:
        return self.keys.log(model)

    def append_many(
        self, model: str, records: list[bytes], incarnation: str | None = None
    ) -> list[str]:
        """Append records in order in one round trip, which Redis makes durable together
        (``appendfsync always`` fsyncs once per event-loop turn). With an ``incarnation``,
        only while it is the model's current one (a script: check and ``XADD``s are one
        atomic step; ``service.scale.keys``); else ModelGone and nothing is written. With
        ``wait_replicas``, acknowledged once that many replicas have them."""
        try:
            if incarnation is not None:
                keys = [self.keys.incarnation(model), self.key(model), self.keys.deleted(model)]
                if self.wait_replicas:
                    ids = self._append_waiting(keys, [incarnation, *records])
                else:
                    ids = self._append_script(keys=keys, args=[incarnation, *records])
                failpoints.reach("redis_log.appended")
                if ids == b"GONE":
                    raise ModelGone(f"model {model!r} was deleted (or replaced) elsewhere")
                return [entry_id.decode() for entry_id in ids]
            if len(records) == 1 and not self.wait_replicas:
                return [self.client.xadd(self.key(model), {b"r": records[0]}).decode()]
            pipe = self._node(self.key(model)).pipeline(transaction=False)
            for record in records:
                pipe.xadd(self.key(model), {b"r": record})
            if self.wait_replicas:
                pipe.wait(self.wait_replicas, self.wait_timeout_ms)
            replies = pipe.execute()
            if self.wait_replicas:
                self._check_replicas(replies.pop())
            return [entry_id.decode() for entry_id in replies]
        except ModelGone:
            raise
        except Exception as error:  # connection, timeout, out of memory, read-only replica
            refresh_topology(self.client)
            # some or all of them may have landed (a lost reply, a partial pipeline)
            raise LogUnavailable(
                f"the feedback log could not be written: {error}", maybe_written=True
            ) from None

    def try_append(self, model: str, records: list[bytes]) -> None:
        """None: an append is a round trip to Redis, never done without waiting."""
        return None

    def append_once(
        self, model: str, record: bytes, incarnation: str, key: str, answer: bytes, ttl: float
    ) -> tuple[str | None, bytes | None]:
        """Append a keyed record and keep its ``answer`` for ``ttl`` seconds, in one atomic
        step, unless the key has an answer already: (position, None) or (None, the stored
        answer). For the processes that only log (``service.durability.idempotency``)."""
        keys = [
            self.keys.incarnation(model),
            self.key(model),
            self.keys.deleted(model),
            self.keys.idempotency(model, incarnation, key),
        ]
        args = [incarnation, record, answer, max(1, int(ttl * 1000))]
        try:
            if self.wait_replicas:
                pipe = self._node(keys[1]).pipeline(transaction=False)
                self._append_once_script(keys=keys, args=args, client=pipe)
                pipe.wait(self.wait_replicas, self.wait_timeout_ms)
                reply, replicas = pipe.execute()
                if reply != b"GONE":
                    self._check_replicas(replicas)
            else:
                reply = self._append_once_script(keys=keys, args=args)
            failpoints.reach("redis_log.appended")
        except LogUnavailable:
            raise
        except Exception as error:
            raise LogUnavailable(
                f"the feedback log could not be written: {error}", maybe_written=True
            ) from None
        if reply == b"GONE":
            raise ModelGone(f"model {model!r} was deleted (or replaced) elsewhere")
        status, value = reply
        return (value.decode(), None) if status == b"NEW" else (None, value)

    def answered(self, model: str, incarnation: str, key: str) -> bytes | None:
        """The answer kept for a key by ``append_once`` (None: none)."""
        try:
            return self.client.get(self.keys.idempotency(model, incarnation, key))
        except Exception as error:
            raise LogUnavailable(f"the feedback log could not be read: {error}") from None

    def _append_waiting(self, keys: list[str], args: list) -> object:
        """The append script then ``WAIT``, on one connection to the stream's master (WAIT
        counts the replicas that have this connection's writes)."""
        pipe = self._node(keys[1]).pipeline(transaction=False)
        self._append_script(keys=keys, args=args, client=pipe)
        pipe.wait(self.wait_replicas, self.wait_timeout_ms)
        ids, replicas = pipe.execute()
        if ids != b"GONE":
            self._check_replicas(replicas)
        return ids

    def _check_replicas(self, replicas: int) -> None:
        if replicas < self.wait_replicas:
            raise LogUnavailable(
                f"{replicas} of {self.wait_replicas} replicas confirmed the append in time",
                maybe_written=True,
            )

    def _node(self, key: str):
        """The client of the server that holds ``key`` (a cluster's master for its slot)."""
        get_node = getattr(self.client, "get_node_from_key", None)
        if get_node is None:
            return self.client
        return self.client.get_redis_connection(get_node(key))

    def read_after(
        self, model: str, position: str | None, chunk: int = 1000
    ) -> Iterator[tuple[str, bytes]]:
        start = "-" if position is None else f"({position}"
        while True:
            try:
                entries = self.client.xrange(self.key(model), min=start, count=chunk)
            except Exception as error:
                raise LogUnavailable(f"the feedback log could not be read: {error}") from None
            for entry_id, fields in entries:
                yield entry_id.decode(), fields[b"r"]
            if len(entries) < chunk:
                return
            start = f"({entries[-1][0].decode()}"

    def sync(self, model: str, position: str) -> None:
        """Nothing to do: an entry is as durable as Redis makes it when XADD answers."""

    def replicated(self, model: str) -> bool:
        """Whether the replicas have every record the model's log held before this call
        (True at once without ``wait_replicas``). Replication keeps the master's order: a
        write in the model's slot, then ``WAIT`` on that connection, for ``wait_replicas``
        of the master's connected replicas (or all of them if fewer: a master without a
        replica has none to promote in its place). A learner learns only such records: a
        record its master loses with a replica's promotion (an append not acknowledged, its
        ``WAIT`` unanswered) would otherwise be in a model but no longer in its log."""
        if not self.wait_replicas:
            return True
        key = self.keys.barrier(model)
        node = self._node(key)
        connected = int(node.info("replication").get("connected_slaves", 0))
        wanted = min(self.wait_replicas, connected)
        if wanted == 0:
            return True
        pipe = node.pipeline(transaction=False)
        pipe.set(key, b"1", px=60_000)
        pipe.wait(wanted, self.wait_timeout_ms)
        _, replicas = pipe.execute()
        return replicas >= wanted

    def trim(self, model: str, position: str | None, fence: str | None = None) -> None:
        """Drop the entries before ``position`` (MINID keeps ``position`` itself and every
        newer one); with a ``fence`` (a lease value), only while that lease holds."""
        if position is None:
            return
        reply = self._trim_script(
            keys=[self.key(model), self.keys.lease(model)], args=[fence or "", position]
        )
        if reply in (b"FENCED", "FENCED"):
            raise LeaseLost(f"the lease on model {model!r} was lost: trim refused")

    def delete(self, model: str) -> None:
        self.client.delete(self.key(model))

    def length(self, model: str) -> int:
        return int(self.client.xlen(self.key(model)))

    def ping(self) -> None:
        self.client.ping()

    def close(self) -> None:
        pass
