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
from service.live import LiveModel

#: feedback bodies up to this size are handled in groups per model (larger ones alone)
GROUP_BODY_BYTES = 64 * 1024
#: at most this many requests per group
GROUP_REQUESTS = 64

#: one request of a group: its content type and body
Request = tuple[str | None, bytes]


def _response(app, live: LiveModel, result: dict, prepared: Prepared) -> dict:
    n, with_results = prepared.batch.n_rows, prepared.with_results
    if "logged" in result:  # not learned here: durable in the log, learned by the learner
        app.metrics.learned(live.name, n, None)
        return {
            "model": live.name,
            "version": result["version"],
            "learned": 0,
            "aggressive": 0,
            "results": None,
            "logged": n,
        }
    app.metrics.learned(live.name, n, result["n_aggressive"])
    response = {
        "model": live.name,
        "version": result["version"],
        "learned": n,
        "aggressive": result["n_aggressive"],
        "results": None,
    }
    if with_results:
        response["results"] = [
            {"predicted": live.predicted_label(p), "loss": float(loss), "aggressive": bool(flag)}
            for p, loss, flag in zip(
                result["predicted"], result["losses"], result["aggressive"], strict=True
            )
        ]
    return response


def handle_group(
    app, live: LiveModel, requests: list[Request], learned: Callable[[], None]
) -> list[tuple[bool, Any]]:
    """Handle feedback requests of one model, in their order, in one handler thread: one
    ``(True, response)`` or ``(False, exception)`` per request.

    Each request is parsed and validated alone (its own 4xx), then the valid ones are
    logged and learned by ``LiveModel.learn_group`` and made durable by one ``sync`` after
    the last of them, before any is answered. ``learned()`` is called between the two, so
    that the next group can be learned during this fsync. A failed fsync answers 503
    ``log_unavailable`` to every request whose record it was to make durable."""
    outcomes: list[tuple[bool, Any]] = [(False, None)] * len(requests)
    prepared: list[tuple[int, Prepared]] = []
    position = None
    settings = app.settings
    try:
        for k, (content_type, body) in enumerate(requests):
            try:
                prepared.append(
                    (
                        k,
                        prepare_feedback(live, content_type, body, app.cache, settings.max_batch),
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
        results, position = live.learn_group([(p.batch, p.targets) for _, p in prepared])
        for (k, p), result in zip(prepared, results, strict=True):
            if isinstance(result, BaseException):
                p.refused(app.cache, result)
                outcomes[k] = (False, result)
            else:
                outcomes[k] = (True, _response(app, live, result, p))
    finally:
        learned()
    if position is not None:
        try:
            live.sync(position)
        except ServiceError as error:  # every request whose record was written
            for k, _ in prepared:
                ok, value = outcomes[k]
                if ok or getattr(value, "applied", False):
                    outcomes[k] = (False, error)
    return outcomes


class FeedbackGroups:
    """The waiting feedback requests of every model (one queue per model incarnation)."""

    def __init__(self, app):
        self.app = app
        self._queues: dict[str, _Queue] = {}

    async def submit(self, live: LiveModel, content_type: str | None, body: bytes) -> dict:
        """The answer to one feedback request (or its exception)."""
        loop = asyncio.get_running_loop()
        if len(body) > GROUP_BODY_BYTES:  # bulk: its parsing overlaps the learning before it
            [(ok, value)] = await loop.run_in_executor(
                self.app.executor, handle_group, self.app, live, [(content_type, body)], _nothing
            )
            if not ok:
                raise value
            return value
        queue = self._queue(live, loop)
        answer = loop.create_future()
        queue.waiting.append(((content_type, body), answer))
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
