"""Difference-of-squares (DoS) classifier trained by passive-aggressive updates.

Saul, "An online passive-aggressive algorithm for difference-of-squares classification",
NeurIPS 2021 (``../shared/papers/dos-passive-aggressive.txt``).
"""

from __future__ import annotations

import numpy as np

from core.base import PartialBatchError, Step, Steps
from core.binary import BinaryClassifier, steps_from
from core.features import CSRBatch
from core.kernels.dos import (
    STEP_OK,
    _dos_learn_batch,
    _dos_learn_one,
    _dos_score,
    _dos_score_batch,
)
from core.validation import (
    PAVariant,
    check_choice,
    check_count,
    check_integer,
    check_n_features,
    check_non_negative,
    check_pa_params,
)

__all__ = ["DoSClassifier"]

#: storage types of U and V (``dtype``)
DTYPES = ("float64", "float32")
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: alignment of the parameter array in bytes: two cache lines, so that a float32 row of rank
#: 16 (128 bytes) spans 2 lines instead of 3 and a float64 one 4 instead of 5
ALIGNMENT = 128


def aligned_empty(shape: tuple[int, ...], dtype, alignment: int = ALIGNMENT) -> np.ndarray:
    """An uninitialised C-contiguous array whose first element sits at a multiple of
    ``alignment`` bytes (numpy only promises 16)."""
    dtype = np.dtype(dtype)
    n_bytes = int(np.prod(shape)) * dtype.itemsize
    buffer = np.empty(n_bytes + alignment, dtype=np.uint8)
    offset = -buffer.ctypes.data % alignment
    return buffer[offset : offset + n_bytes].view(dtype).reshape(shape)


