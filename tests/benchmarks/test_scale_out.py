"""benchmarks/scale_out.py in its quick mode (a small model, a few seconds of feedback):
whole-version and delta publication both measured through real processes, the replica
loading deltas in the second."""

from benchmarks import scale_out


def test_quick_freshness_runs(capsys):
    assert scale_out.main(["--quick", "--parts", "freshness"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("{'model'")]
    assert len(rows) == 2
    assert "'delta': " in rows[1]
    assert "'served_p99_le_ms': None" not in rows[1]  # the replica's own feedback latency


def test_the_measurement_is_counted_from_the_warm_up_and_its_p99_interpolated():
    served_before = [(0.01, 5.0), (0.025, 5.0), (float("inf"), 5.0)]
    served_after = [(0.01, 95.0), (0.025, 104.0), (float("inf"), 105.0)]
    before = ([(0.1, 1.0), (0.2, 2.0), (float("inf"), 2.0)], 0.3, 2.0, {"delta": 1.0})
    after = ([(0.1, 1.0), (0.2, 101.0), (float("inf"), 102.0)], 20.3, 102.0, {"delta": 101.0})
    buckets, total, count, loads, served = scale_out.since(
        (*after, served_after), (*before, served_before)
    )
    assert buckets == [(0.1, 0.0), (0.2, 99.0), (float("inf"), 100.0)]
    assert (total, count, loads) == (20.0, 100.0, {"delta": 100.0})
    # the replica's feedback latency: 90 of 100 within 10 ms, 99 within 25 ms
    assert served == [(0.01, 90.0), (0.025, 99.0), (float("inf"), 100.0)]
    assert scale_out.quantile(served, 0.99) == 0.025
    # 99 of the 100 values lie in (0.1, 0.2]: the p99 is that bucket's upper end
    assert scale_out.interpolated(buckets, 0.99) == 0.2
    assert abs(scale_out.interpolated(buckets, 0.5) - (0.1 + 0.1 * 50 / 99)) < 1e-12
    # in the open-ended bucket, the lower end is all there is to say
    assert scale_out.interpolated(buckets, 1.0) == 0.2
    assert scale_out.interpolated([(1.0, 4.0), (2.0, 4.0)], 0.5) == 0.5
