"""Linear and ellipsoidal separation (Kharechko, PhD thesis, Southampton 2009).

``../shared/papers/linear-and-ellipsoidal-separation-thesis.txt``. Three families:

**Online learners** (the model protocol of :mod:`core.base`, labels -1 / +1). An example
``(x, y)`` is mapped to the thesis's setting of unit vectors to be separated from the origin
(section 2.3): ``a = y z / |z|`` with the augmented input ``z = [x, 1]`` (``z = [x, 0]`` without
an intercept). A weight vector ``w`` separates the stream when ``w . a > 0`` for every ``a``,
i.e. ``sign(w . z) = y``. Scores are ``w . z / |z|`` (scale-free; bounded by ``|w|``).

- :class:`Perceptron`: the normalized perceptron (Algorithm 1), ``w <- w + a`` on a mistake.
- :class:`EllipsoidPerceptron`: the ellipsoid method written as a perceptron (Algorithm 2), with
  the rounding-error safeguard of footnote 9, the volume estimate ``rho_t``, an online
  "unseparable" stop and a guaranteed score interval from the current ellipsoid.
- :class:`ShorPerceptron`: Shor's space-dilation perceptron (eq 2.5) for any dilation coefficient:
  ``lambda = sqrt((n + 1) / (n - 1))`` with the ellipsoid step schedule is Algorithm 2 (without
  the stop), ``lambda = 1/2`` is the Dunagan-Vempala contraction, ``lambda = 1`` Algorithm 1.

**Batch algorithms** over a set of constraints given by a separation oracle
(:class:`FiniteConstraints`, :class:`SemidefiniteConstraints`): :func:`ellipsoid_method`
(Algorithm 2), :func:`rescaling_perceptron` (Dunagan-Vempala, Algorithm 4),
:func:`parametric_rescaling_perceptron` (Algorithm 6 with Algorithm 5 or, for semidefinite
constraints, the unnormalized Algorithm 8), :func:`modified_perceptron` (Algorithms 3, 5, 8) and
:func:`psd_counterexample` (Algorithm 7, the pivoted incomplete Cholesky oracle).

**The ellipsoidal classifier** (chapters 7-8): :class:`EllipsoidalClassifier` solves the
maximal-separation-ratio SDP (eq 7.9 / 8.1) with cvxpy + Clarabel and classifies with eq (8.2),
optionally after :class:`GramSchmidtFeatures` (the GSK extraction of chapter 8).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import scipy.sparse as sp

from core.base import (
    BinaryClassifier,
    Step,
    Steps,
    check_binary_labels,
)
from core.features import CSRBatch, as_batch, check_n_features
from core.kernels.separation import (
    FROZEN,
    RESTARTED,
    UPDATED,
    _ellipsoid_interval,
    _ellipsoid_interval_batch,
    _ellipsoid_learn_batch,
    _ellipsoid_restart,
    _ellipsoid_step,
    _perceptron_learn_batch,
    _perceptron_step,
    _psd_counterexample,
    _sep_dilation_update,
    _sep_score,
    _sep_score_batch,
    _shor_learn_batch,
    _shor_step,
)

#: Largest ``n_features`` of the learners that keep a dense ``(n + 1) x (n + 1)`` matrix
#: (:class:`EllipsoidPerceptron`, :class:`ShorPerceptron`): the state is ``8 (n + 1)^2`` bytes
#: (32 MB at 2000) and an update costs about ``4 (n + 1)^2`` flops (about 10 ms at 2000); the
#: ellipsoid method's mistake bound ``2 n^2 log(1 / rho)`` (Theorem 2.9) grows as fast.
MAX_DILATION_FEATURES = 2000
_POLICIES = ("reset", "freeze")


def _check_dilation_size(n_features: int) -> None:
    """The space-dilation learners keep an n x n matrix: refuse sizes past the stated limit."""
    if n_features > MAX_DILATION_FEATURES:
        raise ValueError(
            f"n_features={n_features} exceeds MAX_DILATION_FEATURES="
            f"{MAX_DILATION_FEATURES} (the state and each update are O(n^2))"
        )


def _check_flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def _check_positive(name: str, value, upper: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if value <= 0 or (upper is not None and value >= upper):
        bound = f" below {upper}" if upper is not None else ""
        raise ValueError(f"{name} must be positive{bound}, got {value!r}")
    return float(value)


def _steps(scores: np.ndarray, labels: np.ndarray, status: np.ndarray) -> Steps:
    """Perceptron loss ``max(0, -y score)`` (the hinge of eq 2.3) and whether w moved."""
    learned = (status == UPDATED) | (status == RESTARTED)
    return Steps(scores, np.maximum(0.0, -labels * scores), learned)


def ellipsoid_factors(n: int, safeguard: bool = True) -> tuple[float, float, float]:
    """``(beta, growth, log_shrink)`` of the ellipsoid method in ``n >= 2`` dimensions.

    ``B <- B (I + (beta - 1) b b^T)`` with ``beta = sqrt(n^2 - 1) / (n + 1)`` (Algorithm 2, i.e.
    the dilation coefficient ``lambda = 1 / beta = sqrt((n + 1) / (n - 1))``), the step grows by
    ``n / sqrt(n^2 - 1)``, or with the rounding-error safeguard (footnote 9, Groetschel et al.
    1988) by ``sqrt(2 n^2 + 3) / (n sqrt 2)``: the new ellipsoid is the Loewner-John ellipsoid
    of the half-ellipsoid blown up by ``(2 n^2 + 3) / (2 n^2)`` instead of ``n^2 / (n^2 - 1)``,
    so rounding errors cannot cut off feasible points. ``log_shrink = log growth + log(beta) / n``
    is the per-update change of ``log rho_t`` (rho_t: the n-th root of the ellipsoid's volume
    over the unit ball's; Algorithm 2's ``rho_{t+1}`` recursion when ``safeguard`` is False).

    >>> beta, growth, shrink = ellipsoid_factors(2, safeguard=False)
    >>> round(beta, 6), round(growth, 6), round(math.exp(shrink), 6)
    (0.57735, 1.154701, 0.877383)
    """
    if n < 2:
        raise ValueError(f"the ellipsoid method needs at least 2 dimensions, got {n}")
    beta = math.sqrt(n * n - 1.0) / (n + 1.0)
    growth = (
        math.sqrt(2.0 * n * n + 3.0) / (n * math.sqrt(2.0))
        if safeguard
        else n / math.sqrt(n * n - 1.0)
    )
    return beta, growth, math.log(growth) + math.log(beta) / n


# =============================================================================================
# Online learners
# =============================================================================================
class _Separator(BinaryClassifier):
    """Shared plumbing: the augmented input, scores ``w . z / |z|``, counters."""

    n_features: int
    fit_intercept: bool
    w_: np.ndarray

    def _init_common(self, n_features: int, fit_intercept: bool) -> None:
        check_n_features(n_features)
        _check_flag("fit_intercept", fit_intercept)
        self._bias = 1.0 if fit_intercept else 0.0
        self._dim = n_features + int(fit_intercept)
        self.w_ = np.zeros(self._dim)
        self.n_seen_ = 0
        self.n_updates_ = 0

    def _score_row(self, indices, values) -> float:
        return _sep_score(self.w_, indices, values, self._bias)

    def score_batch(self, batch: CSRBatch) -> np.ndarray:
        scores = np.empty(batch.n_rows)
        _sep_score_batch(self.w_, batch.indptr, batch.indices, batch.values, self._bias, scores)
        return scores

    def status(self) -> dict[str, Any]:
        """Counters (JSON-serialisable) for a service's model status."""
        return {
            "n_seen": self.n_seen_,
            "n_updates": self.n_updates_,
            "weight_norm": float(np.linalg.norm(self.w_)),
        }


