"""Background worker: snapshots, restore on start-up, cache sweeping, slow gauges.

Every ``snapshot_interval`` seconds (and on shutdown) each model whose version changed is
written to the store: its live and time-averaged states (the ``Averaged`` estimator's state
holds both). A failed write is retried with exponential backoff (1 s, 2 s, 4 s, ... capped
at the interval); failures are counted in metrics and shown by ``/readyz``; predictions and
feedback never wait for the store.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import numpy as np

from service.errors import APIError
from service.registry import LiveModel, PredictionCache, Registry, build_estimator
from service.schemas import CreateModel
from service.store import SnapshotError, SnapshotMeta, decode, encode
from service.threads import cancel_and_wait

log = logging.getLogger("lorentztron.worker")

#: seconds between refreshes of the parameter-norm gauges
NORM_PERIOD = 10.0


class SnapshotWorker:
    def __init__(
        self, registry: Registry, store, cache: PredictionCache, metrics, settings, journal=None
    ):
        self.registry = registry
        self.store = store
        #: the feedback log (service/feedback_log.py), None when disabled
        self.journal = journal
        self.cache = cache
        self.metrics = metrics
        self.settings = settings
        self.store_ok = False
        self.store_error: str | None = None
        self.restored = False
        self.failing: dict[str, str] = {}
        self._retry_at: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._save_lock = threading.Lock()
        self._task: asyncio.Task | None = None
        self._norms_due = 0.0
        #: the api role serves published versions and never writes a snapshot
        self.writes_snapshots = settings.role != "api"

    # -- store health ----------------------------------------------------------------------
    def check_store(self) -> bool:
        """Whether the snapshot store and the feedback log answer (``/readyz``, metrics)."""
        try:
            self.store.ping()
            if self.journal is not None:
                self.journal.ping()
        except Exception as error:  # any client error means "unreachable"
            self.store_ok, self.store_error = False, f"{type(error).__name__}: {error}"
        else:
            self.store_ok, self.store_error = True, None
        self.metrics.store_up.set(1 if self.store_ok else 0)
        return self.store_ok

    # -- restore -----------------------------------------------------------------------------
    def restore_all(self) -> None:
        """Load every model's latest snapshot and replay its log after it (start-up; the
        ``api`` role loads the published version only). Raises if the store is unreachable."""
        for name in self.store.models():
            self._restore(name)
        self.restored = True

    def discover_models(self) -> None:
        """Roles: add the models another process created, drop those it deleted."""
        names = set(self.store.models())
        for name in names - set(self.registry.names()):
            self._restore(name)
        for name in set(self.registry.names()) - names:
            live = self.registry.remove(name)
            self.cache.forget_model(live.uid)
            self.metrics.forget_model(name)
            log.info("model %s was deleted elsewhere", name)

    def _restore(self, name: str) -> None:
        try:
            blob = self.store.load(name)
            header, state = decode(blob)
            spec = CreateModel.model_validate(header["spec"])
            estimator = build_estimator(
                spec, self.settings.averaging_interval, self.settings.max_model_floats
            )
            live = LiveModel(
                name=name,
                spec=spec,
                estimator=estimator,
                metrics_window=self.settings.metrics_window,
                journal=self.journal,
                log_only=self.settings.role != "all",
            )
            live.restore(state, version=header["version"])
            live.created_at = header.get("created_at", live.created_at)
            live.last_snapshot_version = header["version"]
            live.last_snapshot_at = header["created_at"]
            live.log_position = header.get("log_position")
            replayed = self.replay(live) if self.settings.role != "api" else 0
            live.records_since_snapshot = replayed
            self.registry.add(live)
            self.metrics.track_model(live)
            log.info(
                "restored model %s at version %d (snapshot %d + %d log records)",
                name,
                live.version,
                header["version"],
                replayed,
            )
        except (SnapshotError, APIError, ValueError, KeyError) as error:
            log.error("could not restore model %s: %s", name, error)

    def replay(self, live: LiveModel) -> int:
        """Learn the log records after the model's position (start-up recovery)."""
        if self.journal is None:
            return 0
        started = time.perf_counter()
        count = live.replay(self.journal.read_after(live.name, live.log_position))
        self.metrics.replay_duration.observe(time.perf_counter() - started)
        self.metrics.replayed.labels(live.name).inc(count)
        return count

    def initialise(self, live: LiveModel) -> None:
        """Make a new model durable before its creation is acknowledged: drop any log left
        by a deleted model of the same name and write snapshot 0 (raises if the store or
        the log is unavailable)."""
        live.journal = self.journal
        live.log_only = self.settings.role != "all"
        with live.lock.write():
            if self.journal is not None:
                self.journal.delete(live.name)
            self._save_held(live)

    def _save_held(self, live: LiveModel) -> int:
        """Write the model's current state as its newest snapshot; the caller holds the
        writer lock (changes made outside the log are durable before they are visible)."""
        capture = live._capture()
        self._write(live, capture, self._encode(live, capture), time.perf_counter())
        return capture.version

    def _encode(self, live: LiveModel, capture) -> memoryview:
        return encode(
            live.name,
            capture.version,
            live.spec.model_dump(mode="json"),
            capture.state,
            log_position=capture.log_position,
        )

    def _write(self, live: LiveModel, capture, blob: memoryview, started: float):
        """Store an encoded capture, trim the log up to its position, and account for it;
        None if the model was deleted meanwhile."""
        with self._save_lock:
            if getattr(live, "deleted", False):
                return None
            self.store.save(live.name, capture.version, blob, self.settings.snapshot_retention)
            live.records_since_snapshot -= capture.records
            if self.journal is not None and capture.log_position is not None:
                try:
                    self.journal.trim(live.name, capture.log_position)
                except Exception as error:  # the log only grows; the next snapshot retries
                    log.warning("could not trim the log of %s: %s", live.name, error)
        live.last_snapshot_version = capture.version
        live.last_snapshot_at = time.time()
        self.metrics.snapshot_duration.labels(live.name).observe(time.perf_counter() - started)
        self.metrics.snapshot_size.labels(live.name).set(len(blob))
        self.metrics.snapshot_time.labels(live.name).set(live.last_snapshot_at)
        return SnapshotMeta(live.name, capture.version, live.last_snapshot_at, len(blob))

    def refit_due(self) -> list[LiveModel]:
        """mofm models whose reservoir saw ``refit_every`` examples since their last refit."""
        if not self.writes_snapshots:
            return []
        return [
            live
            for live in self.registry.models()
            if live.reservoir is not None and live.examples_since_refit >= live.refit_every
        ]

    def refit(self, live: LiveModel) -> bool:
        """Algorithm 1 warm-started from the live basis on the reservoir (core.mofm
        Reservoir's swap protocol): the data are read under the lock, the refit runs without
        it (the model keeps serving and learning), then under the writer lock the new model
        learns what arrived meanwhile, replaces the old one and is written as a snapshot
        before anyone sees it (a refit is not in the feedback log). False if skipped."""
        with live.lock.read():
            current = live.estimator
            X, y = live.reservoir.data()
            mark = live.reservoir.n_seen
        if X.shape[0] == 0:
            return False
        started = time.perf_counter()
        if live.batch:  # a batch model is fitted from scratch on the window
            new = current.clone()
            try:
                new.fit(X, np.asarray(y, dtype=np.float64))
            except ValueError as error:  # e.g. one class only in the window so far
                log.warning("fit of %s skipped: %s", live.name, error)
                with live.lock.write():
                    live.examples_since_refit = 0
                return False
        else:
            new = current.refit(X, y)
        with live.lock.write():
            if live.estimator is not current:  # restored or replaced meanwhile
                return False
            try:
                X_new, y_new = live.reservoir.since(mark)
            except ValueError as error:  # more arrived than the window holds
                log.warning("refit of %s skipped: %s", live.name, error)
                live.examples_since_refit = 0
                return False
            if X_new.shape[0] and not live.batch:  # a batch model takes them next fit
                new.learn_many(X_new, y_new)
            live.estimator = new
            live.version += 1
            live.refits += 1
            live.examples_since_refit = 0
            try:
                self._save_held(live)
            except Exception:
                live.estimator = current
                live.version -= 1
                live.refits -= 1
                raise
        log.info(
            "refitted %s on %d examples in %.2f s (version %d)",
            live.name,
            X.shape[0],
            time.perf_counter() - started,
            live.version,
        )
        return True

    def restore_version(self, live: LiveModel, state: dict) -> int:
        """Replace the model's state by an older snapshot's, durably: the restored state is
        written as the newest snapshot (with the current log position) before the writer
        lock is released, so recovery never replays later feedback onto the wrong base."""
        with live.lock.write():
            previous = live._capture()
            live.load_state(state)
            live.version += 1
            try:
                return self._save_held(live)
            except Exception:
                live.load_state(previous.state)
                live.version = previous.version
                raise

    # -- snapshots -----------------------------------------------------------------------
    def snapshot(self, live: LiveModel, force: bool = False) -> SnapshotMeta | None:
        """Write one model's snapshot now (None if unchanged and not forced)."""
        if not force and live.version == live.last_snapshot_version:
            return None  # unchanged: no copy of the state at all
        with live.snapshot_lock:  # the capture's buffers are reused by the next capture
            capture = live.snapshot_state()
            if not force and capture.version == live.last_snapshot_version:
                return None
            started = time.perf_counter()
            blob = self._encode(live, capture)
        return self._write(live, capture, blob, started)

    def delete_snapshots(self, live: LiveModel) -> None:
        """Delete the model's snapshots, then its log (a crash in between leaves a log
        without a snapshot, which is ignored and dropped when the name is reused)."""
        with self._save_lock:
            live.deleted = True
            self.store.delete(live.name)
            if self.journal is not None:
                self.journal.delete(live.name)

    def snapshot_due(self, final: bool = False) -> None:
        """Snapshot every changed model whose backoff allows it."""
        now = time.monotonic()
        for live in self.registry.models():
            if not final and self._retry_at.get(live.name, 0.0) > now:
                continue
            try:
                self.snapshot(live)
            except Exception as error:
                failures = self._failures.get(live.name, 0) + 1
                self._failures[live.name] = failures
                delay = min(self.settings.snapshot_interval, 2.0 ** (failures - 1))
                self._retry_at[live.name] = now + delay
                self.failing[live.name] = f"{type(error).__name__}: {error}"
                self.metrics.snapshot_failures.labels(live.name).inc()
                log.warning(
                    "snapshot of %s failed (%d in a row, retry in %.0f s): %s",
                    live.name,
                    failures,
                    delay,
                    error,
                )
            else:
                self._failures.pop(live.name, None)
                self._retry_at.pop(live.name, None)
                self.failing.pop(live.name, None)

    def log_full(self) -> bool:
        """A model's log passed ``log_snapshot_records`` records since its last snapshot:
        snapshot early, so that recovery stays short and the log can be trimmed."""
        limit = self.settings.log_snapshot_records
        return any(live.records_since_snapshot >= limit for live in self.registry.models())

    def refresh_gauges(self) -> None:
        """Gauges that cost a pass over the parameters (norms) are refreshed at most every
        ``NORM_PERIOD`` seconds; the cheap ones on every tick."""
        self.metrics.observe_cache(self.cache)
        refresh_norms = time.monotonic() >= self._norms_due
        if refresh_norms:
            self._norms_due = time.monotonic() + NORM_PERIOD
        for live in self.registry.models():
            if refresh_norms:
                self.metrics.parameter_norm.labels(live.name).set(live.parameter_norm())
            self.metrics.observe_model(live)

    # -- loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        interval = self.settings.snapshot_interval
        next_snapshot = time.monotonic() + interval
        while True:
            await asyncio.sleep(min(1.0, interval))
            try:
                if not self.restored:
                    if await asyncio.to_thread(self.check_store):
                        await asyncio.to_thread(self.restore_all)
                    continue
                self.cache.sweep()
                if not self.writes_snapshots:  # api replicas never write snapshots
                    await asyncio.to_thread(self.refresh_gauges)
                    continue
                due = (
                    time.monotonic() >= next_snapshot
                    or any(t <= time.monotonic() for t in self._retry_at.values())
                    or self.log_full()
                )
                if due:
                    await asyncio.to_thread(self.check_store)
                    await asyncio.to_thread(self.snapshot_due)
                    if time.monotonic() >= next_snapshot:
                        next_snapshot = time.monotonic() + interval
                for live in self.refit_due():
                    await asyncio.to_thread(self.refit, live)
                await asyncio.to_thread(self.refresh_gauges)
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must survive anything
                log.exception("worker iteration failed")

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        if self.restored and self.writes_snapshots:
            await asyncio.to_thread(self.snapshot_due, True)
