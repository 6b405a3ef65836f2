"""Kernels of the difference-of-squares (DoS) passive-aggressive classifier.

Saul, "An online passive-aggressive algorithm for difference-of-squares classification"
(NeurIPS 2021), eqs (10) and (17)-(25). Parameters are stored feature-major in ONE array
``W`` of shape (n_features + 1, 2 * rank): row ``j`` holds column ``j`` of the paper's ``U``
(first ``rank`` entries) and of ``V`` (last ``rank`` entries), the last row the bias column.
A sparse example touches only the rows of its active features (cost O(rank * nnz)), and each
touched row is one contiguous run of 2 * rank floats: one pass computes ``U z`` and ``V z``
together and one axpy applies both updates (half the cache lines and TLB misses of separate
U and V arrays when n_features is large).

Notation: z = [x, 1], s = |z|^2, a = |U z|^2, b = |V z|^2, score a - b. For the label y we
call the "grow" side the matrix whose projection must lengthen (U for y = +1, V for y = -1)
and the "shrink" side the other; g and h are their squared projections. The step variable
of eq (18) is nu in (0, 1); we solve for q = 1 - nu, which keeps full relative precision
when nu is close to 1 (tiny g):

    F(q) = g / q^2 - h / (2 - q)^2 - 1 + kappa * (1 - q) = 0,        q in (0, 1],

which is eq (25) (derivative of eq 18 set to zero) rewritten in q, plus the PA-II term
kappa = 1 / (4 C s) (kappa = 0 for PA and PA-I). F is strictly decreasing on (0, 1]
(F' = -2g/q^3 - 2h/(2-q)^3 - kappa < 0) with F(1) = y (a - b) - 1 < 0 when an update is
triggered, so the root is unique; it is found by Newton's method safeguarded by bisection.
Modes: 0 = PA (hard margin, the paper's update), 1 = PA-I (nu <= 2 C s), 2 = PA-II.

``W`` is float64 or float32 (the model's ``dtype``); every kernel reads its entries into
float64 and accumulates in float64 (projections, norms, the root), so float32 storage only
rounds the stored parameters after each update.

Over 2^20 features ``W`` is far larger than the caches and a sparse example's rows are random
accesses: the batch kernels prefetch the rows of the examples ahead of the one they learn
(``PREFETCH_AHEAD``), so that their cache misses overlap its arithmetic instead of stalling it.
Parameters smaller than ``PREFETCH_MIN_BYTES`` stay in the caches, where prefetching only adds
instructions (``prefetch_distance``).
"""

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from core.config import NJIT_OPTIONS, ROOT_MAXITER, ROOT_RTOL

STEP_OK = 0
STEP_NOT_FINITE = 1
#: examples ahead of the current one whose rows the batch kernels prefetch
PREFETCH_AHEAD = 1
#: parameters of fewer bytes than this are not prefetched (about a server's last-level cache)
PREFETCH_MIN_BYTES = 32 << 20
#: bytes of a cache line (x86-64 and most ARM cores)
CACHE_LINE = 64


@intrinsic
def _prefetch_for_write(typingctx, W, j, r):
    """Hint that W[j, r] will be read then written soon (``llvm.prefetch``, rw = 1,
    locality 3): a non-blocking load of its cache line; no effect on the result."""
    signature = types.void(W, j, r)

    def codegen(context, builder, sig, args):
        array_type = sig.args[0]
        array = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, array, [args[1], args[2]], wraparound=False
        )
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]),
            "llvm.prefetch.p0",
        )
        builder.call(function, [builder.bitcast(pointer, byte_pointer), i32(1), i32(3), i32(1)])
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(**NJIT_OPTIONS)
def prefetch_distance(W):
    """Examples ahead whose rows the batch kernels prefetch: ``PREFETCH_AHEAD`` when ``W``
    outgrows the caches, else 0."""
    return PREFETCH_AHEAD if W.size * W.itemsize >= PREFETCH_MIN_BYTES else 0


