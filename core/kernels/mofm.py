"""Kernels of multi-output polynomial networks and factorization machines.

Blondel, Niculae, Otsuka and Ueda, "Multi-output polynomial networks and factorization
machines" (NIPS 2017; ``../shared/papers/multi-output-polynomial-networks.txt``).

Predictions (section 3) are ``o(x) = sum_r sigma(h_r, z) v_r`` with ``z = [x, 1]`` (the paper
prepends the constant, we append it, as ``core.kernels.dos`` does), the basis ``H`` of shape
(k, d + 1) and the output layer ``V`` of shape (k, m). ``H`` is stored feature-major as
``Ht = H^T`` of shape (d + 1, k): a sparse example touches only the rows of its non-zero
features, each one contiguous run of k floats, and the bias row is last. With
``a_r = h_r . z`` and ``b_r = sum_j (h_rj z_j)^2``:

- ``sigma = a_r^2`` (activation 0, polynomial network), or
- ``sigma_ANOVA(h_r, z) = sum_{i<j} h_ri z_i h_rj z_j = (a_r^2 - b_r) / 2`` (activation 1,
  factorization machine), in O(nnz) per basis vector.

Losses of a score vector ``o`` against a target vector ``t`` (Appendix A of the paper is not in
our copy of the text; these are the standard smooth convex losses it names), with their
gradients ``g = d loss / d o``:

- 0 ``softmax`` (multi-class logistic): ``logsumexp(o) - t . o``, ``g = softmax(o) - t``
  (``t`` one-hot);
- 1 ``squared``: ``|o - t|^2 / 2``, ``g = o - t``;
- 2 ``smoothed_hinge`` (smoothed multi-class hinge): with ``u = o + 1 - t`` (``t`` one-hot) and
  ``p = argmax_{p in simplex} p . u - |p|^2 / 2`` (the Euclidean projection of ``u`` onto the
  simplex), ``p . u - |p|^2 / 2 - t . o + 1/2``, ``g = p - t``; it is 0 when the true score
  beats every other by at least 2, and 1-smooth;
- 3 ``logistic`` (binary logistic per output, ``t`` in {-1, +1}^m):
  ``sum_c log(1 + exp(-t_c o_c))``, ``g_c = -t_c / (1 + exp(t_c o_c))``.

Penalties Omega(V) of Table 1 and Euclidean projections onto ``{Omega(V) <= tau}``: 0 ``l1``
(sum of |v_rc|, Duchi et al. 2008's sort), 1 ``l1/l2`` (sum of row norms: the row norms are
projected onto the l1 ball), 2 ``l1/linf`` (sum of row maxima: Quattoni et al. 2009, each row
clipped at its own level ``mu_r``, the levels found through their common residual mass
``theta``).

Online learning (``_mofm_step``) is (Ada)SGD on V and H over the active rows, with the basis
kept in the unit ball by a projection restricted to the coordinates the example touched
(``h_S <- h_S * s`` with ``s`` making ``|h_r| <= 1``, where S is the non-zero features and the
bias; this is the exact Euclidean projection onto the ball within the block of coordinates
being updated, and costs O(nnz) per row instead of O(d)), and V kept in the Omega-ball.
"""

import numba
import numpy as np

from core.config import NJIT_OPTIONS

ACTIVATIONS = {"square": 0, "anova": 1}
LOSSES = {"softmax": 0, "squared": 1, "smoothed_hinge": 2, "logistic": 3}
PENALTIES = {"l1": 0, "l1/l2": 1, "l1/linf": 2}
OPTIMIZERS = {"adagrad": 0, "sgd": 1}

#: AdaGrad's guard against dividing by zero accumulators
ADAGRAD_EPS = 1e-8
#: bisection steps of the l1/linf projection (the bracket halves each time; 200 reach the
#: float64 resolution of any bracket)
PROJECTION_MAXITER = 200

STEP_OK = 0
STEP_NOT_FINITE = 1


