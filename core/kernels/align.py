"""Kernels of the alignment and averaging of DoS models (``core.align``, section 3.4).

The arrays are 2 x rank x n_features floats (64 MB at 2^18 features and rank 16) and the
averaging fold runs inside the model's writer lock. ``_align_light_cone`` and
``_align_unboost`` evaluate, element by element, exactly the numpy expressions of
``min_norm_boost`` (the same roundings) in one pass each; the ``_fold_*`` kernels stream the
whole fold of ``aligned_average`` over the columns without temporaries of that size.
"""

import numba
import numpy as np

from core.config import NJIT_OPTIONS


@numba.njit(**NJIT_OPTIONS)
def _align_light_cone(U, V, S, D):
    """S = U + V and D = U - V (the light-cone coordinates of the boost, eqs 13-14)."""
    for i in range(U.shape[0]):
        for j in range(U.shape[1]):
            u = U[i, j]
            v = V[i, j]
            S[i, j] = u + v
            D[i, j] = u - v


@numba.njit(**NJIT_OPTIONS)
def _align_unboost(S, D, a, b):
    """In place: S <- 0.5 (a S + b D), D <- 0.5 (a S - b D), i.e. numpy's
    ``S, D = S * a, D * b; 0.5 * (S + D), 0.5 * (S - D)`` (back from light-cone
    coordinates after scaling S by a = e^-phi and D by b = e^phi)."""
    for i in range(S.shape[0]):
        for j in range(S.shape[1]):
            s = S[i, j] * a
            d = D[i, j] * b
            S[i, j] = 0.5 * (s + d)
            D[i, j] = 0.5 * (s - d)


# -- the streaming fold of a DoS pair into its running average (``core.align.aligned_average``)
# Three passes over the columns (features) of U and V, each column read whole and nothing
# materialised: the squared norms of the light-cone coordinates, the cross-covariances of the
# min-norm forms (for Procrustes), and the averaged columns. Columns are visited in order and
# every sum is accumulated in that order, so the result depends only on the values, not on
# the arrays' memory layout (feature-major storage or C-contiguous state copies).

#: columns per partial sum of ``_fold_norms`` (a two-level sum: per block, then blocks)
_FOLD_BLOCK = 1024


@numba.njit(**NJIT_OPTIONS)
def _fold_norms(U, V):
    """(|U + V|_F^2, |U - V|_F^2), summed column by column in blocks of columns."""
    total_s = 0.0
    total_d = 0.0
    n = U.shape[1]
    for start in range(0, n, _FOLD_BLOCK):
        block_s = 0.0
        block_d = 0.0
        for j in range(start, min(start + _FOLD_BLOCK, n)):
            for i in range(U.shape[0]):
                u = np.float64(U[i, j])
                v = np.float64(V[i, j])
                s = u + v
                d = u - v
                block_s += s * s
                block_d += d * d
        total_s += block_s
        total_d += block_d
    return total_s, total_d


@numba.njit(**NJIT_OPTIONS)
def _fold_column(U, V, j, a, b, u, v):
    """Column j of the min-norm form (eqs 15-16): u = (a S + b D) / 2, v = (a S - b D) / 2,
    with S = U + V, D = U - V scaled by a = e^-phi and b = e^phi."""
    for i in range(U.shape[0]):
        x = np.float64(U[i, j])
        y = np.float64(V[i, j])
        s = (x + y) * a
        d = (x - y) * b
        u[i] = 0.5 * (s + d)
        v[i] = 0.5 * (s - d)


@numba.njit(**NJIT_OPTIONS)
def _fold_cross(U1, V1, a1, b1, U2, V2, a2, b2, CU, CV):
    """CU = U1' U2'^T and CV = V1' V2'^T over the min-norm forms (the matrices whose SVDs
    give the Procrustes rotations, eqs 26-27), accumulated column by column."""
    r = U1.shape[0]
    u1 = np.empty(r)
    v1 = np.empty(r)
    u2 = np.empty(r)
    v2 = np.empty(r)
    CU[:, :] = 0.0
    CV[:, :] = 0.0
    for j in range(U1.shape[1]):
        _fold_column(U1, V1, j, a1, b1, u1, v1)
        _fold_column(U2, V2, j, a2, b2, u2, v2)
        for i in range(r):  # (one inner loop per matrix: each vectorises)
            x = u1[i]
            for k in range(r):
                CU[i, k] += x * u2[k]
        for i in range(r):
            x = v1[i]
            for k in range(r):
                CV[i, k] += x * v2[k]


@numba.njit(**NJIT_OPTIONS)
def _fold_write(U1, V1, a1, b1, U2, V2, a2, b2, omega_t, lam_t, m, out_u, out_v):
    """The running mean (eq 28) of the min-norm average (U1', V1') and the min-norm model
    (U2', V2') rotated onto it (omega U2', lam V2'; the rotations given transposed, C
    order), column by column into (out_u, out_v), which may be (U1, V1) themselves: a
    column is read whole before it is written. (omega u)_i sums over k in order."""
    r = U1.shape[0]
    u1 = np.empty(r)
    v1 = np.empty(r)
    u2 = np.empty(r)
    v2 = np.empty(r)
    ru = np.empty(r)
    rv = np.empty(r)
    for j in range(U1.shape[1]):
        _fold_column(U1, V1, j, a1, b1, u1, v1)
        _fold_column(U2, V2, j, a2, b2, u2, v2)
        ru[:] = 0.0
        rv[:] = 0.0
        for k in range(r):  # (over i inside: no reduction in the inner loop, it vectorises)
            x = u2[k]
            for i in range(r):
                ru[i] += omega_t[k, i] * x
        for k in range(r):
            x = v2[k]
            for i in range(r):
                rv[i] += lam_t[k, i] * x
        for i in range(r):
            out_u[i, j] = u1[i] + (ru[i] - u1[i]) / m
            out_v[i, j] = v1[i] + (rv[i] - v1[i]) / m


@numba.njit(**NJIT_OPTIONS)
def _fold_min_norm(U, V, a, b, out_u, out_v):
    """The min-norm form of (U, V) column by column into (out_u, out_v) (m = 1)."""
    r = U.shape[0]
    u = np.empty(r)
    v = np.empty(r)
    for j in range(U.shape[1]):
        _fold_column(U, V, j, a, b, u, v)
        for i in range(r):
            out_u[i, j] = u[i]
            out_v[i, j] = v[i]


@numba.njit(**NJIT_OPTIONS)
def _align_rotate(U, V, a, b, omega_t, lam_t, out_u, out_v):
    """The min-norm form of (U, V) rotated, (omega U', lam V') (eqs 15-16 and 26-27; the
    rotations given transposed, C order), column by column into (out_u, out_v): the
    per-worker part of the parallel merge (``core.parallel.align_to``)."""
    r = U.shape[0]
    u = np.empty(r)
    v = np.empty(r)
    ru = np.empty(r)
    rv = np.empty(r)
    for j in range(U.shape[1]):
        _fold_column(U, V, j, a, b, u, v)
        ru[:] = 0.0
        rv[:] = 0.0
        for k in range(r):
            x = u[k]
            for i in range(r):
                ru[i] += omega_t[k, i] * x
        for k in range(r):
            x = v[k]
            for i in range(r):
                rv[i] += lam_t[k, i] * x
        for i in range(r):
            out_u[i, j] = ru[i]
            out_v[i, j] = rv[i]
