"""Data-parallel online learning of one model, merged by aligned averaging (section 3.4).

k workers hold copies of one model. Examples are dealt round-robin (the i-th example seen
goes to worker ``i mod k``); every ``interval`` examples (counted over all workers) the k
states are merged into one and every worker goes on from the merged state. The merge is
the aligned average of section 3.4 of Saul 2021 (:func:`merge`): each DoS pair is brought
to its minimum-norm form and rotated onto the running average of the others (Lorentz boost
and Procrustes, eqs 15-16 and 26-27) before the equal-weight average (eq 28); every other
float array is averaged as is. A DoS model is defined only up to those symmetries: copies
that learned apart hold their hidden units in unrelated bases, and averaging them without
alignment averages unrelated units.

:class:`DataParallel` runs the rounds in this process, one worker after the other (the
reference, deterministic); ``benchmarks/data_parallel.py`` runs the same rounds on k
processes, with the same result bit for bit, and measures throughput and test error.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from core.align import ALIGNMENTS, running_average
from core.base import Estimator
from core.features import sliceable

__all__ = ["DataParallel", "deal", "merge"]


def merge(states: list[dict], method: str = "paper") -> dict:
    """The aligned equal-weight average of k model states (eq 28 folded over k models).

    >>> from core.dos import DoSClassifier
    >>> from core.align import boost
    >>> model = DoSClassifier(n_features=2, rank=2, seed=0)
    >>> _ = model.learn_one([1.0, -1.0], 1)
    >>> twin = model.get_state()
    >>> twin["arrays"]["U_"], twin["arrays"]["V_"] = boost(model.U_, model.V_, 0.7)
    >>> merged = model.clone()
    >>> merged.set_state(merge([model.get_state(), twin]))
    >>> bool(np.isclose(merged.score_one([0.3, 2.0]), model.score_one([0.3, 2.0])))
    True
    """
    if not states:
        raise ValueError("merge needs at least one state")
    average = None
    for m, state in enumerate(states, start=1):
        average = running_average(average, state, m, method)
    return average


def deal(n_seen: int, n_rows: int, n_workers: int) -> list[np.ndarray]:
    """The rows of a batch each worker learns: row i is the ``(n_seen + i)``-th example,
    dealt to worker ``(n_seen + i) mod n_workers``.

    >>> [rows.tolist() for rows in deal(1, 5, 2)]
    [[1, 3], [0, 2, 4]]
    """
    owner = (n_seen + np.arange(n_rows)) % n_workers
    return [np.flatnonzero(owner == worker) for worker in range(n_workers)]


class DataParallel:
    """k copies of ``model`` learning a stream dealt round-robin, merged every ``interval``
    examples (module docstring). Not itself an estimator: ``model_`` is the merged model
    (the one to serve), a clone of ``model`` until the first merge.

    Parameters
    ----------
    model : Estimator
        The model to learn (a template: it is cloned).
    n_workers : int
        k. With k = 1 nothing is merged: one model learns every example (a single learner).
    interval : int
        Examples (over all workers) between two merges.
    alignment : {"paper", "spectral"}
        How DoS pairs are aligned before averaging (``core.align.align``).

    Attributes
    ----------
    workers_ : list of Estimator
        The k copies.
    model_ : Estimator
        The last merged model.
    n_seen_ : int
        Examples learned. ``n_merges_`` : int, merges done.

    Examples
    --------
    >>> from core.dos import DoSClassifier
    >>> parallel = DataParallel(DoSClassifier(n_features=2, rank=1), n_workers=2, interval=4)
    >>> parallel.learn_many(np.eye(2)[[0, 1, 0, 1, 0]], [1, -1, 1, -1, 1])
    >>> parallel.n_merges_, parallel.n_seen_
    (1, 5)
    """

    def __init__(self, model: Estimator, n_workers: int, interval: int, alignment: str = "paper"):
        for name, value in (("n_workers", n_workers), ("interval", interval)):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if alignment not in ALIGNMENTS:
            raise ValueError(f"alignment must be one of {ALIGNMENTS}, got {alignment!r}")
        self.n_workers = n_workers
        self.interval = interval
        self.alignment = alignment
        self.workers_ = [model.clone() for _ in range(n_workers)]
        self.model_ = model.clone()
        self.n_seen_ = 0
        self.n_merges_ = 0

    def rounds(self, n_rows: int) -> list[tuple[int, int]]:
        """``(start, stop)`` of the parts of a batch of ``n_rows`` between merges."""
        first = min(n_rows, self.interval - self.n_seen_ % self.interval)
        bounds = [0, *range(first, n_rows, self.interval), n_rows]
        return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]

    def learn_many(self, X, y) -> None:
        """Learn a batch: each part between merges dealt to the workers, then merged."""
        X, y, n_rows = sliceable(X, y)
        y = np.asarray(y)
        for start, stop in self.rounds(n_rows):
            for worker, rows in zip(
                self.workers_, deal(self.n_seen_, stop - start, self.n_workers), strict=True
            ):
                if rows.size:
                    worker.learn_many(X[start + rows], y[start + rows])
            self.n_seen_ += stop - start
            if self.n_seen_ % self.interval == 0:
                self.merge_now()

    def merge_now(self) -> None:
        """Merge the workers' states and give the merged state back to each of them."""
        if self.n_workers == 1:
            self.model_.set_state(self.workers_[0].get_state())
        else:
            merged = merge([w.get_state() for w in self.workers_], self.alignment)
            for model in (self.model_, *self.workers_):
                model.set_state(merged)
        self.n_merges_ += 1
