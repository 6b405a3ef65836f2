"""Example representation: dense rows, sparse rows and hashed named features.

Every model consumes one representation: a **row** is a pair ``(indices, values)`` of
contiguous ``int64`` / ``float64`` arrays with strictly increasing indices in
``[0, n_features)`` and finite values; a **batch** is a :class:`CSRBatch` (``indptr``,
``indices``, ``values``) whose rows obey the same rules. The functions here turn what users
hand us into that form and reject what is not valid with a ``ValueError`` naming the problem:

- a dense row: a 1-D sequence or array of length ``n_features``;
- a sparse row: a tuple ``(indices, values)``; duplicate indices are summed (as scipy does);
- named features: a mapping ``{"age": 31.0, "country": "fr"}`` hashed into ``n_features``
  buckets by :class:`FeatureHasher` (signed hashing; strings are one-hot as ``"country=fr"``);
- batches: a 2-D array, a ``scipy.sparse`` matrix, or a sequence of rows.

Zeros of a dense row are kept in rows (the kernels treat them like any value) but dropped
in batches: a zero feature contributes nothing to a score, a norm or an update, so both
give bit-identical models.

>>> indices, values = as_row({"age": 31.0, "country": "fr"}, 2**10)
>>> indices.dtype, values.dtype, len(indices)
(dtype('int64'), dtype('float64'), 2)
>>> as_row([0.5, 0.0, 2.0], 3)[1]
array([0.5, 0. , 2. ])
>>> as_row(([2, 0], [1.0, 3.0]), 3)
(array([0, 2]), array([3., 1.]))
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from numbers import Real

import numpy as np
import scipy.sparse as sp

from core.config import FLOAT, INDEX
from core.kernels.features import (
    NOT_FINITE,
    OK,
    OUT_OF_RANGE,
    UNSORTED,
    _features_check_csr,
    _features_check_dense,
    _features_check_sparse,
    _features_first_overflow,
    _features_sum_of_squares,
)
from core.validation import check_n_features

__all__ = [
    "CSRBatch",
    "FeatureHasher",
    "Row",
    "as_batch",
    "as_row",
    "batch_from_rows",
    "check_n_features",
    "dense_row",
    "first_overflowing_row",
    "sliceable",
    "sparse_row",
    "squared_norm",
]

Row = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class CSRBatch:
    """A validated batch of rows in compressed sparse row form.

    Attributes: ``indptr`` (n_rows + 1,), ``indices`` (nnz,), ``values`` (nnz,).

    >>> batch = as_batch(np.array([[1.0, 0.0], [0.0, 2.0]]), 2)
    >>> batch.n_rows, batch.row(1)
    (2, (array([1]), array([2.])))
    """

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray

    @property
    def n_rows(self) -> int:
        return self.indptr.shape[0] - 1

    def row(self, i: int) -> Row:
        start, stop = self.indptr[i], self.indptr[i + 1]
        return self.indices[start:stop], self.values[start:stop]

    def slice_rows(self, start: int, stop: int) -> CSRBatch:
        """Rows ``start .. stop - 1`` as a batch of their own (views of this one's arrays,
        ``indptr`` rebased), for ``0 <= start <= stop <= n_rows``.

        >>> as_batch(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]]), 2).slice_rows(1, 3).indptr
        array([0, 1, 3])
        """
        if not 0 <= start <= stop <= self.n_rows:
            raise ValueError(f"rows {start}..{stop} of a batch of {self.n_rows}")
        first, last = self.indptr[start], self.indptr[stop]
        return CSRBatch(
            self.indptr[start : stop + 1] - first, self.indices[first:last], self.values[first:last]
        )


@lru_cache(maxsize=64)
def _dense_indices(n_features: int) -> np.ndarray:
    indices = np.arange(n_features, dtype=INDEX)
    indices.setflags(write=False)
    return indices


def _raise_sparse(status: int, position: int, indices, values, n_features: int, where=""):
    if status == NOT_FINITE:
        raise ValueError(
            f"{where}feature value at position {position} (index {int(indices[position])}) "
            f"is not finite ({values[position]!r})"
        )
    if status == OUT_OF_RANGE:
        raise ValueError(
            f"{where}feature index {int(indices[position])} at position {position} is out of "
            f"range [0, {n_features})"
        )
    raise AssertionError(status)  # pragma: no cover


def dense_row(x, n_features: int) -> Row:
    """Validate a dense row and return it as ``(arange(n_features), x)``."""
    try:
        values = np.ascontiguousarray(x, dtype=FLOAT)
    except (TypeError, ValueError) as error:
        raise ValueError(f"dense row must hold numbers: {error}") from None
    if values.ndim != 1:
        raise ValueError(f"dense row must be 1-D, got shape {values.shape}")
    if values.shape[0] != n_features:
        raise ValueError(f"dense row has length {values.shape[0]}, expected {n_features}")
    status, position = _features_check_dense(values)
    if status != OK:
        raise ValueError(f"feature value at index {position} is not finite ({values[position]!r})")
    return _dense_indices(n_features), values


def sparse_row(indices, values, n_features: int) -> Row:
    """Validate a sparse row; sort it and sum duplicate indices when needed."""
    try:
        idx = np.ascontiguousarray(indices)
        val = np.ascontiguousarray(values, dtype=FLOAT)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"sparse row must hold integer indices and numeric values: {error}"
        ) from None
    if idx.ndim != 1 or val.ndim != 1:
        raise ValueError("sparse row indices and values must be 1-D")
    if idx.shape[0] != val.shape[0]:
        raise ValueError(
            f"sparse row has {idx.shape[0]} indices but {val.shape[0]} values; they must match"
        )
    if idx.size and idx.dtype.kind not in "iu":  # (np.issubdtype costs more than the row)
        if idx.dtype.kind != "f" or not np.all(np.isfinite(idx) & (np.mod(idx, 1) == 0)):
            raise ValueError("sparse row indices must be integers")
        outside = np.flatnonzero((idx < 0) | (idx >= n_features))
        if outside.size:
            k = int(outside[0])
            raise ValueError(
                f"feature index {idx[k]:g} at position {k} is out of range [0, {n_features})"
            )
    idx = idx.astype(INDEX, copy=False)
    status, position = _features_check_sparse(idx, val, n_features)
    if status == UNSORTED:
        idx, val = _canonical(idx, val)
        status, position = _features_check_sparse(idx, val, n_features)
    if status != OK:
        _raise_sparse(status, position, idx, val, n_features)
    return idx, val


def _canonical(indices: np.ndarray, values: np.ndarray) -> Row:
    """Sort indices and sum the values of duplicates."""
    unique, inverse = np.unique(indices, return_inverse=True)
    summed = np.zeros(unique.shape[0], dtype=FLOAT)
    with np.errstate(over="ignore"):  # an overflowing sum is reported by the caller's check
        np.add.at(summed, inverse, values)
    return unique.astype(INDEX, copy=False), summed


class FeatureHasher:
    """Signed feature hashing of named features into ``n_features`` buckets.

    A numeric feature ``name: v`` adds ``sign(name) * v`` to bucket ``h(name) mod n``; a string
    feature ``name: "s"`` is one-hot: ``sign * 1.0`` in the bucket of ``"name=s"``. Booleans
    count as 0/1. The hash is the first 8 bytes of BLAKE2b, so buckets are the same in every
    process and on every machine (Python's ``hash`` is salted per process). Collisions are
    summed, and the signs make them cancel in expectation (Weinberger et al. 2009).

    >>> FeatureHasher(16).transform_one({"a": 2.0, "colour": "red"})
    (array([ 0, 11]), array([2., 1.]))
    """

    def __init__(self, n_features: int):
        self.n_features = check_n_features(n_features)

    def transform_one(self, features: Mapping) -> Row:
        n = len(features)
        indices = np.empty(n, dtype=INDEX)
        values = np.empty(n, dtype=FLOAT)
        for k, (name, value) in enumerate(features.items()):
            if not isinstance(name, str):
                raise ValueError(f"feature names must be strings, got {name!r}")
            if isinstance(value, str):
                key, number = f"{name}={value}", 1.0
            elif isinstance(value, bool | Real | np.number) and not isinstance(value, complex):
                key, number = name, float(value)
                if not np.isfinite(number):
                    raise ValueError(f"feature {name!r} is not finite ({number!r})")
            else:
                raise ValueError(
                    f"feature {name!r} must be a number, a boolean or a string, "
                    f"got {type(value).__name__}"
                )
            bucket, sign = _hash_key(key, self.n_features)
            indices[k] = bucket
            values[k] = sign * number
        return sparse_row(indices, values, self.n_features)


@lru_cache(maxsize=1 << 16)
def _hash_key(key: str, n_features: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
    return digest % n_features, (1.0 if (digest >> 63) == 0 else -1.0)


def as_row(x, n_features: int) -> Row:
    """Turn one example (dense, sparse, named or a 1-row scipy matrix) into a valid row."""
    if type(x) is tuple and len(x) == 2:
        indices, values = x
        if (
            type(indices) is np.ndarray
            and type(values) is np.ndarray
            and indices.dtype == INDEX
            and values.dtype == FLOAT
            and indices.ndim == 1
            and values.ndim == 1
            and indices.shape[0] == values.shape[0]
            and indices.flags.c_contiguous
            and values.flags.c_contiguous
        ):
            # fast path for rows already in the kernels' form: one check kernel call
            status, position = _features_check_sparse(indices, values, n_features)
            if status == OK:
                return indices, values
            return sparse_row(indices, values, n_features)  # canonicalise or raise
    if isinstance(x, np.ndarray) or (isinstance(x, list) and not _is_pair(x)):
        return dense_row(x, n_features)
    if isinstance(x, Mapping):
        return FeatureHasher(n_features).transform_one(x)
    if isinstance(x, tuple) and _is_pair(x):
        return sparse_row(x[0], x[1], n_features)
    if sp.issparse(x):
        if x.shape != (1, n_features):
            raise ValueError(f"sparse matrix row has shape {x.shape}, expected (1, {n_features})")
        csr = sp.csr_matrix(x)
        return sparse_row(csr.indices, csr.data, n_features)
    if isinstance(x, tuple):
        return dense_row(x, n_features)
    raise ValueError(
        f"cannot read an example from {type(x).__name__}: pass a dense row, "
        "an (indices, values) pair or a mapping of named features"
    )


def _is_pair(x) -> bool:
    return (
        len(x) == 2
        and isinstance(x[0], Sequence | np.ndarray)
        and isinstance(x[1], Sequence | np.ndarray)
        and not isinstance(x[0], str)
    )


def as_batch(X, n_features: int) -> CSRBatch:
    """Turn a batch (2-D array, scipy sparse matrix or sequence of rows) into a CSRBatch.

    The whole batch is validated before anything is returned, so a caller that applies it
    afterwards never applies half of a bad batch.
    """
    if sp.issparse(X):
        if X.ndim != 2 or X.shape[1] != n_features:
            raise ValueError(f"batch has shape {X.shape}, expected (n_rows, {n_features})")
        csr = sp.csr_matrix(X, dtype=FLOAT, copy=False)
        return _checked_csr(csr.indptr, csr.indices, csr.data, n_features)
    if isinstance(X, np.ndarray) and X.ndim == 2:
        if X.shape[1] != n_features:
            raise ValueError(f"batch has {X.shape[1]} columns, expected {n_features}")
        try:
            dense = np.asarray(X, dtype=FLOAT)
        except (TypeError, ValueError) as error:
            raise ValueError(f"batch must hold numbers: {error}") from None
        # a finite sum is a finite array (cheaper than isfinite for a row; an overflowing
        # sum of finite values is told apart by the exact test)
        if not math.isfinite(np.add.reduce(dense, axis=None)) and not np.isfinite(dense).all():
            i, j = np.argwhere(~np.isfinite(dense))[0]
            raise ValueError(f"row {i}: feature value at index {j} is not finite ({dense[i, j]!r})")
        # the non-zeros of finite rows of n_features columns: finite, in range and sorted,
        # all that _checked_csr would check
        return CSRBatch(*_dense_to_csr(dense))
    if isinstance(X, np.ndarray) and X.ndim != 2:
        raise ValueError(f"batch must be 2-D, got shape {X.shape}")
    rows = []
    for i, x in enumerate(X):
        try:
            rows.append(as_row(x, n_features))
        except ValueError as error:
            raise ValueError(f"row {i}: {error}") from None
    return batch_from_rows(rows)


def _dense_to_csr(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, values)`` of a 2-D array's non-zeros in row-major order: what
    ``scipy.sparse.csr_matrix(dense)`` holds (``-0.0`` dropped too), without building the
    matrix (scipy's checks cost ~35 us, most of a one-row V2 inference request)."""
    if dense.shape[0] == 1:
        columns = dense[0].nonzero()[0]
        indptr = np.array([0, columns.shape[0]], dtype=INDEX)
        return indptr, columns.astype(INDEX, copy=False), dense[0, columns]
    rows, columns = dense.nonzero()
    indptr = np.zeros(dense.shape[0] + 1, dtype=INDEX)
    np.cumsum(np.count_nonzero(dense, axis=1), out=indptr[1:])
    return indptr, columns.astype(INDEX, copy=False), dense[rows, columns]


def batch_from_rows(rows: Sequence[Row]) -> CSRBatch:
    """Concatenate already validated rows into a CSRBatch."""
    if len(rows) == 1:  # the common single example: its arrays as they are
        indices, values = rows[0]
        indptr = np.array([0, indices.shape[0]], dtype=INDEX)
        return CSRBatch(indptr, indices.astype(INDEX, copy=False), values.astype(FLOAT, copy=False))
    indptr = np.zeros(len(rows) + 1, dtype=INDEX)
    if rows:
        np.cumsum([r[0].shape[0] for r in rows], out=indptr[1:])
        indices = np.concatenate([r[0] for r in rows]).astype(INDEX, copy=False)
        values = np.concatenate([r[1] for r in rows]).astype(FLOAT, copy=False)
    else:
        indices = np.zeros(0, dtype=INDEX)
        values = np.zeros(0, dtype=FLOAT)
    return CSRBatch(indptr, indices, values)


def first_overflowing_row(batch: CSRBatch, start: float = 0.0) -> int:
    """The first row of a validated batch whose squared norm, summed in order from ``start``
    (1.0: with the intercept's constant feature, the binary kernels' order), overflows float64
    (no model can learn it: their updates divide by it); -1 if none."""
    return int(_features_first_overflow(batch.indptr, batch.values, float(start)))


def squared_norm(array: np.ndarray) -> float:
    """The sum of squares of a float array of any shape, without a copy when it or its
    transpose is contiguous (a numba pass that releases the GIL); other layouts through
    ``np.einsum``, which reads them in place."""
    if array.flags.f_contiguous and not array.flags.c_contiguous:
        array = array.T  # (the same values)
    if array.flags.c_contiguous:
        return float(_features_sum_of_squares(array.reshape(-1)))
    subscripts = "abcdefgh"[: array.ndim]
    return float(np.einsum(f"{subscripts},{subscripts}->", array, array))


def _checked_csr(indptr, indices, values, n_features: int) -> CSRBatch:
    indptr = np.ascontiguousarray(indptr, dtype=INDEX)
    indices = np.ascontiguousarray(indices, dtype=INDEX)
    values = np.ascontiguousarray(values, dtype=FLOAT)
    status, row, position = _features_check_csr(indptr, indices, values, n_features)
    if status == UNSORTED:
        csr = sp.csr_matrix((values, indices, indptr), shape=(indptr.shape[0] - 1, n_features))
        csr.sum_duplicates()
        csr.sort_indices()
        return _checked_csr(csr.indptr, csr.indices, csr.data, n_features)
    if status != OK:
        start = indptr[row]
        _raise_sparse(status, position, indices[start:], values[start:], n_features, f"row {row}: ")
    return CSRBatch(indptr, indices, values)


def sliceable(X, y):
    """``(X, y, n_rows)``: a batch (2-D array, scipy sparse matrix or sequence of rows) and its
    labels in forms that slice by rows (a sparse matrix as CSR), checked for one label per
    row (ValueError otherwise); the rows themselves are validated later (``as_batch``).

    >>> X, y, n_rows = sliceable([[1.0], [2.0]], (1, -1))
    >>> n_rows, X[1:], y[:1]
    (2, [[2.0]], (1,))
    """
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        n_rows = X.shape[0]
    elif isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise ValueError(f"batch must be 2-D, got shape {X.shape}")
        n_rows = X.shape[0]
    elif isinstance(X, str | bytes | Mapping):
        raise ValueError(
            f"a batch is a 2-D array, a sparse matrix or a sequence of rows, got {X!r}"
        )
    else:
        if not isinstance(X, Sequence):
            try:
                X = list(X)
            except TypeError:
                raise ValueError(f"cannot read a batch from {type(X).__name__}") from None
        n_rows = len(X)
    if isinstance(y, str | bytes | Mapping) or np.ndim(y) == 0:
        raise ValueError(f"labels must be a sequence, got {y!r}")
    if not isinstance(y, np.ndarray | Sequence):
        try:
            y = list(y)
        except TypeError:
            raise ValueError(f"labels must be a sequence, got {y!r}") from None
    if len(y) != n_rows:
        raise ValueError(f"got {len(y)} labels for {n_rows} rows")
    return X, y, n_rows
