"""Drift detectors on a stream of losses: ADWIN and Page-Hinkley.

The service feeds them a live model's progressive loss (the 0/1 error of a classifier, the
squared error of a regressor) and acts when one reports a change. Both detectors reproduce
River 0.26's ``river.drift.ADWIN`` and ``river.drift.PageHinkley`` (the reference
implementation, whose arithmetic the kernels of :mod:`core.kernels.drift` follow operation
by operation): on the same stream and parameters they report the same indices. As River's,
a detector starts afresh after each detection it reports.

Both take ``mode``: ``"both"`` reports any change of the mean, ``"up"`` only increases (a
degradation, when the values are losses) and ``"down"`` only decreases. Values are finite
reals of absolute value at most :data:`MAX_ABS_VALUE` (1e100): below that bound no sum or
product of the detectors can overflow float64 on any stream shorter than 2**63 values, so a
detection is never decided by an inf or a NaN; larger values raise ``ValueError``. (ADWIN's
bound is meant for values in [0, 1], though: far from that scale, at 1e99 say, the rounding
of its window sums alone can pass the test, in River as here.)

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> losses = np.concatenate([rng.random(2000) < 0.1, rng.random(2000) < 0.4]).astype(float)
>>> detector = ADWIN(mode="up")
>>> detector.update_many(losses)
array([2047])
>>> detector.n, detector.detections
(4000, 1)
"""

from __future__ import annotations

import math

import numpy as np

from core.kernels.drift import _adwin_update, _ph_update
from core.state import state_array, state_count, state_float, state_sum
from core.validation import (
    check_choice,
    check_count,
    check_non_negative,
    check_positive,
    check_stream_values,
    check_unit_interval,
)

__all__ = ["ADWIN", "MAX_ABS_VALUE", "MODES", "PageHinkley"]

#: the largest absolute value a detector accepts (see the module's docstring)
MAX_ABS_VALUE = 1e100
#: ``mode`` -> the kernels' ``direction``: which changes of the mean are reported
MODES = {"both": 0, "up": 1, "down": -1}


class _DriftDetector:
    """What both detectors share: the counters, the batch loop and the state's envelope."""

    _scalar_names: tuple[str, ...] = ()
    _array_names: tuple[str, ...] = ()

    def __init__(self, mode: str) -> None:
        self.mode = check_choice("mode", mode, tuple(MODES))
        self.n = 0
        self.detections = 0
        self._one, self._found_one = np.zeros(1), np.zeros(1, dtype=np.int64)

    def update_many(self, values) -> np.ndarray:
        """Feed the values in order; return the indices into ``values`` (int64, increasing)
        at which a drift was detected. An empty batch returns an empty array and changes
        nothing; a non-1-D, non-finite or too large batch raises ``ValueError`` and changes
        nothing."""
        values = check_stream_values("values", values, max_abs=MAX_ABS_VALUE)
        found = np.empty(values.shape[0], dtype=np.int64)
        if values.shape[0] == 0:
            return found
        n_found = self._run(values, found)
        self.n += values.shape[0]
        self.detections += n_found
        return found[:n_found].copy()

    def update_one(self, x) -> bool:
        """Feed one value; return whether a drift was detected at it. The same checks as
        :meth:`update_many` (a real number, finite, at most ``MAX_ABS_VALUE``)."""
        try:
            value = float(x) if isinstance(x, int | float | np.integer | np.floating) else math.nan
        except OverflowError:  # an integer beyond float64
            value = math.inf
        if not abs(value) <= MAX_ABS_VALUE:
            return self.update_many([x]).shape[0] > 0  # the checks and their message
        # a scalar needs no array conversion: reuse two one-value buffers
        self._one[0] = value
        detected = self._run(self._one, self._found_one) > 0
        self.n += 1
        self.detections += detected
        return detected

    def get_state(self) -> dict:
        """The counters and the learned statistics: ``{"scalars": {name: int | float},
        "arrays": {name: np.ndarray}}`` (plain numbers, contiguous copies)."""
        return {
            "scalars": {"n": self.n, "detections": self.detections, **self._scalars()},
            "arrays": {name: np.array(getattr(self, name)) for name in self._array_names},
        }

    def set_state(self, state: dict) -> None:
        """Load ``get_state()``'s output of a detector with the same parameters. Every entry
        is checked before any is written (ValueError, nothing changed)."""
        try:
            scalars, arrays = dict(state["scalars"]), dict(state["arrays"])
        except (KeyError, TypeError) as error:
            raise ValueError(f"a drift detector's state misses {error}") from None
        for kind, given, expected in (
            ("scalars", scalars, ("n", "detections", *self._scalar_names)),
            ("arrays", arrays, self._array_names),
        ):
            if set(given) != set(expected):
                raise ValueError(
                    f"a {type(self).__name__} state has {kind} {sorted(given)}, "
                    f"expected {sorted(expected)}"
                )
        n, detections = (
            state_count("n", scalars["n"]),
            state_count("detections", scalars["detections"]),
        )
        if detections > n:
            raise ValueError(f"a drift detector's state counts {detections} drifts in {n} values")
        checked = self._checked(scalars, arrays, n)
        self.n, self.detections = n, detections
        for name, value in checked.items():
            setattr(self, name, value)

    def _scalars(self) -> dict:
        return {name: getattr(self, name) for name in self._scalar_names}

    def _run(self, values: np.ndarray, found: np.ndarray) -> int:
        raise NotImplementedError

    def _checked(self, scalars: dict, arrays: dict, n: int) -> dict:
        raise NotImplementedError


