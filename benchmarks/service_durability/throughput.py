"""Feedback throughput with the feedback log off, on a local file (fsync per request batch, and
no fsync) and on a Redis stream (``appendfsync always``)."""

from __future__ import annotations

import contextlib
import statistics
from pathlib import Path

from benchmarks.servers import RedisServer
from benchmarks.service_durability.processes import loadgen, service


def throughput(args, tmp: Path) -> list[dict]:
    """Closed-loop single-example and bulk feedback against a fresh server per run, for each
    log configuration; medians over ``args.repeats`` runs."""
    configs = [
        ("log off", {"LORENTZTRON_FEEDBACK_LOG": "false"}, None),
        ("file log, fsync per batch", {"LORENTZTRON_LOG_FSYNC": "batch"}, None),
        ("file log, no fsync", {"LORENTZTRON_LOG_FSYNC": "none"}, None),
        ("Redis stream, appendfsync always", {}, "always"),
    ]
    rows = []
    for label, env, appendfsync in configs:
        for mode, extra in (
            ("feedback", ["--concurrency", "8"]),
            ("bulk", ["--concurrency", "2", "--batch", str(args.batch)]),
        ):
            runs = []
            for repeat in range(args.repeats):
                directory = tmp / f"{label}-{mode}-{repeat}".replace(" ", "_").replace(",", "")
                directory.mkdir()
                env_run = {**env, "LORENTZTRON_SNAPSHOT_DIR": str(directory / "snapshots")}
                with contextlib.ExitStack() as stack:
                    if appendfsync:
                        redis_server = stack.enter_context(RedisServer(directory, appendfsync))
                        redis_server.start()
                        env_run["LORENTZTRON_REDIS_URL"] = redis_server.url
                    with service(env_run).start() as server:
                        summary = loadgen(server.url, mode, args.duration, extra)
                runs.append(summary)
            rows.append(
                {
                    "log": label,
                    "mode": mode,
                    "req_per_s": statistics.median(r["throughput_rps"] for r in runs),
                    "examples_per_s": statistics.median(r["examples_per_s"] for r in runs),
                    "p50_ms": statistics.median(r["latency_ms"]["p50"] for r in runs),
                    "p99_ms": statistics.median(r["latency_ms"]["p99"] for r in runs),
                    "errors": sum(r["errors"] for r in runs),
                }
            )
            print(rows[-1], flush=True)
    return rows