class Perceptron(_Separator):
    """The normalized perceptron (Algorithm 1 of the thesis; Rosenblatt 1958).

    Each example ``(x, y)``, ``y`` in {-1, +1}, is the unit vector ``a = y z / |z|`` of the
    augmented input ``z = [x, 1]`` (``[x, 0]`` without intercept); on a mistake,
    ``w . a <= 0``, the update is ``w <- w + a``. On a stream separable with margin ``rho``
    (some unit ``u`` has ``u . a >= rho`` for every example) it makes at most ``1 / rho^2``
    updates (Novikoff, Theorem 2.7). A zero ``z`` (no intercept, empty row) carries no
    constraint and is passive. Scores are ``w . z / |z|``; any finite input is accepted (the
    norm is taken after dividing by the largest entry).

    Parameters
    ----------
    n_features : int
    fit_intercept : bool
        Augment with a constant 1 (the thesis's separation from the origin of ``[x, 1]``).

    Attributes
    ----------
    w_ : ndarray of shape (n_features + fit_intercept,)
        Weights, bias last. Zero at start.
    n_seen_, n_updates_ : int
        Examples learned and mistakes (updates) among them.

    Examples
    --------
    >>> model = Perceptron(n_features=2)
    >>> model.learn_one([3.0, 4.0], 1)
    Step(score=0.0, loss=0.0, aggressive=True)
    >>> model.w_ * 26**0.5
    array([3., 4., 1.])
    >>> model.predict_one([1.0, 1.0]), model.predict_one([-3.0, -4.0])
    (1, -1)
    """

    _arrays = ("w_",)
    _scalars = ("n_seen_", "n_updates_")

    def __init__(self, *, n_features: int, fit_intercept: bool = True):
        self.n_features = n_features
        self.fit_intercept = fit_intercept
        self._init_common(n_features, fit_intercept)

    def _learn_row(self, indices, values, y: float) -> Step:
        score, status = _perceptron_step(self.w_, indices, values, self._bias, y)
        self.n_seen_ += 1
        self.n_updates_ += status == UPDATED
        return Step(score, max(0.0, -y * score), status == UPDATED)

    def _learn_batch(self, batch: CSRBatch, y: np.ndarray) -> Steps:
        scores = np.zeros(batch.n_rows)
        status = np.zeros(batch.n_rows, dtype=np.int64)
        _perceptron_learn_batch(
            self.w_, batch.indptr, batch.indices, batch.values, self._bias, y, scores, status
        )
        self.n_seen_ += batch.n_rows
        self.n_updates_ += int(np.count_nonzero(status == UPDATED))
        return _steps(scores, y, status)


class ShorPerceptron(_Separator):
    """Shor's space-dilation perceptron (eq 2.5 and section 2.7 of the thesis; Shor 1970).

    On a mistake with ``a = y z / |z|`` (see :class:`Perceptron`), with ``B = D^{-1}`` the
    inverse of the accumulated rescaling operator (``B_0 = I``):

    ``b = B^T a``, ``w <- w + eta B b / |b|``, ``B <- B (I + (1 / lambda - 1) bb^T / |b|^2)``,
    ``eta <- growth * eta``,

    i.e. the perceptron update in the space dilated by ``lambda`` along every earlier
    counterexample (Definition 2.8). ``dilation`` gives ``lambda``:

    - ``"ellipsoid"``: ``lambda = sqrt((n + 1) / (n - 1))``, ``eta_0 = 1 / (n + 1)``,
      ``growth = n / sqrt(n^2 - 1)`` (``n = n_features + fit_intercept``): the ellipsoid method,
      Algorithm 2 without its stop (:class:`EllipsoidPerceptron` adds it and the safeguard);
    - ``"dunagan-vempala"``: ``lambda = 1/2``, the contraction of Algorithm 4 (section 3.2),
      here applied online along each counterexample rather than along a modified-perceptron
      direction;
    - a positive float; ``lambda = 1`` is the normalized perceptron (Algorithm 1, steps ``eta``).

    ``step`` and ``step_growth`` default to 1 (to the ellipsoid schedule for ``"ellipsoid"``).
    Costs ``O(n^2)`` memory and time per update (``n_features <= MAX_DILATION_FEATURES``).

    Parameters
    ----------
    n_features : int
    dilation : float or {"ellipsoid", "dunagan-vempala"}
    step, step_growth : float or None
    fit_intercept : bool

    Attributes
    ----------
    w_ : ndarray of shape (n_features + fit_intercept,)
    B_ : ndarray of shape (n_features + fit_intercept,) * 2
        ``D^{-1}`` up to a power-of-two factor kept in ``eta_`` (only ``eta_ B_`` matters).
    eta_ : float
        Current step (times that factor).
    n_seen_, n_updates_ : int

    Examples
    --------
    >>> model = ShorPerceptron(n_features=1, dilation=1.0)  # lambda = 1: Algorithm 1
    >>> _ = model.learn_one([1.0], 1); _ = model.learn_one([-1.0], 1)
    >>> model.w_ * 2**0.5, model.B_
    (array([0., 2.]), array([[1., 0.],
           [0., 1.]]))
    """

    _arrays = ("w_", "B_")
    _scalars = ("n_seen_", "n_updates_", "eta_")

    def __init__(
        self,
        *,
        n_features: int,
        dilation: float | str = "ellipsoid",
        step: float | None = None,
        step_growth: float | None = None,
        fit_intercept: bool = True,
    ):
        self.n_features = n_features
        self.dilation = dilation
        self.step = step
        self.step_growth = step_growth
        self.fit_intercept = fit_intercept
        self._init_common(n_features, fit_intercept)
        _check_dilation_size(n_features)
        n = self._dim
        if dilation == "ellipsoid":
            beta, growth, _ = ellipsoid_factors(n, safeguard=False)
            default_step = 1.0 / (n + 1.0)
        elif dilation == "dunagan-vempala":
            beta, growth, default_step = 2.0, 1.0, 1.0
        elif isinstance(dilation, str):
            raise ValueError(
                f"dilation must be a positive number, 'ellipsoid' or 'dunagan-vempala', "
                f"got {dilation!r}"
            )
        else:
            beta, growth, default_step = 1.0 / _check_positive("dilation", dilation), 1.0, 1.0
        self._beta = beta
        self._eta0 = default_step if step is None else _check_positive("step", step)
        self._growth = (
            growth if step_growth is None else _check_positive("step_growth", step_growth)
        )
        self.B_ = np.eye(n)
        self.eta_ = self._eta0

    def _learn_row(self, indices, values, y: float) -> Step:
        n = self._dim
        score, status, self.eta_ = _shor_step(
            self.w_, self.B_, indices, values, self._bias, y, self.eta_, self._beta,
            self._growth, np.empty(n), np.empty(n), np.empty(n),
        )  # fmt: skip
        self.n_seen_ += 1
        self.n_updates_ += status == UPDATED
        return Step(score, max(0.0, -y * score), status == UPDATED)

    def _learn_batch(self, batch: CSRBatch, y: np.ndarray) -> Steps:
        scores = np.zeros(batch.n_rows)
        status = np.zeros(batch.n_rows, dtype=np.int64)
        self.eta_ = _shor_learn_batch(
            self.w_, self.B_, batch.indptr, batch.indices, batch.values, self._bias, y,
            self.eta_, self._beta, self._growth, scores, status,
        )  # fmt: skip
        self.n_seen_ += batch.n_rows
        self.n_updates_ += int(np.count_nonzero(status == UPDATED))
        return _steps(scores, y, status)


