"""Kernels of projective quadratic regression (PQR) trained by FTRL-Proximal or OGD.

Ma, "Projective Quadratic Regression for Online Learning"
(``../shared/papers/projective-quadratic-regression.txt``): the PQR matrix of eq (7), the
expansion x~ of eq (12) / Definition 3 with the projection P of eq (13), and Algorithm 2.

**Expanded space.** For ``d`` features and order ``k`` the model is a linear model over the
``D = d + 1 + k (k + 1) / 2`` coordinates of x~ (section 2.3, "Implementation Details"):

- ``0 .. d-1``: the first-order weights w, ``x~_j = x_j``;
- ``d``: the bias, ``x~_d = 1``;
- ``d + 1 + tri(a, b)`` for slots ``0 <= a < b <= k``: the entry ``M[a, b]`` of the
  (k+1) x (k+1) symmetric zero-diagonal matrix M of eq (13), with ``x~ = (Px)_a (Px)_b``.
  ``(Px)_s = x_{H[s]}`` for the k slots of H and ``(Px)_k = x_L``, the sum of the
  low-frequency features. ``tri(a, b) = b (b - 1) / 2 + a``: pairs with ``b < k`` are the
  ``p`` of eq (7), pairs with ``b = k`` are the ``q``.

This is eq (12) with the pair coordinates numbered compactly (eq 12's ``d + k i + j``
wastes half of the k^2 slots) and its last line read through eq (13): the k weights ``q_i``
multiply ``x_i x_L``. ``slot[j]`` is the slot of feature j in H, or -1 when j is in L.

Only the non-zero coordinates of x~ are produced (the set ``I_t`` of Algorithm 2), so an
example costs O(nnz + h^2), h the number of its non-zero features in H, and nothing of size
d x d or D is ever touched. The parameters live in one array ``zn`` of shape (D, 2): column
0 is FTRL's ``z`` (or OGD's weight), column 1 is ``n`` (the sum of squared gradients); one
coordinate is one 16-byte run, one cache line on a sparse access.

Tasks: 0 = binary (logistic loss, eq 11, labels y in {-1, +1}, target (y + 1) / 2 as in
Algorithm 2), 1 = regression (squared loss, eq 10). Optimizers: 0 = FTRL-Proximal
(Algorithm 2, lazy weights), 1 = OGD with the same per-coordinate rates
``eta_i = alpha / (beta + sqrt(n_i))`` and a proximal l1 / l2 step.
"""

import numba
import numpy as np

from core.config import NJIT_OPTIONS

STEP_OK = 0
STEP_NOT_FINITE = 1

TASK_BINARY = 0
TASK_REGRESSION = 1

OPTIMIZER_FTRL = 0
OPTIMIZER_OGD = 1


@numba.njit(**NJIT_OPTIONS)
def _pqr_expand(slot, k, indices, values, active_slots, active_values, out_index, out_value):
    """The non-zero coordinates of x~ (eq 12 with P of eq 13); returns how many.

    Order: first-order coordinates by feature index, the bias, the pairs of active H
    features (for each active b, every earlier active a), then the pairs (a, L).
    ``out_*`` need ``nnz + 1 + h (h + 1) / 2`` entries, ``active_*`` h entries.
    """
    d = slot.shape[0]
    m = 0
    h = 0
    x_low = 0.0
    for t in range(indices.shape[0]):
        v = values[t]
        if v == 0.0:
            continue  # x~_j = 0 is not in I_t
        j = indices[t]
        out_index[m] = j
        out_value[m] = v
        m += 1
        s = slot[j]
        if s >= 0:
            active_slots[h] = s
            active_values[h] = v
            h += 1
        else:
            x_low += v  # (Px)_k: the projection sums L
    out_index[m] = d
    out_value[m] = 1.0
    m += 1
    base = d + 1
    for b in range(1, h):
        sb = active_slots[b]
        vb = active_values[b]
        for a in range(b):
            product = active_values[a] * vb
            if product != 0.0:
                sa = active_slots[a]
                lo, hi = (sa, sb) if sa < sb else (sb, sa)
                out_index[m] = base + ((hi * (hi - 1)) >> 1) + lo  # p_{H[lo], H[hi]}
                out_value[m] = product
                m += 1
    if x_low != 0.0:
        offset = base + k * (k - 1) // 2
        for a in range(h):
            product = active_values[a] * x_low
            if product != 0.0:
                out_index[m] = offset + active_slots[a]  # q_{H[a]}
                out_value[m] = product
                m += 1
    return m


