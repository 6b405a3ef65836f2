"""The maximal-separation-ratio ellipsoidal classifier (chapters 7-8 of Kharechko's thesis)
and the Gram-Schmidt kernel feature extraction it can run after.

``../shared/papers/linear-and-ellipsoidal-separation-thesis.txt``. The SDP is solved with cvxpy
and Clarabel (the ``separation`` extra).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from core.binary import BatchClassifier
from core.features import CSRBatch
from core.validation import check_choice, check_n_features, check_positive

__all__ = [
    "EllipsoidalClassifier",
    "GramSchmidtFeatures",
    "gsk_transform",
    "solve_max_separation_ratio",
]


class GramSchmidtFeatures:
    """Gram-Schmidt kernel (GSK) feature extraction, chapter 8's Algorithms 1-2 (Cristianini,
    Shawe-Taylor and Lodhi 2002), biased towards positive examples.

    ``fit`` picks ``k`` pivot examples greedily: the one with the largest residual squared
    norm ``n_i``, weighted by ``bias`` for positive examples (``b_i = B^{(y_i + 1)/2} n_i``), and
    maps every example to its coordinates along the Gram-Schmidt orthonormalised pivots
    (the dual is the pivoted incomplete Cholesky decomposition of the linear kernel matrix).
    The pivot's residual norm is taken before the loop over examples (the printed pseudo-code
    divides by an ``n_{i_j}`` it has just set to 0). It stops early when no residual is left;
    the missing columns are 0. ``bias=None`` uses the thesis's choice, ``min(m / m_+, 10)``.

    >>> X = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [1.0, 1.0, 0.0]])
    >>> gsk = GramSchmidtFeatures(n_components=2).fit(X, np.array([1, -1, 1]))
    >>> gsk.transform(X)
    array([[0., 1.],
           [2., 0.],
           [1., 1.]])
    """

    def __init__(self, n_components: int, bias: float | None = None):
        self.n_components = check_n_features(n_components)
        self.bias = None if bias is None else check_positive("bias", bias)

    def fit(self, X: np.ndarray, y: np.ndarray) -> GramSchmidtFeatures:
        X = np.asarray(X, dtype=float)
        m = X.shape[0]
        k = self.n_components
        positives = max(int(np.count_nonzero(y > 0)), 1)
        bias = min(m / positives, 10.0) if self.bias is None else self.bias
        weight = np.where(y > 0, bias, 1.0)
        residual = np.einsum("ij,ij->i", X, X)
        scale = max(float(residual.max(initial=0.0)), 1e-300)
        D = np.zeros((m, k))
        chosen: list[int] = []
        self.pivot_norms_ = np.ones(k)
        for j in range(k):
            i = int(np.argmax(weight * residual))
            if residual[i] <= 1e-12 * scale:
                break
            norm = math.sqrt(residual[i])  # taken before the loop over examples
            D[:, j] = (X @ X[i] - D[:, :j] @ D[i, :j]) / norm
            residual = np.maximum(residual - D[:, j] ** 2, 0.0)
            residual[i] = 0.0
            self.pivot_norms_[j] = norm
            chosen.append(i)
        self.n_used_ = len(chosen)
        self.pivots_ = np.zeros((k, X.shape[1]))
        self.pivot_coordinates_ = np.zeros((k, k))
        self.pivots_[: self.n_used_] = X[chosen]
        self.pivot_coordinates_[: self.n_used_] = D[chosen]
        self.training_features_ = D
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Algorithm 2 of chapter 8: the coordinates of new examples."""
        return gsk_transform(
            X, self.pivots_, self.pivot_coordinates_, self.pivot_norms_, self.n_used_
        )


def gsk_transform(X, pivots, coordinates, norms, n_used: int) -> np.ndarray:
    """Chapter 8's Algorithm 2: ``d_j = (x . p_j - sum_{t<j} d_t D[p_j, t]) / nu_j``."""
    X = np.asarray(X, dtype=float)
    out = np.zeros((X.shape[0], pivots.shape[0]))
    products = X @ pivots[:n_used].T
    for j in range(n_used):
        out[:, j] = (products[:, j] - out[:, :j] @ coordinates[j, :j]) / norms[j]
    return out


