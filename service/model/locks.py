"""The readers-writer lock of a live model: many predictions or one learner at a time."""

from __future__ import annotations

import itertools
import threading

#: the conditions the models' locks share, a stripe each: a condition per lock costs ~1 KB
#: (its lock, its waiters' deque, its bound methods), 20 MB for 20,000 models. A waiter
#: woken for another lock of its stripe finds its own state unchanged and waits again.
STRIPES = 64
_stripes = [threading.Condition(threading.Lock()) for _ in range(STRIPES)]
_next_stripe = itertools.count()


def stripe(conditions: list[threading.Condition]) -> threading.Condition:
    """The next condition of ``conditions``, in turn."""
    return conditions[next(_next_stripe) % len(conditions)]


class RWLock:
    """Many readers or one writer; a waiting writer blocks new readers (no starvation)."""

    __slots__ = ("_condition", "_readers", "_writer", "_writers_waiting")

    def __init__(self):
        self._condition = stripe(_stripes)
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    def acquire_read(self, blocking: bool = True) -> bool:
        """Hold the lock shared; with ``blocking`` false, only if no writer holds it or
        waits for it (False, not held, otherwise)."""
        with self._condition:
            while self._writer or self._writers_waiting:
                if not blocking:
                    return False
                self._condition.wait()
            self._readers += 1
            return True

    def release_read(self):
        with self._condition:
            self._readers -= 1
            if self._readers == 0 and self._writers_waiting:  # (only writers wait for it)
                self._condition.notify_all()

    def acquire_write(self, blocking: bool = True) -> bool:
        """Hold the lock exclusively; with ``blocking`` false, only if nobody holds it or
        waits for it (False, not held, otherwise)."""
        with self._condition:
            if not blocking:
                if self._writer or self._readers or self._writers_waiting:
                    return False
                self._writer = True
                return True
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._condition.wait()
            self._writers_waiting -= 1
            self._writer = True
            return True

    def release_write(self):
        with self._condition:
            self._writer = False
            self._condition.notify_all()

    def read(self):
        """``with lock.read():`` holds it shared."""
        return _Held(self.acquire_read, self.release_read)

    def write(self):
        """``with lock.write():`` holds it exclusively."""
        return _Held(self.acquire_write, self.release_write)


class _Held:
    def __init__(self, acquire, release):
        self._acquire, self._release = acquire, release

    def __enter__(self):
        self._acquire()

    def __exit__(self, *exc):
        self._release()
