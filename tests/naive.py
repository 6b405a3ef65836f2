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
