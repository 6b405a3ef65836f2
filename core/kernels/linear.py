"""Kernels of the linear passive-aggressive classifier (Crammer et al. 2006).

``w`` has ``n_features + 1`` entries, the bias last; the example is ``z = [x, bias]`` with
``bias`` = 1.0 (intercept) or 0.0 (no intercept, so ``w[-1]`` never moves).
Modes: 0 = PA (eq 2 of the DoS paper), 1 = PA-I, 2 = PA-II.
"""

import numba
import numpy as np

from core.config import NJIT_OPTIONS

#: status codes of the step kernels
STEP_OK = 0
STEP_NOT_FINITE = 1


@numba.njit(**NJIT_OPTIONS)
def _linear_score(w, indices, values, bias):
    """w . z over the active features of z = [x, bias]."""
    total = w[w.shape[0] - 1] * bias
    for k in range(indices.shape[0]):
        total += w[indices[k]] * values[k]
    return total


@numba.njit(**NJIT_OPTIONS)
def _linear_step_size(loss, squared_norm, mode, C):
    """tau of PA (loss/|z|^2), PA-I (min(C, loss/|z|^2)) or PA-II (loss/(|z|^2 + 1/2C))."""
    if loss <= 0.0 or squared_norm == 0.0:
        # passive, or z = 0 (no intercept, empty row): no change of w can move the score
        return 0.0
    if mode == 0:
        return loss / squared_norm
    if mode == 1:
        return min(C, loss / squared_norm)
    return loss / (squared_norm + 0.5 / C)


@numba.njit(**NJIT_OPTIONS)
def _linear_step(w, indices, values, bias, y, mode, C):
    """One PA update in place. Returns (status, score before the update, tau)."""
    score = _linear_score(w, indices, values, bias)
    squared_norm = bias * bias
    for k in range(indices.shape[0]):
        squared_norm += values[k] * values[k]
    if not (np.isfinite(score) and np.isfinite(squared_norm)):
        return STEP_NOT_FINITE, score, 0.0
    tau = _linear_step_size(max(0.0, 1.0 - y * score), squared_norm, mode, C)
    if tau > 0.0:
        step = tau * y
        if not np.isfinite(step):
            # PA's l / |z|^2 overflows for a subnormal |z|^2 (no intercept, tiny values)
            return STEP_NOT_FINITE, score, 0.0
        for k in range(indices.shape[0]):
            w[indices[k]] += step * values[k]
        w[w.shape[0] - 1] += step * bias
    return STEP_OK, score, tau


@numba.njit(**NJIT_OPTIONS)
def _linear_learn_batch(w, indptr, indices, values, bias, y, mode, C, scores, taus):
    """PA updates over the rows of a CSR batch, in order.

    Fills ``scores`` (before each update) and ``taus``; returns (index of the first row whose
    squared norm or score is not finite, or -1; number of rows learned). Squared norms are
    checked for every row before the first update, so bad inputs apply nothing at all.
    """
    n_rows = indptr.shape[0] - 1
    for i in range(n_rows):
        squared_norm = bias * bias
        for k in range(indptr[i], indptr[i + 1]):
            squared_norm += values[k] * values[k]
        if not np.isfinite(squared_norm):
            return i, 0
    for i in range(n_rows):
        start, stop = indptr[i], indptr[i + 1]
        status, score, tau = _linear_step(
            w, indices[start:stop], values[start:stop], bias, y[i], mode, C
        )
        scores[i] = score
        taus[i] = tau
        if status != STEP_OK:
            return i, i
    return -1, n_rows


@numba.njit(**NJIT_OPTIONS)
def _linear_score_batch(w, indptr, indices, values, bias, scores):
    """Scores of every row of a CSR batch."""
    for i in range(indptr.shape[0] - 1):
        start, stop = indptr[i], indptr[i + 1]
        scores[i] = _linear_score(w, indices[start:stop], values[start:stop], bias)
