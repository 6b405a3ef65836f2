"""Feedback in groups: the feedback requests of one model that arrive together are logged
and learned in order, each answered as if alone, and made durable by one fsync for all of
them (group commit). FastAPI's route and the fast path both submit here, so the
``fast_path`` setting changes speed, never durability or answers.

A small request (body up to ``INLINE_BODY_BYTES``) of a model that nothing holds, whose
learning is small work (``LiveModel.quick``) and whose log takes a record without waiting
(a local file), is learned on the event loop, like a small prediction; its answer waits
for an fsync that the requests learned during the next few turns of the loop share
(``_Commit``). Other small requests (bodies up to ``GROUP_BODY_BYTES``) of a model wait on
the event loop in arrival order; one group at a time goes to a handler thread (the model
has one writer anyway), and the requests that arrive meanwhile form the next group, started
as soon as the current one is learned, while its records are still being made durable.
Larger (bulk) bodies go alone, so that their parsing overlaps the learning before them.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import time
from collections.abc import Callable
from typing import Any

from service.durability.idempotency import Answer, Key, Replayed
from service.durability.journal import Feedback
from service.exceptions import ServiceError
from service.http.bodies import Prepared, prepare_feedback
from service.http.threads import INLINE_BODY_BYTES
from service.model.live import LiveModel
from service.ops import tracing

#: feedback bodies up to this size are handled in groups per model (larger ones alone)
GROUP_BODY_BYTES = 64 * 1024
#: at most this many requests per group
GROUP_REQUESTS = 64
#: turns of the event loop between the first record learned there and the fsync that
#: makes it durable (``_Commit``)
FLUSH_TURNS = 4
#: an fsync slower than this (seconds) on the loop sends the next ones to a thread ...
SLOW_FSYNC = 0.002
#: ... for this long (seconds)
SLOW_BACKOFF = 1.0

#: one request of a group: its content type, body, idempotency key (optional, or None) and
#: trace context (optional, or None: ``service.ops.tracing.context``)
Request = (
    tuple[str | None, bytes, Key | None, Any]
    | tuple[str | None, bytes, Key | None]
    | tuple[str | None, bytes]
)


def _account(app, live: LiveModel, answer: dict) -> None:
    """The metrics of a request learned (or logged) now."""
    logged = "logged" in answer
    n = answer["logged"] if logged else answer["learned"]
    app.metrics.learned(live.name, n, None if logged else answer["aggressive"])


class _Group:
    """Feedback requests of one model, in their order, between arrival and answers: each
    parsed and validated alone (its own 4xx), the valid ones learned together
    (``LiveModel.learn_group``), made durable, answered. A retry of a keyed request gets its
    kept answer (``service.durability.idempotency``) once the log holds its record durably;
    its key is held from the parse until ``release``. ``outcomes``: one ``(True, answer)`` or
    ``(False, exception)`` per request."""

    def __init__(self, app, live: LiveModel, requests: list[Request]):
        self.app = app
        self.live = live
        self.outcomes: list[tuple[bool, Any]] = [(False, None)] * len(requests)
        self.prepared: list[tuple[int, Prepared, Key | None]] = []
        #: the trace context of each prepared request (carried to the log: a learner
        #: links the records it learns to the requests that logged them)
        self.traces: list = []
        self.retries: list[tuple[int, Answer, Key]] = []
        self.claimed: list[Key] = []
        #: the log position of the group's last record (None: nothing logged)
        self.position = None
        #: the trace context of the group's append, learn and fsync spans: its first
        #: request's (None: not traced)
        self.trace = None
        try:
            for k, request in enumerate(requests):
                self._prepare(k, *(*request, None, None)[:4])
        except BaseException:
            self.release()
            raise

    def _prepare(
        self, k: int, content_type: str | None, body: bytes, key: Key | None, trace=None
    ) -> None:
        app, live = self.app, self.live
        if self.trace is None:
            self.trace = trace
        try:
            if key is not None:
                answer = live.claim(key)
                if answer is not None:
                    self.retries.append((k, answer, key))
                    return
                self.claimed.append(key)
            with tracing.attached(trace), tracing.span("feedback.parse"):
                prepared = prepare_feedback(
                    live, content_type, body, app.cache, app.settings.max_batch
                )
            self.prepared.append((k, prepared, key))
            self.traces.append(trace)
        except ServiceError as error:
            if error.code.endswith("_prediction_id"):
                app.metrics.pending_misses.labels(error.code.removesuffix("_prediction_id")).inc()
            self.outcomes[k] = (False, error)
        except Exception as error:  # the request's own answer (a 422, or a 500)
            self.outcomes[k] = (False, error)

    def quick(self) -> bool:
        """Whether learning the group is small work (``LiveModel.quick``)."""
        return all(self.live.quick(p.batch) for _, p, _ in self.prepared)

    def learn(self, blocking: bool = True) -> bool:
        """Log and learn the valid requests; with ``blocking`` false, False and nothing done
        if the model or its log would make it wait."""
        with tracing.attached(self.trace):
            items = [
                Feedback(p.batch, p.targets, p.with_results, key, trace)
                for (_, p, key), trace in zip(self.prepared, self.traces, strict=True)
            ]
            learned = self.live.learn_group(items, blocking)
        if learned is None:
            return False
        results, self.position = learned
        for (k, p, _), result in zip(self.prepared, results, strict=True):
            if isinstance(result, BaseException):
                p.refused(self.app.cache, result)
                self.outcomes[k] = (False, result)
            else:
                if not isinstance(result, Replayed):  # (learned by an earlier attempt)
                    _account(self.app, self.live, result)
                self.outcomes[k] = (True, result)
        return True

    def last_position(self):
        """The position the log must be durable up to before the group is answered (None:
        nothing to wait for): its last record's, or a retry's record's."""
        positions = [a.position for _, a, _ in self.retries if a.position is not None]
        if self.position is not None:
            positions.append(self.position)
        return max(positions) if positions else None

    def durable(self, sync: Callable[[Any], None]) -> None:
        """Answer once ``sync(position)`` made the records durable: a failed sync (its
        ``ServiceError``) answers 503 ``log_unavailable`` to every request whose record it
        was to make durable."""
        with tracing.attached(self.trace):
            self._durable(sync)

    def _durable(self, sync: Callable[[Any], None]) -> None:
        if self.position is not None:
            try:
                sync(self.position)
            except ServiceError as error:  # every request whose record was written
                for k, _, _ in self.prepared:
                    ok, value = self.outcomes[k]
                    if ok or getattr(value, "applied", False):
                        self.outcomes[k] = (False, error)
        for k, answer, key in self.retries:  # answered again once their records are durable
            try:
                if answer.position is not None:
                    sync(answer.position)
                self.outcomes[k] = (True, answer.replay(key))
            except ServiceError as error:
                self.outcomes[k] = (False, error)

    def finish(self, learned: Callable[[], None]) -> list[tuple[bool, Any]]:
        """Learn, call ``learned()`` (the next group may be learned during this one's
        fsync), make durable, release: the outcomes (in a handler thread)."""
        try:
            try:
                self.learn()
            finally:
                learned()
            self.durable(self.live.sync)
        finally:
            self.release()
        return self.outcomes

    def release(self) -> None:
        for key in self.claimed:
            self.live.answers.release(key)
        self.claimed = []


