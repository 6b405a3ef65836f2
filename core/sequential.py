"""Anytime-valid confidence sequences for the mean of paired differences: is a challenger
model better than the champion that learns the same stream?

Each example gives ``d_i = loss_challenger_i - loss_champion_i``. A confidence sequence
``(C_n)`` at level ``1 - alpha`` satisfies ``P(for all n >= 1: mu in C_n) >= 1 - alpha``, so the
interval may be looked at after every example and acted on whenever it excludes 0.

Bounded differences (``bound`` given, ``|d_i| <= bound``): the empirical-Bernstein confidence
sequence of Howard, Ramdas, McAuliffe & Sekhon (2021), "Time-uniform, nonparametric,
nonasymptotic confidence sequences", Ann. Statist. 49(2), Theorem 4 with the polynomial
stitched boundary of their Theorem 1. The differences are mapped to ``x_i = (d_i + B) / 2B``
in ``[0, 1]`` (``B = bound``, so the scale is ``c = 1``) and::

    V_n = sum_{i <= n} (x_i - xbar_{i-1})^2            (xbar_0 = 1/2, i.e. d = 0)
    |xbar_n - mu_x| < S(max(V_n, m)) / n   for all n,  with probability >= 1 - alpha
    S(v)  = sqrt(k1^2 v l(v) + (k2 c l(v))^2) + k2 c l(v)
    l(v)  = s log log(eta v / m) + log(zeta(s) / log(eta)^s) + log(2 / alpha)
    k1    = (eta^(1/4) + eta^(-1/4)) / sqrt(2),  k2 = (sqrt(eta) + 1) / 2

Theorem 4 needs a sub-exponential boundary of scale ``c = 1`` with crossing probability
``alpha / 2`` on each side (hence ``log(2 / alpha)``); Theorem 1's stitched boundary is
sub-gamma with scale ``c``, and sub-gamma boundaries are sub-exponential ones (``psi_E <=
psi_G``). Constants: ``eta = 2``, ``s = 1.4``, ``m = 1`` (the paper's own example values,
which give its closed form ``1.7 sqrt(v (log log 2v + 0.72 log(5.2 / alpha')))`` plus a
linear term: ``k1 sqrt(s) = 1.70``, ``1 / s = 0.72``, ``zeta(1.4) / log(2)^1.4 = 5.19``).
For ``V_n < m`` the boundary is taken at ``m``: the first epoch's linear boundary is below
``S(m)`` there, so the crossing probability is unchanged, and the interval never has zero
width, not even when every difference is equal. The half-width shrinks like
``sqrt(V_n log log V_n) / n``, the law of the iterated logarithm rate. The interval is
intersected with ``[-B, B]``, where the mean lies anyway. The guarantee is non-asymptotic and
holds for any dependence: ``mu`` is then the average conditional mean (their ``mu~_t``).

Unbounded differences (``bound=None``, squared errors): the Gaussian-mixture *asymptotic*
confidence sequence of Waudby-Smith, Arnold, Wu, McAuliffe & Ramdas, "Time-uniform central
limit theory and asymptotic confidence sequences" (Ann. Statist. 2024), Theorem 2.2 (i.i.d.
differences with finite variance)::

    mean_n +- sigma_n sqrt( 2 (n rho^2 + 1) / (n^2 rho^2) log( sqrt(n rho^2 + 1) / alpha ) )

with ``sigma_n^2`` the sample variance (``n - 1`` in the denominator) and ``rho^2 = (2 log(1 /
alpha) + log(1 + 2 log(1 / alpha))) / n_star``, their approximate minimiser of the width at
``n = n_star = 1000``. This is the variance-inside form ``sqrt(2 (n sigma^2 rho'^2 + 1) /
(n^2 rho'^2) log(sqrt(n sigma^2 rho'^2 + 1) / alpha))`` with ``rho'^2 = rho^2 / sigma_n^2``:
writing ``sigma_n`` outside keeps the interval equivariant under a change of the losses'
units, where a fixed ``rho'`` would be tight only for differences of variance near 1. It is
**asymptotic**: its coverage approaches ``1 - alpha`` as the stream grows (an error that
vanishes almost surely), not at every finite ``n``; no finite-sample guarantee exists without
a bound on the differences. ``(-inf, inf)`` until ``n >= 2`` (no variance before), and
``(-inf, inf)`` too when the sum of squares overflows float64.

The running statistics are updated one value at a time by a compiled kernel
(``core.kernels.sequential._paired_update``): Welford's mean and sum of squared deviations,
and ``V_n``, which needs the mean of the values *before* each one. A batch therefore gives the
same bits however it is split.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import zeta

from core.kernels.sequential import _paired_update
from core.state import state_count, state_float, state_sum
from core.validation import check_positive

__all__ = [
    "ASYMPTOTIC_TARGET_N",
    "STITCH_ETA",
    "STITCH_M",
    "STITCH_S",
    "PairedDifference",
    "asymptotic_radius",
    "stitched_boundary",
]

#: Howard et al. (2021), Theorem 1: epochs grow by eta, the crossing probability of epoch k
#: is alpha / (zeta(s) (k + 1)^s), and the boundary starts at intrinsic time m.
STITCH_ETA = 2.0
STITCH_S = 1.4
STITCH_M = 1.0
_K1 = (STITCH_ETA**0.25 + STITCH_ETA**-0.25) / math.sqrt(2.0)
_K2 = (math.sqrt(STITCH_ETA) + 1.0) / 2.0
_LOG_STITCH = math.log(float(zeta(STITCH_S)) / math.log(STITCH_ETA) ** STITCH_S)

#: Waudby-Smith et al.: the Gaussian-mixture asymptotic CS is tightest near this n.
ASYMPTOTIC_TARGET_N = 1000

_SCALARS = ("n_", "mean_", "m2_", "v_")


def stitched_boundary(v: float, alpha: float, c: float = 1.0) -> float:
    """Howard et al. (2021), Theorem 1: the polynomial stitched boundary ``S(max(v, m))`` with
    crossing probability ``alpha`` for scale ``c`` (``eta = 2``, ``s = 1.4``, ``m = 1``).

    >>> round(stitched_boundary(100.0, 0.05), 4)
    47.2608
    """
    v = max(v, STITCH_M)
    ell = (
        STITCH_S * math.log(math.log(STITCH_ETA * v / STITCH_M))
        + _LOG_STITCH
        + math.log(1.0 / alpha)
    )
    linear = _K2 * c * ell
    return math.sqrt(_K1 * _K1 * v * ell + linear * linear) + linear


def asymptotic_radius(n: int, variance: float, alpha: float) -> float:
    """Waudby-Smith et al. (2024), Theorem 2.2: the half-width ``sigma sqrt(2 (n rho^2 + 1) /
    (n^2 rho^2) log(sqrt(n rho^2 + 1) / alpha))``, ``rho`` tuned for ``n = 1000``.

    >>> round(asymptotic_radius(1000, 1.0, 0.05), 4)
    0.096
    """
    log_inverse = math.log(1.0 / alpha)
    rho2 = (2.0 * log_inverse + math.log(1.0 + 2.0 * log_inverse)) / ASYMPTOTIC_TARGET_N
    growth = n * rho2 + 1.0
    factor = 2.0 * growth / (n * n * rho2) * (0.5 * math.log(growth) + log_inverse)
    return math.sqrt(variance) * math.sqrt(factor)


class PairedDifference:
    """A confidence sequence for the mean of paired loss differences, and its verdict.

    Parameters
    ----------
    confidence : float
        ``1 - alpha``, in (0, 1): the probability that the interval holds the mean at every
        ``n`` at once (asymptotically so when ``bound`` is None).
    bound : float or None
        ``|d_i| <= bound`` for every difference (``1.0`` for 0/1 errors): the non-asymptotic
        empirical-Bernstein sequence of Howard et al. (2021). ``None``: the asymptotic
        Gaussian-mixture sequence of Waudby-Smith et al. (2024), for unbounded differences.

    Attributes
    ----------
    n_ : int
        Differences seen.
    mean_ : float
        Their mean (Welford).
    m2_ : float
        Sum of squared deviations from ``mean_`` (Welford's M2); ``+inf`` once it overflows.
    v_ : float
        ``sum_i (d_i - mean_{i-1})^2`` with ``mean_0 = 0``: Howard et al.'s ``V_n`` in the
        units of ``d`` (``4 B^2`` times its value on ``[0, 1]``).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> test = PairedDifference(confidence=0.95, bound=1.0)
    >>> for _ in range(20):
    ...     champion = rng.random(500) < 0.30
    ...     challenger = rng.random(500) < 0.20
    ...     test.update_many(challenger.astype(float) - champion.astype(float))
    >>> test.n, test.verdict()
    (10000, 'better')
    """

    def __init__(self, *, confidence: float = 0.95, bound: float | None) -> None:
        self.confidence = check_positive("confidence", confidence, upper=1.0)
        self.bound = None if bound is None else check_positive("bound", bound)
        self.n_ = 0
        self.mean_ = 0.0
        self.m2_ = 0.0
        self.v_ = 0.0

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def n(self) -> int:
        """Paired examples so far."""
        return self.n_

    @property
    def mean(self) -> float:
        """Their mean difference (0.0 before any)."""
        return self.mean_

    def update_many(self, differences) -> None:
        """Add a 1-D array of differences, in stream order.

        Raises ``ValueError`` (and adds nothing) for a non-numeric or non-1-D array, a NaN or
        infinite value, a value with ``|d| > bound``, or values whose running mean would
        overflow float64. An empty array changes nothing.
        """
        if (
            type(differences) is np.ndarray
            and differences.shape == (1,)
            and differences.dtype.kind in "iuf"
        ):
            return self.update_one(float(differences[0]))  # (one value: no kernel call)
        values = np.asarray(differences)
        if values.dtype.kind not in "iuf":
            raise ValueError(f"differences must be numbers, got dtype {values.dtype}")
        if values.ndim != 1:
            raise ValueError(f"differences must be a 1-D array, got shape {values.shape}")
        if values.size == 0:
            return
        values = np.ascontiguousarray(values, dtype=np.float64)
        if not np.isfinite(values).all():
            raise ValueError("differences must be finite (no NaN or inf)")
        if self.bound is not None:
            largest = float(np.abs(values).max())
            if largest > self.bound:
                raise ValueError(
                    f"differences must satisfy |d| <= bound={self.bound}, got {largest}"
                )
        n, mean, m2, v = _paired_update(values, self.n_, self.mean_, self.m2_, self.v_)
        if not math.isfinite(mean):
            raise ValueError("differences too large: their running mean overflows float64")
        self.n_, self.mean_, self.m2_, self.v_ = int(n), float(mean), float(m2), float(v)

    def update_one(self, x: float) -> None:
        """Add one difference (a float): ``update_many`` of one value, by the kernel's
        arithmetic operation for operation (the same statistics to the last bit)."""
        if not math.isfinite(x):
            raise ValueError("differences must be finite (no NaN or inf)")
        if self.bound is not None and abs(x) > self.bound:
            raise ValueError(f"differences must satisfy |d| <= bound={self.bound}, got {abs(x)}")
        delta = x - self.mean_
        n = self.n_ + 1
        mean = self.mean_ + delta / n
        if not math.isfinite(mean):
            raise ValueError("differences too large: their running mean overflows float64")
        self.n_, self.mean_ = n, mean
        self.m2_ += delta * (x - mean)
        self.v_ += delta * delta

    def interval(self) -> tuple[float, float]:
        """``(low, high)`` holding the mean difference at every ``n`` at once with probability
        ``confidence``; ``(-inf, inf)`` before any difference (``bound`` None: before two)."""
        n = self.n_
        if n == 0:
            return -math.inf, math.inf
        if self.bound is None:
            if n < 2:
                return -math.inf, math.inf
            radius = asymptotic_radius(n, self.m2_ / (n - 1), self.alpha)
            return self.mean_ - radius, self.mean_ + radius
        width = 2.0 * self.bound
        # V_n on [0, 1]: x = (d + B) / 2B; divided twice so that 4 B^2 cannot overflow
        v_unit = self.v_ / width / width
        radius = width * stitched_boundary(v_unit, self.alpha / 2.0) / n
        return max(self.mean_ - radius, -self.bound), min(self.mean_ + radius, self.bound)

    def verdict(self) -> str:
        """``"better"`` when the interval lies below 0 (the challenger's loss is lower),
        ``"worse"`` when above 0, else ``"undecided"``."""
        low, high = self.interval()
        if high < 0.0:
            return "better"
        if low > 0.0:
            return "worse"
        return "undecided"

    def get_state(self) -> dict[str, Any]:
        """``{"scalars": {"n_", "mean_", "m2_", "v_"}, "arrays": {}}``, plain Python numbers."""
        return {
            "scalars": {"n_": self.n_, "mean_": self.mean_, "m2_": self.m2_, "v_": self.v_},
            "arrays": {},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Load ``get_state()``'s output of a test with the same ``bound``; every entry is
        checked before any is written, so a bad state (ValueError) changes nothing."""
        if not isinstance(state, dict) or not isinstance(state.get("scalars"), dict):
            raise ValueError("state must be a dict with a 'scalars' dict")
        arrays = state.get("arrays", {})
        if not isinstance(arrays, dict) or arrays:
            raise ValueError("state 'arrays' must be an empty dict (this test holds no arrays)")
        unknown = set(state) - {"scalars", "arrays"}
        if unknown:
            raise ValueError(f"unknown state entries: {sorted(unknown)}")
        scalars = state["scalars"]
        if set(scalars) != set(_SCALARS):
            raise ValueError(
                f"state scalars must be exactly {list(_SCALARS)}, got {sorted(scalars)}"
            )
        n = state_count("n_", scalars["n_"])
        mean = state_float("mean_", scalars["mean_"])
        m2 = state_sum("m2_", scalars["m2_"])
        v = state_sum("v_", scalars["v_"])
        for name, value in (("m2_", m2), ("v_", v)):
            if value < 0.0:
                raise ValueError(f"state scalar {name!r} must be >= 0, got {value!r}")
            if self.bound is not None and not math.isfinite(value):
                raise ValueError(f"state scalar {name!r} must be finite for bounded differences")
        if self.bound is not None and abs(mean) > self.bound:
            raise ValueError(
                f"state scalar 'mean_' must be within bound={self.bound}, got {mean!r}"
            )
        if n == 0 and (mean, m2, v) != (0.0, 0.0, 0.0):
            raise ValueError("a state with n_ = 0 must have mean_, m2_ and v_ equal to 0")
        self.n_, self.mean_, self.m2_, self.v_ = n, mean, m2, v
