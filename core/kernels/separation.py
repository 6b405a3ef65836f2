"""Kernels of the linear-separation learners of Kharechko's thesis (chapters 2, 6).

An example ``(x, y)`` reaches the learners as the unit vector ``a = y z / |z|`` of the augmented
input ``z = [x, bias]`` (``bias`` = 1.0 with an intercept, stored last in ``w``; with ``bias`` = 0.0
there is no such entry and ``z = x``): the thesis's setting of a
set ``A`` of unit vectors to be separated from the origin (section 2.3). ``|z|`` is computed
after dividing by the largest ``|z_i|``, so any finite input is normalised without overflow; a
zero ``z`` carries no constraint. Zero values are skipped everywhere, so a sparse row and the
same row with explicit zeros give bit-identical results.

The space-dilation kernels keep ``B = D^{-1}`` (eq 2.5) as a dense C-ordered ``(n, n)`` matrix:
``b = B^T a``, ``w += eta B b / |b|``, ``B <- B (I + (beta - 1) bb^T / |b|^2)`` with
``beta = 1 / lambda`` for the dilation coefficient ``lambda``. ``B`` and ``eta`` are rescaled by
powers of two (exact) when ``max |B_ij|`` leaves ``[2^-256, 2^256]``: the pair only enters
through ``eta B``.
"""

import numba
import numpy as np

from core.config import NJIT_OPTIONS

#: what one step did
PASSIVE = 0  # correctly classified, a zero example, or frozen
UPDATED = 1  # a mistake, learned
FROZEN = 2  # a mistake met the "unseparable" stop and the policy is to freeze: not learned
RESTARTED = 3  # a mistake met the stop, the ellipsoid restarted and then learned the example

_SCALE_HIGH = 2.0**256
_SCALE_LOW = 2.0**-256


@numba.njit(**NJIT_OPTIONS)
def _sep_scaled_norm(indices, values, bias):
    """(m, r): m = max |z_i| and r = |z / m| (so |z| = m r); (0, 0) for z = 0."""
    m = abs(bias)
    for k in range(values.shape[0]):
        v = abs(values[k])
        if v > m:
            m = v
    if m == 0.0:
        return 0.0, 0.0
    total = (bias / m) * (bias / m)
    for k in range(values.shape[0]):
        if values[k] != 0.0:
            u = values[k] / m
            total += u * u
    return m, np.sqrt(total)


@numba.njit(**NJIT_OPTIONS)
def _sep_score(w, indices, values, bias):
    """w . z / |z| (0 for z = 0): the signed cosine-like margin of the example."""
    m, r = _sep_scaled_norm(indices, values, bias)
    if m == 0.0:
        return 0.0
    total = w[w.shape[0] - 1] * (bias / m) if bias != 0.0 else 0.0
    for k in range(values.shape[0]):
        if values[k] != 0.0:
            total += w[indices[k]] * (values[k] / m)
    return total / r


@numba.njit(**NJIT_OPTIONS)
def _sep_score_batch(w, indptr, indices, values, bias, scores):
    for i in range(indptr.shape[0] - 1):
        start, stop = indptr[i], indptr[i + 1]
        scores[i] = _sep_score(w, indices[start:stop], values[start:stop], bias)


@numba.njit(**NJIT_OPTIONS)
def _sep_direction(indices, values, bias, y, a):
    """Fill the dense unit vector a = y z / |z|; False (a = 0) for z = 0."""
    a[:] = 0.0
    m, r = _sep_scaled_norm(indices, values, bias)
    if m == 0.0:
        return False
    c = y / r
    for k in range(values.shape[0]):
        if values[k] != 0.0:
            a[indices[k]] = c * (values[k] / m)
    if bias != 0.0:
        a[a.shape[0] - 1] = c * (bias / m)
    return True


