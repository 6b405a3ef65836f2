"""Algorithm 1 of Blondel et al. (NIPS 2017): conditional gradient over the basis, with the
basis selection of eqs (4)-(6) and the corrective refits of the output layer (and the basis).

``../shared/papers/multi-output-polynomial-networks.txt``. Written over numpy / scipy products
(BLAS does the heavy lifting); :class:`Problem` holds the training set and the products the
selection needs, :func:`select_basis` picks one basis vector, :func:`run_algorithm1` runs the
iterations for :meth:`core.mofm.MultiOutputPN.fit` and ``refit`` with the hyperparameters of
:class:`Settings` (this module knows no model class: the model passes what it needs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh

from core.config import FLOAT
from core.features import CSRBatch
from core.kernels.mofm import PENALTIES, _mofm_penalty, _mofm_project

__all__ = [
    "ARMIJO_SHRINK",
    "ARMIJO_SIGMA",
    "DENSE_GRAM_MAX_DIM",
    "HUBER_RELATIVE",
    "SELECTION_NORM",
    "FitIteration",
    "Problem",
    "Settings",
    "batch_loss_grad",
    "run_algorithm1",
    "select_basis",
]

#: the l_p norm of the negative-gradient row that each penalty's basis selection maximises
#: (eq 4): p = inf for l1, 2 for l1/l2, 1 for l1/linf
SELECTION_NORM = {"l1": np.inf, "l1/l2": 2.0, "l1/linf": 1.0}
#: ``gram="auto"`` forms the m matrices Gamma_c (d + 1 <= this) or uses matrix-vector products
DENSE_GRAM_MAX_DIM = 64
#: Armijo rule of the refining iterations (eq 6): sufficient increase and backtracking factor
ARMIJO_SIGMA = 1e-4
ARMIJO_SHRINK = 0.5
#: Huber smoothing of |x| for the l1/linf selection (p = 1), relative to max_c |q_c(h^(0))|
HUBER_RELATIVE = 1e-3


@dataclass(frozen=True)
class FitIteration:
    """One iteration of Algorithm 1, handed to ``fit``'s callback.

    ``iteration``: basis vectors added so far (t); ``n_basis``: rows of H (some may have a zero
    output row); ``objective``: mean training loss after the refit (F_t / n); ``criterion``:
    ``|g_h|_p`` of the selected basis vector (eq 4, mean-loss scale); ``omega``: Omega(V);
    ``seconds``: time since ``fit`` started.

    >>> from core.mofm import MultiOutputPN
    >>> seen = []
    >>> X = np.random.default_rng(0).standard_normal((40, 2)); y = (X[:, 0] > 0).astype(int)
    >>> _ = MultiOutputPN(n_features=2, classes=[0, 1], n_basis=2).fit(
    ...     X, y, callback=lambda model, info: seen.append(info.iteration))
    >>> seen
    [1, 2]
    """

    iteration: int
    n_basis: int
    objective: float
    criterion: float
    omega: float
    seconds: float


@dataclass(frozen=True)
class Settings:
    """The hyperparameters of Algorithm 1 (those of ``core.mofm.MultiOutputPN`` of the same
    names): ``penalty`` Omega (Table 1), ``tau`` its radius, ``corrective`` ``"output"`` or
    ``"full"``, ``refit_iter`` and ``refine_iter`` the iterations of the corrective and
    refining steps, ``tol`` their tolerance, ``seed`` the eigen-solver's start.

    >>> Settings("l1/l2", 10.0, "output", 30, 30, 1e-6, 0).penalty_code
    1
    """

    penalty: str
    tau: float
    corrective: str
    refit_iter: int
    refine_iter: int
    tol: float
    seed: int

    @property
    def penalty_code(self) -> int:
        """``penalty`` as the kernels take it (``core.kernels.mofm.PENALTIES``)."""
        return PENALTIES[self.penalty]


#: ``report(H, V, info)``: called after each iteration with the iterate (rows of H and V)
Report = Callable[[np.ndarray, np.ndarray, FitIteration], None]


class Problem:
    """The training set of Algorithm 1 and the products it needs.

    ``Z = [X, 1]`` (dense when d + 1 <= 512 or the data is dense, CSR otherwise), targets T
    (n, m), and: hidden activations, mean loss and its gradient, and the selection quantities
    ``q_c(h) = h^T Gamma_c h`` and ``sum_c w_c Gamma_c h`` either from the formed Gamma_c
    (small d) or from products with Z only (``Z^T (D_c (Z h))``; large d).

    >>> from core.features import as_batch
    >>> T = np.eye(2)[[0, 1, 1]]  # one-hot targets of 3 examples, 2 outputs
    >>> problem = Problem(as_batch(np.eye(3)[:, :2], 2), 2, T, 0, 0, "auto")
    >>> problem.n, problem.m
    (3, 2)
    """

    def __init__(self, batch: CSRBatch, n_features: int, T, loss: int, activation: int, gram):
        n = batch.n_rows
        dim = n_features + 1
        X = sp.csr_matrix((batch.values, batch.indices, batch.indptr), shape=(n, n_features))
        density = X.nnz / max(1, n * n_features)
        if (dim <= 512 or density > 0.2) and n * dim <= 5e7:
            Z = np.empty((n, dim))
            Z[:, :-1] = X.toarray()
            Z[:, -1] = 1.0
            self.ZT = Z.T
        else:
            Z = sp.hstack([X, np.ones((n, 1))], format="csr")
            self.ZT = Z.T.tocsr()
        self.Z = Z
        self.n, self.dim, self.m = n, dim, T.shape[1]
        self.T = T
        self.loss = loss
        self.activation = activation
        if activation == 1:
            self.Z2 = Z * Z if isinstance(Z, np.ndarray) else Z.multiply(Z).tocsr()
            self.Z2T = self.Z2.T if isinstance(Z, np.ndarray) else self.Z2.T.tocsr()
        self.dense_gram = gram == "dense" or (gram == "auto" and dim <= DENSE_GRAM_MAX_DIM)
        if gram == "matvec" and dim < 3:
            self.dense_gram = True  # Lanczos needs a dimension >= 3
        self.pairs = None
        if self.dense_gram and isinstance(Z, np.ndarray) and n * dim * (dim + 1) // 2 <= 4_000_000:
            upper = np.triu_indices(dim)
            self.upper = upper
            self.pairs = np.ascontiguousarray(Z[:, upper[0]] * Z[:, upper[1]])

    # hidden layer and loss
    def hidden(self, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A = Z H^T and Phi = sigma(A) (n, t)."""
        A = np.asarray(self.Z @ H.T)
        if self.activation == 0:
            return A, A * A
        return A, 0.5 * (A * A - np.asarray(self.Z2 @ (H * H).T))

    def loss_grad(self, O: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean loss and its gradient in O (the loss gradients divided by n)."""
        total, G = batch_loss_grad(self.loss, self.T, O)
        G /= self.n
        return total / self.n, G

    def grad_H(self, A: np.ndarray, H: np.ndarray, W: np.ndarray) -> np.ndarray:
        """d F / d H given W = G V^T (n, t): sum_i W_ir d sigma(h_r, z_i) / d h_r."""
        if self.activation == 0:
            return 2.0 * np.asarray(self.ZT @ (A * W)).T
        return np.asarray(self.ZT @ (A * W)).T - H * np.asarray(self.Z2T @ W).T

    # selection
    def gammas(self, G: np.ndarray) -> np.ndarray:
        """The m matrices Gamma_c (m, d + 1, d + 1) (small d only)."""
        dim, m = self.dim, self.m
        if self.pairs is not None:
            packed = G.T @ self.pairs
            gam = np.zeros((m, dim, dim))
            gam[:, self.upper[0], self.upper[1]] = packed
            gam = gam + np.transpose(np.triu(gam, 1), (0, 2, 1))
        else:
            gam = np.empty((m, dim, dim))
            for c in range(m):
                weighted = (
                    self.Z.multiply(G[:, c : c + 1])
                    if sp.issparse(self.Z)
                    else self.Z * G[:, c : c + 1]
                )
                gam[c] = np.asarray(self.ZT @ weighted)
        if self.activation == 1:
            diagonal = np.asarray(self.Z2T @ G).T  # (m, d + 1)
            gam = 0.5 * gam
            idx = np.arange(dim)
            gam[:, idx, idx] -= 0.5 * diagonal
        return gam

    def q_matvec(self, G: np.ndarray, h: np.ndarray) -> np.ndarray:
        """q_c = h^T Gamma_c h for every c, from products with Z."""
        a = np.asarray(self.Z @ h).ravel()
        q = G.T @ (a * a)
        if self.activation == 1:
            q = 0.5 * (q - G.T @ np.asarray(self.Z2 @ (h * h)).ravel())
        return q

    def gamma_matvec(self, G: np.ndarray, w: np.ndarray, h: np.ndarray) -> np.ndarray:
        """sum_c w_c Gamma_c h = Z^T ((G w) * (Z h)) (FM: halved, minus the diagonal term)."""
        u = G @ w
        a = np.asarray(self.Z @ h).ravel()
        out = np.asarray(self.ZT @ (u * a)).ravel()
        if self.activation == 1:
            out = 0.5 * (out - np.asarray(self.Z2T @ u).ravel() * h)
        return out


def batch_loss_grad(loss: int, T: np.ndarray, O: np.ndarray) -> tuple[float, np.ndarray]:
    """Sum of the losses of the rows of O against T and the gradients (n, m): the losses of
    ``core.kernels.mofm`` vectorised over rows (numpy's SIMD exp is several times faster than
    a scalar loop, and Algorithm 1 evaluates the loss at every refitting step)."""
    if loss == 0:  # softmax
        top = O.max(axis=1, keepdims=True)
        E = np.exp(O - top)
        S = E.sum(axis=1, keepdims=True)
        total = float(np.sum(top) + np.sum(np.log(S)) - np.vdot(T, O))
        return total, E / S - T
    if loss == 1:  # squared
        G = O - T
        return 0.5 * float(np.vdot(G, G)), G
    if loss == 2:  # smoothed hinge: projection of U = O + 1 - T onto the simplex, row-wise
        U = O + 1.0 - T
        P = _simplex_rows(U)
        total = float(np.vdot(P, U) - 0.5 * np.vdot(P, P) - np.vdot(T, O)) + 0.5 * O.shape[0]
        return total, P - T
    margin = T * O  # binary logistic per output
    total = float(np.sum(np.logaddexp(0.0, -margin)))
    return total, -T * (0.5 * (1.0 - np.tanh(0.5 * margin)))


def _simplex_rows(U: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of U onto the probability simplex (sort-based)."""
    ordered = -np.sort(-U, axis=1)
    cumulative = np.cumsum(ordered, axis=1) - 1.0
    steps = np.arange(1, U.shape[1] + 1)
    rho = np.count_nonzero(ordered - cumulative / steps > 0.0, axis=1)
    theta = cumulative[np.arange(U.shape[0]), rho - 1] / rho
    return np.maximum(U - theta[:, None], 0.0)


def _criterion(q: np.ndarray, p: float) -> float:
    """|g_h|_p from q (g_h = -q)."""
    return float(np.linalg.norm(q, ord=p))


def _dominant_eigenvectors(problem: Problem, G: np.ndarray, gam, tol: float, rng):
    """Eq (5) for every output: (eigenvalues, vectors (m, d + 1)) of largest |eigenvalue|."""
    m, dim = problem.m, problem.dim
    if gam is not None:
        values, vectors = np.linalg.eigh(gam)
        best = np.argmax(np.abs(values), axis=1)
        return values[np.arange(m), best], vectors[np.arange(m), :, best]
    values = np.empty(m)
    vectors = np.empty((m, dim))
    start = rng.standard_normal(dim)
    for c in range(m):
        weights = np.zeros(m)
        weights[c] = 1.0

        def matvec(h, weights=weights):
            return problem.gamma_matvec(G, weights, np.ravel(h))

        operator = LinearOperator((dim, dim), matvec=matvec, dtype=FLOAT)
        value, vector = eigsh(operator, k=1, which="LM", tol=tol, v0=start)
        values[c], vectors[c] = value[0], vector[:, 0]
    return values, vectors


def select_basis(
    problem: Problem,
    G: np.ndarray,
    p: float,
    *,
    tol: float = 1e-6,
    refine_iter: int = 30,
    rng=None,
    init: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Approximate ``argmax_{|h| <= 1} |g_h|_p`` (eq 4) given the loss gradient G (n, m).

    p = inf: the dominant eigenvector (eq 5). p = 2 or 1: that vector (or ``init``) refined by
    the conditional-gradient iterations of eq (6), ``h <- (1 - eta) h + eta grad / |grad|``,
    with the Armijo rule on f_2 = sum_c q_c^2 or on the Huber-smoothed f_1 = sum_c |q_c|; the
    better of the initial and refined vectors under the exact criterion is returned, with its
    value. The vector has unit norm.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    gam = problem.gammas(G) if problem.dense_gram else None
    if gam is not None:

        def q_of(h):
            return np.einsum("cij,i,j->c", gam, h, h)

        def weighted(w, h):
            return np.einsum("c,cij,j->i", w, gam, h)

    else:

        def q_of(h):
            return problem.q_matvec(G, h)

        def weighted(w, h):
            return problem.gamma_matvec(G, w, h)

    if init is None:
        values, vectors = _dominant_eigenvectors(problem, G, gam, tol, rng)
        h0 = vectors[int(np.argmax(np.abs(values)))]
    else:
        h0 = np.asarray(init, dtype=FLOAT)
    h0 = h0 / max(np.linalg.norm(h0), np.finfo(float).tiny)
    best, best_value = h0, _criterion(q_of(h0), p)
    if p == np.inf or refine_iter == 0:
        return best, best_value
    mu = HUBER_RELATIVE * max(np.max(np.abs(q_of(h0))), np.finfo(float).tiny)

    def smoothed(q):
        if p == 2.0:
            return float(np.sum(q * q)), 2.0 * q
        small = np.abs(q) <= mu
        value = np.where(small, 0.5 * q * q / mu, np.abs(q) - 0.5 * mu)
        return float(np.sum(value)), np.where(small, q / mu, np.sign(q))

    h = h0
    f, dq = smoothed(q_of(h))
    for _ in range(refine_iter):
        gradient = 2.0 * weighted(dq, h)  # d f / d h = sum_c f'(q_c) 2 Gamma_c h
        norm = np.linalg.norm(gradient)
        if norm == 0.0:
            break
        direction = gradient / norm
        gap = norm - float(gradient @ h)  # <grad, s - h> >= 0, the conditional-gradient gap
        if gap <= tol * max(abs(f), np.finfo(float).tiny):
            break
        eta = 1.0
        while True:
            candidate = (1.0 - eta) * h + eta * direction
            f_new, dq_new = smoothed(q_of(candidate))
            if f_new >= f + ARMIJO_SIGMA * eta * gap or eta < 1e-10:
                break
            eta *= ARMIJO_SHRINK
        if f_new < f:
            break
        h, f, dq = candidate, f_new, dq_new
    h = h / max(np.linalg.norm(h), np.finfo(float).tiny)
    value = _criterion(q_of(h), p)
    if value > best_value:
        best, best_value = h, value
    return best, best_value


def _project(V: np.ndarray, penalty: int, tau: float) -> np.ndarray:
    """Euclidean projection of V onto {Omega(V) <= tau} (a new array)."""
    out = np.ascontiguousarray(V, dtype=FLOAT).copy()
    t, m = out.shape
    if t:
        _mofm_project(out, t, penalty, tau, np.empty(2 * t * m + t))
    return out


class _Refitter:
    """The corrective steps of Algorithm 1 over one problem.

    ``output``: min_V F(V, H) over Omega(V) <= tau (convex) by FISTA (Beck and Teboulle 2009)
    with backtracking on the Lipschitz constant and Euclidean projections. ``full``: the same
    steps on V alternated with projected accelerated steps on H (rows in the unit ball).

    Two things make the corrective steps cheap enough for a few hundred iterations of
    Algorithm 1 (the squared activations make F badly conditioned in V: the Gram matrix of the
    columns sigma(Z h_r) is nearly singular; docs/mofm.md has the figures):

    - the momentum (the previous iterate and FISTA's counter) and the Lipschitz estimates
      persist from one iteration of Algorithm 1 to the next, the new row of V entering with
      zero momentum: the refits of the greedy path form one long accelerated run instead of
      many short restarted ones, which need several times more iterations for the same
      objective;
    - whenever F would increase, the momentum is dropped and the step is redone from the last
      iterate (function-value restart, O'Donoghue and Candes 2015), so F never increases: a
      refit starts from the previous solution with a zero row appended (same F) and Algorithm
      1's objective is non-increasing.
    """

    def __init__(self, problem: Problem, penalty: int, tau: float, iterations: int, tol: float):
        self.problem = problem
        self.penalty = penalty
        self.tau = tau
        self.iterations = iterations
        self.tol = tol
        self.L_V = 1.0
        self.L_H = 1.0
        self.previous_V: tuple[np.ndarray, float] | None = None
        self.previous_H: tuple[np.ndarray, float] | None = None

    def _carried(self, previous, x: np.ndarray):
        """(previous iterate padded with zero rows, FISTA counter) if it continues x's run."""
        if previous is None or previous[0].shape[0] > x.shape[0]:
            return None, 1.0
        padding = np.zeros((x.shape[0] - previous[0].shape[0], x.shape[1]))
        return np.vstack([previous[0], padding]), previous[1]

    def _V_step(self, Phi, x, Ox, Fx, Gx, x_prev, s, L):
        """One FISTA step on V from (x, x_prev); returns the new (x, Ox, Fx, Gx, x_prev, s, L,
        progress), the momentum dropped when it would increase F."""
        problem = self.problem
        while True:
            s_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * s * s))
            beta = (s - 1.0) / s_new if x_prev is not None else 0.0
            if beta > 0.0:
                y = x + beta * (x - x_prev)
                Oy = Phi @ y
                Fy, Gy = problem.loss_grad(Oy)
            else:
                y, Fy, Gy = x, Fx, Gx
            gradient = Phi.T @ Gy
            while True:
                x_new = _project(y - gradient / L, self.penalty, self.tau)
                d = x_new - y
                O_new = Phi @ x_new
                F_new, G_new = problem.loss_grad(O_new)
                bound = Fy + float(np.vdot(gradient, d)) + 0.5 * L * float(np.vdot(d, d))
                if F_new <= bound + 1e-15 * abs(Fy) or L > 1e300:
                    break
                L *= 2.0
            if F_new <= Fx or beta == 0.0:
                break
            x_prev, s = None, 1.0  # restart: redo the step without momentum
        if F_new > Fx:  # a plain projected step cannot increase F (up to rounding): stop
            return x, Ox, Fx, Gx, x_prev, 1.0, L, False
        return x_new, O_new, F_new, G_new, x, s_new, L, True

    def output(self, Phi: np.ndarray, V: np.ndarray, iterations: int | None = None):
        """Refit V with Phi fixed; returns (V, O, F, G) with F(V) <= F(initial V)."""
        x = V
        Ox = Phi @ x
        Fx, Gx = self.problem.loss_grad(Ox)
        x_prev, s = self._carried(self.previous_V, x)
        L = max(self.L_V * 0.5, 1e-12)
        for _ in range(self.iterations if iterations is None else iterations):
            F_before = Fx
            x, Ox, Fx, Gx, x_prev, s, L, progress = self._V_step(Phi, x, Ox, Fx, Gx, x_prev, s, L)
            if not progress or F_before - Fx <= self.tol * max(abs(Fx), 1e-12):
                break
        self.previous_V = None if x_prev is None else (x_prev, s)
        self.L_V = L
        return x, Ox, Fx, Gx

    def full(self, H: np.ndarray, V: np.ndarray, iterations: int | None = None):
        """Alternate accelerated projected steps on H (rows in the unit ball, backtracking) and
        FISTA steps on V. Returns (H, V, Phi, O, F, G) with F no larger than at the start."""
        problem = self.problem
        A, Phi = problem.hidden(H)
        O = Phi @ V
        F, G = problem.loss_grad(O)
        H_prev, s_H = self._carried(self.previous_H, H)
        V_prev, s_V = self._carried(self.previous_V, V)
        for _ in range(self.iterations if iterations is None else iterations):
            F_start = F
            # H block: accelerated projected gradient, restarted when F would increase
            while True:
                s_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * s_H * s_H))
                beta = (s_H - 1.0) / s_new if H_prev is not None else 0.0
                Y = _unit_rows(H + beta * (H - H_prev)) if beta > 0.0 else H
                A_y, Phi_y = problem.hidden(Y) if beta > 0.0 else (A, Phi)
                F_y, G_y = problem.loss_grad(Phi_y @ V) if beta > 0.0 else (F, G)
                gradient = problem.grad_H(A_y, Y, G_y @ V.T)
                L = max(self.L_H * 0.5, 1e-12)
                while True:
                    H_new = _unit_rows(Y - gradient / L)
                    d = H_new - Y
                    A_new, Phi_new = problem.hidden(H_new)
                    O_new = Phi_new @ V
                    F_new, G_new = problem.loss_grad(O_new)
                    bound = F_y + float(np.vdot(gradient, d)) + 0.5 * L * float(np.vdot(d, d))
                    if F_new <= bound + 1e-15 * abs(F_y) or L > 1e300:
                        break
                    L *= 2.0
                self.L_H = L
                if F_new <= F or beta == 0.0:
                    break
                H_prev, s_H = None, 1.0
            if F_new <= F:
                H_prev, s_H = H, s_new
                H, A, Phi, O, F, G = H_new, A_new, Phi_new, O_new, F_new, G_new
            else:
                H_prev, s_H = None, 1.0
            # V block
            V, O, F, G, V_prev, s_V, self.L_V, _ = self._V_step(
                Phi, V, O, F, G, V_prev, s_V, max(self.L_V * 0.5, 1e-12)
            )
            if F_start - F <= self.tol * max(abs(F), 1e-12):
                break
        self.previous_H = None if H_prev is None else (H_prev, s_H)
        self.previous_V = None if V_prev is None else (V_prev, s_V)
        return H, V, Phi, O, F, G


