"""Evaluation metrics: batch functions and progressive-validation accumulators.

- :func:`accuracy`, :func:`rmse`: plain batch metrics.
- :func:`ndcg_at_k`: normalised discounted cumulative gain truncated at k, averaged over
  queries (users), the ranking measure of section 6.5 of the multi-output PN paper
  (``../shared/papers/multi-output-polynomial-networks.txt``, Figure 4) and of McRank (Li,
  Burges and Wu 2007).
- :class:`ProgressiveAccuracy`, :class:`ProgressiveRMSE`: progressive validation (each example
  is scored before the model learns from it), as running totals that a learning loop or the
  service updates one example (or one batch) at a time; ``window`` also keeps the value over
  the last examples.

>>> rmse([1, 2, 3], [1, 2, 5])
1.1547005383792515
>>> round(ndcg_at_k([3, 2, 0], [0.1, 0.9, 0.5], k=2), 4)
0.3374
>>> metric = ProgressiveAccuracy()
>>> metric.update("a", "a"); metric.update("b", "a"); metric.value
0.5
"""

from __future__ import annotations

from collections import deque

import numpy as np

from core.state import state_array, state_count, state_sum

__all__ = [
    "ProgressiveAccuracy",
    "ProgressiveRMSE",
    "accuracy",
    "expected_calibration_error",
    "log_loss",
    "ndcg_at_k",
    "reliability_curve",
    "rmse",
]


def accuracy(y_true, y_pred) -> float:
    """Fraction of equal labels."""
    y_true, y_pred = _pair(y_true, y_pred)
    return float(np.mean(y_true == y_pred)) if y_true.size else float("nan")


def rmse(y_true, y_pred) -> float:
    """Root mean squared error sqrt(mean((y_true - y_pred)^2))."""
    y_true, y_pred = _pair(y_true, y_pred, numeric=True)
    if y_true.size == 0:
        return float("nan")
    diff = y_true - y_pred
    return float(np.sqrt(np.mean(diff * diff)))


def log_loss(probabilities, y_index, eps: float = 1e-15) -> float:
    """Mean negative log-likelihood of the true classes.

    ``probabilities``: shape (n,) for P(positive) of a binary model (``y_index`` 0 or 1) or
    (n, n_classes) (``y_index`` the true class's column); clipped to ``[eps, 1 - eps]``.

    >>> round(log_loss([0.9, 0.2], [1, 0]), 4)
    0.1643
    >>> round(log_loss([[0.7, 0.3], [0.5, 0.5]], [0, 1]), 4)
    0.5249
    """
    p = np.asarray(probabilities, dtype=float)
    y = np.asarray(y_index, dtype=np.int64)
    if p.shape[0] != y.shape[0] or p.ndim not in (1, 2):
        raise ValueError(f"got probabilities of shape {p.shape} for {y.shape[0]} labels")
    if p.ndim == 1:
        p = np.column_stack([1.0 - p, p])
    if np.any((y < 0) | (y >= p.shape[1])):
        raise ValueError("a class index is outside the probabilities' columns")
    chosen = np.clip(p[np.arange(y.shape[0]), y], eps, 1.0 - eps)
    return float(-np.mean(np.log(chosen))) if y.size else float("nan")