class EllipsoidPerceptron(_Separator):
    """The ellipsoid method as an online perceptron (Algorithm 2 of the thesis; Shor 1977,
    Yudin-Nemirovski 1976, Khachiyan 1979), with the safeguard of footnote 9.

    Examples are unit vectors ``a = y z / |z|`` of ``z = [x, 1]`` (see :class:`Perceptron`), in
    ``n = n_features + fit_intercept`` dimensions. The learner keeps the ellipsoid
    ``E_t = {v : |B_t^{-1} (v - w_t)| <= (n + 1) eta_t}``, which contains every unit-norm-bounded
    weight vector consistent with the mistakes so far (``E_0`` is the unit ball). On a mistake,
    ``w_t . a <= 0``: ``b = B^T a``, ``w <- w + eta B b / |b|``,
    ``B <- B (I + (sqrt(n^2 - 1) / (n + 1) - 1) bb^T / |b|^2)``, ``eta <- growth eta``: the
    centre moves to that of the smallest ellipsoid containing the half of ``E_t`` where
    ``v . a >= w_t . a`` (a central cut), and the volume shrinks by a constant factor.
    ``growth = n / sqrt(n^2 - 1)`` as printed in Algorithm 2 (``safeguard=False``), or with the
    rounding-error safeguard ``sqrt(2 n^2 + 3) / (n sqrt 2)`` (see :func:`ellipsoid_factors`).

    ``rho_t = (vol E_t / vol E_0)^{1/n}`` (Algorithm 2's ``rho_t``; ``rho_0 = 1``) is a
    *margin estimate*: if the stream is separable with margin ``rho`` (Definition 2.5), the
    feasible set contains a ball of radius ``rho / (1 + rho)``, so ``rho_t >= rho / (1 + rho)``
    for ever, and at most ``~2 n^2 log(1 / rho)`` mistakes occur (Theorem 2.9). A mistake met
    with ``rho_t < rho / (1 + rho)`` (the thesis tests ``rho_t < rho``; we test the radius of
    the ball the margin really guarantees, so a stream with margin ``rho`` never triggers it)
    is a certificate that the examples learned since the last restart are **not separable with
    margin rho**: ``n_unseparable_`` counts these events and ``on_unseparable`` says what follows:

    - ``"reset"`` (default): the ellipsoid restarts from the unit ball (``w = 0``, ``B = I``)
      and learns the example; ``n_restarts_`` counts it. Suits a service fed with noisy or
      drifting streams: the model keeps learning from the recent past.
    - ``"freeze"``: learning stops (the thesis's "return unseparable"): ``frozen_`` is 1 and
      every later example is passive until :meth:`restart` is called.

    :meth:`status` reports these; :meth:`score_interval_many` bounds the score of a query over
    the current ellipsoid.

    Each update costs ``O(n^2)`` time and the state ``8 n^2`` bytes: ``n_features`` is limited
    to ``MAX_DILATION_FEATURES`` (2000; about 32 MB and 10 ms per update).

    Parameters
    ----------
    n_features : int
        At least 1 with an intercept, 2 without (the method needs ``n >= 2``).
    rho : float in (0, 1)
        The assumed margin ``rho`` of Algorithm 2's input.
    on_unseparable : {"reset", "freeze"}
    safeguard : bool
        Footnote 9's blow-up against rounding errors.
    fit_intercept : bool

    Attributes
    ----------
    w_ : ndarray of shape (n_features + fit_intercept,)
        The centre ``x_t`` of the ellipsoid, bias last.
    B_ : ndarray of shape (n_features + fit_intercept,) * 2
        ``B_t`` up to a power-of-two factor kept in ``eta_``.
    eta_ : float
        ``eta_t`` (times that factor).
    t_ : int
        Updates since the last restart (``rho_t = exp(t_ * log_shrink)``).
    n_seen_, n_updates_, n_unseparable_, n_restarts_ : int
    frozen_ : int
        1 when learning is stopped (``"freeze"``), else 0.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (200, 2)); X = X[np.abs(X[:, 0] - 0.2) > 0.05]
    >>> y = np.where(X[:, 0] > 0.2, 1, -1)
    >>> model = EllipsoidPerceptron(n_features=2, rho=1e-3)
    >>> for _ in range(3): _ = model.learn_many(X, y)
    >>> float(np.mean(model.predict_many(X) == y)), model.status()["unseparable"]
    (1.0, False)
    >>> low, high = model.score_interval_many(X[:1])[0]
    >>> bool(low <= model.score_one(X[0]) <= high)
    True
    """

    _arrays = ("w_", "B_")
    _scalars = ("n_seen_", "n_updates_", "t_", "n_unseparable_", "n_restarts_", "frozen_", "eta_")

    def __init__(
        self,
        *,
        n_features: int,
        rho: float = 1e-4,
        on_unseparable: str = "reset",
        safeguard: bool = True,
        fit_intercept: bool = True,
    ):
        self.n_features = n_features
        self.rho = rho
        self.on_unseparable = on_unseparable
        self.safeguard = safeguard
        self.fit_intercept = fit_intercept
        self._init_common(n_features, fit_intercept)
        _check_positive("rho", rho, upper=1.0)
        if on_unseparable not in _POLICIES:
            raise ValueError(f"on_unseparable must be one of {_POLICIES}, got {on_unseparable!r}")
        _check_flag("safeguard", safeguard)
        _check_dilation_size(n_features)
        n = self._dim
        if n < 2:
            raise ValueError("the ellipsoid method needs n_features + fit_intercept >= 2")
        self._beta, self._growth, self._log_shrink = ellipsoid_factors(n, safeguard)
        self._eta0 = 1.0 / (n + 1.0)
        self._log_threshold = math.log(rho / (1.0 + rho))
        self._restart_policy = on_unseparable == "reset"
        self.B_ = np.eye(n)
        self.eta_ = self._eta0
        self.t_ = 0
        self.n_unseparable_ = 0
        self.n_restarts_ = 0
        self.frozen_ = 0

    # -- learning -------------------------------------------------------------------------
    def _learn_row(self, indices, values, y: float) -> Step:
        n = self._dim
        score, status, self.eta_, self.t_, frozen = _ellipsoid_step(
            self.w_, self.B_, indices, values, self._bias, y, self.eta_, self.t_,
            bool(self.frozen_), self._eta0, self._beta, self._growth, self._log_shrink,
            self._log_threshold, self._restart_policy, np.empty(n), np.empty(n), np.empty(n),
        )  # fmt: skip
        self.frozen_ = int(frozen)
        self.n_seen_ += 1
        self.n_updates_ += status in (UPDATED, RESTARTED)
        self.n_unseparable_ += status in (FROZEN, RESTARTED)
        self.n_restarts_ += status == RESTARTED
        return Step(score, max(0.0, -y * score), status in (UPDATED, RESTARTED))

    def _learn_batch(self, batch: CSRBatch, y: np.ndarray) -> Steps:
        scores = np.zeros(batch.n_rows)
        status = np.zeros(batch.n_rows, dtype=np.int64)
        self.eta_, self.t_, frozen = _ellipsoid_learn_batch(
            self.w_, self.B_, batch.indptr, batch.indices, batch.values, self._bias, y,
            self.eta_, self.t_, bool(self.frozen_), self._eta0, self._beta, self._growth,
            self._log_shrink, self._log_threshold, self._restart_policy, scores, status,
        )  # fmt: skip
        self.frozen_ = int(frozen)
        self.n_seen_ += batch.n_rows
        self.n_updates_ += int(np.count_nonzero((status == UPDATED) | (status == RESTARTED)))
        self.n_unseparable_ += int(np.count_nonzero((status == FROZEN) | (status == RESTARTED)))
        self.n_restarts_ += int(np.count_nonzero(status == RESTARTED))
        return _steps(scores, y, status)

    def restart(self) -> None:
        """Restart the ellipsoid from the unit ball (``w = 0``, ``B = I``, ``t = 0``) and
        unfreeze; counters are kept and ``n_restarts_`` grows by one."""
        self.eta_ = float(_ellipsoid_restart(self.w_, self.B_, self._eta0))
        self.t_ = 0
        self.frozen_ = 0
        self.n_restarts_ += 1

    # -- what the ellipsoid knows -----------------------------------------------------------
    @property
    def rho_t(self) -> float:
        """``(vol E_t / vol E_0)^{1/n}``: Algorithm 2's margin estimate."""
        return math.exp(self.t_ * self._log_shrink)

    @property
    def radius_(self) -> float:
        """``(n + 1) eta_t``: ``E_t = {v : |B_t^{-1}(v - w_t)| <= radius_}``."""
        return (self._dim + 1.0) * self.eta_

    def status(self) -> dict[str, Any]:
        """JSON-serialisable status for a service.

        ``unseparable`` is True once the stop has fired (the stream, since some restart, is
        not separable with margin ``rho``); ``n_unseparable`` counts the events, ``frozen``
        says whether learning is stopped, ``rho_t`` is the current margin estimate and
        ``rho_threshold = rho / (1 + rho)`` the level at which the stop fires;
        ``updates_until_stop`` is how many more updates the ellipsoid can take.
        """
        left = (self._log_threshold - self.t_ * self._log_shrink) / self._log_shrink
        return {
            "n_seen": self.n_seen_,
            "n_updates": self.n_updates_,
            "rho": self.rho,
            "rho_t": self.rho_t,
            "rho_threshold": self.rho / (1.0 + self.rho),
            "updates_since_restart": self.t_,
            "updates_until_stop": max(0, math.floor(left) + 1),
            "unseparable": self.n_unseparable_ > 0,
            "n_unseparable": self.n_unseparable_,
            "n_restarts": self.n_restarts_,
            "frozen": bool(self.frozen_),
            "on_unseparable": self.on_unseparable,
        }

    def score_interval_one(self, x) -> tuple[float, float]:
        """``(low, high)``: the range of ``v . z / |z|`` over the current ellipsoid.

        It holds the score of every weight vector ``v`` with ``|v| <= 1`` that classifies every
        learned mistake correctly, in particular of every unit-norm separator of the stream:
        ``w_t . z/|z| -+ radius_ |B_t^T z / |z||``. A guarantee, not a probability. ``v = 0``
        is consistent with everything, so the interval always reaches 0; the more one-sided it
        is (``score / half-width`` near +-1, with ``|score| <= half-width``), the more the
        consistent separators agree on the label. Its width shrinks as the ellipsoid does.
        """
        indices, values = self._row(x)
        score, half = _ellipsoid_interval(
            self.w_, self.B_, self.radius_, indices, values, self._bias
        )
        return score - half, score + half

    def score_interval_many(self, X) -> np.ndarray:
        """``(n_rows, 2)`` array of :meth:`score_interval_one` for a batch."""
        batch = self._batch(X)
        scores, halves = np.empty(batch.n_rows), np.empty(batch.n_rows)
        _ellipsoid_interval_batch(
            self.w_, self.B_, self.radius_, batch.indptr, batch.indices, batch.values,
            self._bias, scores, halves,
        )  # fmt: skip
        return np.column_stack([scores - halves, scores + halves])


