"""Kernels of the alignment and averaging of DoS models (``core.align``, section 3.4).

Each evaluates, element by element, exactly the numpy expression it replaces (the same
operations in the same order, so the same roundings), in one pass over the arrays instead
of one pass and one temporary per operation: the arrays are 2 x rank x n_features floats
(64 MB at 2^18 features and rank 16) and the averaging fold runs inside the writer's lock.
"""

import numba

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


@numba.njit(**NJIT_OPTIONS)
def _align_running_mean(previous, new, m, out):
    """out = previous + (new - previous) / m (eq 28), as numpy evaluates it."""
    for i in range(previous.shape[0]):
        for j in range(previous.shape[1]):
            out[i, j] = previous[i, j] + (new[i, j] - previous[i, j]) / m
