"""The Redis stream log (``service.durability.redis_log``), against a real redis-server."""

from __future__ import annotations

import time

import pytest
import redis

from service.durability.feedback_log import LogUnavailable, encode_record, position_time
from service.durability.redis_log import RedisLog
from tests.service.durability.test_feedback_log import batch


def test_redis_log(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    journal = RedisLog(client, prefix="t")
    records = [encode_record(*batch(seed)) for seed in range(5)]
    positions = [journal.append_many("m", [r])[0] for r in records]
    assert positions == sorted(positions, key=lambda p: tuple(map(int, p.split("-"))))
    assert abs(position_time(positions[0]) - time.time()) < 60
    assert [r for _, r in journal.read_after("m", None)] == records
    assert [r for _, r in journal.read_after("m", positions[1], chunk=2)] == records[2:]
    journal.trim("m", positions[2])  # entries from the position on are kept
    assert journal.length("m") == 3
    assert [r for _, r in journal.read_after("m", positions[2])] == records[3:]
    journal.delete("m")
    assert journal.length("m") == 0
    # several records in one round trip (a pipeline), in order
    calls = []
    execute = redis.client.Pipeline.execute

    def counted(self, *args, **kwargs):
        calls.append(len(self.command_stack))
        return execute(self, *args, **kwargs)

    redis.client.Pipeline.execute = counted
    try:
        many = journal.append_many("m", records)
    finally:
        redis.client.Pipeline.execute = execute
    assert calls == [5] and many == sorted(many, key=lambda p: tuple(map(int, p.split("-"))))
    assert list(journal.read_after("m", None)) == list(zip(many, records, strict=True))
    # an append is a round trip: never without waiting, and durable when XADD answers
    assert journal.try_append("m", records) is None and not journal.syncs
    assert journal.length("m") == 5
    journal.delete("m")
    redis_server.stop()
    down = RedisLog(redis.Redis.from_url(redis_server.url, socket_timeout=1), "t")
    for append in (
        lambda: down.append_many("m", records[:1]),
        lambda: down.append_many("m", records),
    ):
        with pytest.raises(LogUnavailable) as refused:
            append()
        assert refused.value.maybe_written  # (a lost reply cannot be told from no write)
    client.close()


def test_redis_log_replicated_waits_for_the_replicas_the_master_has(redis_server, tmp_path):
    """``replicated`` (a learner's check before it learns records, with ``wait_replicas``):
    true at once for a master without replicas (none could be promoted in its place), true
    once its replica has the records, false while the replica does not answer."""
    import signal

    from benchmarks.servers import RedisServer
    from tests.service.conftest import wait_for

    client = redis.Redis.from_url(redis_server.url)
    journal = RedisLog(client, prefix="t", wait_replicas=1, wait_timeout=0.5)
    plain = RedisLog(client, prefix="t")  # appends without waiting
    assert plain.replicated("m")  # (without wait_replicas: at once)
    plain.append_many("m", [encode_record(*batch(0))], None)
    assert journal.replicated("m")  # no replica connected
    replica = RedisServer(tmp_path / "replica")
    (tmp_path / "replica").mkdir()
    replica.start()
    try:
        replica_client = redis.Redis(port=replica.port)
        client.config_set("repl-diskless-sync-delay", 0)  # (its first copy at once)
        replica_client.replicaof("127.0.0.1", redis_server.port)
        deadline = time.monotonic() + 20
        while replica_client.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not connect"
            time.sleep(0.05)  # (while it makes its first copy, ``replicated`` is false)
        plain.append_many("m", [encode_record(*batch(1))], None)
        wait_for(lambda: journal.replicated("m"), timeout=20)  # (false = not yet: retried)
        assert replica_client.xlen(journal.key("m")) == 2  # what it confirmed it has
        replica.process.send_signal(signal.SIGSTOP)
        try:
            plain.append_many("m", [encode_record(*batch(2))], None)
            started = time.monotonic()
            assert not journal.replicated("m")  # the replica holds still: not yet
            assert time.monotonic() - started < 5
        finally:
            replica.process.send_signal(signal.SIGCONT)
        wait_for(lambda: journal.replicated("m"), timeout=20)
        assert replica_client.xlen(journal.key("m")) == 3
        replica_client.close()
    finally:
        replica.stop()
        client.close()


def test_entries_carry_traceparents_only_when_given_them(redis_server):
    """With ``traces`` an entry keeps its request's traceparent in field ``t`` (the scripted
    appends, the plain ones and ``append_once``); without, the record alone, as before; the
    records read back are the same either way."""
    client = redis.Redis.from_url(redis_server.url)
    log = RedisLog(client, prefix="t")
    records = [encode_record(*batch(seed)) for seed in range(6)]
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    log.append_many("m", records[:2], "i1", traces=[parent, None])
    log.append_many("m", records[2:3], "i1")
    log.append_many("m", records[3:5], None, traces=[None, parent])
    position, _ = log.append_once("m", records[5], "i1", "k", b"{}", 60, trace=parent)
    assert position is not None
    fields = [f for _, f in client.xrange(log.key("m"))]
    assert [f.get(b"t") for f in fields] == [parent.encode(), None, None, None] + [
        parent.encode()
    ] * 2
    assert [r for _, r in log.read_after("m", None)] == records
