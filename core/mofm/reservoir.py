"""A bounded sample of the recent examples of a stream, for refitting a model on them."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from core.config import FLOAT, INDEX
from core.features import Row, as_batch, as_row
from core.validation import check_choice, check_count, check_n_features

__all__ = ["Reservoir"]


class Reservoir:
    """A bounded sample of the examples a live model learns from, for ``MultiOutputPN.refit``.

    ``policy="window"`` (the default) keeps the ``size`` most recent examples in a ring buffer;
    ``policy="uniform"`` keeps a uniform sample of everything seen (Vitter's Algorithm R with a
    seeded generator: example n > size replaces a random slot with probability size / n).

    A window follows a drifting stream (a uniform sample of the whole history weighs an old
    example like the last one, so a refit would lag behind the drift) and keeps every example
    since a mark (:meth:`since`), so a model refitted on ``data()`` while the stream went on can
    catch up exactly: ``mark = reservoir.n_seen; X, y = reservoir.data()``, refit (``refit``
    returns a new model and leaves the old one serving), then ``new.learn_many(*reservoir.since(
    mark))`` before the new model replaces the old. ``"uniform"`` suits a stationary stream
    with rare labels, whose history a window would forget.

    Parameters
    ----------
    size : int
        Examples kept.
    n_features : int
        Dimension of the rows (validated as the model would).
    policy : {"window", "uniform"}
    seed : int
        Seed of the uniform sample's generator.

    Targets are stored as given and validated by the model when it learns.

    Examples
    --------
    >>> reservoir = Reservoir(size=2, n_features=3)
    >>> for k in range(3):
    ...     reservoir.add([float(k), 0.0, 1.0], k)
    >>> X, y = reservoir.data()
    >>> X.shape, y
    ((2, 3), [1, 2])
    """

    def __init__(self, size: int, n_features: int, *, policy: str = "window", seed: int = 0):
        self.size = check_count("size", size)
        self.n_features = check_n_features(n_features)
        check_choice("policy", policy, ("window", "uniform"))
        self.policy = policy
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._rows: list[Row | None] = [None] * self.size
        self._targets: list[Any] = [None] * self.size
        self._arrival = np.full(self.size, -1, dtype=INDEX)
        self.n_seen = 0

    def __len__(self) -> int:
        return min(self.n_seen, self.size)

    def add(self, x, y) -> None:
        """Offer one example (validated as a row of ``n_features`` features)."""
        row = as_row(x, self.n_features)
        n = self.n_seen
        if n < self.size:
            slot = n
        elif self.policy == "window":
            slot = n % self.size
        else:
            slot = int(self._rng.integers(n + 1))
            if slot >= self.size:
                self.n_seen += 1
                return
        self._rows[slot] = (row[0].copy(), row[1].copy())
        self._targets[slot] = y
        self._arrival[slot] = n
        self.n_seen += 1

    def add_many(self, X, y) -> None:
        """``add`` every row of a batch, in order."""
        batch = as_batch(X, self.n_features)
        targets = list(y)
        if len(targets) != batch.n_rows:
            raise ValueError(f"got {len(targets)} targets for {batch.n_rows} rows")
        for i in range(batch.n_rows):
            self.add(batch.row(i), targets[i])

    def _select(self, keep: np.ndarray):
        order = keep[np.argsort(self._arrival[keep], kind="stable")]
        X = sp.csr_matrix((len(order), self.n_features))
        if len(order):
            rows = [self._rows[i] for i in order]
            indptr = np.zeros(len(order) + 1, dtype=INDEX)
            np.cumsum([len(r[0]) for r in rows], out=indptr[1:])
            X = sp.csr_matrix(
                (
                    np.concatenate([r[1] for r in rows]),
                    np.concatenate([r[0] for r in rows]),
                    indptr,
                ),
                shape=(len(order), self.n_features),
            )
        return X, [self._targets[i] for i in order]

    def data(self):
        """The sample in arrival order: (sparse matrix (len, n_features), list of targets)."""
        return self._select(np.flatnonzero(self._arrival >= 0))

    def since(self, mark: int):
        """The examples that arrived after ``n_seen`` was ``mark`` (``policy="window"`` only;
        raises ``ValueError`` if some were already overwritten)."""
        if self.policy != "window":
            raise ValueError("since() needs policy='window' (a uniform sample drops examples)")
        if not 0 <= mark <= self.n_seen:
            raise ValueError(f"mark must be in [0, {self.n_seen}], got {mark}")
        if self.n_seen - mark > self.size:
            raise ValueError(
                f"{self.n_seen - mark} examples arrived since the mark but the window holds "
                f"{self.size}"
            )
        return self._select(np.flatnonzero(self._arrival >= mark))

    def get_state(self) -> dict:
        """The sample as arrays (slot order: CSR ``indptr``/``indices``/``values``, ``arrival``,
        -1 for an empty slot), the ``targets`` as a list, ``n_seen`` and the generator's state,
        so that a snapshot can carry the reservoir and ``set_state`` rebuild it exactly."""
        empty = (np.zeros(0, dtype=INDEX), np.zeros(0, dtype=FLOAT))
        rows = [row if row is not None else empty for row in self._rows]
        indptr = np.zeros(self.size + 1, dtype=INDEX)
        np.cumsum([len(r[0]) for r in rows], out=indptr[1:])
        return {
            "indptr": indptr,
            "indices": np.concatenate([r[0] for r in rows]).astype(INDEX, copy=False),
            "values": np.concatenate([r[1] for r in rows]).astype(FLOAT, copy=False),
            "arrival": self._arrival.copy(),
            "targets": list(self._targets),
            "n_seen": self.n_seen,
            "rng": self._rng.bit_generator.state,
        }

    def set_state(self, state: dict) -> None:
        """Load ``get_state()``'s output (ValueError if it does not fit this reservoir)."""
        indptr, arrival = np.asarray(state["indptr"]), np.asarray(state["arrival"])
        targets = list(state["targets"])
        if indptr.shape != (self.size + 1,) or arrival.shape != (self.size,):
            raise ValueError(f"reservoir state of another size (this one holds {self.size})")
        if len(targets) != self.size or indptr[-1] != len(state["values"]):
            raise ValueError("inconsistent reservoir state")
        rows: list[Row | None] = []
        for i in range(self.size):
            start, stop = indptr[i], indptr[i + 1]
            if arrival[i] < 0:
                rows.append(None)
                continue
            row = (
                np.array(state["indices"][start:stop], dtype=INDEX),
                np.array(state["values"][start:stop], dtype=FLOAT),
            )
            if row[0].size and (row[0].min() < 0 or row[0].max() >= self.n_features):
                raise ValueError("reservoir row outside the feature range")
            rows.append(row)
        self._rows, self._targets = rows, targets
        self._arrival = arrival.astype(INDEX, copy=True)
        self.n_seen = int(state["n_seen"])
        self._rng.bit_generator.state = state["rng"]
