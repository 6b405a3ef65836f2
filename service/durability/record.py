"""A model's durability record: where its story stands against the log and the snapshots.

One record per model name, whatever its members: the version (every learned batch, refit
and restore moves it on), the log position of the last record the model includes, what it
learned since its last snapshot (records and their bytes: the worker snapshots early when
the log grows), the last snapshot written, the publication chain and the replicas'
freshness marks, the model's incarnation and a learner's lease (fence).

The record changes only through its methods. Learning changes it under the model's writer
lock; a capture reads it under the read lock; the snapshot writer accounts for a write
after releasing the model's lock, so the counters it decrements are guarded by a lock of
the record's own.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

#: a log position: an int (file log), an entry id (Redis stream), None (nothing yet)
Position = Any


class Marks(NamedTuple):
    """What a capture took from the record: the version, the log position it includes,
    the records (and their bytes) learned since the previous snapshot, and the first log
    record learned since the last publication (None: none)."""

    version: int
    log_position: Position
    records: int
    log_bytes: int
    first_new: Position


class DurabilityRecord:
    """The durability record of one model (module docstring)."""

    def __init__(self, incarnation: str | None = None, fence: str | None = None):
        #: this creation of the name (a model deleted and created again is another one)
        self.incarnation = incarnation or uuid.uuid4().hex
        #: a learner's lease on the model (``service.scale.leases``), checked by every
        #: write of its snapshots and log position; None outside the learner role
        self.fence = fence
        self._version = 0
        self._log_position: Position = None
        self._records = 0
        self._log_bytes = 0
        self._last_snapshot_version: int | None = None
        self._last_snapshot_at: float | None = None
        #: a learner's ``deltas.Chain`` or a replica's ``deltas.RowDigest`` (None: none)
        self._publication: Any = None
        self._unpublished_from: Position = None
        self._published_version: int | None = None
        #: records logged while learning is paused, and the position of the last of them
        self._backlog = 0
        self._backlog_end: Position = None
        self._lock = threading.Lock()

    # -- reading -------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self._version

    @property
    def log_position(self) -> Position:
        """The log position of the last record the model includes (None: none yet)."""
        return self._log_position

    @property
    def records_since_snapshot(self) -> int:
        return self._records

    @property
    def log_bytes_since_snapshot(self) -> int:
        return self._log_bytes

    @property
    def last_snapshot_version(self) -> int | None:
        return self._last_snapshot_version

    @property
    def last_snapshot_at(self) -> float | None:
        return self._last_snapshot_at

    @property
    def publication(self) -> Any:
        return self._publication

    @property
    def published_version(self) -> int | None:
        return self._published_version

    @property
    def backlog(self) -> int:
        """Records logged while learning was paused, not learned (nor discarded) yet."""
        return self._backlog

    @property
    def read_position(self) -> Position:
        """Where reading the log goes on: after the backlog while there is one, else after
        the last record learned."""
        return self._backlog_end if self._backlog else self._log_position

    @property
    def unsaved(self) -> bool:
        """Whether the model changed since its last snapshot."""
        return self._version != self._last_snapshot_version

    # -- learning (writer lock held) -----------------------------------------------------
    def advance(self) -> int:
        """The next version (a batch learned, even in part; a refit; a restore)."""
        self._version += 1
        return self._version

    def set_version(self, version: int) -> None:
        """Start from ``version`` (an imported model's), or go back to it (a change that
        could not be saved is undone)."""
        self._version = version

    def learned(self, first: Position, last: Position, records: int, nbytes: int) -> None:
        """Log records ``first``..``last`` (``records`` of them, ``nbytes`` bytes) are in the
        model now (appended and learned live, or replayed)."""
        with self._lock:
            if self._unpublished_from is None:
                self._unpublished_from = first
            self._log_position = last
            self._records += records
            self._log_bytes += nbytes

    def backlogged(self, last: Position, records: int) -> None:
        """``records`` more records, the last at ``last``, are logged while learning is
        paused (not learned: the log position stays before them)."""
        with self._lock:
            self._backlog += records
            self._backlog_end = last

    def caught_up(self) -> None:
        """The backlog is learned (each record accounted by ``learned``) or discarded."""
        with self._lock:
            self._backlog, self._backlog_end = 0, None

    def discard_backlog(self) -> Callable[[], None]:
        """Skip the backlog: the model now includes the log up to its last record, without
        having learned it (written by the next snapshot, which trims it from the log).
        Returns what undoes it (the change that discards could not be saved)."""
        with self._lock:
            before = (self._log_position, self._backlog, self._backlog_end, self._unpublished_from)
            if self._backlog:
                if self._unpublished_from is None:
                    self._unpublished_from = self._backlog_end
                self._log_position = self._backlog_end
            self._backlog, self._backlog_end = 0, None

        def undo() -> None:
            with self._lock:
                (
                    self._log_position,
                    self._backlog,
                    self._backlog_end,
                    self._unpublished_from,
                ) = before

        return undo

    # -- snapshots and publications ------------------------------------------------------
    def capture(self) -> Marks:
        """The marks of a capture (read lock held): the first record learned since the last
        publication is handed to this capture (``unwritten`` gives it back on failure)."""
        with self._lock:
            first_new, self._unpublished_from = self._unpublished_from, None
            return Marks(
                self._version, self._log_position, self._records, self._log_bytes, first_new
            )

    def written(self, marks: Marks, at: float) -> None:
        """The capture ``marks`` is stored: what it includes is no longer "since the last
        snapshot"."""
        with self._lock:
            self._published_version = max(self._published_version or 0, marks.version)
            self._records -= marks.records
            self._log_bytes -= marks.log_bytes
            self._last_snapshot_version = marks.version
            self._last_snapshot_at = at

    def unwritten(self, marks: Marks) -> None:
        """A capture could not be stored: its first new record stays unpublished."""
        if marks.first_new is not None:
            with self._lock:
                self._unpublished_from = marks.first_new

    def restored(self, header: dict) -> None:
        """The model is a snapshot's (start-up, a takeover): its version, the log position
        it includes, and when it was written (``service.durability.store`` header)."""
        with self._lock:
            self._version = self._last_snapshot_version = header["version"]
            self._last_snapshot_at = header["created_at"]
            self._log_position = header.get("log_position")
            self._records = self._log_bytes = 0
            self._backlog, self._backlog_end = 0, None

    def loaded(self, version: int, position: Position) -> None:
        """An api replica serves a published version (and the log up to ``position``)."""
        self._version = version
        self._log_position = position

    def start_chain(self, chain: Any) -> None:
        """A learner's publication chain starts (or a replica follows one by ``chain``, a
        digest of the state it serves)."""
        self._publication = chain

    def break_chain(self) -> None:
        """The replicas' chain is broken: the next publication is a full snapshot."""
        self._publication = None

    def published(self, version: int) -> None:
        """A delta of ``version`` is published (the replicas' freshness names it)."""
        self._published_version = version