# -- predictions --------------------------------------------------------------------------------
@numba.njit(**NJIT_OPTIONS)
def _mofm_hidden(Ht, n_active, activation, indices, values, a, b, phi):
    """a_r = h_r . z, b_r = sum_j (h_rj z_j)^2 and phi_r = sigma(h_r, z) for r < n_active.

    Zero feature values are skipped, so a dense row with zeros and its sparse form give
    bit-identical results."""
    bias = Ht.shape[0] - 1
    for r in range(n_active):
        w = Ht[bias, r]
        a[r] = w
        b[r] = w * w
    for k in range(indices.shape[0]):
        x = values[k]
        if x == 0.0:
            continue
        j = indices[k]
        for r in range(n_active):
            hx = Ht[j, r] * x
            a[r] += hx
            b[r] += hx * hx
    for r in range(n_active):
        if activation == 0:
            phi[r] = a[r] * a[r]
        else:
            phi[r] = 0.5 * (a[r] * a[r] - b[r])


@numba.njit(**NJIT_OPTIONS)
def _mofm_output(V, n_active, phi, o):
    """o = sum_r phi_r v_r (the prediction of section 3)."""
    for c in range(V.shape[1]):
        o[c] = 0.0
    for r in range(n_active):
        p = phi[r]
        if p == 0.0:
            continue
        for c in range(V.shape[1]):
            o[c] += p * V[r, c]


@numba.njit(**NJIT_OPTIONS)
def _mofm_score(Ht, V, n_active, activation, indices, values, o):
    """o(x) of one example into o; scratch is allocated here (3 x k floats) so that concurrent
    readers never share a buffer."""
    k = max(n_active, 1)
    a = np.empty(k)
    b = np.empty(k)
    phi = np.empty(k)
    _mofm_hidden(Ht, n_active, activation, indices, values, a, b, phi)
    _mofm_output(V, n_active, phi, o)


@numba.njit(**NJIT_OPTIONS)
def _mofm_score_batch(Ht, V, n_active, activation, indptr, indices, values, out):
    """o(x_i) of every row of a CSR batch into out (n_rows, m)."""
    k = max(n_active, 1)
    a = np.empty(k)
    b = np.empty(k)
    phi = np.empty(k)
    for i in range(indptr.shape[0] - 1):
        start, stop = indptr[i], indptr[i + 1]
        _mofm_hidden(Ht, n_active, activation, indices[start:stop], values[start:stop], a, b, phi)
        _mofm_output(V, n_active, phi, out[i])


# -- losses -----------------------------------------------------------------------------------
@numba.njit(**NJIT_OPTIONS)
def _mofm_simplex(u, p, work):
    """p = Euclidean projection of u onto the probability simplex (sort-based; work: len(u))."""
    m = u.shape[0]
    for c in range(m):
        work[c] = u[c]
    work.sort()  # ascending; scan from the largest
    cumulative = 0.0
    theta = 0.0
    for rho in range(1, m + 1):
        cumulative += work[m - rho]
        candidate = (cumulative - 1.0) / rho
        if work[m - rho] - candidate > 0.0:
            theta = candidate
    for c in range(m):
        p[c] = max(u[c] - theta, 0.0)


@numba.njit(**NJIT_OPTIONS)
def _mofm_loss_grad(loss, t, o, g, work):
    """Loss of scores o against target t, and its gradient into g (module docstring).
    work: scratch of 2 m floats (smoothed hinge)."""
    m = o.shape[0]
    if loss == 0:  # softmax: logsumexp(o) - t.o
        top = o[0]
        for c in range(1, m):
            top = max(top, o[c])
        total = 0.0
        for c in range(m):
            g[c] = np.exp(o[c] - top)
            total += g[c]
        value = top + np.log(total)
        for c in range(m):
            g[c] = g[c] / total - t[c]
            value -= t[c] * o[c]
        return value
    if loss == 1:  # squared
        value = 0.0
        for c in range(m):
            g[c] = o[c] - t[c]
            value += 0.5 * g[c] * g[c]
        return value
    if loss == 2:  # smoothed multi-class hinge
        u = work[:m]
        for c in range(m):
            u[c] = o[c] + 1.0 - t[c]
        _mofm_simplex(u, g, work[m : 2 * m])
        value = 0.5
        for c in range(m):
            value += g[c] * u[c] - 0.5 * g[c] * g[c] - t[c] * o[c]
            g[c] -= t[c]
        return value
    # binary logistic per output: log(1 + exp(-t o)), computed without overflow
    value = 0.0
    for c in range(m):
        margin = t[c] * o[c]
        if margin > 0.0:
            e = np.exp(-margin)
            value += np.log1p(e)
            g[c] = -t[c] * e / (1.0 + e)
        else:
            e = np.exp(margin)
            value += -margin + np.log1p(e)
            g[c] = -t[c] / (1.0 + e)
    return value


