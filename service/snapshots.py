"""Writing live models' snapshots: capture, encode, store (for the model's incarnation),
trim the log up to what the snapshot includes, and account for it in the metrics. A
learner's writes carry the model's lease (``LiveModel.fence``): refused once it is lost."""

from __future__ import annotations

import logging
import time

from service.capture import Capture
from service.leases import LeaseLost
from service.live import LiveModel
from service.schemas import spec_to_json
from service.store import SnapshotMeta, encode

log = logging.getLogger("lorentztron.worker")


class SnapshotWriter:
    """Writes snapshots of live models to ``store`` (``service.store``)."""

    def __init__(self, store, metrics, retention: int, trim_log: bool = True):
        self.store = store
        self.metrics = metrics
        self.retention = retention
        #: drop the log records a snapshot covers (False: the log keeps the whole history)
        self.trim_log = trim_log

    def encode(self, live: LiveModel, capture: Capture) -> memoryview:
        return encode(
            live.name,
            capture.version,
            spec_to_json(live.spec),
            capture.state,
            log_position=capture.log_position,
        )

    def write(
        self, live: LiveModel, capture: Capture, blob=None, started=None, create: bool = False
    ) -> SnapshotMeta:
        """Store a capture (encoded here unless ``blob`` is given), trim the log up to its
        position and account for it. ``create``: the model's first snapshot, which makes
        its incarnation the current one; other writes are refused once it is not."""
        started = time.perf_counter() if started is None else started
        blob = self.encode(live, capture) if blob is None else blob
        try:
            self.store.save(
                live.name,
                capture.version,
                blob,
                self.retention,
                live.incarnation,
                create=create,
                fence=live.fence,
            )
        except LeaseLost:
            self.metrics.fenced_writes.inc()
            raise
        live.records_since_snapshot -= capture.records
        if self.trim_log and live.journal is not None and capture.log_position is not None:
            try:
                live.journal.trim(capture.log_position, live.fence)
            except Exception as error:  # the log only grows; the next snapshot retries
                log.warning("could not trim the log of %s: %s", live.name, error)
        live.last_snapshot_version = capture.version
        live.last_snapshot_at = time.time()
        self.metrics.snapshot_duration.labels(live.name).observe(time.perf_counter() - started)
        self.metrics.snapshot_size.labels(live.name).set(len(blob))
        self.metrics.snapshot_time.labels(live.name).set(live.last_snapshot_at)
        return SnapshotMeta(live.name, capture.version, live.last_snapshot_at, len(blob))

    def snapshot(self, live: LiveModel, force: bool = False) -> SnapshotMeta | None:
        """Write the model's snapshot now (None if unchanged and not forced): the arrays are
        copied under its read lock, encoded and stored without it."""
        if not force and live.version == live.last_snapshot_version:
            return None  # unchanged: no copy of the state at all
        with live.snapshot_lock:  # the capture's buffers are reused by the next capture
            capture = live.snapshot_state()
            if not force and capture.version == live.last_snapshot_version:
                return None
            started = time.perf_counter()
            blob = self.encode(live, capture)
        return self.write(live, capture, blob, started)
