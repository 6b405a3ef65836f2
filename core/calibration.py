"""Probabilities from any score: online calibrators, and a wrapper that attaches one to a model.

A passive-aggressive or perceptron score is a margin, not a probability. :class:`Calibrated`
wraps any online binary classifier and fits a calibrator on its *progressive* scores (each
example is scored before the model learns from it, so the calibrator sees the scores the
model gives to unseen examples):

- :class:`PlattCalibrator` (default): Platt scaling, ``P(y = classes_[1]) = sigmoid(a s + b)``,
  fitted online by recursive Newton steps with an exponential memory of ``memory`` examples
  (the model's score scale changes as it learns);
- :class:`IsotonicCalibrator`: isotonic regression (pool adjacent violators) over the last
  ``memory`` scores: any monotone shape, where enough examples make it fit.

The calibrator's state is part of the model's (``calibrator.*`` entries of ``get_state``), so a
restored model gives the same probabilities. The reductions (:mod:`core.one_vs_rest`,
:mod:`core.one_vs_one`) turn calibrated binary models into class probabilities, and
:class:`core.averaging.Averaged` passes them through.

>>> import numpy as np
>>> from core.linear import LinearPA
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((2000, 2)); y = np.where(X[:, 0] + rng.logistic(size=2000) > 0, 1, -1)
>>> model = Calibrated(model=LinearPA(n_features=2, mode="pa1", C=0.01))
>>> _ = model.learn_many(X, y)
>>> p = model.predict_proba_many(X)  # P(y = +1 | x); the log loss of the true P is 0.60
>>> round(float(-np.mean(np.log(np.where(y == 1, p, 1.0 - p)))), 2)
0.6
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from core.base import Estimator, PartialBatchError, Step, Steps
from core.binary import BinaryClassifier
from core.config import FLOAT, INDEX
from core.features import CSRBatch
from core.kernels.calibration import _isotonic_pav, _platt_learn_batch, _platt_step
from core.validation import check_choice, check_count, check_positive

__all__ = ["CALIBRATORS", "Calibrated", "IsotonicCalibrator", "PlattCalibrator", "sigmoid"]


def sigmoid(u) -> np.ndarray:
    """``1 / (1 + exp(-u))`` element-wise, without overflow."""
    u = np.asarray(u, dtype=FLOAT)
    e = np.exp(-np.abs(u))
    return np.where(u >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


class PlattCalibrator(Estimator):
    r"""Platt scaling fitted online: ``P(positive | s) = sigmoid(a s + b)``.

    Each example ``(s, positive)`` takes one Newton step on the log loss of Platt's smoothed
    targets ``t+ = (N+ + 1) / (N+ + 2)`` and ``t- = 1 / (N- + 2)`` (Platt 1999, which keep a
    separable stream from driving ``a`` to infinity): the curvature ``p (1 - p) [s, 1][s, 1]^T``
    is accumulated, every past term (and the counts ``N+-``) forgotten by
    ``decay = 1 - 1 / memory`` per example, and

        (a, b) <- (a, b) - (H + R)^{-1} (p - t) [s, 1],     R = ridge diag(mean s^2, 1),

    a recursive (Laplace-approximate) fit of the logistic regression of the label on the
    score over the last ``memory`` examples or so. Before any example ``a = b = 0``: every
    probability is 1/2. A score whose square overflows float64 is skipped.

    Parameters
    ----------
    memory : int
        Effective number of recent examples the fit weighs (``decay = 1 - 1 / memory``).
    ridge : float
        Prior curvature, in units of one example at ``p = 1/2`` times 4.

    Attributes
    ----------
    coef_ : ndarray of shape (2,)
        ``(a, b)``.
    curvature_ : ndarray of shape (3,)
        Decayed sums of ``p (1 - p) (s^2, s, 1)``.
    counts_ : ndarray of shape (2,)
        Decayed counts of negatives and positives.
    moments_ : ndarray of shape (2,)
        Decayed sums of ``1`` and ``s^2``.
    n_seen_ : int
        Scores learned.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = rng.standard_normal(20000); positive = rng.random(20000) < sigmoid(3.0 * s - 1.0)
    >>> platt = PlattCalibrator(memory=100_000)
    >>> platt.learn_many(s, positive)
    >>> platt.coef_.round(1)  # the labels were drawn with a = 3, b = -1
    array([ 2.9, -1. ])
    """

    _arrays = ("coef_", "curvature_", "counts_", "moments_")
    _scalars = ("n_seen_",)

    def __init__(self, *, memory: int = 10_000, ridge: float = 1.0):
        self.memory = memory
        self.ridge = ridge
        check_count("memory", memory)
        check_positive("ridge", ridge)
        self._decay = 1.0 - 1.0 / memory
        self.coef_ = np.zeros(2)
        self.curvature_ = np.zeros(3)
        self.counts_ = np.zeros(2)
        self.moments_ = np.zeros(2)
        self.n_seen_ = 0

    def learn_one(self, score: float, positive: bool) -> None:
        """Learn one progressive score and whether its example was positive."""
        self.n_seen_ += bool(
            _platt_step(
                self.coef_, self.curvature_, self.counts_, self.moments_, float(score),
                bool(positive), self._decay, float(self.ridge),
            )
        )  # fmt: skip

    def learn_many(self, scores, positives) -> None:
        """Learn a batch of scores in order (the same as the ``learn_one`` loop)."""
        scores = np.ascontiguousarray(scores, dtype=FLOAT)
        positives = np.ascontiguousarray(positives, dtype=np.bool_)
        self.n_seen_ += int(
            _platt_learn_batch(
                self.coef_, self.curvature_, self.counts_, self.moments_, scores, positives,
                self._decay, float(self.ridge),
            )
        )  # fmt: skip

    def predict_proba(self, scores) -> np.ndarray:
        """``P(positive | s)`` for every score."""
        scores = np.asarray(scores, dtype=FLOAT)
        if scores.shape == (1,):
            # one score (a single prediction): the same float64 operations as ``sigmoid``
            # and numpy's exp, in three numpy calls instead of eight (same bits)
            u = float(self.coef_[0]) * float(scores[0]) + float(self.coef_[1])
            e = float(np.exp(-abs(u)))
            return np.array([1.0 / (1.0 + e) if u >= 0 else e / (1.0 + e)])
        return sigmoid(self.coef_[0] * scores + self.coef_[1])


class IsotonicCalibrator(Estimator):
    """Isotonic regression of the label on the score over the last ``memory`` examples.

    The fit is the non-decreasing step function closest (least squares) to the labels of the
    window in score order, found by pool adjacent violators over the distinct scores;
    probabilities interpolate linearly between the ends of its steps and are clipped to
    ``[1 / (n + 2), (n + 1) / (n + 2)]`` (``n`` examples in the window), so that no example is
    given probability 0 or 1. The fit is recomputed when the window has changed since the
    last one (``O(memory log memory)``): isotonic fits a monotone shape of any form where the
    window is large, at that cost. Before any example every probability is 1/2. The
    window's time order has no meaning to an element-wise average, so this calibrator cannot
    be time-averaged (``averageable = False``).

    Parameters
    ----------
    memory : int
        Size of the window.

    Attributes
    ----------
    scores_ : ndarray of shape (memory,)
        The window's scores (a ring buffer; slot ``i`` holds example ``i mod memory``).
    positives_ : ndarray of shape (memory,)
        1.0 for a positive example, 0.0 for a negative one.
    n_seen_ : int
        Scores learned.

    Examples
    --------
    >>> iso = IsotonicCalibrator(memory=4)
    >>> iso.learn_many([0.0, 1.0, 2.0, 3.0], [False, True, False, True])
    >>> iso.predict_proba([0.0, 1.5, 3.0])
    array([0.16666667, 0.5       , 0.83333333])
    """

    _arrays = ("scores_", "positives_")
    _scalars = ("n_seen_",)
    averageable: ClassVar[bool] = False

    def __init__(self, *, memory: int = 10_000):
        self.memory = memory
        check_count("memory", memory)
        self.scores_ = np.zeros(memory)
        self.positives_ = np.zeros(memory)
        self.n_seen_ = 0
        self._fit: tuple[int, np.ndarray, np.ndarray] | None = None

    def learn_one(self, score: float, positive: bool) -> None:
        """Learn one progressive score and whether its example was positive."""
        if not np.isfinite(score):
            return
        slot = self.n_seen_ % self.memory
        self.scores_[slot] = score
        self.positives_[slot] = 1.0 if positive else 0.0
        self.n_seen_ += 1

    def learn_many(self, scores, positives) -> None:
        """Learn a batch of scores in order (the same as the ``learn_one`` loop)."""
        scores = np.asarray(scores, dtype=FLOAT)
        positives = np.asarray(positives, dtype=bool)
        keep = np.isfinite(scores)
        scores, positives = scores[keep][-self.memory :], positives[keep][-self.memory :]
        skipped = int(np.count_nonzero(keep)) - scores.shape[0]
        slots = (self.n_seen_ + skipped + np.arange(scores.shape[0])) % self.memory
        self.scores_[slots] = scores
        self.positives_[slots] = positives
        self.n_seen_ += skipped + scores.shape[0]

    def _state_loaded(self) -> None:
        self._fit = None

    def _knots(self) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, probabilities)`` of the fitted steps' ends, cached per ``n_seen_``."""
        if self._fit is not None and self._fit[0] == self.n_seen_:
            return self._fit[1], self._fit[2]
        n = min(self.n_seen_, self.memory)
        scores, inverse = np.unique(self.scores_[:n], return_inverse=True)
        totals = np.bincount(inverse, weights=self.positives_[:n], minlength=scores.shape[0])
        counts = np.bincount(inverse, minlength=scores.shape[0]).astype(FLOAT)
        m = scores.shape[0]
        sums, weights, ends = np.empty(m), np.empty(m), np.empty(m, dtype=INDEX)
        n_blocks = _isotonic_pav(totals, counts, sums, weights, ends)
        ends = ends[:n_blocks]
        starts = np.r_[0, ends[:-1]]
        x = np.column_stack([scores[starts], scores[ends - 1]]).ravel()
        p = np.repeat(sums[:n_blocks] / weights[:n_blocks], 2)
        self._fit = (self.n_seen_, x, p)
        return x, p

    def predict_proba(self, scores) -> np.ndarray:
        """``P(positive | s)`` for every score."""
        scores = np.asarray(scores, dtype=FLOAT)
        if self.n_seen_ == 0:
            return np.full(scores.shape, 0.5)
        x, p = self._knots()
        n = min(self.n_seen_, self.memory)
        return np.clip(np.interp(scores, x, p), 1.0 / (n + 2), (n + 1) / (n + 2))