class DoSClassifier(BinaryClassifier):
    r"""Difference-of-squares classifier ``y = sign(|U z|^2 - |V z|^2)``, ``z = [x, 1]``.

    Eq (10) of Saul 2021: two affine maps ``U = [A+, b+]``, ``V = [A-, b-]`` of shape
    (rank, n_features + 1); the score is ``|U z|^2 - |V z|^2 = z^T (U^T U - V^T V) z``.

    **Update (mode="pa", eqs 17-20).** Each example solves the non-convex but tractable QCQP

        min |U - U_t|_F^2 + |V - V_t|_F^2   s.t.   y (|U z|^2 - |V z|^2) >= 1,        (17)

    whose solution is ``U <- U + nu/(y - nu) (U z) z^T / |z|^2`` and
    ``V <- V - nu/(y + nu) (V z) z^T / |z|^2`` (eqs 19-20, written with the sign of y) where
    nu in (0, 1) minimises the convex function of eq (18). We find nu as the root of its
    derivative (eq 25), which is monotone on (0, 1), by safeguarded Newton iterations to
    machine precision (see ``core.kernels.dos``); afterwards the margin holds with equality.

    **Soft margins (derivation).** As for linear PA (Crammer et al. 2006, the paper's [3]),
    relax the margin to ``1 - xi`` and penalise the slack:

    - PA-I: ``min 1/2 (|dU|^2 + |dV|^2) + C xi``, ``xi >= 0``. With the multiplier ``mu``
      of the margin constraint, stationarity in U and V gives eqs (22)-(23) with
      ``nu = 2 mu |z|^2``, and stationarity in xi gives ``mu + eta = C`` (eta >= 0 the
      multiplier of xi >= 0), i.e. ``mu <= C``. For a fixed slack the problem is (17) with
      margin m = 1 - xi; its optimal cost c(m) has derivative mu(m) (envelope theorem) which
      increases with m (the left side of eq 24 increases with nu), so c is convex in m and the
      total c(m) + C (1 - m) is minimised where mu(m) = C, or at m = 1 if mu(1) <= C. Hence
      ``nu = min(nu_PA, 2 C |z|^2)``: the multiplier is clipped at C and noisy examples move
      the model by a bounded amount.
    - PA-II: ``min 1/2 (|dU|^2 + |dV|^2) + C xi^2``. Stationarity in xi gives
      ``xi = mu / (2C) = nu / (4 C |z|^2)``, so nu solves eq (24) with the margin
      ``1 - nu / (4 C |z|^2)``: the root of eq (25) plus the term ``nu / (4 C |z|^2)``,
      still monotone; nu shrinks smoothly as C decreases.

    **Degenerate case (footnote 1).** If the side that must grow has a zero projection
    (``U z = 0`` for y = +1, ``V z = 0`` for y = -1; e.g. after a zero initialisation), eq
    (19) is 0 * inf. The QCQP still has a solution: the multiplier sits at the singular
    value nu = 1, the other side's projection is halved, and the growing side gets a
    projection of squared length ``1 + h/4`` (PA, h the other side's squared projection; PA-II
    subtracts its slack) along a direction of our choosing: hidden unit ``n_seen_ mod rank``.
    No NaN, no division by zero, and the margin is met exactly.

    Parameters
    ----------
    n_features : int
        Dimension of x (named features are hashed into this many buckets).
    rank : int
        Number of rows of U and V (the paper's d, dimension of h+ and h-).
    mode : {"pa", "pa1", "pa2"}
    C : float
        Aggressiveness of PA-I / PA-II (ignored by PA).
    init_scale : float or None
        Entries of U and V start as N(0, init_scale^2 / (rank * (n_features + 1))) (section
        4: variance inversely proportional to the number of entries); None means 1.0 and 0.0
        a zero start.
    seed : int
        Seed of the initialisation.
    classes : list of 2 labels, optional
        The labels of the negative and the positive class (default: -1 and +1).
    dtype : {"float64", "float32"}
        Storage of U and V. float32 halves the memory and the memory traffic of a sparse
        example (the time of a large model is spent waiting for its rows); projections,
        norms and the step size are still computed in float64 from the stored values, so a
        step equals the float64 step from the same parameters rounded to float32, and the
        margin after an update holds to float32 precision instead of float64's.

    Attributes
    ----------
    U_, V_ : ndarray of shape (rank, n_features + 1), of type ``dtype``
        The paper's U and V, bias column last: writable transposed views of one feature-major
        array of shape (n_features + 1, 2 * rank) whose row j holds column j of U then of V
        (a sparse example touches only the rows of its features, each contiguous).
    W_ : ndarray of shape (n_features + 1, 2 * rank), of type ``dtype``
        That feature-major array, ``[U_^T | V_^T]``: what the kernels update in place, and
        what ``core.stacking`` stacks side by side for the reductions. Not a state entry of
        its own (``U_`` and ``V_`` are).
    n_seen_ : int
        Examples learned. ``n_updates_`` : int, aggressive updates among them.

    Examples
    --------
    >>> model = DoSClassifier(n_features=3, rank=2, seed=0)
    >>> step = model.learn_one([1.0, 0.0, -1.0], -1)
    >>> step.aggressive, round(-model.score_one([1.0, 0.0, -1.0]), 12)
    (True, 1.0)
    >>> model.U_.shape
    (2, 4)
    >>> DoSClassifier(n_features=3, rank=2, dtype="float32").U_.dtype
    dtype('float32')
    """

    _arrays = ("U_", "V_")
    _scalars = ("n_seen_", "n_updates_")
    # eqs (19)-(20): U and V move along z^T, so only the columns of z's non-zeros and bias
    _feature_axes = {"U_": 1, "V_": 1}

    def __init__(
        self,
        *,
        n_features: int,
        rank: int = 4,
        mode: str = "pa",
        C: float = 1.0,
        init_scale: float | None = None,
        seed: int = 0,
        classes: list | None = None,
        dtype: str = "float64",
    ):
        self.n_features = n_features
        self.rank = rank
        self.mode = mode
        self.C = C
        self.init_scale = init_scale
        self.seed = seed
        check_n_features(n_features)
        check_count("rank", rank)
        self._mode, self._C = check_pa_params(mode, C)
        scale = 1.0 if init_scale is None else check_non_negative("init_scale", init_scale)
        check_integer("seed", seed)
        self.dtype = check_choice("dtype", dtype, DTYPES)
        self._init_classes(classes)
        shape = (rank, n_features + 1)
        std = scale / np.sqrt(rank * (n_features + 1))
        rng = np.random.default_rng(seed)
        # feature-major storage [U^T | V^T]; U_ / V_ are transposed views of its halves
        U = rng.standard_normal(shape) * std
        V = rng.standard_normal(shape) * std
        if dtype == "float32" and max(np.abs(U).max(), np.abs(V).max()) > FLOAT32_MAX:
            raise ValueError(f"init_scale {init_scale} overflows float32")
        self.W_ = aligned_empty((n_features + 1, 2 * rank), dtype)
        self.W_[:, :rank] = U.T
        self.W_[:, rank:] = V.T
        self.U_ = self.W_[:, :rank].T
        self.V_ = self.W_[:, rank:].T
        self.n_seen_ = 0
        self.n_updates_ = 0

    @property
    def pa_variant(self) -> PAVariant:
        """The passive-aggressive variant as the kernels take it (``mode`` code, ``C``)."""
        return PAVariant(self._mode, self._C)

    @property
    def _overflow(self) -> str:
        """What a refused step overflowed (``core.kernels.dos``: ``STEP_NOT_FINITE``)."""
        if self.dtype == "float64":
            return "squared norm or score overflows float64"
        return "squared norm or score overflows float64, or its update float32"

    def learn_row(self, indices, values, y: float) -> Step:
        status, score, nu = _dos_learn_one(
            self.W_, indices, values, y, self._mode, self._C, self.n_seen_
        )
        if status != STEP_OK:
            raise ValueError(f"the example's {self._overflow}")
        self.n_seen_ += 1
        moved = nu > 0.0
        self.n_updates_ += moved
        predicted = self.classes_[1] if score > 0 else self.classes_[0]
        return Step(score, max(0.0, 1.0 - y * score), moved, int(moved), predicted)

    def score_row(self, indices, values) -> float:
        return _dos_score(self.W_, indices, values)

    def learn_rows(self, batch: CSRBatch, y: np.ndarray) -> Steps:
        scores = np.zeros(batch.n_rows)
        nus = np.zeros(batch.n_rows)
        failed, done = _dos_learn_batch(
            self.W_,
            batch.indptr,
            batch.indices,
            batch.values,
            y,
            self._mode,
            self._C,
            self.n_seen_,
            scores,
            nus,
        )
        self.n_seen_ += done
        self.n_updates_ += int(np.count_nonzero(nus[:done]))
        if failed >= 0:
            raise PartialBatchError(
                f"row {failed}: the example's {self._overflow} ({done} earlier rows were learned)",
                steps_from(scores[:done], y[:done], nus[:done]),
            )
        return steps_from(scores, y, nus)

    def score_batch(self, batch: CSRBatch) -> np.ndarray:
        scores = np.empty(batch.n_rows)
        _dos_score_batch(self.W_, batch.indptr, batch.indices, batch.values, scores)
        return scores
