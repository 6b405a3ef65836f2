"""The example streams the studies share: one :class:`Stream` type that every learner, ours or a
peer's, reads in its own input form, and the streams built from the data sets and generators.

- :func:`mnist_stream`: MNIST test digits as dense rows in [0, 1], labelled digit < 5;
- :func:`sparse_stream`: synthetic sparse rows with heavy-tailed (or uniform) feature ids,
  labelled by a hidden rank-2 difference of squares;
- :func:`hashed_stream`: click-log-like rows, Zipf-distributed categories hashed to columns,
  labelled by a random logistic model;
- :func:`load_a9a`: the a9a training or test file (UCI Adult, 123 binary features).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from core.datasets import data_dir, load_mnist_test, load_svmlight
from core.features import as_batch

__all__ = [
    "A9A_FEATURES",
    "Stream",
    "hashed_stream",
    "heavy_tailed_indices",
    "load_a9a",
    "mnist_stream",
    "sparse_stream",
]

#: columns of a9a
A9A_FEATURES = 123


@dataclass
class Stream:
    """Examples every learner sees in the same order: a canonical CSR matrix (sorted unique
    indices per row) and labels in {-1, +1} (or regression targets); ``dense`` holds the rows
    of a dense stream.

    Each learner's own input form (our rows, River's dicts, Vowpal Wabbit's text lines, ...)
    is built once per stream by :meth:`view`, before anything is timed.
    """

    name: str
    csr: sp.csr_matrix
    labels: np.ndarray
    description: str = ""
    dense: np.ndarray | None = None
    _views: dict = field(default_factory=dict, repr=False)

    @property
    def n_rows(self) -> int:
        return self.csr.shape[0]

    @property
    def n_features(self) -> int:
        return self.csr.shape[1]

    @property
    def mean_nnz(self) -> float:
        return self.csr.nnz / self.n_rows

    def view(self, key: str, build: Callable[[Stream], Any]) -> Any:
        """``build(self)``, computed once and kept under ``key``."""
        if key not in self._views:
            self._views[key] = build(self)
        return self._views[key]

    def drop_views(self) -> None:
        """Forget every view (they can be large)."""
        self._views.clear()

    def sparse_row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Row ``i``'s non-zeros: (indices, values) of the CSR matrix, without copies."""
        start, stop = self.csr.indptr[i], self.csr.indptr[i + 1]
        return self.csr.indices[start:stop], self.csr.data[start:stop]

    def rows(self) -> list:
        """Our per-example inputs: float64 arrays (dense) or (int64, float64) tuples."""
        return self.view("rows", _our_rows)

    def int_labels(self) -> list[int]:
        return self.view("int_labels", lambda s: [int(v) for v in s.labels])

    def prefix(self, n_rows: int) -> Stream:
        """The first ``n_rows`` examples, as a stream of their own."""
        dense = None if self.dense is None else self.dense[:n_rows]
        return Stream(f"{self.name}_{n_rows}", self.csr[:n_rows], self.labels[:n_rows], dense=dense)

    @classmethod
    def from_rows(cls, name: str, rows: Sequence, labels: np.ndarray, n_features: int) -> Stream:
        """A sparse stream of our (indices, values) rows, which stay its ``rows()`` view."""
        batch = as_batch(list(rows), n_features)
        csr = sp.csr_matrix(
            (batch.values, batch.indices, batch.indptr), shape=(batch.n_rows, n_features)
        )
        stream = cls(name, csr, np.asarray(labels))
        stream._views["rows"] = list(rows)
        return stream


def _our_rows(stream: Stream) -> list:
    if stream.dense is not None:
        return [np.array(row, dtype=np.float64) for row in stream.dense]
    return [
        (indices.astype(np.int64), values.astype(np.float64))
        for indices, values in map(stream.sparse_row, range(stream.n_rows))
    ]


def mnist_stream(n_rows: int) -> Stream:
    """The first ``n_rows`` MNIST test digits, dense 784-d in [0, 1], +1 for digits 0-4."""
    images, digits = load_mnist_test()
    dense = images[:n_rows].reshape(-1, 28 * 28).astype(np.float64) / 255.0
    return Stream(
        name="mnist",
        csr=sp.csr_matrix(dense),
        labels=np.where(digits[:n_rows] < 5, 1.0, -1.0),
        description=f"MNIST test digits, dense 784-d in [0, 1], label digit < 5 ({n_rows} rows)",
        dense=dense,
    )


