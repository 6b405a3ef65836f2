"""Online separation learners (chapters 2-3 of Kharechko's thesis, Southampton 2009).

``../shared/papers/linear-and-ellipsoidal-separation-thesis.txt``. An example ``(x, y)`` is
mapped to the thesis's setting of unit vectors to be separated from the origin (section 2.3):
``a = y z / |z|`` with the augmented input ``z = [x, 1]`` (``z = [x, 0]`` without an intercept).
A weight vector ``w`` separates the stream when ``w . a > 0`` for every ``a``, i.e.
``sign(w . z) = y``. Scores are ``w . z / |z|`` (scale-free; bounded by ``|w|``).

- :class:`Perceptron`: the normalized perceptron (Algorithm 1), ``w <- w + a`` on a mistake.
- :class:`EllipsoidPerceptron`: the ellipsoid method written as a perceptron (Algorithm 2), with
  the rounding-error safeguard of footnote 9, the volume estimate ``rho_t``, an online
  "unseparable" stop and a guaranteed score interval from the current ellipsoid.
- :class:`ShorPerceptron`: Shor's space-dilation perceptron (eq 2.5) for any dilation coefficient:
  ``lambda = sqrt((n + 1) / (n - 1))`` with the ellipsoid step schedule is Algorithm 2 (without
  the stop), ``lambda = 1/2`` is the Dunagan-Vempala contraction, ``lambda = 1`` Algorithm 1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from core.base import Step, Steps
from core.binary import BinaryClassifier
from core.features import CSRBatch
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
    _sep_score,
    _sep_score_batch,
    _shor_learn_batch,
    _shor_step,
)
from core.validation import check_choice, check_flag, check_n_features, check_positive

__all__ = [
    "MAX_DILATION_FEATURES",
    "EllipsoidPerceptron",
    "Perceptron",
    "ShorPerceptron",
    "ellipsoid_factors",
]

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


class _Separator(BinaryClassifier):
    """Shared plumbing: the augmented input, scores ``w . z / |z|``, counters."""

    n_features: int
    fit_intercept: bool
    w_: np.ndarray

    def _init_common(self, n_features: int, fit_intercept: bool, classes) -> None:
        check_n_features(n_features)
        check_flag("fit_intercept", fit_intercept)
        self._init_classes(classes)
        self._bias = 1.0 if fit_intercept else 0.0
        self._dim = n_features + int(fit_intercept)
        self.w_ = np.zeros(self._dim)
        self.n_seen_ = 0
        self.n_updates_ = 0

    def losses_from_scores(self, scores: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The perceptron loss ``max(0, -y score)`` (the hinge of eq 2.3), without learning."""
        return np.maximum(0.0, -y * scores)

    def _step(self, score: float, y: float, moved: bool) -> Step:
        """A row's Step: the perceptron loss ``max(0, -y score)`` (the hinge of eq 2.3)."""
        predicted = self.classes_[1] if score > 0 else self.classes_[0]
        return Step(score, max(0.0, -y * score), moved, int(moved), predicted)

    def score_row(self, indices, values) -> float:
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
    classes : list of 2 labels, optional
        The labels of the negative and the positive class (default: -1 and +1).

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
    Step(score=0.0, loss=0.0, aggressive=True, n_aggressive=1, predicted=-1)
    >>> model.w_ * 26**0.5
    array([3., 4., 1.])
    >>> model.predict_one([1.0, 1.0]), model.predict_one([-3.0, -4.0])
    (1, -1)
    """

    _arrays = ("w_",)
    _scalars = ("n_seen_", "n_updates_")

    def __init__(self, *, n_features: int, fit_intercept: bool = True, classes: list | None = None):
        self.n_features = n_features
        self.fit_intercept = fit_intercept
        self._init_common(n_features, fit_intercept, classes)

    def learn_row(self, indices, values, y: float) -> Step:
        score, status = _perceptron_step(self.w_, indices, values, self._bias, y)
        self.n_seen_ += 1
        moved = status == UPDATED
        self.n_updates_ += moved
        return self._step(score, y, moved)

    def learn_rows(self, batch: CSRBatch, y: np.ndarray) -> Steps:
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
    classes : list of 2 labels, optional
        The labels of the negative and the positive class (default: -1 and +1).

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
        classes: list | None = None,
    ):
        self.n_features = n_features
        self.dilation = dilation
        self.step = step
        self.step_growth = step_growth
        self.fit_intercept = fit_intercept
        self._init_common(n_features, fit_intercept, classes)
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
            beta, growth, default_step = 1.0 / check_positive("dilation", dilation), 1.0, 1.0
        self._beta = beta
        self._eta0 = default_step if step is None else check_positive("step", step)
        self._growth = growth if step_growth is None else check_positive("step_growth", step_growth)
        self.B_ = np.eye(n)
        self.eta_ = self._eta0

    def learn_row(self, indices, values, y: float) -> Step:
        n = self._dim
        score, status, self.eta_ = _shor_step(
            self.w_, self.B_, indices, values, self._bias, y, self.eta_, self._beta,
            self._growth, np.empty(n), np.empty(n), np.empty(n),
        )  # fmt: skip
        self.n_seen_ += 1
        moved = status == UPDATED
        self.n_updates_ += moved
        return self._step(score, y, moved)

    def learn_rows(self, batch: CSRBatch, y: np.ndarray) -> Steps:
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
    classes : list of 2 labels, optional
        The labels of the negative and the positive class (default: -1 and +1).

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
        classes: list | None = None,
    ):
        self.n_features = n_features
        self.rho = rho
        self.on_unseparable = on_unseparable
        self.safeguard = safeguard
        self.fit_intercept = fit_intercept
        self._init_common(n_features, fit_intercept, classes)
        check_positive("rho", rho, upper=1.0)
        check_choice("on_unseparable", on_unseparable, _POLICIES)
        check_flag("safeguard", safeguard)
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
    def learn_row(self, indices, values, y: float) -> Step:
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
        return self._step(score, y, status in (UPDATED, RESTARTED))

    def learn_rows(self, batch: CSRBatch, y: np.ndarray) -> Steps:
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
