"""The file log (the embedded default; the record format and ``FeedbackLog``:
``service.durability.feedback_log``), under ``<log_dir>/<model>/``: segment files
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
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

from service.durability.feedback_log import LogUnavailable

log = logging.getLogger("lorentztron.log")

_FRAME = struct.Struct("<IIQ")  # payload length (record), crc32 of position + record, position


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

    #: the process that appends is the one that learns: no trace context to carry
    carries_traces = False

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