@numba.njit(**NJIT_OPTIONS)
def _dos_prefetch_rows(W, indices):
    """Prefetch every cache line of the rows ``indices`` of W (a hint: W is unchanged)."""
    width = W.shape[1]
    per_line = max(CACHE_LINE // W.itemsize, 1)
    for k in range(indices.shape[0]):
        j = indices[k]
        for r in range(0, width, per_line):
            _prefetch_for_write(W, j, r)
        _prefetch_for_write(W, j, width - 1)  # a row that straddles one more line


@numba.njit(**NJIT_OPTIONS)
def _dos_project(W, indices, values, out):
    """out = W^T z (U z then V z) over the bias row and the active rows."""
    bias_row = W.shape[0] - 1
    width = W.shape[1]
    for r in range(width):
        out[r] = W[bias_row, r]
    for k in range(indices.shape[0]):
        j = indices[k]
        v = values[k]
        for r in range(width):
            out[r] += v * W[j, r]


@numba.njit(**NJIT_OPTIONS)
def _dos_score_into(W, indices, values, h):
    """|U z|^2 - |V z|^2 (eq 10), leaving [U z, V z] in h (length 2 * rank)."""
    _dos_project(W, indices, values, h)
    rank = W.shape[1] // 2
    a = 0.0
    b = 0.0
    for r in range(rank):
        a += h[r] * h[r]
        b += h[rank + r] * h[rank + r]
    return a, b


@numba.njit(**NJIT_OPTIONS)
def _dos_score(W, indices, values):
    """Score of one example. Scratch is allocated here (2 x rank floats) so that concurrent
    readers never share a buffer."""
    h = np.empty(W.shape[1])
    a, b = _dos_score_into(W, indices, values, h)
    return a - b


@numba.njit(**NJIT_OPTIONS)
def _dos_residual(q, g, h, kappa):
    """F(q) of the module docstring."""
    return g / (q * q) - h / ((2.0 - q) * (2.0 - q)) - 1.0 + kappa * (1.0 - q)


@numba.njit(**NJIT_OPTIONS)
def _dos_root(g, h, kappa):
    """The root q in [0, 1] of F (module docstring), to relative precision ROOT_RTOL.

    Requires F(1) < 0. Returns 0.0 in footnote 1's degenerate case: g = 0 and F(0+) <= 0,
    where no q > 0 reaches the margin and the optimum sits at the singular multiplier nu = 1.
    """
    if g == 0.0:
        if -0.25 * h - 1.0 + kappa <= 0.0:
            return 0.0
        lo = 0.0
        q = 0.5
    else:
        # F(q) >= g/q^2 - h - 1 since (2 - q)^2 >= 1, so F >= 0 at sqrt(g / (1 + h)).
        lo = min(np.sqrt(g / (1.0 + h)), 1.0)
        q = lo
    hi = 1.0
    step_before_last = hi - lo
    for _ in range(ROOT_MAXITER):
        f = _dos_residual(q, g, h, kappa)
        if f == 0.0:
            return q
        if f > 0.0:
            lo = q
        else:
            hi = q
        if hi - lo <= ROOT_RTOL * hi:
            return 0.5 * (lo + hi)
        slope = -2.0 * g / (q * q * q) - 2.0 * h / ((2.0 - q) ** 3) - kappa
        candidate = q - f / slope
        # Bisect when Newton leaves the bracket or does not halve the step (rtsafe); the
        # bisection is geometric while the bracket spans orders of magnitude (g tiny).
        if not (lo < candidate < hi) or abs(2.0 * (candidate - q)) > step_before_last:
            if lo > 0.0 and hi > 4.0 * lo:
                candidate = np.sqrt(lo * hi)
            else:
                candidate = 0.5 * (lo + hi)
        step_before_last = abs(candidate - q)
        if step_before_last <= ROOT_RTOL * candidate:
            return candidate
        q = candidate
    return 0.5 * (lo + hi)


@numba.njit(**NJIT_OPTIONS)
def _dos_update_fits(W, indices, values, s, delta, largest_value):
    """Whether ``W += delta z^T / s`` keeps every touched entry finite in W's dtype.

    A change below half a unit in the last place of the dtype's largest finite number cannot
    round a finite entry to infinity, so the exact check (one pass over the touched rows,
    already in cache) runs only when the bound max|z_j| / s * max|delta| reaches it: never
    in practice, but a float32 model loaded with entries near 3.4e38 stays finite.
    """
    width = W.shape[1]
    largest_change = 0.0
    for r in range(width):
        largest_change = max(largest_change, abs(delta[r]))
    largest_change *= max(largest_value, 1.0) / s
    if W.itemsize == 4:
        limit = 3.4028234663852886e38  # float32's largest finite number
        half_ulp = 1.0141204801825835e31  # 2**103
    else:
        limit = 1.7976931348623157e308
        half_ulp = 9.9792015476736e291  # 2**970
    if largest_change < half_ulp:
        return True
    inverse = 1.0 / s
    for k in range(indices.shape[0] + 1):
        if k < indices.shape[0]:
            j, c = indices[k], values[k] * inverse
        else:
            j, c = W.shape[0] - 1, inverse
        for r in range(width):
            if not abs(W[j, r] + c * delta[r]) <= limit:
                return False
    return True


@numba.njit(**NJIT_OPTIONS)
def _dos_axpy_rows(W, indices, values, s, delta):
    """W += delta z^T / s in feature-major form: row j += (z_j / s) * delta."""
    bias_row = W.shape[0] - 1
    width = W.shape[1]
    inverse = 1.0 / s
    for k in range(indices.shape[0]):
        j = indices[k]
        c = values[k] * inverse
        for r in range(width):
            W[j, r] += c * delta[r]
    for r in range(width):
        W[bias_row, r] += inverse * delta[r]


@numba.njit(**NJIT_OPTIONS)
def _dos_direction(h, a, b, s, y, mode, C, t):
    """Turn h = [U z, V z] of an example with margin y (a - b) < 1 into the update direction
    delta of ``W += delta z^T / s`` (eqs 17-20); returns nu. Shared by ``_dos_step`` and the
    stacked one-vs-one learner (``core.kernels.multiclass``)."""
    rank = h.shape[0] // 2
    if y > 0.0:
        g, shrink_norm, grow_at, shrink_at = a, b, 0, rank
    else:
        g, shrink_norm, grow_at, shrink_at = b, a, rank, 0
    kappa = 0.25 / (C * s) if mode == 2 else 0.0
    q_min = max(0.0, 1.0 - 2.0 * C * s) if mode == 1 else 0.0
    if q_min > 0.0 and _dos_residual(q_min, g, shrink_norm, kappa) <= 0.0:
        q = q_min  # PA-I: the multiplier hits its bound C before the margin is reached
    else:
        q = _dos_root(g, shrink_norm, kappa)
    nu = 1.0 - q
    if q > 0.0:
        # eq (19) / (20), grow side: + nu / (1 - nu) * (W z) z^T / s
        grow = nu / q
        for r in range(rank):
            h[grow_at + r] *= grow
    else:
        # Footnote 1: g = 0, so W z = 0 and eq (19) is 0 * inf. The optimum of (17) gives the
        # grow side a projection of squared length p = 1 - kappa + h / 4 (the shrink side is
        # halved) in a direction of our choice: hidden unit t mod rank, which also breaks the
        # symmetry of a zero initialisation.
        for r in range(rank):
            h[grow_at + r] = 0.0
        h[grow_at + t % rank] = np.sqrt(1.0 - kappa + 0.25 * shrink_norm)
    # shrink side: - nu / (1 + nu) * (W z) z^T / s
    shrink = -nu / (2.0 - q)
    for r in range(rank):
        h[shrink_at + r] *= shrink
    return nu


@numba.njit(**NJIT_OPTIONS)
def _dos_step(W, indices, values, y, mode, C, t, h):
    """One passive-aggressive update of W in place (eqs 17-20). h: scratch of length 2 rank.

    ``t`` (the number of examples learned so far) picks the hidden unit that receives the
    update in the degenerate case. Returns (status, score before the update, nu), nu = 0
    when passive.
    """
    a, b = _dos_score_into(W, indices, values, h)
    score = a - b
    s = 1.0
    largest_value = 0.0
    for k in range(indices.shape[0]):
        s += values[k] * values[k]
        largest_value = max(largest_value, abs(values[k]))
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(s)):
        return STEP_NOT_FINITE, score, 0.0
    if y * score >= 1.0:
        return STEP_OK, score, 0.0
    nu = _dos_direction(h, a, b, s, y, mode, C, t)
    if not _dos_update_fits(W, indices, values, s, h, largest_value):
        return STEP_NOT_FINITE, score, 0.0  # the stored parameters would overflow
    _dos_axpy_rows(W, indices, values, s, h)
    return STEP_OK, score, nu


