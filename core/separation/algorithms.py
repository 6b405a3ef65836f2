"""Batch separation algorithms over a set given by an oracle (chapters 2-6 of Kharechko's
thesis): the ellipsoid method (Algorithm 2), the rescaling perceptrons (Dunagan-Vempala,
Algorithm 4; the parametric Algorithm 6) and the modified perceptron (Algorithms 3, 5, 8).

``../shared/papers/linear-and-ellipsoidal-separation-thesis.txt``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from core.kernels.separation import _sep_dilation_update
from core.separation.online import ellipsoid_factors
from core.separation.oracles import Oracle
from core.validation import check_positive

__all__ = [
    "SeparationResult",
    "ellipsoid_method",
    "modified_perceptron",
    "parametric_rescaling_perceptron",
    "rescaling_perceptron",
]


@dataclass
class SeparationResult:
    """What a batch separation algorithm did.

    ``status``: ``"feasible"`` (``x`` satisfies every constraint), ``"unseparable"`` (the
    ellipsoid got smaller than the assumed margin allows) or ``"max_updates"``.
    ``updates`` counts oracle counterexamples learned (all phases); ``perceptron_updates`` and
    ``modified_updates`` split it for the rescaling algorithms; ``rescalings`` counts their
    rescaling steps; ``seconds`` is wall time.

    >>> from core.separation import FiniteConstraints
    >>> result = ellipsoid_method(FiniteConstraints([[1.0, 0.0]]))
    >>> result.status, result.updates
    ('feasible', 1)
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

    >>> from core.separation import FiniteConstraints
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

    >>> from core.separation import FiniteConstraints
    >>> rng = np.random.default_rng(0)
    >>> u = np.array([1.0, 0.0, 0.0]); A = rng.standard_normal((200, 3)); A[:, 0] = np.abs(A[:, 0])
    >>> result = parametric_rescaling_perceptron(FiniteConstraints(A))
    >>> result.status, bool(np.all(A @ result.x >= 0))
    ('feasible', True)
    """
    started = time.perf_counter()
    n = oracle.dim
    theta = 1.0 / math.sqrt(n) if theta is None else check_positive("theta", theta, upper=1.0)
    sigma = 1.0 / (32.0 * n) if sigma is None else check_positive("sigma", sigma, upper=1.0)
    rho = 1.0 / (16.0 * math.sqrt(n)) if rho is None else check_positive("rho", rho, upper=1.0)
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
