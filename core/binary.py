"""Binary models: a score separating two classes, its labels, and the two ways of learning
(online ``learn_one`` / ``learn_many`` over the protocol's hooks, or a batch ``fit``).

:class:`BinaryModel` maps scores to the two classes; :class:`BinaryClassifier` learns online
(linear PA, DoS, the perceptrons, binary PQR), :class:`BatchClassifier` is fitted (the
ellipsoidal classifier). Both follow the protocol of ``core.base``.
"""

from __future__ import annotations

import numpy as np

from core.base import Estimator, Step, Steps
from core.config import INDEX
from core.features import CSRBatch, Row, as_batch, as_row
from core.labels import LabelMap, check_binary_label, check_binary_labels, check_targets


class BinaryModel(Estimator):
    """Scoring and labels of a model that separates two classes.

    The model learns ``-1`` for ``classes[0]`` and ``+1`` for ``classes[1]``, predicts
    ``classes[1]`` when its score is ``> 0`` and ``classes[0]`` otherwise (a zero model says
    ``classes[0]``). Without ``classes`` the labels are ``-1`` and ``+1`` themselves.
    Subclasses implement :meth:`score_row` and :meth:`score_batch` over validated rows and
    batches: the hooks that wrappers (``core.calibration.Calibrated``, the reductions) call on
    what they validated once.

    Attributes
    ----------
    classes_ : tuple
        The two labels, ``(-1, 1)`` without ``classes``.

    Examples
    --------
    >>> from core.dos import DoSClassifier
    >>> model = DoSClassifier(n_features=2, classes=[False, True])
    >>> model.classes_, model.predict_one([0.0, 0.0]) in (False, True)
    ((False, True), True)
    """

    n_features: int
    classes_: tuple = (-1, 1)
    _label_map: LabelMap | None = None

    def _init_classes(self, classes) -> None:
        """Store the ``classes`` hyperparameter (None: labels -1 / +1) and its label map."""
        self.classes = classes
        if classes is None:
            self._label_map = None
            self.classes_ = (-1, 1)
            self._label_array = np.array([-1, 1], dtype=INDEX)
        else:
            self._label_map = LabelMap(classes)
            if len(self._label_map) != 2:
                raise ValueError(
                    f"a binary model takes 2 classes, got {len(self._label_map)} (use "
                    "core.one_vs_rest.OneVsRest or OneVsOne for more)"
                )
            self.classes_ = self._label_map.classes
            self._label_array = self._label_map.array

    def _row(self, x) -> Row:
        return as_row(x, self.n_features)

    def _batch(self, X) -> CSRBatch:
        return as_batch(X, self.n_features)

    def _binary_label(self, y) -> float:
        """``-1.0`` / ``+1.0`` for a label."""
        if self._label_map is None:
            return check_binary_label(y)
        return 1.0 if self._label_map.index(y) else -1.0

    def _binary_labels(self, y, n_rows: int) -> np.ndarray:
        """``-1.0`` / ``+1.0`` for a batch's labels."""
        if self._label_map is None:
            return check_binary_labels(y, n_rows)
        return np.where(self._label_map.indices(y, n_rows) == 1, 1.0, -1.0)

    def _labels_of(self, scores: np.ndarray) -> np.ndarray:
        """The labels that scores predict."""
        return self._label_array[(scores > 0).astype(INDEX)]

    def score_one(self, x) -> float:
        """The decision value of one example (``> 0`` predicts ``classes_[1]``).

        Parameters
        ----------
        x : array-like, ``(indices, values)`` or mapping
            A dense row of ``n_features`` values, a sparse row or named features (see
            ``core.features.as_row``).

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=2)
        >>> _ = model.learn_one([1.0, 0.0], 1)
        >>> model.score_one([1.0, 0.0]), model.score_one(([0], [1.0]))
        (1.0, 1.0)
        """
        indices, values = self._row(x)
        return self.score_row(indices, values)

    def score_many(self, X) -> np.ndarray:
        """Decision values of a batch, shape (n_rows,).

        Parameters
        ----------
        X : 2-D array, scipy sparse matrix or sequence of rows

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=2)
        >>> _ = model.learn_one([1.0, 0.0], 1)
        >>> model.score_many([[1.0, 0.0], [0.0, 1.0]])
        array([1. , 0.5])
        """
        return self.score_batch(self._batch(X))

    def predict_one(self, x):
        """The predicted label of one example: ``classes_[1]`` if its score is ``> 0``.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=1, classes=["no", "yes"])
        >>> _ = model.learn_one([1.0], "yes")
        >>> model.predict_one([1.0]), model.predict_one([-3.0])
        ('yes', 'no')
        """
        return self.classes_[1] if self.score_one(x) > 0 else self.classes_[0]

    def predict_many(self, X) -> np.ndarray:
        """Predicted labels of a batch: int64 for integer labels, object otherwise.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=1)
        >>> _ = model.learn_one([1.0], 1)
        >>> model.predict_many([[1.0], [-3.0]])
        array([ 1, -1])
        """
        return self._labels_of(self.score_many(X))

    def decision_function(self, X) -> np.ndarray:
        """Alias of ``score_many`` (scikit-learn's name)."""
        return self.score_many(X)

    def proba_from_scores(self, scores) -> np.ndarray:
        """``P(y = classes_[1])`` for decision values of this model.

        A margin is not a probability: models without a probabilistic score raise
        ``ValueError`` and are wrapped in :class:`core.calibration.Calibrated` for one.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> from core.calibration import Calibrated
        >>> LinearPA(n_features=1).proba_from_scores([0.0])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: LinearPA scores are margins, not probabilities: wrap the model in ...
        >>> Calibrated(model=LinearPA(n_features=1)).proba_from_scores([0.0])
        array([0.5])
        """
        raise ValueError(
            f"{type(self).__name__} scores are margins, not probabilities: wrap the model in "
            "core.calibration.Calibrated"
        )

    def predict_proba_one(self, x) -> float:
        """``P(y = classes_[1] | x)`` (see :meth:`proba_from_scores`)."""
        return float(self.proba_from_scores(np.array([self.score_one(x)]))[0])

    def predict_proba_many(self, X) -> np.ndarray:
        """``P(y = classes_[1] | x)`` for every row, shape (n_rows,)."""
        return np.asarray(self.proba_from_scores(self.score_many(X)))

    # implemented by subclasses
    def score_row(self, indices: np.ndarray, values: np.ndarray) -> float:  # pragma: no cover
        """The decision value of one row already validated for this model.

        Parameters
        ----------
        indices : ndarray of int64
            The row's sorted, distinct feature indices, each in ``[0, n_features)``.
        values : ndarray of float64
            Its finite values (``core.features.as_row`` with the model's ``n_features``
            returns both).

        Returns
        -------
        float
            What ``score_one`` returns for that row (no validation: a caller that validated
            once scores without a second pass).
        """
        raise NotImplementedError

    def score_batch(self, batch: CSRBatch) -> np.ndarray:  # pragma: no cover
        """The decision values of a batch already validated for this model.

        Parameters
        ----------
        batch : CSRBatch
            Rows validated with the model's ``n_features`` (``core.features.as_batch``).

        Returns
        -------
        ndarray of shape (n_rows,)
            What ``score_many`` returns for those rows (no validation: a server that
            validated once scores without a second pass).
        """
        raise NotImplementedError