def heavy_tailed_indices(
    rng: np.random.Generator, size: tuple[int, int], n_features: int, permutation: np.ndarray
) -> np.ndarray:
    """Feature ids with P(rank r) ~ 1 / (r + 256), r < n_features, scattered by a permutation
    (as hashing scatters them)."""
    offset = 256.0
    u = rng.random(size)
    ranks = np.floor(offset * ((n_features + offset) / offset) ** u - offset).astype(np.int64)
    return permutation[np.minimum(ranks, n_features - 1)]


def sparse_stream(
    name: str, n_rows: int, nnz: int, n_features: int, seed: int, uniform: bool = False
) -> Stream:
    """Synthetic rows of about ``nnz`` non-zeros, values N(0, 1 / nnz), labelled by the sign of
    a hidden rank-2 difference of squares ``|A x|^2 - |B x|^2``."""
    rng = np.random.default_rng(seed)
    if uniform:
        drawn = rng.integers(0, n_features, size=(n_rows, nnz))
    else:
        drawn = heavy_tailed_indices(rng, (n_rows, nnz), n_features, rng.permutation(n_features))
    drawn.sort(axis=1)
    keep = np.ones(drawn.shape, dtype=bool)
    keep[:, 1:] = drawn[:, 1:] != drawn[:, :-1]
    values = rng.standard_normal(drawn.shape) / np.sqrt(nnz)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    csr = sp.csr_matrix((values[keep], drawn[keep], indptr), shape=(n_rows, n_features))
    hidden_plus = rng.standard_normal((n_features, 2))
    hidden_minus = rng.standard_normal((n_features, 2))
    score = ((csr @ hidden_plus) ** 2).sum(axis=1) - ((csr @ hidden_minus) ** 2).sum(axis=1)
    law = "uniform" if uniform else "heavy-tailed"
    return Stream(
        name=name,
        csr=csr,
        labels=np.where(score >= 0.0, 1.0, -1.0),
        description=(
            f"synthetic sparse, ~{nnz} non-zeros of 2^{int(np.log2(n_features))} features, "
            f"{law} feature ids, hidden rank-2 DoS label ({n_rows} rows)"
        ),
    )


def hashed_stream(
    n_rows: int, n_fields: int = 40, n_features: int = 2**20, seed: int = 0, name: str = "hashed"
) -> Stream:
    """About ``n_fields`` non-zeros (value 1) per row out of ``n_features``: field f takes a
    Zipf-distributed value (exponent 1.3) and the pair (f, value) is hashed to a column, as
    categorical click logs are. Labels come from a random logistic model of the columns."""
    rng = np.random.default_rng(seed)
    vocabulary = rng.integers(10, 100_000, n_fields)
    values = np.minimum(rng.zipf(1.3, (n_rows, n_fields)) - 1, vocabulary - 1)
    keys = np.arange(n_fields, dtype=np.int64) * 1_000_003 + values
    columns = (keys * 2_654_435_761 + 97) % n_features
    rows = np.repeat(np.arange(n_rows), n_fields)
    X = sp.csr_matrix((np.ones(rows.shape[0]), (rows, columns.ravel())), shape=(n_rows, n_features))
    X.data[:] = 1.0  # a hash collision inside a row keeps the value 1
    X.sort_indices()
    weights = rng.standard_normal(n_features) * 0.3
    logits = X @ weights
    y = np.where(rng.random(n_rows) < 1.0 / (1.0 + np.exp(-logits)), 1.0, -1.0)
    return Stream(name, X, y)


def load_a9a(part: str = "a9a", n_rows: int | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """``a9a`` (training) or ``a9a.t`` (test) from ``../shared/data/a9a``, optionally its first
    ``n_rows`` rows; labels -1.0 / +1.0 (income above 50K)."""
    X, y = load_svmlight(data_dir() / "a9a" / part, n_features=A9A_FEATURES)
    if n_rows:
        X, y = X[:n_rows], y[:n_rows]
    return X, y
