"""Delta publication: api replicas load only what changed since the version they serve.

A learner publishing version v of a model, whose previous publication was b, writes a
**delta** of v over b: for each array the estimator declares feature-local
(``core.base.Estimator.feature_axes``: DoS ``U_``/``V_``, linear ``w_``, through
reductions, calibration and the live side of an average), only the rows marked since b
(``RowChanges``: every learned batch marks its non-zeros and the bias row) with their
values; every other array whole, except an average's arrays between two averaging steps
(``n_averaged_`` unchanged: they did not move); the scalars and the service's part whole.
A full snapshot is written every ``full_snapshot_every`` publications (with the delta of
its version, so the chain goes on) and whenever the chain starts (a model restored or
taken over, refitted or restored from a snapshot): replicas that missed something load it.

**Checksum.** Both sides keep a ``RowDigest`` of the state: a 64-bit hash of every row of
every array (feature rows for the local arrays, rows of the first axis for the others),
and their sum modulo 2^64, updated row by row in the time a delta takes. A delta carries
the digest of the state it makes; a replica computes it from its own row hashes before
applying anything: a delta it cannot apply (its base is not the replica's version, or the
digests differ, e.g. after a missed or corrupted delta) is refused, and the replica loads
the latest full snapshot (whose digest it checks too) and the deltas after it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from core.averaging import Averaged
from service.scale.delta_kernels import hash_word_rows, scatter_byte_rows

#: suffixes of a local array's entries in a delta: the row numbers and their values
ROWS = "#rows"
VALUES = "#values"
_MASK = (1 << 64) - 1


class RowChanges:
    """The feature rows changed since the last publication (marked under the model's
    writer lock, taken under its read lock). Starts with everything changed."""

    def __init__(self, n_rows: int):
        self.n_rows = n_rows
        self.mask = np.zeros(n_rows, dtype=bool)
        self.everything = True

    def mark(self, indices: np.ndarray) -> None:
        self.mask[indices] = True

    def mark_all(self) -> None:
        self.everything = True

    def take(self) -> np.ndarray | None:
        """The changed rows, sorted, the bias row included (None: every row), and forget
        them."""
        if self.everything:
            self.everything = False
            self.mask[:] = False
            return None
        self.mask[-1] = True
        rows = np.flatnonzero(self.mask)
        self.mask[rows] = False
        return rows


def local_axes(estimator, n_features: int) -> dict[str, int]:
    """``feature_axes`` of the estimator, those of length ``n_features + 1`` only."""
    shapes = {name: array.shape for name, array in estimator.arrays()}
    return {
        name: axis
        for name, axis in estimator.feature_axes().items()
        if name in shapes and shapes[name][axis] == n_features + 1
    }


def worthwhile(estimator, axes: dict[str, int]) -> bool:
    """Whether deltas pay: the local arrays hold most of the state (not, e.g., a factorization
    machine's, which a sparse example changes everywhere)."""
    sizes = {name: array.nbytes for name, array in estimator.arrays()}
    local = sum(sizes[name] for name in axes)
    averaged = sum(size for name, size in sizes.items() if name.startswith("average."))
    return local > 0 and 2 * local >= sum(sizes.values()) - averaged


def gather(estimator, axes: dict[str, int], rows: np.ndarray, since_averaging: int | None):
    """A delta's arrays (read under the model's read lock): the local arrays' ``rows``, the
    others whole, an average's only if it moved (``since_averaging``: the ``n_averaged_``
    of the base; None: not an average)."""
    moved = since_averaging is None or estimator.n_averaged_ != since_averaging
    arrays = {}
    for name, array in estimator.arrays():
        axis = axes.get(name)
        if axis is not None:
            arrays[name + ROWS] = rows
            arrays[name + VALUES] = take_rows(array, rows, axis)
        elif moved or not name.startswith("average."):
            arrays[name] = np.array(array, order="K", copy=True)
    return arrays


def take_rows(array: np.ndarray, rows: np.ndarray, axis: int) -> np.ndarray:
    """``np.take(array, rows, axis=axis)``, gathered as whole rows of the feature-major view:
    DoS's ``U_`` (rank, n_features + 1) is a transposed view of feature-major storage, along
    whose axis 1 ``np.take`` walks element by element, tens of times slower, while the
    publication holds the model's read lock."""
    return np.moveaxis(np.moveaxis(array, axis, 0)[rows], 0, axis)


def averaging_count(estimator) -> int | None:
    return estimator.n_averaged_ if isinstance(estimator, Averaged) else None


@lru_cache(maxsize=64)
def _constants(width: int) -> np.ndarray:
    return _mix(np.arange(1, width + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | (
        np.uint64(1)
    )


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise (uint64, wrapping)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@lru_cache(maxsize=1024)
def _salt(name: str) -> np.uint64:
    return np.uint64(
        int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")
    )


def row_hashes(name: str, rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row (its bytes, its number ``ids`` and the array's name)."""
    raw = np.ascontiguousarray(rows).reshape(rows.shape[0], -1).view(np.uint8)
    pad = -raw.shape[1] % 8
    if pad:
        raw = np.pad(raw, ((0, 0), (0, pad)))
    words = raw.view(np.uint64)
    out = np.empty(words.shape[0], dtype=np.uint64)
    ids = np.asarray(ids, dtype=np.int64)
    hash_word_rows(words, ids, _salt(name), _constants(words.shape[1]), out)  # (without the GIL)
    return out


def _as_rows(array: np.ndarray, axis: int) -> np.ndarray:
    """The array as (rows, rest): rows along ``axis`` (0-d arrays: one row)."""
    if array.ndim == 0:
        return array.reshape(1, 1)
    return np.moveaxis(array, axis, 0).reshape(array.shape[axis], -1)


@dataclass
class RowDigest:
    """Row hashes of a state's arrays and their sum modulo 2^64 (module docstring)."""

    axes: dict[str, int]
    hashes: dict[str, np.ndarray] = field(default_factory=dict)
    total: int = 0

    def reset(self, arrays: dict[str, np.ndarray]) -> int:
        """The digest of a whole state's arrays (a full snapshot)."""
        self.hashes = {}
        for name, array in arrays.items():
            rows = _as_rows(array, self.axes.get(name, 0))
            self.hashes[name] = row_hashes(name, rows, np.arange(rows.shape[0]))
        self.total = sum(int(h.sum(dtype=np.uint64)) for h in self.hashes.values()) & _MASK
        return self.total

    def preview(self, delta: dict[str, np.ndarray]) -> tuple[int, dict]:
        """The digest after a delta's arrays, and the row hashes to ``commit`` then."""
        total, updates = self.total, {}
        for name, array in delta.items():
            if name.endswith(ROWS):
                continue
            if name.endswith(VALUES):
                name = name[: -len(VALUES)]
                rows = delta[name + ROWS]
                new = row_hashes(name, _as_rows(array, self.axes[name]), rows)
                old = self.hashes[name][rows]
            else:
                if name not in self.hashes:
                    raise KeyError(f"a delta of array {name!r}, which the state does not have")
                as_rows = _as_rows(array, self.axes.get(name, 0))
                new = row_hashes(name, as_rows, np.arange(as_rows.shape[0]))
                rows, old = None, self.hashes[name]
            total += int(new.sum(dtype=np.uint64)) - int(old.sum(dtype=np.uint64))
            updates[name] = (rows, new)
        return total & _MASK, updates

    def commit(self, total: int, updates: dict) -> None:
        for name, (rows, new) in updates.items():
            if rows is None:
                self.hashes[name] = new
            else:
                self.hashes[name][rows] = new
        self.total = total


def apply(estimator, axes: dict[str, int], delta: dict[str, np.ndarray]) -> None:
    """Write a delta's arrays into the estimator's own, in place (writer lock held)."""
    own = dict(estimator.arrays())
    for name, array in delta.items():
        if name.endswith(ROWS):
            continue
        if name.endswith(VALUES):
            name = name[: -len(VALUES)]
            target = np.moveaxis(own[name], axes[name], 0)
            scatter_rows(target, delta[name + ROWS], np.moveaxis(array, axes[name], 0))
        else:
            own[name][...] = array


def scatter_rows(target: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """``target[rows] = values`` (rows along axis 0), as bytes in a kernel without the GIL
    when both have the same dtype and row shape and ``target`` is in C order (the local
    arrays' feature-major storage); IndexError for a row ``target`` does not have."""
    if not (
        target.ndim
        and target.flags.c_contiguous
        and target.dtype == values.dtype
        and target.shape[1:] == values.shape[1:]
        and rows.ndim == 1
        and rows.dtype.kind in "iu"
        and len(rows) == len(values)
        and values.size
    ):
        target[rows] = values
        return
    raw = target.reshape(target.shape[0], -1).view(np.uint8)
    new = np.ascontiguousarray(values).reshape(len(values), -1).view(np.uint8)
    bad = scatter_byte_rows(raw, np.asarray(rows, dtype=np.int64), new)
    if bad >= 0:
        raise IndexError(f"row {rows[bad]} out of bounds for {target.shape[0]} rows")


@dataclass
class Chain:
    """A learner's publication chain of one model: the version replicas build on, its
    digest, the average's step count then, publications since the last full snapshot, and
    whether the next publication writes one (asked for by the worker)."""

    base: int
    digest: RowDigest
    averaged: int | None
    since_full: int = 0
    full_due: bool = False

    def ask_full(self) -> None:
        """The next publication writes a full snapshot (the worker's periodic one)."""
        self.full_due = True

    def advance(self, version: int, averaged: int | None, full: bool) -> None:
        """``version`` is published (with a full snapshot when ``full``)."""
        self.base, self.averaged = version, averaged
        self.since_full = 0 if full else self.since_full + 1
        self.full_due = self.full_due and not full
