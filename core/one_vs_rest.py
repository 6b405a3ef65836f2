"""One-vs-rest multi-class classifier: the class whose binary model scores highest.

The plumbing it shares with one-vs-one is in :mod:`core.reduction`.
"""

from __future__ import annotations

import numpy as np

from core.base import Estimator, Step, Steps
from core.binary import BinaryClassifier
from core.config import INDEX
from core.features import CSRBatch, as_row
from core.labels import check_targets
from core.reduction import Label, Reduction, check_squared_norms

__all__ = ["OneVsRest"]


class OneVsRest(Reduction, Estimator):
    r"""One-vs-rest multiclass classifier: the class whose binary model scores highest.

    One clone of ``base`` per class; model k learns from every example, with label +1 for
    ``classes[k]`` and -1 for any other class. The prediction is ``argmax_k f_k(x)``, ties
    going to the lowest class index.

    Parameters
    ----------
    base : BinaryClassifier
        The binary model (labels -1/+1) cloned for every class; it is not trained itself.
    classes : list
        At least two distinct hashable labels (``core.labels``); stored as given.

    Attributes
    ----------
    classes_ : tuple
        ``classes`` as a tuple.
    models_ : list of BinaryClassifier
        ``models_[k]`` separates ``classes[k]`` from the rest; its arrays appear in the state
        as ``"{k}.{name}"`` (e.g. ``"0.w_"`` of shape (n_features + 1,)).
    n_seen_ : int
        Examples learned.

    Examples
    --------
    >>> from core.linear import LinearPA
    >>> model = OneVsRest(base=LinearPA(n_features=2), classes=[3, 5, 7])
    >>> for x, y in [([1.0, 0.0], 3), ([0.0, 1.0], 5), ([-1.0, -1.0], 7)] * 3:
    ...     step = model.learn_one(x, y)
    >>> step.predicted, round(step.loss, 6)
    (7, 0.0)
    >>> model.predict_many([[0.9, 0.1], [0.1, 0.9]])
    array([3, 5])
    >>> model.score_one([0.9, 0.1]).shape
    (3,)
    """

    def __init__(self, *, base: BinaryClassifier, classes: list[Label]):
        self.base = base
        self.classes = classes
        self._setup(base, classes)
        self.models_ = [base.clone() for _ in self.classes_]

    def _describe(self, k: int) -> str:
        return f"class {self.classes_[k]!r} vs rest"

    def _winners(self, model_scores: np.ndarray) -> np.ndarray:
        return np.argmax(model_scores, axis=1)

    def _outputs(self, model_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._winners(model_scores), model_scores

    def _probabilities(self, model_scores: np.ndarray) -> np.ndarray:
        """Each class's calibrated ``P(class k | x)`` against the rest, normalised to sum to 1
        (uniform where every model says 0)."""
        p = self._binary_probabilities(model_scores)
        total = p.sum(axis=1, keepdims=True)
        uniform = np.full_like(p, 1.0 / p.shape[1])
        return np.where(total > 0.0, p / np.where(total > 0.0, total, 1.0), uniform)

    def score_one(self, x) -> np.ndarray:
        """The binary models' scores for one example, shape (n_classes,)."""
        indices, values = as_row(x, self.n_features)
        return self._model_scores_row(indices, values)

    def score_many(self, X) -> np.ndarray:
        """The binary models' scores for a batch, shape (n_rows, n_classes)."""
        return self._model_scores_many(X)

    def learn_one(self, x, y) -> Step:
        """Learn one example: every binary model updates. Returns a :class:`core.base.Step`
        (``score``: the binary models' scores before the update)."""
        target = self._class_index(y)
        indices, values = as_row(x, self.n_features)
        model_scores = self._model_scores_row(indices, values)
        self._check_learnable_row(indices, values, model_scores, range(len(self.models_)))
        predicted = self._winners(model_scores[None, :])[0]
        loss, n_aggressive = 0.0, 0
        for k, model in enumerate(self.models_):
            step = model.learn_row(indices, values, 1.0 if k == target else -1.0)
            loss += step.loss
            n_aggressive += step.aggressive
        self.n_seen_ += 1
        return Step(model_scores, loss, n_aggressive > 0, n_aggressive, self.classes_[predicted])

    def learn_many(self, X, y) -> Steps:
        """Learn a batch in order (bit-identical to the ``learn_one`` loop); see
        :meth:`core.one_vs_one.OneVsOne.learn_many` for what is checked before any model
        learns."""
        return super().learn_many(X, y)

    def losses_from_model_scores(self, model_scores: np.ndarray, targets) -> np.ndarray:
        """Each row's losses summed over every binary model, its class's with +1 and the
        others' with -1 (:meth:`core.reduction.Reduction.losses_from_model_scores`)."""
        targets = check_targets(targets, model_scores.shape[0], len(self.classes_))
        losses = np.zeros(len(targets))
        for k, model in enumerate(self.models_):
            y = np.where(targets == k, 1.0, -1.0)
            losses += model.losses_from_scores(model_scores[:, k], y)
        return losses

    def _learn_targets(self, batch: CSRBatch, targets: np.ndarray) -> Steps:
        check_squared_norms(batch)
        losses = np.zeros(batch.n_rows)
        n_aggressive = np.zeros(batch.n_rows, dtype=INDEX)
        scores = np.empty((batch.n_rows, len(self.models_)))
        for k, model in enumerate(self.models_):
            labels = np.where(targets == k, 1.0, -1.0)
            try:
                steps = model.learn_rows(batch, labels)
            except ValueError as error:
                raise ValueError(f"{self._describe(k)}: {error}; earlier models learned") from None
            losses += steps.losses
            n_aggressive += steps.aggressive
            scores[:, k] = steps.scores
        self.n_seen_ += batch.n_rows
        predicted = self._winners(scores)
        return Steps(scores, losses, n_aggressive > 0, n_aggressive, predicted)
