"""Linear and ellipsoidal separation (Kharechko, PhD thesis, Southampton 2009).

``../shared/papers/linear-and-ellipsoidal-separation-thesis.txt``, by family:

- :mod:`core.separation.online`: online learners of the model protocol (:class:`Perceptron`,
  :class:`ShorPerceptron`, :class:`EllipsoidPerceptron`);
- :mod:`core.separation.oracles`: sets of constraints seen through a separation oracle
  (:class:`FiniteConstraints`, :class:`SemidefiniteConstraints`, :func:`psd_counterexample`);
- :mod:`core.separation.algorithms`: batch algorithms over an oracle (:func:`ellipsoid_method`,
  :func:`rescaling_perceptron`, :func:`parametric_rescaling_perceptron`,
  :func:`modified_perceptron`);
- :mod:`core.separation.ellipsoidal`: the maximal-separation-ratio
  :class:`EllipsoidalClassifier` (a batch model) and :class:`GramSchmidtFeatures`.

>>> model = Perceptron(n_features=2, classes=["no", "yes"])
>>> _ = model.learn_many([[1.0, 1.0], [-1.0, -1.0]], ["yes", "no"])
>>> model.predict_one([2.0, 1.0])
'yes'
"""

from core.separation.algorithms import (
    SeparationResult,
    ellipsoid_method,
    modified_perceptron,
    parametric_rescaling_perceptron,
    rescaling_perceptron,
)
from core.separation.ellipsoidal import (
    EllipsoidalClassifier,
    GramSchmidtFeatures,
    gsk_transform,
    solve_max_separation_ratio,
)
from core.separation.online import (
    MAX_DILATION_FEATURES,
    EllipsoidPerceptron,
    Perceptron,
    ShorPerceptron,
    ellipsoid_factors,
)
from core.separation.oracles import (
    FiniteConstraints,
    Oracle,
    SemidefiniteConstraints,
    maxcut_constraints,
    psd_counterexample,
    read_sdpa,
)

__all__ = [
    "MAX_DILATION_FEATURES",
    "EllipsoidPerceptron",
    "EllipsoidalClassifier",
    "FiniteConstraints",
    "GramSchmidtFeatures",
    "Oracle",
    "Perceptron",
    "SemidefiniteConstraints",
    "SeparationResult",
    "ShorPerceptron",
    "ellipsoid_factors",
    "ellipsoid_method",
    "gsk_transform",
    "maxcut_constraints",
    "modified_perceptron",
    "parametric_rescaling_perceptron",
    "psd_counterexample",
    "read_sdpa",
    "rescaling_perceptron",
    "solve_max_separation_ratio",
]