@numba.njit(**NJIT_OPTIONS)
def _dos_learn_one(W, indices, values, y, mode, C, t):
    """``_dos_step`` with its scratch allocated here (one dispatch per learn_one call)."""
    return _dos_step(W, indices, values, y, mode, C, t, np.empty(W.shape[1]))


@numba.njit(**NJIT_OPTIONS)
def _dos_learn_batch(W, indptr, indices, values, y, mode, C, t0, scores, nus):
    """PA updates over the rows of a CSR batch, in order (learn_many's loop in the kernel).

    Fills ``scores`` (before each update) and ``nus``; returns (-1 or the index of the first
    row that could not be applied (non-finite squared norm or score), number of rows
    learned). Squared norms of all rows are checked before the first update, so bad inputs
    apply nothing at all.
    """
    ahead = prefetch_distance(W)
    return _dos_learn_rows(W, indptr, indices, values, y, mode, C, t0, scores, nus, ahead)


@numba.njit(**NJIT_OPTIONS)
def _dos_learn_rows(W, indptr, indices, values, y, mode, C, t0, scores, nus, ahead):
    """``_dos_learn_batch`` prefetching the rows of the example ``ahead`` positions on (0: no
    prefetching; the benchmarks compare)."""
    n_rows = indptr.shape[0] - 1
    for i in range(n_rows):
        s = 1.0
        for k in range(indptr[i], indptr[i + 1]):
            s += values[k] * values[k]
        if not np.isfinite(s):
            return i, 0
    h = np.empty(W.shape[1])
    for i in range(min(ahead, n_rows)):
        _dos_prefetch_rows(W, indices[indptr[i] : indptr[i + 1]])
    for i in range(n_rows):
        if ahead > 0 and i + ahead < n_rows:
            _dos_prefetch_rows(W, indices[indptr[i + ahead] : indptr[i + ahead + 1]])
        if (
            _dos_row_step(W, indptr, indices, values, i, y[i], mode, C, t0 + i, h, scores, nus)
            != STEP_OK
        ):
            return i, i
    return -1, n_rows


