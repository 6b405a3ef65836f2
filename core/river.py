"""River interoperability: any core model as a River estimator (the ``river`` extra).

``pip install 'lorentztron[river]'``. :class:`RiverClassifier` and :class:`RiverRegressor` wrap
a core model so that ``river.evaluate.progressive_val_score``, ``river.compose`` pipelines and
River's own estimator checks (``river.checks``) run on it. Features are River's dicts, hashed
into the model's ``n_features`` buckets by :class:`core.features.FeatureHasher` (names are
turned into strings; a string value is one-hot). Labels are River's:

- a binary model without ``classes`` learns ``False`` / ``True`` (River's binary labels);
  a binary model without probabilities of its own is wrapped in
  :class:`core.calibration.Calibrated`, so that ``predict_proba_one`` is calibrated;
- a one-vs-rest or one-vs-one reduction grows with the labels it meets (River's classifiers
  learn their classes from the stream): a new class gets fresh binary models, the models of
  the classes already seen are kept;
- any other classifier (e.g. ``MultiOutputPN``) keeps its ``classes``.

>>> from river import compose, evaluate, metrics, preprocessing
>>> from core.linear import LinearPA
>>> model = compose.Pipeline(
...     preprocessing.StandardScaler(), RiverClassifier(LinearPA(n_features=64, mode="pa1", C=0.1))
... )
>>> dataset = [({"x": float(i % 7) - 3.0, "z": 1.0}, i % 7 > 3) for i in range(300)]
>>> evaluate.progressive_val_score(dataset, model, metrics.Accuracy())
Accuracy: 98.33%
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from river import base as river_base

from core.base import Estimator
from core.binary import BinaryClassifier
from core.calibration import Calibrated
from core.features import FeatureHasher, Row
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.pqr import PQR

__all__ = ["RiverClassifier", "RiverRegressor"]

#: the labels a binary model without ``classes`` learns under River
RIVER_BINARY = (False, True)


def _hashed(hasher: FeatureHasher, x: dict) -> Row:
    return hasher.transform_one({str(name): value for name, value in x.items()})


def _with_classes(model: BinaryClassifier, classes) -> BinaryClassifier:
    """A fresh copy of a binary model with ``classes`` (the wrapped model's, for Calibrated)."""
    params = model.get_params()
    if isinstance(model, Calibrated):
        return Calibrated(**{**params, "model": _with_classes(model.model, classes)})
    return type(model)(**{**params, "classes": classes})


def _gives_probabilities(model: Estimator) -> bool:
    try:
        model.proba_from_scores([0.0])
    except ValueError:
        return False
    return True


class RiverClassifier(river_base.Classifier):
    """A core classifier as a River classifier (see the module docstring for labels).

    Parameters
    ----------
    model : Estimator
        A core classifier (a template: the adapter learns a fresh copy of it).
    calibration : {"platt", "isotonic"}
        The calibrator attached to a binary model without probabilities of its own.

    Attributes
    ----------
    model_ : Estimator or None
        The model that learns; for a reduction, None until two classes were seen.

    Examples
    --------
    >>> from core.dos import DoSClassifier
    >>> model = RiverClassifier(DoSClassifier(n_features=32, rank=2))
    >>> for i in range(200):
    ...     model.learn_one({"a": float(i % 2), "b": 1.0}, i % 2 == 1)
    >>> x = {"a": 1.0, "b": 1.0}
    >>> model.predict_one(x), round(model.predict_proba_one(x)[True], 2)
    (True, 0.97)
    """

    def __init__(self, model: Estimator, calibration: str = "platt"):
        self.model = model
        self.calibration = calibration
        if not isinstance(model, Estimator) or getattr(model, "task", "binary") != "binary":
            raise ValueError(f"model must be a classifier of core, got {model!r}")
        self._hasher = FeatureHasher(model.n_features)
        self._growing = isinstance(model, OneVsRest | OneVsOne)
        self._seen: list[Hashable] = []  # a growing reduction's first label
        self.model_: Estimator | None = None
        if isinstance(model, BinaryClassifier):
            binary = model if model.classes is not None else _with_classes(model, RIVER_BINARY)
            if not _gives_probabilities(binary):
                binary = Calibrated(model=binary, method=calibration)
            self.model_ = binary.clone()
        elif self._growing:
            base = model.base
            if not _gives_probabilities(base):
                base = Calibrated(model=base, method=calibration)
            self._base = base
            self._seen = []
        else:
            self.model_ = model.clone()

    @classmethod
    def _unit_test_params(cls):
        yield {"model": LinearPA(n_features=64, mode="pa1", C=0.1)}
        yield {"model": OneVsRest(base=LinearPA(n_features=64), classes=[0, 1])}

    @property
    def _multiclass(self) -> bool:
        return not isinstance(self.model, BinaryClassifier)

    @property
    def classes_(self) -> tuple:
        """The labels known so far."""
        if self.model_ is None:
            return tuple(self._seen)
        return tuple(self.model_.classes_)

    # -- learning -----------------------------------------------------------------------------
    def _grow(self, y) -> None:
        """A growing reduction meets label ``y``: add the class, keep the models it has."""
        if self.model_ is None:
            if not self._seen:
                self._seen.append(y)
                return
            if y == self._seen[0]:
                return
            self.model_ = type(self.model)(base=self._base, classes=[self._seen[0], y])
            return
        old = self.model_
        new = type(old)(base=self._base, classes=[*old.classes_, y])
        if isinstance(old, OneVsRest):
            new.models_[: len(old.models_)] = old.models_
        else:  # pair (i, j) of the old classes keeps its model
            index = {pair: p for p, pair in enumerate(new.pairs_)}
            for p, pair in enumerate(old.pairs_):
                new.models_[index[pair]] = old.models_[p]
        new.n_seen_ = old.n_seen_
        self.model_ = new

    def learn_one(self, x: dict, y) -> None:
        """Learn one example (a dict of features and a label)."""
        if self._growing and y not in self.classes_:
            self._grow(y)
        if self.model_ is not None:
            self.model_.learn_one(_hashed(self._hasher, x), y)

    # -- prediction ---------------------------------------------------------------------------
    def predict_proba_one(self, x: dict) -> dict[Hashable, float]:
        """``{label: probability}`` over the labels known so far."""
        if self.model_ is None:
            return {label: 1.0 for label in self._seen}
        row = _hashed(self._hasher, x)
        classes = self.model_.classes_
        if isinstance(self.model_, BinaryClassifier):
            p = float(self.model_.predict_proba_one(row))
            return {classes[0]: 1.0 - p, classes[1]: p}
        return dict(zip(classes, map(float, self.model_.predict_proba_one(row)), strict=True))

    def predict_one(self, x: dict) -> Any:
        """The core model's prediction (None before a growing reduction has seen a label)."""
        if self.model_ is None:
            return self._seen[0] if self._seen else None
        return self.model_.predict_one(_hashed(self._hasher, x))


class RiverRegressor(river_base.Regressor):
    """A core regression model (e.g. ``PQR(task="regression")``) as a River regressor.

    Parameters
    ----------
    model : Estimator
        A core model that learns real targets (a template: the adapter learns a copy of it).

    Attributes
    ----------
    model_ : Estimator

    Examples
    --------
    >>> model = RiverRegressor(PQR(n_features=16, k=0, task="regression", alpha=0.5))
    >>> for i in range(500):
    ...     model.learn_one({"x": (i % 10) / 10}, 2.0 * (i % 10) / 10 + 1.0)
    >>> round(model.predict_one({"x": 0.5}), 1)
    2.0
    """

    def __init__(self, model: Estimator):
        self.model = model
        if getattr(model, "task", None) != "regression":
            raise ValueError(f"model must be a regression model of core, got {model!r}")
        self._hasher = FeatureHasher(model.n_features)
        self.model_ = model.clone()

    @classmethod
    def _unit_test_params(cls):
        yield {"model": PQR(n_features=64, k=2, task="regression", warmup=20, alpha=0.05)}

    def learn_one(self, x: dict, y: float) -> None:
        """Learn one example (a dict of features and a number)."""
        self.model_.learn_one(_hashed(self._hasher, x), float(y))

    def predict_one(self, x: dict) -> float:
        """The model's prediction."""
        return float(self.model_.predict_one(_hashed(self._hasher, x)))
