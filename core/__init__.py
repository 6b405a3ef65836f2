"""lorentztron core: online learners in numba, with no service dependencies.

The models share one protocol (:mod:`core.base`): ``learn_one`` / ``learn_many``,
``predict_one`` / ``predict_many``, ``score_one`` / ``score_many``, ``get_state`` /
``set_state`` and ``clone``; inputs are dense rows, sparse ``(indices, values)`` pairs or
named features hashed by :class:`FeatureHasher`.

>>> import core
>>> model = core.Calibrated(model=core.DoSClassifier(n_features=2, rank=2, classes=["no", "yes"]))
>>> for x, y in [([1.0, 0.0], "yes"), ([0.0, 1.0], "no")] * 20:
...     _ = model.learn_one(x, y)
>>> model.predict_one([1.0, 0.0]), 0.5 < model.predict_proba_one([1.0, 0.0]) <= 1.0
('yes', True)
"""

__version__ = "0.1.0"

from core.averaging import Averaged
from core.base import Estimator, Step, Steps
from core.binary import BatchClassifier, BinaryClassifier, BinaryModel
from core.calibration import Calibrated, IsotonicCalibrator, PlattCalibrator
from core.dos import DoSClassifier
from core.features import FeatureHasher
from core.linear import LinearPA
from core.mofm import MultiOutputPN, Reservoir
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.ordinal import OrdinalMcRank
from core.pqr import PQR
from core.registry import from_spec, from_state
from core.separation import (
    EllipsoidalClassifier,
    EllipsoidPerceptron,
    Perceptron,
    ShorPerceptron,
)

__all__ = [
    "Averaged",
    "BatchClassifier",
    "BinaryClassifier",
    "BinaryModel",
    "Calibrated",
    "DoSClassifier",
    "EllipsoidPerceptron",
    "EllipsoidalClassifier",
    "Estimator",
    "FeatureHasher",
    "IsotonicCalibrator",
    "LinearPA",
    "MultiOutputPN",
    "OneVsOne",
    "OneVsRest",
    "OrdinalMcRank",
    "PQR",
    "Perceptron",
    "PlattCalibrator",
    "Reservoir",
    "ShorPerceptron",
    "Step",
    "Steps",
    "__version__",
    "from_spec",
    "from_state",
]
