"""A family of 45 one-vs-one pair models of one kind (linear, or DoS of one rank), stacked for
the kernels of :mod:`benchmarks.reproduce_dos.kernels`, with their aligned running averages."""

from __future__ import annotations

import time

import numpy as np

from benchmarks.reproduce_dos.kernels import N_CLASSES, ovo_dos_stream, ovo_linear_stream
from core.align import running_average
from core.dos import DoSClassifier
from core.linear import LinearPA

N_PIXELS = 784
PAIRS = tuple((i, j) for i in range(N_CLASSES) for j in range(i + 1, N_CLASSES))
FIRST = np.array([i for i, _ in PAIRS], dtype=np.int64)
SECOND = np.array([j for _, j in PAIRS], dtype=np.int64)
PAIRS_OF = np.array(
    [[p for p, (i, j) in enumerate(PAIRS) if c in (i, j)] for c in range(N_CLASSES)],
    dtype=np.int64,
)


class Family:
    """45 stacked pair models of one kind (linear, or DoS of one rank), live and averaged.

    Every pair starts from the same binary model (``core.one_vs_one.OneVsOne`` clones its
    base): zeros for linear, ``DoSClassifier(n_features=784, rank, seed)``'s random U, V.
    """

    def __init__(self, rank: int | None, seed: int):
        self.rank = rank
        self.name = "linear" if rank is None else f"DoS d={rank}"
        if rank is None:
            self.template = LinearPA(n_features=N_PIXELS)
            self.arrays = (np.repeat(self.template.w_[None], len(PAIRS), axis=0),)
        else:
            self.template = DoSClassifier(n_features=N_PIXELS, rank=rank, seed=seed)
            W = np.hstack([self.template.U_.T, self.template.V_.T])
            self.arrays = (np.repeat(W[None], len(PAIRS), axis=0),)
        self.n_seen = np.zeros(len(PAIRS), dtype=np.int64)
        self.n_updates = np.zeros(len(PAIRS), dtype=np.int64)
        self.average_states: list[dict] | None = None
        self.average_arrays: tuple[np.ndarray, ...] | None = None
        self.n_averaged = 0
        self.seconds_learning = 0.0

    def run(self, X: np.ndarray, y: np.ndarray, learn: bool, arrays=None) -> np.ndarray:
        """Predictions for X (before each update), learning from (X, y) if ``learn``."""
        predictions = np.empty(X.shape[0], dtype=np.int64)
        arrays = self.arrays if arrays is None else arrays
        stream = ovo_linear_stream if self.rank is None else ovo_dos_stream
        failed = stream(
            *arrays,
            FIRST,
            SECOND,
            PAIRS_OF,
            self.n_seen,
            self.n_updates,
            X,
            y,
            learn,
            predictions,
        )
        if failed >= 0:
            raise FloatingPointError(f"{self.name}: non-finite score at row {failed}")
        return predictions

    def warm_up(self, X: np.ndarray, y: np.ndarray) -> None:
        """Compile (or load from numba's cache) the kernel on copies, outside the timings."""
        saved = self.arrays, self.n_seen, self.n_updates
        self.arrays = tuple(array.copy() for array in self.arrays)
        self.n_seen = self.n_seen.copy()
        self.n_updates = self.n_updates.copy()
        self.run(X, y, True)
        self.arrays, self.n_seen, self.n_updates = saved

    def learn(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        predictions = self.run(X, y, True)
        self.seconds_learning += time.perf_counter() - start
        return predictions

    def predict(self, X: np.ndarray, averaged: bool = False) -> np.ndarray:
        arrays = self.average_arrays if averaged else self.arrays
        return self.run(X, np.zeros(X.shape[0], dtype=np.int64), False, arrays)

    # states of the pair models, as DoSClassifier / LinearPA.get_state() writes them
    def pair_state(self, p: int) -> dict:
        state = self.template.get_state()
        if self.rank is None:
            state["arrays"]["w_"] = self.arrays[0][p].copy()
        else:
            W = self.arrays[0][p]
            state["arrays"]["U_"] = np.ascontiguousarray(W[:, : self.rank].T)
            state["arrays"]["V_"] = np.ascontiguousarray(W[:, self.rank :].T)
        state["scalars"]["n_seen_"] = int(self.n_seen[p])
        state["scalars"]["n_updates_"] = int(self.n_updates[p])
        return state

    def fold_snapshot(self) -> None:
        """Fold the live pair models into the aligned running averages (eq 28)."""
        self.n_averaged += 1
        previous = self.average_states or [None] * len(PAIRS)
        self.average_states = [
            running_average(previous[p], self.pair_state(p), self.n_averaged)
            for p in range(len(PAIRS))
        ]
        if self.rank is None:
            W = np.stack([s["arrays"]["w_"] for s in self.average_states])
            self.average_arrays = (W,)
        else:
            W = np.stack(
                [np.hstack([s["arrays"]["U_"].T, s["arrays"]["V_"].T]) for s in self.average_states]
            )
            self.average_arrays = (W,)