@numba.njit(**NJIT_OPTIONS)
def _pqr_ftrl_weight(z, root_n, inverse_alpha, beta, l1, l2):
    """The lazy weight of Algorithm 2 from one coordinate's z and sqrt(n).

    Callers pass 1 / alpha, computed once per example: one division per weight, not two.
    """
    if abs(z) <= l1:
        return 0.0
    return -(z - np.sign(z) * l1) / ((beta + root_n) * inverse_alpha + l2)


@numba.njit(**NJIT_OPTIONS)
def _pqr_weight(zn, i, optimizer, inverse_alpha, beta, l1, l2):
    if optimizer == OPTIMIZER_OGD:
        return zn[i, 0]
    return _pqr_ftrl_weight(zn[i, 0], np.sqrt(zn[i, 1]), inverse_alpha, beta, l1, l2)


@numba.njit(**NJIT_OPTIONS)
def _pqr_weights(zn, optimizer, alpha, beta, l1, l2, out):
    """Every weight of the expanded space (for statistics and inspection)."""
    inverse_alpha = 1.0 / alpha
    for i in range(zn.shape[0]):
        out[i] = _pqr_weight(zn, i, optimizer, inverse_alpha, beta, l1, l2)


@numba.njit(**NJIT_OPTIONS)
def _pqr_sigmoid(s):
    if s >= 0.0:
        return 1.0 / (1.0 + np.exp(-s))
    e = np.exp(s)
    return e / (1.0 + e)


@numba.njit(**NJIT_OPTIONS)
def _pqr_softplus(u):
    """log(1 + exp(u)) without overflow."""
    if u > 0.0:
        return u + np.log1p(np.exp(-u))
    return np.log1p(np.exp(u))


@numba.njit(**NJIT_OPTIONS)
def _pqr_score(
    zn,
    slot,
    k,
    indices,
    values,
    optimizer,
    alpha,
    beta,
    l1,
    l2,
    active_slots,
    active_values,
    work_index,
    work_value,
):
    """w . x~ (eq 9 in its expanded form), summed in the order of ``_pqr_expand``."""
    m = _pqr_expand(slot, k, indices, values, active_slots, active_values, work_index, work_value)
    inverse_alpha = 1.0 / alpha
    total = 0.0
    for t in range(m):
        w = _pqr_weight(zn, work_index[t], optimizer, inverse_alpha, beta, l1, l2)
        total += w * work_value[t]
    return total


