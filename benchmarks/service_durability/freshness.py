"""Freshness: the delay from an acknowledged feedback to an api replica serving it, from the
replica's own ``lorentztron_freshness_seconds`` histogram."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx

from benchmarks.service_durability.processes import learner_and_replica, loadgen

FRESHNESS_MODELS = (
    ("DoS rank 16 over 2^18 hashed features (134 MB state)", 16, 1 << 18),
    ("DoS rank 8 over 2^14 hashed features (4 MB state)", 8, 1 << 14),
)


def histogram(metrics: str, name: str) -> tuple[list[tuple[float, float]], float, float]:
    """(cumulative buckets (le, count), sum, count) of a histogram in a /metrics text."""
    buckets = [
        (float(le), float(count))
        for le, count in re.findall(rf'{name}_bucket{{le="([^"]+)",model="m"}} (\S+)', metrics)
    ]
    total = float(re.search(rf'{name}_sum{{model="m"}} (\S+)', metrics)[1])
    count = float(re.search(rf'{name}_count{{model="m"}} (\S+)', metrics)[1])
    return buckets, total, count


def quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The upper bound of the bucket holding quantile q (what Prometheus interpolates in)."""
    total = buckets[-1][1]
    for le, count in buckets:
        if count >= q * total:
            return le
    return float("inf")


def freshness(args, tmp: Path) -> list[dict]:
    """Delay from an acknowledged feedback to an api replica serving it: one learner, one api
    replica, feedback at ``--feedback-rate`` examples/s (open loop) on the replica, the
    default publication interval; the replica's own freshness histogram."""
    rows = []
    for label, rank, n_features in FRESHNESS_MODELS:
        directory = tmp / f"freshness-{rank}-{n_features}"
        directory.mkdir()
        with learner_and_replica(directory, rank, n_features) as (_, api_url, _):
            summary = loadgen(
                api_url,
                "feedback",
                args.freshness_duration,
                [
                    "--rate",
                    str(args.feedback_rate),
                    "--model",
                    "m",
                    "--keep-model",
                    "--rank",
                    str(rank),
                    "--n-features",
                    str(n_features),
                ],  # fmt: skip
            )
            time.sleep(3)  # the last publications land
            buckets, total, count = histogram(
                httpx.get(f"{api_url}/metrics").text, "lorentztron_freshness_seconds"
            )
        rows.append(
            {
                "model": label,
                "feedback_per_s": summary["throughput_rps"],
                "versions_loaded": count,
                "mean_s": total / count if count else None,
                "p50_le_s": quantile(buckets, 0.5) if count else None,
                "p99_le_s": quantile(buckets, 0.99) if count else None,
                "errors": summary["errors"],
                "error_kinds": summary["error_kinds"],
                "p99_ms": summary["latency_ms"]["p99"],
            }
        )
        print(rows[-1], flush=True)
    return rows