def _unit_rows(H: np.ndarray) -> np.ndarray:
    """Rows projected onto the unit ball."""
    return H / np.maximum(1.0, np.linalg.norm(H, axis=1, keepdims=True))


def run_algorithm1(
    problem: Problem,
    H,
    V,
    n_target: int,
    settings: Settings,
    report: Report | None = None,
    warm: bool = False,
):
    """Algorithm 1 with ``settings`` from (H, V) up to ``n_target`` rows (``warm``: refit the
    given rows first); returns (H, V) uncompacted. ``report(H, V, FitIteration)`` (optional)
    after each iteration, with the iterate."""
    started = time.perf_counter()
    p = SELECTION_NORM[settings.penalty]
    penalty = settings.penalty_code
    refitter = _Refitter(problem, penalty, float(settings.tau), settings.refit_iter, settings.tol)
    rng = np.random.default_rng(settings.seed)
    n, k = problem.n, max(n_target, H.shape[0])
    Phi = np.zeros((n, k), order="F")
    t = H.shape[0]
    if t:
        Phi[:, :t] = problem.hidden(H)[1]
        V = _project(V, penalty, float(settings.tau))
    O = Phi[:, :t] @ V
    F, G = problem.loss_grad(O)
    if warm and t:
        V, O, F, G = refitter.output(Phi[:, :t], V, 5 * settings.refit_iter)
        if settings.corrective == "full":
            H, V, Phi_t, O, F, G = refitter.full(H, V)
            Phi[:, :t] = Phi_t
        keep = np.any(V != 0.0, axis=1)
        if not keep.all():
            H, V = H[keep], V[keep]
            t = H.shape[0]
            Phi[:, :t] = problem.hidden(H)[1]
            refitter.previous_V = refitter.previous_H = None
        if report is not None:
            _report(report, penalty, H, V, 0, F, 0.0, started)
    iteration = 0
    while t < n_target:
        h, criterion = select_basis(
            problem, G, p, tol=settings.tol, refine_iter=settings.refine_iter, rng=rng
        )
        if not (np.isfinite(criterion) and criterion > 0.0):
            break  # the gradient vanishes on every direction: F is minimal over the ball
        H = np.vstack([H, h[None, :]])
        V = np.vstack([V, np.zeros((1, problem.m))])
        Phi[:, t] = problem.hidden(h[None, :])[1][:, 0]
        t += 1
        iteration += 1
        V, O, F, G = refitter.output(Phi[:, :t], V)
        if settings.corrective == "full":
            H, V, Phi_t, O, F, G = refitter.full(H, V)
            Phi[:, :t] = Phi_t
        if report is not None:
            _report(report, penalty, H, V, iteration, F, criterion, started)
    return H, V


def _report(report: Report, penalty: int, H, V, iteration, F, criterion, started) -> None:
    """Call ``report`` with the iterate and its FitIteration."""
    info = FitIteration(
        iteration=iteration,
        n_basis=H.shape[0],
        objective=float(F),
        criterion=float(criterion),
        omega=float(_mofm_penalty(np.ascontiguousarray(V), H.shape[0], penalty)),
        seconds=time.perf_counter() - started,
    )
    report(H, V, info)
