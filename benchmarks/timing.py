"""The timing harness of the speed studies: one timed run, the samples of repeated runs and
their medians, rounds interleaved across the things timed, and the warm-up that keeps numba's
compilation out of the timings.

The tables quote the CPU time of the timing thread: the machine is shared, and time spent
descheduled while other work runs is not a cost of the code timed. Wall time is kept beside
it. Each figure is a median over repeats, and ratios are taken between medians of the same
run, whose rounds interleave the things compared so that load changes hit them alike.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["Samples", "Timing", "interleaved", "timed", "warm_up"]


class Timing(NamedTuple):
    """Seconds of one timed run."""

    cpu: float  #: CPU time of the timing thread
    wall: float


def timed(run: Callable[[], Any]) -> Timing:
    """Time ``run()`` with the garbage collector off (a collection is not the code's cost;
    :func:`interleaved` runs one before each round)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.thread_time()
        run()
        return Timing(time.thread_time() - cpu, time.perf_counter() - wall)
    finally:
        if enabled:
            gc.enable()


@dataclass
class Samples:
    """Seconds per example of the repeated runs of one thing timed, and their medians.

    ``error`` says why there are no samples (a peer that is missing or failed).
    """

    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    #: examples per run (the last run's)
    rows: int = 0
    error: str | None = None

    def add(self, timing: Timing, count: int) -> None:
        """Record one run of ``count`` examples."""
        self.cpu.append(timing.cpu / count)
        self.wall.append(timing.wall / count)
        self.rows = count

    @property
    def median_us(self) -> float | None:
        """Median CPU microseconds per example (None without samples)."""
        if self.error or not self.cpu:
            return None
        return statistics.median(self.cpu) * 1e6

    @property
    def median_wall_us(self) -> float | None:
        """Median wall microseconds per example (None without samples)."""
        if self.error or not self.wall:
            return None
        return statistics.median(self.wall) * 1e6

    def as_json(self) -> dict:
        median = self.median_us
        return {
            "rows": self.rows,
            "cpu_seconds_per_example": self.cpu,
            "wall_seconds_per_example": self.wall,
            "median_us": median,
            "median_wall_us": self.median_wall_us,
            "examples_per_second": None if median is None else 1e6 / median,
            "error": self.error,
        }


def interleaved(
    repeats: int, tasks: Sequence[Callable[[], None]], log: Callable[[str], None] | None = None
) -> None:
    """Run every task once per round, ``repeats`` rounds, after a full collection per round
    (only there: the prepared inputs make a full collection slow). Each task records its own
    samples."""
    for repeat in range(repeats):
        gc.collect()
        for task in tasks:
            task()
        if log is not None:
            log(f"  repeat {repeat + 1}/{repeats} done")


def warm_up(models: Iterable, rows: Sequence, labels: Sequence, batch=None) -> None:
    """Compile (or load from numba's cache) every kernel that ``learn_one``, ``predict_one``
    and ``learn_many`` reach for these inputs, on throwaway models, outside the timings.
    ``batch`` is the ``learn_many`` input of ``rows`` (default: the rows themselves)."""
    for model in models:
        for x, y in zip(rows, labels, strict=True):
            model.learn_one(x, y)
            model.predict_one(x)
        model.learn_many(rows if batch is None else batch, labels)
