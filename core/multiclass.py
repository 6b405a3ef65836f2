"""Multiclass reductions of binary classifiers: one-vs-one and one-vs-rest.

Both wrap any binary model of ``core.base`` (labels -1 / +1) and keep one clone of it per
binary problem. Section 4 of Saul 2021 (``../shared/papers/dos-passive-aggressive.txt``)
computes ten-way error rates on handwritten digits "from the majority votes of
45 = (10 * 9) / 2 pairwise classifiers": that is :class:`OneVsOne`.

An example is validated once (``core.features.as_row`` / ``as_batch``) and its label is mapped
to a class index once; the sub-models then run the protocol's hooks for validated input
(``learn_row``, ``score_row``, ``learn_rows``, ``score_batch``) on it, so a one-vs-one
``learn_one`` over 10 classes does not validate the same example 45 times. Everything that can
make a sub-model refuse an example (a bad row or label, a squared norm or score that overflows
float64) is checked before the first sub-model learns, so a bad example changes nothing.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from core import stacking
from core.base import BinaryClassifier, Estimator, PartialBatchError, Step, Steps
from core.calibration import Calibrated
from core.config import FLOAT, INDEX
from core.features import CSRBatch, as_batch, as_row, first_overflowing_row
from core.labels import LabelMap

__all__ = ["OneVsOne", "OneVsRest", "OrdinalMcRank"]

Label = Hashable


class _Reduction:
    """Parameter checks, label mapping and prediction plumbing shared by the reductions.

    A mixin rather than an ``Estimator`` subclass so that it is not registered as a model
    kind of its own (``core.registry.MODEL_KINDS``).
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
        _check_squared_norms(CSRBatch(np.array([0, len(values)], dtype=INDEX), indices, values))
        bad = [k for k in learners if not np.isfinite(model_scores[k])]
        if bad:
            raise ValueError(
                f"the example's score overflows float64 in binary model {bad[0]} "
                f"({self._describe(bad[0])}); no model was updated"
            )

    def _describe(self, k: int) -> str:  # pragma: no cover
        raise NotImplementedError


