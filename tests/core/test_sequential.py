"""Tests of core.sequential: anytime-valid confidence sequences for paired differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.sequential import (
    _K1,
    _LOG_STITCH,
    STITCH_S,
    PairedDifference,
    stitched_boundary,
)
from tests import naive

# --- (1) time-uniform coverage by simulation -------------------------------------------------

STREAMS, LENGTH, BATCH = 300, 3000, 50
CONFIDENCE = 0.9
ALPHA = 1.0 - CONFIDENCE
# If a stream's probability of ever missing is <= alpha, the fraction of 300 independent
# streams that ever miss exceeds alpha + 3 binomial standard errors (0.152) with probability
# about 0.1% (normal approximation); the seeds are fixed, so the test is deterministic.
SLACK = 3.0 * math.sqrt(ALPHA * (1.0 - ALPHA) / STREAMS)


def _ever_missed(streams: np.ndarray, true_mean: float, bound: float | None) -> float:
    missed = 0
    for stream in streams:
        test = PairedDifference(confidence=CONFIDENCE, bound=bound)
        for start in range(0, LENGTH, BATCH):
            test.update_many(stream[start : start + BATCH])
            low, high = test.interval()
            if not low <= true_mean <= high:
                missed += 1
                break
    return missed / len(streams)


@pytest.mark.parametrize("p_challenger, p_champion", [(0.3, 0.3), (0.2, 0.35), (0.05, 0.9)])
def test_bounded_coverage_holds_at_every_look(p_challenger, p_champion):
    rng = np.random.default_rng(int(100 * p_challenger + 1000 * p_champion))
    challenger = rng.random((STREAMS, LENGTH)) < p_challenger
    champion = rng.random((STREAMS, LENGTH)) < p_champion
    d = challenger.astype(float) - champion.astype(float)
    assert _ever_missed(d, p_challenger - p_champion, 1.0) <= ALPHA + SLACK


@pytest.mark.parametrize("sigma_challenger, sigma_champion", [(1.0, 1.0), (0.8, 1.0)])
def test_asymptotic_coverage_on_squared_errors(sigma_challenger, sigma_champion):
    rng = np.random.default_rng(7 + int(10 * sigma_challenger))
    challenger = (sigma_challenger * rng.standard_normal((STREAMS, LENGTH))) ** 2
    champion = (sigma_champion * rng.standard_normal((STREAMS, LENGTH))) ** 2
    true_mean = sigma_challenger**2 - sigma_champion**2
    assert _ever_missed(challenger - champion, true_mean, None) <= ALPHA + SLACK


# --- (2) against the plain-numpy reference ---------------------------------------------------


@pytest.mark.parametrize("bound", [1.0, 2.5, None])
@pytest.mark.parametrize("confidence", [0.9, 0.99])
def test_matches_the_reference_on_every_prefix(bound, confidence):
    rng = np.random.default_rng(3)
    scale = 1.0 if bound is None else bound
    d = rng.uniform(-scale, scale, 5000) * rng.random(5000)
    test = PairedDifference(confidence=confidence, bound=bound)
    done = 0
    for n in (1, 2, 3, 10, 57, 1000, 5000):
        test.update_many(d[done:n])
        done = n
        expected = naive.paired_difference_interval(d[:n], confidence, bound)
        np.testing.assert_allclose(test.interval(), expected, rtol=1e-9, atol=1e-12)
        assert test.n == n
        assert test.mean == pytest.approx(d[:n].mean(), rel=1e-12, abs=1e-15)


def test_stitching_constants_match_the_paper():
    # Howard et al. (2021): eta = 2, s = 1.4 give 1.7 sqrt(v (log log 2v + 0.72 log(5.2/a)))
    assert _K1 * math.sqrt(STITCH_S) == pytest.approx(1.70, abs=0.005)
    assert 1.0 / STITCH_S == pytest.approx(0.72, abs=0.01)  # the paper rounds 0.714 up
    assert math.exp(_LOG_STITCH) == pytest.approx(5.2, abs=0.02)
    # below m = 1 the boundary is taken at m
    assert stitched_boundary(0.0, 0.05) == stitched_boundary(1.0, 0.05)


# --- (3) width --------------------------------------------------------------------------------


def test_width_shrinks_like_the_iterated_logarithm_rate():
    rng = np.random.default_rng(11)
    d = (rng.random(10**6) < 0.3).astype(float) - (rng.random(10**6) < 0.3)
    test = PairedDifference(confidence=0.95, bound=1.0)
    widths, scaled, done = [], [], 0
    for n in (10**3, 10**4, 10**5, 10**6):
        test.update_many(d[done:n])
        done = n
        low, high = test.interval()
        widths.append(high - low)
        scaled.append((high - low) * math.sqrt(n / math.log(math.log(n))))
    # width * sqrt(n / log log n) stays within a small factor over three decades of n (it
    # falls a little: the boundary's constant and linear terms matter more at small n) ...
    assert max(scaled) / min(scaled) < 1.5
    assert scaled == sorted(scaled, reverse=True)
    # ... and each decade of n shrinks the width by about sqrt(10) (a little more at small n,
    # where the boundary's 1/n term still counts)
    for wider, narrower in zip(widths, widths[1:], strict=False):
        assert math.sqrt(10.0) < wider / narrower < 1.3 * math.sqrt(10.0)
    unbounded = PairedDifference(confidence=0.95, bound=None)
    unbounded.update_many(d[: 10**4])
    w4 = np.subtract(*unbounded.interval()[::-1])
    unbounded.update_many(d[10**4 :])
    w6 = np.subtract(*unbounded.interval()[::-1])
    assert 5.0 < w4 / w6 < 10.0 * math.sqrt(math.log(100.0))


# --- (4) verdicts -------------------------------------------------------------------------------


def _bernoulli_differences(rng, n, p_challenger, p_champion):
    return (rng.random(n) < p_challenger).astype(float) - (rng.random(n) < p_champion)


def test_a_clearly_better_challenger_is_better_within_a_few_thousand():
    rng = np.random.default_rng(5)
    test = PairedDifference(confidence=0.99, bound=1.0)
    test.update_many(_bernoulli_differences(rng, 4000, 0.2, 0.3))
    assert test.verdict() == "better"
    unbounded = PairedDifference(confidence=0.99, bound=None)
    champion = rng.standard_normal(4000) ** 2
    unbounded.update_many(champion - 0.1 - champion)
    unbounded.update_many(0.8 * rng.standard_normal(4000) ** 2 - rng.standard_normal(4000) ** 2)
    assert unbounded.verdict() == "better"


def test_a_clearly_worse_challenger_is_worse():
    rng = np.random.default_rng(6)
    for bound in (1.0, None):
        test = PairedDifference(confidence=0.99, bound=bound)
        test.update_many(_bernoulli_differences(rng, 4000, 0.3, 0.2))
        assert test.verdict() == "worse"


@pytest.mark.parametrize("bound", [1.0, None])
def test_an_identical_challenger_stays_undecided(bound):
    test = PairedDifference(confidence=0.9, bound=bound)
    for _ in range(200):
        test.update_many(np.zeros(5000))
        assert test.verdict() == "undecided"
    assert test.n == 10**6


# --- (5) batching and state -----------------------------------------------------------------


@pytest.mark.parametrize("bound", [1.0, None])
def test_chunks_equal_one_call_and_state_round_trips(bound):
    rng = np.random.default_rng(8)
    d = rng.uniform(-1.0, 1.0, 20000)
    whole = PairedDifference(confidence=0.95, bound=bound)
    whole.update_many(d)
    chunked = PairedDifference(confidence=0.95, bound=bound)
    cuts = np.sort(rng.choice(np.arange(1, d.size), 40, replace=False))
    for part in np.split(d, cuts):
        chunked.update_many(part)
    assert chunked.get_state() == whole.get_state()  # bit-identical, not merely close

    first = PairedDifference(confidence=0.95, bound=bound)
    first.update_many(d[:7777])
    state = first.get_state()
    assert all(type(v) in (int, float) for v in state["scalars"].values())
    assert state["arrays"] == {}
    second = PairedDifference(confidence=0.95, bound=bound)
    second.set_state(state)
    first.update_many(d[7777:])
    second.update_many(d[7777:])
    assert second.get_state() == first.get_state() == whole.get_state()
    assert second.interval() == whole.interval()


# --- (6) validation and degenerate cases -----------------------------------------------------


@pytest.mark.parametrize("confidence", [0, 0.0, 1, 1.0, 1.5, -0.1, math.nan, True, "0.9", None])
def test_confidence_must_be_in_the_open_unit_interval(confidence):
    with pytest.raises(ValueError, match="confidence"):
        PairedDifference(confidence=confidence, bound=1.0)


@pytest.mark.parametrize("bound", [0, -1.0, math.inf, math.nan, True, "1"])
def test_bound_must_be_none_or_positive_finite(bound):
    with pytest.raises(ValueError, match="bound"):
        PairedDifference(confidence=0.9, bound=bound)


@pytest.mark.parametrize(
    "bad",
    [
        np.array([0.1, np.nan, 0.2]),
        np.array([0.1, np.inf]),
        np.array([-np.inf]),
        np.zeros((2, 2)),
        np.float64(0.5),
        np.array(["0.1"]),
        np.array([0.5, 1.0 + 1e-12]),
        np.array([-1.5]),
    ],
)
def test_bad_batches_are_refused_whole(bad):
    test = PairedDifference(confidence=0.9, bound=1.0)
    test.update_many(np.array([0.5, -0.5, 1.0]))
    before = test.get_state()
    with pytest.raises(ValueError):
        test.update_many(bad)
    assert test.get_state() == before


def test_empty_batch_changes_nothing_and_integers_are_accepted():
    test = PairedDifference(confidence=0.9, bound=1.0)
    test.update_many(np.array([], dtype=float))
    assert test.get_state()["scalars"] == {"n_": 0, "mean_": 0.0, "m2_": 0.0, "v_": 0.0}
    test.update_many(np.array([1, 0, -1]))
    assert test.n == 3 and test.mean == 0.0


def test_no_data_and_one_value():
    for bound in (1.0, None):
        test = PairedDifference(confidence=0.9, bound=bound)
        assert test.n == 0 and test.mean == 0.0
        assert test.interval() == (-math.inf, math.inf)
        assert test.verdict() == "undecided"
    bounded = PairedDifference(confidence=0.9, bound=1.0)
    bounded.update_many(np.array([-1.0]))
    assert bounded.interval() == (-1.0, 1.0)  # clipped to the bound: nothing to say yet
    unbounded = PairedDifference(confidence=0.9, bound=None)
    unbounded.update_many(np.array([-1.0]))
    assert unbounded.interval() == (-math.inf, math.inf)  # no variance from one value


def test_equal_values_never_give_a_zero_width_bounded_interval():
    test = PairedDifference(confidence=0.9, bound=1.0)
    test.update_many(np.full(10**5, 0.3))
    low, high = test.interval()
    assert low < 0.3 < high and high - low > 1e-4
    test = PairedDifference(confidence=0.9, bound=1.0)
    test.update_many(np.zeros(10**5))
    low, high = test.interval()
    assert low < 0.0 < high


def test_huge_unbounded_values():
    # values are accepted while their running mean stays finite; a sum of squares that
    # overflows float64 makes the interval (-inf, inf) (nothing can be said), never NaN
    test = PairedDifference(confidence=0.9, bound=None)
    test.update_many(np.array([1e200, -1e200, 3.0]))
    assert test.m2_ == math.inf and math.isfinite(test.mean)
    assert test.interval() == (-math.inf, math.inf) and test.verdict() == "undecided"
    restored = PairedDifference(confidence=0.9, bound=None)
    restored.set_state(test.get_state())
    assert restored.get_state() == test.get_state()
    before = test.get_state()
    with pytest.raises(ValueError, match="overflow"):
        test.update_many(np.array([1.7e308, -1.7e308]))
    assert test.get_state() == before
    # large but representable differences give a finite, scale-equivariant interval
    rng = np.random.default_rng(9)
    d = rng.standard_normal(1000)
    small, large = (PairedDifference(confidence=0.9, bound=None) for _ in range(2))
    small.update_many(d)
    large.update_many(d * 1e100)
    np.testing.assert_allclose(np.array(large.interval()) / 1e100, small.interval(), rtol=1e-12)


def _good_state():
    test = PairedDifference(confidence=0.9, bound=1.0)
    test.update_many(np.array([0.5, -1.0, 0.25]))
    return test.get_state()


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s["scalars"].pop("v_"),
        lambda s: s["scalars"].update(extra=1.0),
        lambda s: s["scalars"].update(n_=-1),
        lambda s: s["scalars"].update(n_=True),
        lambda s: s["scalars"].update(n_=2.5),
        lambda s: s["scalars"].update(mean_=math.nan),
        lambda s: s["scalars"].update(mean_=1.5),
        lambda s: s["scalars"].update(m2_=-0.1),
        lambda s: s["scalars"].update(v_=math.inf),
        lambda s: s["scalars"].update(v_="1.0"),
        lambda s: s["arrays"].update(x=np.zeros(2)),
        lambda s: s.update(kind="other"),
        lambda s: s.pop("scalars"),
        lambda s: s["scalars"].update(n_=0),
    ],
)
def test_a_bad_state_changes_nothing(edit):
    state = _good_state()
    edit(state)
    test = PairedDifference(confidence=0.9, bound=1.0)
    test.update_many(np.array([0.1, 0.2]))
    before = test.get_state()
    with pytest.raises(ValueError):
        test.set_state(state)
    assert test.get_state() == before


@pytest.mark.parametrize("bound", [1.0, None])
def test_one_value_at_a_time_is_the_kernel_to_the_last_bit(bound):
    """One value at a time (``update_one``, and ``update_many`` of one value) takes a path
    without the kernel: the same statistics."""
    rng = np.random.default_rng(7)
    values = rng.integers(-1, 2, 3000).astype(float) if bound else rng.standard_normal(3000) ** 3
    one, many = PairedDifference(bound=bound), PairedDifference(bound=bound)
    for k, x in enumerate(values):
        if k % 2:
            one.update_many(np.array([x]))
        else:
            one.update_one(float(x))
    many.update_many(values)
    assert one.get_state() == many.get_state()
    with pytest.raises(ValueError):
        one.update_many(np.array([np.nan]))
    with pytest.raises(ValueError):
        PairedDifference(bound=1.0).update_many(np.array([1.5]))
    with pytest.raises(ValueError):
        one.update_many(np.array(["1"]))
    assert one.get_state() == many.get_state()  # (nothing applied)
