"""The multi-output polynomial network / factorization machine model (section 3 of Blondel
et al., NIPS 2017): prediction, online (Ada)SGD learning, and batch training by Algorithm 1.

``../shared/papers/multi-output-polynomial-networks.txt``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from core.base import Estimator, PartialBatchError, Step, Steps
from core.config import FLOAT, INDEX
from core.features import CSRBatch, Row, as_batch, as_row
from core.kernels.mofm import (
    ACTIVATIONS,
    LOSSES,
    OPTIMIZERS,
    PENALTIES,
    STEP_OK,
    _mofm_learn_batch,
    _mofm_penalty,
    _mofm_score,
    _mofm_score_batch,
    _mofm_step,
)
from core.labels import LabelMap, check_targets
from core.mofm.algorithm1 import FitIteration, Problem, Settings, run_algorithm1
from core.validation import (
    check_choice,
    check_count,
    check_integer,
    check_n_features,
    check_positive,
)

__all__ = ["CLASS_LOSSES", "CORRECTIVES", "GRAMS", "VECTOR_LOSSES", "MultiOutputPN"]

#: losses that take a class label (one-hot target), and those that take a target vector
CLASS_LOSSES = ("softmax", "squared", "smoothed_hinge", "logistic")
VECTOR_LOSSES = ("squared", "logistic")
CORRECTIVES = ("output", "full")
GRAMS = ("auto", "dense", "matvec")


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
    classes : list, optional
        Class labels, any distinct hashable values (multi-class: one output per class). Give
        this or ``n_outputs``.
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
        (named so as not to shadow the ``refit`` method).
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
            self._labels: LabelMap | None = LabelMap(classes)
            self.classes_ = self._labels.classes
            m = len(self.classes_)
            check_choice("loss", loss, CLASS_LOSSES)
        else:
            self._labels = None
            self.classes_ = None
            m = check_count("n_outputs", n_outputs)
            check_choice("loss", loss, VECTOR_LOSSES)
        self._m = m
        check_choice("activation", activation, tuple(ACTIVATIONS))
        check_choice("penalty", penalty, tuple(PENALTIES))
        check_choice("corrective", corrective, CORRECTIVES)
        check_choice("gram", gram, GRAMS)
        check_choice("optimizer", optimizer, tuple(OPTIMIZERS))
        check_count("n_basis", n_basis)
        check_count("refit_iter", refit_iter)
        check_count("refine_iter", refine_iter, minimum=0)
        check_positive("tau", tau)
        check_positive("tol", tol)
        check_positive("learning_rate", learning_rate)
        check_integer("seed", seed)
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
            floats = isinstance(y, np.ndarray) and y.dtype.kind == "f"
            Y = y if floats else np.asarray(y, dtype=object)
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
        if Y.dtype.kind != "f" and any(  # (a float array holds numbers only)
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

    def predict_from_scores(self, scores) -> np.ndarray:
        """``predict_many`` from scores of this model (``score_batch``), without scoring
        again."""
        return self._predict_scores(np.asarray(scores))

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

    def proba_from_scores(self, scores) -> np.ndarray:
        """``predict_proba_many`` from scores of this model (``score_batch``), without
        scoring again."""
        return self._proba(np.asarray(scores))

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

    def learn_one(self, x, y) -> Step:
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
        loss = float(value)
        return Step(o, loss, loss > 0.0, int(loss > 0.0), predicted)

    def learn_many(self, X, y) -> Steps:
        """``learn_one`` over the rows in order (bit-identical to the loop). A score or gradient
        that overflows float64 raises :class:`core.base.PartialBatchError` (a ``ValueError``)
        after the earlier rows were learned."""
        batch = self._batch(X)
        return self._learn_targets(batch, self._targets_many(y, batch.n_rows), self._steps)

    def learn_batch(self, batch: CSRBatch, targets) -> Steps:
        """Learn a batch already validated for this model, its labels converted once: the same
        model and steps as ``learn_many``.

        Parameters
        ----------
        batch : CSRBatch
            Rows validated with the model's ``n_features`` (``core.features.as_batch``).
        targets : ndarray
            With ``classes``: each row's class index (int, shape (n_rows,), checked), and the
            steps' ``predicted`` are class indices too; with ``n_outputs``: the target vectors,
            shape (n_rows, n_outputs), as ``learn_many`` takes them.

        Returns
        -------
        Steps
        """
        if self._labels is None:
            return self._learn_targets(
                batch, self._targets_many(targets, batch.n_rows), self._steps
            )
        targets = check_targets(targets, batch.n_rows, self._m)
        return self._learn_targets(batch, self._class_targets[targets], self._index_steps)

    def _learn_targets(self, batch: CSRBatch, T: np.ndarray, steps) -> Steps:
        """Learn a validated batch of checked target vectors T; ``steps(scores, losses)``
        makes the Steps (of the rows learned, also for a PartialBatchError)."""
        scores = np.zeros((batch.n_rows, self._m))
        losses = np.zeros(batch.n_rows)
        if batch.n_rows == 0:
            return steps(scores, losses)
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
            raise PartialBatchError(
                f"row {failed}: the example's scores or gradients overflow float64 "
                f"({done} earlier rows were learned)",
                steps(scores[:done], losses[:done]),
            )
        return steps(scores, losses)

    def _steps(self, scores: np.ndarray, losses: np.ndarray) -> Steps:
        """A batch's Steps: a step moves the model when its loss (and so its gradient) is
        positive."""
        return Steps(scores, losses, losses > 0.0, None, self._predict_scores(scores))

    def _index_steps(self, scores: np.ndarray, losses: np.ndarray) -> Steps:
        """``_steps`` with the predicted classes as indices (``learn_batch`` of classes)."""
        return Steps(scores, losses, losses > 0.0, None, np.argmax(scores, axis=-1))

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
    def _problem(self, X, y) -> Problem:
        batch = self._batch(X)
        T = self._targets_many(y, batch.n_rows)
        if batch.n_rows == 0:
            raise ValueError("fit needs at least one example")
        return Problem(batch, self.n_features, T, self._loss, self._activation, self.gram)

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
        H, V = run_algorithm1(
            problem, H, V, self.n_basis, self._settings(), self._reporter(callback)
        )
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
            check_count("n_new", n_new, minimum=0)
        new = self.clone()
        keep = np.flatnonzero(np.any(self.V_[: self.n_active_] != 0.0, axis=1))
        H = np.array(self.H_[keep], dtype=FLOAT)
        V = np.array(self.V_[keep], dtype=FLOAT)
        H /= np.maximum(1.0, np.linalg.norm(H, axis=1, keepdims=True))
        target = self.n_basis if n_new is None else min(self.n_basis, len(keep) + n_new)
        H, V = run_algorithm1(
            problem, H, V, target, self._settings(), new._reporter(callback), warm=True
        )
        new._load(H, V)
        return new

    def _settings(self) -> Settings:
        """The hyperparameters Algorithm 1 runs with."""
        return Settings(
            self.penalty,
            self.tau,
            self.corrective,
            self.refit_iter,
            self.refine_iter,
            self.tol,
            self.seed,
        )

    def _reporter(self, callback):
        """Algorithm 1's ``report``: each iterate loaded into this model, then
        ``callback(self, info)`` (None without a callback)."""
        if callback is None:
            return None

        def report(H: np.ndarray, V: np.ndarray, info: FitIteration) -> None:
            self._load(H, V, compact=False)
            callback(self, info)

        return report

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