# -- Algorithm 1: the normalized perceptron ---------------------------------------------------
@numba.njit(**NJIT_OPTIONS)
def _perceptron_step(w, indices, values, bias, y):
    """Algorithm 1: on a mistake (y w.z <= 0) w <- w + y z/|z|. Returns (score, status)."""
    m, r = _sep_scaled_norm(indices, values, bias)
    if m == 0.0:
        return 0.0, PASSIVE
    score = _sep_score(w, indices, values, bias)
    if y * score > 0.0:
        return score, PASSIVE
    c = y / r  # a = y (z/m) / |z/m|
    for k in range(values.shape[0]):
        if values[k] != 0.0:
            w[indices[k]] += c * (values[k] / m)
    if bias != 0.0:
        w[w.shape[0] - 1] += c * (bias / m)
    return score, UPDATED


@numba.njit(**NJIT_OPTIONS)
def _perceptron_learn_batch(w, indptr, indices, values, bias, y, scores, status):
    for i in range(indptr.shape[0] - 1):
        start, stop = indptr[i], indptr[i + 1]
        scores[i], status[i] = _perceptron_step(
            w, indices[start:stop], values[start:stop], bias, y[i]
        )


# -- eq (2.5): space dilation ------------------------------------------------------------------
@numba.njit(**NJIT_OPTIONS)
def _sep_dilation_update(w, B, eta, a, beta, b, g):
    """One space-dilation update (eq 2.5) on the dense constraint ``a`` (any length > 0).

    b = B^T a, b_bar = b / |b|; w <- w + eta B b_bar; B <- B (I + (beta - 1) b_bar b_bar^T).
    Returns (False, eta) when B^T a = 0 (nothing to learn), else (True, eta rescaled with B).
    ``b`` and ``g`` are scratch vectors of length n.
    """
    n = w.shape[0]
    b[:] = 0.0
    for i in range(n):  # b = B^T a, row by row over the non-zero a_i
        ai = a[i]
        if ai != 0.0:
            for j in range(n):
                b[j] += ai * B[i, j]
    scale = 0.0
    for j in range(n):
        scale = max(scale, abs(b[j]))
    if scale == 0.0 or not np.isfinite(scale):
        return False, eta
    total = 0.0
    for j in range(n):
        b[j] /= scale
        total += b[j] * b[j]
    norm = np.sqrt(total)
    for j in range(n):
        b[j] /= norm
    for i in range(n):  # g = B b_bar
        total = 0.0
        for j in range(n):
            total += B[i, j] * b[j]
        g[i] = total
    for i in range(n):
        w[i] += eta * g[i]
    c = beta - 1.0
    biggest = 0.0
    for i in range(n):  # B <- B + (beta - 1) g b_bar^T
        gi = c * g[i]
        for j in range(n):
            B[i, j] += gi * b[j]
            biggest = max(biggest, abs(B[i, j]))
    if biggest > _SCALE_HIGH or (0.0 < biggest < _SCALE_LOW):
        exponent = np.floor(np.log2(biggest))
        factor = 2.0 ** (-exponent)
        for i in range(n):
            for j in range(n):
                B[i, j] *= factor
        eta /= factor
    return True, eta


@numba.njit(**NJIT_OPTIONS)
def _shor_step(w, B, indices, values, bias, y, eta, beta, growth, a, b, g):
    """Shor's space-dilation perceptron (eq 2.5): on a mistake, a dilation update then
    eta <- growth * eta. Returns (score, status, eta)."""
    score = _sep_score(w, indices, values, bias)
    if y * score > 0.0 or not _sep_direction(indices, values, bias, y, a):
        return score, PASSIVE, eta
    changed, eta = _sep_dilation_update(w, B, eta, a, beta, b, g)
    if not changed:
        return score, PASSIVE, eta
    return score, UPDATED, eta * growth


@numba.njit(**NJIT_OPTIONS)
def _shor_learn_batch(w, B, indptr, indices, values, bias, y, eta, beta, growth, scores, status):
    n = w.shape[0]
    a, b, g = np.empty(n), np.empty(n), np.empty(n)
    for i in range(indptr.shape[0] - 1):
        start, stop = indptr[i], indptr[i + 1]
        scores[i], status[i], eta = _shor_step(
            w, B, indices[start:stop], values[start:stop], bias, y[i], eta, beta, growth, a, b, g
        )
    return eta


