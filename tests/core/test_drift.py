"""core.drift: ADWIN and Page-Hinkley against River (the reference), their modes, state and
input checks."""

import numpy as np
import pytest
from river import drift as river_drift

from core.drift import ADWIN, MAX_ABS_VALUE, PageHinkley

N = 20_000

ADWIN_PARAMS = [
    {},
    {"delta": 0.05, "clock": 1, "max_buckets": 2, "min_window_length": 2, "grace_period": 0},
    {"delta": 1e-4, "clock": 7, "max_buckets": 9, "min_window_length": 10, "grace_period": 50},
    # few buckets per size: the histogram outgrows its 8 preallocated rows
    {"delta": 1e-5, "clock": 3, "max_buckets": 2, "min_window_length": 1, "grace_period": 1},
]
PH_PARAMS = [
    {},
    {"min_instances": 5, "delta": 0.0, "threshold": 10.0, "alpha": 1.0},
    {"min_instances": 100, "delta": 0.05, "threshold": 20.0, "alpha": 0.99},
]


def _stream(kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "bernoulli_steps":  # a classifier's 0/1 errors, abrupt changes both ways
        return (rng.random(N) < np.repeat([0.1, 0.4, 0.2, 0.25], N // 4)).astype(float)
    if kind == "bernoulli_gradual":  # a learning curve
        return (rng.random(N) < np.linspace(0.4, 0.05, N)).astype(float)
    if kind == "gaussian_steps":
        return rng.normal(np.repeat([0.0, 1.0, 0.3, 0.35], N // 4), 1.0)
    if kind == "gaussian_gradual":
        return rng.normal(np.linspace(0.0, 3.0, N), 1.0)
    assert kind == "squared_errors"  # a regressor's losses, heavy-tailed, scale 1e40
    return 1e40 * rng.normal(np.repeat([0.0, 0.5], N // 2), 1.0) ** 2


KINDS = [
    "bernoulli_steps",
    "bernoulli_gradual",
    "gaussian_steps",
    "gaussian_gradual",
    "squared_errors",
]


def _river_detections(detector, values: np.ndarray) -> np.ndarray:
    found = []
    for i, value in enumerate(values.tolist()):
        detector.update(value)
        if detector.drift_detected:
            found.append(i)
    return np.array(found, dtype=np.int64)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("params", ADWIN_PARAMS)
def test_adwin_matches_river(kind, params):
    values = _stream(kind, seed=KINDS.index(kind))
    ours = ADWIN(**params).update_many(values)
    assert ours.dtype == np.int64
    np.testing.assert_array_equal(ours, _river_detections(river_drift.ADWIN(**params), values))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("params", PH_PARAMS)
@pytest.mark.parametrize("mode", ["both", "up", "down"])
def test_page_hinkley_matches_river(kind, params, mode):
    values = _stream(kind, seed=10 + KINDS.index(kind))
    ours = PageHinkley(mode=mode, **params).update_many(values)
    theirs = _river_detections(river_drift.PageHinkley(mode=mode, **params), values)
    np.testing.assert_array_equal(ours, theirs)


def test_the_comparison_sees_detections():
    """The differential tests compare more than empty arrays."""
    values = _stream("bernoulli_steps", 0)
    assert ADWIN().update_many(values).size >= 2
    assert PageHinkley().update_many(values).size >= 2


def _learning_curve(before: float, after: float, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(10_000) < np.repeat([before, after], 5_000)).astype(float)


@pytest.mark.parametrize("cls", [ADWIN, PageHinkley])
def test_mode_up_reports_a_rise_and_not_a_fall(cls):
    falling, rising = _learning_curve(0.4, 0.1), _learning_curve(0.1, 0.4)
    assert cls(mode="both").update_many(falling).size >= 1
    assert cls(mode="up").update_many(falling).size == 0
    assert cls(mode="down").update_many(falling).size >= 1
    assert cls(mode="up").update_many(rising).size >= 1
    assert cls(mode="both").update_many(rising).size >= 1
    assert cls(mode="down").update_many(rising).size == 0


def test_adwin_up_reports_the_rise_where_both_does():
    rising = _learning_curve(0.1, 0.4)
    np.testing.assert_array_equal(
        ADWIN(mode="up").update_many(rising), ADWIN(mode="both").update_many(rising)
    )


def test_adwin_up_still_adapts_its_window_to_a_fall():
    """An unreported change shrinks the window as ADWIN does: the old mean is forgotten, so a
    later rise back is measured against the new level."""
    detector = ADWIN(mode="up")
    detector.update_many(_learning_curve(0.4, 0.1))
    assert detector.detections == 0 and detector.n == 10_000
    assert detector.width_ < 5_500  # the values after the fall, few before
    assert abs(detector.total_ / detector.width_ - 0.1) < 0.05
    assert detector.update_many(_learning_curve(0.1, 0.4, seed=4)[5_000:]).size >= 1


def _continue_after_state(make, values, split):
    first = make()
    first.update_many(values[:split])
    state = first.get_state()
    second = make()
    second.set_state(state)
    return second


@pytest.mark.parametrize(
    "make",
    [
        lambda: ADWIN(),
        lambda: ADWIN(mode="up", **ADWIN_PARAMS[3]),
        lambda: PageHinkley(),
        lambda: PageHinkley(mode="down", **PH_PARAMS[1]),
    ],
)
@pytest.mark.parametrize("split", [0, 1, 4_999, 12_345])
def test_state_round_trip_continues_identically(make, split):
    values = _stream("bernoulli_steps", 7)
    whole = make()
    expected = whole.update_many(values)
    resumed = _continue_after_state(make, values, split)
    tail = resumed.update_many(values[split:]) + split
    np.testing.assert_array_equal(tail, expected[expected >= split])
    assert resumed.n == whole.n and resumed.detections == whole.detections
    _assert_same_state(resumed.get_state(), whole.get_state())


def _assert_same_state(a, b):
    assert a["scalars"] == b["scalars"]
    assert all(type(value) in (int, float) for value in a["scalars"].values())
    assert a["arrays"].keys() == b["arrays"].keys()
    for name, array in a["arrays"].items():
        assert array.flags.c_contiguous
        np.testing.assert_array_equal(array, b["arrays"][name], strict=True)


@pytest.mark.parametrize("cls", [ADWIN, PageHinkley])
def test_update_many_equals_update_one_and_any_chunking(cls):
    values = _stream("gaussian_steps", 5)[:6_000]
    whole = cls(mode="up")
    expected = whole.update_many(values)
    one_by_one = cls(mode="up")
    hits = [i for i, value in enumerate(values) if one_by_one.update_one(value)]
    np.testing.assert_array_equal(hits, expected)
    chunked, found = cls(mode="up"), []
    bounds = [0, 1, 2, 31, 32, 33, 1000, 1001, 4096, len(values)]
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        found.extend(chunked.update_many(values[start:stop]) + start)
    np.testing.assert_array_equal(found, expected)
    for other in (one_by_one, chunked):
        _assert_same_state(other.get_state(), whole.get_state())


@pytest.mark.parametrize("cls", [ADWIN, PageHinkley])
@pytest.mark.parametrize("level", [0.0, 1.0, 0.7, -123.25, 1e12])
def test_a_constant_stream_has_no_drift(cls, level):
    assert cls().update_many(np.full(50_000, level)).size == 0


def test_adwin_at_a_huge_scale_sees_rounding_as_river_does():
    """ADWIN's bound is for values in [0, 1]: at 1e99 the rounding differences of the window
    sums exceed its additive term even on a constant stream, in River as here."""
    values = np.full(5_000, -3.5e99)
    found = ADWIN().update_many(values)
    assert found.size > 0
    np.testing.assert_array_equal(found, _river_detections(river_drift.ADWIN(), values))


def test_adwin_with_one_bucket_per_size_keeps_a_consistent_window():
    """max_buckets=1 empties middle rows on merges; River 0.26 panics when such a row
    becomes the oldest and a cut drops it. Here the empty row goes too."""
    params = {
        "delta": 1e-5,
        "clock": 3,
        "max_buckets": 1,
        "min_window_length": 1,
        "grace_period": 1,
    }
    values = _stream("squared_errors", KINDS.index("squared_errors"))
    detector = ADWIN(**params)
    found = detector.update_many(values)
    assert found.size > 0
    try:
        theirs = _river_detections(river_drift.ADWIN(**params), values)
    except BaseException as panic:  # pyo3's PanicException is a BaseException
        assert "slice index" in str(panic)
    else:  # a River without the panic
        np.testing.assert_array_equal(found, theirs)
    state = detector.get_state()
    counts = state["arrays"]["counts_"]
    assert counts[-1] > 0
    assert state["scalars"]["width_"] == sum(int(c) << row for row, c in enumerate(counts))
    ADWIN(max_buckets=1).set_state(state)


@pytest.mark.parametrize("cls", [ADWIN, PageHinkley])
def test_an_empty_batch_changes_nothing(cls):
    detector = cls()
    detector.update_many(_stream("bernoulli_steps", 1)[:777])
    before = detector.get_state()
    found = detector.update_many(np.array([]))
    assert found.dtype == np.int64 and found.shape == (0,)
    _assert_same_state(detector.get_state(), before)


@pytest.mark.parametrize("cls", [ADWIN, PageHinkley])
def test_values_up_to_the_bound_never_overflow(cls):
    """At +-1e100 every sum and product stays finite: detections are River's, no NaN."""
    rng = np.random.default_rng(8)
    values = MAX_ABS_VALUE * np.where(rng.random(N) < np.repeat([0.2, 0.8], N // 2), 1.0, -1.0)
    detector = cls()
    found = detector.update_many(values)
    river = river_drift.ADWIN() if cls is ADWIN else river_drift.PageHinkley()
    np.testing.assert_array_equal(found, _river_detections(river, values))
    assert found.size >= 1
    assert all(np.isfinite(value) for value in detector.get_state()["scalars"].values())


@pytest.mark.parametrize("cls", [ADWIN, PageHinkley])
@pytest.mark.parametrize(
    "bad",
    [
        np.array([0.0, np.nan]),
        np.array([np.inf]),
        np.array([0.0, -1e300]),
        np.zeros((3, 2)),
        np.array(["0.1"]),
        np.array([1 + 1j]),
        np.array([0.5], dtype=object),
    ],
)
def test_bad_batches_raise_and_change_nothing(cls, bad):
    detector = cls()
    detector.update_many(_stream("bernoulli_steps", 2)[:500])
    before = detector.get_state()
    with pytest.raises(ValueError, match="values"):
        detector.update_many(bad)
    _assert_same_state(detector.get_state(), before)


@pytest.mark.parametrize("cls", [ADWIN, PageHinkley])
def test_update_one_checks_like_update_many(cls):
    detector = cls()
    for bad in (float("nan"), float("inf"), 1e101, "1", None, [0.5]):
        with pytest.raises(ValueError):
            detector.update_one(bad)
    assert detector.n == 0
    assert detector.update_one(True) is False  # a 0/1 error as a bool
    assert detector.update_one(np.float32(0.5)) is False and detector.n == 2


@pytest.mark.parametrize(
    ("cls", "name", "value"),
    [
        (ADWIN, "delta", 0.0),
        (ADWIN, "delta", 1.0),
        (ADWIN, "delta", float("nan")),
        (ADWIN, "clock", 0),
        (ADWIN, "clock", 2.5),
        (ADWIN, "max_buckets", 0),
        (ADWIN, "min_window_length", 0),
        (ADWIN, "grace_period", -1),
        (ADWIN, "grace_period", True),
        (ADWIN, "mode", "sideways"),
        (PageHinkley, "min_instances", 0),
        (PageHinkley, "delta", -0.1),
        (PageHinkley, "threshold", 0.0),
        (PageHinkley, "alpha", 0.0),
        (PageHinkley, "alpha", 1.5),
        (PageHinkley, "mode", None),
    ],
)
def test_bad_parameters_raise_naming_them(cls, name, value):
    with pytest.raises(ValueError, match=name):
        cls(**{name: value})


@pytest.mark.parametrize("cls", [ADWIN, PageHinkley])
def test_unknown_or_positional_parameters_are_type_errors(cls):
    with pytest.raises(TypeError):
        cls(window=10)
    with pytest.raises(TypeError):
        cls(0.002)


def _spoil(state, kind, name, value):
    spoiled = {"scalars": dict(state["scalars"]), "arrays": dict(state["arrays"])}
    if value is _DROP:
        del spoiled[kind][name]
    else:
        spoiled[kind][name] = value
    return spoiled


_DROP = object()


def _adwin_spoilers(state):
    counts, totals = state["arrays"]["counts_"], state["arrays"]["totals_"]
    width = state["scalars"]["width_"]
    return [
        ("scalars", "width_", _DROP),
        ("scalars", "extra", 1),
        ("scalars", "n", -1),
        ("scalars", "detections", state["scalars"]["n"] + 1),
        ("scalars", "tick_", 1.5),
        ("scalars", "total_", float("nan")),
        ("scalars", "variance_", float("inf")),
        ("scalars", "width_", width + 1.0),
        ("scalars", "n_rows_", 0),
        ("scalars", "n_rows_", 70),
        ("arrays", "counts_", counts.astype(np.float64)),
        ("arrays", "counts_", np.where(np.arange(counts.size) == 0, 99, counts)),
        ("arrays", "totals_", totals[:, :-1].copy()),
        ("arrays", "totals_", np.where(totals == totals.flat[0], np.nan, totals)),
        ("arrays", "variances_", [0.0]),
    ]


def _ph_spoilers(state):
    return [
        ("scalars", "mean_", _DROP),
        ("scalars", "n_mean_", state["scalars"]["n"] + 1),
        ("scalars", "n_mean_", True),
        ("scalars", "mean_", "0.5"),
        ("scalars", "sum_increase_", float("inf")),
        ("scalars", "min_increase_", float("nan")),
        ("scalars", "max_decrease_", float("-inf")),
        ("arrays", "counts_", np.zeros(1, dtype=np.int64)),
    ]


@pytest.mark.parametrize(
    ("cls", "spoilers"), [(ADWIN, _adwin_spoilers), (PageHinkley, _ph_spoilers)]
)
def test_a_bad_state_raises_and_changes_nothing(cls, spoilers):
    values = _stream("bernoulli_steps", 4)
    source = cls()
    source.update_many(values[:3_000])
    state = source.get_state()
    target = cls()
    target.update_many(values[:1_234])
    before = target.get_state()
    for kind, name, value in spoilers(state):
        with pytest.raises(ValueError):
            target.set_state(_spoil(state, kind, name, value))
        _assert_same_state(target.get_state(), before)
    with pytest.raises(ValueError):
        target.set_state({"scalars": state["scalars"]})
    target.set_state(state)
    _assert_same_state(target.get_state(), state)


def test_a_state_needs_the_same_bucket_rows():
    with pytest.raises(ValueError, match="totals_"):
        ADWIN(max_buckets=6).set_state(ADWIN().get_state())


def test_a_fresh_page_hinkley_state_loads():
    """M_0 is +inf before the first value: a state this object reaches, so it loads."""
    detector = PageHinkley()
    detector.set_state(PageHinkley().get_state())
    assert detector.min_increase_ == np.inf
