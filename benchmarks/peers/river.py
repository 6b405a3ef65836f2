"""River: its models read dicts ``{feature index: value}`` of a row's non-zeros."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.learners import OnePass, Timed
from benchmarks.streams import Stream

__all__ = ["RiverFM", "RiverTimed", "dicts", "fm_classifier", "pa_classifier"]


def dicts(stream: Stream) -> list[dict]:
    """River's inputs: one dict of the non-zeros per row (built once per stream)."""

    def build(stream: Stream) -> list[dict]:
        out = []
        for i in range(stream.n_rows):
            indices, values = stream.sparse_row(i)
            out.append(dict(zip(indices.tolist(), values.tolist(), strict=True)))
        return out

    return stream.view("river dicts", build)


class RiverTimed(Timed):
    """A River classifier timed per call: ``learn_one`` / ``predict_one`` on dicts, labels
    True for +1."""

    family = "river"
    requires = "river"

    def __init__(self, name: str, make: Callable[[], Any], rank: int | None = None):
        super().__init__(name, rank)
        self.make = make

    def prepare(self, stream: Stream) -> None:
        super().prepare(stream)
        self.xs = dicts(stream)
        self.ys = [bool(v > 0) for v in stream.labels]

    def new(self):
        return self.make()


def pa_classifier(C: float) -> Callable[[], Any]:
    """A factory of River's PA-I ``PAClassifier``."""

    def make():
        from river.linear_model import PAClassifier

        return PAClassifier(C=C, mode=1)

    return make


def fm_classifier(rank: int) -> Callable[[], Any]:
    """A factory of River's ``FMClassifier`` with ``rank`` factors (its default SGD)."""

    def make():
        from river.facto import FMClassifier

        return FMClassifier(n_factors=rank, seed=0)

    return make


class RiverFM(OnePass):
    """River's ``FMClassifier`` trained by plain SGD (one learning rate for the weights, the
    latent factors and the intercept), one ``learn_one`` pass over dicts."""

    name = "River FM"

    def __init__(self, params: dict, seed: int = 0):
        self.params, self.seed = params, seed

    def fit(self, stream: Stream) -> float:
        from river import facto, optim

        rate = self.params["learning_rate"]
        self.model = facto.FMClassifier(
            n_factors=self.params["n_factors"],
            weight_optimizer=optim.SGD(rate),
            latent_optimizer=optim.SGD(rate),
            intercept_lr=rate,
            seed=self.seed,
        )
        rows, labels = dicts(stream), (stream.labels > 0).tolist()
        start = time.perf_counter()
        for row, label in zip(rows, labels, strict=True):
            self.model.learn_one(row, label)
        return time.perf_counter() - start

    def proba(self, stream: Stream) -> np.ndarray:
        return np.array([self.model.predict_proba_one(row)[True] for row in dicts(stream)])

    def size(self) -> int:
        weights = sum(1 for w in self.model.weights.values() if w != 0)
        latents = sum(int(np.count_nonzero(v)) for v in self.model.latents.values())
        return weights + latents + int(self.model.intercept != 0)
