"""Garbage-collector pauses caused by the service's pending predictions.

``service.model.cache.PredictionCache`` keeps the features of recent predictions so that feedback
can name a ``prediction_id``; at its memory bound it holds hundreds of thousands of rows. This
entry fills a cache the way ``/predict`` does (batches of 1,000 rows of 30 non-zeros, after
``gc.freeze()`` as the server does after warm-up) and counts the full (generation 2) garbage
collections that run meanwhile and how long they hold the GIL: each one stalls every request
of the process. The service section of ``docs/benchmarks.md`` quotes its results.

Usage::

    python -m benchmarks.pending_cache_gc [--predictions 3000000]
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

from service.model.cache import PredictionCache


def measure(predictions: int, max_bytes: int = 256 * 1024 * 1024, nnz: int = 30) -> dict:
    rng = np.random.default_rng(0)
    rows = [
        (
            np.sort(rng.choice(1 << 18, nnz, replace=False)).astype(np.int32),
            rng.random(nnz).astype(np.float32),
        )
        for _ in range(1000)
    ]
    cache = PredictionCache(3600.0, max_bytes)
    pauses: list[float] = []
    started: list[float] = []

    def callback(phase, info):
        if phase == "start":
            started.append(time.perf_counter())
        elif info["generation"] == 2:
            pauses.append(time.perf_counter() - started[-1])

    gc.collect()
    gc.freeze()
    gc.callbacks.append(callback)
    try:
        wall = time.perf_counter()
        for _ in range(predictions // len(rows)):
            cache.put("model", rows)
        wall = time.perf_counter() - wall
    finally:
        gc.callbacks.remove(callback)
        gc.unfreeze()
    return dict(
        predictions=predictions,
        kept=len(cache),
        full_collections=len(pauses),
        max_pause_ms=1000 * max(pauses, default=0.0),
        total_pause_ms=1000 * sum(pauses),
        wall_seconds=wall,
    )


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pending_cache_gc", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--predictions", type=int, default=3_000_000, help="predictions put in the cache"
    )
    args = parser.parse_args(argv)
    result = measure(args.predictions)
    print(
        f"{result['predictions']:,} predictions ({result['kept']:,} kept at the bound) in "
        f"{result['wall_seconds']:.1f} s: {result['full_collections']} full collections, "
        f"max {result['max_pause_ms']:.0f} ms, {result['total_pause_ms']:.0f} ms in all"
    )
    return result


if __name__ == "__main__":
    main()