class BinaryClassifier(BinaryModel):
    """Base of the online binary classifiers: ``learn_one`` / ``learn_many``.

    Inputs are validated first, so a bad example raises ``ValueError`` before any learned
    array is touched. Subclasses implement :meth:`learn_row` and :meth:`learn_rows` over
    validated rows and batches with numeric targets (``-1.0`` / ``+1.0``): the hooks that
    wrappers (``core.calibration.Calibrated``, the reductions) call on what they validated
    once.

    Examples
    --------
    >>> from core.separation import Perceptron
    >>> model = Perceptron(n_features=2, classes=["ham", "spam"])
    >>> for x, y in [([1.0, 0.0], "spam"), ([0.0, 1.0], "ham")] * 2:
    ...     _ = model.learn_one(x, y)
    >>> model.predict_many([[1.0, 0.0], [0.0, 1.0]])
    array(['spam', 'ham'], dtype=object)
    """

    def learn_one(self, x, y) -> Step:
        """Learn one example.

        Parameters
        ----------
        x : array-like, ``(indices, values)`` or mapping
            A dense row, a sparse row or named features (see ``core.features.as_row``).
        y : label
            One of ``classes_``.

        Returns
        -------
        Step
            The score, loss and prediction before the update, and whether it changed the
            model.

        Examples
        --------
        >>> from core.dos import DoSClassifier
        >>> model = DoSClassifier(n_features=2, rank=1, seed=0)
        >>> step = model.learn_one([1.0, -1.0], 1)
        >>> step.aggressive, round(model.score_one([1.0, -1.0]), 12)
        (True, 1.0)
        """
        label = self._binary_label(y)
        indices, values = self._row(x)
        return self.learn_row(indices, values, label)

    def learn_many(self, X, y) -> Steps:
        """Learn a batch in order: the same model as ``learn_one`` on each row.

        Parameters
        ----------
        X : 2-D array, scipy sparse matrix or sequence of rows
        y : sequence of labels, one per row

        Returns
        -------
        Steps
            Per example: the score, loss and prediction before its update, and whether it
            changed the model.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=2)
        >>> steps = model.learn_many([[1.0, 0.0], [0.0, 1.0]], [1, -1])
        >>> steps.losses, steps.n_aggressive
        (array([1. , 1.5]), 2)
        """
        batch = self._batch(X)
        labels = self._binary_labels(y, batch.n_rows)
        steps = self.learn_rows(batch, labels)
        return Steps(
            steps.scores, steps.losses, steps.aggressive, None, self._labels_of(steps.scores)
        )

    def learn_batch(self, batch: CSRBatch, targets: np.ndarray) -> Steps:
        """Learn a batch already validated for this model, whose labels were converted to class
        indices once: the same model and steps as ``learn_many`` with the labels.

        Parameters
        ----------
        batch : CSRBatch
            Rows validated with the model's ``n_features`` (``core.features.as_batch``).
        targets : ndarray of int, shape (n_rows,)
            Each row's class index: 0 for ``classes_[0]``, 1 for ``classes_[1]``
            (``core.labels.LabelMap.indices``); checked.

        Returns
        -------
        Steps
            Per row: the score and loss before its update, whether it changed the model, and
            the class index it predicted then (``predicted``, int64).

        Raises
        ------
        PartialBatchError
            If a row's squared norm or score overflows float64: the rows before it were
            learned (``error.learned``), it and the rest were not.

        Examples
        --------
        >>> from core.features import as_batch
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=2, classes=["ham", "spam"])
        >>> steps = model.learn_batch(as_batch([[1.0, 0.0], [0.0, 1.0]], 2), np.array([1, 0]))
        >>> steps.predicted, steps.losses
        (array([0, 1]), array([1. , 1.5]))
        """
        targets = check_targets(targets, batch.n_rows, 2)
        steps = self.learn_rows(batch, np.where(targets == 1, 1.0, -1.0))
        predicted = (steps.scores > 0).astype(INDEX)
        return Steps(steps.scores, steps.losses, steps.aggressive, None, predicted)

    # implemented by subclasses
    def learn_row(self, indices: np.ndarray, values: np.ndarray, y: float) -> Step:
        """Update the model with one row already validated for it and its numeric target.

        Parameters
        ----------
        indices, values : ndarray
            A row validated with the model's ``n_features`` (see :meth:`score_row`).
        y : float
            ``-1.0`` for ``classes_[0]``, ``+1.0`` for ``classes_[1]`` (a regression model:
            the target value, finite).

        Returns
        -------
        Step
            The score, loss and prediction before the update, and whether it changed the
            model.

        Raises
        ------
        ValueError
            If the row's squared norm or score overflows float64; nothing is learned.
        """
        raise NotImplementedError  # pragma: no cover

    def losses_from_scores(self, scores: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The losses learning would report for rows of these scores and targets ``y``
        (+1 / -1), without learning: how a variant that does not learn (a time average) is
        scored progressively. The passive-aggressive hinge ``max(0, 1 - y score)``; the
        perceptrons override it with theirs."""
        return np.maximum(0.0, 1.0 - y * scores)

    def learn_rows(self, batch: CSRBatch, y: np.ndarray) -> Steps:
        """Update the model with the rows of a batch already validated for it, in order, and
        their numeric targets: the model of :meth:`learn_row` on each row.

        Parameters
        ----------
        batch : CSRBatch
            Rows validated with the model's ``n_features`` (``core.features.as_batch``).
        y : ndarray of float64, shape (n_rows,)
            One target per row, as :meth:`learn_row` takes it.

        Returns
        -------
        Steps
            Per row: the score and loss before its update and whether it changed the model
            (``predicted`` is None).

        Raises
        ------
        PartialBatchError
            If a row's squared norm or score overflows float64: the rows before it were
            learned (``error.learned``), it and the rest were not.
        """
        raise NotImplementedError  # pragma: no cover


class BatchClassifier(BinaryModel):
    """Base of binary models that learn only in batch: ``fit(X, y)`` replaces what was
    learned; there is no ``learn_one``.

    Subclasses implement ``_fit_batch(batch, labels)`` over a validated batch with labels
    ``-1.0`` / ``+1.0``; ``fit`` validates everything first, so a bad batch leaves the last
    fit in place.

    Examples
    --------
    >>> from core.separation import EllipsoidalClassifier
    >>> X = [[0.0, 0.0], [0.1, 0.0], [3.0, 0.0], [0.0, -3.0], [-3.0, 0.5], [0.2, 3.0]]
    >>> model = EllipsoidalClassifier(n_features=2, classes=["out", "in"])
    >>> model.fit(X, ["in", "in", "out", "out", "out", "out"]).predict_one([0.05, 0.0])
    'in'
    """

    def fit(self, X, y) -> BatchClassifier:
        """Learn from a batch, replacing the previous fit.

        Parameters
        ----------
        X : 2-D array, scipy sparse matrix or sequence of rows
        y : sequence of labels, one per row

        Returns
        -------
        self
        """
        batch = self._batch(X)
        self._fit_batch(batch, self._binary_labels(y, batch.n_rows))
        return self

    def _fit_batch(self, batch: CSRBatch, y: np.ndarray) -> None:  # pragma: no cover
        raise NotImplementedError


def steps_from(scores: np.ndarray, labels: np.ndarray, steps: np.ndarray) -> Steps:
    """Steps of a batch from the PA kernels' outputs (scores before updates, step sizes):
    hinge losses ``max(0, 1 - y score)``, aggressive where the step is positive."""
    return Steps(scores, np.maximum(0.0, 1.0 - labels * scores), steps > 0.0)
