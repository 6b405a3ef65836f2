"""Multi-output polynomial networks (PNs) and factorization machines (FMs).

Blondel, Niculae, Otsuka and Ueda, "Multi-output polynomial networks and factorization
machines", NIPS 2017 (``../shared/papers/multi-output-polynomial-networks.txt``), by part:

- :mod:`core.mofm.model`: :class:`MultiOutputPN`, ``o(x) = sum_r sigma(h_r, z) v_r`` with a basis
  ``H`` shared by all outputs (eq 1), learned online by (Ada)SGD or in batch by Algorithm 1;
- :mod:`core.mofm.algorithm1`: Algorithm 1 (basis selection and corrective refits);
- :mod:`core.mofm.reservoir`: :class:`Reservoir`, a bounded sample of recent examples to refit
  on.

:class:`Problem` and :func:`batch_loss_grad` take a loss and an activation by code: ``LOSSES``
and ``ACTIVATIONS`` map their names to those codes.

>>> model = MultiOutputPN(n_features=2, classes=["a", "b"], n_basis=2)
>>> model.learn_one([1.0, 0.0], "a").predicted in ("a", "b")
True
"""

from core.kernels.mofm import ACTIVATIONS, LOSSES
from core.mofm.algorithm1 import FitIteration, Problem, batch_loss_grad, select_basis
from core.mofm.model import MultiOutputPN
from core.mofm.reservoir import Reservoir

__all__ = [
    "ACTIVATIONS",
    "LOSSES",
    "FitIteration",
    "MultiOutputPN",
    "Problem",
    "Reservoir",
    "batch_loss_grad",
    "select_basis",
]
