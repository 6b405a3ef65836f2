"""Run modes beyond ``all``: one learner (the single writer) and many api replicas.

- **learner** (``LORENTZTRON_ROLE=learner``): restores every model (snapshot + log replay),
  then consumes the models' log streams with a Redis consumer group (``learner``), learning
  each record in stream order and acknowledging it (``XACK``). Every ``publish_interval``
  seconds each changed model is written as a snapshot (with its log position) and announced
  on ``{prefix}:published``. Feedback posted to the learner itself is appended to the log
  like anywhere else and learned by the same consumer, so there is one learning path.
- **api** (``LORENTZTRON_ROLE=api``): serves predictions from the latest published version
  and appends feedback to the log (acknowledged once durable in Redis; ``logged`` in the
  response). A subscriber thread loads a model's new version as soon as it is announced; a
  poll every ``poll_interval`` seconds is the fallback (a missed message, a restart of Redis)
  and also picks up models created or deleted elsewhere. ``lorentztron_model_version`` is
  the version a replica serves; ``lorentztron_freshness_seconds`` observes, per loaded
  version, the delay from the append of the oldest record it newly includes to the moment the
  replica serves it (the worst case over those records).

Both roles need Redis (``LORENTZTRON_REDIS_URL``): the log, the snapshots and the channel
live there. The scaling model: the learner's throughput bounds feedback (one writer per
model, by design: the updates are sequential); predictions scale with replicas, each loading
every published version whole, so publication costs one snapshot per interval per replica.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import redis

from service.exceptions import NotFound
from service.feedback_log import position_time
from service.live import LiveModel
from service.store import IncarnationGone, decode

log = logging.getLogger("lorentztron.roles")

GROUP = "learner"


class _Loop:
    """A daemon thread running ``step`` until stopped; errors are logged, never fatal."""

    period = 1.0

    def __init__(self, name: str):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as error:
                log.warning("%s: %s: %s", self._thread.name, type(error).__name__, error)
                self._stop.wait(min(self.period, 1.0))

    def step(self) -> None:
        raise NotImplementedError


class Learner(_Loop):
    """Consumes the log streams of every model and publishes changed models."""

    def __init__(self, worker, settings, block_ms: int = 100):
        super().__init__("learner")
        self.worker = worker
        self.models = worker.models
        self.settings = settings
        self.client: redis.Redis = worker.store.client
        self.journal = worker.models.feedback_log
        self.consumer = f"{socket.gethostname()}-{id(self):x}"
        self.block_ms = block_ms
        self._grouped: dict[str, object] = {}  # model name -> the LiveModel the group was set for
        self._next_publish = 0.0
        self._next_discovery = 0.0
        self.period = settings.publish_interval

    def _streams(self) -> dict[str, LiveModel]:
        """Model by stream key, with each stream's group placed at the model's position."""
        streams = {}
        for live in self.models.serving():
            key = self.journal.key(live.name)
            if self._grouped.get(live.name) is not live:
                start = live.log_position or "0-0"
                try:
                    self.client.xgroup_create(key, GROUP, id=start, mkstream=True)
                except redis.ResponseError as error:
                    if "BUSYGROUP" not in str(error):
                        raise
                    self.client.xgroup_setid(key, GROUP, id=start)
                self._grouped[live.name] = live
            streams[key] = live
        return streams

    def step(self) -> None:
        now = time.monotonic()
        if now >= self._next_discovery:
            self.models.discover()
            self._next_discovery = now + self.settings.poll_interval
        streams = self._streams()
        if streams:
            try:
                replies = self.client.xreadgroup(
                    GROUP,
                    self.consumer,
                    {key: ">" for key in streams},
                    count=1000,
                    block=self.block_ms,
                )
            except redis.ResponseError as error:
                if "NOGROUP" not in str(error) and "no longer exists" not in str(error):
                    raise
                self._grouped.clear()  # a stream was deleted (model deleted or recreated)
                replies = []
            for key, entries in replies or []:
                live = streams[key.decode()]
                records = [(i.decode(), fields[b"r"]) for i, fields in entries]
                # records at or before the model's position are already in it (replayed)
                fresh = [r for r in records if _after(r[0], live.log_position)]
                if fresh:
                    try:
                        with self.models.use(live.name):
                            count = live.replay(fresh)
                    except NotFound:  # deleted meanwhile: its records go with it
                        count = 0
                    self.worker.metrics.replayed.labels(live.name).inc(count)
                self.client.xack(key, GROUP, *[i for i, _ in records])
        else:
            self._stop.wait(self.block_ms / 1000)
        if time.monotonic() >= self._next_publish:
            self.publish()
            self._next_publish = time.monotonic() + self.period

    def publish(self) -> None:
        for live in self.models.serving():
            try:
                with self.models.use(live.name):
                    meta = self.models.writer.snapshot(live)
            except (NotFound, IncarnationGone):  # deleted here or elsewhere meanwhile
                self._next_discovery = 0.0
                continue
            if meta is not None:
                self.worker.store.publish(live.name, meta.version)
                self.worker.metrics.published.labels(live.name).inc()


class Replica(_Loop):
    """Loads published versions: on announcement (pub/sub) or by polling."""

    def __init__(self, worker, settings):
        super().__init__("replica")
        self.worker = worker
        self.settings = settings
        self.period = settings.poll_interval
        self._pubsub = None
        self._next_poll = 0.0

    def step(self) -> None:
        if self._pubsub is None:
            self._pubsub = self.worker.store.client.pubsub(ignore_subscribe_messages=True)
            self._pubsub.subscribe(self.worker.store.keys.published)
            self._next_poll = 0.0  # (re)subscribed: poll once for what may have been missed
        try:
            message = self._pubsub.get_message(timeout=0.2)
        except (redis.ConnectionError, redis.TimeoutError):
            self._pubsub = None
            raise
        if message is not None and message["type"] == "message":
            name, version = message["data"].decode().rsplit(" ", 1)
            self.load(name, int(version))
        if time.monotonic() >= self._next_poll:
            self.poll()
            self._next_poll = time.monotonic() + self.period

    def poll(self) -> None:
        self.worker.models.discover()
        for live in self.worker.models.serving():
            latest = self.worker.store.latest(live.name)
            if latest is not None and latest > live.version:
                self.load(live.name, latest)

    def load(self, name: str, version: int) -> None:
        try:
            live = self.worker.models.get(name)
        except NotFound:
            self.worker.models.discover()
            return
        if version <= live.version:
            return
        header, state = decode(self.worker.store.load(name, version))
        previous = live.log_position
        first_new = self._first_after(name, previous, header.get("log_position"))
        live.load_version(state, header["version"], header.get("log_position"))
        metrics = self.worker.metrics
        metrics.published.labels(name).inc()
        metrics.model_version.labels(name).set(live.version)
        appended = position_time(first_new) if first_new is not None else None
        if appended is not None:
            metrics.freshness.labels(name).observe(max(0.0, time.time() - appended))

    def _first_after(self, name: str, previous, position):
        """The id of the oldest log record after ``previous`` up to ``position``."""
        if position is None or not _after(position, previous):
            return None
        start = "-" if previous is None else f"({previous}"
        entries = self.worker.store.client.xrange(
            self.worker.models.feedback_log.key(name), min=start, max=position, count=1
        )
        return entries[0][0].decode() if entries else position


def _after(position, reference) -> bool:
    if reference is None:
        return True
    return tuple(map(int, position.split("-"))) > tuple(map(int, reference.split("-")))
