"""Separation oracles (Definition 2.1 of Kharechko's thesis): finite sets of constraints,
semidefinite constraints through Algorithm 7, and SDPA files.

``../shared/papers/linear-and-ellipsoidal-separation-thesis.txt``. An oracle answers, for a
point ``x``, with a constraint ``a`` of its set that ``x`` violates (``a . x <= threshold``) or
None; the batch algorithms of :mod:`core.separation.algorithms` see sets only this way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from core.kernels.separation import _psd_counterexample
from core.validation import check_positive

__all__ = [
    "FiniteConstraints",
    "Oracle",
    "SemidefiniteConstraints",
    "maxcut_constraints",
    "psd_counterexample",
    "read_sdpa",
]


class Oracle(Protocol):
    """A set ``A`` of constraints ``a . x >= 0`` in ``dim`` dimensions, seen through a
    separation oracle (Definition 2.1).

    >>> oracle: Oracle = FiniteConstraints([[1.0, 0.0]])
    >>> oracle.dim, oracle.counterexample(np.array([-1.0, 0.0]))
    (2, array([1., 0.]))
    """

    dim: int

    def counterexample(self, x: np.ndarray, threshold: float = 0.0) -> np.ndarray | None:
        """Some ``a`` in ``A`` with ``a . x <= threshold``, or None if there is none."""


class FiniteConstraints:
    """A finite set ``A`` (the rows of ``A``) normalised to unit vectors; zero rows are
    dropped. The oracle answers with the most violated row (the smallest ``a . x``).

    >>> oracle = FiniteConstraints([[1.0, 0.0], [1.0, 1.0]])
    >>> oracle.counterexample(np.array([-1.0, 1.0]))
    array([1., 0.])
    >>> oracle.counterexample(np.array([1.0, 0.0])) is None
    True
    """

    def __init__(self, A):
        A = np.array(A, dtype=float, ndmin=2)
        if A.ndim != 2 or not np.all(np.isfinite(A)):
            raise ValueError("constraints must be a finite 2-D array")
        scale = np.max(np.abs(A), axis=1, keepdims=True)
        keep = scale[:, 0] > 0
        A = A[keep] / scale[keep]
        self.A = A / np.linalg.norm(A, axis=1, keepdims=True)
        self.dim = A.shape[1]

    def counterexample(self, x: np.ndarray, threshold: float = 0.0) -> np.ndarray | None:
        if self.A.shape[0] == 0:
            return None
        products = self.A @ x
        i = int(np.argmin(products))
        return self.A[i].copy() if products[i] <= threshold else None

    def rescale(self, H: np.ndarray) -> FiniteConstraints:
        """The set ``H A`` (rows ``H a``), normalised again (Algorithm 6's ``H_t A``)."""
        return FiniteConstraints(self.A @ H.T)

    def margin(self, x: np.ndarray) -> float:
        """``min_a a . x / |x|`` (the margin x achieves)."""
        return float(np.min(self.A @ x) / np.linalg.norm(x))


def psd_counterexample(A, *, tol: float | None = None) -> np.ndarray | None:
    """Algorithm 7: a unit ``v`` with ``v^T A v < 0``, or None if ``A`` is positive
    semidefinite (up to ``tol``).

    Pivoted incomplete Cholesky (pivot on the largest residual diagonal entry) that stops at
    the first residual diagonal entry below ``-tol``, or, when every residual diagonal entry is
    within ``tol`` of 0, at an off-diagonal residual larger than ``tol`` (the printed algorithm
    certifies ``[[0, 1], [1, 0]]`` as positive semidefinite; see the kernel). The returned
    vector is checked: ``v^T A v < 0`` in floating point, else None. None means
    ``A = R^T R + E`` with ``|E_ij| <= tol`` on the unfactored block, so
    ``lambda_min(A) >= -n tol``. ``tol`` defaults to ``16 n eps max |A_ij|``.

    >>> psd_counterexample(np.array([[0.0, 1.0], [1.0, 0.0]])).round(6)
    array([-0.707107,  0.707107])
    >>> psd_counterexample(np.array([[2.0, 1.0], [1.0, 2.0]])) is None
    True
    """
    A = np.array(A, dtype=float, order="C")
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("the matrix holds non-finite values")
    if not np.allclose(A, A.T, rtol=1e-12, atol=1e-300):
        raise ValueError("the matrix is not symmetric")
    n = A.shape[0]
    if n == 0:
        return None
    scale = float(np.max(np.abs(A)))
    if tol is None:
        tol = 16.0 * n * np.finfo(float).eps * scale
    S = A.copy()
    v = np.empty(n)
    if not _psd_counterexample(S, float(tol), np.zeros((n, n)), np.empty(n, np.int64), v):
        return None
    return v if float(v @ A @ v) < 0.0 else None


class SemidefiniteConstraints:
    """The semidefinite constraint ``F0 + sum_i x_i F_i >= 0`` (problem 6.2) as a linear
    separation problem (Proposition 6.1), homogenised as in Proposition 6.2.

    The design vector is ``y = (y_0, y_1, ..., y_m)`` with ``x = y[1:] / y_0``, and
    ``G(y) = blockdiag(y_0 F0 + sum_i y_i F_i, y_0)``: the extra 1 x 1 block keeps ``y_0 > 0``,
    without which the homogeneous problem has solutions with ``y_0 <= 0`` that map to nothing.
    Its constraints are ``a_u . y = u^T G(y) u >= 0`` for unit ``u``, with
    ``a_u = (u'^T F0 u' + u_n^2, u'^T F_1 u', ..., u'^T F_m u')`` (``u' = u[:n]``).
    :meth:`counterexample` runs Algorithm 7 on ``G(y) - (threshold + strictness |y|) I``: a
    point is accepted only when ``G(y) >= strictness |y| I`` (up to Algorithm 7's tolerance),
    so the final ``x`` is strictly feasible; at ``y = 0`` it answers ``u = e_n``. The vectors
    ``a_u`` are not normalised (section 6.5).

    Parameters
    ----------
    F0 : (n, n) array
    Fs : sequence of m (n, n) arrays or scipy sparse matrices
    strictness : float
        Relative margin demanded of an accepted point.

    Examples
    --------
    >>> oracle = SemidefiniteConstraints(-np.eye(2), [np.eye(2)])  # x I - I >= 0: x >= 1
    >>> oracle.counterexample(np.array([1.0, 0.5])) is not None  # x = 0.5
    True
    >>> oracle.counterexample(np.array([1.0, 2.0])) is None  # x = 2
    True
    """

    def __init__(self, F0, Fs, *, strictness: float = 1e-9):
        F0 = np.array(F0, dtype=float)
        n = F0.shape[0]
        if F0.shape != (n, n) or not np.allclose(F0, F0.T):
            raise ValueError("F0 must be a symmetric square matrix")
        self.n = n
        self.m = len(Fs)
        self.dim = self.m + 1
        self.F0 = F0
        self.strictness = check_positive("strictness", strictness)
        columns = []
        diagonal = True
        for F in Fs:
            F = sp.csr_matrix(F, dtype=float)
            if F.shape != (n, n):
                raise ValueError(f"every F_i must be {n} x {n}, got {F.shape}")
            diagonal &= F.nnz == F.diagonal().astype(bool).sum()
            columns.append(F.reshape(1, n * n))
        #: (n^2, m): vec(sum_i y_i F_i) = stack @ y[1:]; a_u[1:] = stack^T vec(u u^T)
        self.stack = sp.vstack(columns).T.tocsr() if columns else sp.csr_matrix((n * n, 0))
        self.diagonals = (
            np.array([np.asarray(sp.csr_matrix(F).diagonal()) for F in Fs]) if diagonal else None
        )
        self.n_calls = 0

    def matrix(self, y: np.ndarray) -> np.ndarray:
        """``G(y)``, ``(n + 1) x (n + 1)``."""
        n = self.n
        G = np.zeros((n + 1, n + 1))
        G[:n, :n] = y[0] * self.F0
        if self.diagonals is not None:
            G[np.arange(n), np.arange(n)] += self.diagonals.T @ y[1:]
        else:
            G[:n, :n] += (self.stack @ y[1:]).reshape(n, n)
        G[n, n] = y[0]
        return G

    def constraint(self, u: np.ndarray) -> np.ndarray:
        """``a_u`` for a vector ``u`` of length ``n + 1`` (so that ``a_u . y = u^T G(y) u``)."""
        n = self.n
        head = u[:n]
        a = np.empty(self.dim)
        a[0] = head @ self.F0 @ head + u[n] * u[n]
        if self.diagonals is not None:
            a[1:] = self.diagonals @ (head * head)
        else:
            a[1:] = self.stack.T @ np.outer(head, head).ravel()
        return a

    def counterexample(self, y: np.ndarray, threshold: float = 0.0) -> np.ndarray | None:
        self.n_calls += 1
        norm = float(np.linalg.norm(y))
        if norm == 0.0:
            return self.constraint(np.eye(self.n + 1)[self.n]) if threshold >= 0 else None
        G = self.matrix(y)
        G[np.diag_indices_from(G)] -= threshold + self.strictness * norm
        u = psd_counterexample(G)
        return None if u is None else self.constraint(u)

    def solution(self, y: np.ndarray) -> np.ndarray:
        """``x = y[1:] / y_0`` (the point of problem 6.2 that ``y`` stands for)."""
        return y[1:] / y[0]


def maxcut_constraints(laplacian, *, strictness: float = 1e-9) -> SemidefiniteConstraints:
    """Problem (6.7): ``-L / 4 + diag(x) >= 0`` (the MAX-CUT relaxation's feasible set) for a
    graph Laplacian ``L = diag(C 1) - C``."""
    L = np.asarray(laplacian, dtype=float)
    n = L.shape[0]
    Fs = [sp.csr_matrix(([1.0], ([i], [i])), shape=(n, n)) for i in range(n)]
    return SemidefiniteConstraints(-L / 4.0, Fs, strictness=strictness)


def read_sdpa(path: str | Path) -> tuple[np.ndarray, np.ndarray, list[sp.csr_matrix]]:
    """Read a single-block SDPA sparse file (``.dat-s``, SDPLIB): ``(c, F0, [F_1..F_m])``.

    SDPA's problem is ``min c.x`` s.t. ``sum_i x_i F_i - F0 >= 0`` (note the minus: the thesis's
    F0 of problem 6.2 is ``-F0`` of the file). Only the upper triangle is stored; it is mirrored.
    """
    lines = []
    for raw in Path(path).read_text().splitlines():
        line = raw.split("*")[0].split('"')[0].strip()
        if line:
            lines.append(line)
    m = int(lines[0].split()[0])
    n_blocks = int(lines[1].split()[0])
    sizes = [int(s) for s in lines[2].replace(",", " ").replace("{", " ").replace("}", " ").split()]
    if n_blocks != 1 or len(sizes) != 1 or sizes[0] <= 0:
        raise ValueError("only single-block SDPA problems with a dense block are supported")
    n = sizes[0]
    c = np.array(
        [float(s) for s in lines[3].replace(",", " ").replace("{", " ").replace("}", " ").split()]
    )
    if c.shape != (m,):
        raise ValueError(f"expected {m} costs, got {c.shape[0]}")
    entries = [[] for _ in range(m + 1)]
    for line in lines[4:]:
        k, block, i, j, value = line.split()
        entries[int(k)].append((int(i) - 1, int(j) - 1, float(value)))
    matrices = []
    for items in entries:
        if items:
            rows, cols, vals = (np.array(v) for v in zip(*items, strict=True))
        else:
            rows = cols = np.zeros(0, int)
            vals = np.zeros(0)
        upper = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
        matrices.append((upper + upper.T - sp.diags(upper.diagonal())).tocsr())
    return c, matrices[0].toarray(), matrices[1:]