#: method name -> calibrator class
CALIBRATORS: dict[str, type[Estimator]] = {
    "platt": PlattCalibrator,
    "isotonic": IsotonicCalibrator,
}


class Calibrated(BinaryClassifier):
    """An online binary classifier with a calibrator fitted on its progressive scores.

    It learns, scores and predicts exactly as ``model`` does (the same steps, scores and
    labels, bit for bit); each example's score before the update then teaches the
    calibrator. ``predict_proba_one`` / ``predict_proba_many`` give
    ``P(y = classes_[1] | x)``. As a ``base`` of :class:`core.one_vs_rest.OneVsRest` or
    :class:`~core.one_vs_one.OneVsOne` every binary sub-model gets a calibrator of its own,
    and the reduction gives class probabilities.

    Parameters
    ----------
    model : BinaryClassifier
        The online binary model (labels and hyperparameters as usual); a template: this
        wrapper learns a clone of it.
    method : {"platt", "isotonic"}
        The calibrator (:class:`PlattCalibrator` or :class:`IsotonicCalibrator`).
    memory : int
        How many recent examples the calibrator weighs.

    Attributes
    ----------
    model_ : BinaryClassifier
        The model that learns; its arrays appear in the state as ``"model.{name}"``.
    calibrator_ : PlattCalibrator or IsotonicCalibrator
        Its arrays appear in the state as ``"calibrator.{name}"`` (Platt: ``coef_`` =
        ``(a, b)``, ``curvature_``, ``counts_``, ``moments_``; isotonic: ``scores_``,
        ``positives_``), its scalar as ``"calibrator.n_seen_"``.

    Examples
    --------
    >>> from core.dos import DoSClassifier
    >>> model = Calibrated(model=DoSClassifier(n_features=2, rank=2, classes=["ham", "spam"]))
    >>> for x, y in [([1.0, 0.2], "spam"), ([0.1, 1.0], "ham")] * 50:
    ...     step = model.learn_one(x, y)
    >>> model.predict_one([1.0, 0.2]), bool(model.predict_proba_one([1.0, 0.2]) > 0.9)
    ('spam', True)
    >>> sorted(name for name, _ in model.arrays())[:2]
    ['calibrator.coef_', 'calibrator.counts_']
    """

    def __init__(self, *, model: BinaryClassifier, method: str = "platt", memory: int = 10_000):
        self.model = model
        self.method = method
        self.memory = memory
        if not isinstance(model, BinaryClassifier):
            raise ValueError(
                f"model must be an online binary classifier of core, got {model!r} (batch "
                "models: feed a calibrator's learn_many the scores of examples they had not "
                "seen)"
            )
        if getattr(model, "task", "binary") != "binary":
            raise ValueError(f"model must be a classifier, got task={model.task!r}")
        check_choice("method", method, tuple(CALIBRATORS))
        self.model_ = model.clone()
        self.calibrator_ = CALIBRATORS[method](memory=memory)
        self.n_features = self.model_.n_features
        self._init_classes(self.model_.classes)  # the model's labels, mapped as it maps them

    def _children(self) -> list[tuple[str, Estimator]]:
        return [("model", self.model_), ("calibrator", self.calibrator_)]

    # -- learning: the model's, then the calibrator's ----------------------------------------
    def learn_row(self, indices, values, y: float) -> Step:
        step = self.model_.learn_row(indices, values, y)
        self.calibrator_.learn_one(step.score, y > 0.0)
        return step

    def learn_rows(self, batch: CSRBatch, y: np.ndarray) -> Steps:
        try:
            steps = self.model_.learn_rows(batch, y)
        except PartialBatchError as error:
            # the model learned the rows before the one it refused: so does the calibrator
            learned = len(error.learned)
            self.calibrator_.learn_many(error.learned.scores, y[:learned] > 0.0)
            raise
        self.calibrator_.learn_many(steps.scores, y > 0.0)
        return steps

    # -- scores and probabilities ----------------------------------------------------------
    def score_row(self, indices, values) -> float:
        return self.model_.score_row(indices, values)

    def losses_from_scores(self, scores: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The wrapped model's (its steps are the ones learning reports)."""
        return self.model_.losses_from_scores(scores, y)

    def score_batch(self, batch: CSRBatch) -> np.ndarray:
        return self.model_.score_batch(batch)

    def proba_from_scores(self, scores) -> np.ndarray:
        """``P(y = classes_[1])`` for decision values of this model (e.g. from
        ``score_batch``), without scoring again."""
        return self.calibrator_.predict_proba(scores)

    def status(self) -> dict[str, Any] | None:
        """The wrapped model's status (``None`` if it has none)."""
        status = getattr(self.model_, "status", None)
        return status() if callable(status) else None
