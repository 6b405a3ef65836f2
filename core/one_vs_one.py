"""One-vs-one multi-class classifier: the majority vote of pairwise binary classifiers.

Section 4 of Saul 2021 (``../shared/papers/dos-passive-aggressive.txt``) computes ten-way
error rates on handwritten digits "from the majority votes of 45 = (10 * 9) / 2 pairwise
classifiers": that is :class:`OneVsOne`. The plumbing it shares with one-vs-rest is in
:mod:`core.reduction`, its stacked learning paths in :mod:`core.stacking`.
"""

from __future__ import annotations

import numpy as np

from core import stacking
from core.base import Estimator, PartialBatchError, Step, Steps
from core.binary import BinaryClassifier
from core.calibration import Calibrated
from core.config import INDEX
from core.features import CSRBatch, as_row
from core.labels import check_targets
from core.reduction import Label, Reduction, check_squared_norms

__all__ = ["OneVsOne"]


class OneVsOne(Reduction, Estimator):
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
        return super().learn_many(X, y, progressive=progressive)

    def _learn_targets(self, batch: CSRBatch, targets: np.ndarray, progressive=False) -> Steps:
        check_squared_norms(batch)
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

    def losses_from_model_scores(self, model_scores: np.ndarray, targets) -> np.ndarray:
        """Each row's losses summed over the pairs that learn from its class
        (:meth:`core.reduction.Reduction.losses_from_model_scores`)."""
        targets = check_targets(targets, model_scores.shape[0], len(self.classes_))
        losses = np.zeros(len(targets))
        for c, learners in enumerate(self._pairs_of):
            rows = np.flatnonzero(targets == c)
            for p in learners:
                y = np.full(len(rows), 1.0 if self._first[p] == c else -1.0)
                losses[rows] += self.models_[p].losses_from_scores(model_scores[rows, p], y)
        return losses

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
        predicted = self._winners_of(votes, confidence)
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
