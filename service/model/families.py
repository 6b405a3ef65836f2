"""How each family of models maps labels, predicts and learns: one adapter per family.

A live model (``service.model.live``) holds one of these beside its estimator: the adapter turns
the request's labels into the estimator's targets once (class indices by the library's label
rule, ``core.labels``; values for regression), scores validated batches and learns them with
progressive validation (every example scored before it is learned) by the estimator's
``learn_batch``, which takes the validated batch and those targets as they are, for

- ``binary``: two classes over a score (linear PA, DoS, the perceptrons, binary PQR);
- ``regression``: PQR with real-valued labels;
- ``reduction``: more than two classes by one-vs-one or one-vs-rest binary models;
- ``multi-output``: one mofm model over all classes;
- ``ordinal``: the McRank reduction of a mofm model over increasing levels;
- ``batch``: the ellipsoidal classifier, fitted by the worker on a window of feedback.

Adapters hold no learned state: the estimator and the refit window are passed in (a refit
replaces the estimator).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from core.base import Estimator, PartialBatchError, Steps
from core.features import CSRBatch
from core.labels import LabelMap, UnknownLabelError
from core.mofm import Reservoir
from service.exceptions import InvalidRequest
from service.model.kinds import Plan


class Learned(NamedTuple):
    """What learning a batch gave, per example: the prediction before the update (class
    index, or value), the loss, whether the model changed, whether the prediction was right,
    and the squared error (None: classification)."""

    predicted: Any
    losses: Any
    aggressive: Any
    correct: Any
    squared: Any = None


def _sigmoid(scores: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * scores))  # overflow-free logistic


def _finite(scores: np.ndarray) -> np.ndarray:
    """The scores, or InvalidRequest naming the first row whose score overflows float64."""
    if math.isfinite(scores.item()) if scores.size == 1 else np.isfinite(scores).all():
        return scores  # (one score, the common request: no numpy call)
    row = int(np.argwhere(~np.isfinite(scores))[0][0])
    raise InvalidRequest(
        "invalid_input",
        f"instances[{row}]: the model's score overflows float64 (values too large)",
        {"field": f"instances.{row}"},
    )


class Family:
    """The adapter of one family (module docstring)."""

    #: the loss the progressive metrics report
    loss_kind = "hinge"
    #: whether the progressive metrics report an RMSE (and no accuracy)
    regression = False
    #: whether predictions carry calibrated probabilities
    probabilistic = False

    def __init__(self, plan: Plan):
        self.classes = plan.classes
        self.n_features = plan.n_features
        #: the classes' label map: the library's label rule (``core.labels``) for every
        #: request (none for regression)
        self.label_map = LabelMap(self.classes) if self.classes else None

    def target(self, label, where: str) -> int:
        """The class index of a label (``core.labels``' rule: ``1.0`` is the class ``1``,
        booleans and strings match only their own kind); InvalidRequest if the model has no
        such class."""
        try:
            return self.label_map.index(label)
        except UnknownLabelError as error:
            raise InvalidRequest("unknown_label", f"{where}: {error}", {"field": where}) from None

    def numeric_targets(self, y: np.ndarray) -> np.ndarray:
        """Class indices of numeric labels (svmlight bodies), by the same rule; InvalidRequest
        names the first row whose label is not a class."""
        try:
            return self.label_map.indices(y, y.shape[0])
        except UnknownLabelError as error:
            why = ""
            if error.reason:  # e.g. boolean classes: svmlight cannot carry true / false
                why = (
                    f": {error.reason} (svmlight labels are numbers; send these classes' "
                    "labels in JSON or NDJSON)"
                )
            raise InvalidRequest(
                "unknown_label",
                f"row {error.row}: unknown label {error.label:g}; the model's classes are "
                f"{self.classes}{why}",
                {"row": error.row},
            ) from None

    @property
    def target_dtype(self):
        return np.float64 if self.regression and not isinstance(self, Ordinal) else np.int64

    def predicted_label(self, value):
        """What a feedback response reports as the prediction before the update."""
        return self.classes[int(value)]

    def predict(self, scorer: Estimator, batch: CSRBatch) -> tuple[list, list, list]:
        """Labels, scores and probabilities (None each without) of a validated batch."""
        raise NotImplementedError  # pragma: no cover

    def learn(self, estimator: Estimator, batch: CSRBatch, targets, window) -> Learned:
        """Learn a validated batch in order (``window``: the refit reservoir or None)."""
        raise NotImplementedError  # pragma: no cover

    def evaluate(self, scorer: Estimator, batch: CSRBatch, targets) -> Learned:
        """What learning a validated batch would report for each example (prediction, loss,
        correct), from ``scorer`` without learning: how a variant that does not learn (a
        time average, of the families that have one) is validated progressively."""
        raise NotImplementedError  # pragma: no cover

    def status(self, estimator: Estimator) -> dict[str, Any] | None:
        """Kind-specific state of the live estimator (the separation learners' own)."""
        status = getattr(estimator, "status", None)
        return status() if callable(status) else None

    def window_target(self, label) -> float:
        """A reservoir target as a number (snapshots); ``from_window_target`` inverts it."""
        return float(self.classes.index(label))

    def from_window_target(self, value: float):
        return None if math.isnan(value) else self.classes[int(value)]


class Binary(Family):
    """Two classes over a score: the second class when the score is positive."""

    def __init__(self, plan: Plan):
        super().__init__(plan)
        if plan.kind.name == "pqr":
            self.loss_kind = "log"
        self.probabilistic = plan.kind.name == "pqr" or plan.calibrated

    def predict(self, scorer, batch):
        scores = _finite(scorer.score_batch(batch))
        negative, positive = self.classes
        values = scores.tolist()
        labels = [positive if s > 0 else negative for s in values]
        probabilities = (
            scorer.proba_from_scores(scores).tolist()
            if self.probabilistic
            else [None] * batch.n_rows
        )
        return labels, values, probabilities

    def learn(self, estimator, batch, targets, window):
        if batch.n_rows == 1:  # the common single example, plain Python around learn_one
            target = targets[0]
            step = estimator.learn_one(batch.row(0), 1.0 if target == 1 else -1.0)
            label = 1 if step.score > 0 else 0
            return Learned([label], [float(step.loss)], [bool(step.aggressive)], [label == target])
        steps = estimator.learn_batch(batch, targets)  # predicted: class indices
        return Learned(steps.predicted, steps.losses, steps.aggressive, steps.predicted == targets)

    def evaluate(self, scorer, batch, targets):
        if batch.n_rows == 1:  # the common single example: no batch kernel
            try:
                score = scorer.score_row(*batch.row(0))
            except ValueError:  # (an overflow: refused by learning as well)
                score = math.nan
            target = int(targets[0])
            label = 1 if score > 0 else 0
            y = np.array([1.0 if target == 1 else -1.0])
            with np.errstate(over="ignore", invalid="ignore"):
                loss = float(scorer.losses_from_scores(np.array([score]), y)[0])
            return Learned([label], [loss], None, [label == target])
        with np.errstate(over="ignore", invalid="ignore"):  # (refused by learning as well)
            scores = scorer.score_batch(batch)
        predicted = (scores > 0).astype(np.int64)
        losses = scorer.losses_from_scores(scores, np.where(targets == 1, 1.0, -1.0))
        return Learned(predicted, losses, None, predicted == targets)


class Regression(Family):
    """Real-valued labels (PQR): the score is the prediction."""

    loss_kind = "squared"
    regression = True

    def target(self, label, where: str) -> float:
        if isinstance(label, bool) or not isinstance(label, int | float):
            raise InvalidRequest(
                "invalid_label",
                f"{where}: a regression label must be a number, got {label!r}",
                {"field": where},
            )
        try:
            value = float(label)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            raise InvalidRequest(
                "invalid_label",
                f"{where}: a regression label must be a finite float64, got {label!r:.40}",
                {"field": where},
            )
        return value

    def numeric_targets(self, y: np.ndarray) -> np.ndarray:
        return y

    def predicted_label(self, value):
        return float(value)

    def predict(self, scorer, batch):
        scores = _finite(scorer.score_batch(batch)).tolist()
        return scores, scores, [None] * batch.n_rows

    def learn(self, estimator, batch, targets, window):
        if batch.n_rows == 1:
            step = estimator.learn_one(batch.row(0), float(targets[0]))
            error = (step.score - float(targets[0])) ** 2
            return Learned(
                [step.score], [float(step.loss)], [bool(step.aggressive)], [False], [error]
            )
        steps = estimator.learn_batch(batch, targets)
        return Learned(
            steps.scores,
            steps.losses,
            steps.aggressive,
            np.zeros(batch.n_rows, dtype=bool),
            (steps.scores - targets) ** 2,
        )


class Reduction(Family):
    """More than two classes by one-vs-one or one-vs-rest binary models (hinge loss summed
    over the binary models that learned); class probabilities from calibrated binary models
    (one-vs-rest normalised, one-vs-one by pairwise coupling).

    A batch is learned by one ``learn_batch`` whose steps carry the class predicted just
    before each example is learned (one-vs-one: ``progressive=True``, see
    ``core.one_vs_one``), and predicted from one scoring of the binary models
    (``decide_batch``)."""

    def __init__(self, plan: Plan):
        super().__init__(plan)
        self.probabilistic = plan.calibrated
        self.options = {"progressive": True} if plan.multiclass == "ovo" else {}

    def predict(self, scorer, batch):
        with np.errstate(over="ignore", invalid="ignore"):  # (an overflow is refused next)
            winners, scores, model_scores = scorer.decide_batch(batch)
        scores = _finite(np.asarray(scores, dtype=np.float64))
        probabilities = (
            np.asarray(scorer.proba_from_model_scores(model_scores)).tolist()
            if self.probabilistic
            else [None] * batch.n_rows
        )
        labels = [self.classes[k] for k in winners.tolist()]
        return labels, scores.tolist(), probabilities

    def learn(self, estimator, batch, targets, window):
        n = batch.n_rows
        if n == 1:  # the common single example, plain Python around learn_one
            step = estimator.learn_one(batch.row(0), self.classes[targets[0]])
            predicted = np.array([self.classes.index(step.predicted)])
            return Learned(
                predicted, [float(step.loss)], [step.n_aggressive > 0], predicted == targets
            )
        steps = estimator.learn_batch(batch, targets, **self.options)
        return Learned(steps.predicted, steps.losses, steps.aggressive, steps.predicted == targets)

    def evaluate(self, scorer, batch, targets):
        with np.errstate(over="ignore", invalid="ignore"):  # (refused by learning as well)
            winners, _, model_scores = scorer.decide_batch(batch)
            losses = scorer.losses_from_model_scores(model_scores, targets)
        return Learned(winners, losses, None, winners == targets)


class MultiOutput(Family):
    """One mofm model over all classes, learned by (Ada)SGD steps and offered to the refit
    window; probabilities with the softmax and logistic losses."""

    def __init__(self, plan: Plan):
        super().__init__(plan)
        self.loss_kind = plan.params["loss"]
        self.probabilistic = self.loss_kind in ("softmax", "logistic")
        self.refit_every = plan.params["reservoir_refit_every"]

    def predict(self, scorer, batch):
        scores = _finite(np.asarray(scorer.score_batch(batch), dtype=np.float64))
        labels = scorer.predict_from_scores(scores)
        labels = labels.tolist() if isinstance(labels, np.ndarray) else list(labels)
        probabilities = (
            np.asarray(scorer.proba_from_scores(scores)).tolist()
            if self.probabilistic
            else [None] * batch.n_rows
        )
        return labels, scores.tolist(), probabilities

    def _steps(self, estimator, batch, targets, window) -> Steps:
        """One (Ada)SGD step per example, in order (``learn_batch``), each learned example
        then offered to the refit window (those before a refused one too)."""
        try:
            steps = estimator.learn_batch(batch, targets)
        except PartialBatchError as error:
            self._offer(window, batch, targets, len(error.learned))
            raise
        self._offer(window, batch, targets, batch.n_rows)
        return steps

    def _offer(self, window, batch: CSRBatch, targets, n: int) -> None:
        """The first ``n`` examples of a batch, with their labels, to the refit window."""
        if window is not None:
            for i in range(n):
                window.add(batch.row(i), self.classes[int(targets[i])])

    def learn(self, estimator, batch, targets, window):
        steps = self._steps(estimator, batch, targets, window)  # predicted: class indices
        return Learned(steps.predicted, steps.losses, steps.aggressive, steps.predicted == targets)

    def status(self, estimator):
        model = estimator.model_ if isinstance(self, Ordinal) else estimator
        return {"active_basis": int(getattr(model, "n_active_", 0))}


class Ordinal(MultiOutput):
    """The McRank reduction over increasing levels: predicts the expected relevance;
    "correct" means its nearest level is the label; the squared error is kept."""

    regression = True  # accuracy by nearest level, and an RMSE

    def __init__(self, plan: Plan):
        super().__init__(plan)
        self.levels = np.asarray(self.classes, dtype=np.float64)

    def predicted_label(self, value):
        return float(value)

    def learn(self, estimator, batch, targets, window):
        steps = self._steps(estimator, batch, targets, window)
        # the expected relevance before each update, from P(y <= level) = sigmoid(o(x))
        predicted = estimator.expected_relevance(_sigmoid(steps.scores))
        values = self.levels[targets.astype(np.int64)]
        nearest = np.abs(predicted[:, None] - self.levels[None, :]).argmin(axis=1)
        losses = steps.losses
        return Learned(predicted, losses, losses > 0, nearest == targets, (predicted - values) ** 2)


class Batch(Family):
    """A batch model (the ellipsoidal classifier): each example is scored by the last fit
    (the loss is the 0/1 error) and kept in the window for the next; nothing is updated."""

    loss_kind = "zero_one"

    def predict(self, scorer, batch):
        scores = _finite(scorer.score_batch(batch))
        negative, positive = self.classes
        labels = [positive if s > 0 else negative for s in scores.tolist()]
        return labels, scores.tolist(), [None] * batch.n_rows

    def learn(self, estimator, batch, targets, window):
        predicted = (estimator.score_batch(batch) > 0).astype(np.int64)
        for i in range(batch.n_rows):
            window.add(batch.row(i), 1.0 if targets[i] == 1 else -1.0)
        correct = predicted == targets
        return Learned(
            predicted, (~correct).astype(np.float64), np.zeros(batch.n_rows, bool), correct
        )

    def status(self, estimator):
        return {
            "fitted_on": int(estimator.n_fit_),
            "separable": bool(estimator.separable_),
            "t": float(estimator.t_),
        }

    def window_target(self, label) -> float:
        return float(label)

    def from_window_target(self, value: float):
        return float(value)


FAMILIES: dict[str, type[Family]] = {
    "binary": Binary,
    "regression": Regression,
    "reduction": Reduction,
    "multi-output": MultiOutput,
    "ordinal": Ordinal,
    "batch": Batch,
}


def reservoir_of(plan: Plan) -> Reservoir | None:
    """The refit window of a plan whose kind is refitted by the worker (None: no refits)."""
    if not plan.params.get("reservoir_refit_every"):
        return None
    return Reservoir(plan.params["reservoir_size"], plan.n_features, policy="window")