class EllipsoidalClassifier(BatchClassifier):
    """The maximal-separation-ratio ellipsoidal classifier (chapters 7-8; Glineur 1998).

    ``fit(X, y)`` solves the semidefinite program (7.9) / (8.1) over the augmented inputs
    ``x_hat = [x, 1]``:

    ``max t`` s.t. ``x_hat_i^T E x_hat_i <= 1`` (positives), ``>= 1 + t`` (negatives),
    ``E >= 0`` (and ``t <= max_ratio``),

    two concentric, similar ellipsoids with squared ratio ``1 + t``, the positives inside the
    inner one and the negatives outside the outer one. It classifies by eq (8.2): the score is
    ``f(x) = ((1 + sqrt(1 + t)) / 2)^2 - x_hat^T E x_hat`` (positive inside the intermediate
    ellipsoid), the label ``sign(f)`` (0 counts as -1).

    The solution is invariant to invertible affine maps of the inputs (Theorem 7.5). The
    solver is handed whitened inputs (centred by the training mean and multiplied by the
    inverse square root of the training covariance, an affine map, so by Theorem 7.5 the
    classifier is the same) for conditioning; ``E_hat_`` is mapped back to the inputs'
    coordinates. With ``n_components`` the inputs are first reduced by
    :class:`GramSchmidtFeatures` (chapter 8; linear, so the invariance then holds for maps of
    the GSK features). If the classes are not separable by ellipsoids the optimum is ``t = 0``
    (Theorem 7.3); ``t_ <= separable_tol`` is treated as that case: ``E_hat_`` is set to the
    default solution (7.10), every score is 0, every label -1 and ``separable_`` is 0.
    ``max_ratio`` keeps the SDP bounded when the positives do not span the space (the thesis
    assumes they do). A batch model: ``learn_one`` / ``learn_many`` are not available; a
    service worker fits it on a buffer of recent examples.

    Parameters
    ----------
    n_features : int
    n_components : int or None
        GSK dimension ``k`` (None: use the inputs as they are).
    gsk_bias : float or None
        GSK's bias ``B`` towards positives (None: ``min(m / m_+, 10)``, the thesis's choice).
    solver : {"CLARABEL", "SCS"}
    max_ratio : float
        Upper bound on ``t``.
    separable_tol : float
    classes : list of 2 labels, optional
        The labels outside and inside the ellipsoid (default: -1 and +1).

    Attributes
    ----------
    gsk_pivots_, gsk_coordinates_, gsk_norms_, gsk_used_
        With ``n_components``: the GSK map (pivot examples ``(k, n_features)``, their
        coordinates ``(k, k)``, the pivots' residual norms ``(k,)``, pivots used).
    E_hat_ : ndarray of shape (d + 1, d + 1)
        ``E_hat`` of eq (8.2) in the coordinates of the (GSK) features, ``d = n_components or
        n_features``; zero before ``fit``.
    t_ : float
        Optimal ``t`` (squared separation ratio minus one).
    n_fit_ : int
        Training examples of the last fit. ``separable_`` : int, 1 if ``t_ > separable_tol``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((60, 2)); y = np.where(np.sum(X**2, axis=1) < 1.0, 1, -1)
    >>> model = EllipsoidalClassifier(n_features=2).fit(X, y)
    >>> bool(model.t_ > 0), float(np.mean(model.predict_many(X) == y))
    (True, 1.0)
    """

    _arrays = ("E_hat_",)
    _scalars = ("n_fit_", "separable_", "t_")
    averageable: ClassVar[bool] = False
    _SOLVERS = ("CLARABEL", "SCS")

    def __init__(
        self,
        *,
        n_features: int,
        n_components: int | None = None,
        gsk_bias: float | None = None,
        solver: str = "CLARABEL",
        max_ratio: float = 1e6,
        separable_tol: float = 1e-6,
        classes: list | None = None,
    ):
        self.n_features = check_n_features(n_features)
        self.n_components = n_components
        self.gsk_bias = gsk_bias
        self.solver = solver
        self.max_ratio = max_ratio
        self.separable_tol = separable_tol
        if n_components is not None:
            check_n_features(n_components)
        if gsk_bias is not None:
            check_positive("gsk_bias", gsk_bias)
        check_choice("solver", solver, self._SOLVERS)
        check_positive("max_ratio", max_ratio)
        check_positive("separable_tol", separable_tol)
        self._init_classes(classes)
        d = n_components if n_components is not None else n_features
        self._d = d
        self.E_hat_ = np.zeros((d + 1, d + 1))
        self.t_ = 0.0
        self.n_fit_ = 0
        self.separable_ = 0
        if n_components is not None:  # the GSK map is part of the learned state
            self._arrays = ("E_hat_", "gsk_pivots_", "gsk_coordinates_", "gsk_norms_")
            self._scalars = (*self._scalars, "gsk_used_")
            self.gsk_pivots_ = np.zeros((d, n_features))
            self.gsk_coordinates_ = np.zeros((d, d))
            self.gsk_norms_ = np.ones(d)
            self.gsk_used_ = 0

    def _features(self, batch: CSRBatch) -> np.ndarray:
        dense = sp.csr_matrix(
            (batch.values, batch.indices, batch.indptr), shape=(batch.n_rows, self.n_features)
        ).toarray()
        if self.n_components is None:
            return dense
        return gsk_transform(
            dense, self.gsk_pivots_, self.gsk_coordinates_, self.gsk_norms_, self.gsk_used_
        )

    def _fit_batch(self, batch: CSRBatch, labels: np.ndarray) -> None:
        """Solve (7.9) on a validated batch; the old model changes only once it is solved."""
        if not (np.any(labels > 0) and np.any(labels < 0)):
            raise ValueError("fit needs both positive and negative examples")
        dense = sp.csr_matrix(
            (batch.values, batch.indices, batch.indptr), shape=(batch.n_rows, self.n_features)
        ).toarray()
        gsk = None
        features = dense
        if self.n_components is not None:
            gsk = GramSchmidtFeatures(self.n_components, self.gsk_bias).fit(dense, labels)
            features = gsk.training_features_
        E_hat, t = solve_max_separation_ratio(
            features, labels, solver=self.solver, max_ratio=self.max_ratio
        )
        if not np.all(np.isfinite(E_hat)) or not math.isfinite(t):
            raise ValueError("the SDP solver returned a non-finite solution")
        if gsk is not None:
            self.gsk_pivots_[...] = gsk.pivots_
            self.gsk_coordinates_[...] = gsk.pivot_coordinates_
            self.gsk_norms_[...] = gsk.pivot_norms_
            self.gsk_used_ = gsk.n_used_
        self.n_fit_ = batch.n_rows
        if t > self.separable_tol:
            self.E_hat_[...] = E_hat
            self.t_ = float(t)
            self.separable_ = 1
        else:  # Theorem 7.3 / eq (7.10)
            self.E_hat_[...] = 0.0
            self.E_hat_[-1, -1] = 1.0
            self.t_ = 0.0
            self.separable_ = 0

    def _scores_of(self, features: np.ndarray) -> np.ndarray:
        hat = np.column_stack([features, np.ones(features.shape[0])])
        level = ((1.0 + math.sqrt(1.0 + self.t_)) / 2.0) ** 2
        return level - np.einsum("ij,jk,ik->i", hat, self.E_hat_, hat)

    def score_batch(self, batch: CSRBatch) -> np.ndarray:
        if not self.n_fit_:
            return np.zeros(batch.n_rows)
        scores = self._scores_of(self._features(batch))
        return np.where(self.separable_ == 1, scores, 0.0)

    def score_row(self, indices, values) -> float:
        batch = CSRBatch(
            np.array([0, indices.shape[0]], dtype=np.int64), np.asarray(indices), values
        )
        return float(self.score_batch(batch)[0])

    def ellipsoid(self) -> tuple[np.ndarray, np.ndarray]:
        """``(E, c)`` of the inner ellipsoid ``(x - c)^T E (x - c) <= 1`` (eqs 7.6-7.8)."""
        d = self._d
        C, dvec, e = self.E_hat_[:d, :d], self.E_hat_[:d, d], self.E_hat_[d, d]
        centre = -np.linalg.lstsq(C, dvec, rcond=None)[0]
        eta = 1.0 - e + centre @ C @ centre
        return C / eta, centre