class OneVsOne(_Reduction, Estimator):
    r"""One-vs-one multiclass classifier: majority vote of pairwise binary classifiers.

    For ``n`` classes, one clone of ``base`` per unordered pair ``(i, j)``, ``i < j`` in the
    order of ``classes`` (``n (n - 1) / 2`` of them: the 45 pairwise classifiers of section 4
    of Saul 2021 for the 10 digits). Pair ``(i, j)`` learns only from examples of classes i
    and j, with label +1 for ``classes[i]`` and -1 for ``classes[j]``.

    **Prediction.** With ``f_ij(x)`` the score of pair (i, j), class i gets the pair's vote
    when ``f_ij(x) > 0`` and class j otherwise (the binary models' own rule), and

        votes_c = #{d : c wins pair {c, d}},      confidence_c = sum_{d > c} f_cd - sum_{d < c} f_dc

    (the scores signed towards c, over all pairs of c). The prediction is the class with the
    most votes; ties go to the highest confidence among the tied classes, then to the lowest
    class index. A fresh linear model scores 0 everywhere, so every pair votes for its second
    class and the last class wins.

    ``learn_many`` splits a batch per pair, preserving order, and hands each pair its
    sub-batch in one kernel call: pairs are independent, so the model is bit-identical to the
    ``learn_one`` loop's.

    Parameters
    ----------
    base : BinaryClassifier
        The binary model (labels -1/+1) cloned for every pair; it is not trained itself.
    classes : list
        At least two distinct hashable labels (``core.labels``); stored as given. Their order
        fixes the pairs and breaks the last ties.

    Attributes
    ----------
    classes_ : tuple
        ``classes`` as a tuple.
    pairs_ : tuple of (int, int)
        The class indices ``(i, j)`` of each pair, in lexicographic order.
    models_ : list of BinaryClassifier
        The pairwise models, ``models_[p]`` for ``pairs_[p]``; their arrays appear in the
        state as ``"{p}.{name}"`` (e.g. ``"0.U_"`` of shape (rank, n_features + 1)).
    n_seen_ : int
        Examples learned.

    Examples
    --------
    >>> from core.dos import DoSClassifier
    >>> model = OneVsOne(base=DoSClassifier(n_features=2, rank=2, seed=0), classes=["a", "b", "c"])
    >>> stream = [([1.0, 0.0], "a"), ([0.0, 1.0], "b"), ([-1.0, -1.0], "c")] * 3
    >>> steps = [model.learn_one(x, y) for x, y in stream]
    >>> model.pairs_, model.predict_one([0.9, 0.1]), list(model.predict_many([[0.1, 0.9]]))
    (((0, 1), (0, 2), (1, 2)), 'a', ['b'])
    >>> votes, confidence = model.decision_one([-1.0, -1.0])
    >>> votes
    array([0, 1, 2])
    """

    def __init__(self, *, base: BinaryClassifier, classes: list[Label]):
        self.base = base
        self.classes = classes
        self._setup(base, classes)
        n_classes = len(self.classes_)
        self.pairs_ = tuple((i, j) for i in range(n_classes) for j in range(i + 1, n_classes))
        self._first = np.array([i for i, _ in self.pairs_], dtype=INDEX)
        self._second = np.array([j for _, j in self.pairs_], dtype=INDEX)
        #: pairs_of[c]: the pairs that learn from class c, in increasing order
        self._pairs_of = [
            [p for p, (i, j) in enumerate(self.pairs_) if c in (i, j)] for c in range(n_classes)
        ]
        self.models_ = [base.clone() for _ in self.pairs_]

    def _describe(self, k: int) -> str:
        i, j = self.pairs_[k]
        return f"pair {self.classes_[i]!r} vs {self.classes_[j]!r}"

    # -- votes ---------------------------------------------------------------------------
    def _decide(self, pair_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Votes (int64) and confidences (float64), shape (n_rows, n_classes)."""
        n_rows = pair_scores.shape[0]
        n_classes = len(self.classes_)
        offsets = (np.arange(n_rows, dtype=INDEX) * n_classes)[:, None]
        winners = np.where(pair_scores > 0.0, self._first, self._second) + offsets
        votes = np.bincount(winners.ravel(), minlength=n_rows * n_classes)
        # bincount adds its weights in input order: each confidence sums the same terms in the
        # same order whatever the number of rows, so predict_one and predict_many agree exactly
        towards = np.concatenate(
            [(self._first + offsets).ravel(), (self._second + offsets).ravel()]
        )
        signed = np.concatenate([pair_scores.ravel(), -pair_scores.ravel()])
        confidence = np.bincount(towards, weights=signed, minlength=n_rows * n_classes)
        shape = (n_rows, n_classes)
        return votes.reshape(shape).astype(INDEX), confidence.reshape(shape)

    def _winners(self, pair_scores: np.ndarray) -> np.ndarray:
        return self._winners_of(*self._decide(pair_scores))

    def _outputs(self, pair_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        votes, confidence = self._decide(pair_scores)
        return self._winners_of(votes, confidence), _squash(votes, confidence)

    def _winners_of(self, votes: np.ndarray, confidence: np.ndarray) -> np.ndarray:
        tied = votes == votes.max(axis=1, keepdims=True)
        # argmax returns the first maximum: the lowest class index among equal confidences
        winners = np.argmax(np.where(tied, confidence, -np.inf), axis=1)
        outside = ~tied[np.arange(len(winners)), winners]  # only if confidences are -inf
        winners[outside] = np.argmax(tied[outside], axis=1)
        return winners

    def _probabilities(self, pair_scores: np.ndarray) -> np.ndarray:
        """Pairwise coupling (Wu, Lin and Weng 2004, method 2, as in libsvm): with
        ``r_ij = P(i | i or j, x)`` from pair (i, j)'s calibrated model, ``p`` minimises
        ``sum_i sum_{j != i} (r_ji p_i - r_ij p_j)^2`` subject to ``sum_i p_i = 1``, the
        solution of ``[[Q, 1], [1^T, 0]] [p; b] = [0; 1]`` with ``Q_ii = sum_{j != i} r_ji^2``
        and ``Q_ij = -r_ji r_ij`` (non-negative by their Theorem 2; rounding is clipped)."""
        n_rows, n_classes = pair_scores.shape[0], len(self.classes_)
        first = self._binary_probabilities(pair_scores)  # r_ij for each pair (i, j), i < j
        r = np.zeros((n_rows, n_classes, n_classes))
        r[:, self._first, self._second] = first
        r[:, self._second, self._first] = 1.0 - first
        system = np.zeros((n_rows, n_classes + 1, n_classes + 1))
        rt = np.swapaxes(r, 1, 2)  # rt[i, j] = r_ji
        system[:, :n_classes, :n_classes] = -rt * r
        diagonal = np.arange(n_classes)
        system[:, diagonal, diagonal] = np.sum(rt * rt, axis=2)
        system[:, :n_classes, n_classes] = 1.0
        system[:, n_classes, :n_classes] = 1.0
        right = np.zeros((n_rows, n_classes + 1))
        right[:, n_classes] = 1.0
        p = np.linalg.solve(system, right[..., None])[..., 0][:, :n_classes]
        p = np.clip(p, 0.0, None)
        return p / p.sum(axis=1, keepdims=True)

    def decision_one(self, x) -> tuple[np.ndarray, np.ndarray]:
        """``(votes, confidence)`` of one example, each of shape (n_classes,)."""
        indices, values = as_row(x, self.n_features)
        votes, confidence = self._decide(self._model_scores_row(indices, values)[None, :])
        return votes[0], confidence[0]

    def decision_many(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(votes, confidence)`` of a batch, each of shape (n_rows, n_classes)."""
        return self._decide(self._model_scores_many(X))

    def score_one(self, x) -> np.ndarray:
        """``score_many`` of one example, shape (n_classes,)."""
        votes, confidence = self.decision_one(x)
        return _squash(votes, confidence)

    def score_many(self, X) -> np.ndarray:
        """``votes + confidence / (3 (|confidence| + 1))``, shape (n_rows, n_classes).

        The added term lies in (-1/3, 1/3) and increases with the confidence, so it orders
        classes with equal votes without reordering the votes (scikit-learn's one-vs-one
        ``decision_function`` does the same). Its row-wise argmax is the prediction unless two
        tied confidences are too close for float64 to tell apart after the squashing;
        ``predict_*`` decide from the exact ``decision_many``.
        """
        votes, confidence = self.decision_many(X)
        return _squash(votes, confidence)

    # -- learning --------------------------------------------------------------------------
    def learn_one(self, x, y) -> Step:
        """Learn one example: the ``n_classes - 1`` pairs of its class update, the others not.

        Returns a :class:`core.base.Step` whose ``score`` is ``score_one(x)`` before the update,
        ``predicted`` the class predicted then, ``loss`` the sum of the hinge losses of the
        pairs that learned, and ``n_aggressive`` how many of them updated.
        """
        target = self._class_index(y)
        indices, values = as_row(x, self.n_features)
        pair_scores = self._model_scores_row(indices, values)
        loss, n_aggressive = self._learn_scored(indices, values, target, pair_scores)
        votes, confidence = self._decide(pair_scores[None, :])
        predicted = self._winners_of(votes, confidence)[0]
        score = _squash(votes, confidence)[0]
        return Step(score, loss, n_aggressive > 0, n_aggressive, self.classes_[predicted])

    def _learn_scored(self, indices, values, target: int, pair_scores) -> tuple[float, int]:
        """Learn one validated row of class ``target`` whose pair scores are known (checked
        first: a refused row changes nothing); its summed loss and aggressive steps."""
        learners = self._pairs_of[target]
        self._check_learnable_row(indices, values, pair_scores, learners)
        loss, n_aggressive = 0.0, 0
        for p in learners:
            label = 1.0 if self.pairs_[p][0] == target else -1.0
            step = self.models_[p].learn_row(indices, values, label)
            loss += step.loss
            n_aggressive += step.aggressive
        self.n_seen_ += 1
        return loss, n_aggressive

    def learn_many(self, X, y, *, progressive: bool = False) -> Steps:
        """Learn a batch in order.

        By default the batch is learned pair by pair, bit-identical to the ``learn_one`` loop;
        the :class:`core.base.Steps` hold its losses and ``aggressive_counts``, no ``scores``
        nor ``predicted``: the votes of the pairs that do not learn from an example are never
        computed at that example's time (call ``predict_many`` first for the batch-start
        predictions).

        ``progressive=True`` also scores every example by every pair just before it is learned
        (progressive validation, as ``learn_one``): the Steps then carry ``scores``
        (``score_one`` before each update) and ``predicted``. With DoS bases (calibrated or
        not) whose parameters stay in the caches, the pairs learn one after the other, each
        scoring every row and learning its two classes' (``core.stacking.learn_pair_by_pair``):
        the ``learn_one`` loop's arithmetic exactly. Other DoS and linear PA bases take one
        product per block of rows against all pairs and a Gram correction after each update
        (``core.kernels.multiclass``), equal to the ``learn_one`` loop to rounding; other
        bases run the ``learn_one`` loop.

        Inputs, labels and squared norms are checked before any pair learns. A score that
        overflows float64 in the middle of a batch (it depends on the state, so it cannot be
        checked beforehand) raises ``ValueError`` after some pairs have learned, as it does for
        the binary models' ``learn_many`` (progressive: a ``PartialBatchError`` after the rows
        before it, each learned by all its pairs).
        """
        batch = as_batch(X, self.n_features)
        targets = self._class_indices(y, batch.n_rows)
        _check_squared_norms(batch)
        if progressive:
            return self._learn_progressive(batch, targets)
        losses = np.zeros(batch.n_rows)
        n_aggressive = np.zeros(batch.n_rows, dtype=INDEX)
        for p, (i, j) in enumerate(self.pairs_):
            rows = np.flatnonzero((targets == i) | (targets == j))
            if rows.size == 0:
                continue
            labels = np.where(targets[rows] == i, 1.0, -1.0)
            try:
                steps = self.models_[p].learn_rows(_take_rows(batch, rows), labels)
            except ValueError as error:
                raise ValueError(f"{self._describe(p)}: {error}; earlier pairs learned") from None
            losses[rows] += steps.losses
            n_aggressive[rows] += steps.aggressive
        self.n_seen_ += batch.n_rows
        return Steps(None, losses, n_aggressive > 0, n_aggressive)

    def _learn_progressive(self, batch: CSRBatch, targets: np.ndarray) -> Steps:
        """``learn_many(progressive=True)`` of a checked batch: pair by pair when the pairs
        are small DoS models (``stacking.learn_pair_by_pair``), else by block products
        (``stacking.learn_by_blocks``), else by the ``learn_one`` loop."""
        if batch.n_rows < stacking.STACK_MIN_ROWS:
            return self._learn_loop(batch, targets)
        learned = stacking.learn_pair_by_pair(self.models_, self.pairs_, batch, targets)
        if learned is not None:
            scores, nus = learned
            losses, counts = self._pair_losses(targets, scores, nus)
            done = batch.n_rows
        else:
            learned = stacking.learn_by_blocks(
                self.models_, batch, self.n_features, targets, self._pairs_of, self._first
            )
            if learned is None:
                return self._learn_loop(batch, targets)
            scores, losses, counts, done = learned
        self._calibrate(targets[:done], scores[:done])
        self.n_seen_ += done
        steps = self._progressive_steps(scores[:done], losses[:done], counts[:done])
        if done < batch.n_rows:
            pair = next(
                p for p in self._pairs_of[targets[done]] if not np.isfinite(scores[done, p])
            )
            raise PartialBatchError(
                f"row {done}: the example's score overflows float64 in binary model {pair} "
                f"({self._describe(pair)}); {done} earlier rows were learned",
                steps,
            )
        return steps

    def _calibrate(self, targets: np.ndarray, scores: np.ndarray) -> None:
        """Calibrated pairs: each calibrator learns its pair's scores of the rows it learned,
        in order (``scores``: every pair's, before each row was learned)."""
        for p, model in enumerate(self.models_):
            if type(model) is Calibrated:
                i, j = self.pairs_[p]
                rows = np.flatnonzero((targets == i) | (targets == j))
                model.calibrator_.learn_many(scores[rows, p], targets[rows] == i)

    def _pair_losses(self, targets, scores, nus) -> tuple[np.ndarray, np.ndarray]:
        """Each row's hinge losses summed over the pairs that learned it, in ``learn_one``'s
        order, and how many of them updated (nu > 0)."""
        losses = np.zeros(len(targets))
        counts = np.zeros(len(targets), dtype=INDEX)
        for c, learners in enumerate(self._pairs_of):
            rows = np.flatnonzero(targets == c)
            for p in learners:
                y = 1.0 if self._first[p] == c else -1.0
                losses[rows] += np.maximum(0.0, 1.0 - y * scores[rows, p])
                counts[rows] += nus[rows, p] != 0.0
        return losses, counts

    def _progressive_steps(self, pair_scores, losses, counts) -> Steps:
        votes, confidence = self._decide(pair_scores)
        predicted = self._labels[self._winners_of(votes, confidence)]
        return Steps(_squash(votes, confidence), losses, counts > 0, counts, predicted)

    def _learn_loop(self, batch: CSRBatch, targets: np.ndarray) -> Steps:
        """The ``learn_one`` loop over a checked batch (bases without a batched progressive
        path)."""
        n_rows = batch.n_rows
        scores = np.zeros((n_rows, len(self.models_)))
        losses = np.zeros(n_rows)
        counts = np.zeros(n_rows, dtype=INDEX)
        for row in range(n_rows):
            indices, values = batch.row(row)
            scores[row] = self._model_scores_row(indices, values)
            try:
                losses[row], counts[row] = self._learn_scored(
                    indices, values, targets[row], scores[row]
                )
            except ValueError as error:
                raise PartialBatchError(
                    f"row {row}: {error}",
                    self._progressive_steps(scores[:row], losses[:row], counts[:row]),
                ) from None
        return self._progressive_steps(scores, losses, counts)


class OneVsRest(_Reduction, Estimator):
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
        :meth:`OneVsOne.learn_many` for what is checked before any model learns."""
        batch = as_batch(X, self.n_features)
        targets = self._class_indices(y, batch.n_rows)
        _check_squared_norms(batch)
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
        predicted = self._labels[self._winners(scores)]
        return Steps(scores, losses, n_aggressive > 0, n_aggressive, predicted)


def _check_squared_norms(batch: CSRBatch) -> None:
    """Refuse a batch with a row whose squared norm ``1 + sum_j x_j^2`` overflows float64, as
    the binary kernels would, before any sub-model learns from it (summed from 1.0 in the
    kernels' order: an upper bound of the no-intercept sum, since rounding is monotone)."""
    row = first_overflowing_row(batch, 1.0)
    if row >= 0:
        where = f"row {row}: " if batch.n_rows > 1 else ""
        raise ValueError(f"{where}the example's squared norm overflows float64")


def _take_rows(batch: CSRBatch, rows: np.ndarray) -> CSRBatch:
    """The sub-batch of the given rows (increasing), still a valid CSRBatch."""
    lengths = batch.indptr[rows + 1] - batch.indptr[rows]
    indptr = np.zeros(rows.size + 1, dtype=INDEX)
    np.cumsum(lengths, out=indptr[1:])
    positions = np.repeat(batch.indptr[rows] - indptr[:-1], lengths) + np.arange(
        indptr[-1], dtype=INDEX
    )
    return CSRBatch(indptr, batch.indices[positions], batch.values[positions])


def _squash(votes: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    return votes + confidence / (3.0 * (np.abs(confidence) + 1.0))


class OrdinalMcRank(Estimator):
    r"""Ordinal regression by the McRank reduction to binary outputs learned jointly (section 6.5
    of Blondel et al. 2017, ``../shared/papers/multi-output-polynomial-networks.txt``; Li, Burges
    and Wu 2007).

    With relevance levels ``r_1 < ... < r_m``, example (x, y) gets the binary targets
    ``y_c = +1 if y <= r_c else -1``; one multi-output model (``base``, e.g.
    ``core.mofm.MultiOutputPN`` with ``loss="logistic"``: a shared basis, one output per
    threshold) learns them all, and the prediction is the expected relevance

        y_hat = sum_c r_c [P(y <= r_c | x) - P(y <= r_{c-1} | x)]
              = r_m - sum_{c < m} (r_{c+1} - r_c) P(y <= r_c | x),

    with the conventions ``P(y <= r_0) = 0`` and ``P(y <= r_m) = 1``. The paper trains a classifier
    for every c in [m]; the last one learns a constant (every y is <= r_m) that the convention
    fixes exactly, so we train the ``m - 1`` informative outputs only (``base.n_outputs`` must be
    ``len(levels) - 1``). The learned P(y <= r_c) need not increase with c; the telescoped sum
    keeps the prediction in [r_1, r_m] anyway, and ``predict_proba_*`` monotonise them (running
    maximum) before taking differences.

    Parameters
    ----------
    base : Estimator
        A multi-output model with ``n_outputs = len(levels) - 1`` that learns target vectors in
        {-1, +1} (``learn_one`` / ``learn_many`` / ``fit``) and gives P(y_c = +1 | x) by
        ``predict_proba_one`` / ``predict_proba_many``; cloned, not trained itself.
    levels : list of numbers
        The relevance levels, strictly increasing (e.g. ``[1, 2, 3, 4, 5]`` for star ratings).

    Attributes
    ----------
    model_ : Estimator
        The multi-output model; its arrays appear in the state as ``"model.{name}"`` (e.g.
        ``"model.V_"`` of shape (n_basis, len(levels) - 1)).
    n_seen_ : int
        Examples learned online.

    Examples
    --------
    >>> import numpy as np
    >>> from core.mofm import MultiOutputPN
    >>> base = MultiOutputPN(n_features=2, n_outputs=2, loss="logistic", n_basis=4, tau=20.0)
    >>> model = OrdinalMcRank(base=base, levels=[1, 2, 3])
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(300, 2))
    >>> y = 1 + np.digitize(X[:, 0] ** 2 + X[:, 1] ** 2, [0.4, 1.0])  # rings: 1, 2, 3
    >>> model.fit(X, y).predict_many([[0.0, 0.0], [0.9, 0.9]]).round(1)
    array([1.1, 2.8])
    >>> model.targets([1, 2, 3])
    array([[ 1.,  1.],
           [-1.,  1.],
           [-1., -1.]])
    """

    _scalars = ("n_seen_",)

    def __init__(self, *, base: Estimator, levels: list):
        self.base = base
        self.levels = levels
        if not isinstance(base, Estimator):
            raise ValueError(f"base must be a model of core, got {base!r}")
        if not isinstance(levels, list | tuple) or len(levels) < 2:
            raise ValueError(f"levels must be a list of at least 2 numbers, got {levels!r}")
        if any(isinstance(r, bool) or not isinstance(r, int | float | np.number) for r in levels):
            raise ValueError(f"levels must be numbers, got {levels!r}")
        self._levels = np.asarray(levels, dtype=float)
        if not (np.all(np.isfinite(self._levels)) and np.all(np.diff(self._levels) > 0)):
            raise ValueError(f"levels must be finite and strictly increasing, got {levels!r}")
        n_outputs = getattr(base, "n_outputs", None)
        if n_outputs != len(levels) - 1:
            raise ValueError(
                f"base must have n_outputs = len(levels) - 1 = {len(levels) - 1} (one output "
                f"per threshold y <= r_c, c < m), got {n_outputs!r}"
            )
        for method in ("learn_one", "learn_many", "fit", "predict_proba_one", "predict_proba_many"):
            if not callable(getattr(base, method, None)):
                raise ValueError(f"base must have a {method} method")
        self._index = {float(r): k for k, r in enumerate(self._levels)}
        self._widths = np.diff(self._levels)
        # the targets of each level: row k is y_c = +1 if r_k <= r_c (c < m) else -1
        m = len(levels)
        self._targets = np.where(np.arange(m)[:, None] <= np.arange(m - 1)[None, :], 1.0, -1.0)
        self.model_ = base.clone()
        self.n_seen_ = 0

    @property
    def n_features(self) -> int:
        """Dimension of the inputs (the base model's)."""
        return self.base.n_features

    def _children(self) -> list[tuple[str, Estimator]]:
        return [("model", self.model_)]

    # -- targets ---------------------------------------------------------------------------
    def _level(self, y) -> int:
        valid = not isinstance(y, bool | np.bool_) and isinstance(y, int | float | np.number)
        k = self._index.get(float(y)) if valid and np.isfinite(y) else None
        if k is None:
            raise ValueError(f"unknown relevance {y!r}: the levels are {list(self.levels)}")
        return k

    def targets(self, y) -> np.ndarray:
        """The binary target vectors of a batch of relevances, shape (n, m - 1)."""
        if isinstance(y, str | bytes | dict):
            raise ValueError("relevances of a batch must be a sequence, one per row")
        try:
            labels = list(y)
        except TypeError:
            raise ValueError("relevances of a batch must be a sequence, one per row") from None
        indices = np.empty(len(labels), dtype=INDEX)
        for i, label in enumerate(labels):
            try:
                indices[i] = self._level(label)
            except ValueError as error:
                raise ValueError(f"relevance at row {i}: {error}") from None
        return self._targets[indices]

    # -- learning ----------------------------------------------------------------------------
    def learn_one(self, x, y):
        """Learn one example; returns the base model's step (its scores before the update)."""
        step = self.model_.learn_one(x, self._targets[self._level(y)])
        self.n_seen_ += 1
        return step

    def learn_many(self, X, y):
        """Learn a batch in order (bit-identical to the ``learn_one`` loop); relevances are
        checked before the base model (which checks the rows) learns anything."""
        targets = self.targets(y)
        steps = self.model_.learn_many(X, targets)
        self.n_seen_ += targets.shape[0]
        return steps

    def fit(self, X, y, **kwargs) -> OrdinalMcRank:
        """Train the base model in batch (``base.fit(X, targets, **kwargs)``); returns self."""
        self.model_.fit(X, self.targets(y), **kwargs)
        self.n_seen_ = 0
        return self

    def refit(self, X, y, **kwargs) -> OrdinalMcRank:
        """A new reduction whose model is ``model_.refit(X, targets, **kwargs)`` (this one is
        unchanged; see ``core.mofm.Reservoir`` for the swap)."""
        new = self.clone()
        new.model_ = self.model_.refit(X, self.targets(y), **kwargs)
        return new

    # -- prediction ---------------------------------------------------------------------------
    def score_one(self, x) -> np.ndarray:
        """P(y <= r_c | x) for c < m, shape (m - 1,)."""
        return np.asarray(self.model_.predict_proba_one(x))

    def score_many(self, X) -> np.ndarray:
        """P(y <= r_c | x_i) for c < m, shape (n_rows, m - 1)."""
        return np.asarray(self.model_.predict_proba_many(X)).reshape(-1, len(self.levels) - 1)

    def expected_relevance(self, cumulative: np.ndarray) -> np.ndarray:
        """E[y] = r_m - sum_c P(y <= r_c) (r_{c+1} - r_c) from the cumulative
        probabilities P(y <= r_c), shape (..., m - 1)."""
        return self._levels[-1] - np.sum(cumulative * self._widths, axis=-1)

    def predict_one(self, x) -> float:
        """The expected relevance of x."""
        return float(self.expected_relevance(self.score_one(x)[None, :])[0])

    def predict_many(self, X) -> np.ndarray:
        """The expected relevances of a batch, shape (n_rows,)."""
        return self.expected_relevance(self.score_many(X))

    def _distribution(self, cumulative: np.ndarray) -> np.ndarray:
        monotone = np.maximum.accumulate(cumulative, axis=-1)
        ones = np.ones(monotone.shape[:-1] + (1,))
        return np.diff(np.concatenate([0.0 * ones, monotone, ones], axis=-1), axis=-1)

    def predict_proba_one(self, x) -> np.ndarray:
        """P(y = r_c | x) for every level, shape (m,)."""
        return self._distribution(self.score_one(x))

    def predict_proba_many(self, X) -> np.ndarray:
        """P(y = r_c | x_i) for every level, shape (n_rows, m)."""
        return self._distribution(self.score_many(X))
