"""Kernels of the multi-class reductions over stacked binary models.

The binary models of a reduction (``core.reduction``) are stacked side by side in one
feature-major array: ``W`` of shape (n_active + 1, n_models * width) whose row k holds the
parameters of active feature k of every model (``width`` = 2 * rank for DoS, the columns of
``U`` then ``V`` as in ``core.kernels.dos``; 1 for a linear model), the last row the bias.
Scoring a block of rows against all models is then one product ``P = Z W`` (``z = [x, 1]``),
left to BLAS (dense blocks) or scipy (sparse ones) by the caller.

One-vs-one learning with progressive scores (every pair scores every example just before it
is learned) uses that the DoS step of Saul 2021 (eqs 17-20) changes a pair's parameters by a
rank-one term, ``W_p += delta z_j^T / s_j``: the projections of the block's later rows
``i > j`` move by ``delta (z_j . z_i) / s_j``, so the block is projected once at its start
and corrected with the block's Gram matrix ``G = Z Z^T`` after each update (exact in
arithmetic; O(block * width) per update instead of O(nnz * width) per pair per row). The
linear PA step ``w_p += tau y z`` is rank one too (``_ovo_linear_learn_block``).
"""

import numba
import numpy as np

from core.config import NJIT_OPTIONS
from core.kernels.dos import _dos_direction
from core.kernels.linear import _linear_step_size


@numba.njit(**NJIT_OPTIONS)
def _stack_dos_scores(P, n_rows, rank, scores):
    """scores[i, p] = |U_p z_i|^2 - |V_p z_i|^2 (eq 10) from the projections P (blocks of
    2 * rank columns per model)."""
    n_models = scores.shape[1]
    for i in range(n_rows):
        for p in range(n_models):
            at = 2 * rank * p
            a = 0.0
            b = 0.0
            for r in range(rank):
                a += P[i, at + r] * P[i, at + r]
                b += P[i, at + rank + r] * P[i, at + rank + r]
            scores[i, p] = a - b


@numba.njit(**NJIT_OPTIONS)
def _stack_densify(indptr, indices, values, start, stop, X):
    """X[i - start] = x_i (dense, n_active columns) for rows start..stop of a CSR batch."""
    X[:, :] = 0.0
    for i in range(start, stop):
        for k in range(indptr[i], indptr[i + 1]):
            X[i - start, indices[k]] = values[k]


@numba.njit(**NJIT_OPTIONS)
def _ovo_dos_learn_block(
    W, rank, indptr, indices, values, start, stop, targets, pairs_of, first, mode, C, seen,
    P, G, h, scores, losses, counts, updates,
):  # fmt: skip
    """One-vs-one DoS learning of rows start..stop of a CSR batch in order, every pair
    scoring every row just before the row is learned.

    ``P``: the block's projections by W at the block's start, P[i - start] = W^T z_i;
    ``G``: its Gram matrix G[a, b] = z_a . z_b (b > a is read). ``pairs_of[c]``: the pairs
    that learn from class c; ``first[p]``: the class that is +1 for pair p; ``seen[p]``: the
    examples pair p has learned (footnote 1's hidden unit), ``updates[p]`` its aggressive
    steps, both counted on. Fills rows of ``scores`` (n_rows, n_pairs) before each row's
    updates, ``losses`` (hinge losses summed over the pairs that learn) and ``counts``
    (their aggressive steps); h: scratch of length 2 rank. Returns the first row whose
    learning pairs' scores are not finite (nothing of it learned), or -1.
    """
    width = 2 * rank
    bias_row = W.shape[0] - 1
    for i in range(start, stop):
        li = i - start
        _stack_dos_scores(P[li : li + 1], 1, rank, scores[i : i + 1])
        learners = pairs_of[targets[i]]
        for p in learners:
            if not np.isfinite(scores[i, p]):
                return i
        s = 1.0
        for k in range(indptr[i], indptr[i + 1]):
            s += values[k] * values[k]
        inverse = 1.0 / s
        loss = 0.0
        count = 0
        for p in learners:
            y = 1.0 if first[p] == targets[i] else -1.0
            at = width * p
            a = 0.0
            b = 0.0
            for r in range(rank):
                h[r] = P[li, at + r]
                h[rank + r] = P[li, at + rank + r]
                a += h[r] * h[r]
                b += h[rank + r] * h[rank + r]
            loss += max(0.0, 1.0 - y * (a - b))
            nu = 0.0 if y * (a - b) >= 1.0 else _dos_direction(h, a, b, s, y, mode, C, seen[p])
            seen[p] += 1
            if nu == 0.0:
                continue
            count += 1
            updates[p] += 1
            # W_p += delta z^T / s, as core.kernels.dos._dos_axpy_rows
            for k in range(indptr[i], indptr[i + 1]):
                c = values[k] * inverse
                j = indices[k]
                for r in range(width):
                    W[j, at + r] += c * h[r]
            for r in range(width):
                W[bias_row, at + r] += inverse * h[r]
            # the block's later rows m: W_p^T z_m moves by delta (z_i . z_m) / s
            for m in range(li + 1, stop - start):
                c = G[li, m] * inverse
                for r in range(width):
                    P[m, at + r] += c * h[r]
        losses[i] = loss
        counts[i] = count
    return -1


@numba.njit(**NJIT_OPTIONS)
def _ovo_linear_learn_block(
    W, bias, indptr, indices, values, start, stop, targets, pairs_of, first, mode, C, seen,
    P, G, scores, losses, counts, updates,
):  # fmt: skip
    """``_ovo_dos_learn_block`` for linear PA pairs (Crammer et al. 2006): pair p's score is
    P[i - start, p] and its step ``w_p += tau y z`` (z = [x, bias]) moves the block's later
    scores by ``tau y (z_i . z_m)``. Steps are computed as ``core.kernels.linear._linear_step``
    does; a row whose step overflows (PA's l / |z|^2 for a subnormal |z|^2) is refused whole,
    as one whose scores are not finite. Returns that row, or -1."""
    bias_row = W.shape[0] - 1
    n_learners = pairs_of.shape[1]
    steps = np.empty(n_learners)
    for i in range(start, stop):
        li = i - start
        for p in range(scores.shape[1]):
            scores[i, p] = P[li, p]
        learners = pairs_of[targets[i]]
        for p in learners:
            if not np.isfinite(scores[i, p]):
                return i
        squared_norm = bias * bias
        for k in range(indptr[i], indptr[i + 1]):
            squared_norm += values[k] * values[k]
        loss = 0.0
        for n in range(n_learners):
            p = learners[n]
            y = 1.0 if first[p] == targets[i] else -1.0
            hinge = max(0.0, 1.0 - y * scores[i, p])
            loss += hinge
            steps[n] = _linear_step_size(hinge, squared_norm, mode, C) * y
            if not np.isfinite(steps[n]):
                return i
        count = 0
        for n in range(n_learners):
            p = learners[n]
            seen[p] += 1
            step = steps[n]
            if step == 0.0:
                continue
            count += 1
            updates[p] += 1
            for k in range(indptr[i], indptr[i + 1]):
                W[indices[k], p] += step * values[k]
            W[bias_row, p] += step * bias
            for m in range(li + 1, stop - start):
                P[m, p] += step * G[li, m]
        losses[i] = loss
        counts[i] = count
    return -1
