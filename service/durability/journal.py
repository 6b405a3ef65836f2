"""A model's records in the feedback log (``service.durability.feedback_log``): appended before they
are learned, made durable before the request is answered, read back for catch-up and
replay. Log errors become domain errors here (``log_unavailable``); a model deleted
elsewhere (the Redis log refuses an append to another incarnation) is ``model_not_found``.
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple, NoReturn

import numpy as np

from core.features import CSRBatch
from service.durability.feedback_log import (
    FeedbackLog,
    LogUnavailable,
    ModelGone,
    Position,
    RecordKey,
    encode_record,
)
from service.durability.idempotency import Answer, Key
from service.exceptions import NotFound, Unavailable
from service.ops import tracing


class Feedback(NamedTuple):
    """One request's validated feedback: its batch, targets (class indices or values),
    whether its answer lists per-example results, its idempotency key (or None) and its
    trace context (``service.ops.tracing.context``; None: not traced)."""

    batch: CSRBatch
    targets: np.ndarray
    with_results: bool = False
    key: Key | None = None
    trace: Any = None

    def record(self) -> bytes:
        key = self.key
        if key is not None:
            key = RecordKey(key.key, key.fingerprint, self.with_results)
        return encode_record(self.batch, self.targets, key=key)


class Journal:
    """The log of one model (``name``, in its ``incarnation``).

    ``uncertain`` is set when an append failed with an unknown outcome (a lost Redis reply):
    the record may have landed, so the model reads the log after its position before its
    next append (``LiveModel``), keeping the live model equal to snapshot + log, and then
    calls ``settled``."""

    def __init__(self, log: FeedbackLog, name: str, incarnation: str):
        self.log = log
        self.name = name
        self.incarnation = incarnation
        self._uncertain = False
        #: appends and syncs that failed (the metrics' log_append_failures_total)
        self.failures = 0
        #: bytes of the records appended so far (by this process)
        self.appended = 0

    def append(self, items: list[Feedback], blocking: bool = True) -> list[Position] | None:
        """Append one record per item, together; Unavailable if the log refuses them
        (``applied`` when they may have landed all the same). With ``blocking`` false (the
        event loop): None and nothing appended unless the log takes them at once (a local
        file's write), and never while an append's outcome is uncertain (the model must
        read the log first)."""
        if not blocking and self.uncertain:
            return None
        records = [Feedback(*item).record() for item in items]
        try:
            if blocking:
                traces = self._traces(items)
                if traces is None:
                    positions = self.log.append_many(self.name, records, self.incarnation)
                else:
                    positions = self.log.append_many(
                        self.name, records, self.incarnation, traces=traces
                    )
            else:
                positions = self.log.try_append(self.name, records)
        except (ModelGone, LogUnavailable) as error:
            self._raise(error)
        if positions is not None:
            self.appended += sum(map(len, records))
        return positions

    def _traces(self, items: list[Feedback]) -> list[str | None] | None:
        """The W3C ``traceparent`` of each item's request, for a log that carries them to
        the process that learns them (the Redis log, in roles mode); None when tracing is
        off (the records and the append are then those of an untraced service)."""
        if tracing.TRACER is None or not self.log.carries_traces:
            return None
        traces = [tracing.traceparent(Feedback(*item).trace) for item in items]
        return traces if any(traces) else None

    @property
    def uncertain(self) -> bool:
        """Whether an append's outcome is unknown (its record may be in the log)."""
        return self._uncertain

    def doubt(self) -> None:
        """The log may hold records after the model's position that it has not learned: it
        reads them before its next append."""
        self._uncertain = True

    def settled(self) -> None:
        """The model learned what the log holds after its position: no outcome is unknown."""
        self._uncertain = False

    @property
    def syncs(self) -> bool:
        """Whether ``sync`` does anything (False: appended is as durable as it will be)."""
        return self.log.syncs

    def append_once(self, item: Feedback, answer: dict, ttl: float) -> tuple[Position, Answer]:
        """Append a keyed item with its answer, unless its key has one (a process that only
        logs; ``service.durability.idempotency``): (position, None) or (None, the stored answer)."""
        key = item.key
        stored = json.dumps({"fingerprint": key.fingerprint, "at": time.time(), "body": answer})
        traces = self._traces([item])
        options = {} if traces is None else {"trace": traces[0]}
        try:
            position, found = self.log.append_once(
                self.name, item.record(), self.incarnation, key.key, stored.encode(), ttl, **options
            )
        except (ModelGone, LogUnavailable) as error:
            self._raise(error)
        return position, None if found is None else _answer(found)

    def answered(self, key: Key) -> Answer | None:
        """The answer a process that only logs kept for ``key`` (None: none)."""
        try:
            found = self.log.answered(self.name, self.incarnation, key.key)
        except (ModelGone, LogUnavailable) as error:
            self._raise(error)
        return None if found is None else _answer(found)

    def _raise(self, error: ModelGone | LogUnavailable) -> NoReturn:
        """A log error as a domain error: a model deleted elsewhere is ``model_not_found``, a
        failed write ``log_unavailable`` (``applied`` when it may have landed all the same;
        then it may be learned from the log later)."""
        if isinstance(error, ModelGone):
            raise NotFound("model_not_found", str(error)) from None
        self.failures += 1
        if error.maybe_written:
            self._uncertain = True
            raise Unavailable(
                "log_unavailable",
                f"the feedback log did not confirm the append ({error}): the examples may "
                "have been logged, and are then learned; a retry with the same "
                "Idempotency-Key is applied exactly once",
                applied=True,
            ) from None
        raise Unavailable(
            "log_unavailable", f"feedback refused, nothing was learned: {error}"
        ) from None

    def sync(self, position: Position) -> None:
        """Durable before acknowledged: every record up to ``position`` on disk (one fsync
        serves the requests waiting together). If it fails the request gets a 503 although
        its examples were learned (the live model and the log agree): not acknowledged."""
        try:
            self.log.sync(self.name, position)
        except LogUnavailable as error:
            self.failures += 1
            raise Unavailable("log_unavailable", str(error), applied=True) from None

    def records_after(self, position: Position) -> list[tuple[Position, bytes]]:
        """The records after ``position`` (a catch-up); Unavailable if the log cannot be
        read."""
        try:
            return list(self.log.read_after(self.name, position))
        except LogUnavailable as error:
            self.failures += 1
            raise Unavailable(
                "log_unavailable", f"feedback refused, nothing was learned: {error}"
            ) from None

    def trim(self, position: Position, fence: str | None = None) -> None:
        """Drop what a snapshot at ``position`` covers (a learner's: while its lease
        ``fence`` holds)."""
        self.log.trim(self.name, position, fence)

    def delete(self) -> None:
        self.log.delete(self.name)


def _answer(stored: bytes) -> Answer:
    entry = json.loads(stored)
    return Answer(entry["fingerprint"], entry["at"], entry["body"])
