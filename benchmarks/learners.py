"""How a study drives a model under test, ours or a peer's (:mod:`benchmarks.peers`).

- :class:`Timed`: per-call costs. ``prepare(stream)`` builds the learner's own inputs once,
  then every timed run takes a fresh model from ``new()`` and loops ``learn_one`` /
  ``predict_one`` over the first rows, or hands the whole stream to ``batch``.
- :class:`OnePass`: one training pass, then probabilities and model size. ``fit(stream)``
  learns every example once, in order, and returns its seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.peers import import_problem
from benchmarks.streams import Stream

__all__ = ["OnePass", "Timed"]


class Timed:
    """One model under test for per-call timings.

    By default the model's own ``learn_one(x, y)`` / ``predict_one(x)`` run over the prepared
    ``xs`` / ``ys``, and the learner is available when ``requires`` imports and ``probe``
    passes.
    """

    #: "ours" or the peer library
    family = "ours"
    #: the module the learner needs (None: core's own)
    requires: str | None = None
    #: what ``batch`` means for this learner (None: no batch API)
    batch_label: str | None = None
    #: True: timed on the whole stream; False: on the prefix that fits a time budget
    whole_stream = False

    def __init__(self, name: str, rank: int | None = None):
        self.name = name
        self.rank = rank

    def unavailable(self) -> str | None:
        """Why this learner cannot run here, or None."""
        if self.requires is not None:
            problem = import_problem(self.requires)
            if problem:
                return problem
        try:
            self.probe()
        except Exception as error:  # a removed or renamed estimator, a broken install
            return f"{type(error).__name__}: {error}"
        return None

    def probe(self) -> None:
        """Build what a run needs once, so that a learner that cannot run says so early."""

    def prepare(self, stream: Stream) -> None:
        """Build this learner's inputs ``xs`` / ``ys`` for ``stream`` (before timing)."""
        self.stream = stream

    def new(self) -> Any:
        """A fresh model."""
        raise NotImplementedError

    def learn_one(self, model, n: int) -> None:
        """Learn the first ``n`` prepared rows one call at a time."""
        learn = model.learn_one
        for x, y in zip(self.xs[:n], self.ys[:n], strict=True):
            learn(x, y)

    def predict_one(self, model, n: int) -> None:
        """Predict the first ``n`` prepared rows one call at a time."""
        predict = model.predict_one
        for x in self.xs[:n]:
            predict(x)

    def batch(self, model) -> None:
        """Learn the whole stream in one call."""
        raise NotImplementedError

    def close(self, model) -> None:
        """Release what ``model`` holds outside Python (a peer's native workspace)."""

    def release(self) -> None:
        """Drop this stream's inputs."""
        for name in ("stream", "xs", "ys", "lines", "unlabelled"):
            self.__dict__.pop(name, None)


class OnePass:
    """One model under test for an accuracy table: one pass, then P(y = +1) and size."""

    name: str

    def fit(self, stream: Stream) -> float:
        """Learn every example of ``stream`` once, in order; the training seconds."""
        raise NotImplementedError

    def proba(self, stream: Stream) -> np.ndarray:
        """P(y = +1 | x) for every example of ``stream``."""
        raise NotImplementedError

    def size(self) -> int:
        """Non-zero parameters of the fitted model."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the fitted model holds outside Python."""
