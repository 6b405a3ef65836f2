"""The feedback log: record encoding, the file log (segments, torn tails, trimming) and the
Redis stream log, against a real redis-server."""

from __future__ import annotations

import time

import numpy as np
import pytest
import redis

from core.features import CSRBatch
from service.durability.feedback_log import (
    FileLog,
    LogCorrupt,
    LogUnavailable,
    RedisLog,
    decode_record,
    encode_record,
    position_time,
)


def batch(seed: int, n_rows: int = 3) -> tuple[CSRBatch, np.ndarray]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, n_rows)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = np.concatenate([np.sort(rng.choice(50, c, replace=False)) for c in counts])
    values = rng.standard_normal(indptr[-1])
    return CSRBatch(indptr, indices.astype(np.int64), values), rng.integers(0, 2, n_rows)


def same(a: CSRBatch, b: CSRBatch) -> bool:
    return all(
        np.array_equal(getattr(a, f), getattr(b, f)) for f in ("indptr", "indices", "values")
    )


@pytest.mark.parametrize("targets", [np.array([0, 1, 1]), np.array([0.5, -1e300, np.pi])])
def test_record_round_trip(targets):
    rows, _ = batch(0)
    decoded, decoded_targets, at = decode_record(encode_record(rows, targets, at=12.5))
    assert same(rows, decoded) and at == 12.5
    assert decoded_targets.dtype == targets.dtype
    assert np.array_equal(decoded_targets, targets)


def test_empty_batch_round_trip():
    empty = CSRBatch(np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0))
    decoded, targets, _ = decode_record(encode_record(empty, np.zeros(0, np.int64)))
    assert decoded.n_rows == 0 and targets.shape == (0,)


@pytest.mark.parametrize("cut", [0, 5, 20, -1])
def test_truncated_or_foreign_records_are_refused(cut):
    record = encode_record(*batch(1))
    with pytest.raises(LogCorrupt):
        decode_record(record[:cut])
    with pytest.raises(LogCorrupt):
        decode_record(b"XXXX" + record[4:])


def test_file_log_appends_reads_and_reopens(tmp_path):
    journal = FileLog(tmp_path)
    records = [encode_record(*batch(seed)) for seed in range(5)]
    assert [journal.append_many("m", [r])[0] for r in records] == [1, 2, 3, 4, 5]
    assert [p for p, _ in journal.read_after("m", None)] == [1, 2, 3, 4, 5]
    assert [r for _, r in journal.read_after("m", 3)] == records[3:]
    journal.close()
    reopened = FileLog(tmp_path)
    assert reopened.append_many("m", [records[0]])[0] == 6  # positions continue after a restart
    assert reopened.length("m") == 6 and reopened.length("other") == 0


def test_file_log_cuts_a_torn_tail(tmp_path):
    journal = FileLog(tmp_path)
    records = [encode_record(*batch(seed)) for seed in range(3)]
    for record in records:
        journal.append_many("m", [record])[0]
    journal.close()
    (segment,) = (tmp_path / "m").glob("*.log")
    size = segment.stat().st_size
    with open(segment, "r+b") as handle:  # a crash in the middle of the last frame
        handle.truncate(size - 7)
    reopened = FileLog(tmp_path)
    assert [p for p, _ in reopened.read_after("m", None)] == [1, 2]
    assert reopened.append_many("m", [records[2]])[0] == 3  # appended after the last whole record
    assert [r for _, r in reopened.read_after("m", None)] == records


def test_file_log_stops_at_a_bad_checksum(tmp_path):
    journal = FileLog(tmp_path)
    for seed in range(3):
        journal.append_many("m", [encode_record(*batch(seed))])[0]
    journal.close()
    (segment,) = (tmp_path / "m").glob("*.log")
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF  # flip a bit of the last record
    segment.write_bytes(bytes(data))
    assert [p for p, _ in FileLog(tmp_path).read_after("m", None)] == [1, 2]


def test_file_log_trim_keeps_everything_after_the_position(tmp_path):
    journal = FileLog(tmp_path)
    records = [encode_record(*batch(seed)) for seed in range(9)]
    for record in records[:4]:
        journal.append_many("m", [record])[0]
    journal.trim("m", 2)  # segment 1..4 is still needed (3, 4 follow the snapshot)
    assert [p for p, _ in journal.read_after("m", 2)] == [3, 4]
    for record in records[4:7]:
        journal.append_many("m", [record])[0]
    journal.trim("m", 6)  # 1..4 is wholly covered now; 5..7 holds 7
    assert [p for p, _ in journal.read_after("m", None)] == [5, 6, 7]
    assert [r for _, r in journal.read_after("m", 6)] == [records[6]]
    journal.trim("m", 7)
    assert list(journal.read_after("m", 7)) == []
    journal.append_many("m", [records[7]])[0]
    assert [p for p, _ in journal.read_after("m", 7)] == [8]
    journal.close()
    assert [p for p, _ in FileLog(tmp_path).read_after("m", 7)] == [8]


def test_file_log_delete_and_reuse(tmp_path):
    journal = FileLog(tmp_path, fsync="none")
    journal.append_many("m", [encode_record(*batch(0))])[0]
    journal.delete("m")
    assert not (tmp_path / "m").exists()
    assert journal.append_many("m", [encode_record(*batch(1))])[0] == 1


def test_file_log_refuses_when_it_cannot_write(tmp_path):
    (tmp_path / "blocked").write_text("a file where the log directory should be")
    with pytest.raises(LogUnavailable, match="could not be written"):
        FileLog(tmp_path / "blocked").append_many("m", [encode_record(*batch(0))])
    with pytest.raises(ValueError, match="fsync"):
        FileLog(tmp_path, fsync="sometimes")