# =============================================================================================
# Separation oracles and batch algorithms
# =============================================================================================
class Oracle(Protocol):
    """A set ``A`` of constraints ``a . x >= 0`` in ``dim`` dimensions, seen through a
    separation oracle (Definition 2.1)."""

    dim: int

    def counterexample(self, x: np.ndarray, threshold: float = 0.0) -> np.ndarray | None:
        """Some ``a`` in ``A`` with ``a . x <= threshold``, or None if there is none."""


class FiniteConstraints:
    """A finite set ``A`` (the rows of ``A``) normalised to unit vectors; zero rows are
    dropped. The oracle answers with the most violated row (the smallest ``a . x``).

    >>> oracle = FiniteConstraints([[1.0, 0.0], [1.0, 1.0]])
    >>> oracle.counterexample(np.array([-1.0, 1.0]))
    array([1., 0.])
    >>> oracle.counterexample(np.array([1.0, 0.0])) is None
    True
    """

    def __init__(self, A):
        A = np.array(A, dtype=float, ndmin=2)
        if A.ndim != 2 or not np.all(np.isfinite(A)):
            raise ValueError("constraints must be a finite 2-D array")
        scale = np.max(np.abs(A), axis=1, keepdims=True)
        keep = scale[:, 0] > 0
        A = A[keep] / scale[keep]
        self.A = A / np.linalg.norm(A, axis=1, keepdims=True)
        self.dim = A.shape[1]

    def counterexample(self, x: np.ndarray, threshold: float = 0.0) -> np.ndarray | None:
        if self.A.shape[0] == 0:
            return None
        products = self.A @ x
        i = int(np.argmin(products))
        return self.A[i].copy() if products[i] <= threshold else None

    def rescale(self, H: np.ndarray) -> FiniteConstraints:
        """The set ``H A`` (rows ``H a``), normalised again (Algorithm 6's ``H_t A``)."""
        return FiniteConstraints(self.A @ H.T)

    def margin(self, x: np.ndarray) -> float:
        """``min_a a . x / |x|`` (the margin x achieves)."""
        return float(np.min(self.A @ x) / np.linalg.norm(x))


def psd_counterexample(A, *, tol: float | None = None) -> np.ndarray | None:
    """Algorithm 7: a unit ``v`` with ``v^T A v < 0``, or None if ``A`` is positive
    semidefinite (up to ``tol``).

    Pivoted incomplete Cholesky (pivot on the largest residual diagonal entry) that stops at
    the first residual diagonal entry below ``-tol``, or, when every residual diagonal entry is
    within ``tol`` of 0, at an off-diagonal residual larger than ``tol`` (the printed algorithm
    certifies ``[[0, 1], [1, 0]]`` as positive semidefinite; see the kernel). The returned
    vector is checked: ``v^T A v < 0`` in floating point, else None. None means
    ``A = R^T R + E`` with ``|E_ij| <= tol`` on the unfactored block, so
    ``lambda_min(A) >= -n tol``. ``tol`` defaults to ``16 n eps max |A_ij|``.

    >>> psd_counterexample(np.array([[0.0, 1.0], [1.0, 0.0]])).round(6)
    array([-0.707107,  0.707107])
    >>> psd_counterexample(np.array([[2.0, 1.0], [1.0, 2.0]])) is None
    True
    """
    A = np.array(A, dtype=float, order="C")
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("the matrix holds non-finite values")
    if not np.allclose(A, A.T, rtol=1e-12, atol=1e-300):
        raise ValueError("the matrix is not symmetric")
    n = A.shape[0]
    if n == 0:
        return None
    scale = float(np.max(np.abs(A)))
    if tol is None:
        tol = 16.0 * n * np.finfo(float).eps * scale
    S = A.copy()
    v = np.empty(n)
    if not _psd_counterexample(S, float(tol), np.zeros((n, n)), np.empty(n, np.int64), v):
        return None
    return v if float(v @ A @ v) < 0.0 else None