@numba.njit(**NJIT_OPTIONS)
def _dos_row_step(W, indptr, indices, values, i, y, mode, C, t, h, scores, nus):
    """``_dos_step`` of row i of a CSR batch, its score and nu stored at i: its status."""
    start, stop = indptr[i], indptr[i + 1]
    status, score, nu = _dos_step(W, indices[start:stop], values[start:stop], y, mode, C, t, h)
    scores[i] = score
    nus[i] = nu
    return status


@numba.njit(**NJIT_OPTIONS)
def _dos_progressive_rows(W, indptr, indices, values, y, mode, C, t0, scores, nus):
    """Every row of a CSR batch scored in order, the rows with ``y`` = +-1 learned right
    after their score (``_dos_step``) and those with ``y`` = 0 only scored: one pair of a
    one-vs-one reduction, which scores every example and learns its two classes' (progressive
    validation, ``core.stacking.learn_pair_by_pair``).

    Fills ``scores`` and ``nus`` (0 for a row only scored); squared norms are the caller's
    to check. Returns (-1 or the first learned row that could not be applied, rows learned
    before it).
    """
    h = np.empty(W.shape[1])
    learned = 0
    for i in range(indptr.shape[0] - 1):
        start, stop = indptr[i], indptr[i + 1]
        if y[i] == 0.0:
            a, b = _dos_score_into(W, indices[start:stop], values[start:stop], h)
            scores[i] = a - b
            nus[i] = 0.0
            continue
        if (
            _dos_row_step(
                W, indptr, indices, values, i, y[i], mode, C, t0 + learned, h, scores, nus
            )
            != STEP_OK
        ):
            return i, learned
        learned += 1
    return -1, learned


@numba.njit(**NJIT_OPTIONS)
def _dos_score_batch(W, indptr, indices, values, scores):
    """Scores of every row of a CSR batch."""
    _dos_score_rows(W, indptr, indices, values, scores, prefetch_distance(W))


@numba.njit(**NJIT_OPTIONS)
def _dos_score_rows(W, indptr, indices, values, scores, ahead):
    """``_dos_score_batch`` prefetching ``ahead`` examples on, as ``_dos_learn_rows``."""
    h = np.empty(W.shape[1])
    n_rows = indptr.shape[0] - 1
    for i in range(min(ahead, n_rows)):
        _dos_prefetch_rows(W, indices[indptr[i] : indptr[i + 1]])
    for i in range(n_rows):
        if ahead > 0 and i + ahead < n_rows:
            _dos_prefetch_rows(W, indices[indptr[i + ahead] : indptr[i + ahead + 1]])
        start, stop = indptr[i], indptr[i + 1]
        a, b = _dos_score_into(W, indices[start:stop], values[start:stop], h)
        scores[i] = a - b
