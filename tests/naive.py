"""Slow plain-numpy references of the kernels, written from the papers' equations.

They deliberately use a different route than the kernels (dense matrices, the paper's
variable nu instead of q = 1 - nu, scipy's brentq instead of safeguarded Newton) so that
agreement means something.
"""

from __future__ import annotations

import math
import re

import numpy as np
import scipy.sparse as sp
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


# ---------------------------------------------------------------------------------------------
# Multi-output polynomial networks and factorization machines (core.mofm, core.kernels.mofm,
# core.metrics): Blondel, Niculae, Otsuka and Ueda, NIPS 2017. Dense matrices, the paper's
# formulas as written, bisection where the kernels sort.
# ---------------------------------------------------------------------------------------------


def mofm_anova(h: np.ndarray, z: np.ndarray) -> float:
    """sigma_ANOVA(h, z) = sum_{i<j} h_i z_i h_j z_j by the O(d^2) double sum (section 3)."""
    total = 0.0
    for i in range(len(z)):
        for j in range(i + 1, len(z)):
            total += h[i] * z[i] * h[j] * z[j]
    return total


def mofm_outputs(H: np.ndarray, V: np.ndarray, z: np.ndarray, activation: str) -> np.ndarray:
    """o(x) = sum_r sigma(h_r, z) v_r with the activation's definition."""
    if activation == "square":
        phi = np.array([(h @ z) ** 2 for h in H])
    else:
        phi = np.array([mofm_anova(h, z) for h in H])
    return phi @ V if len(H) else np.zeros(V.shape[1])


def _simplex_by_bisection(u: np.ndarray) -> np.ndarray:
    """Projection onto the probability simplex: theta with sum max(u - theta, 0) = 1."""
    lo, hi = u.min() - 1.0, u.max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.maximum(u - mid, 0.0).sum() > 1.0:
            lo = mid
        else:
            hi = mid
    return np.maximum(u - 0.5 * (lo + hi), 0.0)


def mofm_loss(loss: str, t: np.ndarray, o: np.ndarray) -> tuple[float, np.ndarray]:
    """(loss, gradient in o) of the four losses of core.kernels.mofm."""
    if loss == "softmax":
        from scipy.special import logsumexp, softmax

        return float(logsumexp(o) - t @ o), softmax(o) - t
    if loss == "squared":
        return 0.5 * float(np.sum((o - t) ** 2)), o - t
    if loss == "smoothed_hinge":
        u = o + 1.0 - t
        p = _simplex_by_bisection(u)
        return float(p @ u - 0.5 * p @ p - t @ o + 0.5), p - t
    # binary logistic per output
    return float(np.sum(np.log1p(np.exp(-t * o)))), -t / (1.0 + np.exp(t * o))


def mofm_gammas(Z: np.ndarray, D: np.ndarray, activation: str) -> np.ndarray:
    """Gamma_c = X^T D_c X (PN) or 1/2 (X^T D_c X - D_c sum_i diag(x_i)^2) (FM), section 4,
    built one example at a time. Z: (n, d + 1) augmented rows, D: (n, m) loss gradients."""
    n, dim = Z.shape
    out = np.zeros((D.shape[1], dim, dim))
    for c in range(D.shape[1]):
        for i in range(n):
            outer = np.outer(Z[i], Z[i])
            if activation == "anova":
                outer = 0.5 * (outer - np.diag(Z[i] ** 2))
            out[c] += D[i, c] * outer
    return out


def mofm_penalty(V: np.ndarray, penalty: str) -> float:
    """Omega(V) of Table 1."""
    if penalty == "l1":
        return float(np.abs(V).sum())
    if penalty == "l1/l2":
        return float(np.linalg.norm(V, axis=1).sum())
    return float(np.abs(V).max(axis=1).sum()) if V.size else 0.0