def handle_group(
    app, live: LiveModel, requests: list[Request], learned: Callable[[], None]
) -> list[tuple[bool, Any]]:
    """Handle feedback requests of one model, in their order, in one handler thread: one
    ``(True, answer)`` or ``(False, exception)`` per request (``_Group``). ``learned()`` is
    called once they are learned, before their fsync (also when they fail)."""
    try:
        group = _Group(app, live, requests)
    except BaseException:
        learned()
        raise
    return group.finish(learned)


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
        request = (content_type, body, key, tracing.context())
        if len(body) > GROUP_BODY_BYTES:  # bulk: its parsing overlaps the learning before it
            [(ok, value)] = await loop.run_in_executor(
                self.app.executor, handle_group, self.app, live, [request], _nothing
            )
            if not ok:
                raise value
            return value
        queue = self._queue(live, loop)
        if len(body) <= INLINE_BODY_BYTES and queue.idle() and live.learns:
            return await queue.inline(request)
        answer = loop.create_future()
        queue.waiting.append((request, answer))
        if not queue.busy:
            queue.start()
        return await answer

    def _queue(self, live: LiveModel, loop) -> _Queue:
        queue = self._queues.get(live.incarnation)
        if queue is None or queue.loop is not loop:
            if len(self._queues) >= 1024:  # forget idle queues (of deleted models, say)
                self._queues = {
                    k: q for k, q in self._queues.items() if q.busy or q.waiting or q.commit.waiting
                }
            queue = self._queues[live.incarnation] = _Queue(self.app, live, loop)
        return queue


def _nothing() -> None:
    pass


def _raise(error: BaseException | None) -> Callable[[Any], None]:
    """A ``sync`` for ``_Group.durable`` that fails with ``error`` (None: succeeds)."""

    def sync(position) -> None:
        if error is not None:
            raise error

    return sync


