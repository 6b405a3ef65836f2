"""Background worker: recovery at start-up, periodic snapshots, refits, pending deletions,
cache sweeping and slow gauges.

Every ``snapshot_interval`` seconds (and on shutdown) each model whose version changed is
written to the store: its live and time-averaged states (the ``Averaged`` estimator's state
holds both) and the service's part (``service.durability.capture``). A failed write is retried with
exponential backoff (1 s, 2 s, 4 s, ... capped at the interval); failures are counted in
metrics and shown by ``/readyz``; predictions and feedback never wait for the store.
"""

from __future__ import annotations

import asyncio
import logging
import time

from service.exceptions import NotFound
from service.http.threads import cancel_and_wait
from service.model import changes
from service.model.models import Models

log = logging.getLogger("lorentztron.worker")

#: seconds between refreshes of the parameter-norm gauges
NORM_PERIOD = 10.0


class SnapshotWorker:
    def __init__(self, models: Models, metrics, settings):
        self.models = models
        self.store = models.store
        self.metrics = metrics
        self.settings = settings
        self.store_ok = False
        self.store_error: str | None = None
        self.restored = False
        self.failing: dict[str, str] = {}
        self._retry_at: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._task: asyncio.Task | None = None
        self._norms_due = 0.0

    # -- store health ----------------------------------------------------------------------
    def check_store(self) -> bool:
        """Whether the snapshot store and the feedback log answer (``/readyz``, metrics)."""
        try:
            self.store.ping()
            if self.models.feedback_log is not None:
                self.models.feedback_log.ping()
        except Exception as error:  # any client error means "unreachable"
            self.store_ok, self.store_error = False, f"{type(error).__name__}: {error}"
        else:
            self.store_ok, self.store_error = True, None
        self.metrics.store_up.set(1 if self.store_ok else 0)
        return self.store_ok

    def restore_all(self) -> None:
        """Recover every model (start-up); raises if the store is unreachable."""
        self.models.recover()
        self.restored = True

    # -- snapshots -----------------------------------------------------------------------
    def snapshot_due(self, final: bool = False) -> None:
        """Snapshot every changed model whose backoff allows it."""
        now = time.monotonic()
        for live in self.models.serving():
            if not final and self._retry_at.get(live.name, 0.0) > now:
                continue
            try:
                with self.models.use(live.name):
                    # (a learner's chained model: written by its next publication)
                    self.models.writer.snapshot(live, wait=final)
            except NotFound:  # deleted meanwhile
                continue
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
        """A model's log passed ``log_snapshot_records`` records since its last snapshot,
        and ``log_snapshot_ratio`` times the model's size in bytes: snapshot early, so that
        recovery stays short and the log can be trimmed (a large model's snapshot is not
        written to trim a few records' worth of log)."""
        records = self.settings.log_snapshot_records
        ratio = self.settings.log_snapshot_ratio
        return any(
            live.record.records_since_snapshot >= records
            and live.record.log_bytes_since_snapshot >= ratio * 8 * live.plan.floats
            for live in self.models.serving()
        )

    def refit_due(self) -> list:
        """Models whose window saw ``reservoir_refit_every`` examples since their last refit."""
        if not self.models.writes_snapshots:
            return []
        return [live for live in self.models.serving() if live.champion.refits_due]

    def refit(self, live) -> bool:
        """Refit one model (``changes.refit``), written as a snapshot before it serves."""
        started = time.perf_counter()
        try:
            with self.models.use(live.name):
                done = changes.refit(live, lambda c: self.models.writer.write(live, c))
        except NotFound:
            return False
        if done:
            log.info(
                "refitted %s in %.2f s (version %d)",
                live.name,
                time.perf_counter() - started,
                live.version,
            )
        return done

    def refresh_gauges(self) -> None:
        """Gauges that cost a pass over the parameters (norms) are refreshed at most every
        ``NORM_PERIOD`` seconds; the cheap ones on every tick."""
        self.metrics.observe_cache(self.models.cache)
        refresh_norms = time.monotonic() >= self._norms_due
        if refresh_norms:
            self._norms_due = time.monotonic() + NORM_PERIOD
        serving = self.models.serving()
        exported = self.metrics.exported()
        if exported is None:
            exported = self.metrics.choose(live.name for live in serving)
        for live in serving:
            if live.name not in exported:  # (a scrape refreshes what it shows)
                continue
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
                self.models.cache.sweep()
                if not self.models.writes_snapshots:  # api replicas never write snapshots
                    await asyncio.to_thread(self.refresh_gauges)
                    continue
                due = (
                    time.monotonic() >= next_snapshot
                    or any(t <= time.monotonic() for t in self._retry_at.values())
                    or self.log_full()
                )
                if due:
                    if await asyncio.to_thread(self.check_store):
                        await asyncio.to_thread(self.models.finish_deletions)
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
        if self.restored and self.models.writes_snapshots:
            await asyncio.to_thread(self.snapshot_due, True)