def reliability_curve(confidence, correct, n_bins: int = 10):
    """The reliability (calibration) curve: examples binned by predicted probability into
    ``n_bins`` equal-width bins of [0, 1]; per bin the mean predicted probability, the
    observed frequency of the event and the count (empty bins are left out).

    >>> mean, frequency, count = reliability_curve([0.1, 0.15, 0.8, 0.9], [0, 1, 1, 1], 2)
    >>> mean.round(3).tolist(), frequency.tolist(), count.tolist()
    ([0.125, 0.85], [0.5, 1.0], [2, 2])
    """
    confidence = np.asarray(confidence, dtype=float)
    correct = np.asarray(correct, dtype=float)
    if confidence.shape != correct.shape or confidence.ndim != 1:
        raise ValueError("confidence and correct must be 1-D arrays of one length")
    bins = np.minimum((confidence * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins)
    total = np.bincount(bins, weights=confidence, minlength=n_bins)
    hits = np.bincount(bins, weights=correct, minlength=n_bins)
    used = count > 0
    return total[used] / count[used], hits[used] / count[used], count[used]


def expected_calibration_error(confidence, correct, n_bins: int = 10) -> float:
    """``sum_b (n_b / n) |mean confidence_b - frequency_b|`` over the reliability curve's bins.

    >>> round(expected_calibration_error([0.1, 0.15, 0.8, 0.9], [0, 1, 1, 1], 2), 4)
    0.2625
    """
    mean, frequency, count = reliability_curve(confidence, correct, n_bins)
    return float(np.sum(count * np.abs(mean - frequency)) / np.sum(count))


def ndcg_at_k(
    relevance,
    scores,
    k: int,
    groups=None,
    gain: str = "exponential",
) -> float:
    """Mean nDCG@k over queries.

    Within each query (the rows sharing a ``groups`` value; one query when ``groups`` is None)
    the items are ranked by decreasing score, ties keeping their input order, and

        DCG@k = sum_{rank < k} gain(rel_rank) / log2(rank + 2),   nDCG@k = DCG@k / IDCG@k,

    with IDCG@k the DCG@k of the ideal order (by decreasing relevance), gain(r) = 2^r - 1
    (``gain="exponential"``, Burges et al. 2005, used by McRank) or r (``"linear"``,
    scikit-learn's ``ndcg_score``). A query without any positive gain scores 1 (every order is
    ideal). Returns the mean over queries.
    """
    relevance, scores = _pair(relevance, scores, numeric=True)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if gain not in ("exponential", "linear"):
        raise ValueError(f"gain must be 'exponential' or 'linear', got {gain!r}")
    if relevance.size == 0:
        return float("nan")
    if groups is None:
        query = np.zeros(relevance.size, dtype=np.int64)
    else:
        groups = np.asarray(groups)
        if groups.shape != relevance.shape:
            raise ValueError(f"got {groups.shape} groups for {relevance.shape} items")
        _, query = np.unique(groups, return_inverse=True)
    gains = np.exp2(relevance) - 1.0 if gain == "exponential" else relevance
    # rank items within each query: by query, then decreasing score, then input order
    position = np.arange(relevance.size)
    by_score = np.lexsort((position, -scores, query))
    by_ideal = np.lexsort((position, -relevance, query))
    starts = np.searchsorted(query[by_score], np.arange(query.max() + 1))
    rank = position - np.repeat(starts, np.bincount(query))
    discount = np.where(rank < k, 1.0 / np.log2(rank + 2.0), 0.0)
    n_queries = int(query.max()) + 1
    dcg = np.bincount(query[by_score], weights=gains[by_score] * discount, minlength=n_queries)
    idcg = np.bincount(query[by_ideal], weights=gains[by_ideal] * discount, minlength=n_queries)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_query = np.where(idcg > 0.0, dcg / idcg, 1.0)
    return float(np.mean(per_query))


class _Progressive:
    """Running mean of a per-example quantity, overall and over the last ``window`` examples."""

    def __init__(self, window: int | None = None):
        if window is not None and (
            isinstance(window, bool) or not isinstance(window, int) or window < 1
        ):
            raise ValueError(f"window must be a positive integer or None, got {window!r}")
        self.window = window
        self.n = 0
        self._total = 0.0
        self._recent: deque[float] = deque(maxlen=window)

    def _add(self, values: np.ndarray) -> None:
        self.n += values.size
        self._total += float(np.sum(values))
        if self.window is not None:
            self._recent.extend(values[-self.window :].tolist())

    def _mean(self) -> float:
        return self._total / self.n if self.n else float("nan")

    def _recent_mean(self) -> float:
        if self.window is None or not self._recent:
            return float("nan")
        return float(np.mean(self._recent))


class ProgressiveAccuracy(_Progressive):
    """Accuracy of predictions made before learning (``update(y_true, y_pred)`` per example,
    ``update_many`` per batch); ``value`` over everything, ``recent`` over the window.

    >>> metric = ProgressiveAccuracy(window=2)
    >>> metric.update_many(["a", "b", "b"], ["a", "a", "b"]); metric.value, metric.recent
    (0.6666666666666666, 0.5)
    """

    def update(self, y_true, y_pred) -> None:
        self._add(np.array([1.0 if y_true == y_pred else 0.0]))

    def update_many(self, y_true, y_pred) -> None:
        y_true, y_pred = _pair(y_true, y_pred)
        self._add((y_true == y_pred).astype(float))

    @property
    def value(self) -> float:
        return self._mean()

    @property
    def recent(self) -> float:
        return self._recent_mean()


class ProgressiveRMSE(_Progressive):
    """RMSE of predictions made before learning (squared errors accumulated).

    >>> metric = ProgressiveRMSE()
    >>> metric.update(1.0, 2.0); metric.update(3.0, 3.0); round(metric.value, 4)
    0.7071
    """

    def update(self, y_true, y_pred) -> None:
        self.update_many([y_true], [y_pred])

    def update_many(self, y_true, y_pred) -> None:
        y_true, y_pred = _pair(y_true, y_pred, numeric=True)
        self._add((y_true - y_pred) ** 2)

    @property
    def value(self) -> float:
        return float(np.sqrt(self._mean()))

    @property
    def recent(self) -> float:
        return float(np.sqrt(self._recent_mean()))


class ProgressiveValidation:
    """Progressive-validation summary of a learner: every example is scored before it is
    learned. Keeps the accuracy (classification), the mean loss the model minimises and the
    RMSE (regression), cumulative and over the last ``window`` examples, in a ring buffer
    updated one example or one batch at a time. The buffer grows with the examples seen, up
    to ``window`` columns: a process holding thousands of models that learned little pays
    for what they learned, not 24 KB each (and ``get_state`` gives the columns filled).

    >>> metrics = ProgressiveValidation(window=2, loss="hinge")
    >>> metrics.update([True, False, True], [0.0, 1.5, 0.0])
    >>> s = metrics.summary(); s["accuracy"], s["recent_accuracy"], s["recent_loss"]
    (0.6666666666666666, 0.5, 0.75)
    """

    def __init__(self, window: int, loss: str, regression: bool = False):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive integer, got {window!r}")
        self.window = window
        self.loss = loss
        self.regression = regression
        self.n = 0
        self.correct = 0
        self.loss_sum = 0.0
        self.squared_sum = 0.0
        #: correct, loss, squared error; ``min(n, window)`` columns at least (``_reserve``)
        self.recent_ = np.zeros((3, 0))
        self.filled = 0  # examples in the window (fewer than min(n, window) after a resize)

    def _reserve(self, k: int) -> None:
        """Room for ``k`` more examples: until the ring wraps, position ``n`` is column
        ``n``, so the buffer grows (doubling, at most ``window``) before the write."""
        held = self.recent_.shape[1]
        if held < self.window and self.n + k > held:
            grown = np.zeros((3, min(self.window, max(self.n + k, 2 * held, 8))))
            grown[:, :held] = self.recent_
            self.recent_ = grown

    def update(self, correct, losses, squared=None) -> None:
        """Account for examples scored before they were learned (arrays, or sequences)."""
        k = len(losses)
        if k == 0:
            return
        self._reserve(k)
        if k == 1:  # the common single example, in plain Python
            position = self.n % self.window
            hit, loss = bool(correct[0]), float(losses[0])
            error = 0.0 if squared is None else float(squared[0])
            self.recent_[0, position] = hit
            self.recent_[1, position] = loss
            self.recent_[2, position] = error
            self.n += 1
            self.filled = min(self.filled + 1, self.window)
            self.correct += hit
            self.loss_sum += loss
            self.squared_sum += error
            return
        correct, losses = np.asarray(correct), np.asarray(losses, dtype=float)
        squared = np.zeros(k) if squared is None else np.asarray(squared, dtype=float)
        positions = (self.n + np.arange(k)) % self.window
        tail = slice(-self.window, None)  # a batch longer than the window keeps its tail
        self.recent_[0, positions[tail]] = correct[tail]
        self.recent_[1, positions[tail]] = losses[tail]
        self.recent_[2, positions[tail]] = squared[tail]
        self.n += k
        self.filled = min(self.filled + k, self.window)
        self.correct += int(np.count_nonzero(correct))
        self.loss_sum += float(np.sum(losses))
        self.squared_sum += float(np.sum(squared))

    def summary(self) -> dict:
        """Counts and means, cumulative and recent (None where undefined)."""
        recent = self.filled
        columns = (self.n - recent + np.arange(recent)) % self.window
        correct, loss, squared = (
            self.recent_[:, columns].mean(axis=1) if recent else (None, None, None)
        )
        classification = not self.regression
        return {
            "examples": self.n,
            "loss_kind": self.loss,
            "accuracy": self.correct / self.n if self.n and classification else None,
            "loss": self.loss_sum / self.n if self.n else None,
            "rmse": float(np.sqrt(self.squared_sum / self.n))
            if self.n and self.regression
            else None,
            "recent_examples": recent,
            "recent_accuracy": float(correct) if recent and classification else None,
            "recent_loss": float(loss) if recent else None,
            "recent_rmse": float(np.sqrt(squared)) if recent and self.regression else None,
        }

    def get_state(self) -> dict:
        """The running totals (scalars) and the window (``recent_``, shape (3, window), or
        (3, max(n, 1)) before the window is full)."""
        # the columns the examples seen fill (the whole window once it wrapped): a model
        # that learned little saves little
        width = self.window if self.n >= self.window else max(self.n, 1)
        recent = np.zeros((3, width))
        held = min(width, self.recent_.shape[1])
        recent[:, :held] = self.recent_[:, :held]
        return {
            "arrays": {"recent_": recent},
            "scalars": {
                "n": self.n,
                "filled": self.filled,
                "correct": self.correct,
                "loss_sum": self.loss_sum,
                "squared_sum": self.squared_sum,
            },
        }

    def set_state(self, state: dict) -> None:
        """Load ``get_state()``'s output; a state saved with another window keeps its most
        recent examples that fit. Everything is checked first (ValueError, nothing changed):
        ``recent_`` a float64 array of shape (3, saved window), the counts non-negative
        integers that fit int64 with ``correct <= n`` and ``filled <= min(n, saved window)``,
        the sums and the window's terms never NaN or -inf (a running sum may have overflowed
        to +inf, and a loss computed as a difference may round below zero: both are states
        this object reaches, so both load)."""
        try:
            recent, scalars = state["arrays"]["recent_"], state["scalars"]
            n, correct = scalars["n"], scalars["correct"]
            loss_sum, squared_sum = scalars["loss_sum"], scalars["squared_sum"]
        except (KeyError, TypeError) as error:
            raise ValueError(f"a progressive state misses {error}") from None
        recent = state_array("recent_", recent, np.float64, sums=True)
        if recent.ndim != 2 or recent.shape[0] != 3 or recent.shape[1] < 1:
            raise ValueError(f"a progressive window has shape (3, window), got {recent.shape}")
        n, correct = state_count("n", n), state_count("correct", correct)
        filled = state_count("filled", scalars.get("filled", min(n, recent.shape[1])))
        loss_sum = state_sum("loss_sum", loss_sum)
        squared_sum = state_sum("squared_sum", squared_sum)
        if correct > n or filled > min(n, recent.shape[1]):
            raise ValueError(
                f"a progressive state counts correct={correct} and filled={filled} of n={n} "
                f"examples in a window of {recent.shape[1]}"
            )
        kept = min(filled, self.window)  # the newest examples, oldest first
        order = (n - kept + np.arange(kept)) % recent.shape[1]
        self.recent_ = np.zeros((3, self.window if n >= self.window else n))
        self.recent_[:, (n - kept + np.arange(kept)) % self.window] = recent[:, order]
        self.n, self.filled, self.correct = n, kept, correct
        self.loss_sum, self.squared_sum = loss_sum, squared_sum


def _pair(a, b, numeric: bool = False) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a, dtype=float if numeric else None)
    b = np.asarray(b, dtype=float if numeric else None)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"expected two 1-D arrays of the same length, got {a.shape} and {b.shape}")
    if numeric and not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("values must be finite")
    return a, b
