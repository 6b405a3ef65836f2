"""The stacked one-vs-one kernels: a chunk of digits through the 45 pair models of a family in
one compiled loop, over the public kernel entries of :mod:`core.kernels`; the vote and the
updates are ``core.one_vs_one.OneVsOne``'s."""

import numba
import numpy as np

from core.config import NJIT_OPTIONS
from core.kernels import STEP_OK, dos_score_into, dos_step, linear_score, linear_step

N_CLASSES = 10
PA_MODE = 0  # plain PA (hard margin), the paper's updates; C is then ignored
PA_C = 1.0


@numba.njit(**NJIT_OPTIONS)
def nonzero_pixels(X, n, indices, values):
    """The non-zero pixels of row n of a dense chunk: exact for PA (a zero feature changes
    no score, norm or update), and most pixels of a digit are zero."""
    nnz = 0
    for j in range(X.shape[1]):
        v = X[n, j]
        if v != 0.0:
            indices[nnz] = j
            values[nnz] = v
            nnz += 1
    return nnz


@numba.njit(**NJIT_OPTIONS)
def ovo_winner(scores, first, second, votes, confidence):
    """core.one_vs_one.OneVsOne's decision: most votes, ties to the highest confidence (the
    scores signed towards the class, summed in the same order), then to the lowest class."""
    for c in range(votes.shape[0]):
        votes[c] = 0
        confidence[c] = 0.0
    for p in range(scores.shape[0]):
        if scores[p] > 0.0:
            votes[first[p]] += 1
        else:
            votes[second[p]] += 1
    for p in range(scores.shape[0]):
        confidence[first[p]] += scores[p]
    for p in range(scores.shape[0]):
        confidence[second[p]] -= scores[p]
    best = 0
    for c in range(1, votes.shape[0]):
        if votes[c] > votes[best] or (votes[c] == votes[best] and confidence[c] > confidence[best]):
            best = c
    return best


@numba.njit(**NJIT_OPTIONS)
def ovo_dos_stream(W, first, second, pairs_of, n_seen, n_updates, X, y, learn, predictions):
    """Predict every row of X (10-way vote of the 45 DoS pairs), then, if ``learn``, apply the
    PA updates of the pairs of its label (progressive validation). W: (45, 785, 2 rank), the
    pairs' feature-major [U^T | V^T] (``core.kernels``). Returns -1, or the row whose update
    failed (non-finite score)."""
    n_pairs, _, width = W.shape
    indices = np.empty(X.shape[1], dtype=np.int64)
    values = np.empty(X.shape[1])
    scores = np.empty(n_pairs)
    votes = np.empty(N_CLASSES, dtype=np.int64)
    confidence = np.empty(N_CLASSES)
    h = np.empty(width)
    for n in range(X.shape[0]):
        nnz = nonzero_pixels(X, n, indices, values)
        idx = indices[:nnz]
        val = values[:nnz]
        for p in range(n_pairs):
            a, b = dos_score_into(W[p], idx, val, h)
            scores[p] = a - b
        predictions[n] = ovo_winner(scores, first, second, votes, confidence)
        if learn:
            c = y[n]
            for k in range(pairs_of.shape[1]):
                p = pairs_of[c, k]
                label = 1.0 if first[p] == c else -1.0
                status, _, nu = dos_step(W[p], idx, val, label, PA_MODE, PA_C, n_seen[p], h)
                if status != STEP_OK:
                    return n
                n_seen[p] += 1
                n_updates[p] += nu > 0.0
    return -1


@numba.njit(**NJIT_OPTIONS)
def ovo_linear_stream(W, first, second, pairs_of, n_seen, n_updates, X, y, learn, predictions):
    """``ovo_dos_stream`` for the stacked linear PA weights W (45, 785), bias last."""
    n_pairs = W.shape[0]
    indices = np.empty(X.shape[1], dtype=np.int64)
    values = np.empty(X.shape[1])
    scores = np.empty(n_pairs)
    votes = np.empty(N_CLASSES, dtype=np.int64)
    confidence = np.empty(N_CLASSES)
    for n in range(X.shape[0]):
        nnz = nonzero_pixels(X, n, indices, values)
        idx = indices[:nnz]
        val = values[:nnz]
        for p in range(n_pairs):
            scores[p] = linear_score(W[p], idx, val, 1.0)
        predictions[n] = ovo_winner(scores, first, second, votes, confidence)
        if learn:
            c = y[n]
            for k in range(pairs_of.shape[1]):
                p = pairs_of[c, k]
                label = 1.0 if first[p] == c else -1.0
                status, _, tau = linear_step(W[p], idx, val, 1.0, label, PA_MODE, PA_C)
                if status != STEP_OK:
                    return n
                n_seen[p] += 1
                n_updates[p] += tau > 0.0
    return -1
