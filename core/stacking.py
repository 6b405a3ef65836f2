"""Binary models of a multi-class reduction stacked side by side, so that a block of rows is
scored against all of them by one product (the reductions of ``core.reduction`` use it for
batch scoring, ``core.one_vs_one`` for learning with progressive scores; kernels in
``core.kernels.multiclass``).
One-vs-one learning with progressive scores goes by blocks of rows (``learn_by_blocks``), or,
for DoS pairs small enough to stay in the caches, pair after pair (``learn_pair_by_pair``): no
product, no Gram correction."""

from __future__ import annotations

from functools import cache

import numpy as np
import scipy.sparse as sp
from threadpoolctl import ThreadpoolController

from core.binary import BinaryClassifier
from core.calibration import Calibrated
from core.config import FLOAT, INDEX
from core.dos import DoSClassifier
from core.features import CSRBatch
from core.kernels.dos import _dos_progressive_rows
from core.kernels.multiclass import (
    _ovo_dos_learn_block,
    _ovo_linear_learn_block,
    _stack_densify,
    _stack_dos_scores,
)
from core.linear import LinearPA

#: batches of fewer rows are scored model by model (stacking costs about one row's scoring)
STACK_MIN_ROWS = 8
#: rows per product of the stacked path (bounds its scratch to rows x n_models x width)
STACK_BLOCK_ROWS = 128
#: rows per block of the progressive one-vs-one learning (the Gram corrections grow with it)
PROGRESSIVE_BLOCK_ROWS = 64
#: models stacked over every feature up to this many floats (else over a batch's active ones)
FULL_STACK_FLOATS = 1 << 22
#: blocks with at least this share of non-zeros are multiplied densely (BLAS), others as CSR
DENSE_SHARE = 0.05
#: one-vs-one DoS pairs of at most this many parameter bytes each learn pair by pair
PAIR_BY_PAIR_BYTES = 1 << 20


@cache
def _blas_threads() -> ThreadpoolController:
    """The BLAS thread pools. The stacked products run on one thread: they are issued block
    by block between kernel calls, and OpenBLAS's own threads made them 3-6x slower on this
    2-core machine whenever another process was busy (30 against 9 GFLOP/s at load 6). The
    limit is process-wide: two threads inside it at once may leave BLAS at one thread after
    both have left (never at more than it had)."""
    return ThreadpoolController()


def _fits(cores: list, n_features: int, width: int) -> bool:
    """Whether the models stacked over every feature stay within ``FULL_STACK_FLOATS``."""
    return (n_features + 1) * width * len(cores) <= FULL_STACK_FLOATS


def _stackable(model: BinaryClassifier) -> DoSClassifier | LinearPA | None:
    """The DoS or linear PA model of a binary model (under a ``Calibrated``), or None."""
    inner = model.model_ if type(model) is Calibrated else model
    return inner if type(inner) in (DoSClassifier, LinearPA) else None