class ADWIN(_DriftDetector):
    """ADaptive WINdowing: the longest recent window whose mean has not changed.

    ADWIN2 of Bifet & Gavaldà (2007) keeps the window W in an exponential histogram of at
    most ``max_buckets`` buckets of each size 1, 2, 4, ... and, every ``clock`` values once W
    holds more than ``grace_period``, tests each cut W = W0 . W1 (W0 older, both at least
    ``min_window_length`` long) for

        |mu0 - mu1| > eps_cut = sqrt(2/m sigma_W^2 delta') + 2/(3m) delta',
        delta' = ln(2 ln|W| / delta),  1/m = 1/(n0 - l + 1) + 1/(n1 - l + 1)

    (section 3 of the paper, in River's form with l = ``min_window_length``). While a cut
    holds, the oldest bucket is dropped and the cuts are tested again.

    With ``mode="both"`` every such change is a detection, and the detector then starts
    afresh, exactly as River's ``ADWIN`` (which has no mode). With ``mode="up"`` a test that
    holds is reported only when the newer sub-window's mean is the greater (mu1 > mu0), with
    ``"down"`` only when it is the smaller. A change the other way still shrinks the window
    as ADWIN does (the window adapts to the new mean) but is not reported and does not
    restart the detector. If, in one test, cuts hold in both directions, one detection is
    reported when any of them goes the reported way.

    Parameters
    ----------
    delta
        Significance level in (0, 1): lower detects fewer, larger changes.
    clock
        Test the cuts every ``clock`` values (>= 1).
    max_buckets
        Buckets of each size kept before the two oldest are merged (>= 1). With 1 a merge
        can empty a middle row; when a cut leaves such a row the oldest, it is dropped too
        (River 0.26 panics there instead: no River result to match).
    min_window_length
        The shortest sub-window a cut may leave (>= 1).
    grace_period
        No test until the window holds more than this many values (>= 0).
    mode
        ``"both"``, ``"up"`` or ``"down"``: which changes of the mean are reported.

    Attributes
    ----------
    n, detections
        Values seen and drifts reported since construction (or since the state loaded).
    totals_, variances_
        (capacity, max_buckets + 1) float64: row ``i`` holds the sums and sums of squared
        deviations of buckets of ``2**i`` values, oldest first; rows from ``n_rows_`` on are
        empty. ``capacity`` grows with the window (it is at most 66).
    counts_
        (capacity,) int64: the number of buckets in each row.
    n_rows_, tick_
        Rows in use; values since the detector last started.
    total_, variance_, width_
        Sum, sum of squared deviations from the mean, and length of the window.

    References
    ----------
    A. Bifet and R. Gavaldà (2007). Learning from time-changing data with adaptive windowing.
    Proceedings of the 2007 SIAM International Conference on Data Mining, 443-448.
    River (``river.drift.ADWIN``, ``rust_src/adwin.rs``), the implementation matched here.
    """

    _scalar_names = ("n_rows_", "tick_", "total_", "variance_", "width_")
    _array_names = ("totals_", "variances_", "counts_")

    def __init__(
        self,
        *,
        delta: float = 0.002,
        clock: int = 32,
        max_buckets: int = 5,
        min_window_length: int = 5,
        grace_period: int = 10,
        mode: str = "both",
    ) -> None:
        super().__init__(mode)
        self.delta = check_unit_interval("delta", delta)
        self.clock = check_count("clock", clock)
        self.max_buckets = check_count("max_buckets", max_buckets)
        self.min_window_length = check_count("min_window_length", min_window_length)
        self.grace_period = check_count("grace_period", grace_period, minimum=0)
        self._allocate(8)
        self.n_rows_, self.tick_ = 1, 0
        self.total_, self.variance_, self.width_ = 0.0, 0.0, 0.0

    def _allocate(self, capacity: int) -> None:
        self.totals_ = np.zeros((capacity, self.max_buckets + 1))
        self.variances_ = np.zeros((capacity, self.max_buckets + 1))
        self.counts_ = np.zeros(capacity, dtype=np.int64)

    def _reserve(self, extra: int) -> None:
        # A row i is created when row i - 1 holds two buckets of 2**(i - 1) values, so the
        # window then holds at least 2**i values: rows <= bit_length(largest width).
        needed = (int(self.width_) + extra).bit_length() + 1
        capacity = self.counts_.shape[0]
        if needed > capacity:
            totals, variances, counts = self.totals_, self.variances_, self.counts_
            self._allocate(max(needed, 2 * capacity))
            self.totals_[:capacity], self.variances_[:capacity] = totals, variances
            self.counts_[:capacity] = counts

    def _run(self, values: np.ndarray, found: np.ndarray) -> int:
        self._reserve(values.shape[0])
        n_found, self.n_rows_, self.total_, self.variance_, self.width_, self.tick_ = _adwin_update(
            values,
            found,
            self.totals_,
            self.variances_,
            self.counts_,
            self.n_rows_,
            self.total_,
            self.variance_,
            self.width_,
            self.tick_,
            self.delta,
            self.clock,
            self.max_buckets,
            float(self.min_window_length),
            float(self.grace_period),
            MODES[self.mode],
        )
        return n_found

    def get_state(self) -> dict:
        """The counters and the window: ``totals_``, ``variances_`` (n_rows_, max_buckets + 1)
        float64 and ``counts_`` (n_rows_,) int64, the rows in use only."""
        state = super().get_state()
        for name in self._array_names:
            state["arrays"][name] = np.array(getattr(self, name)[: self.n_rows_])
        return state

    def _checked(self, scalars: dict, arrays: dict, n: int) -> dict:
        n_rows = state_count("n_rows_", scalars["n_rows_"])
        if not 1 <= n_rows <= 66:
            raise ValueError(f"state scalar 'n_rows_' must be in [1, 66], got {n_rows}")
        shape = (n_rows, self.max_buckets + 1)
        totals = state_array("totals_", arrays["totals_"], np.float64, shape)
        variances = state_array("variances_", arrays["variances_"], np.float64, shape)
        counts = state_array("counts_", arrays["counts_"], np.int64, (n_rows,))
        if counts.min() < 0 or counts.max() > self.max_buckets or (n_rows > 1 and counts[-1] == 0):
            raise ValueError(
                f"state array 'counts_' must hold 0 to {self.max_buckets} buckets per row "
                f"(the last row not empty), got {counts.tolist()}"
            )
        width = state_float("width_", scalars["width_"])
        held = sum(int(count) << row for row, count in enumerate(counts.tolist()))
        if width != held or width > n:
            raise ValueError(
                f"state scalar 'width_' is {width}, but the buckets hold {held} values of n={n}"
            )
        checked = {
            "n_rows_": n_rows,
            "tick_": state_count("tick_", scalars["tick_"]),
            "total_": state_float("total_", scalars["total_"]),
            "variance_": state_float("variance_", scalars["variance_"]),
            "width_": width,
        }
        capacity = max(8, (held + 1).bit_length() + 1)
        checked["totals_"] = np.zeros((capacity, self.max_buckets + 1))
        checked["variances_"] = np.zeros((capacity, self.max_buckets + 1))
        checked["counts_"] = np.zeros(capacity, dtype=np.int64)
        checked["totals_"][:n_rows], checked["variances_"][:n_rows] = totals, variances
        checked["counts_"][:n_rows] = counts
        return checked


