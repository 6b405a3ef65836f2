"""The recovery benchmark's log: records the service reads back as a model's log."""

from benchmarks.service_durability.recovery import write_log
from service.durability.feedback_log import decode_record
from service.durability.file_log import FileLog


def test_write_log_writes_single_example_records(tmp_path):
    write_log(tmp_path, 5, seed=1)
    records = list(FileLog(tmp_path).read_after("m", None))
    assert [position for position, _ in records] == [1, 2, 3, 4, 5]
    for _, record in records:
        batch, targets, _ = decode_record(record)
        assert batch.n_rows == 1 and targets.tolist()[0] in (0, 1)