def _bisect_decreasing(function, target: float, lo: float, hi: float) -> float:
    for _ in range(300):
        mid = 0.5 * (lo + hi)
        if function(mid) > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def mofm_project(V: np.ndarray, penalty: str, tau: float) -> np.ndarray:
    """Euclidean projection onto {Omega(V) <= tau} by bisection on the threshold:
    l1: soft-thresholding of the entries; l1/l2: of the row norms; l1/linf: every row clipped
    at its level mu_r(theta), where sum_c max(|v_rc| - mu_r, 0) = theta, and sum_r mu_r = tau
    (Quattoni et al. 2009)."""
    V = np.asarray(V, dtype=float)
    if mofm_penalty(V, penalty) <= tau:
        return V.copy()
    if penalty == "l1":
        theta = _bisect_decreasing(
            lambda s: np.maximum(np.abs(V) - s, 0).sum(), tau, 0, np.abs(V).max()
        )
        return np.sign(V) * np.maximum(np.abs(V) - theta, 0.0)
    if penalty == "l1/l2":
        norms = np.linalg.norm(V, axis=1)
        theta = _bisect_decreasing(lambda s: np.maximum(norms - s, 0).sum(), tau, 0, norms.max())
        scale = np.where(norms > 0, np.maximum(norms - theta, 0) / np.where(norms > 0, norms, 1), 0)
        return V * scale[:, None]
    magnitudes = np.abs(V)

    def level(row, theta):
        # f(mu) = sum_c max(row_c - mu, 0) is piecewise linear and decreasing: invert it by
        # linear interpolation between its values at the breakpoints (0 and the entries)
        points = np.unique(np.append(row, 0.0))
        values = np.array([np.maximum(row - mu, 0).sum() for mu in points])
        return float(np.interp(theta, values[::-1], points[::-1])) if theta < row.sum() else 0.0

    def total(theta):
        return sum(level(row, theta) for row in magnitudes)

    theta = _bisect_decreasing(total, tau, 0.0, magnitudes.sum(axis=1).max())
    levels = np.array([level(row, theta) for row in magnitudes])
    return np.clip(V, -levels[:, None], levels[:, None])


def mofm_step(H, V, H_acc, V_acc, z, t, *, activation, loss, penalty, tau, optimizer, rate, n_seen):
    """One (Ada)SGD step of core.kernels.mofm._mofm_step on a dense augmented row z (its last
    entry the constant 1), written with whole matrices. The touched coordinates of h_r are its
    entries where z is non-zero; after the step they are rescaled so that |h_r| <= 1.
    Returns (H, V, H_acc, V_acc, scores, loss before the step)."""
    H, V, H_acc, V_acc = H.copy(), V.copy(), H_acc.copy(), V_acc.copy()
    a = H @ z
    b = (H * z) ** 2 @ np.ones(len(z))
    phi = a**2 if activation == "square" else 0.5 * (a**2 - b)
    o = phi @ V
    value, g = mofm_loss(loss, t, o)
    s = V @ g
    grad_V = np.outer(phi, g)
    if activation == "square":
        grad_H = 2.0 * (s * a)[:, None] * z[None, :]
    else:
        grad_H = s[:, None] * z[None, :] * (a[:, None] - H * z[None, :])
    touched = z != 0
    if optimizer == "adagrad":
        V_acc += grad_V**2
        V = V - rate * grad_V / (np.sqrt(V_acc) + 1e-8)
        H_acc[:, touched] += grad_H[:, touched] ** 2
        step = np.zeros_like(H)
        step[:, touched] = grad_H[:, touched] / (np.sqrt(H_acc[:, touched]) + 1e-8)
        H_new = H - rate * step
    else:
        V = V - rate / np.sqrt(1 + n_seen) * grad_V
        H_new = H - rate / np.sqrt(1 + n_seen) * grad_H * touched[None, :]
    for r in range(len(H)):
        if s[r] == 0.0:
            H_new[r] = H[r]
            continue
        rest = np.sum(H_new[r, ~touched] ** 2)
        moved = np.sum(H_new[r, touched] ** 2)
        if rest + moved > 1.0 and moved > 0:
            H_new[r, touched] *= np.sqrt(max(1.0 - rest, 0.0) / moved)
    return H_new, mofm_project(V, penalty, tau), H_acc, V_acc, o, value


def metrics_rmse(y_true, y_pred) -> float:
    """Root mean squared error."""
    diff = np.asarray(y_true, float) - np.asarray(y_pred, float)
    return float(np.sqrt(np.mean(diff * diff)))


def metrics_ndcg_at_k(relevance, scores, k: int, gain: str = "exponential") -> float:
    """nDCG@k of one query: items ranked by decreasing score (ties: first come first), gains
    2^rel - 1 (or rel), discounts 1 / log2(rank + 1); 0 / 0 counts as 1 (no relevant item)."""
    relevance = np.asarray(relevance, float)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    ideal = sorted(relevance, reverse=True)

    def g(r):
        return 2.0**r - 1.0 if gain == "exponential" else r

    dcg = sum(g(relevance[i]) / np.log2(rank + 2) for rank, i in enumerate(order[:k]))
    idcg = sum(g(r) / np.log2(rank + 2) for rank, r in enumerate(ideal[:k]))
    return 1.0 if idcg == 0 else float(dcg / idcg)


# -- svmlight ---------------------------------------------------------------------------------
_SVM_NUMBER = rb"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_SVM_LINE = re.compile(
    rb"[ \t]*(" + _SVM_NUMBER + rb")((?:[ \t]+[0-9]+:" + _SVM_NUMBER + rb")*)[ \t]*"
)


