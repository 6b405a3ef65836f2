"""The DELETE-under-feedback loop in quick mode (the full runs: 50 iterations per store)."""

from benchmarks.delete_under_feedback import run
from benchmarks.servers import RedisServer


def test_delete_under_feedback_loses_nothing_and_resurrects_nothing(tmp_path):
    redis = RedisServer(tmp_path, appendfsync="always")
    redis.start()
    try:
        for redis_url, iterations in ((None, 2), (redis.url, 2)):
            summary = run(iterations, redis_url)
            assert summary["violations"] == []
            assert summary["iterations"] == iterations and summary["acked_examples"] > 0
    finally:
        redis.stop()
