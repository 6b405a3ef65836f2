"""What the multi-class reductions of binary classifiers share (one-vs-one in
:mod:`core.one_vs_one`, one-vs-rest in :mod:`core.one_vs_rest`): parameter checks, label
mapping, scoring, probabilities and the checks made before any binary model learns.

Both wrap any binary model of ``core.base`` (labels -1 / +1) and keep one clone of it per
binary problem. An example is validated once (``core.features.as_row`` / ``as_batch``) and its
label is mapped to a class index once; the sub-models then run the protocol's hooks for
validated input (``learn_row``, ``score_row``, ``learn_rows``, ``score_batch``) on it, so a
one-vs-one ``learn_one`` over 10 classes does not validate the same example 45 times.
Everything that can make a sub-model refuse an example (a bad row or label, a squared norm or
score that overflows float64) is checked before the first sub-model learns, so a bad example
changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable

import numpy as np

from core import stacking
from core.base import Estimator, PartialBatchError, Steps
from core.binary import BinaryClassifier
from core.config import FLOAT, INDEX
from core.features import CSRBatch, as_batch, as_row, first_overflowing_row
from core.labels import LabelMap, check_targets

__all__ = ["Label", "Reduction", "check_squared_norms"]

#: a class label: any hashable value (``core.labels``)
Label = Hashable


class Reduction:
    """Parameter checks, label mapping and prediction plumbing shared by the reductions.

    A mixin rather than an ``Estimator`` subclass so that it is not registered as a model
    kind of its own (``core.registry.MODEL_KINDS``); :class:`core.one_vs_one.OneVsOne` and
    :class:`core.one_vs_rest.OneVsRest` derive from both.
    """

    _scalars = ("n_seen_",)
    base: BinaryClassifier
    models_: list[BinaryClassifier]

    def _setup(self, base, classes) -> None:
        if not isinstance(base, BinaryClassifier):
            raise ValueError(
                f"base must be a binary classifier of core (labels -1/+1), got {base!r}"
            )
        if getattr(base, "task", "binary") != "binary":
            raise ValueError(f"base must be a binary classifier, got task={base.task!r}")
        self._label_map = LabelMap(classes)
        self.classes_ = self._label_map.classes
        self._labels = self._label_map.array
        self.n_seen_ = 0

    @property
    def n_features(self) -> int:
        """Dimension of the inputs (the base model's)."""
        return self.base.n_features

    def _children(self) -> list[tuple[str, Estimator]]:
        return [(str(k), model) for k, model in enumerate(self.models_)]

    # -- labels ------------------------------------------------------------------------
    def _class_index(self, y) -> int:
        return self._label_map.index(y)

    def _class_indices(self, y, n_rows: int) -> np.ndarray:
        """Class indices of a batch's labels: one known label per row."""
        return self._label_map.indices(y, n_rows)

    # -- learning --------------------------------------------------------------------------
    def learn_many(self, X, y, **options) -> Steps:
        """Learn a batch in order; see the class's :meth:`learn_batch`, which this is with the
        labels converted to class indices (and the steps' ``predicted`` back to labels)."""
        batch = as_batch(X, self.n_features)
        targets = self._class_indices(y, batch.n_rows)
        try:
            steps = self._learn_targets(batch, targets, **options)
        except PartialBatchError as error:
            raise PartialBatchError(str(error), self._labelled(error.learned)) from None
        return self._labelled(steps)

    def learn_batch(self, batch: CSRBatch, targets: np.ndarray, **options) -> Steps:
        """Learn a batch already validated for this model, whose labels were converted to class
        indices once: the same model and steps as ``learn_many`` with the labels, the steps'
        ``predicted`` as class indices (int64).

        Parameters
        ----------
        batch : CSRBatch
            Rows validated with the model's ``n_features`` (``core.features.as_batch``).
        targets : ndarray of int, shape (n_rows,)
            Each row's index in ``classes_`` (``core.labels.LabelMap.indices``); checked.
        **options
            Those of ``learn_many`` (one-vs-one: ``progressive``).

        Returns
        -------
        Steps
        """
        targets = check_targets(targets, batch.n_rows, len(self.classes_))
        return self._learn_targets(batch, targets, **options)

    def _learn_targets(self, batch: CSRBatch, targets: np.ndarray, **options) -> Steps:
        """Learn a validated batch of checked class indices (``predicted``: class indices)."""
        raise NotImplementedError  # pragma: no cover

    def losses_from_model_scores(self, model_scores: np.ndarray, targets) -> np.ndarray:
        """Each row's loss as learning it would report it (the hinge losses of the binary
        models that learn from its class, summed), from the binary models' scores of
        :meth:`decide_batch` and class indices, without learning: how a variant that does
        not learn (a time average) is scored progressively. Learning's own sum may differ
        in the last bit (its order of summation)."""
        raise NotImplementedError  # pragma: no cover

    def _labelled(self, steps: Steps) -> Steps:
        """``steps`` with ``predicted`` as labels (what ``learn_many`` returns)."""
        if steps.predicted is None:
            return steps
        return dataclasses.replace(steps, predicted=self._labels[steps.predicted])

    # -- prediction --------------------------------------------------------------------
    def _model_scores_row(self, indices, values) -> np.ndarray:
        return np.array([model.score_row(indices, values) for model in self.models_])

    def _model_scores_batch(self, batch: CSRBatch) -> np.ndarray:
        """The binary models' scores, shape (n_rows, n_models): by one product of the rows
        against the stacked models (``core.stacking``) when they are DoS or linear PA models
        and the batch is large enough to pay for the stacking, else model by model (the two
        agree to rounding)."""
        if batch.n_rows >= stacking.STACK_MIN_ROWS:
            stack = stacking.Stack.of(self.models_, batch, self.n_features)
            if stack is not None:
                return stack.scores()
        scores = np.empty((batch.n_rows, len(self.models_)))
        for k, model in enumerate(self.models_):
            scores[:, k] = model.score_batch(batch)
        return scores

    def _winners(self, model_scores: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _outputs(self, model_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Class indices and ``score_many`` of the binary models' scores."""
        raise NotImplementedError  # pragma: no cover

    def decide_batch(self, batch: CSRBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(class indices, score_many, binary models' scores)`` of a batch already validated
        for this model, from one scoring (``predict_many`` and ``score_many`` together; the
        last feeds :meth:`proba_from_model_scores`)."""
        model_scores = self._model_scores_batch(batch)
        winners, scores = self._outputs(model_scores)
        return winners, scores, model_scores

    def proba_from_model_scores(self, model_scores: np.ndarray) -> np.ndarray:
        """``predict_proba_many`` from the binary models' scores of :meth:`decide_batch`."""
        return self._probabilities(model_scores)

    def predict_one(self, x) -> Label:
        """The predicted class of one example (as given in ``classes``)."""
        indices, values = as_row(x, self.n_features)
        winner = self._winners(self._model_scores_row(indices, values)[None, :])[0]
        return self.classes_[winner]

    def _model_scores_many(self, X) -> np.ndarray:
        """The binary models' scores of a batch as the ``*_many`` methods take it. A dense
        float array of finite values is multiplied as it is (``core.stacking``), without the
        CSR form that ``as_batch`` builds (which costs about as much as the scoring);
        anything else goes through ``as_batch``, which validates it."""
        if (
            isinstance(X, np.ndarray)
            and X.ndim == 2
            and X.dtype.kind == "f"
            and X.shape[1] == self.n_features
            and X.shape[0] >= stacking.STACK_MIN_ROWS
        ):
            stack = stacking.Stack.of_dense(self.models_, self.n_features)
            if stack is not None:
                X = np.asarray(X, dtype=FLOAT)
                if np.isfinite(X).all():
                    return stack.scores(X)
        return self._model_scores_batch(as_batch(X, self.n_features))

    def predict_many(self, X) -> np.ndarray:
        """Predicted classes of a batch: int64 array for int classes, object array for strings."""
        return self._labels[self._winners(self._model_scores_many(X))]

    # -- probabilities ---------------------------------------------------------------------
    def _binary_probabilities(self, model_scores: np.ndarray) -> np.ndarray:
        """P(+1) of every binary model for its scores, shape (n_rows, n_models)."""
        out = np.empty(model_scores.shape)
        for k, model in enumerate(self.models_):
            try:
                out[:, k] = model.proba_from_scores(model_scores[:, k])
            except ValueError:
                raise ValueError(
                    f"the binary models give no probabilities: build the reduction on "
                    f"base=core.calibration.Calibrated(model={type(self.base).__name__}(...))"
                ) from None
        return out

    def _probabilities(self, model_scores: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def predict_proba_one(self, x) -> np.ndarray:
        """Class probabilities of one example, shape (n_classes,) in the order of
        ``classes_`` (the binary models must give probabilities: see ``core.calibration``)."""
        indices, values = as_row(x, self.n_features)
        return self._probabilities(self._model_scores_row(indices, values)[None, :])[0]

    def predict_proba_many(self, X) -> np.ndarray:
        """Class probabilities of a batch, shape (n_rows, n_classes)."""
        return self._probabilities(self._model_scores_many(X))

    def proba_from_batch(self, batch: CSRBatch) -> np.ndarray:
        """``predict_proba_many`` of a batch already validated for this model."""
        return self._probabilities(self._model_scores_batch(batch))

    # -- learning checks -----------------------------------------------------------------
    def _check_learnable_row(self, indices, values, model_scores, learners) -> None:
        """Refuse, before any update, a row that one of ``learners`` would refuse."""
        check_squared_norms(CSRBatch(np.array([0, len(values)], dtype=INDEX), indices, values))
        bad = [k for k in learners if not np.isfinite(model_scores[k])]
        if bad:
            raise ValueError(
                f"the example's score overflows float64 in binary model {bad[0]} "
                f"({self._describe(bad[0])}); no model was updated"
            )

    def _describe(self, k: int) -> str:  # pragma: no cover
        raise NotImplementedError


def check_squared_norms(batch: CSRBatch) -> None:
    """Refuse a batch with a row whose squared norm ``1 + sum_j x_j^2`` overflows float64, as
    the binary kernels would, before any sub-model learns from it (summed from 1.0 in the
    kernels' order: an upper bound of the no-intercept sum, since rounding is monotone)."""
    row = first_overflowing_row(batch, 1.0)
    if row >= 0:
        where = f"row {row}: " if batch.n_rows > 1 else ""
        raise ValueError(f"{where}the example's squared norm overflows float64")
