"""A model's durability record: the backlog of paused learning and where reading the log
goes on."""

from __future__ import annotations

from service.durability.record import DurabilityRecord


def test_the_backlog_is_read_after_the_log_position_until_learned_or_discarded():
    record = DurabilityRecord()
    record.learned(1, 3, 3, 300)
    assert record.read_position == 3 and record.backlog == 0
    record.backlogged(5, 2)
    record.backlogged(6, 1)
    assert record.backlog == 3 and record.read_position == 6 and record.log_position == 3
    undo = record.discard_backlog()
    assert record.backlog == 0 and record.log_position == 6 and record.read_position == 6
    undo()  # (the change that discarded could not be saved)
    assert record.backlog == 3 and record.log_position == 3 and record.read_position == 6
    record.caught_up()  # (learned: each record accounted by ``learned``)
    assert record.backlog == 0 and record.read_position == 3
    record.learned(4, 6, 3, 300)
    assert record.log_position == 6 and record.records_since_snapshot == 6


def test_discarding_no_backlog_changes_nothing():
    record = DurabilityRecord()
    record.learned(1, 2, 2, 10)
    undo = record.discard_backlog()
    assert record.log_position == 2 and record.backlog == 0
    undo()
    assert record.log_position == 2
