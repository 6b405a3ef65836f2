"""service/durability/journal.py: records appended through a real file log, and log errors
turned into the domain errors the routes answer (a log whose append fails as a Redis log's
can)."""

import numpy as np
import pytest

from core.features import as_batch
from service.durability.feedback_log import LogUnavailable, ModelGone, decode_record
from service.durability.file_log import FileLog
from service.durability.journal import Feedback, Journal
from service.exceptions import NotFound, Unavailable


def _item(value: float = 1.0) -> Feedback:
    return Feedback(as_batch([(np.array([0, 2]), np.array([value, 2.0]))], 3), np.array([1]))


def test_appends_in_order_and_counts_their_bytes(tmp_path):
    journal = Journal(FileLog(tmp_path), "m", "i1")
    first = journal.append([_item(1.0), _item(2.0)])
    second = journal.append([_item(3.0)], blocking=False)
    assert first == [1, 2] and second == [3]
    journal.sync(second[-1])
    records = journal.records_after(None)
    assert [p for p, _ in records] == [1, 2, 3]
    assert [decode_record(r)[0].values[0] for _, r in records] == [1.0, 2.0, 3.0]
    assert journal.appended == sum(len(r) for _, r in records)


class _Failing(FileLog):
    """A file log whose appends fail with ``error`` (as a Redis log's may)."""

    def __init__(self, directory, error: Exception):
        super().__init__(directory)
        self.error = error

    def append_many(self, model, records, incarnation=None):
        raise self.error

    def try_append(self, model, records):
        raise self.error


@pytest.mark.parametrize("blocking", [True, False])
def test_log_errors_become_domain_errors(tmp_path, blocking):
    gone = Journal(_Failing(tmp_path, ModelGone("deleted elsewhere")), "m", "i1")
    with pytest.raises(NotFound) as refused:
        gone.append([_item()], blocking)
    assert refused.value.code == "model_not_found" and gone.failures == 0

    down = Journal(_Failing(tmp_path, LogUnavailable("disk full")), "m", "i1")
    with pytest.raises(Unavailable) as refused:
        down.append([_item()], blocking)
    assert (refused.value.code, refused.value.applied) == ("log_unavailable", False)
    assert "nothing was learned: disk full" in str(refused.value)
    assert down.failures == 1 and not down.uncertain and down.appended == 0

    lost = Journal(_Failing(tmp_path, LogUnavailable("reply lost", True)), "m", "i1")
    with pytest.raises(Unavailable) as refused:
        lost.append([_item()], blocking)
    assert refused.value.applied and lost.uncertain and lost.failures == 1
    # an uncertain log makes the event loop's append step aside (the model reads it first)
    assert lost.append([_item()], blocking=False) is None