class SemidefiniteConstraints:
    """The semidefinite constraint ``F0 + sum_i x_i F_i >= 0`` (problem 6.2) as a linear
    separation problem (Proposition 6.1), homogenised as in Proposition 6.2.

    The design vector is ``y = (y_0, y_1, ..., y_m)`` with ``x = y[1:] / y_0``, and
    ``G(y) = blockdiag(y_0 F0 + sum_i y_i F_i, y_0)``: the extra 1 x 1 block keeps ``y_0 > 0``,
    without which the homogeneous problem has solutions with ``y_0 <= 0`` that map to nothing.
    Its constraints are ``a_u . y = u^T G(y) u >= 0`` for unit ``u``, with
    ``a_u = (u'^T F0 u' + u_n^2, u'^T F_1 u', ..., u'^T F_m u')`` (``u' = u[:n]``).
    :meth:`counterexample` runs Algorithm 7 on ``G(y) - (threshold + strictness |y|) I``: a
    point is accepted only when ``G(y) >= strictness |y| I`` (up to Algorithm 7's tolerance),
    so the final ``x`` is strictly feasible; at ``y = 0`` it answers ``u = e_n``. The vectors
    ``a_u`` are not normalised (section 6.5).

    Parameters
    ----------
    F0 : (n, n) array
    Fs : sequence of m (n, n) arrays or scipy sparse matrices
    strictness : float
        Relative margin demanded of an accepted point.
    """

    def __init__(self, F0, Fs, *, strictness: float = 1e-9):
        F0 = np.array(F0, dtype=float)
        n = F0.shape[0]
        if F0.shape != (n, n) or not np.allclose(F0, F0.T):
            raise ValueError("F0 must be a symmetric square matrix")
        self.n = n
        self.m = len(Fs)
        self.dim = self.m + 1
        self.F0 = F0
        self.strictness = _check_positive("strictness", strictness)
        columns = []
        diagonal = True
        for F in Fs:
            F = sp.csr_matrix(F, dtype=float)
            if F.shape != (n, n):
                raise ValueError(f"every F_i must be {n} x {n}, got {F.shape}")
            diagonal &= F.nnz == F.diagonal().astype(bool).sum()
            columns.append(F.reshape(1, n * n))
        #: (n^2, m): vec(sum_i y_i F_i) = stack @ y[1:]; a_u[1:] = stack^T vec(u u^T)
        self.stack = sp.vstack(columns).T.tocsr() if columns else sp.csr_matrix((n * n, 0))
        self.diagonals = (
            np.array([np.asarray(sp.csr_matrix(F).diagonal()) for F in Fs]) if diagonal else None
        )
        self.n_calls = 0

    def matrix(self, y: np.ndarray) -> np.ndarray:
        """``G(y)``, ``(n + 1) x (n + 1)``."""
        n = self.n
        G = np.zeros((n + 1, n + 1))
        G[:n, :n] = y[0] * self.F0
        if self.diagonals is not None:
            G[np.arange(n), np.arange(n)] += self.diagonals.T @ y[1:]
        else:
            G[:n, :n] += (self.stack @ y[1:]).reshape(n, n)
        G[n, n] = y[0]
        return G

    def constraint(self, u: np.ndarray) -> np.ndarray:
        """``a_u`` for a vector ``u`` of length ``n + 1`` (so that ``a_u . y = u^T G(y) u``)."""
        n = self.n
        head = u[:n]
        a = np.empty(self.dim)
        a[0] = head @ self.F0 @ head + u[n] * u[n]
        if self.diagonals is not None:
            a[1:] = self.diagonals @ (head * head)
        else:
            a[1:] = self.stack.T @ np.outer(head, head).ravel()
        return a

    def counterexample(self, y: np.ndarray, threshold: float = 0.0) -> np.ndarray | None:
        self.n_calls += 1
        norm = float(np.linalg.norm(y))
        if norm == 0.0:
            return self.constraint(np.eye(self.n + 1)[self.n]) if threshold >= 0 else None
        G = self.matrix(y)
        G[np.diag_indices_from(G)] -= threshold + self.strictness * norm
        u = psd_counterexample(G)
        return None if u is None else self.constraint(u)

    def solution(self, y: np.ndarray) -> np.ndarray:
        """``x = y[1:] / y_0`` (the point of problem 6.2 that ``y`` stands for)."""
        return y[1:] / y[0]


def maxcut_constraints(laplacian, *, strictness: float = 1e-9) -> SemidefiniteConstraints:
    """Problem (6.7): ``-L / 4 + diag(x) >= 0`` (the MAX-CUT relaxation's feasible set) for a
    graph Laplacian ``L = diag(C 1) - C``."""
    L = np.asarray(laplacian, dtype=float)
    n = L.shape[0]
    Fs = [sp.csr_matrix(([1.0], ([i], [i])), shape=(n, n)) for i in range(n)]
    return SemidefiniteConstraints(-L / 4.0, Fs, strictness=strictness)


def read_sdpa(path: str | Path) -> tuple[np.ndarray, np.ndarray, list[sp.csr_matrix]]:
    """Read a single-block SDPA sparse file (``.dat-s``, SDPLIB): ``(c, F0, [F_1..F_m])``.

    SDPA's problem is ``min c.x`` s.t. ``sum_i x_i F_i - F0 >= 0`` (note the minus: the thesis's
    F0 of problem 6.2 is ``-F0`` of the file). Only the upper triangle is stored; it is mirrored.
    """
    lines = []
    for raw in Path(path).read_text().splitlines():
        line = raw.split("*")[0].split('"')[0].strip()
        if line:
            lines.append(line)
    m = int(lines[0].split()[0])
    n_blocks = int(lines[1].split()[0])
    sizes = [int(s) for s in lines[2].replace(",", " ").replace("{", " ").replace("}", " ").split()]
    if n_blocks != 1 or len(sizes) != 1 or sizes[0] <= 0:
        raise ValueError("only single-block SDPA problems with a dense block are supported")
    n = sizes[0]
    c = np.array(
        [float(s) for s in lines[3].replace(",", " ").replace("{", " ").replace("}", " ").split()]
    )
    if c.shape != (m,):
        raise ValueError(f"expected {m} costs, got {c.shape[0]}")
    entries = [[] for _ in range(m + 1)]
    for line in lines[4:]:
        k, block, i, j, value = line.split()
        entries[int(k)].append((int(i) - 1, int(j) - 1, float(value)))
    matrices = []
    for items in entries:
        if items:
            rows, cols, vals = (np.array(v) for v in zip(*items, strict=True))
        else:
            rows = cols = np.zeros(0, int)
            vals = np.zeros(0)
        upper = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
        matrices.append((upper + upper.T - sp.diags(upper.diagonal())).tocsr())
    return c, matrices[0].toarray(), matrices[1:]


@dataclass
class SeparationResult:
    """What a batch separation algorithm did.

    ``status``: ``"feasible"`` (``x`` satisfies every constraint), ``"unseparable"`` (the
    ellipsoid got smaller than the assumed margin allows) or ``"max_updates"``.
    ``updates`` counts oracle counterexamples learned (all phases); ``perceptron_updates`` and
    ``modified_updates`` split it for the rescaling algorithms; ``rescalings`` counts their
    rescaling steps; ``seconds`` is wall time.
    """

    x: np.ndarray
    status: str
    updates: int
    perceptron_updates: int = 0
    modified_updates: int = 0
    rescalings: int = 0
    oracle_calls: int = 0
    seconds: float = 0.0
    history: list = field(default_factory=list)


