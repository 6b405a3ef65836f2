"""Kernels of the online calibrators: Platt scaling by recursive Newton steps, and the
pool-adjacent-violators algorithm of isotonic regression.

Platt (1999): ``p = sigmoid(a s + b)`` maximising the likelihood of the smoothed targets
``t+ = (N+ + 1) / (N+ + 2)``, ``t- = 1 / (N- + 2)``. Online, each example adds its curvature
``p (1 - p) z z^T`` (``z = [s, 1]``) to a running sum forgotten by ``decay`` per example and
takes the Newton step ``(a, b) <- (a, b) - (H + R)^{-1} (p - t) z`` with the ridge
``R = ridge diag(mean s^2, 1)`` (scale-free: it weighs ``a s`` and ``b`` alike).
"""

import math

import numba

from core.config import NJIT_OPTIONS


@numba.njit(**NJIT_OPTIONS)
def _platt_sigmoid(u):
    """sigmoid(u) without overflow."""
    if u >= 0.0:
        return 1.0 / (1.0 + math.exp(-u))
    e = math.exp(u)
    return e / (1.0 + e)


@numba.njit(**NJIT_OPTIONS)
def _platt_step(coef, curvature, counts, moments, score, positive, decay, ridge):
    """One example ``(score, positive)``: decayed counts and moments, then one Newton step
    on ``coef = (a, b)``; ``curvature = (H_aa, H_ab, H_bb)``, ``counts = (N-, N+)``,
    ``moments = (sum of weights, sum of s^2)``. Returns False (nothing changed) for a score
    whose square overflows."""
    square = score * score
    if not math.isfinite(square):
        return False
    counts[0] *= decay
    counts[1] *= decay
    if positive:
        counts[1] += 1.0
        target = (counts[1] + 1.0) / (counts[1] + 2.0)
    else:
        counts[0] += 1.0
        target = 1.0 / (counts[0] + 2.0)
    moments[0] = decay * moments[0] + 1.0
    moments[1] = decay * moments[1] + square
    p = _platt_sigmoid(coef[0] * score + coef[1])
    w = p * (1.0 - p)
    curvature[0] = decay * curvature[0] + w * square
    curvature[1] = decay * curvature[1] + w * score
    curvature[2] = decay * curvature[2] + w
    residual = p - target
    h_aa = curvature[0] + ridge * moments[1] / moments[0]
    h_ab = curvature[1]
    h_bb = curvature[2] + ridge
    det = h_aa * h_bb - h_ab * h_ab
    if h_aa > 0.0 and det > 0.0:
        g_a = residual * score
        coef[0] -= (h_bb * g_a - h_ab * residual) / det
        coef[1] -= (h_aa * residual - h_ab * g_a) / det
    else:  # every score so far is 0: only the intercept is identified
        coef[1] -= residual / h_bb
    return True


@numba.njit(**NJIT_OPTIONS)
def _platt_learn_batch(coef, curvature, counts, moments, scores, positives, decay, ridge):
    """``_platt_step`` over a batch in order; returns how many examples were used."""
    used = 0
    for i in range(scores.shape[0]):
        used += _platt_step(coef, curvature, counts, moments, scores[i], positives[i], decay, ridge)
    return used


@numba.njit(**NJIT_OPTIONS)
def _isotonic_pav(totals, counts, sums, weights, ends):
    """Pool adjacent violators: the non-decreasing least-squares fit of points (in score
    order) with target sums ``totals`` over ``counts`` examples each.

    Fills the blocks' target sums, weights and exclusive end points; returns their number.
    """
    n_blocks = 0
    for i in range(totals.shape[0]):
        sums[n_blocks] = totals[i]
        weights[n_blocks] = counts[i]
        ends[n_blocks] = i + 1
        n_blocks += 1
        # merge while the last block's mean is below the previous one's
        while (
            n_blocks > 1
            and sums[n_blocks - 1] * weights[n_blocks - 2]
            < sums[n_blocks - 2] * weights[n_blocks - 1]
        ):
            sums[n_blocks - 2] += sums[n_blocks - 1]
            weights[n_blocks - 2] += weights[n_blocks - 1]
            ends[n_blocks - 2] = ends[n_blocks - 1]
            n_blocks -= 1
    return n_blocks