class _Queue:
    """The small feedback requests of one model waiting for their turn, and the records
    learned on the loop waiting for their fsync."""

    def __init__(self, app, live: LiveModel, loop: asyncio.AbstractEventLoop):
        self.app = app
        self.live = live
        self.loop = loop
        self.waiting: collections.deque = collections.deque()
        self.busy = False
        #: the group commit of the records learned on the loop
        self.commit = _Commit(app, live, loop)

    def idle(self) -> bool:
        """No group of this model is waiting or being learned."""
        return not self.busy and not self.waiting

    async def inline(self, request: Request) -> dict:
        """One request learned on the event loop when it is small work and the model and
        its log are free (``_Group.learn`` not blocking), then made durable by an fsync
        shared with the requests learned meanwhile: no thread hop of its own. Otherwise it
        takes its turn in a handler thread, already parsed."""
        group = _Group(self.app, self.live, [request])
        try:
            if not (group.quick() and group.learn(blocking=False)):
                handed, group = group, None
                # (shielded: a client that goes away does not end the model's turn early)
                [(ok, value)] = await asyncio.shield(self._run(handed.finish))
            else:
                error = None
                position = group.last_position()
                if position is not None and self.live.journal.syncs:
                    try:
                        await self.commit.wait(position)
                    except ServiceError as failed:
                        error = failed
                group.durable(_raise(error))
                [(ok, value)] = group.outcomes
        finally:
            if group is not None:
                group.release()
        if not ok:
            raise value
        return value

    def start(self) -> None:
        """Send the waiting requests (at most ``GROUP_REQUESTS``) to a handler thread."""
        group = [self.waiting.popleft() for _ in range(min(len(self.waiting), GROUP_REQUESTS))]
        requests = [request for request, _ in group]
        running = self._run(lambda learned: handle_group(self.app, self.live, requests, learned))

        def done(future: asyncio.Future) -> None:
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

        running.add_done_callback(done)

    def _run(self, work: Callable[[Callable[[], None]], list]) -> asyncio.Future:
        """``work(learned)`` in a handler thread, as the model's turn: the waiting requests
        go next once it calls ``learned()`` (or fails). Its future: the outcomes."""
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

        try:
            running = self.loop.run_in_executor(self.app.executor, work, learned)
        except Exception as error:  # the pool is shut down: no thread will answer
            running = self.loop.create_future()
            running.set_exception(error)
        running.add_done_callback(lambda _: release())  # (if it failed before it learned)
        return running


class _Commit:
    """Group commit for the records one model learned on the event loop. The first record
    to wait schedules an fsync a few turns of the loop later (``FLUSH_TURNS``), so that the
    requests that arrived together are learned first and share it. The fsync runs on the
    loop itself: a handler thread would cost two thread wake-ups and GIL hand-offs per
    fsync, more than a local disk's fsync blocks the loop. An fsync slower than
    ``SLOW_FSYNC`` sends the next ones to a handler thread for ``SLOW_BACKOFF`` seconds, so
    that a slow disk does not hold up the loop."""

    def __init__(self, app, live: LiveModel, loop: asyncio.AbstractEventLoop):
        self.app = app
        self.live = live
        self.loop = loop
        #: the positions waiting for an fsync, with their futures
        self.waiting: list[tuple[Any, asyncio.Future]] = []
        self._scheduled = False
        self._in_thread = False
        self._slow_until = 0.0

    def wait(self, position) -> asyncio.Future:
        """Done once the log is durable up to ``position`` (its exception: why not)."""
        future = self.loop.create_future()
        self.waiting.append((position, future))
        self._schedule()
        return future

    def _schedule(self) -> None:
        if not (self._scheduled or self._in_thread):
            self._scheduled = True
            self.loop.call_soon(self._flush, FLUSH_TURNS)

    def _flush(self, turns: int) -> None:
        if turns:
            self.loop.call_soon(self._flush, turns - 1)
            return
        self._scheduled = False
        waiting, self.waiting = self.waiting, []
        position = max(p for p, _ in waiting)
        if time.monotonic() < self._slow_until:
            self._sync_in_thread(waiting, position)
            return
        start = time.monotonic()
        error = self._sync(position)
        if time.monotonic() - start > SLOW_FSYNC:
            self._slow_until = time.monotonic() + SLOW_BACKOFF
        _settle(waiting, error)

    def _sync(self, position) -> BaseException | None:
        try:
            self.live.sync(position)
        except Exception as error:  # (a ServiceError: 503 log_unavailable)
            return error
        return None

    def _sync_in_thread(self, waiting: list, position) -> None:
        self._in_thread = True

        def synced(running: asyncio.Future) -> None:
            self._in_thread = False
            if running.cancelled():  # (the loop is closing)
                for _, future in waiting:
                    future.cancel()
            else:
                _settle(waiting, running.result())
            if self.waiting:
                self._schedule()

        try:
            # (in the context of the first record's request: its trace)
            running = self.loop.run_in_executor(
                self.app.executor, contextvars.copy_context().run, self._sync, position
            )
        except Exception as error:  # the pool is shut down: no thread will sync
            running = self.loop.create_future()
            running.set_result(error)
        running.add_done_callback(synced)


def _settle(waiting: list[tuple[Any, asyncio.Future]], error: BaseException | None) -> None:
    for _, future in waiting:
        if future.done():  # its client went away
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