def ellipsoid_method(
    oracle: Oracle, *, rho: float = 1e-12, safeguard: bool = True, max_updates: int = 1_000_000
) -> SeparationResult:
    """Algorithm 2 on a set given by an oracle: the ellipsoid method (see
    :class:`EllipsoidPerceptron` for the update), stopping with ``"unseparable"`` when
    ``rho_t < rho / (1 + rho)``.

    >>> result = ellipsoid_method(FiniteConstraints([[1.0, 0.2], [1.0, -0.2]]))
    >>> result.status, result.updates, bool(np.all(result.x @ [[1.0, 1.0], [0.2, -0.2]] > 0))
    ('feasible', 1, True)
    """
    started = time.perf_counter()
    n = oracle.dim
    beta, growth, log_shrink = ellipsoid_factors(n, safeguard)
    log_threshold = math.log(rho / (1.0 + rho))
    x, B = np.zeros(n), np.eye(n)
    eta = 1.0 / (n + 1.0)
    b, g = np.empty(n), np.empty(n)
    t = calls = 0
    status = "max_updates"
    while t < max_updates:
        a = oracle.counterexample(x, 0.0)
        calls += 1
        if a is None:
            status = "feasible"
            break
        if t * log_shrink < log_threshold:
            status = "unseparable"
            break
        changed, eta = _sep_dilation_update(x, B, eta, np.ascontiguousarray(a, float), beta, b, g)
        if not changed:
            raise ValueError("the oracle returned a zero counterexample")
        eta *= growth
        t += 1
    return SeparationResult(x, status, t, oracle_calls=calls, seconds=time.perf_counter() - started)


class _Rescaled:
    """The set ``H A`` through the oracle of ``A``: ``(H a) . x = a . (H^T x)``."""

    def __init__(self, oracle: Oracle, H: np.ndarray):
        self.oracle, self.H, self.dim = oracle, H, oracle.dim

    def counterexample(self, x: np.ndarray, threshold: float = 0.0) -> np.ndarray | None:
        a = self.oracle.counterexample(self.H.T @ x, threshold)
        return None if a is None else self.H @ a


def _separator(oracle: Oracle, H: np.ndarray, x: np.ndarray):
    """A separator ``x`` of ``H A`` mapped back: ``y = H^T x / |H^T x|``, checked by the
    original oracle exactly as it is returned, because the rescaled set's check rounds
    differently (``(A H^T) x`` is not ``A (H^T x)`` in floating point: a constraint at 1e-16 can
    change sign). Returns ``(y, None)`` when no constraint has ``a . y <= 0``, else ``(None,
    H a)``: the violated constraint in the rescaled coordinates, where the perceptron goes on."""
    y = H.T @ x
    norm = float(np.linalg.norm(y))
    if norm > 0.0:
        y = y / norm
    a = oracle.counterexample(y, 0.0)
    return (y, None) if a is None else (None, H @ a)


def modified_perceptron(
    oracle: Oracle,
    *,
    sigma: float,
    theta: float,
    rng: np.random.Generator,
    max_updates: int = 1_000_000,
) -> tuple[np.ndarray | None, int, int]:
    """The (parametric, unnormalized) modified perceptron: Algorithms 3, 5 and 8.

    Repeat from a uniformly random unit ``x``: while the oracle finds ``a`` with
    ``a . x/|x| <= -sigma``, deflate ``x <- (I - a a^T/|a|^2) x`` and add ``1 / |a|^2`` to ``s``;
    give up on this start when ``s > (2 / sigma^2) ln(1 / theta)`` (Algorithm 8's budget, eq 6.6;
    Algorithm 5's ``t`` for unit ``a``) or when ``|x| < theta`` (footnote 2 of chapter 3: a start
    with ``x . z >= theta`` keeps ``|x| >= theta``, so it cannot succeed any more). With unit
    constraints this is Algorithm 5 (Algorithm 3 for ``theta = 1/sqrt(n)``); with the unnormalized
    ``a_u`` of a semidefinite oracle it is Algorithm 8 (the oracle then looks for
    ``u^T (F(x/|x|) + sigma I) u < 0``). Returns ``(unit x or None, updates, restarts)``; None
    when ``max_updates`` ran out.
    """
    n = oracle.dim
    budget = 2.0 / sigma**2 * math.log(1.0 / theta)
    updates = restarts = 0
    while updates < max_updates:
        x = rng.standard_normal(n)
        x /= np.linalg.norm(x)
        spent = 0.0
        while True:
            norm = float(np.linalg.norm(x))
            a = oracle.counterexample(x / norm, -sigma)
            if a is None:
                return x / norm, updates, restarts
            squared = float(a @ a)
            x = x - (a @ x) / squared * a
            spent += 1.0 / squared
            updates += 1
            if spent > budget or np.linalg.norm(x) < theta or updates >= max_updates:
                break
        restarts += 1
    return None, updates, restarts


def parametric_rescaling_perceptron(
    oracle: Oracle,
    *,
    theta: float | None = None,
    rho: float | None = None,
    sigma: float | None = None,
    seed: int = 0,
    max_updates: int = 1_000_000,
) -> SeparationResult:
    """Algorithm 6, the parametric probabilistic perceptron rescaling algorithm.

    Repeat: run the normalized perceptron (Algorithm 1, from ``x = 0``) on ``H A`` for at most
    ``ceil(1 / rho^2)`` updates; if it has not separated, run the modified perceptron
    (:func:`modified_perceptron`: Algorithm 5 on a finite set, which is rescaled explicitly and
    normalised, Algorithm 8 through any other oracle) and rescale ``H <- (I + x x^T) H`` along its
    unit output ``x``. Returns ``H^T x / |H^T x|`` (the separator of ``A``), status
    ``"feasible"`` only once the original oracle finds no violated constraint for exactly that
    vector (a rounding-level violation sends the perceptron on with it).

    Defaults are the thesis's recommended second example (section 4.6, used in chapter 6):
    ``theta = 1 / sqrt(n)`` (beta = kappa = 1), ``sigma = 1 / (32 n)`` (d = 32),
    ``rho = 1 / (16 sqrt(n))`` (gamma = 1/2, c = 16). :func:`rescaling_perceptron` is
    Dunagan and Vempala's original (Algorithm 4).

    >>> rng = np.random.default_rng(0)
    >>> u = np.array([1.0, 0.0, 0.0]); A = rng.standard_normal((200, 3)); A[:, 0] = np.abs(A[:, 0])
    >>> result = parametric_rescaling_perceptron(FiniteConstraints(A))
    >>> result.status, bool(np.all(A @ result.x >= 0))
    ('feasible', True)
    """
    started = time.perf_counter()
    n = oracle.dim
    theta = 1.0 / math.sqrt(n) if theta is None else _check_positive("theta", theta, upper=1.0)
    sigma = 1.0 / (32.0 * n) if sigma is None else _check_positive("sigma", sigma, upper=1.0)
    rho = 1.0 / (16.0 * math.sqrt(n)) if rho is None else _check_positive("rho", rho, upper=1.0)
    rng = np.random.default_rng(seed)
    perceptron_budget = math.ceil(1.0 / rho**2)
    H = np.eye(n)
    perceptron_updates = modified_updates = rescalings = 0
    result_x, status = np.zeros(n), "max_updates"

    def done() -> bool:
        return perceptron_updates + modified_updates >= max_updates

    while not done():
        current = oracle.rescale(H) if hasattr(oracle, "rescale") else _Rescaled(oracle, H)
        x = np.zeros(n)
        for k in range(perceptron_budget + 1):  # Algorithm 1 on H A
            a = current.counterexample(x, 0.0)
            if a is None:
                separator, a = _separator(oracle, H, x)
                if a is None:
                    result_x, status = separator, "feasible"
                    break
            if k == perceptron_budget or done():
                break
            x += a / np.linalg.norm(a)
            perceptron_updates += 1
        if status == "feasible" or done():
            break
        x, used, _ = modified_perceptron(
            current,
            sigma=sigma,
            theta=theta,
            rng=rng,
            max_updates=max_updates - perceptron_updates - modified_updates,
        )
        modified_updates += used
        if x is None:
            break
        if current.counterexample(x, 0.0) is None:
            separator, _ = _separator(oracle, H, x)
            if separator is not None:
                result_x, status = separator, "feasible"
                break
        H = H + np.outer(x, x @ H)  # (I + x x^T) H, |x| = 1
        rescalings += 1
    return SeparationResult(
        result_x,
        status,
        perceptron_updates + modified_updates,
        perceptron_updates,
        modified_updates,
        rescalings,
        seconds=time.perf_counter() - started,
    )


