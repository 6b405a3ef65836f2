"""Numba kernels: functions over arrays and scalars only, one module per model family.

The kernels are core's own (the models own the arrays and call them), except the public
entries below: the per-example steps and scores of the passive-aggressive classifiers, for a
caller that runs many models in one compiled loop of its own (a one-vs-one vote over 45
stacked pair models, say) or times a kernel apart from the Python around it. They are
``@numba.njit`` functions, callable from Python and from other compiled code, over the
models' storage:

- linear PA: ``w`` of shape (n_features + 1,), bias last (``LinearPA.w_``), and ``bias``
  1.0 (intercept) or 0.0;
- DoS: ``W`` of shape (n_features + 1, 2 rank), feature-major: row ``j`` holds column ``j``
  of U then of V, the bias row last (``DoSClassifier.U_`` and ``V_`` are transposed views of
  its halves, so ``W = [U_.T | V_.T]``), float64 or float32 (``DoSClassifier.dtype``); ``h``
  is scratch of length 2 rank (float64), ``t`` the number of examples learned so far;
- a sparse row as sorted ``indices`` (int64) and ``values`` (float64); ``mode`` 0 / 1 / 2 for
  PA / PA-I / PA-II and ``C`` as :func:`core.validation.check_pa_params` returns them.

A step updates the weights in place and returns ``(status, score before the update, step
size)``; ``status`` is ``STEP_OK``, or ``STEP_NOT_FINITE`` when the score or squared norm
overflows float64 or the update would overflow the weights' dtype (nothing is then changed).
A batch kernel returns ``(first failed row or -1, rows learned)`` and fills its ``scores``
and step-size arrays.

>>> import numpy as np
>>> w = np.zeros(3)
>>> linear_step(w, np.array([0]), np.array([1.0]), 1.0, 1.0, 0, 1.0)
(0, 0.0, 0.5)
>>> float(linear_score(w, np.array([0]), np.array([1.0]), 1.0))
1.0
"""

from core.kernels.dos import STEP_NOT_FINITE, STEP_OK
from core.kernels.dos import _dos_learn_batch as dos_learn_batch
from core.kernels.dos import _dos_learn_one as dos_learn_one
from core.kernels.dos import _dos_score as dos_score
from core.kernels.dos import _dos_score_into as dos_score_into
from core.kernels.dos import _dos_step as dos_step
from core.kernels.linear import _linear_learn_batch as linear_learn_batch
from core.kernels.linear import _linear_score as linear_score
from core.kernels.linear import _linear_step as linear_step

__all__ = [
    "STEP_NOT_FINITE",
    "STEP_OK",
    "dos_learn_batch",
    "dos_learn_one",
    "dos_score",
    "dos_score_into",
    "dos_step",
    "linear_learn_batch",
    "linear_score",
    "linear_step",
]
