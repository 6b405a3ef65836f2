"""Failpoints: named places in the service where a test makes the process stop or fail on
purpose, so that a test that must catch the service between two steps does so
deterministically instead of racing it.

They are read once from the environment variable ``LORENTZTRON_FAILPOINTS``, which only
tests set: ``name=action`` pairs separated by commas, an action optionally followed by
``*n`` (fire ``n`` times, then never again; default: every time). Actions:

- ``stop``: the thread that reaches it sends SIGSTOP to itself, which stops the process
  there (the test sees it stopped in ``/proc``, then kills or resumes it);
- ``raise``: ``FailpointError`` is raised there (as an unexpected error of the code around
  it: a Redis call whose reply is lost, say);
- ``hold``: the thread that reaches it creates the file ``<name>`` in the directory
  ``LORENTZTRON_FAILPOINTS_DIR`` and waits there while the file exists (the rest of the
  process runs on: the test sees the file, checks what it wants, then removes it).

Unset (production), ``reach`` costs one truth test of an empty dict.
"""

from __future__ import annotations

import os
import signal
import threading
import time

#: the places tests use (each named where it is reached)
POINTS = {
    "feedback.answer": "a feedback request is learned and durable, not yet answered",
    "redis_log.appended": "a Redis log append or keyed append ran, its reply not yet read",
    "redis_log.keyed_appended": "a keyed Redis log append ran, its reply not yet read",
    "replica.swap": "an api replica built a published version aside, not yet swapped in",
    "parallel.round": "a parallel model's share learned its round, not yet written",
    "parallel.merge": "a parallel model's owner read its shares' rounds, not yet merged",
    "learner.placement": "a learner placed the free models, not yet taken those placed on it",
}
#: how often a held thread looks whether its file is still there, seconds
HOLD_POLL = 0.01


class FailpointError(RuntimeError):
    """Raised by a ``raise`` failpoint."""


def parse(text: str) -> dict[str, list]:
    """``{name: [action, times left or None]}`` of a ``LORENTZTRON_FAILPOINTS`` value."""
    points = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, _, action = entry.partition("=")
        action, _, times = action.partition("*")
        if name not in POINTS or action not in ("stop", "raise", "hold"):
            raise ValueError(f"LORENTZTRON_FAILPOINTS: unknown failpoint or action {entry!r}")
        points[name] = [action, int(times) if times else None]
    return points


_points = parse(os.environ.get("LORENTZTRON_FAILPOINTS", ""))
_lock = threading.Lock()


def reach(name: str) -> None:
    """The failpoint ``name`` is reached: do its action if one is set."""
    if not _points:
        return
    with _lock:
        point = _points.get(name)
        if point is None or point[1] == 0:
            return
        if point[1] is not None:
            point[1] -= 1
        action = point[0]
    if action == "stop":
        # (to this thread: it takes the stop itself on its way back from the call, before
        # its next step; kill() to the process may be taken by another thread, this one
        # running on for a moment: long enough to send the write the test wants held)
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
    elif action == "hold":
        path = os.path.join(os.environ["LORENTZTRON_FAILPOINTS_DIR"], name)
        with open(path, "w"):
            pass
        while os.path.exists(path):
            time.sleep(HOLD_POLL)
    else:
        raise FailpointError(f"failpoint {name}")