def rescaling_perceptron(
    oracle: Oracle, *, seed: int = 0, max_updates: int = 1_000_000
) -> SeparationResult:
    """Algorithm 4 (Dunagan and Vempala 2008): Algorithm 6 with ``rho = sigma = 1 / (32 n)``
    and ``theta = 1 / sqrt(n)`` (the modified perceptron is then Algorithm 3)."""
    n = oracle.dim
    return parametric_rescaling_perceptron(
        oracle,
        theta=1.0 / math.sqrt(n),
        rho=1.0 / (32.0 * n),
        sigma=1.0 / (32.0 * n),
        seed=seed,
        max_updates=max_updates,
    )


# =============================================================================================
# The ellipsoidal classifier (chapters 7-8)
# =============================================================================================
class GramSchmidtFeatures:
    """Gram-Schmidt kernel (GSK) feature extraction, chapter 8's Algorithms 1-2 (Cristianini,
    Shawe-Taylor and Lodhi 2002), biased towards positive examples.

    ``fit`` picks ``k`` pivot examples greedily: the one with the largest residual squared
    norm ``n_i``, weighted by ``bias`` for positive examples (``b_i = B^{(y_i + 1)/2} n_i``), and
    maps every example to its coordinates along the Gram-Schmidt orthonormalised pivots
    (the dual is the pivoted incomplete Cholesky decomposition of the linear kernel matrix).
    The pivot's residual norm is taken before the loop over examples (the printed pseudo-code
    divides by an ``n_{i_j}`` it has just set to 0). It stops early when no residual is left;
    the missing columns are 0. ``bias=None`` uses the thesis's choice, ``min(m / m_+, 10)``.

    >>> X = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [1.0, 1.0, 0.0]])
    >>> gsk = GramSchmidtFeatures(n_components=2).fit(X, np.array([1, -1, 1]))
    >>> gsk.transform(X)
    array([[0., 1.],
           [2., 0.],
           [1., 1.]])
    """

    def __init__(self, n_components: int, bias: float | None = None):
        self.n_components = check_n_features(n_components)
        self.bias = None if bias is None else _check_positive("bias", bias)

    def fit(self, X: np.ndarray, y: np.ndarray) -> GramSchmidtFeatures:
        X = np.asarray(X, dtype=float)
        m = X.shape[0]
        k = self.n_components
        positives = max(int(np.count_nonzero(y > 0)), 1)
        bias = min(m / positives, 10.0) if self.bias is None else self.bias
        weight = np.where(y > 0, bias, 1.0)
        residual = np.einsum("ij,ij->i", X, X)
        scale = max(float(residual.max(initial=0.0)), 1e-300)
        D = np.zeros((m, k))
        chosen: list[int] = []
        self.pivot_norms_ = np.ones(k)
        for j in range(k):
            i = int(np.argmax(weight * residual))
            if residual[i] <= 1e-12 * scale:
                break
            norm = math.sqrt(residual[i])  # taken before the loop over examples
            D[:, j] = (X @ X[i] - D[:, :j] @ D[i, :j]) / norm
            residual = np.maximum(residual - D[:, j] ** 2, 0.0)
            residual[i] = 0.0
            self.pivot_norms_[j] = norm
            chosen.append(i)
        self.n_used_ = len(chosen)
        self.pivots_ = np.zeros((k, X.shape[1]))
        self.pivot_coordinates_ = np.zeros((k, k))
        self.pivots_[: self.n_used_] = X[chosen]
        self.pivot_coordinates_[: self.n_used_] = D[chosen]
        self.training_features_ = D
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Algorithm 2 of chapter 8: the coordinates of new examples."""
        return gsk_transform(
            X, self.pivots_, self.pivot_coordinates_, self.pivot_norms_, self.n_used_
        )


def gsk_transform(X, pivots, coordinates, norms, n_used: int) -> np.ndarray:
    """Chapter 8's Algorithm 2: ``d_j = (x . p_j - sum_{t<j} d_t D[p_j, t]) / nu_j``."""
    X = np.asarray(X, dtype=float)
    out = np.zeros((X.shape[0], pivots.shape[0]))
    products = X @ pivots[:n_used].T
    for j in range(n_used):
        out[:, j] = (products[:, j] - out[:, :j] @ coordinates[j, :j]) / norms[j]
    return out