def parse_svmlight(data: bytes, n_features=None, source: str = "<bytes>"):
    """The regular-expression svmlight parser that ``core.datasets.parse_svmlight`` replaced:
    one ``fullmatch`` per line vets the syntax, then numpy reads every number of the body
    (``np.fromstring`` parses like ``float``). Same results and errors, ~20x slower."""
    path = source
    labels: list[float] = []
    parts: list[bytes] = []
    counts: list[int] = []
    lines: list[int] = []  # the 1-based line of each row
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        line = raw.split(b"#", 1)[0].strip()
        if not line:
            continue
        match = _SVM_LINE.fullmatch(line)
        if match is None:
            shown = line[:60].decode("ascii", "replace")
            raise ValueError(f"{path}:{lineno}: not a svmlight row: {shown!r}")
        labels.append(float(match.group(1)))
        lines.append(lineno)
        features = match.group(2)
        parts.append(features)
        counts.append(features.count(b":"))
    n_rows = len(labels)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    nnz = int(indptr[-1])
    text = b" ".join(parts).replace(b":", b" ").decode("ascii")
    numbers = np.fromstring(text, dtype=np.float64, sep=" ") if nnz else np.zeros(0)
    indices = numbers[0::2].astype(np.int64)
    values = np.ascontiguousarray(numbers[1::2])
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(labels))):
        raise ValueError(f"{path}: labels and values must be finite")
    if nnz and indices.min() < 1:
        row = int(np.searchsorted(indptr, np.argmin(indices), side="right")) - 1
        raise ValueError(f"{path}: row {row}: feature index 0; svmlight indices are 1-based")
    largest = int(indices.max()) if nnz else 0
    if n_features is None:
        n_features = largest
    elif (
        isinstance(n_features, bool)
        or not isinstance(n_features, int | np.integer)
        or n_features < 0
    ):
        raise ValueError(f"n_features must be a non-negative integer, got {n_features!r}")
    elif largest > n_features:
        first = int(np.argmax(indices > n_features))  # the first in the text
        line = lines[int(np.searchsorted(indptr, first, side="right")) - 1]
        raise ValueError(
            f"{path}:{line}: feature index {indices[first]} exceeds n_features={n_features}"
        )
    X = sp.csr_matrix(
        (values, indices - 1, indptr), shape=(n_rows, int(n_features)), dtype=np.float64
    )
    X.sum_duplicates()
    X.eliminate_zeros()
    return X, np.asarray(labels, dtype=np.float64)


# -- alignment (core.align, core/kernels/align.py) ----------------------------------------------
def min_norm_boost(U, V):
    """Eq (16) in light-cone coordinates with one numpy temporary per operation: the
    expressions that ``core.kernels.align`` fuses (same values, bit for bit)."""
    S, D = U + V, U - V
    root_s = math.sqrt(float(np.linalg.norm(S)))
    root_d = math.sqrt(float(np.linalg.norm(D)))
    S = S * (root_d / root_s)
    D = D * (root_s / root_d)
    return 0.5 * (S + D), 0.5 * (S - D)


def running_mean(previous, new, m: int):
    """Eq (28) for one array."""
    return previous + (new - previous) / m


def aligned_average(previous, new, m: int):
    """Section 3.4 step by step: both pairs boosted to min-norm form (eqs 15-16), the new
    one rotated onto the average by Procrustes (eqs 26-27), then eq (28) per array."""
    U1, V1 = min_norm_boost(*previous)
    U2, V2 = min_norm_boost(*new)
    rotations = []
    for A, B in ((U2, U1), (V2, V1)):
        W, _, Zt = np.linalg.svd(B @ A.T)
        rotations.append(W @ Zt)
    return running_mean(U1, rotations[0] @ U2, m), running_mean(V1, rotations[1] @ V2, m)


