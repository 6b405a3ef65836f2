"""Slow plain-numpy references of the kernels, written from the papers' equations.

They deliberately use a different route than the kernels (dense matrices, the paper's
variable nu instead of q = 1 - nu, scipy's brentq instead of safeguarded Newton) so that
agreement means something.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq


def augment(x: np.ndarray, bias: float = 1.0) -> np.ndarray:
    return np.append(np.asarray(x, dtype=float), bias)


def linear_pa_step(w: np.ndarray, z: np.ndarray, y: float, mode: str = "pa", C: float = 1.0):
    """Crammer et al. 2006: returns (new w, score, tau)."""
    score = float(w @ z)
    loss = max(0.0, 1.0 - y * score)
    sq = float(z @ z)
    if loss == 0.0 or sq == 0.0:
        return w.copy(), score, 0.0
    tau = {"pa": loss / sq, "pa1": min(C, loss / sq), "pa2": loss / (sq + 1.0 / (2.0 * C))}[mode]
    return w + tau * y * z, score, tau


def dos_score(U: np.ndarray, V: np.ndarray, z: np.ndarray) -> float:
    """Eq (10) in its quadratic form z^T (U^T U - V^T V) z."""
    return float(z @ (U.T @ U - V.T @ V) @ z)


def dos_pa_step(U, V, z, y, mode="pa", C=1.0, t=0):
    """DoS passive-aggressive update (eqs 17-20 and the soft-margin variants).

    Returns (U, V, score, nu). nu solves eq (25), d/dnu [a/(1-y nu) + b/(1+y nu) - nu] = 0,
    plus nu/(4 C s) for PA-II; PA-I clips nu at 2 C s; eqs (19)-(20) are applied as written.
    """
    a = float(np.sum((U @ z) ** 2))
    b = float(np.sum((V @ z) ** 2))
    s = float(z @ z)
    score = a - b
    if y * score >= 1.0:
        return U.copy(), V.copy(), score, 0.0
    kappa = 1.0 / (4.0 * C * s) if mode == "pa2" else 0.0

    def derivative(nu):  # eq (25) (+ PA-II term)
        return y * a / (1 - y * nu) ** 2 - y * b / (1 + y * nu) ** 2 - 1.0 + kappa * nu

    grow = a if y > 0 else b
    shrink = b if y > 0 else a
    if grow == 0.0 and -shrink / 4 - 1 + kappa <= 0:
        nu = 1.0
    else:
        # nu <= 1 - sqrt(g / (1 + h)), where the derivative is >= 0
        hi = 1.0 - np.sqrt(grow / (1 + shrink))
        if grow == 0.0 or hi == 1.0:
            hi = float(np.nextafter(1.0, 0.0))
        nu = brentq(derivative, 0.0, hi, xtol=1e-300, rtol=1e-15, maxiter=500)
    if mode == "pa1":
        nu = min(nu, 2.0 * C * s)
    alpha = nu
    if nu == 1.0:
        # footnote 1: the growing side's projection is zero; give it length^2 1 - kappa + h/4
        # along hidden unit t mod rank, and halve the other side.
        e = np.zeros(U.shape[0])
        e[t % U.shape[0]] = np.sqrt(1.0 - kappa + shrink / 4.0)
        if y > 0:
            U_new = U + np.outer(e, z) / s
            V_new = V - 0.5 * np.outer(V @ z, z) / s
        else:
            V_new = V + np.outer(e, z) / s
            U_new = U - 0.5 * np.outer(U @ z, z) / s
        return U_new, V_new, score, nu
    U_new = U + (alpha / (y - alpha)) * np.outer(U @ z, z) / s  # eq (19)
    V_new = V - (alpha / (y + alpha)) * np.outer(V @ z, z) / s  # eq (20)
    return U_new, V_new, score, nu


# ---------------------------------------------------------------------------------------------
# Projective quadratic regression (core/pqr.py, core/kernels/pqr.py).
# ../shared/papers/projective-quadratic-regression.txt: eqs (3), (7), (9)-(13), Algorithm 2.
# Dense on purpose: x~ goes through the projection matrix P of eq (13), the matrix C of eq (3)
# is filled element by element from eq (7), and Algorithm 2 runs on dense vectors.
# Pair coordinates use the layout of core.kernels.pqr: M[a, b] (slots a < b <= k, slot k = L)
# sits at d + 1 + b (b - 1) / 2 + a.
# ---------------------------------------------------------------------------------------------


def pqr_projection(members, n_features: int) -> np.ndarray:
    """P of eq (13), (k + 1) x d: row s < k picks feature members[s] (a zero row for an empty
    slot, members[s] = -1), row k sums the features of L."""
    k = len(members)
    P = np.zeros((k + 1, n_features))
    in_h = np.zeros(n_features, dtype=bool)
    for s, j in enumerate(members):
        if j >= 0:
            P[s, j] = 1.0
            in_h[j] = True
    P[k, ~in_h] = 1.0
    return P


def pqr_expand_dense(x, members) -> np.ndarray:
    """x~ of eq (12) / Definition 3, dense, length d + 1 + k (k + 1) / 2: [x, 1, pairs of Px]."""
    x = np.asarray(x, dtype=float)
    k = len(members)
    px = pqr_projection(members, x.shape[0]) @ x
    pairs = np.zeros(k * (k + 1) // 2)
    for b in range(k + 1):
        for a in range(b):
            pairs[b * (b - 1) // 2 + a] = px[a] * px[b]
    return np.concatenate([x, [1.0], pairs])


def pqr_matrix(weights, members, n_features: int) -> np.ndarray:
    """C of eq (3), (d + 1) x (d + 1), with A filled entry by entry from eq (7) and C[d, d] =
    2 b, so that 1/2 x^T C x^ (eq 9, x^ = [x, 1]) equals w . x~ for expanded weights w."""
    d, k = n_features, len(members)
    weights = np.asarray(weights, dtype=float)
    pairs = weights[d + 1 :]
    slot = {int(j): s for s, j in enumerate(members) if j >= 0}
    A = np.zeros((d, d))
    for i in range(d):
        for j in range(d):
            if i == j:
                continue  # A_ii = 0
            si, sj = slot.get(i), slot.get(j)
            if si is not None and sj is not None:  # p_ij, both in H
                lo, hi = min(si, sj), max(si, sj)
                A[i, j] = pairs[hi * (hi - 1) // 2 + lo]
            elif si is not None:  # q_i, i in H and j in L
                A[i, j] = pairs[k * (k - 1) // 2 + si]
            elif sj is not None:  # q_j by symmetry
                A[i, j] = pairs[k * (k - 1) // 2 + sj]
    C = np.zeros((d + 1, d + 1))
    C[:d, :d] = A
    C[:d, d] = C[d, :d] = weights[:d]
    C[d, d] = 2.0 * weights[d]
    return C


def pqr_interaction_from_projection(weights, members, n_features: int) -> np.ndarray:
    """A = P^T M P of eq (13), M the symmetric zero-diagonal (k + 1) x (k + 1) pair matrix."""
    k = len(members)
    pairs = np.asarray(weights, dtype=float)[n_features + 1 :]
    M = np.zeros((k + 1, k + 1))
    for b in range(k + 1):
        for a in range(b):
            M[a, b] = M[b, a] = pairs[b * (b - 1) // 2 + a]
    P = pqr_projection(members, n_features)
    return P.T @ M @ P


def pqr_train(
    X,
    y,
    members,
    alpha: float,
    beta: float,
    l1: float,
    l2: float,
    task: str = "binary",
    optimizer: str = "ftrl",
    z=None,
    n=None,
):
    """Algorithm 2 (FTRL-Proximal) or proximal OGD over a stream, separation fixed.

    Starts from z = n = 0 (or copies of the given z, n); returns (z, n, scores), the scores
    w . x~ taken before each update. For OGD, z holds the weights.
    """
    X = np.asarray(X, dtype=float)
    d, k = X.shape[1], len(members)
    size = d + 1 + k * (k + 1) // 2
    z = np.zeros(size) if z is None else np.array(z, dtype=float)
    n = np.zeros(size) if n is None else np.array(n, dtype=float)
    scores = []
    for x, label in zip(X, y, strict=True):
        x_tilde = pqr_expand_dense(x, members)
        active = np.flatnonzero(x_tilde)  # I_t
        zi, ni, xi = z[active], n[active], x_tilde[active]
        if optimizer == "ftrl":
            w = np.where(
                np.abs(zi) <= l1,
                0.0,
                -(zi - np.sign(zi) * l1) / ((beta + np.sqrt(ni)) / alpha + l2),
            )
        else:
            w = zi.copy()
        score = float(np.sum(w * xi))
        if task == "binary":
            g = (1.0 / (1.0 + np.exp(-score)) - (label + 1.0) / 2.0) * xi
        else:
            g = (score - label) * xi
        if optimizer == "ftrl":
            sigma = (np.sqrt(ni + g**2) - np.sqrt(ni)) / alpha
            z[active] = zi + g - sigma * w
            n[active] = ni + g**2
        else:
            n[active] = ni + g**2
            eta = alpha / (beta + np.sqrt(n[active]))
            u = w - eta * g
            z[active] = np.sign(u) * np.maximum(np.abs(u) - eta * l1, 0.0) / (1.0 + eta * l2)
        scores.append(score)
    return z, n, np.array(scores)


def pqr_top_k(counts, k: int) -> list[int]:
    """Top-k features by count (ties: lower index), features with a zero count left out."""
    ranked = sorted((-int(c), j) for j, c in enumerate(counts) if c > 0)
    return [j for _, j in ranked[:k]]
