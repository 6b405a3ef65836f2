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

from service.errors import APIError
from service.registry import LiveModel, PredictionCache, Registry, build_estimator
from service.schemas import CreateModel
from service.store import SnapshotError, SnapshotMeta, decode, encode

log = logging.getLogger("lorentztron.worker")

#: seconds between refreshes of the parameter-norm gauges
NORM_PERIOD = 10.0


class SnapshotWorker:
    def __init__(self, registry: Registry, store, cache: PredictionCache, metrics, settings):
        self.registry = registry
        self.store = store
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

    # -- store health ----------------------------------------------------------------------
    def check_store(self) -> bool:
        try:
            self.store.ping()
        except Exception as error:  # any client error means "unreachable"
            self.store_ok, self.store_error = False, f"{type(error).__name__}: {error}"
        else:
            self.store_ok, self.store_error = True, None
        self.metrics.store_up.set(1 if self.store_ok else 0)
        return self.store_ok

    # -- restore -----------------------------------------------------------------------------
    def restore_all(self) -> None:
        """Load every model's latest snapshot (start-up). Raises if the store is unreachable."""
        for name in self.store.models():
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
                )
                live.restore(state, version=header["version"])
                live.created_at = header.get("created_at", live.created_at)
                live.last_snapshot_version = header["version"]
                live.last_snapshot_at = header["created_at"]
                self.registry.add(live)
                self.metrics.track_model(live)
                log.info("restored model %s at version %d", name, header["version"])
            except (SnapshotError, APIError, ValueError, KeyError) as error:
                log.error("could not restore model %s: %s", name, error)
        self.restored = True

    # -- snapshots -----------------------------------------------------------------------
    def snapshot(self, live: LiveModel, force: bool = False) -> SnapshotMeta | None:
        """Write one model's snapshot now (None if unchanged and not forced)."""
        version, state = live.snapshot_state()
        if not force and version == live.last_snapshot_version:
            return None
        started = time.perf_counter()
        blob = encode(live.name, version, live.spec.model_dump(mode="json"), state)
        with self._save_lock:
            if getattr(live, "deleted", False):
                return None
            self.store.save(live.name, version, blob, self.settings.snapshot_retention)
        elapsed = time.perf_counter() - started
        live.last_snapshot_version = version
        live.last_snapshot_at = time.time()
        self.metrics.snapshot_duration.labels(live.name).observe(elapsed)
        self.metrics.snapshot_size.labels(live.name).set(len(blob))
        self.metrics.snapshot_time.labels(live.name).set(live.last_snapshot_at)
        return SnapshotMeta(live.name, version, live.last_snapshot_at, len(blob))

    def delete_snapshots(self, live: LiveModel) -> None:
        with self._save_lock:
            live.deleted = True
            self.store.delete(live.name)

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
                due = time.monotonic() >= next_snapshot or any(
                    t <= time.monotonic() for t in self._retry_at.values()
                )
                if due:
                    await asyncio.to_thread(self.check_store)
                    await asyncio.to_thread(self.snapshot_due)
                    if time.monotonic() >= next_snapshot:
                        next_snapshot = time.monotonic() + interval
                await asyncio.to_thread(self.refresh_gauges)
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must survive anything
                log.exception("worker iteration failed")

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self.restored:
            await asyncio.to_thread(self.snapshot_due, True)
