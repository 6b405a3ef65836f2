"""The event loop's lag: how late a task that sleeps ``PERIOD`` seconds wakes up, and what
held the loop when it was very late.

Every request is read, parsed and answered on the event loop (the handler threads only do
the work in between): while the loop is held (a callback that runs long, another thread
holding the GIL, a garbage collection, the process descheduled) no request is even read,
and the time it waits shows in no request's latency histogram, which starts when the loop
sees the request. The lag is that wait, observed ``1 / PERIOD`` times a second into
``lorentztron_event_loop_lag_seconds``: its tail is the wait a request may meet before its
handler runs. A hold of ``stall`` seconds or more is a stall: a watchdog thread counts it
(``lorentztron_event_loop_stalls_total``) and logs where the loop thread was (its stack),
and garbage collections are timed (``lorentztron_gc_seconds``), so that a stall can be
told apart from a collection.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

log = logging.getLogger("lorentztron.loop")

#: seconds the probe sleeps between two observations
PERIOD = 0.005


class LoopLag:
    """A task observing the running loop's lag into ``histogram``, with a watchdog thread
    reporting holds of ``stall`` seconds or more into ``stalls`` once ``armed()`` (a
    process's start-up, its kernels compiled, holds its loop by design) (``start``,
    ``stop``)."""

    def __init__(
        self,
        histogram,
        stalls=None,
        stall: float = 0.0,
        armed: Callable[[], bool] = lambda: True,
        period: float = PERIOD,
    ):
        self.histogram = histogram
        self.stalls = stalls
        self.stall = stall
        self.armed = armed
        self.period = period
        #: perf_counter of the probe's last wake-up (read by the watchdog)
        self.seen = time.perf_counter()
        self._task: asyncio.Task | None = None
        self._watchdog: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        self.seen = time.perf_counter()
        self._task = asyncio.get_running_loop().create_task(self.run())
        if self.stall > 0 and self.stalls is not None:
            loop_thread = threading.get_ident()
            self._watchdog = threading.Thread(
                target=self.watch, args=(loop_thread,), name="loop-watchdog", daemon=True
            )
            self._watchdog.start()

    async def run(self) -> None:
        observe, clock, period = self.histogram.observe, time.perf_counter, self.period
        while True:
            due = clock() + period
            await asyncio.sleep(period)
            self.seen = now = clock()
            observe(max(0.0, now - due))

    def watch(self, loop_thread: int) -> None:
        """Every quarter of ``stall``: once per hold of the loop longer than ``stall``, count
        it and log the loop thread's stack. A watchdog that woke late itself was held too
        (the GIL held by one thread, a collection, the CPU): then every thread's stack."""
        tick, clock = self.stall / 4, time.perf_counter
        reported = None
        while not self._stop.wait(tick):
            woke = clock()
            seen = self.seen
            held = woke - seen - self.period
            if held < self.stall or seen == reported or not self.armed():
                continue
            reported = seen
            self.stalls.inc()
            frames = sys._current_frames()
            late = held > 2 * self.stall  # the watchdog missed its own ticks too
            threads = frames.items() if late else [(loop_thread, frames.get(loop_thread))]
            stacks = "".join(
                f"\n  thread {ident}:\n" + "".join(traceback.format_stack(frame, limit=12))
                for ident, frame in threads
                if frame is not None
            )
            log.warning(
                "event loop held %.0f ms so far%s:%s",
                1000 * held,
                " (the watchdog was held too: every thread)" if late else "",
                stacks,
            )

    async def stop(self) -> None:
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        if self._watchdog is not None:
            self._watchdog.join()
            self._watchdog = None


class CollectionTimer:
    """Times the process's garbage collections into ``histogram`` (labelled by generation)
    through ``gc.callbacks`` (``install``, ``remove``): a collection holds the GIL, so every
    thread (and the event loop) waits for it."""

    def __init__(self, histogram):
        #: each generation's child, made once (a collection may run hundreds of times a second)
        self._generations = [histogram.labels(str(g)) for g in range(3)]
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._generations[info["generation"]].observe(time.perf_counter() - self._started)

    def install(self) -> None:
        gc.callbacks.append(self)

    def remove(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
