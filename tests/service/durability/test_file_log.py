"""The file log (``service.durability.file_log``): segments, torn tails, trimming, group
commit."""

from __future__ import annotations

import threading

import pytest

from service.durability.feedback_log import LogUnavailable, encode_record
from service.durability.file_log import FileLog
from tests.service.durability.test_feedback_log import batch


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

    def fsync(fd):
        # (only this log's: a thread another test left behind may fsync its own files)
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path)):
            calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
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
