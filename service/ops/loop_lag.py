"""The event loop's lag: how late a task that sleeps ``PERIOD`` seconds wakes up.

Every request is read, parsed and answered on the event loop (the handler threads only do
the work in between): while the loop is held (a callback that runs long, another thread
holding the GIL, the process descheduled) no request is even read, and the time it waits
shows in no request's latency histogram, which starts when the loop sees the request.
The lag is that wait, observed ``1 / PERIOD`` times a second into
``lorentztron_event_loop_lag_seconds``: its tail is the wait a request may meet before its
handler runs.
"""

from __future__ import annotations

import asyncio
import time

#: seconds the probe sleeps between two observations
PERIOD = 0.005


class LoopLag:
    """A task observing the running loop's lag into ``histogram`` (``start``, ``stop``)."""

    def __init__(self, histogram, period: float = PERIOD):
        self.histogram = histogram
        self.period = period
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        observe, clock, period = self.histogram.observe, time.perf_counter, self.period
        while True:
            due = clock() + period
            await asyncio.sleep(period)
            observe(max(0.0, clock() - due))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
