"""Ordinal regression by the McRank reduction of relevance levels to binary outputs learned
jointly by one multi-output model (section 6.5 of Blondel et al. 2017).
"""

from __future__ import annotations

import numpy as np

from core.base import Estimator, PartialBatchError
from core.config import INDEX
from core.features import CSRBatch
from core.labels import check_targets

__all__ = ["OrdinalMcRank"]


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
        return self._counted(lambda: self.model_.learn_many(X, targets), targets.shape[0])

    def learn_batch(self, batch: CSRBatch, targets):
        """Learn a batch already validated for this model whose relevances were converted
        once, to their indices in ``levels`` (int, shape (n_rows,), checked): the same model
        and steps (the base model's) as ``learn_many`` with the relevances."""
        targets = check_targets(targets, batch.n_rows, len(self.levels))
        return self._counted(
            lambda: self.model_.learn_batch(batch, self._targets[targets]), batch.n_rows
        )

    def _counted(self, learn, n_rows: int):
        """``learn()``'s steps, the rows it learned counted in ``n_seen_`` (those before a
        row the base model refused part-way too)."""
        try:
            steps = learn()
        except PartialBatchError as error:
            self.n_seen_ += len(error.learned)
            raise
        self.n_seen_ += n_rows
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

    def score_batch(self, batch: CSRBatch) -> np.ndarray:
        """``score_many`` of a batch already validated for this model (``as_batch`` with its
        ``n_features``), without a second validation."""
        cumulative = self.model_.proba_from_scores(self.model_.score_batch(batch))
        return np.asarray(cumulative).reshape(-1, len(self.levels) - 1)

    def predict_from_scores(self, scores) -> np.ndarray:
        """``predict_many`` (the expected relevances) from ``score_batch``'s output."""
        return self.expected_relevance(np.asarray(scores))

    def proba_from_scores(self, scores) -> np.ndarray:
        """``predict_proba_many`` (P(y = r_c | x) per level) from ``score_batch``'s output."""
        return self._distribution(np.asarray(scores))

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