class PageHinkley(_DriftDetector):
    """The Page-Hinkley test: a two-sided CUSUM of deviations from the running mean.

    With x̄_t the mean of the values since the detector started,

        m_t = alpha m_{t-1} + (x_t - x̄_t) - delta,   M_t = min_{s<=t} m_s
        p_t = alpha p_{t-1} + (x_t - x̄_t) + delta,   P_t = max_{s<=t} p_s  (P_0 = -1)

    after ``min_instances`` values an increase is detected when m_t - M_t > lambda and a
    decrease when P_t - p_t > lambda (lambda = ``threshold``), and the detector starts afresh
    (Page 1954; Hinkley 1971's test for a change of the mean, in River's form with the
    forgetting factor ``alpha``). ``mode`` "up", "down" and "both" are River's.

    Parameters
    ----------
    min_instances
        Values since the start before any detection (>= 1).
    delta
        The magnitude of changes tolerated (>= 0).
    threshold
        lambda, the detection threshold (> 0).
    alpha
        The forgetting factor of the cumulative sums, in (0, 1].
    mode
        ``"both"``, ``"up"`` or ``"down"``: which changes of the mean are reported.

    Attributes
    ----------
    n, detections
        Values seen and drifts reported since construction (or since the state loaded).
    n_mean_, mean_
        Values since the detector started and their mean x̄.
    sum_increase_, sum_decrease_, min_increase_, max_decrease_
        m_t, p_t, M_t (+inf before the first value) and P_t.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> detector = PageHinkley()
    >>> detector.update_many(np.concatenate([rng.normal(0, 1, 500), rng.normal(2, 1, 500)]))
    array([508])

    References
    ----------
    E. S. Page (1954). Continuous inspection schemes. Biometrika 41(1/2), 100-115.
    D. V. Hinkley (1971). Inference about the change-point from cumulative sum tests.
    Biometrika 58(3), 509-523.
    River (``river.drift.PageHinkley``), the implementation matched here.
    """

    _scalar_names = (
        "n_mean_",
        "mean_",
        "sum_increase_",
        "sum_decrease_",
        "min_increase_",
        "max_decrease_",
    )

    def __init__(
        self,
        *,
        min_instances: int = 30,
        delta: float = 0.005,
        threshold: float = 50.0,
        alpha: float = 1 - 0.0001,
        mode: str = "both",
    ) -> None:
        super().__init__(mode)
        self.min_instances = check_count("min_instances", min_instances)
        self.delta = check_non_negative("delta", delta)
        self.threshold = check_positive("threshold", threshold)
        self.alpha = check_unit_interval("alpha", alpha, include_one=True)
        self.n_mean_, self.mean_ = 0, 0.0
        self.sum_increase_, self.sum_decrease_ = 0.0, 0.0
        self.min_increase_, self.max_decrease_ = float("inf"), -1.0

    def _run(self, values: np.ndarray, found: np.ndarray) -> int:
        (
            n_found,
            self.n_mean_,
            self.mean_,
            self.sum_increase_,
            self.sum_decrease_,
            self.min_increase_,
            self.max_decrease_,
        ) = _ph_update(
            values,
            found,
            self.n_mean_,
            self.mean_,
            self.sum_increase_,
            self.sum_decrease_,
            self.min_increase_,
            self.max_decrease_,
            self.min_instances,
            self.delta,
            self.threshold,
            self.alpha,
            MODES[self.mode],
        )
        return n_found

    def _checked(self, scalars: dict, arrays: dict, n: int) -> dict:
        n_mean = state_count("n_mean_", scalars["n_mean_"])
        if n_mean > n:
            raise ValueError(f"state scalar 'n_mean_' is {n_mean}, more than n={n}")
        checked = {"n_mean_": n_mean}
        for name in ("mean_", "sum_increase_", "sum_decrease_", "max_decrease_"):
            checked[name] = state_float(name, scalars[name])
        # +inf until the first value after a start
        checked["min_increase_"] = state_sum("min_increase_", scalars["min_increase_"])
        return checked
