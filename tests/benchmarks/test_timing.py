"""The timing harness: GC off while timing, medians of samples, interleaved rounds, warm-up."""

import gc

import pytest

from benchmarks.timing import Samples, Timing, interleaved, timed, warm_up
from core.linear import LinearPA


def test_timed_runs_with_the_collector_off_and_restores_it():
    seen = []
    timing = timed(lambda: seen.append(gc.isenabled()))
    assert seen == [False] and gc.isenabled()
    assert isinstance(timing, Timing) and timing.cpu >= 0.0 and timing.wall >= 0.0
    with pytest.raises(ZeroDivisionError):
        timed(lambda: 1 / 0)
    assert gc.isenabled()


def test_samples_are_per_example_and_report_medians():
    samples = Samples()
    assert samples.median_us is None
    for cpu in (3.0, 1.0, 2.0):
        samples.add(Timing(cpu, 2 * cpu), 1000)
    assert samples.rows == 1000
    assert samples.median_us == pytest.approx(2000.0)
    assert samples.median_wall_us == pytest.approx(4000.0)
    raw = samples.as_json()
    assert raw["examples_per_second"] == pytest.approx(500.0) and raw["error"] is None
    samples.error = "peer missing"
    assert samples.median_us is None and samples.as_json()["examples_per_second"] is None


def test_rounds_interleave_the_tasks():
    order, lines = [], []
    interleaved(3, [lambda: order.append("a"), lambda: order.append("b")], lines.append)
    assert order == ["a", "b"] * 3
    assert lines == [f"  repeat {r}/3 done" for r in (1, 2, 3)]


def test_warm_up_runs_every_call_on_throwaway_models():
    models = [LinearPA(n_features=2), LinearPA(n_features=2, mode="pa1")]
    rows, labels = [[1.0, 0.0], [0.0, 1.0]], [1, -1]
    warm_up(models, rows, labels)
    assert [m.n_seen_ for m in models] == [4, 4]
