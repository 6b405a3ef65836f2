"""Kernels of delta publication (``service.scale.deltas``): the row hashes of a digest and the
scatter of a delta's rows into an estimator's arrays.

An api replica runs them in its loader thread four times a second while its event loop and
handler threads serve requests: as numpy expressions they held the GIL for milliseconds per
delta (a temporary per step, a fancy assignment through a transposed view), and every
request waited for it. Compiled with ``nogil`` they run beside the requests. Both work on
raw words and bytes, so one compiled signature serves every dtype.
"""

import numba
import numpy as np

from core.config import NJIT_OPTIONS

#: splitmix64's finaliser constants (``deltas._mix``)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


@numba.njit(**NJIT_OPTIONS)
def _mix(x):
    """splitmix64's finaliser (uint64, wrapping)."""
    x = x ^ (x >> _S30)
    x = x * _M1
    x = x ^ (x >> _S27)
    x = x * _M2
    return x ^ (x >> _S31)


@numba.njit(**NJIT_OPTIONS)
def hash_word_rows(words, ids, salt, constants, out):
    """out[i] = mix(sum_j words[i, j] * constants[j] ^ mix(ids[i] ^ salt)), modulo 2^64:
    ``deltas.row_hashes`` of rows given as 64-bit words (C order)."""
    n, width = words.shape
    for i in range(n):
        h = np.uint64(0)
        for j in range(width):
            h += words[i, j] * constants[j]
        out[i] = _mix(h ^ _mix(np.uint64(ids[i]) ^ salt))


@numba.njit(**NJIT_OPTIONS)
def scatter_byte_rows(target, rows, values):
    """target[rows[i]] = values[i] for every i (rows of bytes, C order); -1, or the first i
    whose row is not one of target's (then nothing is written)."""
    n, width = target.shape
    for i in range(rows.shape[0]):
        if rows[i] < 0 or rows[i] >= n:
            return i
    for i in range(rows.shape[0]):
        r = rows[i]
        for j in range(width):
            target[r, j] = values[i, j]
    return -1


def warm_up() -> None:
    """Compile (or load from the cache) both kernels before the first version arrives."""
    words = np.zeros((2, 2), dtype=np.uint64)
    hash_word_rows(words, np.arange(2), np.uint64(1), np.ones(2, np.uint64), np.empty(2, np.uint64))
    scatter_byte_rows(np.zeros((3, 8), np.uint8), np.arange(2), np.ones((2, 8), np.uint8))
