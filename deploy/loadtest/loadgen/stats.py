"""Latencies and outcomes of a run, and their nearest-rank percentiles."""

from __future__ import annotations

import collections
import math

PERCENTILES = (50, 90, 99)


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list (the value below which p% fall)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_summary(latencies: list[float]) -> dict:
    """Milliseconds: count, mean, p50/p90/p99 and max of latencies given in seconds."""
    values = sorted(latencies)
    out: dict = {"count": len(values)}
    if not values:
        return out | {"mean": None, "max": None} | {f"p{p}": None for p in PERCENTILES}
    out["mean"] = round(1000 * sum(values) / len(values), 4)
    for p in PERCENTILES:
        out[f"p{p}"] = round(1000 * percentile(values, p), 4)
    out["max"] = round(1000 * values[-1], 4)
    return out


class Stats:
    """Latencies and outcomes per operation, recorded by the request coroutines."""

    def __init__(self):
        self.latencies: dict[str, list[float]] = collections.defaultdict(list)
        self.ok: collections.Counter[str] = collections.Counter()
        self.sent: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        self.send_lags: list[float] = []
        self.examples = 0
        self.by_prediction_id = 0
        self.dropped = 0
        self.first_start: float | None = None
        self.last_end: float | None = None

    def record(self, op: str, due: float, end: float, error: str | None) -> None:
        self.latencies[op].append(end - due)
        self.last_end = end if self.last_end is None else max(self.last_end, end)
        if error is None:
            self.ok[op] += 1
        else:
            self.errors[f"{op}: {error}"] += 1
