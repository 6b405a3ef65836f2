"""Validation kernels for example rows (one pass, no allocation)."""

import numba
import numpy as np

from core.config import NJIT_OPTIONS

#: Status codes returned by the checks; ``core.features`` turns them into messages.
OK = 0
NOT_FINITE = 1
OUT_OF_RANGE = 2
UNSORTED = 3


@numba.njit(**NJIT_OPTIONS)
def _features_check_dense(x):
    """Return (status, position) of the first non-finite value of a dense row."""
    for j in range(x.shape[0]):
        if not np.isfinite(x[j]):
            return NOT_FINITE, j
    return OK, -1


@numba.njit(**NJIT_OPTIONS)
def _features_check_sparse(indices, values, n_features):
    """Return (status, position) of the first problem of a sparse row.

    Problems are checked in order: non-finite value, index outside [0, n_features),
    indices not strictly increasing (duplicates or unsorted; the caller may canonicalise).
    """
    previous = -1
    unsorted = -1
    for k in range(indices.shape[0]):
        if not np.isfinite(values[k]):
            return NOT_FINITE, k
        j = indices[k]
        if j < 0 or j >= n_features:
            return OUT_OF_RANGE, k
        if j <= previous and unsorted < 0:
            unsorted = k
        previous = j
    if unsorted >= 0:
        return UNSORTED, unsorted
    return OK, -1


@numba.njit(**NJIT_OPTIONS)
def _features_check_csr(indptr, indices, values, n_features):
    """Check every row of a CSR batch; return (status, row, position in row)."""
    for i in range(indptr.shape[0] - 1):
        start = indptr[i]
        status, k = _features_check_sparse(
            indices[start : indptr[i + 1]], values[start : indptr[i + 1]], n_features
        )
        if status != OK:
            return status, i, k
    return OK, -1, -1


@numba.njit(**NJIT_OPTIONS)
def _features_first_overflow(indptr, values, start):
    """The first row of a CSR batch whose squared norm, summed in order from ``start``, is not
    finite, or -1. Values are finite (checked before); only their squares and sums can
    overflow."""
    for i in range(indptr.shape[0] - 1):
        total = start
        for k in range(indptr[i], indptr[i + 1]):
            total += values[k] * values[k]
        if not np.isfinite(total):
            return i
    return -1


@numba.njit(**NJIT_OPTIONS)
def _features_sum_of_squares(x):
    """Sum of the squares of a 1-D array, in order."""
    total = 0.0
    for k in range(x.shape[0]):
        total += x[k] * x[k]
    return total
