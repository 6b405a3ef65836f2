"""scikit-learn: per-call timings of its passive-aggressive learners, and the batch baselines
of the reproductions (a quadratic-kernel SVM and multinomial logistic regression)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.learners import Timed
from benchmarks.streams import Stream

__all__ = [
    "SklearnTimed",
    "logistic_regression",
    "passive_aggressive",
    "quadratic_svc",
    "sgd_pa1",
]


def one_row_inputs(stream: Stream) -> list:
    """scikit-learn's one-row inputs: 1 x d arrays (dense) or 1 x d CSR matrices."""

    def build(stream: Stream) -> list:
        if stream.dense is not None:
            return [stream.dense[i : i + 1] for i in range(stream.n_rows)]
        return [stream.csr[i] for i in range(stream.n_rows)]

    return stream.view("sklearn rows", build)


class SklearnTimed(Timed):
    """A scikit-learn linear classifier timed per call (one-row ``partial_fit`` / ``predict``)
    and on the whole CSR matrix in one ``partial_fit``."""

    family = "sklearn"
    requires = "sklearn"
    batch_label = "partial_fit (whole CSR)"

    def __init__(self, name: str, make: Callable[[], Any]):
        super().__init__(name)
        self.make = make

    def probe(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.make()

    def prepare(self, stream: Stream) -> None:
        super().prepare(stream)
        self.xs = one_row_inputs(stream)
        self.ys = stream.view(
            "sklearn labels", lambda s: [s.labels[i : i + 1] for i in range(s.n_rows)]
        )
        self.classes = np.array([-1.0, 1.0])

    def new(self):
        return self.make()

    def learn_one(self, model, n: int) -> None:
        xs, ys = self.xs[:n], self.ys[:n]
        model.partial_fit(xs[0], ys[0], classes=self.classes)
        learn = model.partial_fit
        for x, y in zip(xs[1:], ys[1:], strict=True):
            learn(x, y)

    def predict_one(self, model, n: int) -> None:
        predict = model.predict
        for x in self.xs[:n]:
            predict(x)

    def batch(self, model) -> None:
        model.partial_fit(self.stream.csr, self.stream.labels, classes=self.classes)


def sgd_pa1(C: float) -> Callable[[], Any]:
    """A factory of ``SGDClassifier`` with the hinge loss and PA-I steps (``eta0`` = C)."""

    def make():
        from sklearn.linear_model import SGDClassifier

        return SGDClassifier(
            loss="hinge", penalty=None, learning_rate="pa1", eta0=C, shuffle=False, random_state=0
        )

    return make


def passive_aggressive(C: float) -> Callable[[], Any]:
    """A factory of ``PassiveAggressiveClassifier`` (deprecated in scikit-learn 1.8)."""

    def make():
        from sklearn.linear_model import PassiveAggressiveClassifier

        return PassiveAggressiveClassifier(C=C, shuffle=False, random_state=0)

    return make


def quadratic_svc(X: np.ndarray, y: np.ndarray, C: float = 1.0, gamma: float | str = 1.0):
    """An SVM with the polynomial kernel ``(gamma x.x' + 1)^2`` (one-vs-one, as LIBSVM),
    fitted on (X, y). ``gamma = 1`` is the papers' quadratic kernel; scikit-learn's default
    ``"scale"`` is 1 / (n_features X.var())."""
    from sklearn.svm import SVC

    return SVC(kernel="poly", degree=2, coef0=1.0, gamma=gamma, C=C).fit(X, y)


def logistic_regression(X: np.ndarray, y: np.ndarray, C: float):
    """Multinomial logistic regression fitted on (X, y) (at most 3,000 iterations; a run that
    stops there is kept, without its convergence warning)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(C=C, max_iter=3000).fit(X, y)