# -- penalties and projections ---------------------------------------------------------------
@numba.njit(**NJIT_OPTIONS)
def _mofm_penalty(V, n_active, penalty):
    """Omega(V) over the first n_active rows (Table 1)."""
    total = 0.0
    for r in range(n_active):
        if penalty == 0:
            for c in range(V.shape[1]):
                total += abs(V[r, c])
        elif penalty == 1:
            s = 0.0
            for c in range(V.shape[1]):
                s += V[r, c] * V[r, c]
            total += np.sqrt(s)
        else:
            s = 0.0
            for c in range(V.shape[1]):
                s = max(s, abs(V[r, c]))
            total += s
    return total


@numba.njit(**NJIT_OPTIONS)
def _mofm_l1_threshold(magnitudes, tau, work):
    """theta such that sum_i max(magnitudes_i - theta, 0) = tau, for magnitudes >= 0 with
    sum > tau (Duchi et al. 2008). work: scratch of len(magnitudes)."""
    n = magnitudes.shape[0]
    for i in range(n):
        work[i] = magnitudes[i]
    work[:n].sort()
    cumulative = 0.0
    theta = 0.0
    for rho in range(1, n + 1):
        cumulative += work[n - rho]
        candidate = (cumulative - tau) / rho
        if work[n - rho] - candidate > 0.0:
            theta = candidate
    return max(theta, 0.0)


@numba.njit(**NJIT_OPTIONS)
def _mofm_row_level(sorted_row, prefix, theta):
    """mu >= 0 with sum_c max(|a_c| - mu, 0) = theta, from the row's magnitudes sorted in
    decreasing order and their prefix sums (0 when theta >= the row's l1 norm)."""
    m = sorted_row.shape[0]
    if theta >= prefix[m - 1]:
        return 0.0
    for j in range(1, m + 1):
        mu = (prefix[j - 1] - theta) / j
        below = sorted_row[j] if j < m else 0.0
        if mu >= below:
            return mu
    return 0.0  # pragma: no cover - the loop always returns