def learn_pair_by_pair(
    models: list, pairs: list[tuple[int, int]], batch: CSRBatch, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """One-vs-one learning with progressive scores, pair after pair: pair p = (i, j) scores
    every row in order and learns the rows of classes i (+1) and j (-1) right after their
    score. The pairs are independent models, so this is the ``learn_one`` loop's arithmetic
    (each pair's steps in the same order, by the same kernel), while a pair's parameters
    stay in the caches for the whole batch (block products, ``Stack``, cycle through every
    pair's parameters for every block).

    ``models``: DoS models (calibrated or not) of at most ``PAIR_BY_PAIR_BYTES`` each, else
    None and nothing learned. Returns ``(scores, nus)``, each (n_rows, n_pairs): every
    pair's score of every row before the row was learned, and its step's nu (0: passive or
    not learned); the models' step counters are counted on, their calibrators are the
    caller's. If a pair cannot learn a row (a score or update that overflows), every pair's
    parameters are put back as they were and None is returned: the caller learns the batch
    another way, which refuses that row.
    """
    cores = [_stackable(model) for model in models]
    if not all(
        type(core) is DoSClassifier and core.W_.nbytes <= PAIR_BY_PAIR_BYTES for core in cores
    ):
        return None
    n_rows = batch.n_rows
    scores = np.empty((len(cores), n_rows))
    nus = np.empty((len(cores), n_rows))
    mask = np.zeros(cores[0].W_.shape[0], dtype=bool)
    mask[batch.indices] = True
    mask[-1] = True  # the bias row
    touched = np.flatnonzero(mask)
    saved = [core.W_[touched] for core in cores]  # the rows this batch can change
    learned = []
    for p, (core, (i, j)) in enumerate(zip(cores, pairs, strict=True)):
        y = np.where(targets == i, 1.0, np.where(targets == j, -1.0, 0.0))
        failed, done = _dos_progressive_rows(
            core.W_, batch.indptr, batch.indices, batch.values, y, *core.pa_variant,
            core.n_seen_, scores[p], nus[p],
        )  # fmt: skip
        if failed >= 0:
            for each, rows in zip(cores, saved, strict=True):
                each.W_[touched] = rows
            return None
        learned.append(done)
    for core, done, moved in zip(cores, learned, nus, strict=True):
        core.n_seen_ += done
        core.n_updates_ += int(np.count_nonzero(moved))
    return np.ascontiguousarray(scores.T), np.ascontiguousarray(nus.T)


def learn_by_blocks(
    models: list,
    batch: CSRBatch,
    n_features: int,
    targets: np.ndarray,
    pairs_of: list[list[int]],
    first: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """One-vs-one learning with progressive scores by blocks of ``PROGRESSIVE_BLOCK_ROWS``
    rows: one product of a block against all pairs at its start, then each row scored from
    it and learned by its class's pairs (``pairs_of[c]``, +1 for class ``first[p]``), the
    block's later rows corrected by the Gram matrix after each update
    (``core.kernels.multiclass``). Equal to the ``learn_one`` loop to rounding.

    ``models``: DoS or linear PA models (calibrated or not), else None and nothing learned.
    Returns ``(scores, losses, counts, done)``: every pair's score of every row before it
    was learned (n_rows, n_pairs), each row's summed hinge loss and updating pairs, and the
    rows learned: all of them, or those before the first row whose learning pairs' scores
    are not finite (nothing of it learned). The models' parameters and step counters are
    updated; their calibrators are the caller's.
    """
    stack = Stack.of(models, batch, n_features)
    if stack is None:
        return None
    n_rows, n_pairs = batch.n_rows, len(models)
    scores = np.zeros((n_rows, n_pairs))
    losses = np.zeros(n_rows)
    counts = np.zeros(n_rows, dtype=INDEX)
    seen = np.array([core.n_seen_ for core in stack.cores], dtype=INDEX)
    updates = np.zeros(n_pairs, dtype=INDEX)
    pairs_of = np.array(pairs_of, dtype=INDEX)
    h = np.empty(max(stack.width, 1))
    base = stack.cores[0]
    failed = -1
    with _blas_threads().limit(limits=1, user_api="blas"):
        for start in range(0, n_rows, PROGRESSIVE_BLOCK_ROWS):
            stop = min(start + PROGRESSIVE_BLOCK_ROWS, n_rows)
            P, G = stack.block(start, stop, gram=True)
            if stack.dos:
                failed = _ovo_dos_learn_block(
                    stack.W, stack.rank, batch.indptr, stack.indices, batch.values, start,
                    stop, targets, pairs_of, first, *base.pa_variant, seen, P, G, h,
                    scores, losses, counts, updates,
                )  # fmt: skip
            else:
                failed = _ovo_linear_learn_block(
                    stack.W, base.bias_feature, batch.indptr, stack.indices, batch.values, start,
                    stop, targets, pairs_of, first, *base.pa_variant, seen, P, G,
                    scores, losses, counts, updates,
                )  # fmt: skip
            if failed >= 0:
                break
    stack.write_back()
    for p, core in enumerate(stack.cores):
        core.n_seen_ = int(seen[p])
        core.n_updates_ += int(updates[p])
    return scores, losses, counts, n_rows if failed < 0 else failed


class Stack:
    """A reduction's binary models stacked over the active features of one batch.

    ``W`` (n_active + 1, n_models * width) holds, for each active feature of the batch and
    then the bias, the parameters of every model side by side (``core.kernels.multiclass``):
    a DoS model's ``2 rank`` columns of ``[U | V]^T``, a linear model's one weight. Its rows
    are copies: :meth:`write_back` puts them back after learning. Beyond ``FULL_STACK_FLOATS``,
    or for a batch with fewer non-zeros than features, only the batch's active features are
    stacked and its column indices renumbered into them (``indices``), so a product over 2^20
    hashed features touches only those.
    """

    def __init__(self, cores: list, batch: CSRBatch | None, n_features: int):
        self.cores = cores
        self.batch = batch
        self.dos = type(cores[0]) is DoSClassifier
        self.rank = cores[0].rank if self.dos else 0
        self.width = 2 * self.rank if self.dos else 1
        if batch is None or (
            _fits(cores, n_features, self.width) and batch.values.shape[0] >= n_features
        ):
            self.rows = slice(None)  # every feature: no renumbering
            self.indices = None if batch is None else batch.indices
            n_active = n_features
        else:
            active = np.unique(batch.indices)
            self.rows = np.append(active, n_features).astype(INDEX)  # active ones, then bias
            self.indices = np.searchsorted(active, batch.indices).astype(INDEX)
            n_active = active.shape[0]
        if self.dos:
            self.W = np.hstack([core.W_[self.rows] for core in cores])
            self.bias = np.ones(self.W.shape[1])
        else:
            self.W = np.column_stack([core.w_[self.rows] for core in cores])
            self.bias = np.array([core.bias_feature for core in cores], dtype=FLOAT)
        if batch is not None:
            cells = batch.n_rows * n_active
            self.dense = cells > 0 and batch.values.shape[0] >= DENSE_SHARE * cells
            self._csr = sp.csr_matrix(
                (batch.values, self.indices, batch.indptr), shape=(batch.n_rows, n_active)
            )

    @staticmethod
    def _cores(models: list) -> list | None:
        cores = [_stackable(model) for model in models]
        if any(core is None for core in cores) or len({type(core) for core in cores}) != 1:
            return None
        if type(cores[0]) is DoSClassifier and (
            len({core.rank for core in cores}) != 1
            or any(core.dtype != "float64" for core in cores)
        ):
            return None  # float32 models learn through their own step (its overflow check)
        return cores

    @classmethod
    def of(cls, models: list, batch: CSRBatch, n_features: int) -> Stack | None:
        """The stack of ``models`` over ``batch``, or None unless they are all DoS (of one
        rank) or all linear PA models."""
        cores = cls._cores(models)
        return None if cores is None else cls(cores, batch, n_features)

    @classmethod
    def of_dense(cls, models: list, n_features: int) -> Stack | None:
        """The stack of ``models`` over every feature, for dense rows (None as :meth:`of`, or
        beyond ``FULL_STACK_FLOATS``)."""
        cores = cls._cores(models)
        if cores is None:
            return None
        width = 2 * cores[0].rank if type(cores[0]) is DoSClassifier else 1
        return cls(cores, None, n_features) if _fits(cores, n_features, width) else None

    def _product(self, X: np.ndarray, gram: bool):
        """``(P, G)`` of dense rows X (n_active columns): P = Z W and, if asked, G = Z Z^T
        with ``z = [x, bias]`` (else None)."""
        # the rows' active features only: on MNIST a block of 64 digits uses 470 of the 784
        # pixels, and the gathered rows of W cost less than the products they save
        columns = np.flatnonzero(X.any(axis=0))
        W = self.W[columns]
        X = X[:, columns]
        P = X @ W
        P += self.bias * self.W[-1]
        G = None
        if gram:
            G = X @ X.T
            G += self.bias[0] * self.bias[0]
        return P, G

    def block(self, start: int, stop: int, gram: bool = False):
        """``_product`` of rows start..stop of the batch (multiplied as CSR by scipy when the
        batch is sparse)."""
        if self.dense:
            X = np.empty((stop - start, self.W.shape[0] - 1))
            _stack_densify(self._csr.indptr, self.indices, self.batch.values, start, stop, X)
            return self._product(X, gram)
        X = self._csr[start:stop]
        P = np.asarray(X @ self.W[:-1])
        P += self.bias * self.W[-1]
        G = None
        if gram:
            G = (X @ X.T).toarray()
            G += self.bias[0] * self.bias[0]
        return np.ascontiguousarray(P), G

    def scores(self, X: np.ndarray | None = None) -> np.ndarray:
        """Every model's score of every row, shape (n_rows, n_models): of the batch, or of
        the dense rows X (a stack made by :meth:`of_dense`)."""
        n_rows = self.batch.n_rows if X is None else X.shape[0]
        scores = np.empty((n_rows, len(self.cores)))
        with _blas_threads().limit(limits=1, user_api="blas"):
            for start in range(0, n_rows, STACK_BLOCK_ROWS):
                stop = min(start + STACK_BLOCK_ROWS, n_rows)
                if X is None:
                    P, _ = self.block(start, stop)
                else:
                    P, _ = self._product(X[start:stop], False)
                if self.dos:
                    _stack_dos_scores(P, stop - start, self.rank, scores[start:stop])
                else:
                    scores[start:stop] = P
        return scores

    def write_back(self) -> None:
        """Copy the stacked rows back into the models."""
        for p, core in enumerate(self.cores):
            columns = self.W[:, p * self.width : (p + 1) * self.width]
            if self.dos:
                core.W_[self.rows] = columns
            else:
                core.w_[self.rows] = columns[:, 0]
