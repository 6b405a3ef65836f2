import threading
import time

import pytest

from service.exceptions import NotFound
from service.model.lifecycle import Lifecycle, State


def test_a_model_admits_requests_only_while_serving():
    lifecycle = Lifecycle("m")
    with pytest.raises(NotFound):
        lifecycle.enter()  # still being created
    lifecycle.serve()
    lifecycle.enter()
    lifecycle.exit()
    assert lifecycle.close() and lifecycle.state is State.DELETING
    with pytest.raises(NotFound):
        lifecycle.enter()
    assert not lifecycle.close()  # one deletion at a time
    lifecycle.end()
    assert lifecycle.state is State.GONE


def test_closing_waits_for_the_requests_inside():
    lifecycle = Lifecycle("m")
    lifecycle.serve()
    lifecycle.enter()
    closed = []
    closer = threading.Thread(target=lambda: closed.append(lifecycle.close()))
    closer.start()
    time.sleep(0.1)
    assert closed == [] and lifecycle.state is State.DELETING  # the door is shut already
    with pytest.raises(NotFound):
        lifecycle.enter()
    lifecycle.exit()
    closer.join(timeout=5)
    assert closed == [True]