class EllipsoidalClassifier(BinaryClassifier):
    """The maximal-separation-ratio ellipsoidal classifier (chapters 7-8; Glineur 1998).

    ``fit(X, y)`` solves the semidefinite program (7.9) / (8.1) over the augmented inputs
    ``x_hat = [x, 1]``:

    ``max t`` s.t. ``x_hat_i^T E x_hat_i <= 1`` (positives), ``>= 1 + t`` (negatives),
    ``E >= 0`` (and ``t <= max_ratio``),

    two concentric, similar ellipsoids with squared ratio ``1 + t``, the positives inside the
    inner one and the negatives outside the outer one. It classifies by eq (8.2): the score is
    ``f(x) = ((1 + sqrt(1 + t)) / 2)^2 - x_hat^T E x_hat`` (positive inside the intermediate
    ellipsoid), the label ``sign(f)`` (0 counts as -1).

    The solution is invariant to invertible affine maps of the inputs (Theorem 7.5). The
    solver is handed whitened inputs (centred by the training mean and multiplied by the
    inverse square root of the training covariance, an affine map, so by Theorem 7.5 the
    classifier is the same) for conditioning; ``E_hat_`` is mapped back to the inputs'
    coordinates. With ``n_components`` the inputs are first reduced by
    :class:`GramSchmidtFeatures` (chapter 8; linear, so the invariance then holds for maps of
    the GSK features). If the classes are not separable by ellipsoids the optimum is ``t = 0``
    (Theorem 7.3); ``t_ <= separable_tol`` is treated as that case: ``E_hat_`` is set to the
    default solution (7.10), every score is 0, every label -1 and ``separable_`` is 0.
    ``max_ratio`` keeps the SDP bounded when the positives do not span the space (the thesis
    assumes they do). A batch model: ``learn_one`` / ``learn_many`` are not available; a
    service worker fits it on a buffer of recent examples.

    Parameters
    ----------
    n_features : int
    n_components : int or None
        GSK dimension ``k`` (None: use the inputs as they are).
    gsk_bias : float or None
        GSK's bias ``B`` towards positives (None: ``min(m / m_+, 10)``, the thesis's choice).
    solver : {"CLARABEL", "SCS"}
    max_ratio : float
        Upper bound on ``t``.
    separable_tol : float

    Attributes
    ----------
    gsk_pivots_, gsk_coordinates_, gsk_norms_, gsk_used_
        With ``n_components``: the GSK map (pivot examples ``(k, n_features)``, their
        coordinates ``(k, k)``, the pivots' residual norms ``(k,)``, pivots used).
    E_hat_ : ndarray of shape (d + 1, d + 1)
        ``E_hat`` of eq (8.2) in the coordinates of the (GSK) features, ``d = n_components or
        n_features``; zero before ``fit``.
    t_ : float
        Optimal ``t`` (squared separation ratio minus one).
    n_fit_ : int
        Training examples of the last fit. ``separable_`` : int, 1 if ``t_ > separable_tol``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((60, 2)); y = np.where(np.sum(X**2, axis=1) < 1.0, 1, -1)
    >>> model = EllipsoidalClassifier(n_features=2).fit(X, y)
    >>> bool(model.t_ > 0), float(np.mean(model.predict_many(X) == y))
    (True, 1.0)
    """

    _arrays = ("E_hat_",)
    _scalars = ("n_fit_", "separable_", "t_")
    averageable: ClassVar[bool] = False
    _SOLVERS = ("CLARABEL", "SCS")

    def __init__(
        self,
        *,
        n_features: int,
        n_components: int | None = None,
        gsk_bias: float | None = None,
        solver: str = "CLARABEL",
        max_ratio: float = 1e6,
        separable_tol: float = 1e-6,
    ):
        self.n_features = check_n_features(n_features)
        self.n_components = n_components
        self.gsk_bias = gsk_bias
        self.solver = solver
        self.max_ratio = max_ratio
        self.separable_tol = separable_tol
        if n_components is not None:
            check_n_features(n_components)
        if gsk_bias is not None:
            _check_positive("gsk_bias", gsk_bias)
        if solver not in self._SOLVERS:
            raise ValueError(f"solver must be one of {self._SOLVERS}, got {solver!r}")
        _check_positive("max_ratio", max_ratio)
        _check_positive("separable_tol", separable_tol)
        d = n_components if n_components is not None else n_features
        self._d = d
        self.E_hat_ = np.zeros((d + 1, d + 1))
        self.t_ = 0.0
        self.n_fit_ = 0
        self.separable_ = 0
        if n_components is not None:  # the GSK map is part of the learned state
            self._arrays = ("E_hat_", "gsk_pivots_", "gsk_coordinates_", "gsk_norms_")
            self._scalars = (*self._scalars, "gsk_used_")
            self.gsk_pivots_ = np.zeros((d, n_features))
            self.gsk_coordinates_ = np.zeros((d, d))
            self.gsk_norms_ = np.ones(d)
            self.gsk_used_ = 0

    # -- the batch protocol ------------------------------------------------------------------
    def learn_one(self, x, y):
        raise NotImplementedError("EllipsoidalClassifier is a batch model: use fit(X, y)")

    def learn_many(self, X, y):
        raise NotImplementedError("EllipsoidalClassifier is a batch model: use fit(X, y)")

    def _features(self, batch: CSRBatch) -> np.ndarray:
        dense = sp.csr_matrix(
            (batch.values, batch.indices, batch.indptr), shape=(batch.n_rows, self.n_features)
        ).toarray()
        if self.n_components is None:
            return dense
        return gsk_transform(
            dense, self.gsk_pivots_, self.gsk_coordinates_, self.gsk_norms_, self.gsk_used_
        )

    def fit(self, X, y) -> EllipsoidalClassifier:
        """Solve (7.9) on ``(X, y)``; everything is validated before the old model changes."""
        batch = as_batch(X, self.n_features)
        labels = check_binary_labels(y, batch.n_rows)
        if not (np.any(labels > 0) and np.any(labels < 0)):
            raise ValueError("fit needs both positive and negative examples")
        dense = sp.csr_matrix(
            (batch.values, batch.indices, batch.indptr), shape=(batch.n_rows, self.n_features)
        ).toarray()
        gsk = None
        features = dense
        if self.n_components is not None:
            gsk = GramSchmidtFeatures(self.n_components, self.gsk_bias).fit(dense, labels)
            features = gsk.training_features_
        E_hat, t = solve_max_separation_ratio(
            features, labels, solver=self.solver, max_ratio=self.max_ratio
        )
        if not np.all(np.isfinite(E_hat)) or not math.isfinite(t):
            raise ValueError("the SDP solver returned a non-finite solution")
        if gsk is not None:
            self.gsk_pivots_[...] = gsk.pivots_
            self.gsk_coordinates_[...] = gsk.pivot_coordinates_
            self.gsk_norms_[...] = gsk.pivot_norms_
            self.gsk_used_ = gsk.n_used_
        self.n_fit_ = batch.n_rows
        if t > self.separable_tol:
            self.E_hat_[...] = E_hat
            self.t_ = float(t)
            self.separable_ = 1
        else:  # Theorem 7.3 / eq (7.10)
            self.E_hat_[...] = 0.0
            self.E_hat_[-1, -1] = 1.0
            self.t_ = 0.0
            self.separable_ = 0
        return self

    def _scores_of(self, features: np.ndarray) -> np.ndarray:
        hat = np.column_stack([features, np.ones(features.shape[0])])
        level = ((1.0 + math.sqrt(1.0 + self.t_)) / 2.0) ** 2
        return level - np.einsum("ij,jk,ik->i", hat, self.E_hat_, hat)

    def score_batch(self, batch: CSRBatch) -> np.ndarray:
        if not self.n_fit_:
            return np.zeros(batch.n_rows)
        scores = self._scores_of(self._features(batch))
        return np.where(self.separable_ == 1, scores, 0.0)

    def _score_row(self, indices, values) -> float:
        batch = CSRBatch(
            np.array([0, indices.shape[0]], dtype=np.int64), np.asarray(indices), values
        )
        return float(self.score_batch(batch)[0])

    def ellipsoid(self) -> tuple[np.ndarray, np.ndarray]:
        """``(E, c)`` of the inner ellipsoid ``(x - c)^T E (x - c) <= 1`` (eqs 7.6-7.8)."""
        d = self._d
        C, dvec, e = self.E_hat_[:d, :d], self.E_hat_[:d, d], self.E_hat_[d, d]
        centre = -np.linalg.lstsq(C, dvec, rcond=None)[0]
        eta = 1.0 - e + centre @ C @ centre
        return C / eta, centre


def solve_max_separation_ratio(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    solver: str = "CLARABEL",
    max_ratio: float = 1e6,
) -> tuple[np.ndarray, float]:
    """``(E_hat, t)`` solving (7.9) for rows ``features`` and labels +-1 (see
    :class:`EllipsoidalClassifier`), with cvxpy. The inputs are whitened first and
    ``E_hat`` is returned in their coordinates."""
    import cvxpy as cp

    X = np.asarray(features, dtype=float)
    m, d = X.shape
    mean = X.mean(axis=0)
    cov = np.atleast_2d(np.cov(X - mean, rowvar=False, bias=True))
    values, vectors = np.linalg.eigh(cov)
    floor = max(float(values.max(initial=0.0)), 1e-300) * 1e-12
    W = vectors @ np.diag(1.0 / np.sqrt(np.maximum(values, floor))) @ vectors.T
    T = np.eye(d + 1)
    T[:d, :d] = W
    T[:d, d] = -W @ mean
    hat = np.column_stack([X, np.ones(m)]) @ T.T  # whitened, augmented
    E = cp.Variable((d + 1, d + 1), PSD=True)
    t = cp.Variable()
    quad = cp.sum(cp.multiply(hat @ E, hat), axis=1)
    positive, negative = labels > 0, labels < 0
    problem = cp.Problem(
        cp.Maximize(t),
        [quad[positive] <= 1.0, quad[negative] >= 1.0 + t, t <= max_ratio],
    )
    problem.solve(solver=solver)
    if problem.status not in ("optimal", "optimal_inaccurate") or E.value is None:
        raise ValueError(f"the SDP solver failed: {problem.status}")
    E_white = (E.value + E.value.T) / 2.0
    return T.T @ E_white @ T, max(float(t.value), 0.0)


#: for the service: ``kind -> class`` of the online learners of this module
ONLINE_KINDS: dict[str, Callable[..., BinaryClassifier]] = {
    "perceptron": Perceptron,
    "ellipsoid-perceptron": EllipsoidPerceptron,
    "shor-perceptron": ShorPerceptron,
}
