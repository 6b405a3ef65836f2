"""Kernel of the paired-difference confidence sequences (``core.sequential``): the running
statistics of a stream of differences, one value at a time.

Per value ``x_i`` (Welford 1962): ``delta = x_i - mean_{i-1}``, ``mean_i = mean_{i-1} +
delta / i``, ``M2_i = M2_{i-1} + delta (x_i - mean_i)`` and the empirical-Bernstein
variance process of Howard et al. (2021), Theorem 4, ``V_i = V_{i-1} + delta^2``: the
squared deviation from the *predictable* mean of the values before it (``mean_0 = 0``).
"""

import numba

from core.config import NJIT_OPTIONS


@numba.njit(**NJIT_OPTIONS)
def _paired_update(values, n, mean, m2, v):
    """(n, mean, M2, V) after ``values`` in order; the inputs are the statistics before."""
    for i in range(values.shape[0]):
        x = values[i]
        # deviation from mean_{i-1}, the predictable estimate X^_{i-1} of Theorem 4
        delta = x - mean
        n += 1
        mean += delta / n
        m2 += delta * (x - mean)
        v += delta * delta
    return n, mean, m2, v
