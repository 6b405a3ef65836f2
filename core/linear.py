"""Linear passive-aggressive classifier (Crammer et al. 2006; eq 2 of the DoS paper)."""

from __future__ import annotations

import numpy as np

from core.base import PartialBatchError, Step, Steps
from core.binary import BinaryClassifier, steps_from
from core.features import CSRBatch
from core.kernels.linear import (
    STEP_OK,
    _linear_learn_batch,
    _linear_score,
    _linear_score_batch,
    _linear_step,
)
from core.validation import PAVariant, check_flag, check_n_features, check_pa_params

__all__ = ["LinearPA"]


class LinearPA(BinaryClassifier):
    """Linear passive-aggressive classifier: score ``w . z`` with ``z = [x, 1]``.

    Each example ``(x, y)``, ``y`` in {-1, +1}, triggers the minimal change of ``w`` that
    classifies it with unit margin (eq 1-2 of Saul 2021, from Crammer et al. 2006):
    ``w <- w + tau y z`` with the hinge loss ``l = max(0, 1 - y w.z)`` and

    - ``mode="pa"``:  ``tau = l / |z|^2`` (hard margin, eq 2),
    - ``mode="pa1"``: ``tau = min(C, l / |z|^2)`` (PA-I, linear slack penalty),
    - ``mode="pa2"``: ``tau = l / (|z|^2 + 1 / (2C))`` (PA-II, squared slack penalty).

    An example with ``z = 0`` (no intercept and an empty row) cannot move the score and is
    left passive.

    Parameters
    ----------
    n_features : int
        Dimension of the inputs (named features are hashed into this many buckets).
    mode : {"pa", "pa1", "pa2"}
    C : float
        Aggressiveness of PA-I / PA-II (ignored by PA).
    fit_intercept : bool
        Learn the bias ``w_[-1]``; when False the bias stays 0.
    classes : list of 2 labels, optional
        The labels of the negative and the positive class (default: -1 and +1).

    Attributes
    ----------
    w_ : ndarray of shape (n_features + 1,)
        Weights, bias last. Zero at start.
    n_seen_ : int
        Examples learned. ``n_updates_`` : int, aggressive updates among them.

    Examples
    --------
    >>> model = LinearPA(n_features=2)
    >>> model.learn_one([1.0, 0.0], 1)
    Step(score=0.0, loss=1.0, aggressive=True, n_aggressive=1, predicted=-1)
    >>> model.score_one([1.0, 0.0])
    1.0
    >>> model.w_
    array([0.5, 0. , 0.5])
    """

    _arrays = ("w_",)
    _scalars = ("n_seen_", "n_updates_")
    _feature_axes = {"w_": 0}  # w moves along z = [x, 1]

    def __init__(
        self,
        *,
        n_features: int,
        mode: str = "pa",
        C: float = 1.0,
        fit_intercept: bool = True,
        classes: list | None = None,
    ):
        self.n_features = n_features
        self.mode = mode
        self.C = C
        self.fit_intercept = fit_intercept
        check_n_features(n_features)
        self._mode, self._C = check_pa_params(mode, C)
        check_flag("fit_intercept", fit_intercept)
        self._init_classes(classes)
        self._bias = 1.0 if fit_intercept else 0.0
        self.w_ = np.zeros(n_features + 1)
        self.n_seen_ = 0
        self.n_updates_ = 0

    @property
    def pa_variant(self) -> PAVariant:
        """The passive-aggressive variant as the kernels take it (``mode`` code, ``C``)."""
        return PAVariant(self._mode, self._C)

    @property
    def bias_feature(self) -> float:
        """The constant appended to every example, ``z = [x, bias_feature]``: 1.0, or 0.0
        without an intercept (which keeps the bias ``w_[-1]`` at 0)."""
        return self._bias

    def learn_row(self, indices, values, y: float) -> Step:
        status, score, tau = _linear_step(
            self.w_, indices, values, self._bias, y, self._mode, self._C
        )
        if status != STEP_OK:
            raise ValueError("the example's squared norm or score overflows float64")
        self.n_seen_ += 1
        moved = tau > 0.0
        self.n_updates_ += moved
        predicted = self.classes_[1] if score > 0 else self.classes_[0]
        return Step(score, max(0.0, 1.0 - y * score), moved, int(moved), predicted)

    def score_row(self, indices, values) -> float:
        return _linear_score(self.w_, indices, values, self._bias)

    def learn_rows(self, batch: CSRBatch, y: np.ndarray) -> Steps:
        scores = np.zeros(batch.n_rows)
        taus = np.zeros(batch.n_rows)
        failed, done = _linear_learn_batch(
            self.w_,
            batch.indptr,
            batch.indices,
            batch.values,
            self._bias,
            y,
            self._mode,
            self._C,
            scores,
            taus,
        )
        self.n_seen_ += done
        self.n_updates_ += int(np.count_nonzero(taus[:done]))
        if failed >= 0:
            raise PartialBatchError(
                f"row {failed}: the example's squared norm or score overflows "
                f"float64 ({done} earlier rows were learned)",
                steps_from(scores[:done], y[:done], taus[:done]),
            )
        return steps_from(scores, y, taus)

    def score_batch(self, batch: CSRBatch) -> np.ndarray:
        scores = np.empty(batch.n_rows)
        _linear_score_batch(self.w_, batch.indptr, batch.indices, batch.values, self._bias, scores)
        return scores
