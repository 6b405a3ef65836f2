"""Writing live models' snapshots: capture, encode, store (for the model's incarnation),
trim the log up to what the snapshot includes, and account for it in the metrics. A
learner's writes carry the model's lease (its record's ``fence``): refused once it is lost.

A learner publishes with ``publish``: with delta publication (``service.scale.deltas``) most
publications are deltas over the previous one, and a full snapshot comes every
``full_every`` publications and whenever the chain starts; every full snapshot of a
chained model also writes its version's delta, so the chain goes on through it.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from service.durability.capture import Capture
from service.durability.store import SnapshotMeta, encode, read_header
from service.model.live import LiveModel
from service.model.spec import spec_to_json
from service.ops import tracing
from service.scale import deltas
from service.scale.leases import LeaseLost

log = logging.getLogger("lorentztron.worker")

#: bytes/s of a learner's full snapshot written in the background (``_write_full``): the
#: replicas follow the deltas meanwhile, and Redis, which every feedback append waits for,
#: takes the 134 MB of docs/scaling.md's model in about 4 s instead of one burst (at once,
#: on a small machine, the appends waited 3 to 16 ms each for half a second, every 10 s)
FULL_UPLOAD_RATE = 32 << 20
#: bytes/s of its encoding (copies and hash: twice its size), before the upload: at once,
#: it took a core for a quarter to half a second, and the other processes of a small
#: machine waited for the other core
FULL_ENCODE_RATE = 64 << 20


def published(live: LiveModel, capture: Capture) -> dict:
    """What a publication's header says for the replicas' freshness: the version published
    before it and the first log record learned since (``service.scale.roles.Replica``)."""
    return {"previous": live.record.published_version, "first_new": capture.first_new}


class SnapshotWriter:
    """Writes snapshots of live models to ``store`` (``service.durability.store``); ``full_every``:
    publications between two full snapshots (None: no deltas, every one is full)."""

    def __init__(
        self,
        store,
        metrics,
        retention: int,
        trim_log: bool = True,
        full_every: int | None = None,
    ):
        self.store = store
        self.metrics = metrics
        self.retention = retention
        #: drop the log records a snapshot covers (False: the log keeps the whole history)
        self.trim_log = trim_log
        self.full_every = full_every
        self._full_writer: ThreadPoolExecutor | None = None

    def encode(
        self,
        live: LiveModel,
        capture: Capture,
        extra: dict | None = None,
        rate: float | None = None,
    ) -> memoryview:
        return encode(
            live.name,
            capture.version,
            spec_to_json(live.spec),
            capture.state,
            log_position=capture.log_position,
            extra={**published(live, capture), **(extra or {})},
            rate=rate,
        )

    def write(
        self,
        live: LiveModel,
        capture: Capture,
        blob=None,
        started=None,
        create: bool = False,
        rate: float | None = None,
    ) -> SnapshotMeta:
        """Store a capture (encoded here unless ``blob`` is given), trim the log up to its
        position and account for it. ``create``: the model's first snapshot, which makes
        its incarnation the current one; other writes are refused once it is not. ``rate``:
        the store's upload rate (bytes/s; None: at once)."""
        with tracing.span("snapshot.write", model=live.name, version=capture.version):
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
                    fence=live.record.fence,
                    rate=rate,
                )
            except LeaseLost:
                self.metrics.fenced_writes.inc()
                live.record.unwritten(capture.marks)
                raise
            except BaseException:
                live.record.unwritten(capture.marks)
                raise
            at = time.time()
            live.record.written(capture.marks, at)
            if self.trim_log and live.journal is not None and capture.log_position is not None:
                try:
                    live.journal.trim(capture.log_position, live.record.fence)
                except Exception as error:  # the log only grows; the next snapshot retries
                    log.warning("could not trim the log of %s: %s", live.name, error)
            self.metrics.snapshot_duration.labels(live.name).observe(time.perf_counter() - started)
            self.metrics.snapshot_size.labels(live.name).set(len(blob))
            self.metrics.snapshot_time.labels(live.name).set(at)
            # the instant stored in the snapshot's header (taken when it was encoded), which
            # the listing reads back: not ``at``, the end of the write, a few ms later
            created_at = read_header(blob)["created_at"]
            return SnapshotMeta(live.name, capture.version, created_at, len(blob))

    def snapshot(
        self, live: LiveModel, force: bool = False, wait: bool = True
    ) -> SnapshotMeta | None:
        """Write the model's snapshot now (None if unchanged and not forced): the arrays are
        copied under its read lock, encoded and stored without it. A model a learner
        publishes by deltas gets its full snapshot from its next publication, written in
        the background, unless ``wait`` (a hand-over, a shutdown, the snapshot route):
        written under ``snapshot_lock``, it would hold the deltas back for the seconds
        that 134 MB take to encode and upload."""
        if not force and not live.record.unsaved:
            return None  # unchanged: no copy of the state at all
        chain = live.record.publication
        if not wait and isinstance(chain, deltas.Chain):
            if not live.full_lock.locked():  # (else one is being written: it will do)
                chain.ask_full()
            return None
        with live.snapshot_lock:  # the capture's buffers are reused by the next capture
            if isinstance(live.record.publication, deltas.Chain):
                return self._publish(live, full=True, wait=True)
            capture = live.snapshot_state()
            if not force and capture.version == live.record.last_snapshot_version:
                return None
            started = time.perf_counter()
            blob = self.encode(live, capture)
        return self.write(live, capture, blob, started)

    def publish(self, live: LiveModel) -> SnapshotMeta | None:
        """A learner's publication of a changed model: a delta, or a full snapshot (every
        ``full_every`` publications, at the start of a chain, without deltas)."""
        with tracing.span("snapshot.publish", model=live.name):
            if self.full_every is None or getattr(self.store, "save_delta", None) is None:
                return self.snapshot(live)
            chain = live.record.publication
            if (
                isinstance(chain, deltas.Chain)
                and live.version == chain.base
                and not chain.full_due
            ):
                return None
            with live.snapshot_lock:
                return self._publish(live, full=False, wait=False)

    def _publish(self, live: LiveModel, full: bool, wait: bool) -> SnapshotMeta | None:
        """Publish under ``snapshot_lock`` (deltas and full snapshots of one model stay in
        order): start a chain, or continue it with a delta (and a full snapshot, written in
        the background unless ``wait``: its encoding and upload take seconds for a large
        model, and the deltas go on meanwhile)."""
        started = time.perf_counter()
        chain = live.record.publication
        chain = chain if isinstance(chain, deltas.Chain) else None
        if chain is None:
            with live.full_lock:
                return self._start(live, started)
        full = full or chain.full_due or chain.since_full + 1 >= self.full_every
        if full and not live.full_lock.acquire(blocking=wait):
            full = False  # the previous full snapshot is still being written: a delta now
        handed = False
        try:
            meta, handed = self._continue(live, chain, full, wait, started)
        finally:
            if full and not handed:
                live.full_lock.release()
        return meta

    def _continue(self, live, chain, full: bool, wait: bool, started: float):
        """The delta of the chain's next version (and its full snapshot when ``full``, the
        caller holding ``full_lock``); and whether the full snapshot went to the background
        (which then releases the lock)."""
        axes = chain.digest.axes

        def take(model: LiveModel):
            rows = model.take_changes()
            if rows is None:  # everything changed (a refit, a restore): start again
                return None
            since = deltas.averaging_count(model.estimator)
            return deltas.gather(model.estimator, axes, rows, chain.averaged), since

        capture, taken = live.publication_state(full, take)
        if taken is None:
            live.record.break_chain()
            live.record.unwritten(capture.marks)
            if full:  # (held by the caller: the chain starts again with a full snapshot)
                return self._start(live, started), False
            with live.full_lock:
                return self._start(live, started), False
        if capture.version == chain.base and not full:
            return None, False
        arrays, averaged = taken
        total, updates = chain.digest.preview(arrays)
        header = published(live, capture)
        delta = encode(
            live.name,
            capture.version,
            spec_to_json(live.spec),
            {**capture.state, "arrays": arrays},
            log_position=capture.log_position,
            extra={**header, "delta": {"base": chain.base, "digest": str(total)}},
        )
        try:
            # the delta first: a replica that sees the new version finds its delta (it would
            # load the whole snapshot otherwise)
            if capture.version != chain.base:  # (a full snapshot of the version published)
                self.store.save_delta(
                    live.name,
                    capture.version,
                    delta,
                    2 * self.full_every,
                    live.incarnation,
                    live.record.fence,
                )
            meta = None
            if full and wait:
                extra = {**header, "digest": str(total)}
                meta = self.write(live, capture, self.encode(live, capture, extra), started)
        except LeaseLost:
            live.record.break_chain()
            self.metrics.fenced_writes.inc()
            live.record.unwritten(capture.marks)
            raise
        except BaseException:
            live.record.break_chain()  # the replicas' chain is broken: the next one is full
            live.record.unwritten(capture.marks)
            raise
        live.record.published(capture.version)
        chain.digest.commit(total, updates)
        chain.advance(capture.version, averaged, full)
        self.metrics.publication_size.labels("full" if full else "delta").observe(len(delta))
        if full and not wait:
            extra = {**header, "digest": str(total)}
            self._background().submit(self._write_full, live, capture, extra, started)
        return meta or SnapshotMeta(live.name, capture.version, time.time(), len(delta)), (
            full and not wait
        )

    def _background(self) -> ThreadPoolExecutor:
        if self._full_writer is None:
            self._full_writer = ThreadPoolExecutor(1, thread_name_prefix="full-snapshots")
        return self._full_writer

    def _write_full(self, live: LiveModel, capture: Capture, extra: dict, started: float):
        """A publication's full snapshot, encoded at ``FULL_ENCODE_RATE`` and written at
        ``FULL_UPLOAD_RATE`` in the background (the replicas follow the deltas meanwhile;
        the log is trimmed once it is written)."""
        try:
            blob = self.encode(live, capture, extra, rate=FULL_ENCODE_RATE)
            self.write(live, capture, blob, started, rate=FULL_UPLOAD_RATE)
        except Exception as error:  # the next full snapshot (or the worker's) retries
            self.metrics.snapshot_failures.labels(live.name).inc()
            log.warning("full snapshot %d of %s failed: %s", capture.version, live.name, error)
        finally:
            live.full_lock.release()

    def _start(self, live: LiveModel, started: float) -> SnapshotMeta:
        """A full snapshot that starts a chain (with its digest), or a plain one for a model
        whose state deltas would not shrink."""
        axes = deltas.local_axes(live.estimator, live.n_features)
        if not deltas.worthwhile(live.estimator, axes):
            capture = live.snapshot_state()
            return self.write(live, capture, self.encode(live, capture), started)

        def begin(model: LiveModel):
            model.track_changes()  # what was learned so far is in this capture
            return deltas.averaging_count(model.estimator)

        capture, averaged = live.publication_state(True, begin)
        digest = deltas.RowDigest(axes)
        total = digest.reset(capture.state["arrays"])
        blob = self.encode(live, capture, {"digest": str(total)})
        try:
            meta = self.write(live, capture, blob, started)
        except BaseException:
            live.mark_all_changed()
            raise
        live.record.start_chain(deltas.Chain(capture.version, digest, averaged))
        return meta