@numba.njit(**NJIT_OPTIONS)
def _mofm_project(V, n_active, penalty, tau, work):
    """Project the first n_active rows of V onto {Omega(V) <= tau} in place (Euclidean).

    work: scratch of at least 2 * n_active * m + n_active floats. Returns Omega before the
    projection. A final rescaling by tau / Omega (a no-op up to rounding) makes the result
    feasible to the last bit."""
    m = V.shape[1]
    omega = _mofm_penalty(V, n_active, penalty)
    if omega <= tau:
        return omega
    if tau <= 0.0:
        for r in range(n_active):
            for c in range(m):
                V[r, c] = 0.0
        return omega
    if penalty == 0:
        size = n_active * m
        magnitudes = work[:size]
        for r in range(n_active):
            for c in range(m):
                magnitudes[r * m + c] = abs(V[r, c])
        theta = _mofm_l1_threshold(magnitudes, tau, work[size : 2 * size])
        for r in range(n_active):
            for c in range(m):
                shrunk = max(abs(V[r, c]) - theta, 0.0)
                V[r, c] = shrunk if V[r, c] > 0.0 else -shrunk
    elif penalty == 1:
        norms = work[:n_active]
        for r in range(n_active):
            s = 0.0
            for c in range(m):
                s += V[r, c] * V[r, c]
            norms[r] = np.sqrt(s)
        theta = _mofm_l1_threshold(norms, tau, work[n_active : 2 * n_active])
        for r in range(n_active):
            scale = max(norms[r] - theta, 0.0) / norms[r] if norms[r] > 0.0 else 0.0
            for c in range(m):
                V[r, c] *= scale
    else:
        size = n_active * m
        sorted_rows = work[:size].reshape((n_active, m))
        prefix = work[size : 2 * size].reshape((n_active, m))
        levels = work[2 * size : 2 * size + n_active]
        hi = 0.0
        for r in range(n_active):
            for c in range(m):
                sorted_rows[r, c] = -abs(V[r, c])
            sorted_rows[r].sort()
            s = 0.0
            for c in range(m):
                sorted_rows[r, c] = -sorted_rows[r, c]
                s += sorted_rows[r, c]
                prefix[r, c] = s
            hi = max(hi, s)
        # M(theta) = sum_r mu_r(theta) decreases from Omega(V) > tau at 0 to 0 at hi
        lo = 0.0
        for _ in range(PROJECTION_MAXITER):
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            total = 0.0
            for r in range(n_active):
                total += _mofm_row_level(sorted_rows[r], prefix[r], mid)
            if total > tau:
                lo = mid
            else:
                hi = mid
        # exact theta on the active sets found at hi (M is affine there):
        # mu_r = (S_r - theta) / j_r  and  sum_r mu_r = tau
        numerator = 0.0
        denominator = 0.0
        for r in range(n_active):
            mu = _mofm_row_level(sorted_rows[r], prefix[r], hi)
            if mu > 0.0:
                j = 0
                while j < m and sorted_rows[r, j] > mu:
                    j += 1
                j = max(j, 1)
                numerator += prefix[r, j - 1] / j
                denominator += 1.0 / j
        theta = hi
        if denominator > 0.0:
            exact = (numerator - tau) / denominator
            if lo <= exact <= hi:
                theta = exact
        for r in range(n_active):
            levels[r] = _mofm_row_level(sorted_rows[r], prefix[r], theta)
        for r in range(n_active):
            mu = levels[r]
            for c in range(m):
                V[r, c] = min(max(V[r, c], -mu), mu)
    after = _mofm_penalty(V, n_active, penalty)
    if after > tau:
        scale = tau / after
        for r in range(n_active):
            for c in range(m):
                V[r, c] *= scale
        while _mofm_penalty(V, n_active, penalty) > tau:  # pragma: no cover - rounding
            for r in range(n_active):
                for c in range(m):
                    V[r, c] = np.nextafter(V[r, c], 0.0)
    return omega


