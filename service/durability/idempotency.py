"""Idempotency keys: a retried request is answered as the first time, and not applied again.

A client sends ``Idempotency-Key: <key>`` (1 to 255 printable ASCII characters) with a
feedback, create, restore or import request. The key and a fingerprint of the request (its
endpoint, media type and body) are kept with what the request did:

- **feedback** (``all`` role): the key goes into the request's log record
  (``service.durability.feedback_log``), and the answer into the model's ``Answers`` when
  the record is learned, live or in replay. A snapshot carries the answers
  (``service.durability.capture``), the log after it carries the keys of the records it
  does not include: after a restart or a SIGKILL, recovery rebuilds every answer, because
  learning is deterministic.
- **feedback** on a process that only logs (``api`` replicas, the learner's own endpoint):
  the answer is known before the append and is stored in Redis beside the log, in the same
  script as the append (``RedisLog.append_once``), so every replica sees it.
- **create, restore, import**: the answer is kept in the model's ``Answers`` and written in
  the snapshot that makes the change durable.

A key is answered again for ``ttl`` seconds (``IDEMPOTENCY_TTL``) while the model's kept
answers fit in ``max_bytes`` (``IDEMPOTENCY_BYTES``, oldest dropped first). The same key with
another request is refused (``idempotency_key_reused``); while a request with the key is
being handled, another is refused (``idempotency_key_in_use``: retry later).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from typing import Any, NamedTuple

import numpy as np

from service.exceptions import CODES, Conflict, InvalidRequest, ServiceError

HEADER = "idempotency-key"
#: the header of an answer given again for a retried key
REPLAYED = "Idempotent-Replayed"
_VALID = re.compile(r"[\x21-\x7e]{1,255}")


class Key(NamedTuple):
    """A request's idempotency key and the fingerprint of the request it names."""

    key: str
    fingerprint: str


def key_of(header: str | None, endpoint: str, media_type: str, body: bytes) -> Key | None:
    """The key of a request (None without the header); InvalidRequest if it is malformed."""
    if header is None:
        return None
    if not _VALID.fullmatch(header):
        raise InvalidRequest(
            "invalid_input",
            "Idempotency-Key: 1 to 255 printable ASCII characters, without spaces",
            {"field": "Idempotency-Key"},
        )
    digest = hashlib.blake2b(digest_size=16)
    for part in (endpoint.encode(), media_type.encode(), body):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return Key(header, digest.hexdigest())


class Answer(NamedTuple):
    """What a keyed request did: its answer, or the refusal it got although it was applied;
    and the log position to make durable before answering again (None: durable)."""

    fingerprint: str
    at: float
    body: dict | None = None
    error: dict | None = None  # {"code", "message", "details"}
    position: Any = None

    def replay(self, key: Key) -> dict:
        """The answer again (or the refusal raised again) to a retry with ``key``;
        InvalidRequest (``idempotency_key_reused``) if the key named another request."""
        if self.fingerprint != key.fingerprint:
            raise _reused(key.key)
        if self.error is not None:
            cls = CODES[self.error["code"]][0]
            raise cls(self.error["code"], self.error["message"], self.error["details"], True)
        return Replayed(self.body)


class Replayed(dict):
    """An answer given again: the routes add the ``Idempotent-Replayed: true`` header."""


def answer_headers(answer: dict) -> dict | None:
    return {REPLAYED: "true"} if isinstance(answer, Replayed) else None


def _reused(key: str) -> InvalidRequest:
    return InvalidRequest(
        "idempotency_key_reused",
        f"the Idempotency-Key {key!r} was used with another request (another endpoint or "
        "body); use a new key for a new request",
        {"field": "Idempotency-Key"},
    )


class Answers:
    """The answers of one model's keyed requests (module docstring). Thread-safe."""

    def __init__(self, ttl: float, max_bytes: int, clock=time.time):
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.clock = clock
        self._entries: OrderedDict[str, tuple[Answer, int]] = OrderedDict()
        self._claims: set[str] = set()
        self._lock = threading.Lock()
        self.nbytes = 0
        #: answers dropped by the memory bound before their time
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def claim(self, key: Key, kept: bool = True) -> Answer | None:
        """The kept answer of a retry (``Answer.replay`` it); else None, and the key is held
        by this request until ``release``: Conflict (``idempotency_key_in_use``) while
        another request holds it. ``kept=False``: only hold the key (the answer is kept
        elsewhere)."""
        with self._lock:
            self._expire()
            found = self._entries.get(key.key) if kept else None
            if found is not None:
                return found[0]
            if key.key in self._claims:
                raise Conflict(
                    "idempotency_key_in_use",
                    f"a request with the Idempotency-Key {key.key!r} is being handled; retry "
                    "when it is answered",
                )
            self._claims.add(key.key)
            return None

    def get(self, key: Key) -> Answer | None:
        """The kept answer of ``key`` (None: none), without holding it."""
        with self._lock:
            self._expire()
            found = self._entries.get(key.key)
            return None if found is None else found[0]

    def forget(self, key: Key | None) -> None:
        """Drop ``key``'s answer (what it answered was undone)."""
        if key is not None:
            with self._lock:
                self._drop(key.key)

    def release(self, key: Key) -> None:
        with self._lock:
            self._claims.discard(key.key)

    def record(self, key: Key, at: float, body: dict | None = None, error=None, position=None):
        """Keep what a keyed request did (under the model's writer lock, so that a snapshot
        sees it with the state it describes). ``error``: a refusal that was applied."""
        if isinstance(error, ServiceError):
            error = {"code": error.code, "message": error.message, "details": error.details}
        answer = Answer(key.fingerprint, at, body, error, position)
        size = 200 + len(key.key) + len(json.dumps(body if error is None else error))
        with self._lock:
            self._drop(key.key)
            self._entries[key.key] = (answer, size)
            self.nbytes += size
            self._expire()
            while self.nbytes > self.max_bytes and len(self._entries) > 1:
                self._drop(next(iter(self._entries)))
                self.evicted += 1

    def _drop(self, key: str) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self.nbytes -= found[1]

    def _expire(self) -> None:
        """Forget the answers older than ``ttl`` (kept in the order they were recorded)."""
        horizon = self.clock() - self.ttl
        while self._entries:
            key, (answer, _) = next(iter(self._entries.items()))
            if answer.at > horizon:
                return
            self._drop(key)

    # -- state (snapshots) -------------------------------------------------------------
    def get_state(self) -> np.ndarray:
        """The kept answers as one array of UTF-8 JSON lines (a snapshot's part)."""
        with self._lock:
            self._expire()
            lines = [
                json.dumps(
                    {"key": key, "fingerprint": a.fingerprint, "at": a.at}
                    | ({"error": a.error} if a.error is not None else {"body": a.body}),
                    separators=(",", ":"),
                )
                for key, (a, _) in self._entries.items()
            ]
        return np.frombuffer("\n".join(lines).encode(), dtype=np.uint8).copy()

    def set_state(self, array: np.ndarray) -> None:
        with self._lock:
            self._entries.clear()
            self.nbytes = 0
        for line in bytes(np.asarray(array, dtype=np.uint8)).decode().splitlines():
            entry = json.loads(line)
            key = Key(entry["key"], entry["fingerprint"])
            self.record(key, entry["at"], entry.get("body"), entry.get("error"))