def solve_max_separation_ratio(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    solver: str = "CLARABEL",
    max_ratio: float = 1e6,
) -> tuple[np.ndarray, float]:
    """``(E_hat, t)`` solving (7.9) for rows ``features`` and labels +-1 (see
    :class:`EllipsoidalClassifier`), with cvxpy. The inputs are whitened first and
    ``E_hat`` is returned in their coordinates."""
    import cvxpy as cp

    X = np.asarray(features, dtype=float)
    m, d = X.shape
    mean = X.mean(axis=0)
    cov = np.atleast_2d(np.cov(X - mean, rowvar=False, bias=True))
    values, vectors = np.linalg.eigh(cov)
    floor = max(float(values.max(initial=0.0)), 1e-300) * 1e-12
    W = vectors @ np.diag(1.0 / np.sqrt(np.maximum(values, floor))) @ vectors.T
    T = np.eye(d + 1)
    T[:d, :d] = W
    T[:d, d] = -W @ mean
    hat = np.column_stack([X, np.ones(m)]) @ T.T  # whitened, augmented
    E = cp.Variable((d + 1, d + 1), PSD=True)
    t = cp.Variable()
    quad = cp.sum(cp.multiply(hat @ E, hat), axis=1)
    positive, negative = labels > 0, labels < 0
    problem = cp.Problem(
        cp.Maximize(t),
        [quad[positive] <= 1.0, quad[negative] >= 1.0 + t, t <= max_ratio],
    )
    problem.solve(solver=solver)
    if problem.status not in ("optimal", "optimal_inaccurate") or E.value is None:
        raise ValueError(f"the SDP solver failed: {problem.status}")
    E_white = (E.value + E.value.T) / 2.0
    return T.T @ E_white @ T, max(float(t.value), 0.0)