# -- Algorithm 2: the ellipsoid method as a perceptron -----------------------------------------
@numba.njit(**NJIT_OPTIONS)
def _ellipsoid_restart(w, B, eta0):
    w[:] = 0.0
    B[:, :] = 0.0
    for i in range(w.shape[0]):
        B[i, i] = 1.0
    return eta0


@numba.njit(**NJIT_OPTIONS)
def _ellipsoid_step(
    w, B, indices, values, bias, y, eta, t, frozen, eta0, beta, growth, log_shrink,
    log_threshold, restart, a, b, g,
):  # fmt: skip
    """Algorithm 2 on one example. log rho_t = t log_shrink (rho_0 = 1); on a mistake with
    log rho_t < log_threshold the stream is not separable with the assumed margin: freeze
    (``restart`` False) or restart from the unit ball and learn the example.
    Returns (score, status, eta, t, frozen)."""
    score = _sep_score(w, indices, values, bias)
    if frozen or y * score > 0.0 or not _sep_direction(indices, values, bias, y, a):
        return score, PASSIVE, eta, t, frozen
    status = UPDATED
    if t * log_shrink < log_threshold:  # "if rho_t < rho then return unseparable"
        if not restart:
            return score, FROZEN, eta, t, True
        eta = _ellipsoid_restart(w, B, eta0)
        t = 0
        status = RESTARTED
    changed, eta = _sep_dilation_update(w, B, eta, a, beta, b, g)
    if not changed:
        return score, PASSIVE if status == UPDATED else status, eta, t, frozen
    return score, status, eta * growth, t + 1, frozen


@numba.njit(**NJIT_OPTIONS)
def _ellipsoid_learn_batch(
    w, B, indptr, indices, values, bias, y, eta, t, frozen, eta0, beta, growth, log_shrink,
    log_threshold, restart, scores, status,
):  # fmt: skip
    n = w.shape[0]
    a, b, g = np.empty(n), np.empty(n), np.empty(n)
    for i in range(indptr.shape[0] - 1):
        start, stop = indptr[i], indptr[i + 1]
        scores[i], status[i], eta, t, frozen = _ellipsoid_step(
            w, B, indices[start:stop], values[start:stop], bias, y[i], eta, t, frozen, eta0,
            beta, growth, log_shrink, log_threshold, restart, a, b, g,
        )  # fmt: skip
    return eta, t, frozen


@numba.njit(**NJIT_OPTIONS)
def _ellipsoid_interval(w, B, radius, indices, values, bias):
    """(w.z/|z|, radius |B^T z/|z||): the score at the centre and the half-width of the range
    of v.z/|z| over the ellipsoid {v : |B^{-1}(v - w)| <= radius}."""
    n = w.shape[0]
    m, r = _sep_scaled_norm(indices, values, bias)
    if m == 0.0:
        return 0.0, 0.0
    score = _sep_score(w, indices, values, bias)
    total = 0.0
    for j in range(n):  # (B^T z)_j over the non-zero z_i
        bj = B[n - 1, j] * (bias / m) if bias != 0.0 else 0.0
        for k in range(values.shape[0]):
            if values[k] != 0.0:
                bj += B[indices[k], j] * (values[k] / m)
        total += bj * bj
    return score, radius * np.sqrt(total) / r


@numba.njit(**NJIT_OPTIONS)
def _ellipsoid_interval_batch(w, B, radius, indptr, indices, values, bias, scores, widths):
    for i in range(indptr.shape[0] - 1):
        start, stop = indptr[i], indptr[i + 1]
        scores[i], widths[i] = _ellipsoid_interval(
            w, B, radius, indices[start:stop], values[start:stop], bias
        )


