"""In-memory history for the built-in status page (``GET /``): a ring buffer of samples
taken every ``interval`` seconds over the last ``span`` seconds.

Each sample holds, per live model, its version and progressive metrics over the recent
window, and, per API endpoint (``/v1/models...``), the request rate and the p50 / p99 /
mean latency over the interval since the previous sample, computed from the deltas of the
service's own latency histogram (the one ``/metrics`` exports), as Prometheus'
``histogram_quantile`` would. Nothing is persisted: a restart starts an empty history.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from typing import Any

from service.http.threads import cancel_and_wait

log = logging.getLogger("lorentztron.history")

#: Seconds between samples.
HISTORY_INTERVAL = 5.0
#: Seconds of history kept (the status page plots the last hour).
HISTORY_SPAN = 3600.0
#: Endpoints whose latency is recorded (health checks, metrics and the page are left out).
TRACKED_PREFIX = "/v1/models"


def bucket_quantile(q: float, bounds: list[float], counts: list[float]) -> float | None:
    """The ``q`` quantile of a histogram given its cumulative bucket ``counts`` and upper
    ``bounds`` (ascending, the last one ``+inf``), interpolated linearly inside the bucket
    (Prometheus' ``histogram_quantile``); None when the histogram is empty.

    >>> bucket_quantile(0.5, [1.0, 2.0, math.inf], [0.0, 4.0, 4.0])
    1.5
    """
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return None
    rank = q * total
    for i, (bound, count) in enumerate(zip(bounds, counts, strict=True)):
        if count >= rank:
            lower = bounds[i - 1] if i > 0 else 0.0
            below = counts[i - 1] if i > 0 else 0.0
            if math.isinf(bound):  # beyond the last finite bucket: its bound is all we know
                return lower if i > 0 else None
            inside = count - below
            if inside <= 0:
                return bound
            return lower + (bound - lower) * (rank - below) / inside
    return None


class History:
    """Samples of the live models and of the request latency, oldest first."""

    def __init__(self, metrics, interval: float = HISTORY_INTERVAL, span: float = HISTORY_SPAN):
        if interval <= 0 or span < interval:
            raise ValueError("need interval > 0 and span >= interval")
        self.metrics = metrics
        self.interval = interval
        self.span = span
        self._samples: deque[dict[str, Any]] = deque(maxlen=int(span / interval) + 1)
        #: (time, histograms) of the previous sample
        self._previous: tuple[float, dict] | None = None
        self._models = None
        self._lock = threading.Lock()
        self._task: asyncio.Task | None = None

    # -- sampling --------------------------------------------------------------------------
    def _histograms(self) -> dict[str, tuple[list[float], list[float], float, float]]:
        """Per tracked endpoint and method (``"POST /v1/models/{name}/predict"``): bounds,
        cumulative counts, sum, count."""
        buckets: dict[str, dict[float, float]] = {}
        sums: dict[str, float] = {}
        totals: dict[str, float] = {}
        for family in self.metrics.latency.collect():
            for sample in family.samples:
                endpoint = sample.labels.get("endpoint", "")
                if not endpoint.startswith(TRACKED_PREFIX):
                    continue
                endpoint = f"{sample.labels.get('method', '')} {endpoint}".lstrip()
                if sample.name.endswith("_bucket"):
                    bound = float(sample.labels["le"])
                    per_bound = buckets.setdefault(endpoint, {})
                    per_bound[bound] = per_bound.get(bound, 0.0) + sample.value
                elif sample.name.endswith("_sum"):
                    sums[endpoint] = sums.get(endpoint, 0.0) + sample.value
                elif sample.name.endswith("_count"):
                    totals[endpoint] = totals.get(endpoint, 0.0) + sample.value
        result = {}
        for endpoint, per_bound in buckets.items():
            bounds = sorted(per_bound)
            result[endpoint] = (
                bounds,
                [per_bound[b] for b in bounds],
                sums.get(endpoint, 0.0),
                totals.get(endpoint, 0.0),
            )
        return result

    def _latency(self, now: float) -> dict[str, dict[str, float | None]]:
        current = self._histograms()
        previous = self._previous
        self._previous = (now, current)
        if previous is None:  # the first sample only sets the baseline
            return {}
        then, before = previous
        elapsed = max(now - then, 1e-9)
        endpoints = {}
        for endpoint, (bounds, counts, total_sum, count) in current.items():
            # an endpoint first seen now had an empty histogram at the previous sample
            _, old_counts, old_sum, old_count = before.get(
                endpoint, (bounds, [0.0] * len(counts), 0.0, 0.0)
            )
            requests = count - old_count
            deltas = [new - old for new, old in zip(counts, old_counts, strict=True)]
            endpoints[endpoint] = {
                "rate": requests / elapsed,
                "p50": bucket_quantile(0.5, bounds, deltas),
                "p99": bucket_quantile(0.99, bounds, deltas),
                "mean": (total_sum - old_sum) / requests if requests > 0 else None,
            }
        return endpoints

    def sample(self, now: float | None = None) -> dict[str, Any]:
        """Take one sample now (the background task calls this every ``interval``)."""
        now = time.time() if now is None else now
        models = {}
        serving = self._models.serving() if self._models is not None else []
        # the models a scrape shows (``Metrics.choose``): a sample of every model of a
        # process holding 20,000 would keep gigabytes over the hour the page plots
        shown = self.metrics.exported()
        if shown is None:
            shown = self.metrics.choose(live.name for live in serving)
        for live in serving:
            if live.name not in shown:
                continue
            summary = live.champion.metrics()
            models[live.name] = {
                "version": live.version,
                "examples": summary["examples"],
                "accuracy": summary["recent_accuracy"],
                "loss": summary["recent_loss"],
                "loss_kind": summary["loss_kind"],
                "rmse": summary["recent_rmse"],
            }
        with self._lock:
            entry = {"t": now, "models": models, "endpoints": self._latency(now)}
            self._samples.append(entry)
        return entry

    def samples(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._samples)

    # -- background task -------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.sample)
            except asyncio.CancelledError:
                raise
            except Exception:  # the status page must never take the service down
                log.exception("history sample failed")
            await asyncio.sleep(self.interval)

    def start(self, models) -> None:
        """Sample the serving ``models`` from now on (called by the app's lifespan)."""
        self._models = models
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
