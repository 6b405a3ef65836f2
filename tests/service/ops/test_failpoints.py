"""Failpoints (``service.ops.failpoints``): the settings a test gives, and a held thread."""

import threading

import pytest

from service.ops import failpoints
from tests.service.conftest import wait_for


def test_failpoints_are_parsed_and_checked():
    assert failpoints.parse("replica.swap=hold*1, feedback.answer=stop") == {
        "replica.swap": ["hold", 1],
        "feedback.answer": ["stop", None],
    }
    for bad in ("replica.swap=sleep", "nowhere=raise"):
        with pytest.raises(ValueError, match="unknown failpoint or action"):
            failpoints.parse(bad)


def test_a_held_thread_waits_while_its_file_exists(tmp_path, monkeypatch):
    """``hold``: the thread that reaches the point creates its file and goes on once the
    file is removed; the rest of the process runs meanwhile. ``*1``: once only."""
    monkeypatch.setenv("LORENTZTRON_FAILPOINTS_DIR", str(tmp_path))
    monkeypatch.setattr(failpoints, "_points", failpoints.parse("replica.swap=hold*1"))
    passed = threading.Event()

    def reach():
        failpoints.reach("replica.swap")
        passed.set()

    thread = threading.Thread(target=reach)
    thread.start()
    held = tmp_path / "replica.swap"
    wait_for(held.exists, timeout=5)
    assert not passed.wait(0.2)  # held while the file exists
    held.unlink()
    assert passed.wait(5)
    thread.join()
    failpoints.reach("replica.swap")  # (spent: it goes on at once)
    assert not held.exists()
