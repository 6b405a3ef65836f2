"""The freshness histogram as read from a /metrics text."""

from benchmarks.service_durability.freshness import histogram, quantile

METRICS = """\
lorentztron_freshness_seconds_bucket{le="0.1",model="m"} 2.0
lorentztron_freshness_seconds_bucket{le="0.5",model="m"} 9.0
lorentztron_freshness_seconds_bucket{le="+Inf",model="m"} 10.0
lorentztron_freshness_seconds_sum{model="m"} 2.5
lorentztron_freshness_seconds_count{model="m"} 10.0
"""


def test_buckets_sum_count_and_quantiles():
    buckets, total, count = histogram(METRICS, "lorentztron_freshness_seconds")
    assert buckets == [(0.1, 2.0), (0.5, 9.0), (float("inf"), 10.0)]
    assert (total, count) == (2.5, 10.0)
    assert quantile(buckets, 0.2) == 0.1 and quantile(buckets, 0.5) == 0.5
    assert quantile(buckets, 0.99) == float("inf")
