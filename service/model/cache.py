"""Pending predictions: the features of recent predictions, so feedback can name a
``prediction_id`` instead of sending the features again."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from core.features import Row
from service.exceptions import InvalidRequest

#: memory counted for an expired id remembered to answer ``expired_prediction_id``
GONE_ENTRY_BYTES = 200
#: random bytes read from the OS at a time for prediction ids
ENTROPY_BYTES = 4096


class Pending(NamedTuple):
    """A pending prediction as ``PredictionCache.take`` hands it out."""

    model_uid: str
    row: Row
    expires_at: float
    nbytes: int

    @classmethod
    def stored(cls, entry: tuple) -> Pending:
        model_uid, indices, values, expires_at, nbytes = entry
        return cls(model_uid, (indices, values), expires_at, nbytes)

    def flat(self) -> tuple:
        return (self.model_uid, *self.row, self.expires_at, self.nbytes)


# the fields of the stored tuples: flat tuples of untracked objects leave the garbage
# collector's generations after its first pass (benchmarks/pending_cache_gc.py)
_UID, _INDICES, _VALUES, _EXPIRES, _NBYTES = range(5)


class PredictionCache:
    """Features of recent predictions, bounded in time (``ttl``) and memory (``max_bytes``
    of kept rows; the oldest go first). Thread-safe.

    An id that expired, or was dropped under memory pressure, is remembered for another
    ``ttl`` seconds (at most ``max_bytes / 8`` of them, ``GONE_ENTRY_BYTES`` each, the
    oldest forgotten first), so that feedback naming it is told ``expired_prediction_id``
    rather than ``unknown_prediction_id``."""

    def __init__(self, ttl: float, max_bytes: int, clock=time.monotonic):
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.clock = clock
        self._entries: OrderedDict[str, tuple] = OrderedDict()  # of Pending.flat() tuples
        self._gone: OrderedDict[str, tuple[str, float]] = OrderedDict()  # id -> uid, until
        self._max_gone = max(1, max_bytes // 8 // GONE_ENTRY_BYTES)
        self._lock = threading.RLock()
        self.nbytes = 0
        self.expired = 0
        self.evicted = 0
        self._entropy, self._entropy_at = b"", 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def gone_bytes(self) -> int:
        """Memory counted for the remembered expired ids."""
        return len(self._gone) * GONE_ENTRY_BYTES

    def _new_ids(self, n: int) -> list[str]:
        """``n`` ids of 128 random bits (32 hex digits, as a uuid4's hex) from the OS's
        generator, read 4 KiB at a time rather than one system call per id (held lock)."""
        need = 16 * n
        if self._entropy_at + need > len(self._entropy):
            self._entropy, self._entropy_at = os.urandom(max(ENTROPY_BYTES, need)), 0
        at = self._entropy_at
        self._entropy_at = at + need
        entropy = self._entropy
        return [entropy[k : k + 16].hex() for k in range(at, at + need, 16)]

    def put(self, model_uid: str, rows: list[Row]) -> list[str]:
        expires_at = self.clock() + self.ttl
        with self._lock:
            ids = self._new_ids(len(rows))
            for prediction_id, row in zip(ids, rows, strict=True):
                row = compact(row)
                nbytes = row[0].nbytes + row[1].nbytes + 64
                self._entries[prediction_id] = (model_uid, *row, expires_at, nbytes)
                self.nbytes += nbytes
            self._evict()
        return ids

    def peek(self, prediction_id: str, model_uid: str) -> Row:
        """The row of a pending prediction of this model; InvalidRequest if there is none."""
        with self._lock:
            entry = self._entries.get(prediction_id)
            if entry is not None and entry[_UID] == model_uid:
                if entry[_EXPIRES] > self.clock():
                    return entry[_INDICES], entry[_VALUES]
                self._retire(prediction_id)
                self.expired += 1
            gone = self._gone.get(prediction_id)
            if gone is not None and gone[0] == model_uid and gone[1] > self.clock():
                raise InvalidRequest(
                    "expired_prediction_id",
                    f"prediction_id {prediction_id!r} expired (ids live {self.ttl:g} s; the "
                    "oldest are dropped earlier under memory pressure): send the features",
                )
            raise InvalidRequest(
                "unknown_prediction_id",
                f"unknown prediction_id {prediction_id!r} for this model (ids are answered once)",
            )

    def take(self, prediction_ids: list[str], model_uid: str) -> list[Pending]:
        """The entries of these pending predictions, removed atomically: all or none (an
        id is answered once; ``give_back`` undoes it). InvalidRequest names the first
        unknown, expired or repeated id."""
        with self._lock:
            if len(set(prediction_ids)) != len(prediction_ids):
                raise InvalidRequest(
                    "duplicate_prediction_id", "a prediction_id appears twice in the request"
                )
            for prediction_id in prediction_ids:
                self.peek(prediction_id, model_uid)
            return [Pending.stored(self._drop(prediction_id)) for prediction_id in prediction_ids]

    def give_back(self, prediction_ids: list[str], entries: list[Pending]) -> None:
        """Put taken entries back, with their own expiry (the request that took them was
        refused before anything of it was applied, so the ids can be answered again)."""
        with self._lock:
            for prediction_id, entry in zip(prediction_ids, entries, strict=True):
                if prediction_id not in self._entries:
                    self._entries[prediction_id] = entry.flat()
                    self.nbytes += entry.nbytes
            self._evict()

    def sweep(self) -> int:
        """Retire expired entries and forget expired ids past their window; returns how
        many entries expired."""
        now = self.clock()
        dropped = 0
        with self._lock:
            while self._entries:
                prediction_id, entry = next(iter(self._entries.items()))
                if entry[_EXPIRES] > now:
                    break
                self._retire(prediction_id)
                dropped += 1
            self.expired += dropped
            while self._gone and next(iter(self._gone.values()))[1] <= now:
                self._gone.popitem(last=False)
        return dropped

    def forget_model(self, model_uid: str) -> None:
        with self._lock:
            for prediction_id in [k for k, e in self._entries.items() if e[_UID] == model_uid]:
                self._drop(prediction_id)
            for prediction_id in [k for k, g in self._gone.items() if g[0] == model_uid]:
                del self._gone[prediction_id]

    def _evict(self) -> None:
        """Retire the oldest entries until the memory bound holds (lock held)."""
        while self.nbytes > self.max_bytes and self._entries:
            self._retire(next(iter(self._entries)))
            self.evicted += 1

    def _retire(self, prediction_id: str) -> None:
        """Drop an entry and remember its id for ``ttl`` seconds (lock held)."""
        entry = self._drop(prediction_id)
        self._gone[prediction_id] = (entry[_UID], self.clock() + self.ttl)
        while len(self._gone) > self._max_gone:
            self._gone.popitem(last=False)

    def _drop(self, prediction_id: str) -> tuple:
        entry = self._entries.pop(prediction_id)
        self.nbytes -= entry[_NBYTES]
        return entry


def compact(row: Row) -> Row:
    """A row without its zeros (dense rows kept for feedback by prediction id)."""
    indices, values = row
    if indices.shape[0] and np.count_nonzero(values) < values.shape[0]:
        keep = np.flatnonzero(values)
        return indices[keep], values[keep]
    return indices, values