def test_file_log_appends_many_in_one_write(tmp_path):
    """``append_many``: consecutive positions, frames read back (checksums included) as if
    appended one by one, and a failed write leaves none of them."""
    journal = FileLog(tmp_path)
    records = [encode_record(*batch(seed)) for seed in range(6)]
    assert journal.append_many("m", [records[0]])[0] == 1
    assert journal.append_many("m", records[1:4]) == [2, 3, 4]
    journal.close()
    reopened = FileLog(tmp_path)
    assert list(reopened.read_after("m", None)) == list(enumerate(records[:4], start=1))
    state = reopened._state("m")
    reopened.append_many("m", [records[4]])[0]  # (opens the segment)
    writes = []

    class Failing:  # the segment's file, whose next write is cut short
        def __init__(self, handle):
            self.handle = handle

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def write(self, data):
            writes.append(len(data))
            self.handle.write(data[: len(data) // 2])  # half of it reaches the file
            self.handle.flush()
            raise OSError("disk full")

    real = state.handle
    state.handle = Failing(real)
    with pytest.raises(LogUnavailable):
        reopened.append_many("m", records[:2])
    state.handle = real
    assert len(writes) == 1  # one write for the whole group
    assert reopened.append_many("m", [records[5]])[0] == 6
    reopened.close()
    assert [r for _, r in FileLog(tmp_path).read_after("m", 4)] == [records[4], records[5]]


def test_file_log_try_append_never_waits(tmp_path):
    """``try_append`` (the event loop's) appends as ``append_many`` does when it need not
    wait, and otherwise writes nothing: before the model's segment is open (creating it
    fsyncs), or while another thread holds its log (a trim, a sync taking its descriptor)."""
    journal = FileLog(tmp_path)
    records = [encode_record(*batch(seed)) for seed in range(4)]
    assert journal.try_append("m", records[:1]) is None  # no segment open yet
    assert journal.append_many("m", records[:1]) == [1]
    assert journal.try_append("m", records[1:3]) == [2, 3]
    state = journal._state("m")
    with state.lock:
        assert journal.try_append("m", records[3:]) is None
    assert [r for _, r in journal.read_after("m", None)] == records[:3]
    journal.trim("m", 3)  # starts a new segment: open, so appends go on without waiting
    assert journal.try_append("m", records[3:]) == [4]
    assert journal.syncs and not FileLog(tmp_path / "b", fsync="none").syncs
    journal.close()
    assert [r for _, r in FileLog(tmp_path).read_after("m", None)] == records[3:]


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


def test_file_log_archives_trimmed_segments(tmp_path):
    journal = FileLog(tmp_path / "log", archive=tmp_path / "archive")
    records = [encode_record(*batch(seed)) for seed in range(4)]
    for record in records[:2]:
        journal.append_many("m", [record])[0]
    journal.trim("m", 2)
    for record in records[2:]:
        journal.append_many("m", [record])[0]
    assert [p for p, _ in journal.read_after("m", None)] == [3, 4]
    archived = FileLog(tmp_path / "archive")
    assert [r for _, r in archived.read_after("m", None)] == records[:2]


def test_file_log_appends_and_trims_from_several_threads(tmp_path):
    """Requests append while the worker trims: no append may meet a closed segment."""
    import threading

    journal = FileLog(tmp_path, fsync="none")
    record = encode_record(*batch(0))
    errors, last = [], [0]

    def append():
        for _ in range(1500):
            try:
                last[0] = journal.append_many("m", [record])[0]
            except Exception as error:
                errors.append(error)

    def trim():
        for _ in range(200):
            try:
                journal.trim("m", last[0])
                list(journal.read_after("m", last[0]))
            except Exception as error:
                errors.append(error)

    threads = [threading.Thread(target=f) for f in (append, append, trim)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # what the last trim kept is consecutive, and positions go on after the 3000 appends
    positions = [p for p, _ in journal.read_after("m", None)]
    assert positions == list(range(3001 - len(positions), 3001))
    assert journal.append_many("m", [record])[0] == 3001


def test_file_log_group_commit_shares_one_fsync(tmp_path, monkeypatch):
    """Records written before an fsync are durable by it: the requests waiting together
    share one fsync; a rotated segment is fsynced before it is closed."""
    import os

    journal = FileLog(tmp_path)
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    positions = [journal.append_many("m", [encode_record(*batch(seed))])[0] for seed in range(3)]
    calls.clear()  # the first append created the segment (and fsynced its directory)
    journal.append_many("m", [encode_record(*batch(9))])[0]
    assert calls == []  # appends only write
    journal.sync("m", positions[0])
    assert len(calls) == 1
    journal.sync("m", positions[2])  # covered by the same fsync
    journal.sync("m", positions[1])
    assert len(calls) == 1
    journal.sync("m", 4)  # written before that fsync too
    assert len(calls) == 1
    fifth = journal.append_many("m", [encode_record(*batch(3))])[0]
    journal.sync("m", fifth)  # written after it: a new fsync
    assert len(calls) == 2
    sixth = journal.append_many("m", [encode_record(*batch(4))])[0]
    journal.trim("m", positions[0])  # rotation: the old segment is fsynced first
    assert len(calls) == 2 + 2  # the old segment, then the directory of the new one
    journal.sync("m", sixth)  # already on disk with the rotated segment
    assert len(calls) == 4
    FileLog(tmp_path, fsync="none").sync("m", 99)  # nothing to do without fsync


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