def aligned_mean_to_reference(reference, pairs):
    """The parallel merge of DoS pairs (``core.parallel.merge_to_reference``) by another
    route: eq (16) as the paper writes it (artanh), the boost of eqs (13-14), Procrustes
    (eqs 26-27) onto the reference's min-norm form by an SVD (the identity when the
    cross-covariance is zero), then the plain mean of the aligned pairs."""

    def paper_min_norm(U, V):
        total = float(np.sum(U * U) + np.sum(V * V))
        if total == 0.0:
            return U * 0.0, V * 0.0
        ratio = 2.0 * float(np.sum(U * V)) / total
        if abs(ratio) >= 1.0:  # the zero classifier U = +-V: the limit is zero
            return U * 0.0, V * 0.0
        phi = 0.5 * math.atanh(ratio)
        c, s = math.cosh(phi), math.sinh(phi)
        return U * c - V * s, V * c - U * s

    def rotation(A, B):
        C = B @ A.T
        if not np.any(C):
            return np.eye(A.shape[0])
        W, _, Zt = np.linalg.svd(C)
        return W @ Zt

    U1, V1 = paper_min_norm(*reference)
    aligned = []
    for pair in pairs:
        U2, V2 = paper_min_norm(*pair)
        aligned.append((rotation(U2, U1) @ U2, rotation(V2, V1) @ V2))
    return (
        sum(U for U, _ in aligned) / len(aligned),
        sum(V for _, V in aligned) / len(aligned),
    )


def platt_online(scores, positives, memory: int, ridge: float = 1.0):
    """Online Platt scaling written as a 2 x 2 Newton step per example with numpy's solve:
    returns (a, b) after the stream (the kernel's recursion, by matrices)."""
    decay = 1.0 - 1.0 / memory
    theta = np.zeros(2)
    H = np.zeros((2, 2))
    n_neg = n_pos = weight = square = 0.0
    for s, positive in zip(scores, positives, strict=True):
        n_neg, n_pos = decay * n_neg, decay * n_pos
        if positive:
            n_pos += 1.0
            t = (n_pos + 1.0) / (n_pos + 2.0)
        else:
            n_neg += 1.0
            t = 1.0 / (n_neg + 2.0)
        weight, square = decay * weight + 1.0, decay * square + s * s
        z = np.array([s, 1.0])
        p = 1.0 / (1.0 + math.exp(-(theta @ z)))
        H = decay * H + p * (1.0 - p) * np.outer(z, z)
        R = ridge * np.diag([square / weight, 1.0])
        theta = theta - np.linalg.solve(H + R, (p - t) * z)
    return theta


def coupling_by_optimisation(r: np.ndarray) -> np.ndarray:
    """Wu, Lin and Weng's method 2 solved as a constrained least squares by scipy (SLSQP):
    min sum_{i != j} (r_ji p_i - r_ij p_j)^2 s.t. sum p = 1, p >= 0."""
    from scipy.optimize import minimize

    k = r.shape[0]

    def objective(p):
        return sum(
            (r[j, i] * p[i] - r[i, j] * p[j]) ** 2 for i in range(k) for j in range(k) if i != j
        )

    result = minimize(
        objective,
        np.full(k, 1.0 / k),
        method="SLSQP",
        bounds=[(0.0, 1.0)] * k,
        constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1.0}],
        options={"ftol": 1e-14, "maxiter": 500},
    )
    return result.x


def paired_difference_interval(d: np.ndarray, confidence: float, bound: float | None):
    """The confidence sequence of ``core.sequential`` at ``n = len(d)``, from the whole prefix.

    Bounded: Howard et al. (2021), Theorem 4 with Theorem 1's stitched boundary (eta = 2,
    s = 1.4, m = 1), on x = (d + B) / 2B in [0, 1], V_n from prefix means by cumsum.
    Unbounded: Waudby-Smith et al. (2024), Theorem 2.2, rho tuned for n = 1000.
    """
    from scipy.special import zeta

    d = np.asarray(d, dtype=float)
    n = d.size
    alpha = 1.0 - confidence
    if n == 0 or (bound is None and n < 2):
        return -math.inf, math.inf
    if bound is None:
        sigma = np.std(d, ddof=1)
        rho2 = (2 * np.log(1 / alpha) + np.log(1 + 2 * np.log(1 / alpha))) / 1000
        radius = np.sqrt(
            sigma**2 * 2 * (n * rho2 + 1) / (n**2 * rho2) * np.log(np.sqrt(n * rho2 + 1) / alpha)
        )
        return float(d.mean() - radius), float(d.mean() + radius)
    x = (d + bound) / (2 * bound)
    previous_means = np.concatenate([[0.5], np.cumsum(x)[:-1] / np.arange(1, n)])
    v = max(float(np.sum((x - previous_means) ** 2)), 1.0)
    eta, s, a = 2.0, 1.4, alpha / 2
    ell = s * np.log(np.log(eta * v)) + np.log(zeta(s) / (a * np.log(eta) ** s))
    k1 = (eta**0.25 + eta**-0.25) / np.sqrt(2)
    k2 = (np.sqrt(eta) + 1) / 2
    boundary = np.sqrt(k1**2 * v * ell + (k2 * ell) ** 2) + k2 * ell
    radius = 2 * bound * boundary / n
    return float(max(d.mean() - radius, -bound)), float(min(d.mean() + radius, bound))