@numba.njit(**NJIT_OPTIONS)
def _pqr_step(
    zn,
    slot,
    counts,
    k,
    indices,
    values,
    y,
    task,
    optimizer,
    alpha,
    beta,
    l1,
    l2,
    active_slots,
    active_values,
    work_index,
    work_value,
    work_weight,
    work_root,
):
    """One round of Algorithm 2 in place. Returns (status, score, loss, moved).

    score = w . x~ and loss (logistic, eq 11, or squared, eq 10) are taken before the
    update; moved says whether any weight changed. Nothing is written unless the score, the
    loss and every g_i^2 are finite. Occurrence counts of the non-zero features of x go up.
    """
    m = _pqr_expand(slot, k, indices, values, active_slots, active_values, work_index, work_value)
    inverse_alpha = 1.0 / alpha
    score = 0.0
    largest = 0.0
    for t in range(m):
        i = work_index[t]
        root = np.sqrt(zn[i, 1])
        work_root[t] = root
        if optimizer == OPTIMIZER_OGD:
            w = zn[i, 0]
        else:
            w = _pqr_ftrl_weight(zn[i, 0], root, inverse_alpha, beta, l1, l2)
        work_weight[t] = w
        score += w * work_value[t]
        largest = max(largest, abs(work_value[t]))
    if not np.isfinite(score):
        return STEP_NOT_FINITE, score, np.inf, False
    if task == TASK_BINARY:
        p = _pqr_sigmoid(score)  # p_t of Algorithm 2
        target = 0.5 * (y + 1.0)
        loss = _pqr_softplus(-y * score)
    else:
        p = score
        target = y
        loss = 0.5 * (score - y) * (score - y)
    g = p - target
    bound = g * largest
    if not (np.isfinite(loss) and np.isfinite(bound * bound)):
        return STEP_NOT_FINITE, score, loss, False
    moved = False
    for t in range(m):
        i = work_index[t]
        w = work_weight[t]
        g_i = g * work_value[t]
        n_new = zn[i, 1] + g_i * g_i
        root_new = np.sqrt(n_new)
        if optimizer == OPTIMIZER_FTRL:
            sigma = (root_new - work_root[t]) * inverse_alpha
            zn[i, 0] += g_i - sigma * w
            zn[i, 1] = n_new
            if not moved:
                moved = _pqr_ftrl_weight(zn[i, 0], root_new, inverse_alpha, beta, l1, l2) != w
        else:
            # proximal step on l1 |w| + l2 / 2 w^2 after the gradient step
            eta = alpha / (beta + root_new)
            u = w - eta * g_i
            shrunk = abs(u) - eta * l1
            new = np.sign(u) * shrunk / (1.0 + eta * l2) if shrunk > 0.0 else 0.0
            zn[i, 0] = new
            zn[i, 1] = n_new
            moved = moved or new != w
    # the first-order coordinates come first, then the bias (index d)
    d = slot.shape[0]
    for t in range(m):
        j = work_index[t]
        if j >= d:
            break
        counts[j] += 1
    return STEP_OK, score, loss, moved


@numba.njit(**NJIT_OPTIONS)
def _pqr_bad_row(indptr, values):
    """Index of the first row whose expansion may overflow ((sum |x_j|)^2 bounds every
    coordinate of x~), or -1."""
    for i in range(indptr.shape[0] - 1):
        total = 0.0
        for t in range(indptr[i], indptr[i + 1]):
            total += abs(values[t])
        if not np.isfinite(total * total):
            return i
    return -1


@numba.njit(**NJIT_OPTIONS)
def _pqr_learn_batch(
    zn,
    slot,
    counts,
    k,
    indptr,
    indices,
    values,
    y,
    task,
    optimizer,
    alpha,
    beta,
    l1,
    l2,
    active_slots,
    active_values,
    work_index,
    work_value,
    work_weight,
    work_root,
    scores,
    losses,
    moved,
):
    """Algorithm 2 over the rows of a CSR batch, in order (``indptr`` may be a slice).

    Returns (index of the first row that could not be learned, or -1; rows learned). Rows
    whose expansion overflows are found before the first update, so they apply nothing.
    """
    n_rows = indptr.shape[0] - 1
    bad = _pqr_bad_row(indptr, values)
    if bad >= 0:
        return bad, 0
    for r in range(n_rows):
        start, stop = indptr[r], indptr[r + 1]
        status, score, loss, changed = _pqr_step(
            zn,
            slot,
            counts,
            k,
            indices[start:stop],
            values[start:stop],
            y[r],
            task,
            optimizer,
            alpha,
            beta,
            l1,
            l2,
            active_slots,
            active_values,
            work_index,
            work_value,
            work_weight,
            work_root,
        )
        scores[r] = score
        losses[r] = loss
        moved[r] = changed
        if status != STEP_OK:
            return r, r
    return -1, n_rows


@numba.njit(**NJIT_OPTIONS)
def _pqr_score_batch(
    zn,
    slot,
    k,
    indptr,
    indices,
    values,
    optimizer,
    alpha,
    beta,
    l1,
    l2,
    active_slots,
    active_values,
    work_index,
    work_value,
    scores,
):
    """Scores w . x~ of every row of a CSR batch."""
    for r in range(indptr.shape[0] - 1):
        start, stop = indptr[r], indptr[r + 1]
        scores[r] = _pqr_score(
            zn,
            slot,
            k,
            indices[start:stop],
            values[start:stop],
            optimizer,
            alpha,
            beta,
            l1,
            l2,
            active_slots,
            active_values,
            work_index,
            work_value,
        )
