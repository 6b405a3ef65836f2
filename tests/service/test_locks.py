import threading
import time

from service.locks import RWLock


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
