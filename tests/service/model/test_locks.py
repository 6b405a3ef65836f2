import threading
import time

from service.model.locks import RWLock


def test_rwlock_readers_share_writers_exclude():
    lock = RWLock()
    inside = []
    events = []

    def reader():
        with lock.read():
            inside.append(1)
            time.sleep(0.05)
            events.append(("read", len(inside)))
            inside.pop()

    def writer():
        with lock.write():
            events.append(("write", len(inside)))

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.01)
    writer_thread = threading.Thread(target=writer)
    writer_thread.start()
    for thread in [*threads, writer_thread]:
        thread.join()
    assert max(n for kind, n in events if kind == "read") > 1  # readers overlapped
    assert all(n == 0 for kind, n in events if kind == "write")  # writer alone


def test_a_reader_that_cannot_wait_is_refused_while_a_writer_holds_or_waits():
    lock = RWLock()
    assert lock.acquire_read(blocking=False)  # free: held shared
    writer_waits = threading.Thread(target=lambda: (lock.acquire_write(), lock.release_write()))
    writer_waits.start()
    while not lock._writers_waiting:  # the writer waits for the reader to leave
        time.sleep(0.001)
    assert not lock.acquire_read(blocking=False)  # a waiting writer goes first
    assert lock._readers == 1  # (the refusal holds nothing)
    lock.release_read()
    writer_waits.join(timeout=10)
    assert not writer_waits.is_alive()
    with lock.write():
        assert not lock.acquire_read(blocking=False)  # a writer holds it
    assert lock.acquire_read(blocking=False)
    lock.release_read()
    assert lock._readers == 0 and not lock._writer


def test_a_writer_that_cannot_wait_is_refused_unless_the_lock_is_free():
    lock = RWLock()
    assert lock.acquire_write(blocking=False)  # free: held exclusively
    assert not lock.acquire_write(blocking=False) and not lock.acquire_read(blocking=False)
    lock.release_write()
    with lock.read():
        assert not lock.acquire_write(blocking=False)  # a reader holds it
    lock.acquire_read()
    writer_waits = threading.Thread(target=lambda: (lock.acquire_write(), lock.release_write()))
    writer_waits.start()
    while not lock._writers_waiting:
        time.sleep(0.001)
    lock.release_read()
    writer_waits.join(timeout=10)
    assert not writer_waits.is_alive()
    with lock.read():
        lock._writers_waiting += 1  # (a writer waits: it goes first, not the one that can't)
        assert not lock.acquire_write(blocking=False)
        lock._writers_waiting -= 1
    assert lock.acquire_write(blocking=False) and lock._readers == 0
    lock.release_write()
