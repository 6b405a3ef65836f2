"""Multi-output polynomial networks (PNs) and factorization machines (FMs).

Blondel, Niculae, Otsuka and Ueda, "Multi-output polynomial networks and factorization
machines", NIPS 2017 (``../shared/papers/multi-output-polynomial-networks.txt``).

- :class:`MultiOutputPN`: ``o(x) = sum_r sigma(h_r, z) v_r`` with a basis ``H`` shared by all
  outputs (eq 1), trained in batch by the conditional gradient Algorithm 1 (``fit``), online by
  (Ada)SGD (``learn_one`` / ``learn_many``), and warm-started on fresh data (``refit``, which
  returns a new model for an atomic swap).
- :class:`Reservoir`: the bounded sample of recent examples the service refits on.

Algorithm 1 is written over numpy / scipy products (BLAS does the heavy lifting); the per-example
work (scores, SGD steps, losses, projections) is in ``core.kernels.mofm``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh

from core.base import Estimator, check_classes
from core.config import FLOAT, INDEX
from core.features import CSRBatch, Row, as_batch, as_row, check_n_features
from core.kernels.mofm import (
    ACTIVATIONS,
    LOSSES,
    OPTIMIZERS,
    PENALTIES,
    STEP_OK,
    _mofm_learn_batch,
    _mofm_penalty,
    _mofm_project,
    _mofm_score,
    _mofm_score_batch,
    _mofm_step,
)

#: the l_p norm of the negative-gradient row that each penalty's basis selection maximises
#: (eq 4): p = inf for l1, 2 for l1/l2, 1 for l1/linf
SELECTION_NORM = {"l1": np.inf, "l1/l2": 2.0, "l1/linf": 1.0}
#: losses that take a class label (one-hot target), and those that take a target vector
CLASS_LOSSES = ("softmax", "squared", "smoothed_hinge", "logistic")
VECTOR_LOSSES = ("squared", "logistic")
CORRECTIVES = ("output", "full")
GRAMS = ("auto", "dense", "matvec")
#: ``gram="auto"`` forms the m matrices Gamma_c (d + 1 <= this) or uses matrix-vector products
DENSE_GRAM_MAX_DIM = 64
#: Armijo rule of the refining iterations (eq 6): sufficient increase and backtracking factor
ARMIJO_SIGMA = 1e-4
ARMIJO_SHRINK = 0.5
#: Huber smoothing of |x| for the l1/linf selection (p = 1), relative to max_c |q_c(h^(0))|
HUBER_RELATIVE = 1e-3


@dataclass(frozen=True)
class OutputStep:
    """What one ``learn_one`` did: the scores o(x) and the loss before the update, and the
    prediction they give (progressive validation)."""

    scores: np.ndarray
    loss: float
    predicted: Any


@dataclass(frozen=True)
class OutputSteps:
    """What one ``learn_many`` did: scores (n, m) and losses (n,) before each update."""

    scores: np.ndarray
    losses: np.ndarray


@dataclass(frozen=True)
class FitIteration:
    """One iteration of Algorithm 1, handed to ``fit``'s callback.

    ``iteration``: basis vectors added so far (t); ``n_basis``: rows of H (some may have a zero
    output row); ``objective``: mean training loss after the refit (F_t / n); ``criterion``:
    ``|g_h|_p`` of the selected basis vector (eq 4, mean-loss scale); ``omega``: Omega(V);
    ``seconds``: time since ``fit`` started.
    """

    iteration: int
    n_basis: int
    objective: float
    criterion: float
    omega: float
    seconds: float


class MultiOutputPN(Estimator):
    r"""Multi-output polynomial network / factorization machine (section 3, eq 1).

    ``o(x) = sum_{r < k} sigma(h_r, z) v_r`` in R^m with ``z = [x, 1]``, a basis ``H`` (rows
    ``h_r`` in the unit ball) shared by the m outputs and an output layer ``V``;
    ``sigma(h, z) = (h . z)^2`` (``activation="square"``, PN) or
    ``sigma_ANOVA(h, z) = sum_{i<j} h_i z_i h_j z_j`` (``"anova"``, FM). With ``classes``, the
    outputs score the classes (``predict`` is the argmax); with ``n_outputs``, each example has a
    target vector (multi-task regression with ``loss="squared"``, m binary problems with
    ``loss="logistic"``, as the ordinal McRank reduction of section 6.5 needs).

    **Batch training** (``fit``): Algorithm 1 solves ``min F(U) s.t. Omega(U) <= tau`` (eq 2) by
    conditional gradient. Iteration t selects the basis vector maximising ``|g_h|_p`` (eq 4;
    Table 1: p = inf for ``penalty="l1"``, 2 for ``"l1/l2"``, 1 for ``"l1/linf"``), where
    ``g_{h,c} = -h^T Gamma_c h`` and ``Gamma_c = Z^T D_c Z`` (FM: minus the diagonal term, halved)
    with ``D_c`` the c-th column of the loss gradient. For l1 the answer is the dominant
    eigenvector of the Gamma_c with the largest |eigenvalue| (eq 5; LAPACK when
    ``d + 1 <= 64``, otherwise Lanczos on the products ``Z^T (D_c (Z h))``, so Gamma_c is never
    formed); for l1/l2 and l1/linf that vector initialises the refining iterations of eq (6)
    with the Armijo rule (Huber-smoothed |.| for p = 1). The new row is appended with a zero
    output row and the output layer is refitted over the Omega-ball (convex: FISTA with
    backtracking and Euclidean projections); ``corrective="full"`` then also refits H
    (accelerated projected gradient, rows projected onto the unit ball). Rows whose output row
    ends at zero are pruned at the end.

    **Online learning** (``learn_one`` / ``learn_many``, bit-identical): (Ada)SGD on V and H over
    the active rows, h_r kept in the unit ball and V in the Omega-ball (``core.kernels.mofm``).
    A fresh model first activates all ``n_basis`` rows with seeded random unit vectors (with a
    zero basis every gradient vanishes).

    **Refit** (``refit``): Algorithm 1 warm-started from the current basis on new data, into a
    *new* model; the caller swaps the reference (see :class:`Reservoir`).

    Parameters
    ----------
    n_features : int
        Dimension d of x (named features are hashed into this many buckets).
    classes : list of int or list of str, optional
        Class labels (multi-class: one output per class). Give this or ``n_outputs``.
    n_outputs : int, optional
        Number m of outputs when each example has a target vector.
    activation : {"square", "anova"}
        PN or FM.
    loss : {"softmax", "squared", "smoothed_hinge", "logistic"}
        Multi-class logistic, squared, smoothed multi-class hinge (``classes`` only), or binary
        logistic per output (targets in {-1, +1}; with ``classes``, +1 for the true class).
    penalty : {"l1", "l1/l2", "l1/linf"}
        Omega of Table 1.
    n_basis : int
        k, the maximal number of basis vectors (hidden units; Algorithm 1's iterations).
    tau : float
        Radius of the constraint Omega(V) <= tau (eq 2).
    corrective : {"output", "full"}
        Corrective (refitting) step of Algorithm 1: the output layer only, or also the basis
        (the issue's ``refit=`` option; renamed so as not to shadow the ``refit`` method).
    refit_iter : int
        Iterations of each corrective step (FISTA steps on V; and as many H / V block steps
        for ``"full"``).
    refine_iter : int
        Maximal refining iterations of eq (6) per basis selection.
    tol : float
        Tolerance epsilon of the eigen-solver (eq 5) and the refining / refitting stops.
    gram : {"auto", "dense", "matvec"}
        Form the m matrices Gamma_c (``"dense"``), or use only products with Z (``"matvec"``);
        ``"auto"``: dense when d + 1 <= 64.
    optimizer : {"adagrad", "sgd"}
        Online optimizer: AdaGrad, or SGD with step ``learning_rate / sqrt(1 + t)``.
    learning_rate : float
        Online step size.
    seed : int
        Seed of the random basis of a fresh online model and of the eigen-solver's start.

    Attributes
    ----------
    H_ : ndarray of shape (n_basis, n_features + 1)
        Basis vectors h_r (bias column last), rows past ``n_active_`` zero. A transposed view of
        a feature-major array, so that a sparse example touches contiguous memory.
    V_ : ndarray of shape (n_basis, n_outputs)
        Output layer (one row per basis vector).
    H_accumulator_ : ndarray of shape (n_basis, n_features + 1)
        AdaGrad's sums of squared gradients of H (feature-major like ``H_``).
    V_accumulator_ : ndarray of shape (n_basis, n_outputs)
        AdaGrad's sums of squared gradients of V.
    H_sqnorm_ : ndarray of shape (n_basis,)
        |h_r|^2, maintained by online learning (recomputed exactly by ``fit`` and ``refit``).
    n_active_ : int
        Rows of H / V in use.
    n_seen_ : int
        Examples learned online since the last ``fit`` / ``refit``.
    classes_ : tuple or None
        ``classes`` as a tuple.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(200, 2))
    >>> y = np.where(X[:, 0] * X[:, 1] > 0, 1, 2)  # XOR: not linearly separable
    >>> model = MultiOutputPN(n_features=2, classes=[1, 2], n_basis=3, corrective="full")
    >>> bool(np.mean(model.fit(X, y).predict_many(X) == y) > 0.95), model.n_active_ <= 3
    (True, True)
    >>> model.predict_proba_one([0.5, 0.5]).round(2).sum()
    np.float64(1.0)
    """

    _arrays = ("H_", "V_", "H_accumulator_", "V_accumulator_", "H_sqnorm_")
    _scalars = ("n_active_", "n_seen_")

    def __init__(
        self,
        *,
        n_features: int,
        classes: list | None = None,
        n_outputs: int | None = None,
        activation: str = "square",
        loss: str = "softmax",
        penalty: str = "l1/l2",
        n_basis: int = 16,
        tau: float = 100.0,
        corrective: str = "output",
        refit_iter: int = 30,
        refine_iter: int = 30,
        tol: float = 1e-6,
        gram: str = "auto",
        optimizer: str = "adagrad",
        learning_rate: float = 0.1,
        seed: int = 0,
    ):
        self.n_features = n_features
        self.classes = classes
        self.n_outputs = n_outputs
        self.activation = activation
        self.loss = loss
        self.penalty = penalty
        self.n_basis = n_basis
        self.tau = tau
        self.corrective = corrective
        self.refit_iter = refit_iter
        self.refine_iter = refine_iter
        self.tol = tol
        self.gram = gram
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.seed = seed
        check_n_features(n_features)
        if (classes is None) == (n_outputs is None):
            raise ValueError("give exactly one of classes (multi-class) and n_outputs")
        if classes is not None:
            self._labels: _Labels | None = _Labels(classes)
            self.classes_ = self._labels.classes
            m = len(self.classes_)
            _check_choice("loss", loss, CLASS_LOSSES)
        else:
            self._labels = None
            self.classes_ = None
            m = _check_count("n_outputs", n_outputs)
            _check_choice("loss", loss, VECTOR_LOSSES)
        self._m = m
        _check_choice("activation", activation, tuple(ACTIVATIONS))
        _check_choice("penalty", penalty, tuple(PENALTIES))
        _check_choice("corrective", corrective, CORRECTIVES)
        _check_choice("gram", gram, GRAMS)
        _check_choice("optimizer", optimizer, tuple(OPTIMIZERS))
        _check_count("n_basis", n_basis)
        _check_count("refit_iter", refit_iter)
        _check_count("refine_iter", refine_iter, minimum=0)
        _check_positive("tau", tau)
        _check_positive("tol", tol)
        _check_positive("learning_rate", learning_rate)
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        self._activation = ACTIVATIONS[activation]
        self._loss = LOSSES[loss]
        self._penalty = PENALTIES[penalty]
        self._optimizer = OPTIMIZERS[optimizer]
        if self._labels is not None:
            # target vector of each class: one-hot, or +1 / -1 for the binary logistic loss
            eye = np.eye(m)
            self._class_targets = 2.0 * eye - 1.0 if loss == "logistic" else eye
        dim = n_features + 1
        # feature-major storage; H_ and H_accumulator_ are transposed views (k, d + 1)
        self._Ht = np.zeros((dim, n_basis))
        self._Hacc = np.zeros((dim, n_basis))
        self.H_ = self._Ht.T
        self.H_accumulator_ = self._Hacc.T
        self.V_ = np.zeros((n_basis, m))
        self.V_accumulator_ = np.zeros((n_basis, m))
        self.H_sqnorm_ = np.zeros(n_basis)
        self.n_active_ = 0
        self.n_seen_ = 0

    # -- validation --------------------------------------------------------------------------
    @property
    def n_outputs_(self) -> int:
        """m, the number of outputs (classes or targets)."""
        return self._m

    def _row(self, x) -> Row:
        return as_row(x, self.n_features)

    def _batch(self, X) -> CSRBatch:
        return as_batch(X, self.n_features)

    def _target_one(self, y) -> np.ndarray:
        if self._labels is not None:
            return self._class_targets[self._labels.index(y)]
        Y = np.asarray(y, dtype=object)
        if Y.ndim != 1:
            raise ValueError(f"a target must be a vector of {self._m} numbers, got {y!r}")
        return self._check_vectors(Y, 1)[0]

    def _targets_many(self, y, n_rows: int) -> np.ndarray:
        if self._labels is not None:
            return self._class_targets[self._labels.indices(y, n_rows)]
        if isinstance(y, str | bytes | dict):
            raise ValueError("targets of a batch must be a 2-D array (n_rows, n_outputs)")
        try:
            Y = np.asarray(y, dtype=object)
        except ValueError as error:
            raise ValueError(f"targets must be a 2-D array of numbers: {error}") from None
        if Y.ndim != 2 and not (Y.ndim == 1 and Y.shape[0] == 0):
            raise ValueError(f"targets of a batch must be 2-D (n_rows, n_outputs), got {Y.shape}")
        if Y.shape[0] != n_rows:
            raise ValueError(f"got {Y.shape[0]} target rows for {n_rows} rows")
        if n_rows == 0:
            return np.zeros((0, self._m))
        return self._check_vectors(Y, n_rows)

    def _check_vectors(self, Y: np.ndarray, n_rows: int) -> np.ndarray:
        Y = Y.reshape(n_rows, -1) if Y.ndim == 1 else Y
        if Y.shape[1] != self._m:
            raise ValueError(f"a target has {Y.shape[1]} entries, expected {self._m}")
        flat = Y.ravel()
        if any(
            isinstance(v, bool | np.bool_) or not isinstance(v, int | float | np.number)
            for v in flat
        ):
            raise ValueError("targets must be numbers")
        T = np.asarray(Y, dtype=FLOAT)
        if not np.all(np.isfinite(T)):
            raise ValueError("targets must be finite")
        if self.loss == "logistic" and np.any((T != 1.0) & (T != -1.0)):
            raise ValueError("targets of the logistic loss must be -1 or +1")
        return np.ascontiguousarray(T)

    # -- prediction ---------------------------------------------------------------------------
    def _score_row(self, indices, values) -> np.ndarray:
        o = np.empty(self._m)
        _mofm_score(self._Ht, self.V_, self.n_active_, self._activation, indices, values, o)
        return o

    def score_batch(self, batch: CSRBatch) -> np.ndarray:
        out = np.empty((batch.n_rows, self._m))
        _mofm_score_batch(
            self._Ht,
            self.V_,
            self.n_active_,
            self._activation,
            batch.indptr,
            batch.indices,
            batch.values,
            out,
        )
        return out

    def score_one(self, x) -> np.ndarray:
        """o(x), shape (n_outputs,)."""
        return self._score_row(*self._row(x))

    def score_many(self, X) -> np.ndarray:
        """o(x_i) of a batch, shape (n_rows, n_outputs)."""
        return self.score_batch(self._batch(X))

    def decision_function(self, X) -> np.ndarray:
        """Alias of ``score_many`` (scikit-learn's name)."""
        return self.score_many(X)

    def _predict_scores(self, scores: np.ndarray) -> np.ndarray:
        if self._labels is not None:
            return self._labels.array[np.argmax(scores, axis=-1)]
        if self.loss == "logistic":
            return np.where(scores > 0.0, 1, -1)
        return scores

    def predict_one(self, x):
        """The class (argmax of o(x)), or with ``n_outputs`` the vector o(x) (squared loss) or
        its signs (logistic loss)."""
        prediction = self._predict_scores(self.score_one(x)[None, :])[0]
        return prediction.item() if isinstance(prediction, np.generic) else prediction

    def predict_many(self, X) -> np.ndarray:
        """``predict_one`` of every row: shape (n_rows,) for classes, else (n_rows, n_outputs)."""
        return self._predict_scores(self.score_many(X))

    def _proba(self, scores: np.ndarray) -> np.ndarray:
        if self.loss == "softmax":
            shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
            return shifted / shifted.sum(axis=-1, keepdims=True)
        if self.loss == "logistic":
            probabilities = 0.5 * (1.0 + np.tanh(0.5 * scores))  # sigmoid without overflow
            if self._labels is not None:
                probabilities /= probabilities.sum(axis=-1, keepdims=True)
            return probabilities
        raise ValueError(f"loss={self.loss!r} gives no probabilities (softmax or logistic do)")

    def predict_proba_one(self, x) -> np.ndarray:
        """Class probabilities softmax(o(x)) (softmax loss); with the logistic loss the sigmoids
        P(y_c = +1 | x), normalised over the classes when there are ``classes``."""
        return self._proba(self.score_one(x))

    def predict_proba_many(self, X) -> np.ndarray:
        """``predict_proba_one`` of every row, shape (n_rows, n_outputs)."""
        return self._proba(self.score_many(X))

    def penalty_value(self) -> float:
        """Omega(V) (Table 1)."""
        return float(_mofm_penalty(self.V_, self.n_active_, self._penalty))

    @property
    def n_used_(self) -> int:
        """Basis vectors in use: active rows with a non-zero output row."""
        return int(np.count_nonzero(np.any(self.V_[: self.n_active_] != 0.0, axis=1)))

    # -- online learning ------------------------------------------------------------------------
    def _activate(self) -> None:
        """A fresh model's first step: all n_basis rows get seeded random unit vectors."""
        rng = np.random.default_rng(self.seed)
        H = rng.standard_normal((self.n_basis, self.n_features + 1))
        H /= np.linalg.norm(H, axis=1, keepdims=True)
        self._Ht[...] = H.T
        self.H_sqnorm_[...] = np.einsum("ij,ij->i", H, H)
        self.n_active_ = self.n_basis

    def _step_args(self):
        return (
            self._Ht,
            self.V_,
            self._Hacc,
            self.V_accumulator_,
            self.H_sqnorm_,
            self.n_active_,
            self._activation,
            self._loss,
            self._penalty,
            float(self.tau),
            self._optimizer,
            float(self.learning_rate),
        )

    def learn_one(self, x, y) -> OutputStep:
        """One (Ada)SGD step on ``loss(y, o(x))``; returns the scores and loss before it."""
        target = self._target_one(y)
        indices, values = self._row(x)
        if self.n_active_ == 0:
            self._check_learnable(CSRBatch(np.array([0, len(values)], INDEX), indices, values))
            self._activate()
        o = np.empty(self._m)
        work = np.empty(_step_work_size(self.n_basis, self._m))
        status, value = _mofm_step(
            *self._step_args(), self.n_seen_, indices, values, target, o, work
        )
        if status != STEP_OK:
            raise ValueError("the example's scores or gradients overflow float64; not learned")
        self.n_seen_ += 1
        predicted = self._predict_scores(o[None, :])[0]
        if isinstance(predicted, np.generic):
            predicted = predicted.item()
        return OutputStep(o, float(value), predicted)

    def learn_many(self, X, y) -> OutputSteps:
        """``learn_one`` over the rows in order (bit-identical to the loop). A score or gradient
        that overflows float64 raises ``ValueError`` after the earlier rows were learned."""
        batch = self._batch(X)
        T = self._targets_many(y, batch.n_rows)
        scores = np.zeros((batch.n_rows, self._m))
        losses = np.zeros(batch.n_rows)
        if batch.n_rows == 0:
            return OutputSteps(scores, losses)
        if self.n_active_ == 0:
            self._check_learnable(batch)
            self._activate()
        failed, done = _mofm_learn_batch(
            *self._step_args(),
            self.n_seen_,
            batch.indptr,
            batch.indices,
            batch.values,
            T,
            scores,
            losses,
        )
        self.n_seen_ += done
        if failed >= 0:
            raise ValueError(
                f"row {failed}: the example's scores or gradients overflow float64 "
                f"({done} earlier rows were learned)"
            )
        return OutputSteps(scores, losses)

    def _check_learnable(self, batch: CSRBatch) -> None:
        """Before a fresh model activates its basis: refuse rows whose squared norm overflows
        (|h . z| <= |z| for unit h, so finite norms keep the first scores finite)."""
        with np.errstate(over="ignore"):
            squared = (
                np.add.reduceat(batch.values**2, batch.indptr[:-1]) if batch.values.size else 0
            )
        if not np.all(np.isfinite(squared)) or np.any(np.abs(batch.values) > 1e150):
            raise ValueError("the example's squared norm overflows float64; not learned")

    # -- batch training (Algorithm 1) ----------------------------------------------------------
    def _problem(self, X, y) -> _Problem:
        batch = self._batch(X)
        T = self._targets_many(y, batch.n_rows)
        if batch.n_rows == 0:
            raise ValueError("fit needs at least one example")
        return _Problem(batch, self.n_features, T, self._loss, self._activation, self.gram)

    def fit(self, X, y, *, callback: Callable[[MultiOutputPN, FitIteration], Any] | None = None):
        """Algorithm 1 from scratch: ``n_basis`` iterations of basis selection and refit.

        ``callback(model, info)`` (optional) is called after every iteration with this model
        holding the current iterate (H, V) and a :class:`FitIteration`; the greedy path lets
        a caller validate every number of basis vectors in one run (section 6.1). Returns self.
        The heavy lifting is BLAS: on a shared machine, one BLAS thread is often fastest
        (``OPENBLAS_NUM_THREADS=1``).
        """
        problem = self._problem(X, y)
        dim = self.n_features + 1
        H, V = np.zeros((0, dim)), np.zeros((0, self._m))
        H, V = _algorithm1(self, problem, H, V, self.n_basis, callback)
        self._load(H, V)
        return self

    def refit(
        self,
        X,
        y,
        *,
        n_new: int | None = None,
        callback: Callable[[MultiOutputPN, FitIteration], Any] | None = None,
    ) -> MultiOutputPN:
        """Algorithm 1 warm-started from this model's basis, on (X, y); returns a NEW model.

        The current basis and output layer are refitted on the data first (rows whose output
        row becomes zero are dropped: the sparsity-inducing penalties remove bad basis vectors),
        then basis vectors are added until ``n_basis`` rows (or ``n_new`` more). This model is
        not modified, so it can keep serving while the refit runs; the caller then swaps the
        reference (under its lock), e.g. ``registry[name] = model.refit(*reservoir.data())``.
        ``callback`` as in ``fit``, first with ``iteration=0`` after the warm-start refit.
        """
        problem = self._problem(X, y)
        if n_new is not None:
            _check_count("n_new", n_new, minimum=0)
        new = self.clone()
        keep = np.flatnonzero(np.any(self.V_[: self.n_active_] != 0.0, axis=1))
        H = np.array(self.H_[keep], dtype=FLOAT)
        V = np.array(self.V_[keep], dtype=FLOAT)
        H /= np.maximum(1.0, np.linalg.norm(H, axis=1, keepdims=True))
        target = self.n_basis if n_new is None else min(self.n_basis, len(keep) + n_new)
        H, V = _algorithm1(new, problem, H, V, target, callback, warm=True)
        new._load(H, V)
        return new

    def _load(self, H: np.ndarray, V: np.ndarray, compact: bool = True) -> None:
        """Install (H, V) as the first rows (dropping zero output rows when ``compact``); the
        rest, the accumulators and the online counter are reset."""
        if compact:
            keep = np.any(V != 0.0, axis=1)
            H, V = H[keep], V[keep]
        t = H.shape[0]
        self._Ht[...] = 0.0
        self._Ht[:, :t] = H.T
        self.V_[...] = 0.0
        self.V_[:t] = V
        self._Hacc[...] = 0.0
        self.V_accumulator_[...] = 0.0
        self.H_sqnorm_[...] = 0.0
        self.H_sqnorm_[:t] = np.einsum("ij,ij->i", H, H)
        self.n_active_ = t
        self.n_seen_ = 0

    # -- state -------------------------------------------------------------------------------
    def _check_state(self, arrays: dict, scalars: dict):
        writes = super()._check_state(arrays, scalars)
        n_active = scalars.get("n_active_")
        if isinstance(n_active, int | float | np.number) and n_active > self.n_basis:
            raise ValueError(f"state has n_active_={n_active} > n_basis={self.n_basis}")
        return writes


def _step_work_size(n_basis: int, n_outputs: int) -> int:
    """Length of the scratch array ``_mofm_step`` needs (its docstring)."""
    return 5 * n_basis + 3 * n_outputs + 2 * n_basis * n_outputs


# -- Algorithm 1 --------------------------------------------------------------------------------
class _Problem:
    """The training set of Algorithm 1 and the products it needs.

    ``Z = [X, 1]`` (dense when d + 1 <= 512 or the data is dense, CSR otherwise), targets T
    (n, m), and: hidden activations, mean loss and its gradient, and the selection quantities
    ``q_c(h) = h^T Gamma_c h`` and ``sum_c w_c Gamma_c h`` either from the formed Gamma_c
    (small d) or from products with Z only (``Z^T (D_c (Z h))``; large d).
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


def _dominant_eigenvectors(problem: _Problem, G: np.ndarray, gam, tol: float, rng):
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
    problem: _Problem,
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
    columns sigma(Z h_r) has a condition number ~1e8 on letter):

    - the momentum (the previous iterate and FISTA's counter) and the Lipschitz estimates
      persist from one iteration of Algorithm 1 to the next, the new row of V entering with
      zero momentum: the refits of the greedy path form one long accelerated run instead of
      many short restarted ones (3x fewer iterations for the same objective on letter);
    - whenever F would increase, the momentum is dropped and the step is redone from the last
      iterate (function-value restart, O'Donoghue and Candes 2015), so F never increases: a
      refit starts from the previous solution with a zero row appended (same F) and Algorithm
      1's objective is non-increasing.
    """

    def __init__(self, problem: _Problem, penalty: int, tau: float, iterations: int, tol: float):
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


def _algorithm1(model: MultiOutputPN, problem: _Problem, H, V, n_target, callback, warm=False):
    """Algorithm 1 from (H, V) up to n_target rows; returns (H, V) (uncompacted)."""
    started = time.perf_counter()
    p = SELECTION_NORM[model.penalty]
    refitter = _Refitter(problem, model._penalty, float(model.tau), model.refit_iter, model.tol)
    rng = np.random.default_rng(model.seed)
    n, k = problem.n, max(n_target, H.shape[0])
    Phi = np.zeros((n, k), order="F")
    t = H.shape[0]
    if t:
        Phi[:, :t] = problem.hidden(H)[1]
        V = _project(V, model._penalty, float(model.tau))
    O = Phi[:, :t] @ V
    F, G = problem.loss_grad(O)
    if warm and t:
        V, O, F, G = refitter.output(Phi[:, :t], V, 5 * model.refit_iter)
        if model.corrective == "full":
            H, V, Phi_t, O, F, G = refitter.full(H, V)
            Phi[:, :t] = Phi_t
        keep = np.any(V != 0.0, axis=1)
        if not keep.all():
            H, V = H[keep], V[keep]
            t = H.shape[0]
            Phi[:, :t] = problem.hidden(H)[1]
            refitter.previous_V = refitter.previous_H = None
        if callback is not None:
            _report(model, callback, H, V, 0, F, 0.0, started)
    iteration = 0
    while t < n_target:
        h, criterion = select_basis(
            problem, G, p, tol=model.tol, refine_iter=model.refine_iter, rng=rng
        )
        if not (np.isfinite(criterion) and criterion > 0.0):
            break  # the gradient vanishes on every direction: F is minimal over the ball
        H = np.vstack([H, h[None, :]])
        V = np.vstack([V, np.zeros((1, problem.m))])
        Phi[:, t] = problem.hidden(h[None, :])[1][:, 0]
        t += 1
        iteration += 1
        V, O, F, G = refitter.output(Phi[:, :t], V)
        if model.corrective == "full":
            H, V, Phi_t, O, F, G = refitter.full(H, V)
            Phi[:, :t] = Phi_t
        if callback is not None:
            _report(model, callback, H, V, iteration, F, criterion, started)
    return H, V


def _report(model, callback, H, V, iteration, F, criterion, started) -> None:
    """Load the iterate into the model and call the callback with a FitIteration."""
    model._load(H, V, compact=False)
    info = FitIteration(
        iteration=iteration,
        n_basis=H.shape[0],
        objective=float(F),
        criterion=float(criterion),
        omega=float(_mofm_penalty(np.ascontiguousarray(V), H.shape[0], model._penalty)),
        seconds=time.perf_counter() - started,
    )
    callback(model, info)


# -- labels ----------------------------------------------------------------------------------
class _Labels:
    """Class labels (all ints or all strings) and their indices."""

    def __init__(self, classes):
        classes = check_classes(classes)
        self.classes = tuple(c.item() if isinstance(c, np.generic) else c for c in classes)
        self.strings = isinstance(self.classes[0], str)
        self.map = {c: k for k, c in enumerate(self.classes)}
        self.array = np.array(self.classes, dtype=object if self.strings else INDEX)

    def index(self, y) -> int:
        valid = (
            isinstance(y, str)
            if self.strings
            else (isinstance(y, int | np.integer) and not isinstance(y, bool | np.bool_))
        )
        k = self.map.get(y.item() if isinstance(y, np.generic) else y) if valid else None
        if k is None:
            raise ValueError(f"unknown label {y!r}: the known classes are {list(self.classes)}")
        return k

    def indices(self, y, n_rows: int) -> np.ndarray:
        if isinstance(y, str | bytes | dict):
            raise ValueError("labels of a batch must be a sequence, one label per row")
        if isinstance(y, np.ndarray) and y.ndim != 1:
            raise ValueError(f"labels of a batch must be 1-D, got shape {y.shape}")
        try:
            labels = list(y)
        except TypeError:
            raise ValueError("labels of a batch must be a sequence, one label per row") from None
        if len(labels) != n_rows:
            raise ValueError(f"got {len(labels)} labels for {n_rows} rows")
        out = np.empty(n_rows, dtype=INDEX)
        for i, label in enumerate(labels):
            try:
                out[i] = self.index(label)
            except ValueError as error:
                raise ValueError(f"label at row {i}: {error}") from None
        return out


def _check_choice(name: str, value, choices: tuple) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def _check_count(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


# -- the reservoir the service refits on --------------------------------------------------------
class Reservoir:
    """A bounded sample of the examples a live model learns from, for ``MultiOutputPN.refit``.

    ``policy="window"`` (the default) keeps the ``size`` most recent examples in a ring buffer;
    ``policy="uniform"`` keeps a uniform sample of everything seen (Vitter's Algorithm R with a
    seeded generator: example n > size replaces a random slot with probability size / n).

    Why a window by default: the refit exists to follow the stream the service learns from, and
    feedback streams drift (new users, items, seasons); a uniform sample of the whole history
    weighs a month-old example like the last one, so the refitted basis would lag behind the
    drift by half the history. A window also makes the swap exact (below). ``"uniform"`` is the
    better choice for a stationary stream with rare labels, whose history the window would
    forget.

    Swap protocol (the service's background worker, with the registry's per-model lock):

    1. under the lock: ``X, y = reservoir.data()`` and ``mark = reservoir.n_seen``;
    2. without the lock: ``new = live.refit(X, y)``; ``refit`` never modifies ``live``, which
       keeps serving and learning meanwhile;
    3. under the lock: ``new.learn_many(*reservoir.since(mark))`` (the examples that arrived
       during the refit; the window holds them unless more than ``size`` arrived), then replace
       the registry's reference by ``new`` (one assignment: readers see the old model or the new
       one, never a mix).

    Rows are validated as the model would (``n_features``); targets are stored as given and
    validated by the model when it learns.

    >>> reservoir = Reservoir(size=2, n_features=3)
    >>> for k in range(3):
    ...     reservoir.add([float(k), 0.0, 1.0], k)
    >>> X, y = reservoir.data()
    >>> X.shape, y
    ((2, 3), [1, 2])
    """

    def __init__(self, size: int, n_features: int, *, policy: str = "window", seed: int = 0):
        self.size = _check_count("size", size)
        self.n_features = check_n_features(n_features)
        _check_choice("policy", policy, ("window", "uniform"))
        self.policy = policy
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._rows: list[Row | None] = [None] * self.size
        self._targets: list[Any] = [None] * self.size
        self._arrival = np.full(self.size, -1, dtype=INDEX)
        self.n_seen = 0

    def __len__(self) -> int:
        return min(self.n_seen, self.size)

    def add(self, x, y) -> None:
        """Offer one example (validated as a row of ``n_features`` features)."""
        row = as_row(x, self.n_features)
        n = self.n_seen
        if n < self.size:
            slot = n
        elif self.policy == "window":
            slot = n % self.size
        else:
            slot = int(self._rng.integers(n + 1))
            if slot >= self.size:
                self.n_seen += 1
                return
        self._rows[slot] = (row[0].copy(), row[1].copy())
        self._targets[slot] = y
        self._arrival[slot] = n
        self.n_seen += 1

    def add_many(self, X, y) -> None:
        """``add`` every row of a batch, in order."""
        batch = as_batch(X, self.n_features)
        targets = list(y)
        if len(targets) != batch.n_rows:
            raise ValueError(f"got {len(targets)} targets for {batch.n_rows} rows")
        for i in range(batch.n_rows):
            self.add(batch.row(i), targets[i])

    def _select(self, keep: np.ndarray):
        order = keep[np.argsort(self._arrival[keep], kind="stable")]
        X = sp.csr_matrix((len(order), self.n_features))
        if len(order):
            rows = [self._rows[i] for i in order]
            indptr = np.zeros(len(order) + 1, dtype=INDEX)
            np.cumsum([len(r[0]) for r in rows], out=indptr[1:])
            X = sp.csr_matrix(
                (
                    np.concatenate([r[1] for r in rows]),
                    np.concatenate([r[0] for r in rows]),
                    indptr,
                ),
                shape=(len(order), self.n_features),
            )
        return X, [self._targets[i] for i in order]

    def data(self):
        """The sample in arrival order: (sparse matrix (len, n_features), list of targets)."""
        return self._select(np.flatnonzero(self._arrival >= 0))

    def since(self, mark: int):
        """The examples that arrived after ``n_seen`` was ``mark`` (``policy="window"`` only;
        raises ``ValueError`` if some were already overwritten)."""
        if self.policy != "window":
            raise ValueError("since() needs policy='window' (a uniform sample drops examples)")
        if not 0 <= mark <= self.n_seen:
            raise ValueError(f"mark must be in [0, {self.n_seen}], got {mark}")
        if self.n_seen - mark > self.size:
            raise ValueError(
                f"{self.n_seen - mark} examples arrived since the mark but the window holds "
                f"{self.size}"
            )
        return self._select(np.flatnonzero(self._arrival >= mark))

    def get_state(self) -> dict:
        """The sample as arrays (slot order: CSR ``indptr``/``indices``/``values``, ``arrival``,
        -1 for an empty slot), the ``targets`` as a list, ``n_seen`` and the generator's state,
        so that a snapshot can carry the reservoir and ``set_state`` rebuild it exactly."""
        empty = (np.zeros(0, dtype=INDEX), np.zeros(0, dtype=FLOAT))
        rows = [row if row is not None else empty for row in self._rows]
        indptr = np.zeros(self.size + 1, dtype=INDEX)
        np.cumsum([len(r[0]) for r in rows], out=indptr[1:])
        return {
            "indptr": indptr,
            "indices": np.concatenate([r[0] for r in rows]).astype(INDEX, copy=False),
            "values": np.concatenate([r[1] for r in rows]).astype(FLOAT, copy=False),
            "arrival": self._arrival.copy(),
            "targets": list(self._targets),
            "n_seen": self.n_seen,
            "rng": self._rng.bit_generator.state,
        }

    def set_state(self, state: dict) -> None:
        """Load ``get_state()``'s output (ValueError if it does not fit this reservoir)."""
        indptr, arrival = np.asarray(state["indptr"]), np.asarray(state["arrival"])
        targets = list(state["targets"])
        if indptr.shape != (self.size + 1,) or arrival.shape != (self.size,):
            raise ValueError(f"reservoir state of another size (this one holds {self.size})")
        if len(targets) != self.size or indptr[-1] != len(state["values"]):
            raise ValueError("inconsistent reservoir state")
        rows: list[Row | None] = []
        for i in range(self.size):
            start, stop = indptr[i], indptr[i + 1]
            if arrival[i] < 0:
                rows.append(None)
                continue
            row = (
                np.array(state["indices"][start:stop], dtype=INDEX),
                np.array(state["values"][start:stop], dtype=FLOAT),
            )
            if row[0].size and (row[0].min() < 0 or row[0].max() >= self.n_features):
                raise ValueError("reservoir row outside the feature range")
            rows.append(row)
        self._rows, self._targets = rows, targets
        self._arrival = arrival.astype(INDEX, copy=True)
        self.n_seen = int(state["n_seen"])
        self._rng.bit_generator.state = state["rng"]
