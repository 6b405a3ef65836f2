"""Feedback in groups: the feedback requests of one model that arrive together are logged
and learned as a group, each answered as if alone, with one log append and one fsync for the
group (group commit). FastAPI's route and the fast path both submit here, so the
``fast_path`` setting changes speed, never durability or answers.

Small requests (bodies up to ``GROUP_BODY_BYTES``) of a model wait on the event loop in
arrival order; one group at a time goes to a handler thread (the model has one writer
anyway), and the requests that arrive meanwhile form the next group, started as soon as the
current one is learned, while its records are still being made durable. Larger (bulk) bodies
go alone, so that their parsing overlaps the learning before them.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

from service.bodies import Prepared, prepare_feedback
from service.exceptions import ServiceError
from service.idempotency import Answer, Key
from service.journal import Feedback
from service.live import LiveModel

#: feedback bodies up to this size are handled in groups per model (larger ones alone)
GROUP_BODY_BYTES = 64 * 1024
#: at most this many requests per group
GROUP_REQUESTS = 64

#: one request of a group: its content type, body and idempotency key (optional, or None)
Request = tuple[str | None, bytes, Key | None] | tuple[str | None, bytes]


def _account(app, live: LiveModel, answer: dict) -> None:
    """The metrics of a request learned (or logged) now."""
    logged = "logged" in answer
    n = answer["logged"] if logged else answer["learned"]
    app.metrics.learned(live.name, n, None if logged else answer["aggressive"])


def handle_group(
    app, live: LiveModel, requests: list[Request], learned: Callable[[], None]
) -> list[tuple[bool, Any]]:
    """Handle feedback requests of one model, in their order, in one handler thread: one
    ``(True, answer)`` or ``(False, exception)`` per request.

    A retry of a keyed request gets its kept answer (``service.idempotency``), once the log
    holds its record durably. Each other request is parsed and validated alone (its own
    4xx), then the valid ones are logged and learned by ``LiveModel.learn_group`` and made
    durable by one ``sync`` after the last of them, before any is answered. ``learned()`` is
    called between the two, so that the next group can be learned during this fsync. A
    failed fsync answers 503 ``log_unavailable`` to every request whose record it was to
    make durable."""
    outcomes: list[tuple[bool, Any]] = [(False, None)] * len(requests)
    prepared: list[tuple[int, Prepared, Key | None]] = []
    retries: list[tuple[int, Answer, Key]] = []
    claimed: list[Key] = []
    position = None
    settings = app.settings
    try:
        try:
            for k, request in enumerate(requests):
                content_type, body, key = (*request, None)[:3]
                try:
                    if key is not None:
                        answer = live.claim(key)
                        if answer is not None:
                            retries.append((k, answer, key))
                            continue
                        claimed.append(key)
                    prepared.append(
                        (
                            k,
                            prepare_feedback(
                                live, content_type, body, app.cache, settings.max_batch
                            ),
                            key,
                        )
                    )
                except ServiceError as error:
                    if error.code.endswith("_prediction_id"):
                        app.metrics.pending_misses.labels(
                            error.code.removesuffix("_prediction_id")
                        ).inc()
                    outcomes[k] = (False, error)
                except Exception as error:  # the request's own answer (a 422, or a 500)
                    outcomes[k] = (False, error)
            results, position = live.learn_group(
                [Feedback(p.batch, p.targets, p.with_results, key) for _, p, key in prepared]
            )
            for (k, p, _), result in zip(prepared, results, strict=True):
                if isinstance(result, BaseException):
                    p.refused(app.cache, result)
                    outcomes[k] = (False, result)
                else:
                    _account(app, live, result)
                    outcomes[k] = (True, result)
        finally:
            learned()
        if position is not None:
            try:
                live.sync(position)
            except ServiceError as error:  # every request whose record was written
                for k, _, _ in prepared:
                    ok, value = outcomes[k]
                    if ok or getattr(value, "applied", False):
                        outcomes[k] = (False, error)
        for k, answer, key in retries:  # answered again once their records are durable
            try:
                if answer.position is not None:
                    live.sync(answer.position)
                outcomes[k] = (True, answer.replay(key))
            except ServiceError as error:
                outcomes[k] = (False, error)
    finally:
        for key in claimed:
            live.answers.release(key)
    return outcomes


class FeedbackGroups:
    """The waiting feedback requests of every model (one queue per model incarnation)."""

    def __init__(self, app):
        self.app = app
        self._queues: dict[str, _Queue] = {}

    async def submit(
        self, live: LiveModel, content_type: str | None, body: bytes, key: Key | None = None
    ) -> dict:
        """The answer to one feedback request (or its exception)."""
        loop = asyncio.get_running_loop()
        request = (content_type, body, key)
        if len(body) > GROUP_BODY_BYTES:  # bulk: its parsing overlaps the learning before it
            [(ok, value)] = await loop.run_in_executor(
                self.app.executor, handle_group, self.app, live, [request], _nothing
            )
            if not ok:
                raise value
            return value
        queue = self._queue(live, loop)
        answer = loop.create_future()
        queue.waiting.append((request, answer))
        if not queue.busy:
            queue.start()
        return await answer

    def _queue(self, live: LiveModel, loop) -> _Queue:
        queue = self._queues.get(live.incarnation)
        if queue is None or queue.loop is not loop:
            if len(self._queues) >= 1024:  # forget idle queues (of deleted models, say)
                self._queues = {k: q for k, q in self._queues.items() if q.busy or q.waiting}
            queue = self._queues[live.incarnation] = _Queue(self.app, live, loop)
        return queue


def _nothing() -> None:
    pass


class _Queue:
    """The small feedback requests of one model waiting for a handler thread."""

    def __init__(self, app, live: LiveModel, loop: asyncio.AbstractEventLoop):
        self.app = app
        self.live = live
        self.loop = loop
        self.waiting: collections.deque = collections.deque()
        self.busy = False

    def start(self) -> None:
        """Send the waiting requests (at most ``GROUP_REQUESTS``) to a handler thread."""
        group = [self.waiting.popleft() for _ in range(min(len(self.waiting), GROUP_REQUESTS))]
        self.busy = True
        released = False

        def release() -> None:  # on the loop: the group is learned, the next one may go
            nonlocal released
            if not released:
                released = True
                self.busy = False
                if self.waiting:
                    self.start()

        def learned() -> None:  # in the handler thread
            self.loop.call_soon_threadsafe(release)

        def done(future: asyncio.Future) -> None:
            release()  # (if the thread failed before it was learned)
            if future.cancelled():  # (the loop is closing)
                for _, answer in group:
                    answer.cancel()
                return
            if future.exception() is not None:
                outcomes = [(False, future.exception())] * len(group)
            else:
                outcomes = future.result()
            for (_, answer), (ok, value) in zip(group, outcomes, strict=True):
                if answer.done():  # its client went away
                    continue
                if ok:
                    answer.set_result(value)
                else:
                    answer.set_exception(value)

        requests = [request for request, _ in group]
        try:
            running = self.loop.run_in_executor(
                self.app.executor, handle_group, self.app, self.live, requests, learned
            )
        except Exception as error:  # the pool is shut down: no thread will answer
            failed = self.loop.create_future()
            failed.set_exception(error)
            done(failed)
            return
        running.add_done_callback(done)
