"""Ours in the PQR tables: ``core.pqr.PQR`` (k = 0: LR) as a one-pass learner, with the
separation H given (the top-k features of the training part, Algorithm 2's "pre-calculated
separation") or estimated online after a warm-up."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from benchmarks.learners import OnePass
from benchmarks.streams import Stream
from core.pqr import PQR, top_k


def feature_counts(X: sp.csr_matrix) -> np.ndarray:
    """Number of rows in which each feature is non-zero."""
    return np.bincount(X.indices[X.data != 0], minlength=X.shape[1])


class OurPQR(OnePass):
    """PQR of order ``k`` with FTRL-Proximal ``params``, learning a stream by ``learn_many``;
    ``separation`` is H, or a function of the training stream that gives it, or "topk"
    (estimated after ``warmup`` examples, then named with ``label``)."""

    def __init__(
        self, k: int, params: dict, separation, warmup: int | None = None, label: str = ""
    ):
        self.k, self.params, self.separation, self.warmup = k, params, separation, warmup
        self.name = "LR" if k == 0 else f"PQR (k={k})"
        if label:
            self.name = f"PQR (k={k}, {label} {warmup})"
        self.model: PQR | None = None

    def fit(self, data: Stream) -> float:
        separation = self.separation
        if callable(separation):
            separation = separation(data)
        self.model = PQR(
            n_features=data.n_features,
            k=self.k,
            separation=separation,
            warmup=self.warmup,
            **self.params,
        )
        start = time.perf_counter()
        self.model.learn_many(data.csr, data.labels)
        return time.perf_counter() - start

    def proba(self, data: Stream) -> np.ndarray:
        return self.model.predict_proba_many(data.csr)

    def size(self) -> int:
        return self.model.model_size()


def top_k_of(k: int) -> Callable[[Stream], list[int]]:
    """The pre-calculated separation of Algorithm 2: the top-k features of the training part."""
    return lambda data: top_k(feature_counts(data.csr), k).tolist()