# -- Algorithm 7: counterexamples to positive semidefiniteness ---------------------------------
@numba.njit(**NJIT_OPTIONS)
def _psd_swap(S, R, perm, j, i):
    """Swap positions i and j of the remaining block (rows and columns of S, columns of the
    computed rows of R, and the permutation)."""
    if i == j:
        return
    n = S.shape[0]
    for k in range(n):
        S[i, k], S[j, k] = S[j, k], S[i, k]
    for k in range(n):
        S[k, i], S[k, j] = S[k, j], S[k, i]
    for k in range(j):
        R[k, i], R[k, j] = R[k, j], R[k, i]
    perm[i], perm[j] = perm[j], perm[i]


@numba.njit(**NJIT_OPTIONS)
def _psd_counterexample(S, tol, R, perm, v):
    """Algorithm 7 (pivoted incomplete Cholesky), correct for indefinite matrices.

    ``S`` (n, n) holds a symmetric matrix A on entry and is overwritten by Schur complements;
    ``R`` (n, n) and ``perm`` (n,) are scratch. At step j the remaining block S[j:, j:] is the
    Schur complement of the pivots taken so far. A residual diagonal entry below ``-tol`` gives
    w = e_i; when every residual diagonal entry is at most ``tol`` but an off-diagonal residual
    exceeds ``tol`` in magnitude (the case the printed algorithm misses: e.g. [[0, 1], [1, 0]]
    stops with "positive semidefinite"), w is the eigenvector of that 2 x 2 residual block with
    the negative eigenvalue. The leading part of v follows by back-substitution so that
    v^T A v = w^T S w < 0. Returns True with v (unit, original order) or False: A is positive
    semidefinite up to ``tol`` (A = R^T R + E with |E_ij| <= tol on the last block).
    """
    n = S.shape[0]
    for i in range(n):
        perm[i] = i
    found = False
    j = 0
    wp, wq, p, q = 1.0, 0.0, -1, -1
    while j < n:
        imin, imax = j, j
        for i in range(j + 1, n):
            if S[i, i] < S[imin, imin]:
                imin = i
            if S[i, i] > S[imax, imax]:
                imax = i
        if S[imin, imin] < -tol:  # a negative residual: w = e_imin
            found, p, wp = True, imin, 1.0
            break
        if S[imax, imax] <= tol:  # nothing left to pivot on: check the off-diagonal residual
            best = tol
            for i in range(j, n):
                for k in range(i + 1, n):
                    if abs(S[i, k]) > best:
                        best, p, q = abs(S[i, k]), i, k
            if p >= 0:
                found = True
                x, z, c = S[p, p], S[q, q], S[p, q]
                half = 0.5 * (x - z)
                lam = 0.5 * (x + z) - np.sqrt(half * half + c * c)
                # eigenvector of [[x, c], [c, z]] for lam, the better-conditioned of two forms
                if abs(x - lam) >= abs(z - lam):
                    wp, wq = -c, x - lam
                else:
                    wp, wq = z - lam, -c
            break
        _psd_swap(S, R, perm, j, imax)
        rjj = np.sqrt(S[j, j])
        R[j, j] = rjj
        for k in range(j + 1, n):
            R[j, k] = S[j, k] / rjj
        for i in range(j + 1, n):  # Schur complement of the new pivot
            rji = R[j, i]
            if rji != 0.0:
                for k in range(j + 1, n):
                    S[i, k] -= rji * R[j, k]
        j += 1
    if not found:
        return False
    # w on the remaining block (positions >= j), zero elsewhere; leading part by back-substitution
    v[:] = 0.0
    v[p] = wp
    if q >= 0:
        v[q] = wq
    for i in range(j - 1, -1, -1):
        total = 0.0
        for k in range(i + 1, n):
            total += R[i, k] * v[k]
        v[i] = -total / R[i, i]
    norm = 0.0
    for i in range(n):
        norm += v[i] * v[i]
    norm = np.sqrt(norm)
    for i in range(n):  # back to the original order
        S[0, perm[i]] = v[i] / norm
    for i in range(n):
        v[i] = S[0, i]
    return True