# -- online learning ----------------------------------------------------------------------------
@numba.njit(**NJIT_OPTIONS)
def _mofm_step(
    Ht,
    V,
    Hacc,
    Vacc,
    Hsq,
    n_active,
    activation,
    loss,
    penalty,
    tau,
    optimizer,
    learning_rate,
    t,
    indices,
    values,
    target,
    o,
    work,
):
    """One (Ada)SGD step on F = loss(t, o(x)) over the active rows, in place.

    Gradients (square activation; ANOVA in brackets), with g = d loss / d o and
    s_r = v_r . g taken before the update:

        d/dv_rc = phi_r g_c,      d/dh_rj = s_r * 2 a_r z_j     [s_r z_j (a_r - h_rj z_j)].

    AdaGrad (optimizer 0): each coordinate accumulates its squared gradients in Hacc / Vacc
    and moves by learning_rate * grad / (sqrt(acc) + eps); SGD (1) moves by
    learning_rate / sqrt(1 + t) * grad. Then each touched h_r is projected back into the unit
    ball within its updated coordinates (module docstring; Hsq caches |h_r|^2), and V onto
    {Omega(V) <= tau}.

    o receives the scores before the update. work: scratch of 4 k + 2 m + 2 k m floats.
    Returns (status, loss before the update); nothing is written unless status is STEP_OK.
    """
    k = Ht.shape[1]
    m = V.shape[1]
    a = work[:k]
    b = work[k : 2 * k]
    phi = work[2 * k : 3 * k]
    s = work[3 * k : 4 * k]
    g = work[4 * k : 4 * k + m]
    loss_work = work[4 * k + m : 4 * k + 3 * m]
    projection_work = work[4 * k + 3 * m :]
    _mofm_hidden(Ht, n_active, activation, indices, values, a, b, phi)
    _mofm_output(V, n_active, phi, o)
    value = _mofm_loss_grad(loss, target, o, g, loss_work)
    if not np.isfinite(value):
        return STEP_NOT_FINITE, value
    g_max = 0.0
    for c in range(m):
        if not np.isfinite(g[c]):
            return STEP_NOT_FINITE, value
        g_max = max(g_max, abs(g[c]))
    z_max = 1.0
    for q in range(values.shape[0]):
        z_max = max(z_max, abs(values[q]))
    # bounds on every gradient entry: finite, with finite squares, or nothing is written
    for r in range(n_active):
        sr = 0.0
        for c in range(m):
            sr += V[r, c] * g[c]
        s[r] = sr
        bound_v = abs(phi[r]) * g_max
        bound_h = abs(sr) * (2.0 * abs(a[r]) + 2.0 * np.sqrt(b[r])) * z_max
        worst = max(bound_v, bound_h)
        if not (np.isfinite(worst * worst) and np.isfinite(learning_rate * worst)):
            return STEP_NOT_FINITE, value
    rate = learning_rate / np.sqrt(1.0 + t)
    bias = Ht.shape[0] - 1
    # output layer
    for r in range(n_active):
        for c in range(m):
            grad = phi[r] * g[c]
            if optimizer == 0:
                Vacc[r, c] += grad * grad
                V[r, c] -= learning_rate * grad / (np.sqrt(Vacc[r, c]) + ADAGRAD_EPS)
            else:
                V[r, c] -= rate * grad
    # basis: the touched coordinates (non-zero features, bias) of every active row
    for r in range(n_active):
        sr = s[r]
        if sr == 0.0:
            continue
        old_sq = 0.0
        new_sq = 0.0
        for q in range(values.shape[0] + 1):
            if q < values.shape[0]:
                x = values[q]
                if x == 0.0:
                    continue
                j = indices[q]
            else:
                x = 1.0
                j = bias
            h = Ht[j, r]
            if activation == 0:
                grad = sr * 2.0 * a[r] * x
            else:
                grad = sr * x * (a[r] - h * x)
            if optimizer == 0:
                Hacc[j, r] += grad * grad
                h_new = h - learning_rate * grad / (np.sqrt(Hacc[j, r]) + ADAGRAD_EPS)
            else:
                h_new = h - rate * grad
            Ht[j, r] = h_new
            old_sq += h * h
            new_sq += h_new * h_new
        rest = max(Hsq[r] - old_sq, 0.0)
        if rest + new_sq > 1.0 and new_sq > 0.0:
            scale = np.sqrt(max(1.0 - rest, 0.0) / new_sq)
            new_sq = 0.0
            for q in range(values.shape[0] + 1):
                if q < values.shape[0]:
                    if values[q] == 0.0:
                        continue
                    j = indices[q]
                else:
                    j = bias
                Ht[j, r] *= scale
                new_sq += Ht[j, r] * Ht[j, r]
        Hsq[r] = rest + new_sq
    _mofm_project(V, n_active, penalty, tau, projection_work)
    return STEP_OK, value


@numba.njit(**NJIT_OPTIONS)
def _mofm_learn_batch(
    Ht,
    V,
    Hacc,
    Vacc,
    Hsq,
    n_active,
    activation,
    loss,
    penalty,
    tau,
    optimizer,
    learning_rate,
    t0,
    indptr,
    indices,
    values,
    T,
    scores,
    losses,
):
    """``_mofm_step`` over the rows of a CSR batch, in order (bit-identical to the loop of
    single steps). Fills scores (n, m) and losses (n,). Returns (-1 or the first row that
    could not be applied, number of rows learned)."""
    k = Ht.shape[1]
    m = V.shape[1]
    work = np.empty(4 * k + 3 * m + 2 * k * m + k)
    n_rows = indptr.shape[0] - 1
    for i in range(n_rows):
        start, stop = indptr[i], indptr[i + 1]
        status, value = _mofm_step(
            Ht,
            V,
            Hacc,
            Vacc,
            Hsq,
            n_active,
            activation,
            loss,
            penalty,
            tau,
            optimizer,
            learning_rate,
            t0 + i,
            indices[start:stop],
            values[start:stop],
            T[i],
            scores[i],
            work,
        )
        losses[i] = value
        if status != STEP_OK:
            return i, i
    return -1, n_rows
