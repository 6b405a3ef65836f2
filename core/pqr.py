"""Projective quadratic regression (PQR) trained online by FTRL-Proximal or OGD.

Ma, "Projective Quadratic Regression for Online Learning"
(``../shared/papers/projective-quadratic-regression.txt``).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from core.base import Estimator, PartialBatchError, Step, Steps
from core.binary import BinaryClassifier
from core.config import FLOAT, INDEX
from core.features import CSRBatch
from core.kernels.pqr import (
    OPTIMIZER_FTRL,
    OPTIMIZER_OGD,
    STEP_OK,
    TASK_BINARY,
    TASK_REGRESSION,
    _pqr_expand,
    _pqr_learn_batch,
    _pqr_score,
    _pqr_score_batch,
    _pqr_step,
    _pqr_weights,
)
from core.validation import check_choice, check_n_features, check_non_negative, check_positive

__all__ = ["DEFAULT_WARMUP", "PQR", "top_k"]

TASKS = {"binary": TASK_BINARY, "regression": TASK_REGRESSION}
OPTIMIZERS = {"ftrl": OPTIMIZER_FTRL, "ogd": OPTIMIZER_OGD}
#: Warm-up length used when ``warmup=None`` and ``separation="topk"``.
DEFAULT_WARMUP = 1000


class PQR(BinaryClassifier):
    r"""Projective quadratic regression: ``y^ = 1/2 x^T C x^`` with C a PQR matrix (eq 9).

    With ``x^ = [x, 1]`` and ``C = [[A, w], [w^T, 2 b]]`` (eq 3; we call ``b`` the weight of the
    bias coordinate, so the model's constant is ``b``, not the paper's ``b / 2``), the score is

        y^ = b + w . x + sum_{i<j in H} p_ij x_i x_j + sum_{i in H} q_i x_i x_L,

    where ``I = H u L`` is the feature separation of Definition 1 (H: the k most frequent
    features), ``x_L = sum_{j in L} x_j``, and ``A`` is the PQR matrix of eq (7) / Figure 2:
    ``A = P^T M P`` (eq 13) with M the (k+1) x (k+1) symmetric zero-diagonal matrix of the
    ``p_ij`` and ``q_i``. The model is linear in the expansion ``x~`` of eq (12) /
    Definition 3, hence convex (Propositions 2-3), and trained per coordinate of x~ by
    FTRL-Proximal with l1 + l2 exactly as Algorithm 2 (lazy weights from ``z`` and ``n``) or by
    online gradient descent. Per example the cost is O(nnz + h^2) (Table 1), h the number of
    non-zero features of x in H; the memory is O(d + k^2); no d x d matrix is ever formed.

    **Tasks.** ``task="binary"``: labels -1 / +1, logistic loss ``log(1 + exp(-y y^))``
    (eq 11, whose printed exponent has lost its sign), gradient ``(sigmoid(y^) - (y+1)/2) x~``
    as in Algorithm 2; ``score_one`` is the logit ``y^``, ``predict_one`` its sign (-1 at 0),
    ``predict_proba_one`` = sigmoid(y^) = P(y = +1). ``task="regression"``: finite real
    labels, squared loss ``1/2 (y^ - y)^2`` (eq 10); ``predict_one`` returns ``y^``.

    **Optimizers.** ``"ftrl"``: Algorithm 2 (McMahan et al. 2013): for each non-zero coordinate
    i of x~, ``w_i = 0`` if ``|z_i| <= l1`` else
    ``-(z_i - sgn(z_i) l1) / ((beta + sqrt(n_i)) / alpha + l2)``, then ``g_i = (p - y) x~_i``,
    ``sigma_i = (sqrt(n_i + g_i^2) - sqrt(n_i)) / alpha``, ``z_i += g_i - sigma_i w_i``,
    ``n_i += g_i^2``. ``"ogd"``: ``n_i += g_i^2``, ``eta_i = alpha / (beta + sqrt(n_i))``,
    ``w_i <- prox(w_i - eta_i g_i)`` with the proximal map of ``l1 |w| + l2 / 2 w^2``
    (``sgn(u) max(|u| - eta l1, 0) / (1 + eta l2)``). Without l1 / l2 and as beta -> 0 both
    give the same iterates (McMahan 2011). Zero start: runs are deterministic (section 4.1).

    **Separation and warm-up.** ``separation="topk"``: for the first ``warmup`` examples H is
    empty, so x~ has no pair coordinates and the model is the first-order (linear / logistic)
    FTRL model, while ``counts_`` records how many examples had each feature non-zero. After
    the ``warmup``-th learned example, H becomes the k features with the largest counts (ties
    broken by the lower index; features never seen stay in L, so H may have fewer than k
    members); pair weights start at zero and the first-order weights carry on. An explicit
    list of feature indices (at most k, distinct) is H itself, active from the first example
    (or after ``warmup`` examples if ``warmup`` > 0). Counts keep accumulating after warm-up.
    :meth:`reestimate_separation` recomputes the top-k from ``counts_`` at any time with this
    rule: features that stay in H keep their slot and all their pair weights (with other
    staying features and their ``q``); a feature that leaves H loses its pair weights (z and n
    of the pairs of its slot are zeroed); an entering feature takes a free slot, lowest first,
    with pair weights zero; first-order weights and the bias are never touched. ``k = 0`` is
    the paper's LR baseline (FTRL logistic / linear regression).

    **Steps.** ``learn_one`` returns ``Step(score, loss, aggressive)``: the score ``y^`` and the
    loss of the task (log loss or squared loss) before the update, and whether any weight of
    x~'s coordinates changed. An example whose expansion, score, loss or gradient is not
    finite in float64 raises ``ValueError`` and changes nothing.

    Parameters
    ----------
    n_features : int
        d, the dimension of x (named features are hashed into this many buckets).
    k : int
        Order of the model: the number of slots of H (``k (k + 1) / 2`` pair weights).
    task : {"binary", "regression"}
    optimizer : {"ftrl", "ogd"}
    alpha, beta : float
        Per-coordinate learning rate ``alpha / (beta + sqrt(n_i))``; both > 0.
    l1, l2 : float
        Regularisation strengths (>= 0), the paper's lambda_1 and lambda_2.
    separation : "topk" or list of int
        How H is chosen (see above).
    warmup : int or None
        Examples before H is set; None means 1000 for ``"topk"`` (must then be >= 1 when
        k > 0) and 0 for an explicit list.
    classes : list of 2 labels, optional
        ``task="binary"`` only: the labels of the negative and the positive class (default:
        -1 and +1).

    Attributes
    ----------
    z_ : ndarray of shape (D,)
        FTRL's z per coordinate of x~ (OGD: the weights themselves), D = d + 1 + k (k + 1) / 2:
        the d first-order coordinates, the bias, then ``M[a, b]`` at ``d + 1 + b (b - 1) / 2 + a``
        for slots ``a < b <= k`` (slot k is L). A view of one (D, 2) array with ``n_``.
    n_ : ndarray of shape (D,)
        Sums of squared gradients per coordinate.
    slot_ : ndarray of int64, shape (d,)
        Slot of each feature in H, -1 for features in L.
    members_ : ndarray of int64, shape (k,)
        Feature in each slot of H, -1 for an empty slot.
    counts_ : ndarray of int64, shape (d,)
        Number of learned examples in which each feature was non-zero.
    n_seen_ : int
        Examples learned. ``n_separations_`` : int, times H was set.

    Examples
    --------
    >>> model = PQR(n_features=3, k=2, separation=[0, 1], alpha=0.5)
    >>> step = model.learn_one([1.0, 1.0, 0.0], 1)
    >>> step.score, round(step.loss, 6), step.aggressive
    (0.0, 0.693147, True)
    >>> round(model.predict_proba_one([1.0, 1.0, 0.0]), 6)
    0.660756
    >>> model.model_size()  # w_0, w_1, the bias and p_01
    4
    """

    _arrays = ("z_", "n_", "slot_", "members_", "counts_")
    # the weights are a non-linear function of (z, n): averaging z and n is not averaging
    # the weights, and slots may move between snapshots
    averageable = False
    _scalars = ("n_seen_", "n_separations_")

    def __init__(
        self,
        *,
        n_features: int,
        k: int = 10,
        task: str = "binary",
        optimizer: str = "ftrl",
        alpha: float = 0.1,
        beta: float = 1.0,
        l1: float = 0.0,
        l2: float = 0.0,
        separation: str | list[int] = "topk",
        warmup: int | None = None,
        classes: list | None = None,
    ):
        self.n_features = n_features
        self.k = k
        self.task = task
        self.optimizer = optimizer
        self.alpha = alpha
        self.beta = beta
        self.l1 = l1
        self.l2 = l2
        self.separation = separation
        self.warmup = warmup
        d = check_n_features(n_features)
        if isinstance(k, bool) or not isinstance(k, Integral) or k < 0:
            raise ValueError(f"k must be a non-negative integer, got {k!r}")
        k = int(k)
        self._task = TASKS[check_choice("task", task, sorted(TASKS))]
        self._optimizer = OPTIMIZERS[check_choice("optimizer", optimizer, sorted(OPTIMIZERS))]
        self._alpha = check_positive("alpha", alpha)
        self._beta = check_positive("beta", beta)
        self._l1 = check_non_negative("l1", l1)
        self._l2 = check_non_negative("l2", l2)
        if classes is not None and task != "binary":
            raise ValueError("classes are labels of task='binary'; regression takes numbers")
        self._init_classes(classes)
        self._explicit = _check_separation(separation, d, k)
        if warmup is None:
            self._warmup = DEFAULT_WARMUP if self._explicit is None else 0
        elif isinstance(warmup, bool) or not isinstance(warmup, Integral) or warmup < 0:
            raise ValueError(f"warmup must be None or a non-negative integer, got {warmup!r}")
        else:
            self._warmup = int(warmup)
        if self._explicit is None and k > 0 and self._warmup == 0:
            raise ValueError("separation='topk' needs warmup >= 1 to count features (k > 0)")
        self._k = k
        n_pairs = k * (k + 1) // 2
        # z and n interleaved: one coordinate is one 16-byte run (one cache line per access)
        self._zn = np.zeros((d + 1 + n_pairs, 2), dtype=FLOAT)
        self.z_ = self._zn[:, 0]
        self.n_ = self._zn[:, 1]
        self.slot_ = np.full(d, -1, dtype=INDEX)
        self.members_ = np.full(k, -1, dtype=INDEX)
        self.counts_ = np.zeros(d, dtype=INDEX)
        self.n_seen_ = 0
        self.n_separations_ = 0
        if self._explicit is not None and self._warmup == 0:
            self._separate(self._explicit)

    # -- learning ----------------------------------------------------------------------------
    def learn_one(self, x, y) -> Step:
        label = self._label(y)
        indices, values = self._row(x)
        return self.learn_row(indices, values, label)

    def learn_many(self, X, y) -> Steps:
        batch = self._batch(X)
        steps = self.learn_rows(batch, self._labels(y, batch.n_rows))
        predicted = steps.scores if self._task == TASK_REGRESSION else self._labels_of(steps.scores)
        return Steps(steps.scores, steps.losses, steps.aggressive, None, predicted)

    def learn_batch(self, batch: CSRBatch, targets) -> Steps:
        """``BinaryClassifier.learn_batch`` (class indices) for ``task="binary"``; for
        ``task="regression"`` the targets are the finite label values (checked), and the
        steps' ``predicted`` the scores before each update, as ``learn_many``'s."""
        if self._task == TASK_BINARY:
            return super().learn_batch(batch, targets)
        steps = self.learn_rows(batch, self._labels(targets, batch.n_rows))
        return Steps(steps.scores, steps.losses, steps.aggressive, None, steps.scores)

    def _label(self, y) -> float:
        if self._task == TASK_BINARY:
            return self._binary_label(y)
        if isinstance(y, bool | np.bool_) or not isinstance(y, Real | np.number):
            raise ValueError(f"regression label must be a finite number, got {y!r}")
        if not np.isfinite(y):
            raise ValueError(f"regression label must be a finite number, got {y!r}")
        return float(y)

    def _labels(self, y, n_rows: int) -> np.ndarray:
        if self._task == TASK_BINARY:
            return self._binary_labels(y, n_rows)
        labels = np.asarray(y)
        if labels.dtype == bool or labels.dtype.kind not in "iuf":
            raise ValueError(f"regression labels must be finite numbers, got dtype {labels.dtype}")
        labels = np.ascontiguousarray(labels, dtype=FLOAT)
        if labels.ndim != 1 or labels.shape[0] != n_rows:
            raise ValueError(f"got {labels.shape} labels for {n_rows} rows")
        bad = ~np.isfinite(labels)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"regression label at row {i} is not finite ({labels[i]!r})")
        return labels

    def _scratch(self, nnz: int):
        """Work arrays for rows of at most nnz entries (see ``_pqr_expand``)."""
        h = min(nnz, self._k)
        size = nnz + 1 + h * (h + 1) // 2
        return (
            np.empty(self._k, dtype=INDEX),
            np.empty(self._k, dtype=FLOAT),
            np.empty(size, dtype=INDEX),
            np.empty(size, dtype=FLOAT),
        )

    def _hyper(self):
        return self._optimizer, self._alpha, self._beta, self._l1, self._l2

    def learn_row(self, indices, values, y: float) -> Step:
        active_slots, active_values, work_index, work_value = self._scratch(indices.shape[0])
        status, score, loss, moved = _pqr_step(
            self._zn,
            self.slot_,
            self.counts_,
            self._k,
            indices,
            values,
            y,
            self._task,
            *self._hyper(),
            active_slots,
            active_values,
            work_index,
            work_value,
            np.empty(work_value.shape[0], dtype=FLOAT),
            np.empty(work_value.shape[0], dtype=FLOAT),
        )
        if status != STEP_OK:
            raise ValueError("the example's expansion, score, loss or gradient overflows float64")
        self.n_seen_ += 1
        self._after_learning(1)
        if self._task == TASK_REGRESSION:
            predicted = score
        else:
            predicted = self.classes_[1] if score > 0 else self.classes_[0]
        return Step(score, loss, moved, int(moved), predicted)

    def learn_rows(self, batch: CSRBatch, y: np.ndarray) -> Steps:
        n_rows = batch.n_rows
        scores = np.zeros(n_rows)
        losses = np.zeros(n_rows)
        moved = np.zeros(n_rows, dtype=bool)
        if n_rows == 0:
            return Steps(scores, losses, moved)
        nnz = int(np.max(np.diff(batch.indptr)))
        active_slots, active_values, work_index, work_value = self._scratch(nnz)
        work_weight = np.empty(work_value.shape[0], dtype=FLOAT)
        work_root = np.empty(work_value.shape[0], dtype=FLOAT)
        # split at the end of the warm-up so that H is set at the same example as learn_one
        cuts = [0, n_rows]
        if self._warmup_pending() and self.n_seen_ + n_rows > self._warmup:
            cuts = [0, self._warmup - self.n_seen_, n_rows]
        for start, stop in zip(cuts[:-1], cuts[1:], strict=True):
            failed, done = _pqr_learn_batch(
                self._zn,
                self.slot_,
                self.counts_,
                self._k,
                batch.indptr[start : stop + 1],
                batch.indices,
                batch.values,
                y[start:stop],
                self._task,
                *self._hyper(),
                active_slots,
                active_values,
                work_index,
                work_value,
                work_weight,
                work_root,
                scores[start:stop],
                losses[start:stop],
                moved[start:stop],
            )
            self.n_seen_ += done
            self._after_learning(done)
            if failed >= 0:
                learned = start + done
                raise PartialBatchError(
                    f"row {start + failed}: the example's expansion, score, loss or gradient "
                    f"overflows float64 ({learned} earlier rows were learned)",
                    Steps(scores[:learned], losses[:learned], moved[:learned]),
                )
        return Steps(scores, losses, moved)

    def _warmup_pending(self) -> bool:
        return self._k > 0 and self.n_seen_ < self._warmup

    def _after_learning(self, done: int) -> None:
        if done > 0 and self._k > 0 and self.n_seen_ == self._warmup:
            if self._explicit is None:
                self.reestimate_separation()
            else:
                self._separate(self._explicit)

    # -- scoring -----------------------------------------------------------------------------
    def score_row(self, indices, values) -> float:
        active_slots, active_values, work_index, work_value = self._scratch(indices.shape[0])
        return _pqr_score(
            self._zn,
            self.slot_,
            self._k,
            indices,
            values,
            *self._hyper(),
            active_slots,
            active_values,
            work_index,
            work_value,
        )

    def score_batch(self, batch: CSRBatch) -> np.ndarray:
        scores = np.empty(batch.n_rows)
        if batch.n_rows == 0:
            return scores
        nnz = int(np.max(np.diff(batch.indptr)))
        _pqr_score_batch(
            self._zn,
            self.slot_,
            self._k,
            batch.indptr,
            batch.indices,
            batch.values,
            *self._hyper(),
            *self._scratch(nnz),
            scores,
        )
        return scores

    def predict_one(self, x):
        """The sign of the score (binary: -1 / +1) or the predicted value (regression)."""
        if self._task == TASK_REGRESSION:
            return self.score_one(x)
        return super().predict_one(x)

    def predict_many(self, X) -> np.ndarray:
        if self._task == TASK_REGRESSION:
            return self.score_many(X)
        return super().predict_many(X)

    def proba_from_scores(self, scores) -> np.ndarray:
        """P(y = classes_[1]) = sigmoid(score): the logistic model's own probability (binary
        task only)."""
        if self._task != TASK_BINARY:
            raise ValueError("predict_proba is only defined for task='binary'")
        return _sigmoid(np.asarray(scores, dtype=FLOAT))

    # -- separation --------------------------------------------------------------------------
    def reestimate_separation(self) -> np.ndarray:
        """Set H to the top-k features of ``counts_`` (ties: lower index; unseen features stay
        in L) with the rule of the class docstring; returns the new ``members_``."""
        self._separate(top_k(self.counts_, self._k))
        return self.members_.copy()

    def _separate(self, features: np.ndarray) -> None:
        """Make ``features`` (in rank order) the members of H, moving as little as possible."""
        features = np.asarray(features, dtype=INDEX)
        current = self.members_
        keep = np.isin(current, features) & (current >= 0)
        for s in np.flatnonzero(~keep & (current >= 0)):  # leaving: drop their pair weights
            self.slot_[current[s]] = -1
            current[s] = -1
            self._clear_slot(int(s))
        entering = features[self.slot_[features] < 0]
        free = np.flatnonzero(current < 0)[: entering.shape[0]]
        for s, j in zip(free, entering, strict=True):
            self._clear_slot(int(s))
            current[s] = j
            self.slot_[j] = s
        self.n_separations_ += 1

    def _clear_slot(self, s: int) -> None:
        self._zn[self._slot_pairs(s)] = 0.0

    def _slot_pairs(self, s: int) -> np.ndarray:
        """Coordinates of every pair weight M[s, .] (slot s with the other k slots and L)."""
        k, base = self._k, self.n_features + 1
        below = np.arange(s, dtype=INDEX)
        above = np.arange(s + 1, k + 1, dtype=INDEX)
        return np.concatenate(
            [base + s * (s - 1) // 2 + below, base + above * (above - 1) // 2 + s]
        )

    # -- inspection --------------------------------------------------------------------------
    def weights(self) -> np.ndarray:
        """All D weights of the expanded space (computed from z and n for FTRL)."""
        out = np.empty(self._zn.shape[0])
        _pqr_weights(self._zn, *self._hyper(), out)
        return out

    def interactions(self) -> tuple[np.ndarray, np.ndarray]:
        """``(members_, M)``: M is the (k+1) x (k+1) matrix of eq (13), rows and columns in slot
        order with L last; ``A = P^T M P`` is the PQR matrix of eq (7)."""
        k, d = self._k, self.n_features
        pairs = self.weights()[d + 1 :]
        M = np.zeros((k + 1, k + 1))
        hi, lo = np.tril_indices(k + 1, -1)
        M[lo, hi] = pairs[hi * (hi - 1) // 2 + lo]
        M[hi, lo] = M[lo, hi]
        return self.members_.copy(), M

    def model_size(self) -> int:
        """Number of non-zero weights (the paper's "model size", Table 4)."""
        return int(np.count_nonzero(self.weights()))

    def expand(self, x) -> tuple[np.ndarray, np.ndarray]:
        """The non-zero coordinates ``(indices, values)`` of x~ (eq 12, Definition 3)."""
        indices, values = self._row(x)
        active_slots, active_values, work_index, work_value = self._scratch(indices.shape[0])
        m = _pqr_expand(
            self.slot_,
            self._k,
            indices,
            values,
            active_slots,
            active_values,
            work_index,
            work_value,
        )
        return work_index[:m].copy(), work_value[:m].copy()

    # -- state -------------------------------------------------------------------------------
    def _check_state(self, arrays: dict, scalars: dict) -> list[tuple[Estimator, str, object]]:
        writes = super()._check_state(arrays, scalars)
        d, k = self.n_features, self._k
        slot, members = arrays["slot_"], arrays["members_"]
        if np.any(slot < -1) or np.any(slot >= k) or np.any(members < -1) or np.any(members >= d):
            raise ValueError("state arrays slot_ / members_ hold out-of-range entries")
        filled = np.flatnonzero(members >= 0)
        if np.count_nonzero(slot >= 0) != filled.shape[0] or np.any(
            slot[members[filled]] != filled
        ):
            raise ValueError("state arrays slot_ and members_ disagree")
        if np.any(arrays["counts_"] < 0) or np.any(arrays["n_"] < 0):
            raise ValueError("state arrays counts_ and n_ must be non-negative")
        if scalars["n_seen_"] < 0 or scalars["n_separations_"] < 0:
            raise ValueError("state scalars n_seen_ and n_separations_ must be non-negative")
        return writes


def top_k(counts: np.ndarray, k: int) -> np.ndarray:
    """The (at most) k indices with the largest positive counts, by decreasing count, ties by
    lower index."""
    seen = np.flatnonzero(counts > 0)
    if k == 0:
        return np.zeros(0, dtype=INDEX)
    if seen.shape[0] > k:
        # only candidates at or above the k-th largest count need sorting
        kth = np.partition(counts[seen], seen.shape[0] - k)[seen.shape[0] - k]
        seen = seen[counts[seen] >= kth]
    order = np.lexsort((seen, -counts[seen]))
    return seen[order[:k]].astype(INDEX)


def _sigmoid(s: np.ndarray) -> np.ndarray:
    s = np.asarray(s, dtype=FLOAT)
    e = np.exp(-np.abs(s))
    return np.where(s >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _check_separation(separation, n_features: int, k: int) -> np.ndarray | None:
    if isinstance(separation, str):
        if separation != "topk":
            raise ValueError(f"separation must be 'topk' or a list of features, got {separation!r}")
        return None
    if not isinstance(separation, list | tuple):
        raise ValueError(
            f"separation must be 'topk' or a list of feature indices, got {type(separation)}"
        )
    for j in separation:
        if isinstance(j, bool) or not isinstance(j, Integral) or not 0 <= j < n_features:
            raise ValueError(f"separation holds {j!r}, not a feature index in [0, {n_features})")
    features = np.asarray(separation, dtype=INDEX)
    if np.unique(features).shape[0] != features.shape[0]:
        raise ValueError("separation holds duplicate features")
    if features.shape[0] > k:
        raise ValueError(f"separation has {features.shape[0]} features, more than k={k}")
    return features
